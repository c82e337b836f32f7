package beaver

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// The arithmetic kinds: elementwise triples, square pairs, truncation pairs
// and shared random bits, each sized by N.
const (
	// KindTriple: shares of n elementwise triples c = a·b (Typed.Triples).
	KindTriple Kind = 1
	// KindSquare: shares of n square pairs (a, a²) (Typed.SquarePairs).
	KindSquare Kind = 2
	// KindTrunc: n truncation pairs for dividing by 2^FracBits
	// (Typed.TruncPairs).
	KindTrunc Kind = 8
	// KindBitPair: n shared random bits with their multiplication pairs
	// (Typed.BitPairs).
	KindBitPair Kind = 9
)

// Triple is one party's share of elementwise triples c = a·b (or, from
// MatTriples, matrix triples C = A·B, batched).
type Triple struct {
	A, B, C []uint64
}

// SquarePair is one party's share of n square pairs: a uniform A and A² (A2),
// for squaring a shared value with one opening instead of two.
type SquarePair struct {
	A, A2 []uint64
}

// TruncPair is one party's share of the material of exact probabilistic
// truncation by 2^f: for a uniformly random ring word r, shares of r, of its
// top bit r>>63 (as the ring word 0 or 1) and of (r mod 2^63) >> f.
type TruncPair struct {
	R, MSB, LowShifted []uint64
}

// BitPair is one party's share of n uniformly random bits r, held both as XOR
// shares packed 64 per word (Packed, ⌈n/64⌉ words; bit i of word j is element
// 64j+i) and as arithmetic shares (Arith, n words each 0 or 1 in sum), plus an
// arithmetic Beaver pair for multiplying by r: a uniform A and shares of A·r
// (AR), used by the one-round multiplexer.
type BitPair struct {
	Packed []uint64
	Arith  []uint64
	A, AR  []uint64
}

func (m Material) triple() Triple { return Triple{A: m.Parts[0], B: m.Parts[1], C: m.Parts[2]} }

func (m Material) square() SquarePair { return SquarePair{A: m.Parts[0], A2: m.Parts[1]} }

func (m Material) truncPair() TruncPair {
	return TruncPair{R: m.Parts[0], MSB: m.Parts[1], LowShifted: m.Parts[2]}
}

func (m Material) bitPair() BitPair {
	return BitPair{Packed: m.Parts[0], Arith: m.Parts[1], A: m.Parts[2], AR: m.Parts[3]}
}

// Triples returns shares of n elementwise triples c = a·b.
func (t Typed) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	return drawAs(ctx, t, Request{Kind: KindTriple, Stream: stream, N: n}, Material.triple)
}

// SquarePairs returns shares of n square pairs (a, a²).
func (t Typed) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	return drawAs(ctx, t, Request{Kind: KindSquare, Stream: stream, N: n}, Material.square)
}

// TruncPairs returns n truncation pairs for dividing by 2^fracBits.
func (t Typed) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	return drawAs(ctx, t, Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits}, Material.truncPair)
}

// BitPairs returns n random shared bits with their multiplication pairs.
func (t Typed) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	return drawAs(ctx, t, Request{Kind: KindBitPair, Stream: stream, N: n}, Material.bitPair)
}

func init() {
	Register(Correlation{
		Kind: KindTriple, Name: "triple", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(3, 2), Parts: nWords(3, 3), DealtTo: toParty1, Dealt: dealtN(1),
		Deal:     dealTriple,
		Assemble: assembleTriple,
		Verify:   verifyTriple,
		Sample:   Request{Kind: KindTriple, N: 5},
	})
	Register(Correlation{
		Kind: KindSquare, Name: "square", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(2, 1), Parts: nWords(2, 2), DealtTo: toParty1, Dealt: dealtN(1),
		Deal:     dealSquare,
		Assemble: assembleSquare,
		Verify:   verifySquare,
		Sample:   Request{Kind: KindSquare, N: 5},
	})
	Register(Correlation{
		Kind: KindTrunc, Name: "trunc", Fields: FieldN | FieldFracBits, Dims: dimsN, Check: checkTrunc,
		Format: func(r Request) string { return fmt.Sprintf("n=%d f=%d", r.N, r.FracBits) },
		Local:  nWords(3, 1), Parts: nWords(3, 3), DealtTo: toParty1, Dealt: dealtN(2),
		Deal:     dealTrunc,
		Assemble: assembleTrunc,
		Verify:   verifyTrunc,
		Sample:   Request{Kind: KindTrunc, N: 5, FracBits: 16},
	})
	Register(Correlation{
		Kind: KindBitPair, Name: "bitpair", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: bitPairLocal, Parts: bitPairParts, DealtTo: toParty1, Dealt: dealtN(2),
		Deal:     dealBitPair,
		Assemble: assembleBitPair,
		Verify:   verifyBitPair,
		Sample:   Request{Kind: KindBitPair, N: 70},
	})
}

// Triple: party 0 expands A0, B0, C0, party 1 A1, B1 and gets
// C1 = (A0+A1)·(B0+B1) − C0 from the dealer.

func dealTriple(r Request, x Expansion, out [2][]uint64) error {
	a0, b0, c0, a1, b1 := x.Local[0][0], x.Local[0][1], x.Local[0][2], x.Local[1][0], x.Local[1][1]
	for i := range out[1] {
		out[1][i] = (a0[i]+a1[i])*(b0[i]+b1[i]) - c0[i]
	}
	return nil
}

// assembleTriple is the Assemble of the triples (KindTriple, KindMatTriple,
// KindAND): party 1's C is its dealer words.
func assembleTriple(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return local
	}
	return [][]uint64{local[0], local[1], dealt}
}

func verifyTriple(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := range m0[0] {
		if (m0[0][i]+m1[0][i])*(m0[1][i]+m1[1][i]) != m0[2][i]+m1[2][i] {
			return fmt.Errorf("%v: c ≠ a·b at %d", r, i)
		}
	}
	return nil
}

// Square: party 0 expands A0, S0, party 1 A1 and gets S1 = (A0+A1)² − S0.

func dealSquare(r Request, x Expansion, out [2][]uint64) error {
	a0, s0, a1 := x.Local[0][0], x.Local[0][1], x.Local[1][0]
	for i := range out[1] {
		a := a0[i] + a1[i]
		out[1][i] = a*a - s0[i]
	}
	return nil
}

func assembleSquare(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return local
	}
	return [][]uint64{local[0], dealt}
}

func verifySquare(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := range m0[0] {
		a := m0[0][i] + m1[0][i]
		if a*a != m0[1][i]+m1[1][i] {
			return fmt.Errorf("%v: a² wrong at %d", r, i)
		}
	}
	return nil
}

// Trunc: party 0 expands R0, MSB0, Low0, party 1 R1 and gets
// MSB1 = r>>63 − MSB0 and Low1 = (r mod 2^63)>>f − Low0 (n words each).

func checkTrunc(r Request) error {
	if r.FracBits < 1 || r.FracBits > 62 {
		return fmt.Errorf("fracBits %d outside [1, 62]", r.FracBits)
	}
	return nil
}

func dealTrunc(r Request, x Expansion, out [2][]uint64) error {
	n, f := r.N, r.FracBits
	r0, msb0, low0, r1 := x.Local[0][0], x.Local[0][1], x.Local[0][2], x.Local[1][0]
	for i := 0; i < n; i++ {
		v := r0[i] + r1[i]
		out[1][i] = v>>63 - msb0[i]
		out[1][n+i] = (v<<1)>>(1+f) - low0[i]
	}
	return nil
}

func assembleTrunc(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return local
	}
	n := r.N
	return [][]uint64{local[0], dealt[:n:n], dealt[n:]}
}

func verifyTrunc(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := range m0[0] {
		v := m0[0][i] + m1[0][i]
		if m0[1][i]+m1[1][i] != v>>63 || m0[2][i]+m1[2][i] != (v<<1)>>(1+r.FracBits) {
			return fmt.Errorf("%v: wrong pair at %d", r, i)
		}
	}
	return nil
}

// BitPair: party 0 expands Packed0, Arith0, A0, AR0, party 1 Packed1, A1
// and gets Arith1 = bit − Arith0 and AR1 = (A0+A1)·bit − AR0 (n words
// each), bit i being bit i of Packed0 ⊕ Packed1. The packed parts' bits past
// n are zero.

func bitPairLocal(r Request, party int) []int {
	w, n := share.PackedWords(r.N), r.N
	if party == 0 {
		return []int{w, n, n, n} // Packed, Arith, A, AR
	}
	return []int{w, n} // Packed, A
}

func bitPairParts(r Request, _ int) []int {
	return []int{share.PackedWords(r.N), r.N, r.N, r.N}
}

func dealBitPair(r Request, x Expansion, out [2][]uint64) error {
	n := r.N
	pk0, ar0, a0, x0 := x.Local[0][0], x.Local[0][1], x.Local[0][2], x.Local[0][3]
	pk1, a1 := x.Local[1][0], x.Local[1][1]
	for i := 0; i < n; i++ {
		bit := ((pk0[i/64] ^ pk1[i/64]) >> (i % 64)) & 1
		out[1][i] = bit - ar0[i]
		out[1][n+i] = (a0[i]+a1[i])*bit - x0[i]
	}
	return nil
}

func assembleBitPair(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	n := r.N
	share.MaskTail(local[0], n)
	if party == 0 {
		return local
	}
	return [][]uint64{local[0], dealt[:n:n], local[1], dealt[n:]}
}

func verifyBitPair(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := 0; i < r.N; i++ {
		bit := ((m0[0][i/64] ^ m1[0][i/64]) >> (i % 64)) & 1
		if m0[1][i]+m1[1][i] != bit || m0[3][i]+m1[3][i] != (m0[2][i]+m1[2][i])*bit {
			return fmt.Errorf("%v: wrong pair at %d", r, i)
		}
	}
	return nil
}

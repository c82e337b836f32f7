package beaver

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// The arithmetic kinds: elementwise triples, square pairs, square-and-product
// quadruples, wrap pairs (for truncation) and shared random bits, each sized
// by N, and row-bit triples (a bit of party 1's per row times a row of party
// 0's), sized by M and N.
const (
	// KindTriple: shares of n elementwise triples c = a·b (Typed.Triples).
	KindTriple Kind = 1
	// KindSquare: shares of n square pairs (a, a²) (Typed.SquarePairs).
	KindSquare Kind = 2
	// KindSquareProduct: shares of n square-and-product quadruples
	// (a, a², b, a·b) (Typed.SquareProducts).
	KindSquareProduct Kind = 12
	// Kind 8 was the truncation pair (r, r>>63, (r mod 2^63)>>f) of the
	// opening-based truncation that wrap pairs replaced, and 10 the weight
	// mask when it was a request kind: retired, never reuse them.

	// KindWrap: n wrap pairs for truncating by 2^FracBits
	// (Typed.WrapPairs).
	KindWrap Kind = 11
	// KindBitPair: n shared random bits with their multiplication pairs
	// (Typed.BitPairs).
	KindBitPair Kind = 9
	// KindRowBitTriple: shares of r_i·A_i for M random bits r of party 1
	// and M random rows A_i of N words of party 0 (Typed.RowBitTriples).
	KindRowBitTriple Kind = 13
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

// SquareProduct is one party's share of n square-and-product quadruples:
// uniform A and B with A² (A2) and A·B (AB), a square pair and a triple that
// share their A. It squares a shared x and later multiplies the same x by
// another shared y with x − A opened once for both products
// (protocol.Session.SquareKeep): per element one word each party sends
// fewer than a square pair and a triple, which open x − A twice.
type SquareProduct struct {
	A, A2, B, AB []uint64
}

// WrapPair is one party's part of n wrap pairs for truncation by 2^f: party
// 0 holds uniformly random bits u (U, packed 64 per word, ⌈n/64⌉ words; V is
// nil), party 1 uniformly random bits v (V; U is nil), and both hold
// additive shares Z of u·v·2^(64−f) (n words, each a multiple of 2^(64−f)).
// The truncation computes the wrap bit of its shares' sum from one such
// product of a bit of each party (protocol.TruncBy).
type WrapPair struct {
	U, V, Z []uint64
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

// RowBitTriple is one party's part of M row-bit triples of width N: party 1
// holds uniformly random bits r (R, packed 64 per word, ⌈M/64⌉ words; A is
// nil), party 0 uniformly random rows A (M×N, row-major; R is nil), and both
// hold additive shares C (M×N) of r⊙A, row i of A times bit i of r. With it
// a product x ⊙ m of a shared x by a bit per row that party 1 knows in the
// clear costs party 1 one bit per row (protocol.MulPrivateRowBits).
type RowBitTriple struct {
	A, R, C []uint64
}

func (m Material) triple() Triple { return Triple{A: m.Parts[0], B: m.Parts[1], C: m.Parts[2]} }

func (m Material) square() SquarePair { return SquarePair{A: m.Parts[0], A2: m.Parts[1]} }

func (m Material) squareProduct() SquareProduct {
	return SquareProduct{A: m.Parts[0], A2: m.Parts[1], B: m.Parts[2], AB: m.Parts[3]}
}

func (m Material) wrapPair() WrapPair {
	return WrapPair{U: m.Parts[0], V: m.Parts[1], Z: m.Parts[2]}
}

func (m Material) bitPair() BitPair {
	return BitPair{Packed: m.Parts[0], Arith: m.Parts[1], A: m.Parts[2], AR: m.Parts[3]}
}

func (m Material) rowBitTriple() RowBitTriple {
	return RowBitTriple{A: m.Parts[0], R: m.Parts[1], C: m.Parts[2]}
}

// Triples returns shares of n elementwise triples c = a·b.
func (t Typed) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	return drawAs(ctx, t, Request{Kind: KindTriple, Stream: stream, N: n}, Material.triple)
}

// SquarePairs returns shares of n square pairs (a, a²).
func (t Typed) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	return drawAs(ctx, t, Request{Kind: KindSquare, Stream: stream, N: n}, Material.square)
}

// SquareProducts returns shares of n square-and-product quadruples
// (a, a², b, a·b).
func (t Typed) SquareProducts(ctx context.Context, stream uint32, n int) (SquareProduct, error) {
	return t.SquareProductsRing(ctx, stream, 64, n)
}

// SquareProductsRing returns shares of n square-and-product quadruples in
// the ring Z_2^ringBits (Request.RingBits; 0 or 64 is SquareProducts): a,
// a² mod 2^ringBits, b, a·b mod 2^ringBits, every word below 2^ringBits
// whatever the provider returned (a provider may hand out quadruples mod
// 2^64, which reduce to quadruples mod 2^ringBits; see MatTriplesRing).
func (t Typed) SquareProductsRing(ctx context.Context, stream uint32, ringBits uint, n int) (SquareProduct, error) {
	return drawRingAs(ctx, t, Request{Kind: KindSquareProduct, Stream: stream, N: n}, ringBits, Material.squareProduct)
}

// WrapPairs returns n wrap pairs for truncating by 2^fracBits.
func (t Typed) WrapPairs(ctx context.Context, stream uint32, n int, fracBits uint) (WrapPair, error) {
	return drawAs(ctx, t, Request{Kind: KindWrap, Stream: stream, N: n, FracBits: fracBits}, Material.wrapPair)
}

// BitPairs returns n random shared bits with their multiplication pairs.
func (t Typed) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	return drawAs(ctx, t, Request{Kind: KindBitPair, Stream: stream, N: n}, Material.bitPair)
}

// RowBitTriples returns this party's part of rows row-bit triples of width
// words (see RowBitTriple).
func (t Typed) RowBitTriples(ctx context.Context, stream uint32, rows, width int) (RowBitTriple, error) {
	return drawAs(ctx, t, Request{Kind: KindRowBitTriple, Stream: stream, M: rows, N: width}, Material.rowBitTriple)
}

func init() {
	Register(Correlation{
		Kind: KindTriple, Name: "triple", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(3, 2), Parts: nWords(3, 3), DealtTo: toParty1, Dealt: dealtN(1, 1),
		Deal:     dealTriple,
		Assemble: assembleTriple,
		Verify:   verifyTriple,
		Sample:   Request{Kind: KindTriple, N: 5},
	})
	Register(Correlation{
		Kind: KindSquare, Name: "square", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(2, 1), Parts: nWords(2, 2), DealtTo: toParty1, Dealt: dealtN(1, 1),
		Deal:     dealSquare,
		Assemble: assembleSquare,
		Verify:   verifySquare,
		Sample:   Request{Kind: KindSquare, N: 5},
	})
	Register(Correlation{
		Kind: KindSquareProduct, Name: "squareproduct", Fields: FieldN | FieldRingBits, Dims: dimsN, Format: formatN,
		Local: nWords(4, 2), Parts: nWords(4, 4), DealtTo: toParty1, Dealt: dealtN(1, 2),
		Deal:     dealSquareProduct,
		Assemble: assembleSquareProduct,
		Verify:   verifySquareProduct,
		Sample:   Request{Kind: KindSquareProduct, N: 5},
	})
	Register(Correlation{
		Kind: KindWrap, Name: "wrap", Fields: FieldN | FieldFracBits, Dims: dimsN, Check: checkWrap,
		Format: func(r Request) string { return fmt.Sprintf("n=%d f=%d", r.N, r.FracBits) },
		Local:  wrapLocal, Parts: wrapParts, DealtTo: toParty1, Dealt: wrapDealt,
		Deal:     dealWrap,
		Assemble: assembleWrap,
		Verify:   verifyWrap,
		Sample:   Request{Kind: KindWrap, N: 70, FracBits: 16},
	})
	Register(Correlation{
		Kind: KindBitPair, Name: "bitpair", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: bitPairLocal, Parts: bitPairParts, DealtTo: toParty0, Dealt: dealtN(0, 2),
		Deal:     dealBitPair,
		Assemble: assembleBitPair,
		Verify:   verifyBitPair,
		Sample:   Request{Kind: KindBitPair, N: 70},
	})
	Register(Correlation{
		Kind: KindRowBitTriple, Name: "rowbittriple", Fields: FieldM | FieldN,
		Dims:   func(r Request) [][]int { return [][]int{{r.M, r.N}} },
		Format: func(r Request) string { return fmt.Sprintf("%d×%d", r.M, r.N) },
		Local:  rowBitLocal, Parts: rowBitParts, DealtTo: toParty1,
		Dealt:    func(r Request, party int) int { return party * r.M * r.N },
		Deal:     dealRowBit,
		Assemble: assembleRowBit,
		Verify:   verifyRowBit,
		Sample:   Request{Kind: KindRowBitTriple, M: 70, N: 3},
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

// SquareProduct: party 0 expands A0, S0, B0, C0, party 1 A1, B1 and gets
// S1 = (A0+A1)² − S0 and C1 = (A0+A1)·(B0+B1) − C0 (2n words: S1, then
// C1), as a square pair's and a triple's dealer words.

func dealSquareProduct(r Request, x Expansion, out [2][]uint64) error {
	n := r.N
	a0, s0, b0, c0 := x.Local[0][0], x.Local[0][1], x.Local[0][2], x.Local[0][3]
	a1, b1 := x.Local[1][0], x.Local[1][1]
	for i := range n {
		a := a0[i] + a1[i]
		out[1][i] = a*a - s0[i]
		out[1][n+i] = a*(b0[i]+b1[i]) - c0[i]
	}
	return nil
}

func assembleSquareProduct(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return local
	}
	n := r.N
	return [][]uint64{local[0], dealt[:n:n], local[1], dealt[n:]}
}

// verifySquareProduct checks a² and a·b, modulo 2^r.Ring() (only the low
// bits of a narrow ring's material are defined).
func verifySquareProduct(r Request, _ []uint64, m0, m1 [][]uint64) error {
	mask := r.ringMask()
	for i := range m0[0] {
		a, b := m0[0][i]+m1[0][i], m0[2][i]+m1[2][i]
		if (a*a-m0[1][i]-m1[1][i])&mask != 0 {
			return fmt.Errorf("%v: a² wrong at %d", r, i)
		}
		if (a*b-m0[3][i]-m1[3][i])&mask != 0 {
			return fmt.Errorf("%v: a·b wrong at %d", r, i)
		}
	}
	return nil
}

// Wrap: party 0 expands U (packed bits) and Z0, party 1 V (packed bits)
// and gets Z1 = u·v·2^(64−f) − Z0 as f-bit fields packed into ⌈n·f/64⌉
// words (2 bytes a pair at f = 16): Z0 keeps only its top f bits, so both
// shares are multiples of 2^(64−f) and only their top f bits travel. The
// packed parts' bits past n are zero.

func checkWrap(r Request) error {
	if r.FracBits < 1 || r.FracBits > 62 {
		return fmt.Errorf("fracBits %d outside [1, 62]", r.FracBits)
	}
	return nil
}

func wrapLocal(r Request, party int) []int {
	if party == 0 {
		return []int{share.PackedWords(r.N), r.N} // U, Z0
	}
	return []int{share.PackedWords(r.N)} // V
}

func wrapParts(r Request, party int) []int {
	if party == 0 {
		return []int{share.PackedWords(r.N), 0, r.N}
	}
	return []int{0, share.PackedWords(r.N), r.N}
}

func wrapDealt(r Request, party int) int {
	if party == 0 {
		return 0
	}
	return share.FieldWords(r.N, r.FracBits)
}

// wrapTop returns the bits of a share of a wrap pair's product that matter:
// z with its low 64−f bits cleared.
func wrapTop(z uint64, f uint) uint64 { return z &^ (uint64(1)<<(64-f) - 1) }

func dealWrap(r Request, x Expansion, out [2][]uint64) error {
	n, f := r.N, r.FracBits
	u, z0, v := x.Local[0][0], x.Local[0][1], x.Local[1][0]
	z1 := make([]uint64, n)
	for i := range z1 {
		uv := (u[i/64] & v[i/64]) >> (i % 64) & 1
		z1[i] = (uv<<(64-f) - wrapTop(z0[i], f)) >> (64 - f)
	}
	share.PackFields(out[1], z1, f)
	return nil
}

func assembleWrap(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	n, f := r.N, r.FracBits
	share.MaskTail(local[0], n)
	if party == 0 {
		z := local[1]
		for i := range z {
			z[i] = wrapTop(z[i], f)
		}
		return [][]uint64{local[0], nil, z}
	}
	z := make([]uint64, n)
	share.UnpackFields(z, dealt, f)
	for i := range z {
		z[i] <<= 64 - f
	}
	return [][]uint64{nil, local[0], z}
}

func verifyWrap(r Request, _ []uint64, m0, m1 [][]uint64) error {
	f := r.FracBits
	for i := 0; i < r.N; i++ {
		uv := (m0[0][i/64] & m1[1][i/64]) >> (i % 64) & 1
		if m0[2][i]+m1[2][i] != uv<<(64-f) {
			return fmt.Errorf("%v: z ≠ u·v·2^(64−f) at %d", r, i)
		}
	}
	if r.N%64 != 0 && (m0[0][r.N/64]>>(r.N%64) != 0 || m1[1][r.N/64]>>(r.N%64) != 0) {
		return fmt.Errorf("%v: bits past n are set", r)
	}
	return nil
}

// BitPair: party 1 expands Packed1, Arith1, A1, AR1, party 0 Packed0, A0
// and gets Arith0 = bit − Arith1 and AR0 = (A0+A1)·bit − AR1 (n words
// each), bit i being bit i of Packed0 ⊕ Packed1. The packed parts' bits past
// n are zero.

func bitPairLocal(r Request, party int) []int {
	w, n := share.PackedWords(r.N), r.N
	if party == 1 {
		return []int{w, n, n, n} // Packed, Arith, A, AR
	}
	return []int{w, n} // Packed, A
}

func bitPairParts(r Request, _ int) []int {
	return []int{share.PackedWords(r.N), r.N, r.N, r.N}
}

func dealBitPair(r Request, x Expansion, out [2][]uint64) error {
	n := r.N
	pk0, a0 := x.Local[0][0], x.Local[0][1]
	pk1, ar1, a1, x1 := x.Local[1][0], x.Local[1][1], x.Local[1][2], x.Local[1][3]
	for i := 0; i < n; i++ {
		bit := ((pk0[i/64] ^ pk1[i/64]) >> (i % 64)) & 1
		out[0][i] = bit - ar1[i]
		out[0][n+i] = (a0[i]+a1[i])*bit - x1[i]
	}
	return nil
}

func assembleBitPair(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	n := r.N
	share.MaskTail(local[0], n)
	if party == 1 {
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

// RowBitTriple: party 0 expands A and C0 (M·N words each), party 1 its
// packed bits R and gets C1 = r⊙A − C0 (M·N words), bit i of r scaling row
// i of A. The packed part's bits past M are zero.

func rowBitLocal(r Request, party int) []int {
	if party == 0 {
		return []int{r.M * r.N, r.M * r.N} // A, C0
	}
	return []int{share.PackedWords(r.M)} // R
}

func rowBitParts(r Request, party int) []int {
	if party == 0 {
		return []int{r.M * r.N, 0, r.M * r.N}
	}
	return []int{0, share.PackedWords(r.M), r.M * r.N}
}

// rowBit returns bit i of the packed bits r.
func rowBit(r []uint64, i int) uint64 { return r[i/64] >> (i % 64) & 1 }

func dealRowBit(r Request, x Expansion, out [2][]uint64) error {
	a, c0, bits := x.Local[0][0], x.Local[0][1], x.Local[1][0]
	for i := 0; i < r.M; i++ {
		b := -rowBit(bits, i) // all ones for a 1
		row := i * r.N
		for j := row; j < row+r.N; j++ {
			out[1][j] = a[j]&b - c0[j]
		}
	}
	return nil
}

func assembleRowBit(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return [][]uint64{local[0], nil, local[1]}
	}
	share.MaskTail(local[0], r.M)
	return [][]uint64{nil, local[0], dealt}
}

func verifyRowBit(r Request, _ []uint64, m0, m1 [][]uint64) error {
	a, bits := m0[0], m1[1]
	for i := 0; i < r.M; i++ {
		b := rowBit(bits, i)
		for j := i * r.N; j < (i+1)*r.N; j++ {
			if m0[2][j]+m1[2][j] != a[j]*b {
				return fmt.Errorf("%v: c ≠ r·a at row %d", r, i)
			}
		}
	}
	if r.M%64 != 0 && bits[r.M/64]>>(r.M%64) != 0 {
		return fmt.Errorf("%v: bits past m are set", r)
	}
	return nil
}

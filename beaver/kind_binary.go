package beaver

import (
	"context"
	"fmt"
)

// The binary kinds: bit-packed AND triples (XOR shares, 64 per word), sized
// by N words.
const (
	// KindAND: XOR shares of N·64 AND triples (Typed.ANDTriples).
	KindAND Kind = 6
	// KindCrossAND: AND triples of a bit of party 0 and a bit of party 1
	// (Typed.CrossANDTriples).
	KindCrossAND Kind = 7
)

// BitTriple is one party's XOR share of bit-packed AND triples: 64 triples per
// word, c = a AND b bitwise.
type BitTriple struct {
	A, B, C []uint64
}

func (m Material) bitTriple() BitTriple {
	return BitTriple{A: m.Parts[0], B: m.Parts[1], C: m.Parts[2]}
}

// ANDTriples returns XOR shares of words×64 AND triples, bit-packed.
func (t Typed) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	return drawAs(ctx, t, Request{Kind: KindAND, Stream: stream, N: words}, Material.bitTriple)
}

// CrossANDTriples returns AND triples for multiplying a bit held in the
// clear by party 0 with a bit held in the clear by party 1 at one bit of
// traffic per party: party 0 gets A = u (its B is nil), party 1 gets B = v
// (its A is nil), and both get XOR shares C of u AND v.
func (t Typed) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	return drawAs(ctx, t, Request{Kind: KindCrossAND, Stream: stream, N: words}, Material.bitTriple)
}

func init() {
	Register(Correlation{
		Kind: KindAND, Name: "and", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(3, 2), Parts: nWords(3, 3), DealtTo: toParty1, Dealt: dealtN(1, 1),
		Deal:     dealAND,
		Assemble: assembleTriple,
		Verify:   verifyAND,
		Sample:   Request{Kind: KindAND, N: 3},
	})
	Register(Correlation{
		Kind: KindCrossAND, Name: "crossand", Fields: FieldN, Dims: dimsN, Format: formatN,
		Local: nWords(1, 2), Parts: crossANDParts, DealtTo: toParty0, Dealt: dealtN(0, 1),
		Deal:     dealCrossAND,
		Assemble: assembleCrossAND,
		Verify:   verifyCrossAND,
		Sample:   Request{Kind: KindCrossAND, N: 3},
	})
}

// AND: party 0 expands A0, B0, C0, party 1 A1, B1 and gets
// C1 = ((A0⊕A1) ∧ (B0⊕B1)) ⊕ C0.

func dealAND(r Request, x Expansion, out [2][]uint64) error {
	a0, b0, c0, a1, b1 := x.Local[0][0], x.Local[0][1], x.Local[0][2], x.Local[1][0], x.Local[1][1]
	for i := range out[1] {
		out[1][i] = ((a0[i] ^ a1[i]) & (b0[i] ^ b1[i])) ^ c0[i]
	}
	return nil
}

func verifyAND(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := range m0[0] {
		if (m0[0][i]^m1[0][i])&(m0[1][i]^m1[1][i]) != m0[2][i]^m1[2][i] {
			return fmt.Errorf("%v: c ≠ a∧b at word %d", r, i)
		}
	}
	return nil
}

// CrossAND: party 0 expands u (its A), party 1 v (its B) and C1, and party
// 0 gets C0 = (u ∧ v) ⊕ C1.

func crossANDParts(r Request, party int) []int {
	if party == 0 {
		return []int{r.N, 0, r.N}
	}
	return []int{0, r.N, r.N}
}

func dealCrossAND(r Request, x Expansion, out [2][]uint64) error {
	u, v, c1 := x.Local[0][0], x.Local[1][0], x.Local[1][1]
	for i := range out[0] {
		out[0][i] = (u[i] & v[i]) ^ c1[i]
	}
	return nil
}

func assembleCrossAND(r Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
	if party == 0 {
		return [][]uint64{local[0], nil, dealt}
	}
	return [][]uint64{nil, local[0], local[1]}
}

func verifyCrossAND(r Request, _ []uint64, m0, m1 [][]uint64) error {
	for i := range m0[0] {
		if m0[0][i]&m1[1][i] != m0[2][i]^m1[2][i] {
			return fmt.Errorf("%v: c ≠ u∧v at word %d", r, i)
		}
	}
	return nil
}

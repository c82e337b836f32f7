package ot

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// The matrix kinds' generator: batched matrix triples. The weight triples
// masked by the model owner's weight mask (Gen.WeightTriples,
// Gen.WeightVectorTriples) are the VectorOLE WeightMaskGenerator's.
func init() {
	Register(beaver.KindMatTriple, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		t, err := g.MatTriplesRing(ctx, it.Ring(), it.Batch, it.M, it.K, it.N)
		return parts(t.A, t.B, t.C), err
	})
}

// maskWords reduces every word of x to its bits in mask.
func maskWords(x []uint64, mask uint64) {
	for i := range x {
		x[i] &= mask
	}
}

// transposeBatch returns the batch of m×n matrices in x transposed (n×m).
func transposeBatch(x []uint64, batch, m, n int) []uint64 {
	out := make([]uint64, len(x))
	for b := range batch {
		src := x[b*m*n : (b+1)*m*n]
		dst := out[b*m*n : (b+1)*m*n]
		for i := range m {
			for j := range n {
				dst[j*m+i] = src[i*n+j]
			}
		}
	}
	return out
}

// MatTriples returns shares of batch matrix triples: A batch×m×k, B
// batch×k×n, C = A·B. The cross products A0·B1 and A1·B0 are Gilboa products
// with the smaller operand's entries as the choices: 64·batch·min(m,n)·k OTs
// and 260·batch·m·k·n bytes of corrections per direction.
func (g *Gen) MatTriples(ctx context.Context, batch, m, k, n int) (beaver.Triple, error) {
	return g.MatTriplesRing(ctx, 64, batch, m, k, n)
}

// MatTriplesRing is MatTriples in the ring Z_2^ℓ, ℓ = ringBits
// (2 ≤ ℓ ≤ 64; 0 also means 64): A and B are drawn mod 2^ℓ (the same
// generator words as MatTriples, masked), C = A·B mod 2^ℓ, every word below
// 2^ℓ. Gilboa's product bit t then needs only ℓ − t bits of correction for
// t < ℓ and none for t ≥ ℓ (its term 2^t·y_t·x vanishes mod 2^ℓ), so the
// corrections are ℓ(ℓ+1)/2 bits per multiply-add and direction (1,485 at
// ℓ = 54) instead of 2,080. Still 64 OTs per choosing entry: the extension
// engine's groups are 64 wide (the OTs of bits t ≥ ℓ carry no correction
// and choose with 0). At ℓ = 64 the call is MatTriples, byte for byte.
func (g *Gen) MatTriplesRing(ctx context.Context, ringBits uint, batch, m, k, n int) (beaver.Triple, error) {
	if ringBits == 0 {
		ringBits = 64
	}
	if ringBits < 2 || ringBits > 64 {
		return beaver.Triple{}, fmt.Errorf("ot: mat triples mod 2^%d: need 2 ≤ ℓ ≤ 64", ringBits)
	}
	bits := &gilboaRing[ringBits]
	na, err := checkSize("mat triples A", batch, m, k)
	if err != nil {
		return beaver.Triple{}, err
	}
	nb, err := checkSize("mat triples B", batch, k, n)
	if err != nil {
		return beaver.Triple{}, err
	}
	if _, err := checkSize("mat triples C", batch, m, n); err != nil {
		return beaver.Triple{}, err
	}
	if err := g.begin(ctx, "mat triples"); err != nil {
		return beaver.Triple{}, err
	}
	a, b := g.draw(na), g.draw(nb)
	ringMask := ^uint64(0) >> (64 - ringBits)
	if ringBits < 64 {
		maskWords(a, ringMask)
		maskWords(b, ringMask)
	}
	c := make([]uint64, batch*m*n)
	if err := share.BatchMatMulInto(c, a, b, batch, m, k, n); err != nil {
		return beaver.Triple{}, g.end("mat triples", err)
	}
	var ro, so []uint64
	if m <= n {
		s := matShape{batch, m, k, n}
		ro, so, err = g.crossMatBits(ctx, s, a, s, b, bits)
	} else {
		// (A·B)ᵀ = Bᵀ·Aᵀ: the B holder chooses, fewer OTs.
		s := matShape{batch, n, k, m}
		ro, so, err = g.crossMatBits(ctx, s, transposeBatch(b, batch, k, n), s, transposeBatch(a, batch, m, k), bits)
		if err == nil {
			ro, so = transposeBatch(ro, batch, n, m), transposeBatch(so, batch, n, m)
		}
	}
	if err != nil {
		return beaver.Triple{}, g.end("mat triples", err)
	}
	for i := range c {
		c[i] = (c[i] + ro[i] + so[i]) & ringMask
	}
	return beaver.Triple{A: a, B: b, C: c}, g.end("mat triples", nil)
}

// WeightTriples returns this party's part of a weight-mask correlation for a
// product X·W with X m×k and W k×n: party 0 passes its mask B (k×n, reused
// for every call on one weight matrix), party 1 passes nil and receives a
// fresh uniform mask A (m×k). Both get shares C of A·B. When m ≤ n, party 1
// is the OT receiver choosing with the bits of A (64·m·k OTs) and party 0
// the sender whose correlation for entry (i, l) is row l of B; otherwise the
// roles swap (choices from B, 64·n·k OTs). Corrections: 260·m·k·n bytes.
func (g *Gen) WeightTriples(ctx context.Context, B []uint64, m, k, n int) (beaver.WeightTriple, error) {
	na, err := checkSize("weight triples A", m, k)
	if err != nil {
		return beaver.WeightTriple{}, err
	}
	if _, err := checkSize("weight triples B", k, n); err != nil {
		return beaver.WeightTriple{}, err
	}
	if _, err := checkSize("weight triples C", m, n); err != nil {
		return beaver.WeightTriple{}, err
	}
	switch {
	case g.party == 0 && len(B) != k*n:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight triples: mask B has %d words, want %d×%d", len(B), k, n)
	case g.party == 1 && B != nil:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight triples: party 1 passed a weight mask; only party 0 holds one")
	}
	if err := g.begin(ctx, "weight triples"); err != nil {
		return beaver.WeightTriple{}, err
	}
	var A []uint64
	if g.party == 1 {
		A = g.draw(na)
	}
	var out []uint64
	var none matShape
	if m <= n {
		s := matShape{1, m, k, n}
		if g.party == 1 {
			out, _, err = g.crossMat(ctx, s, A, none, nil)
		} else {
			_, out, err = g.crossMat(ctx, none, nil, s, B)
		}
	} else {
		s := matShape{1, n, k, m}
		if g.party == 0 {
			out, _, err = g.crossMat(ctx, s, transposeBatch(B, 1, k, n), none, nil)
		} else {
			_, out, err = g.crossMat(ctx, none, nil, s, transposeBatch(A, 1, m, k))
		}
		if err == nil {
			out = transposeBatch(out, 1, n, m)
		}
	}
	if err != nil {
		return beaver.WeightTriple{}, g.end("weight triples", err)
	}
	return beaver.WeightTriple{A: A, C: out}, g.end("weight triples", nil)
}

// WeightVectorTriples returns this party's part of the correlation for an
// elementwise product X ⊙ γ, X m×n, γ 1×n of party 0 broadcast over rows:
// party 0 passes its mask b (n words), party 1 passes nil and receives A
// (m×n); both get shares C of A ⊙ b. Party 0 chooses with the bits of b (64·n
// OTs), party 1's correlation for b_j is column j of A; corrections
// 260·m·n bytes.
func (g *Gen) WeightVectorTriples(ctx context.Context, b []uint64, m, n int) (beaver.WeightTriple, error) {
	na, err := checkSize("weight vector triples", m, n)
	if err != nil {
		return beaver.WeightTriple{}, err
	}
	switch {
	case g.party == 0 && len(b) != n:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight vector triples: mask has %d words, want %d", len(b), n)
	case g.party == 1 && b != nil:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight vector triples: party 1 passed a weight mask; only party 0 holds one")
	}
	if err := g.begin(ctx, "weight vector triples"); err != nil {
		return beaver.WeightTriple{}, err
	}
	var A, out []uint64
	var none matShape
	s := matShape{n, 1, 1, m} // batch j: b_j (1×1) · column j of A (1×m)
	if g.party == 0 {
		out, _, err = g.crossMat(ctx, s, b, none, nil)
	} else {
		A = g.draw(na)
		_, out, err = g.crossMat(ctx, none, nil, s, transposeBatch(A, 1, m, n))
	}
	if err != nil {
		return beaver.WeightTriple{}, g.end("weight vector triples", err)
	}
	return beaver.WeightTriple{A: A, C: transposeBatch(out, 1, n, m)}, g.end("weight vector triples", nil)
}

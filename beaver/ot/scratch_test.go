package ot

import (
	"fmt"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// TestScratchHandBack runs the kinds whose calls hand their buffers back
// (runCOT's rounds, rotBits) with every handed-back buffer overwritten at
// once (poisonScratch) and chunks small enough for several rounds a call,
// twice over so that the second pass runs on recycled memory: a buffer
// handed back while still in use (a round's rows, the message being sent,
// the corrections of the chunk before) would corrupt the results.
func TestScratchHandBack(t *testing.T) {
	old := chunkTarget
	chunkTarget = 64 << 10 // about 10 rounds for the larger calls below
	poisonScratch = true
	t.Cleanup(func() { chunkTarget, poisonScratch = old, false })
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for pass := range 2 {
		m0, m1 := both(t, func() (beaver.Triple, error) { return g0.MatTriples(ctx, 2, 3, 64, 5) },
			func() (beaver.Triple, error) { return g1.MatTriples(ctx, 2, 3, 64, 5) })
		if fmt.Sprint(add(m0.C, m1.C)) != fmt.Sprint(matmul(add(m0.A, m1.A), add(m0.B, m1.B), 2, 3, 64, 5)) {
			t.Fatalf("pass %d: matrix triples: C ≠ A·B", pass)
		}
		n := 3000
		q0, q1 := both(t, func() (beaver.SquareProduct, error) { return g0.SquareProducts(ctx, n) },
			func() (beaver.SquareProduct, error) { return g1.SquareProducts(ctx, n) })
		a, a2, b, ab := add(q0.A, q1.A), add(q0.A2, q1.A2), add(q0.B, q1.B), add(q0.AB, q1.AB)
		for i := range n {
			if a2[i] != a[i]*a[i] || ab[i] != a[i]*b[i] {
				t.Fatalf("pass %d: square product %d wrong", pass, i)
			}
		}
		words := 700
		x0, x1 := both(t, func() (beaver.BitTriple, error) { return g0.ANDTriples(ctx, words) },
			func() (beaver.BitTriple, error) { return g1.ANDTriples(ctx, words) })
		xa, xb, xc := xor(x0.A, x1.A), xor(x0.B, x1.B), xor(x0.C, x1.C)
		for i := range words {
			if xc[i] != xa[i]&xb[i] {
				t.Fatalf("pass %d: AND triple word %d: c ≠ a∧b", pass, i)
			}
		}
		c0, c1 := both(t, func() (beaver.BitTriple, error) { return g0.CrossANDTriples(ctx, words) },
			func() (beaver.BitTriple, error) { return g1.CrossANDTriples(ctx, words) })
		cc := xor(c0.C, c1.C)
		for i := range words {
			if cc[i] != c0.A[i]&c1.B[i] {
				t.Fatalf("pass %d: cross AND word %d: c ≠ u∧v", pass, i)
			}
		}
		w0, w1 := both(t, func() (beaver.WrapPair, error) { return g0.WrapPairs(ctx, 64*words, 16) },
			func() (beaver.WrapPair, error) { return g1.WrapPairs(ctx, 64*words, 16) })
		z := add(w0.Z, w1.Z)
		for i := range 64 * words {
			if uv := (w0.U[i/64] & w1.V[i/64]) >> (i % 64) & 1; z[i] != uv<<48 {
				t.Fatalf("pass %d: wrap pair %d wrong", pass, i)
			}
		}
	}
}

// TestScratchBlocks checks getBlocks and putBlocks: the length asked for
// and room for it, whether or not the size is one share recycles, and a
// hand-back of every size (the zero length included) without a panic.
func TestScratchBlocks(t *testing.T) {
	for _, n := range []int{0, 1, 511, 4096, 5000} {
		b := getBlocks(n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("getBlocks(%d): len %d cap %d", n, len(b), cap(b))
		}
		for i := range b {
			b[i] = Block{uint64(i), ^uint64(i)}
		}
		putBlocks(b)
	}
}

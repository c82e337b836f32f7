package ot

import (
	"fmt"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// TestMatTriplesRing: triples mod 2^ℓ are correct for several widths and
// shapes (both choosing layouts, m ≤ n and m > n), every word is below 2^ℓ,
// and each party sends exactly the extension of today's call plus
// ℓ(ℓ+1)/2 correction bits per multiply-add, in 2 rounds.
func TestMatTriplesRing(t *testing.T) {
	ctx := testCtx(t)
	// One session pair; each case a fresh pair of generators on it (the
	// cost checked below is a generator's own).
	s0, s1, c0, c1 := setupPair(t)
	id := uint32(1)
	for _, ring := range []uint{2, 17, 40, 54, 63, 64, 0} {
		for _, d := range [][4]int{{1, 1, 1, 1}, {2, 3, 4, 5}, {1, 5, 2, 3}, {3, 4, 7, 4}, {1, 2, 64, 9}} {
			id++
			t.Run(fmt.Sprintf("ℓ=%d/%v", ring, d), func(t *testing.T) {
				batch, m, k, n := d[0], d[1], d[2], d[3]
				g0, g1, _, _ := genPairOn(t, s0, s1, c0, c1, id)
				t0, t1 := both(t, func() (beaver.Triple, error) { return g0.MatTriplesRing(ctx, ring, batch, m, k, n) },
					func() (beaver.Triple, error) { return g1.MatTriplesRing(ctx, ring, batch, m, k, n) })
				l := ring
				if l == 0 {
					l = 64
				}
				mask := ^uint64(0) >> (64 - l)
				for _, tr := range []beaver.Triple{t0, t1} {
					for _, part := range [][]uint64{tr.A, tr.B, tr.C} {
						for _, v := range part {
							if v&^mask != 0 {
								t.Fatalf("word %#x above 2^%d", v, l)
							}
						}
					}
				}
				got := add(t0.C, t1.C)
				want := matmul(add(t0.A, t1.A), add(t0.B, t1.B), batch, m, k, n)
				for i := range got {
					if (got[i]-want[i])&mask != 0 {
						t.Fatalf("C[%d] ≠ (A·B)[%d] mod 2^%d", i, i, l)
					}
				}
				// The cost: min(m, n)·k·batch choosing entries of 64 OTs each
				// way, one chunk; corrections over the other dimension.
				groups, width := batch*min(m, n)*k, max(m, n)
				ots := (64*groups + 127) &^ 127
				ext := int64(treeWords + (ots+checkOTs)*4/8 + checkWords)
				corr := int64((groups*width*int(l*(l+1)/2) + 63) / 64)
				for _, g := range []*Gen{g0, g1} {
					st := g.Stats()
					if st.WordsSent != ext+corr || st.WordsRecv != ext+corr || st.Rounds != 2 || st.ExtensionWords != ext {
						t.Fatalf("party %d: %+v, want %d words each way (%d extension, %d corrections) in 2 rounds", g.party, st, ext+corr, ext, corr)
					}
				}
			})
		}
	}
}

// TestGilboaRingTables: the width-64 table is today's, so MatTriplesRing at
// 64 (or 0) runs MatTriples' very engine calls; a narrower table sums to
// ℓ(ℓ+1)/2 with nothing at or above ℓ.
func TestGilboaRingTables(t *testing.T) {
	if gilboaRing[64] != gilboaBits {
		t.Fatal("gilboaRing[64] differs from gilboaBits")
	}
	for l := 2; l <= 64; l++ {
		sum := 0
		for tt, b := range gilboaRing[l] {
			sum += int(b)
			if tt >= l && b != 0 {
				t.Fatalf("ℓ=%d: bit %d has %d correction bits, want 0", l, tt, b)
			}
		}
		if sum != l*(l+1)/2 {
			t.Fatalf("ℓ=%d: %d correction bits, want %d", l, sum, l*(l+1)/2)
		}
	}
	if gilboaRing[54] == gilboaBits || (cotDir{width: 1, bits: &gilboaRing[54]}).bitsPerGroup() != 1485 {
		t.Fatal("ℓ = 54 is not 1,485 bits a product")
	}
}

// TestMatTriplesRingBadWidth: widths outside 2..64 are refused before any
// traffic.
func TestMatTriplesRingBadWidth(t *testing.T) {
	g0, _, _, _ := genPair(t)
	for _, l := range []uint{1, 65, 200} {
		if _, err := g0.MatTriplesRing(testCtx(t), l, 1, 1, 1, 1); err == nil {
			t.Fatalf("ℓ = %d accepted", l)
		}
	}
	if st := g0.Stats(); st.WordsSent != 0 {
		t.Fatalf("refused calls sent %d words", st.WordsSent)
	}
}

// TestBitIOZeroWidth: zero-width values neither write nor read anything,
// between values of other widths.
func TestBitIOZeroWidth(t *testing.T) {
	widths := []uint8{0, 5, 0, 64, 0, 0, 63, 1, 0}
	vals := []uint64{0, 17, 0, 0xdeadbeefcafef00d, 0, 0, 1<<62 | 3, 1, 0}
	var w bitWriter
	for i, L := range widths {
		w.write(vals[i]&mask(L), L)
	}
	buf := w.flush()
	if len(buf) != (5+64+63+1+63)/64 {
		t.Fatalf("%d words, want %d", len(buf), (5+64+63+1+63)/64)
	}
	r := bitReader{buf: buf}
	for i, L := range widths {
		if got := r.read(L); got != vals[i]&mask(L) {
			t.Fatalf("value %d (%d bits): %#x, want %#x", i, L, got, vals[i]&mask(L))
		}
	}
	if !r.ok() || mask(0) != 0 {
		t.Fatal("reader over, or mask(0) ≠ 0")
	}
}

// TestSquareProductsRing: quadruples mod 2^ℓ are correct (a² and a·b mod
// 2^ℓ) for several widths and sizes, every word is below 2^ℓ, and each
// party sends exactly the extension of SquareProducts' call plus ℓ(ℓ+1)/2
// correction bits per word of correlation (party 0 two, party 1 one), in 2
// rounds: 1,275 bits at ℓ = 50 where SquareProducts sends 2,080. The
// extension: 64 OTs per element each way, 4 bytes of SoftSpokenOT matrix an
// OT plus the first call's trees and the consistency check's checkOTs extra
// OTs with its x and t. ℓ = 0 runs SquareProducts itself (ℓ = 64).
func TestSquareProductsRing(t *testing.T) {
	ctx := testCtx(t)
	for _, ring := range []uint{2, 17, 41, 50, 63, 64, 0} {
		for _, n := range []int{1, 63, 65, 1000} {
			t.Run(fmt.Sprintf("ℓ=%d/n=%d", ring, n), func(t *testing.T) {
				g0, g1, _, _ := genPair(t)
				draw := func(g *Gen) (beaver.SquareProduct, error) {
					if ring == 0 { // the 64-bit API, SquareProducts
						return g.SquareProducts(ctx, n)
					}
					return g.SquareProductsRing(ctx, ring, n)
				}
				p0, p1 := both(t, func() (beaver.SquareProduct, error) { return draw(g0) },
					func() (beaver.SquareProduct, error) { return draw(g1) })
				l := ring
				if l == 0 {
					l = 64
				}
				mask := ^uint64(0) >> (64 - l)
				for _, q := range []beaver.SquareProduct{p0, p1} {
					for _, part := range [][]uint64{q.A, q.A2, q.B, q.AB} {
						if len(part) != n {
							t.Fatalf("part of %d words, want %d", len(part), n)
						}
						for _, v := range part {
							if v&^mask != 0 {
								t.Fatalf("word %#x above 2^%d", v, l)
							}
						}
					}
				}
				a, a2, b, ab := add(p0.A, p1.A), add(p0.A2, p1.A2), add(p0.B, p1.B), add(p0.AB, p1.AB)
				for i := range n {
					if (a2[i]-a[i]*a[i])&mask != 0 || (ab[i]-a[i]*b[i])&mask != 0 {
						t.Fatalf("quadruple %d: a² or a·b wrong mod 2^%d", i, l)
					}
				}
				ots := (64*n + 127) &^ 127 // the extension's OTs, in blocks of 128
				ext := int64(treeWords + (ots+checkOTs)*4/8 + checkWords)
				bits := n * int(l*(l+1)/2)
				sent := [2]int64{ext + int64((2*bits+63)/64), ext + int64((bits+63)/64)}
				for p, g := range []*Gen{g0, g1} {
					st := g.Stats()
					if st.WordsSent != sent[p] || st.WordsRecv != sent[1-p] || st.Rounds != 2 || st.ExtensionWords != ext {
						t.Fatalf("party %d: %+v, want %d words sent (%d of them extension), %d received in 2 rounds", p, st, sent[p], ext, sent[1-p])
					}
				}
			})
		}
	}
}

// TestSquareProductsRingBadWidth: widths outside 2..64 are refused before
// any traffic.
func TestSquareProductsRingBadWidth(t *testing.T) {
	g0, _, _, _ := genPair(t)
	for _, l := range []uint{1, 65, 200} {
		if _, err := g0.SquareProductsRing(testCtx(t), l, 4); err == nil {
			t.Fatalf("ℓ = %d accepted", l)
		}
	}
	if st := g0.Stats(); st.WordsSent != 0 {
		t.Fatalf("refused calls sent %d words", st.WordsSent)
	}
}

// TestProviderRingBits: the provider honours Request.RingBits for the
// square-and-product quadruples and the matrix triples: the material is
// correct mod 2^ℓ with every word below 2^ℓ, and against the same request
// at 64 bits each party sends exactly the correction words the narrower
// ring saves (the extension is the same).
func TestProviderRingBits(t *testing.T) {
	p0, p1, _ := providerPair(t)
	ctx := testCtx(t)
	const n = 200
	draw := func(r beaver.Request) (m [2]beaver.Material, sent [2]int64) {
		before := [2]int64{p0.OTStats().WordsSent, p1.OTStats().WordsSent}
		m[0], m[1] = both(t, func() (beaver.Material, error) { return p0.Material(ctx, r) },
			func() (beaver.Material, error) { return p1.Material(ctx, r) })
		return m, [2]int64{p0.OTStats().WordsSent - before[0], p1.OTStats().WordsSent - before[1]}
	}
	sq := beaver.Request{Kind: beaver.KindSquareProduct, Stream: 3, N: n}
	draw(sq) // the stream's first call also sends the extension's trees
	_, wide := draw(sq)
	sq.RingBits = 50
	m, narrow := draw(sq)
	c, _ := beaver.Lookup(beaver.KindSquareProduct)
	if err := c.Verify(sq, nil, m[0].Parts, m[1].Parts); err != nil {
		t.Fatal(err)
	}
	for p := range 2 {
		for _, part := range m[p].Parts {
			for _, v := range part {
				if v>>50 != 0 {
					t.Fatalf("party %d: word %#x above 2^50", p, v)
				}
			}
		}
	}
	corr := func(words, bits int) int64 { return int64((words*n*bits + 63) / 64) }
	if want := [2]int64{corr(2, 2080) - corr(2, 1275), corr(1, 2080) - corr(1, 1275)}; wide[0]-narrow[0] != want[0] || wide[1]-narrow[1] != want[1] {
		t.Fatalf("square products mod 2^50 saved %d/%d words, want %d/%d", wide[0]-narrow[0], wide[1]-narrow[1], want[0], want[1])
	}
	mt := beaver.Request{Kind: beaver.KindMatTriple, Stream: 4, Batch: 1, M: 2, K: 8, N: 3, RingBits: 54}
	m, _ = draw(mt)
	if c, _ := beaver.Lookup(beaver.KindMatTriple); c.Verify(mt, nil, m[0].Parts, m[1].Parts) != nil {
		t.Fatal("matrix triple mod 2^54 wrong")
	}
}

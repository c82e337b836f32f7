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

package ot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// View tests. In every generator, what a party receives is the peer's
// extension message (softspoken.go: the tree messages e_c = K_c ⊕ M(m^{1−c}),
// padded by the masks of seeds the party did not get or uniform sums of
// tree nodes, then the corrections c_b = u_b ⊕ r, padded by the PRG bits of
// the leaf the party cannot compute) and corrections d = H(q)+x−H(q⊕Δ)
// (padded by the hash of the row the receiver cannot compute): uniform
// whatever the peer's secrets r and x. The simulator of a party's view is therefore "uniform
// words of the public lengths". The test fixes the peer's secrets to the
// most structured values (all zeros, all ones: a leak of r or x, or of any
// function of them, would then be a constant or heavily biased pattern) and
// checks with a chi-square test on the 256 byte values that the received
// stream is uniform, and that the two views are not equal. The last word of
// each message is left out: packed corrections pad it with zero bits.

// chiSquareBytes returns the chi-square statistic of the byte histogram of
// msgs (last word of each left out) against the uniform distribution, and
// the number of bytes.
func chiSquareBytes(msgs [][]uint64) (float64, int) {
	var h [256]float64
	n := 0
	for _, m := range msgs {
		if len(m) > 0 {
			m = m[:len(m)-1]
		}
		for _, w := range m {
			for k := range 8 {
				h[byte(w>>(8*k))]++
				n++
			}
		}
	}
	if n == 0 {
		return 0, 0
	}
	e := float64(n) / 256
	x := 0.0
	for _, c := range h {
		x += (c - e) * (c - e) / e
	}
	return x, n
}

// chiLimit is the rejection threshold for 255 degrees of freedom: mean 255,
// standard deviation 22.6, so 420 is beyond 7 standard deviations (a false
// alarm rate below 1e-9 per check).
const chiLimit = 420

// TestChiSquareDetectsLeak is the control: the statistic rejects a stream in
// which 1/16 of the words are a constant (what an unmasked word of a zero
// secret among padded ones would look like) and accepts a uniform one.
func TestChiSquareDetectsLeak(t *testing.T) {
	s0, _, _, _ := setupPair(t)
	g, err := s0.NewGen(nil, 99)
	if err != nil {
		t.Fatal(err)
	}
	u := g.prg.Words(1 << 14)
	if x, _ := chiSquareBytes([][]uint64{u}); x > chiLimit {
		t.Fatalf("uniform words rejected: χ² = %.0f", x)
	}
	for i := 0; i < len(u); i += 16 {
		u[i] = 0
	}
	if x, _ := chiSquareBytes([][]uint64{u}); x <= chiLimit {
		t.Fatalf("leaky words accepted: χ² = %.0f", x)
	}
}

func constWords(c uint64) func(int) []uint64 {
	return func(n int) []uint64 {
		w := make([]uint64, n)
		for i := range w {
			w[i] = c
		}
		return w
	}
}

// TestViews runs each generator with the peer's secrets fixed and checks the
// viewer's received stream against the uniform simulator.
func TestViews(t *testing.T) {
	if testing.Short() {
		t.Skip("52 base-OT setups (two minutes under -race on 2 cores): go test without -short runs it")
	}
	type op func(ctx context.Context, g *Gen, peerSecret uint64) error
	weightB := func(g *Gen, c uint64, n int) []uint64 {
		if g.party == 0 {
			return constWords(c)(n)
		}
		return nil
	}
	cases := []struct {
		name string
		f    op
	}{
		{"Triples", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.Triples(ctx, 256); return err }},
		{"SquarePairs", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.SquarePairs(ctx, 256); return err }},
		{"SquareProducts", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.SquareProducts(ctx, 256); return err }},
		{"MatTriples", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.MatTriples(ctx, 2, 4, 8, 6); return err }},
		{"MatTriplesTall", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.MatTriples(ctx, 2, 6, 8, 4); return err }},
		{"WeightTriples", func(ctx context.Context, g *Gen, c uint64) error {
			_, err := g.WeightTriples(ctx, weightB(g, c, 16*8), 8, 16, 8)
			return err
		}},
		{"WeightTriplesTall", func(ctx context.Context, g *Gen, c uint64) error {
			_, err := g.WeightTriples(ctx, weightB(g, c, 16*4), 8, 16, 4)
			return err
		}},
		{"WeightVectorTriples", func(ctx context.Context, g *Gen, c uint64) error {
			_, err := g.WeightVectorTriples(ctx, weightB(g, c, 64), 16, 64)
			return err
		}},
		{"ANDTriples", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.ANDTriples(ctx, 128); return err }},
		{"CrossANDTriples", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.CrossANDTriples(ctx, 1024); return err }},
		{"WrapPairs", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.WrapPairs(ctx, 4096, 16); return err }},
		{"BitPairs", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.BitPairs(ctx, 4096); return err }},
		{"RowBitTriples", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.RowBitTriples(ctx, 4096, 3); return err }},
		{"DeltaOTs0", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.DeltaOTs(ctx, 8192, 0); return err }},
		{"DeltaOTs1", func(ctx context.Context, g *Gen, _ uint64) error { _, err := g.DeltaOTs(ctx, 8192, 1); return err }},
	}
	for _, c := range cases {
		for viewer := range 2 {
			t.Run(fmt.Sprintf("%s/viewer=%d", c.name, viewer), func(t *testing.T) {
				ctx := testCtx(t)
				var views [2][][]uint64
				for i, secret := range []uint64{0, ^uint64(0)} {
					g0, g1, r0, r1 := genPair(t)
					gens, recs := [2]*Gen{g0, g1}, [2]*recConn{r0, r1}
					gens[1-viewer].draw = constWords(secret)
					both(t, func() (struct{}, error) { return struct{}{}, c.f(ctx, g0, secret) },
						func() (struct{}, error) { return struct{}{}, c.f(ctx, g1, secret) })
					views[i] = recs[viewer].takeMsgs()
					x, n := chiSquareBytes(views[i])
					if n == 0 {
						// The viewer receives nothing in this generator.
						continue
					}
					if n < 4096 {
						t.Fatalf("peer secret %x: only %d bytes received, too few for the test", secret, n)
					}
					if x > chiLimit {
						t.Fatalf("peer secret %x: received bytes not uniform: χ² = %.0f over %d bytes", secret, x, n)
					}
				}
				if len(views[0]) > 0 && fmt.Sprint(views[0]) == fmt.Sprint(views[1]) {
					t.Fatal("views equal under different peer secrets and fresh randomness")
				}
			})
		}
	}
}

// TestSoftSpokenCorrectionsIndependent looks at what the extension sender
// receives when the receiver's choices are fixed (all zero, all ones): the
// corrections c_b = u_b ⊕ r of every tree and 128-OT block must be uniform
// and unrelated, so each pair of trees' corrections (u_b ⊕ u_b′) and each
// pair of blocks' is uniform too, and no block repeats. A tree whose leaves
// repeated another's, or a leaf PRG that ignored the block counter, would
// repeat blocks or zero those sums.
func TestSoftSpokenCorrectionsIndependent(t *testing.T) {
	ctx := testCtx(t)
	const n = 1 << 14
	for _, choice := range []uint64{0, ^uint64(0)} {
		s0, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(4, choice)))
		g0, g1, r0, _ := fakeGens(t, s0, s1, 5)
		g1.draw = constWords(choice)
		both(t, func() (DeltaOT, error) { return g0.DeltaOTs(ctx, n, 0) },
			func() (DeltaOT, error) { return g1.DeltaOTs(ctx, n, 0) })
		msgs := r0.takeMsgs()
		if want := s0.ext.callWords(n, true); len(msgs) != 1 || len(msgs[0]) != want {
			t.Fatalf("received %d messages, want one of %d words", len(msgs), want)
		}
		corr := msgs[0][treeWords : len(msgs[0])-checkWords] // with the check's extra OTs'; then x, t
		T := s0.ext.trees()
		var trees, blocks []uint64
		seen := map[Block]bool{}
		for i := 0; i+1 < len(corr); i += 2 {
			b := Block{corr[i], corr[i+1]}
			if seen[b] {
				t.Fatalf("choices %x: a correction block repeats", choice)
			}
			seen[b] = true
			if (i/2)%T+1 < T {
				trees = append(trees, corr[i]^corr[i+2], corr[i+1]^corr[i+3])
			}
			if i+2*T+1 < len(corr) {
				blocks = append(blocks, corr[i]^corr[i+2*T], corr[i+1]^corr[i+2*T+1])
			}
		}
		for name, w := range map[string][]uint64{"corrections": corr, "tree pairs": trees, "block pairs": blocks} {
			if x, nb := chiSquareBytes([][]uint64{w}); x > chiLimit {
				t.Fatalf("choices %x: %s not uniform: χ² = %.0f over %d bytes", choice, name, x, nb)
			}
		}
	}
}

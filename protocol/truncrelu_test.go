package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// truncReLUWire is the exact number of bytes each party sends in TruncReLU
// on n > 0 elements: the truncation's n words in the leaves' message, the
// rest of the sign circuit, and the multiplexer.
func truncReLUWire(n int) int64 {
	w := share.PackedWords(n)
	b := wireBytes(w + 156*w)
	for _, k := range []int{62, 30, 14, 6, 2} {
		b += wireBytes(k * w)
	}
	return b + wireBytes(n+w)
}

// truncReLUInputs returns n signed values inside (−2^62, 2^62) for a
// truncation by 2^f: zero, ±1, tiny negatives that truncate to 0 or −1, exact
// multiples of ±2^f, values near ±2^61 and ±(2^62 − 1), then uniform ones of
// every magnitude, each sign equally often.
func truncReLUInputs(n int, f uint, seed uint64) []uint64 {
	rng := rand.New(rand.NewPCG(seed, uint64(f)))
	const b = int64(1) << 62
	u := int64(1) << f
	edges := []int64{
		0, 1, -1, u - 1, -(u - 1), u, -u, u + 1, -u - 1, 2 * u, -2 * u, -u / 2, -(u/2 + 1),
		1 << 61, -(1 << 61), 1<<61 - 1, -(1<<61 - 1), 1<<61 + 1, -(1<<61 + 1),
		b - 1, -(b - 1), b - u, -(b - u),
	}
	edges = slices.DeleteFunc(edges, func(v int64) bool { return v <= -b || v >= b }) // (large f)
	x := make([]uint64, n)
	for i := range x {
		var v int64
		switch {
		case i < len(edges):
			v = edges[i]
		case i%3 == 0: // tiny: |v| < 2^f, truncating to 0 or −1
			v = rng.Int64N(u)
		case i%3 == 1: // any magnitude below 2^62
			v = rng.Int64N(b-1) >> rng.UintN(62)
		default: // near the bound
			v = b - 1 - rng.Int64N(1<<40)
		}
		if i >= len(edges) && rng.IntN(2) == 0 {
			v = -v
		}
		x[i] = uint64(v)
	}
	return x
}

// TestTruncReLU checks TruncReLU against the plaintext: every result is
// max(y, 0) for y = floor(x/2^f) or floor(x/2^f) + 1 (TruncBy's 1 ulp), and
// it equals, word for word, TruncBy followed by ReLU run on the same dealer
// seeds (which also shows that it draws the same material in the same
// order). It asserts the exact rounds (7; none for an empty tensor) and bytes,
// and that the dealer traffic equals TruncBy then ReLU's.
func TestTruncReLU(t *testing.T) {
	cases := []struct {
		name  string
		shape []int
		f     uint
	}{
		{"empty", []int{0}, 16},
		{"empty-rank2", []int{3, 0}, 16},
		{"one", []int{1}, 16},
		{"f=1", []int{257}, 1},
		{"f=16", []int{1001}, 16},
		{"f=26", []int{64}, 26},
		{"f=42", []int{3, 5, 7}, 42},
		{"f=61", []int{63}, 61},
		{"f=62", []int{65}, 62},
		{"multi-frame", []int{50000}, 16},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			for _, d := range tc.shape {
				n *= d
			}
			xs := truncReLUInputs(n, tc.f, uint64(ci))
			x := splitTensor(&share.Tensor{Shape: slices.Clone(tc.shape), Data: xs}, byte(ci))
			cfg := pairConfig{Seed: byte(ci)}
			fused := runPairWith(t, cfg, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				return s.TruncReLU(ctx, x[s.Party()], tc.f)
			})
			ref := runPairWith(t, cfg, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				y, err := s.TruncBy(ctx, x[s.Party()], tc.f)
				if err != nil {
					return nil, err
				}
				return s.ReLU(ctx, y)
			})
			got, want := openPair(t, fused.Out), openPair(t, ref.Out)
			if !slices.Equal(got.Shape, tc.shape) {
				t.Fatalf("shape %v, want %v", got.Shape, tc.shape)
			}
			for i, v := range xs {
				lo := int64(floorShift(v, tc.f))
				g := int64(got.Data[i])
				if g != max(lo, 0) && g != max(lo+1, 0) {
					t.Fatalf("x=%d f=%d: got %d, want max(%d, 0) or max(%d, 0)", int64(v), tc.f, g, lo, lo+1)
				}
				if got.Data[i] != want.Data[i] {
					t.Fatalf("x=%d f=%d: got %d, TruncBy then ReLU %d", int64(v), tc.f, g, int64(want.Data[i]))
				}
			}
			if n == 0 {
				wantCost(t, fused, [2]int64{0, 0}, [2]int64{0, 0})
				if fused.Dealer[0].Items != 0 || fused.Dealer[1].Items != 0 {
					t.Errorf("empty tensor drew dealer material: %+v", fused.Dealer)
				}
			} else {
				b := truncReLUWire(n)
				wantCost(t, fused, [2]int64{7, 7}, [2]int64{b, b})
				// One round fewer than TruncBy then ReLU, and the framing of
				// one message instead of two (one 10-byte header while the
				// merged message fits in one frame).
				w := share.PackedWords(n)
				saved := wireBytes(w) + wireBytes(156*w) - wireBytes(157*w)
				if 8*(157*w) <= 1<<20 && saved != 10 {
					t.Errorf("saved %d bytes, want one 10-byte header", saved)
				}
				for p := range 2 {
					if d := ref.Stats[p].BytesSent - fused.Stats[p].BytesSent; d != saved || ref.Stats[p].Rounds != 8 {
						t.Errorf("party %d: TruncBy then ReLU %d rounds, %d bytes more, want 8 rounds and %d bytes more", p, ref.Stats[p].Rounds, d, saved)
					}
				}
				if fused.Dealer != ref.Dealer {
					t.Errorf("dealer traffic %+v, TruncBy then ReLU %+v", fused.Dealer, ref.Dealer)
				}
			}
		})
	}
}

// TestTruncReLUView checks that what each party receives during TruncReLU
// does not depend on the secret: for two very different secrets (all zero;
// negatives and positives near ±2^61 alternating) it receives 7 messages,
// the first holding the truncation's opening and the leaves' masked words;
// the byte histograms of all of them, and of the openings alone, are uniform
// (chi-square, fixed seeds), and no received word is a secret word, a secret
// word plus 2^62 (the opening without its mask) or a bit plane of the secret.
func TestTruncReLUView(t *testing.T) {
	const n = 4096
	const f = 16
	secrets := map[string][]uint64{"zeros": make([]uint64, n), "near-2^61": make([]uint64, n)}
	for i := range secrets["near-2^61"] {
		v := int64(1)<<61 - int64(i)<<20
		if i%2 == 1 {
			v = -v
		}
		secrets["near-2^61"][i] = uint64(v)
	}
	for name, xs := range secrets {
		t.Run(name, func(t *testing.T) {
			x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 12)
			r := runPairWith(t, pairConfig{Record: true, Seed: 5}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				return s.TruncReLU(ctx, x[s.Party()], f)
			})
			clear := map[uint64]bool{}
			for _, v := range xs {
				if v != 0 {
					clear[v] = true
				}
				clear[v+1<<62] = true
			}
			for _, w := range bitSlice(xs) {
				if w != 0 && w != ^uint64(0) {
					clear[w] = true
				}
			}
			w := share.PackedWords(n)
			for p := range 2 {
				msgs := r.Recv[p]
				if len(msgs) != 7 {
					t.Fatalf("party %d received %d messages, want 7", p, len(msgs))
				}
				if len(msgs[0]) != w+156*w {
					t.Fatalf("party %d: first message of %d words, want %d", p, len(msgs[0]), w+156*w)
				}
				if chi := chiSquareBytes([][]uint64{msgs[0][:w]}); chi > chiSquareLimit {
					t.Errorf("party %d: the truncation's masked bits: chi-square %.1f > %d", p, chi, chiSquareLimit)
				}
				checkViewHidesSecret(t, p, msgs, clear)
			}
		})
	}
}

// TestTruncReLUBadInput checks that bad input is an error, before anything
// is sent: a nil tensor, data that does not fill the shape, f out of range
// (also on an empty tensor).
func TestTruncReLUBadInput(t *testing.T) {
	good := &share.Tensor{Shape: []int{3}, Data: make([]uint64, 3)}
	cases := []struct {
		name string
		x    *share.Tensor
		f    uint
	}{
		{"nil", nil, 16},
		{"short data", &share.Tensor{Shape: []int{5}, Data: make([]uint64, 3)}, 16},
		{"negative dimension", &share.Tensor{Shape: []int{-1}, Data: nil}, 16},
		{"f=0", good, 0},
		{"f=63", good, 63},
		{"f=0 empty", &share.Tensor{Shape: []int{0}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runPair(t, func(ctx context.Context, s *Session) (string, error) {
				_, err := s.TruncReLU(ctx, tc.x, tc.f)
				if err == nil {
					return "<nil>", nil
				}
				return err.Error(), nil
			})
			for p := range 2 {
				if e := r.Out[p]; !strings.HasPrefix(e, "protocol: trunc relu") {
					t.Errorf("party %d: error %q, want a protocol: trunc relu error", p, e)
				}
				if r.Stats[p].BytesSent != 0 || r.Dealer[p].BytesRecv != 0 {
					t.Errorf("party %d sent %d bytes, drew %d dealer bytes on bad input", p, r.Stats[p].BytesSent, r.Dealer[p].BytesRecv)
				}
			}
		})
	}
	// TruncBy checks its input the same way (it shares the preparation).
	r := runPair(t, func(ctx context.Context, s *Session) ([]string, error) {
		var errs []string
		for _, x := range []*share.Tensor{nil, {Shape: []int{5}, Data: make([]uint64, 3)}} {
			if _, err := s.TruncBy(ctx, x, 16); err != nil {
				errs = append(errs, err.Error())
			}
		}
		return errs, nil
	})
	if len(r.Out[0]) != 2 || !strings.HasPrefix(r.Out[0][0], "protocol: truncate") {
		t.Errorf("TruncBy on bad input: %q", r.Out[0])
	}
}

package protocol

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestSquareKeep checks SquareKeep and its KeptOpening's Mul against the
// clear x² and x·y, exactly in the ring (Square and Mul's results, 2f
// fractional bits; and after Trunc within one ulp), and pins their cost: 1
// round and msg(n) each, msg(n) + msg(n) where Square and Mul take
// msg(n) + msg(2n).
func TestSquareKeep(t *testing.T) {
	fp := share.DefaultFixedPoint
	for _, tc := range []struct {
		name  string
		shape []int
		fixed bool
	}{
		{"vector", []int{1000}, false},
		{"rows", []int{3, 5, 7}, false},
		{"one", []int{1}, false},
		{"fixed", []int{4, 96}, true},
		{"large", []int{3, 50000}, false}, // f's message spans frames
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			for _, d := range tc.shape {
				n *= d
			}
			xs, ys := randReals(n, 150, 21), randReals(n, 150, 22)
			x, y := encodeT(t, fp, xs, tc.shape...), encodeT(t, fp, ys, tc.shape...)
			xq, yq := fp.DecodeTensor(x), fp.DecodeTensor(y)
			xsh, ysh := splitTensor(x, 21), splitTensor(y, 22)
			type outs struct{ sq, prod *share.Tensor }
			r := runPair(t, func(ctx context.Context, s *Session) (outs, error) {
				sq, k, err := s.SquareKeep(ctx, pickShare(s, xsh))
				if err != nil {
					return outs{}, err
				}
				prod, err := k.Mul(ctx, s, pickShare(s, ysh))
				if err != nil || !tc.fixed {
					return outs{sq, prod}, err
				}
				if sq, err = s.Trunc(ctx, sq); err != nil {
					return outs{}, err
				}
				prod, err = s.Trunc(ctx, prod)
				return outs{sq, prod}, err
			})
			rounds, bytes := int64(2), 2*wireBytes(n)
			if tc.fixed {
				rounds, bytes = 4, bytes+2*truncWire(n)
			}
			wantCost(t, r, [2]int64{rounds, rounds}, [2]int64{bytes, bytes})
			sq := openPair(t, [2]*share.Tensor{r.Out[0].sq, r.Out[1].sq})
			prod := openPair(t, [2]*share.Tensor{r.Out[0].prod, r.Out[1].prod})
			for _, c := range []struct {
				name string
				got  *share.Tensor
				want func(i int) float64
			}{
				{"x²", sq, func(i int) float64 { return xq[i] * xq[i] }},
				{"x·y", prod, func(i int) float64 { return xq[i] * yq[i] }},
			} {
				if !slices.Equal(c.got.Shape, tc.shape) {
					t.Fatalf("%s: shape %v, want %v", c.name, c.got.Shape, tc.shape)
				}
				for i, w := range c.got.Data {
					got, tol := math.Ldexp(float64(int64(w)), -2*int(fp.FracBits)), 0.0
					if tc.fixed {
						got, tol = fp.Decode(w), fp.Ulp()
					}
					if d := got - c.want(i); d > tol+1e-12 || d < -tol-1e-12 {
						t.Fatalf("%s element %d: got %v, want %v (diff %g)", c.name, i, got, c.want(i), d)
					}
				}
			}
		})
	}
}

// TestKeptOpeningOnce: a KeptOpening serves one product. A y of another
// shape is refused without using it (the right y then works); a second
// Mul, or a Mul on another session, is an error, and nothing is sent for
// a refused call.
func TestKeptOpeningOnce(t *testing.T) {
	fp := share.DefaultFixedPoint
	const n = 64
	x := splitTensor(encodeT(t, fp, randReals(n, 10, 31), 8, 8), 31)
	y := splitTensor(encodeT(t, fp, randReals(n, 10, 32), 8, 8), 32)
	flat := splitTensor(encodeT(t, fp, randReals(n, 10, 33), n), 33)
	r := runPair(t, func(ctx context.Context, s *Session) ([]string, error) {
		var errs []string
		note := func(err error) {
			if err == nil {
				errs = append(errs, "")
				return
			}
			errs = append(errs, err.Error())
		}
		_, k, err := s.SquareKeep(ctx, pickShare(s, x))
		if err != nil {
			return nil, err
		}
		_, err = k.Mul(ctx, s, pickShare(s, flat)) // same length, another shape
		note(err)
		_, err = k.Mul(ctx, s, nil)
		note(err)
		other := &Session{party: s.party}
		_, err = k.Mul(ctx, other, pickShare(s, y))
		note(err)
		if _, err := k.Mul(ctx, s, pickShare(s, y)); err != nil {
			return nil, err
		}
		_, err = k.Mul(ctx, s, pickShare(s, y))
		note(err)
		var nilKept *KeptOpening
		_, err = nilKept.Mul(ctx, s, pickShare(s, y))
		note(err)
		return errs, nil
	})
	wantCost(t, r, [2]int64{2, 2}, [2]int64{2 * wireBytes(n), 2 * wireBytes(n)})
	want := []string{"shapes differ", "shapes differ", "not the session", "already used", "not the session"}
	for p := range 2 {
		for i, w := range want {
			if !strings.Contains(r.Out[p][i], w) {
				t.Errorf("party %d, misuse %d: error %q, want one saying %q", p, i, r.Out[p][i], w)
			}
		}
	}
}

// TestSquareKeepView checks what each party receives during SquareKeep and
// its Mul: two messages of n words (the peer's shares of x − a and of
// y − b), each uniform (chi-square of the bytes), holding no word of x or
// y, and whose difference is uniform too, for secrets all zero and for
// y = x, where a mask shared by the two openings (b = a, or e opened again
// as f) would show as a zero difference.
func TestSquareKeepView(t *testing.T) {
	const n = 4096
	near := make([]uint64, n)
	for i := range near {
		near[i] = uint64(int64(1)<<40 - int64(i)<<20)
	}
	for _, tc := range []struct {
		name string
		x, y []uint64
	}{
		{"zeros", make([]uint64, n), make([]uint64, n)},
		{"y=x", near, near},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := splitTensor(&share.Tensor{Shape: []int{n}, Data: tc.x}, 41)
			y := splitTensor(&share.Tensor{Shape: []int{n}, Data: tc.y}, 41)
			r := runPairWith(t, pairConfig{Record: true, Seed: 6}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				_, k, err := s.SquareKeep(ctx, pickShare(s, x))
				if err != nil {
					return nil, err
				}
				return k.Mul(ctx, s, pickShare(s, y))
			})
			clear := map[uint64]bool{}
			for _, v := range append(tc.x, tc.y...) {
				if v != 0 {
					clear[v] = true
				}
			}
			for p := range 2 {
				msgs := r.Recv[p]
				if len(msgs) != 2 || len(msgs[0]) != n || len(msgs[1]) != n {
					t.Fatalf("party %d received %d messages, want 2 of %d words", p, len(msgs), n)
				}
				checkViewHidesSecret(t, p, msgs, clear)
				diff := make([]uint64, n)
				for i := range diff {
					diff[i] = msgs[0][i] - msgs[1][i]
				}
				if chi := chiSquareBytes([][]uint64{diff}); chi > chiSquareLimit {
					t.Errorf("party %d: the openings' difference: chi-square %.1f > %d", p, chi, chiSquareLimit)
				}
			}
		})
	}
}

package protocol

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// randReals returns n reals uniform in (−lim, lim) from a fixed seed, with
// the edge values 0, ±1 ulp and ±(lim − ulp) placed first.
func randReals(n int, lim float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	ulp := share.DefaultFixedPoint.Ulp()
	edges := []float64{0, ulp, -ulp, lim - ulp, -(lim - ulp), 1, -1}
	xs := make([]float64, n)
	for i := range xs {
		if i < len(edges) {
			xs[i] = edges[i]
			continue
		}
		xs[i] = (2*rng.Float64() - 1) * lim
	}
	return xs
}

// pickShare returns party's share out of both.
func pickShare(s *Session, sh [2]*share.Tensor) *share.Tensor { return sh[s.Party()] }

func TestLocalOps(t *testing.T) {
	fp := share.DefaultFixedPoint
	xs := randReals(50, 100, 1)
	ys := randReals(50, 100, 2)
	x := encodeT(t, fp, xs, 5, 10)
	y := encodeT(t, fp, ys, 5, 10)
	xsh, ysh := splitTensor(x, 1), splitTensor(y, 2)
	type outs struct{ add, sub, neg, addp, addc, mulint, sum0, sum1 *share.Tensor }
	r := runPair(t, func(ctx context.Context, s *Session) (outs, error) {
		var o outs
		var err error
		a, b := pickShare(s, xsh), pickShare(s, ysh)
		if o.add, err = s.Add(a, b); err != nil {
			return o, err
		}
		if o.sub, err = s.Sub(a, b); err != nil {
			return o, err
		}
		o.neg = s.Neg(a)
		if o.addp, err = s.AddPublic(a, y); err != nil {
			return o, err
		}
		o.addc = s.AddPublicScalar(a, fp.Scale())
		o.mulint = s.MulPublicInt(a, -3)
		if o.sum0, err = s.Sum(a, 0); err != nil {
			return o, err
		}
		o.sum1, err = s.Sum(a, -1)
		return o, err
	})
	wantCost(t, r, [2]int64{0, 0}, [2]int64{0, 0})
	get := func(f func(outs) *share.Tensor) []float64 {
		return fp.DecodeTensor(openPair(t, [2]*share.Tensor{f(r.Out[0]), f(r.Out[1])}))
	}
	tests := []struct {
		name string
		got  []float64
		want func(i int) float64
	}{
		{"add", get(func(o outs) *share.Tensor { return o.add }), func(i int) float64 { return xs[i] + ys[i] }},
		{"sub", get(func(o outs) *share.Tensor { return o.sub }), func(i int) float64 { return xs[i] - ys[i] }},
		{"neg", get(func(o outs) *share.Tensor { return o.neg }), func(i int) float64 { return -xs[i] }},
		{"addpublic", get(func(o outs) *share.Tensor { return o.addp }), func(i int) float64 { return xs[i] + ys[i] }},
		{"addscalar", get(func(o outs) *share.Tensor { return o.addc }), func(i int) float64 { return xs[i] + 1 }},
		{"mulint", get(func(o outs) *share.Tensor { return o.mulint }), func(i int) float64 { return -3 * xs[i] }},
		{"sum0", get(func(o outs) *share.Tensor { return o.sum0 }), func(j int) float64 {
			s := 0.0
			for i := 0; i < 5; i++ {
				s += xs[i*10+j]
			}
			return s
		}},
		{"sum1", get(func(o outs) *share.Tensor { return o.sum1 }), func(i int) float64 {
			s := 0.0
			for j := 0; j < 10; j++ {
				s += xs[i*10+j]
			}
			return s
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, g := range tc.got {
				// Inputs are encoded exactly to 2^-16, sums of encoded values
				// are exact, so compare with the encoding tolerance.
				if math.Abs(g-tc.want(i)) > 10*fp.Ulp() {
					t.Fatalf("element %d: got %v, want %v", i, g, tc.want(i))
				}
			}
		})
	}
}

func TestMulSquare(t *testing.T) {
	fp := share.DefaultFixedPoint
	const n = 1000
	lim := 150.0 // products stay below 2^15
	xs, ys := randReals(n, lim, 3), randReals(n, lim, 4)
	x, y := encodeT(t, fp, xs, n), encodeT(t, fp, ys, n)
	xq, yq := fp.DecodeTensor(x), fp.DecodeTensor(y)
	xsh, ysh := splitTensor(x, 3), splitTensor(y, 4)
	tests := []struct {
		name   string
		op     func(ctx context.Context, s *Session, a, b *share.Tensor) (*share.Tensor, error)
		want   func(i int) float64
		rounds int64
		bytes  int64
		fixed  bool
	}{
		{"mul", func(ctx context.Context, s *Session, a, b *share.Tensor) (*share.Tensor, error) {
			return s.Mul(ctx, a, b)
		},
			func(i int) float64 { return xq[i] * yq[i] }, 1, wireBytes(2 * n), false},
		{"mulfixed", func(ctx context.Context, s *Session, a, b *share.Tensor) (*share.Tensor, error) {
			return s.MulFixed(ctx, a, b)
		}, func(i int) float64 { return xq[i] * yq[i] }, 2, wireBytes(2*n) + truncWire(n), true},
		{"square", func(ctx context.Context, s *Session, a, _ *share.Tensor) (*share.Tensor, error) {
			return s.Square(ctx, a)
		},
			func(i int) float64 { return xq[i] * xq[i] }, 1, wireBytes(n), false},
		{"squarefixed", func(ctx context.Context, s *Session, a, _ *share.Tensor) (*share.Tensor, error) {
			return s.SquareFixed(ctx, a)
		}, func(i int) float64 { return xq[i] * xq[i] }, 2, wireBytes(n) + truncWire(n), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				return tc.op(ctx, s, pickShare(s, xsh), pickShare(s, ysh))
			})
			wantCost(t, r, [2]int64{tc.rounds, tc.rounds}, [2]int64{tc.bytes, tc.bytes})
			z := openPair(t, r.Out)
			for i, w := range z.Data {
				var got float64
				tol := fp.Ulp() // Trunc: floor or one ulp above
				if tc.fixed {
					got = fp.Decode(w)
				} else {
					got = math.Ldexp(float64(int64(w)), -2*int(fp.FracBits))
					tol = 0
				}
				if d := got - tc.want(i); d > tol+1e-12 || d < -tol-1e-12 {
					t.Fatalf("element %d: %v·%v: got %v, want %v (diff %g)", i, xq[i], yq[i], got, tc.want(i), d)
				}
			}
		})
	}
}

func TestMulPublicMean(t *testing.T) {
	fp := share.DefaultFixedPoint
	const rows, n = 4, 768
	xs := randReals(rows*n, 1000, 9)
	ps := randReals(n, 20, 10)
	x, p := encodeT(t, fp, xs, rows, n), encodeT(t, fp, ps, n)
	xq, pq := fp.DecodeTensor(x), fp.DecodeTensor(p)
	xsh := splitTensor(x, 6)
	type outs struct{ mulp, muls, mean *share.Tensor }
	const c = -1.0 / 3
	r := runPair(t, func(ctx context.Context, s *Session) (outs, error) {
		var o outs
		var err error
		a := pickShare(s, xsh)
		small, err := s.MulPublicScalar(ctx, a, 0.01) // keep products in range
		if err != nil {
			return o, err
		}
		if o.mulp, err = s.MulPublic(ctx, small, p); err != nil {
			return o, err
		}
		if o.muls, err = s.MulPublicScalar(ctx, a, c); err != nil {
			return o, err
		}
		if _, err := s.MulPublic(ctx, a, x); err != nil { // same shape: allowed
			return o, err
		}
		if _, err := s.MulPublic(ctx, a, encodeT(t, fp, []float64{1, 2}, 2)); err == nil {
			t.Error("mul public by a mismatched shape: no error")
		}
		o.mean, err = s.Mean(ctx, a, -1)
		return o, err
	})
	b := 4*truncWire(rows*n) + truncWire(rows)
	wantCost(t, r, [2]int64{5, 5}, [2]int64{b, b})
	tests := []struct {
		name string
		got  *share.Tensor
		want func(i int) float64
		tol  float64
	}{
		{"mulpublic", openPair(t, [2]*share.Tensor{r.Out[0].mulp, r.Out[1].mulp}),
			func(i int) float64 { return xq[i] * 0.01 * pq[i%n] }, 20 * 2 * fp.Ulp()},
		{"mulscalar", openPair(t, [2]*share.Tensor{r.Out[0].muls, r.Out[1].muls}),
			func(i int) float64 { return xq[i] * c }, 2 * fp.Ulp()},
		{"mean", openPair(t, [2]*share.Tensor{r.Out[0].mean, r.Out[1].mean}),
			func(i int) float64 {
				s := 0.0
				for j := 0; j < n; j++ {
					s += xq[i*n+j]
				}
				return s / n
			}, 2 * fp.Ulp()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i, w := range tc.got.Data {
				if d := math.Abs(fp.Decode(w) - tc.want(i)); d > tc.tol {
					t.Fatalf("element %d: got %v, want %v (diff %g)", i, fp.Decode(w), tc.want(i), d)
				}
			}
		})
	}
}

// TestMulUniform checks that the messages a party receives in Mul and Square
// are uniform bytes for two very different secrets, and never hold them.
func TestMulUniform(t *testing.T) {
	const n = 20000
	for name, v := range map[string]uint64{"zero": 0, "max": 1<<31 - 1} {
		t.Run(name, func(t *testing.T) {
			x, _ := share.NewTensor(n)
			for i := range x.Data {
				x.Data[i] = v
			}
			zero, _ := share.NewTensor(n)
			for owner := range 2 {
				sh := [2]*share.Tensor{zero, zero}
				sh[owner] = x // the owner holds the secret as its share
				r := runPairWith(t, pairConfig{Record: true, Seed: 8}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
					if _, err := s.Mul(ctx, pickShare(s, sh), pickShare(s, sh)); err != nil {
						return nil, err
					}
					return s.Square(ctx, pickShare(s, sh))
				})
				p := 1 - owner
				if chi := chiSquareBytes(r.Recv[p]); chi > chiSquareLimit {
					t.Errorf("party %d (owner %d): chi-square %.1f", p, owner, chi)
				}
				for _, m := range r.Recv[p] {
					for _, w := range m {
						if w == v {
							t.Fatalf("party %d received the secret", p)
						}
					}
				}
			}
		})
	}
}

package secure

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// TestLinReLUMatchesUnfused checks the fused first layer of the MLPs
// (linReLU: the bias and pre's shared terms added before the truncation,
// shifted, then protocol.TruncReLU) against what the forward did before the
// fusion — lin (truncation, then the bias), pre's terms, then ReLU — on the
// same dealer seeds: the opened results are equal word for word, they are
// within a few ulps of the plaintext max(x·W + b + fill, 0), and the fused
// path takes one round fewer (1 + 7 rounds against 1 + 1 + 7).
func TestLinReLUMatchesUnfused(t *testing.T) {
	const rows, in, d = 40, 5, 9
	cases := []struct {
		name  string
		extra uint
		bias  bool
		fill  bool
	}{
		{"plain", 0, false, false},
		{"bias", 0, true, false},
		{"bias and fill", 0, true, true},
		{"extra bits, bias", lnExtraBits, true, false},
		{"extra bits, bias and fill", lnExtraBits, true, true},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			l := &linear{in: in, out: d, w: make([]float64, in*d)}
			for i := range l.w {
				l.w[i] = rng.NormFloat64()
			}
			if tc.bias {
				l.b = make([]float64, d)
				for i := range l.b {
					l.b[i] = rng.NormFloat64()
				}
			}
			xs := make([]float64, rows*in)
			for i := range xs {
				xs[i] = rng.NormFloat64()
			}
			fill := make([]float64, rows*d)
			if tc.fill {
				for i := range fill {
					fill[i] = rng.NormFloat64()
				}
			}
			seeds := [2]share.Seed{{byte(ci), 1}, {byte(ci), 2}}
			type out struct {
				y      *share.Tensor
				rounds int64
			}
			run := func(fused bool) *share.Tensor {
				t.Helper()
				r, err := runLocal(context.Background(), localConfig{Seeds: seeds}, func(ctx context.Context, s *protocol.Session) (out, error) {
					p := &Prepared{party: s.Party(), fp: s.FixedPoint()}
					var lin *linear
					if s.Party() == 0 {
						lin = l
					}
					ls, err := p.shareLinExtra(ctx, s, lin, in, d, 1, tc.extra)
					if err != nil {
						return out{}, err
					}
					var x, f *share.Tensor
					if s.Party() == 1 {
						ex, err := s.FixedPoint().EncodeTensor(xs, rows, in)
						if err != nil {
							return out{}, err
						}
						ef, err := s.FixedPoint().EncodeTensor(fill, rows, d)
						if err != nil {
							return out{}, err
						}
						if x, err = s.ShareInput(1, ex); err != nil {
							return out{}, err
						}
						if f, err = s.ShareInput(1, ef); err != nil {
							return out{}, err
						}
					} else {
						if x, err = s.ShareInput(1, nil, rows, in); err != nil {
							return out{}, err
						}
						if f, err = s.ShareInput(1, nil, rows, d); err != nil {
							return out{}, err
						}
					}
					before := s.Stream().Stats().Rounds
					var y *share.Tensor
					if fused {
						y, err = p.linReLU(ctx, s, x, ls, func(h *share.Tensor, k uint) {
							for i := range h.Data {
								h.Data[i] += f.Data[i] << k
							}
						})
					} else if y, err = p.lin(ctx, s, x, ls); err == nil {
						if err = share.AddInPlace(y, f); err == nil {
							y, err = s.ReLU(ctx, y)
						}
					}
					return out{y, s.Stream().Stats().Rounds - before}, err
				})
				if err != nil {
					t.Fatal(err)
				}
				want := int64(9)
				if fused {
					want = 8
				}
				if r[0].rounds != want || r[1].rounds != want {
					t.Errorf("fused=%v: %d/%d rounds, want %d", fused, r[0].rounds, r[1].rounds, want)
				}
				y := &share.Tensor{Shape: r[0].y.Shape, Data: make([]uint64, r[0].y.Len())}
				if err := share.Reconstruct(y.Data, r[0].y.Data, r[1].y.Data); err != nil {
					t.Fatal(err)
				}
				return y
			}
			got, ref := run(true), run(false)
			fp := share.DefaultFixedPoint
			// The weights are rounded to f+extra bits, the product truncated:
			// a few ulps of the output at most for these magnitudes.
			tol := 8 * fp.Ulp()
			neg, pos := 0, 0
			for r := 0; r < rows; r++ {
				for j := 0; j < d; j++ {
					v := fill[r*d+j]
					if tc.bias {
						v += l.b[j]
					}
					for k := 0; k < in; k++ {
						v += xs[r*in+k] * l.w[k*d+j]
					}
					if v < 0 {
						neg++
					} else {
						pos++
					}
					i := r*d + j
					if got.Data[i] != ref.Data[i] {
						t.Fatalf("[%d,%d]: fused %d, unfused %d", r, j, int64(got.Data[i]), int64(ref.Data[i]))
					}
					if g := fp.Decode(got.Data[i]); math.Abs(g-max(v, 0)) > tol {
						t.Fatalf("[%d,%d]: %v, plaintext max(%v, 0)", r, j, g, v)
					}
				}
			}
			if neg == 0 || pos == 0 {
				t.Fatalf("inputs give %d negative and %d non-negative pre-activations: want both", neg, pos)
			}
		})
	}
}

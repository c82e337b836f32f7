package secure

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// TestSoftmaxPVMatchesUnfolded checks the attention with the softmax MLP's
// second layer folded into P·V (softmaxPV: W2·V and b2·V in the first
// layer's round, then h·(W2·V) + b2·V and one truncation) against the path
// it replaces (the MLP gives P, then P·V and its truncation) on the same
// shared scores, values and fill terms, both prepared by prepareBlock: each
// opened context is within its path's worst-case fixed-point error of the
// plaintext (ReLU(sc·W1 + b1 + fill)·W2 + b2)·V, padded values (zero rows
// of V) included, and the folded path takes exactly 2 rounds fewer (10
// against 12). With more than pvFoldMaxFracBits fractional bits
// prepareBlock does not fold.
func TestSoftmaxPVMatchesUnfolded(t *testing.T) {
	cases := []struct {
		name          string
		batch, heads  int
		tq, seq, dh   int
		d             int
		scoreScale    float64
		fill, padding bool
		frac          uint // 0: share.DefaultFracBits
	}{
		{name: "every query", batch: 2, heads: 2, tq: 5, seq: 5, dh: 3, d: 2, scoreScale: 2},
		{name: "class token, d 8", batch: 3, heads: 2, tq: 1, seq: 7, dh: 4, d: 8, scoreScale: 3},
		{name: "padding and fill", batch: 2, heads: 3, tq: 6, seq: 6, dh: 2, d: 4, scoreScale: 2, fill: true, padding: true},
		{name: "seq 32, d 16", batch: 2, heads: 1, tq: 32, seq: 32, dh: 8, d: 16, scoreScale: 4, padding: true},
		{name: "18 fractional bits: not folded", batch: 1, heads: 1, tq: 3, seq: 3, dh: 2, d: 2, scoreScale: 1, frac: 18},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fp := share.DefaultFixedPoint
			if tc.frac != 0 {
				var err error
				if fp, err = share.NewFixedPoint(tc.frac, 62-2*tc.frac-4); err != nil {
					t.Fatal(err)
				}
			}
			B, nh, Tq, T, dh, d := tc.batch, tc.heads, tc.tq, tc.seq, tc.dh, tc.d
			a := Arch{Family: model.ViT, Layers: 1, Heads: nh, HeadDim: dh, Hidden: 4, Seq: T, Labels: 2, MLPHidden: d}
			net, err := RandomNet(a, uint64(ci))
			if err != nil {
				t.Fatal(err)
			}
			mw := net.blocks[0].attn
			rng := rand.New(rand.NewPCG(uint64(ci), 21))
			gauss := func(n int, sd float64) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = rng.NormFloat64() * sd
				}
				return v
			}
			S := B * nh * Tq
			scs, vs := gauss(S*T, tc.scoreScale), gauss(B*nh*T*dh, 1)
			fills := make([]float64, S*d)
			if tc.fill {
				fills = gauss(S*d, 0.5)
			}
			if tc.padding {
				// The last two tokens of batch row 0 are padded: zero values.
				for h := 0; h < nh; h++ {
					for tk := T - 2; tk < T; tk++ {
						clear(vs[(h*T+tk)*dh : (h*T+tk+1)*dh])
					}
				}
			}
			enc := func(xs []float64, shape ...int) *share.Tensor {
				t.Helper()
				e, err := fp.EncodeTensor(xs, shape...)
				if err != nil {
					t.Fatal(err)
				}
				copy(xs, fp.DecodeTensor(e)) // the plaintext uses the encoded values
				return e
			}
			scE, vE, fE := enc(scs, B, nh, Tq, T), enc(vs, B, nh, T, dh), enc(fills, B, nh, Tq, d)

			type out struct {
				folded, unfolded       *share.Tensor
				foldedRds, unfoldedRds int64
			}
			fold := fp.FracBits <= pvFoldMaxFracBits
			seeds := [2]share.Seed{{byte(ci), 5}, {byte(ci), 6}}
			r, err := runLocal(context.Background(), localConfig{FixedPoint: fp, Seeds: seeds}, func(ctx context.Context, s *protocol.Session) (out, error) {
				var o out
				var bw *blockWeights
				if s.Party() == 0 {
					bw = &net.blocks[0]
				}
				// Both with the attention unfolded: softmaxPV works on given scores.
				pf := &Prepared{arch: a, party: s.Party(), fp: s.FixedPoint(), opt: Options{unfoldedClass: true}}
				pu := &Prepared{arch: a, party: s.Party(), fp: s.FixedPoint(), opt: Options{unfoldedPV: true, unfoldedClass: true, WeightBase: 100}, nextID: 100}
				bf, err := pf.prepareBlock(ctx, s, bw, false)
				if err != nil {
					return o, err
				}
				bu, err := pu.prepareBlock(ctx, s, bw, false)
				if err != nil {
					return o, err
				}
				if (bf.attnV != nil) != fold || bu.attnV != nil {
					return o, fmt.Errorf("folded: attnV %v, unfolded: attnV %v; want folding %v", bf.attnV != nil, bu.attnV != nil, fold)
				}
				in := func(e *share.Tensor) (*share.Tensor, error) {
					if s.Party() == 1 {
						return s.ShareInput(1, e)
					}
					return s.ShareInput(1, nil, e.Shape...)
				}
				sc, err := in(scE)
				if err != nil {
					return o, err
				}
				vh, err := in(vE)
				if err != nil {
					return o, err
				}
				fl, err := in(fE)
				if err != nil {
					return o, err
				}
				pre := func(h *share.Tensor, k uint) {
					for i := range h.Data {
						h.Data[i] += fl.Data[i] << k
					}
				}
				before := s.Stream().Stats().Rounds
				if fold {
					if o.folded, err = pf.softmaxPV(ctx, s, sc, vh, &bf, pre); err != nil {
						return o, err
					}
				}
				mid := s.Stream().Stats().Rounds
				pr, err := pu.mlp(ctx, s, sc, bu.attn, pre)
				if err != nil {
					return o, err
				}
				if o.unfolded, err = s.MatMul(ctx, pr, vh); err != nil {
					return o, err
				}
				if o.unfolded, err = s.Trunc(ctx, o.unfolded); err != nil {
					return o, err
				}
				o.foldedRds, o.unfoldedRds = mid-before, s.Stream().Stats().Rounds-mid
				return o, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for pi, o := range r {
				if o.unfoldedRds != 12 || (fold && o.foldedRds != 10) {
					t.Errorf("party %d: folded %d rounds, unfolded %d; want 10 and 12", pi, o.foldedRds, o.unfoldedRds)
				}
			}
			open := func(a, b *share.Tensor) []float64 {
				t.Helper()
				if a == nil || b == nil || a.Len() != S*dh || b.Len() != S*dh {
					t.Fatalf("shares %v and %v, want %d values", a, b, S*dh)
				}
				w := make([]uint64, S*dh)
				if err := share.Reconstruct(w, a.Data, b.Data); err != nil {
					t.Fatal(err)
				}
				return fp.DecodeTensor(&share.Tensor{Shape: []int{S * dh}, Data: w})
			}
			unfolded := open(r[0].unfolded, r[1].unfolded)
			var folded []float64
			if fold {
				folded = open(r[0].folded, r[1].folded)
			}

			u := fp.Ulp()
			neg, pos := 0, 0
			var worst [2]float64
			for g := 0; g < B*nh; g++ {
				v := vs[g*T*dh : (g+1)*T*dh]
				for tq := 0; tq < Tq; tq++ {
					row := (g*Tq + tq)
					x := scs[row*T : (row+1)*T]
					var xAbs float64
					for _, xv := range x {
						xAbs += math.Abs(xv)
					}
					// h and the error bound of each hidden unit: a truncation
					// (≤ 1 ulp), the bias and fill encoded (1 ulp), W1 rounded.
					h := make([]float64, d)
					eh := 2*u + 0.5*u*xAbs
					for j := range h {
						h[j] = mw.b1[j] + fills[row*d+j]
						for k, xv := range x {
							h[j] += xv * mw.w1[k*d+j]
						}
						if h[j] < 0 {
							neg++
						} else {
							pos++
						}
						h[j] = max(h[j], 0)
					}
					// P and, unfolded, its error bound per entry.
					p := make([]float64, T)
					eP := make([]float64, T)
					for tk := range p {
						p[tk] = mw.b2[tk]
						eP[tk] = 1.5 * u // b2 encoded, truncation
						for j, hv := range h {
							w := mw.w2[j*T+tk]
							p[tk] += hv * w
							eP[tk] += (math.Abs(w)+0.5*u)*eh + 0.5*u*hv
						}
					}
					for c := 0; c < dh; c++ {
						want := 0.0
						var vAbs float64
						var bound [2]float64
						for tk := range p {
							vv := v[tk*dh+c]
							want += p[tk] * vv
							vAbs += math.Abs(vv)
							bound[1] += eP[tk] * math.Abs(vv)
						}
						// Folded: h's errors through |M| = |W2·V| (+ its
						// rounding), W2 and b2 rounded (½ ulp times Σ|V|
						// each), one truncation.
						for j, hv := range h {
							var mAbs float64
							for tk := 0; tk < T; tk++ {
								mAbs += math.Abs(mw.w2[j*T+tk] * v[tk*dh+c])
							}
							bound[0] += eh*(mAbs+0.5*u*vAbs) + 0.5*u*vAbs*hv
						}
						bound[0] += 0.5*u*vAbs + u + 1e-12
						bound[1] += u + 1e-12
						i := row*dh + c
						got := []float64{math.NaN(), unfolded[i]}
						if fold {
							got[0] = folded[i]
						}
						for k := range got {
							if k == 0 && !fold {
								continue
							}
							e := math.Abs(got[k] - want)
							if !(e <= bound[k]) {
								t.Errorf("[%d,%d,%d], %s: %.7f, plaintext %.7f (error %.3g > bound %.3g)", g, tq, c, []string{"folded", "unfolded"}[k], got[k], want, e, bound[k])
							}
							worst[k] = max(worst[k], e/bound[k])
						}
					}
				}
			}
			if neg == 0 || pos == 0 {
				t.Fatalf("%d negative and %d non-negative hidden pre-activations: want both", neg, pos)
			}
			t.Logf("largest error ÷ bound: folded %.3f, unfolded %.3f", worst[0], worst[1])
		})
	}
}

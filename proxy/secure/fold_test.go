package secure

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// TestFoldedHeadMatchesUnfolded checks the head with the classifier folded
// into the entropy MLP's first layer (prepareHead, Prepared.entropy) against
// the unfolded head it replaces — the classifier (lin: product, truncation,
// bias), then the entropy MLP on the logits — on the same shared features z:
// each opened entropy is within its path's worst-case fixed-point error of
// the plaintext MLP(z·Wc + bc) (the error of every weight rounding,
// truncation and bias encoding summed along the path, so the two results are
// within the sum of both bounds of each other), and the folded head takes
// exactly 2 rounds fewer (1 + 7 + 1 + 1 against 1 + 1 + 1 + 7 + 1 + 1).
func TestFoldedHeadMatchesUnfolded(t *testing.T) {
	cases := []struct {
		name              string
		batch, hidden     int
		labels, d         int
		zScale            float64
		frac              uint // 0: share.DefaultFracBits
		noClsBias, noBias bool
	}{
		{name: "2 labels, d 2", batch: 6, hidden: 16, labels: 2, d: 2, zScale: 1},
		{name: "10 labels, d 16, large features", batch: 5, hidden: 64, labels: 10, d: 16, zScale: 4},
		{name: "no classifier bias", batch: 4, hidden: 32, labels: 3, d: 8, zScale: 1, noClsBias: true},
		{name: "no biases at all", batch: 4, hidden: 32, labels: 3, d: 8, zScale: 1, noClsBias: true, noBias: true},
		{name: "BERT width", batch: 8, hidden: 768, labels: 2, d: 16, zScale: 1},
		{name: "18 fractional bits (4 extra)", batch: 5, hidden: 48, labels: 4, d: 8, zScale: 2, frac: 18},
		{name: "22 fractional bits (no extra)", batch: 5, hidden: 48, labels: 4, d: 8, zScale: 2, frac: 22},
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
			rng := rand.New(rand.NewPCG(uint64(ci), 13))
			gauss := func(n int, sd float64) []float64 {
				v := make([]float64, n)
				for i := range v {
					v[i] = rng.NormFloat64() * sd
				}
				return v
			}
			B, H, C, d := tc.batch, tc.hidden, tc.labels, tc.d
			a := Arch{Family: model.DistilBERT, Layers: 1, Heads: 1, HeadDim: 1, Hidden: H, Seq: 2, Labels: C, MLPHidden: d}
			// Magnitudes of a trained head: logits of a few units, an
			// entropy MLP on standardised logits.
			net := &Net{Arch: a,
				cls: linear{in: H, out: C, w: gauss(H*C, 2/math.Sqrt(float64(H))), b: gauss(C, 0.5)},
				ent: &mlpWeights{in: C, d: d, out: 1, w1: gauss(C*d, 1/math.Sqrt(float64(C))), b1: gauss(d, 0.5),
					w2: gauss(d, 1/math.Sqrt(float64(d))), b2: gauss(1, 0.3)}}
			if tc.noClsBias {
				net.cls.b = nil
			}
			if tc.noBias {
				clear(net.ent.b1)
				clear(net.ent.b2)
			}
			// The features as the data owner shares them (the plaintext
			// reference uses the encoded values).
			zEnc, err := fp.EncodeTensor(gauss(B*H, tc.zScale), B, H)
			if err != nil {
				t.Fatal(err)
			}
			z := fp.DecodeTensor(zEnc)

			type out struct {
				folded, unfolded         *share.Tensor
				foldedRds, unfoldedRds   int64
				foldedSent, unfoldedSent int64
			}
			seeds := [2]share.Seed{{byte(ci), 3}, {byte(ci), 4}}
			r, err := runLocal(context.Background(), localConfig{FixedPoint: fp, Seeds: seeds}, func(ctx context.Context, s *protocol.Session) (out, error) {
				var o out
				p := &Prepared{arch: a, party: s.Party(), fp: s.FixedPoint()}
				var nw *Net
				var cl *linear
				var em *mlpWeights
				if s.Party() == 0 {
					nw, cl, em = net, &net.cls, net.ent
				}
				if err := p.prepareHead(ctx, s, nw); err != nil {
					return o, err
				}
				if p.cls != nil || p.ent == nil {
					return o, fmt.Errorf("prepareHead kept the classifier apart")
				}
				// The unfolded head's weights, shared as before the fold.
				cls, err := p.shareLin(ctx, s, cl, H, C, 1)
				if err != nil {
					return o, err
				}
				ent, err := p.shareMLP(ctx, s, em, C, 1)
				if err != nil {
					return o, err
				}
				var x *share.Tensor
				if s.Party() == 1 {
					x, err = s.ShareInput(1, &share.Tensor{Shape: []int{B, H}, Data: zEnc.Data})
				} else {
					x, err = s.ShareInput(1, nil, B, H)
				}
				if err != nil {
					return o, err
				}
				before := s.Stream().Stats()
				if o.folded, err = p.entropy(ctx, s, x); err != nil {
					return o, err
				}
				mid := s.Stream().Stats()
				logits, err := p.lin(ctx, s, x, cls)
				if err != nil {
					return o, err
				}
				if o.unfolded, err = p.mlp(ctx, s, logits, ent, nil); err != nil {
					return o, err
				}
				after := s.Stream().Stats()
				o.foldedRds, o.foldedSent = mid.Rounds-before.Rounds, mid.BytesSent-before.BytesSent
				o.unfoldedRds, o.unfoldedSent = after.Rounds-mid.Rounds, after.BytesSent-mid.BytesSent
				return o, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for pi, o := range r {
				if o.foldedRds != 10 || o.unfoldedRds != 12 {
					t.Errorf("party %d: folded head %d rounds, unfolded %d; want 10 and 12", pi, o.foldedRds, o.unfoldedRds)
				}
				if o.foldedSent >= o.unfoldedSent {
					t.Errorf("party %d: folded head sent %d bytes, unfolded %d: want fewer", pi, o.foldedSent, o.unfoldedSent)
				}
			}
			open := func(a, b *share.Tensor) []float64 {
				t.Helper()
				if a.Len() != B || b.Len() != B {
					t.Fatalf("shares of %v and %v, want %d values", a.Shape, b.Shape, B)
				}
				w := make([]uint64, B)
				if err := share.Reconstruct(w, a.Data, b.Data); err != nil {
					t.Fatal(err)
				}
				v := make([]float64, B)
				for i, x := range w {
					v[i] = fp.Decode(x)
				}
				return v
			}
			folded, unfolded := open(r[0].folded, r[1].folded), open(r[0].unfolded, r[1].unfolded)

			u := fp.Ulp()
			ue := math.Ldexp(u, -int(foldExtraBits(fp.FracBits)))
			neg, pos := 0, 0
			var worst [2]float64 // largest error ÷ bound, folded and unfolded
			for bi := 0; bi < B; bi++ {
				zr := z[bi*H : (bi+1)*H]
				var zAbs float64
				for _, v := range zr {
					zAbs += math.Abs(v)
				}
				logits := make([]float64, C)
				for c := range logits {
					if net.cls.b != nil {
						logits[c] = net.cls.b[c]
					}
					for k, v := range zr {
						logits[c] += v * net.cls.w[k*C+c]
					}
				}
				// The plaintext MLP and, per hidden unit, the error bound of
				// its pre-activation along each path: a truncation (≤ 1 ulp),
				// the bias encoded (½ ulp), the weights rounded (½ ulp at their
				// precision, times the inputs' magnitudes) and, unfolded, the
				// logits' own errors through |W1|.
				eLogit := 1.5*u + 0.5*u*zAbs
				want := net.ent.b2[0]
				var bound [2]float64
				var relu float64
				for j := 0; j < d; j++ {
					h := net.ent.b1[j]
					eU := 1.5 * u
					for c, l := range logits {
						w := net.ent.w1[c*d+j]
						h += l * w
						eU += (math.Abs(w)+0.5*u)*eLogit + 0.5*u*math.Abs(l)
					}
					eF := 1.5*u + 0.5*ue*zAbs
					if h < 0 {
						neg++
					} else {
						pos++
					}
					hr := max(h, 0)
					want += hr * net.ent.w2[j]
					w2 := math.Abs(net.ent.w2[j]) + 0.5*u
					bound[0] += w2 * eF
					bound[1] += w2 * eU
					relu += hr
				}
				for i := range bound {
					// W2 rounded, b2 encoded, the last truncation; float slack.
					bound[i] += 0.5*u*relu + 1.5*u + 1e-12
				}
				for i, got := range []float64{folded[bi], unfolded[bi]} {
					e := math.Abs(got - want)
					if e > bound[i] {
						t.Errorf("candidate %d, %s: %.8f, plaintext %.8f (error %.3g > bound %.3g)", bi, []string{"folded", "unfolded"}[i], got, want, e, bound[i])
					}
					worst[i] = max(worst[i], e/bound[i])
				}
			}
			if neg == 0 || pos == 0 {
				t.Fatalf("%d negative and %d non-negative hidden pre-activations: want both", neg, pos)
			}
			t.Logf("largest error ÷ bound: folded %.3f, unfolded %.3f", worst[0], worst[1])
		})
	}
}

// TestFoldAffine checks the composition of two affine maps against applying
// them in turn, with and without biases, and its refusal of maps that do not
// compose.
func TestFoldAffine(t *testing.T) {
	first := &linear{in: 2, out: 3, w: []float64{1, 2, 3, 4, 5, 6}, b: []float64{0.5, -1, 2}}
	second := &linear{in: 3, out: 2, w: []float64{1, -1, 0, 2, 3, 0.5}, b: []float64{10, -10}}
	noBias := func(l *linear) *linear { c := *l; c.b = nil; return &c }
	apply := func(l *linear, x []float64) []float64 {
		y := make([]float64, l.out)
		for c := range y {
			if l.b != nil {
				y[c] = l.b[c]
			}
			for r, v := range x {
				y[c] += v * l.w[r*l.out+c]
			}
		}
		return y
	}
	for _, tc := range []struct {
		name          string
		first, second *linear
		err           string
	}{
		{name: "both biases", first: first, second: second},
		{name: "no first bias", first: noBias(first), second: second},
		{name: "no biases", first: noBias(first), second: noBias(second)},
		{name: "inner widths differ", first: first, second: &linear{in: 2, out: 2, w: make([]float64, 4)}, err: "do not compose"},
		{name: "short weights", first: &linear{in: 2, out: 3, w: make([]float64, 5)}, second: second, err: "do not compose"},
		{name: "short bias", first: &linear{in: 2, out: 3, w: make([]float64, 6), b: []float64{1}}, second: second, err: "do not compose"},
		{name: "missing map", first: first, err: "missing"},
		{name: "overflow", first: &linear{in: 1, out: 1, w: []float64{1e300}}, second: &linear{in: 1, out: 1, w: []float64{1e300}}, err: "+Inf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := foldAffine(tc.first, tc.second)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if f.in != tc.first.in || f.out != tc.second.out {
				t.Fatalf("composed %d×%d, want %d×%d", f.in, f.out, tc.first.in, tc.second.out)
			}
			for _, x := range [][]float64{{0, 0}, {1, 0}, {0, 1}, {-2.5, 0.75}} {
				got, want := apply(f, x), apply(tc.second, apply(tc.first, x))
				for i := range want {
					if math.Abs(got[i]-want[i]) > 1e-12 {
						t.Errorf("x = %v: composed %v, in turn %v", x, got, want)
					}
				}
			}
		})
	}
}

// TestHeadCost runs the head of random proxies of each family on a shared
// encoder output and asserts its exact rounds and bytes against HeadCost, and
// that HeadCost refuses what it does not cover.
func TestHeadCost(t *testing.T) {
	for _, c := range []struct {
		name   string
		family model.Family
		batch  int
		rounds int64
		entD   int // Arch.EntropyHidden
	}{
		{"bert", model.BERT, 3, 18, 0},
		{"distilbert", model.DistilBERT, 1, 18, 0},
		{"vit", model.ViT, 4, 25, 0},
		{"vit batch 70", model.ViT, 70, 25, 0},
		{"bert, entropy MLP 12 wide", model.BERT, 3, 18, 12},
		{"vit, entropy MLP 12 wide", model.ViT, 4, 25, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Arch{Family: c.family, Layers: 1, Heads: 2, HeadDim: 3, Hidden: 10, Seq: 5, Labels: 3, MLPHidden: 4, EntropyHidden: c.entD}
			net, err := RandomNet(a, 2)
			if err != nil {
				t.Fatal(err)
			}
			B := c.batch
			rng := rand.New(rand.NewPCG(5, 5))
			xs := make([]float64, B*a.Seq*a.Hidden)
			for i := range xs {
				xs[i] = rng.NormFloat64()
			}
			r, err := runLocal(context.Background(), localConfig{}, func(ctx context.Context, s *protocol.Session) (twoparty.Cost, error) {
				var nw *Net
				if s.Party() == 0 {
					nw = net
				}
				p, err := Prepare(ctx, s, a, nw, Options{})
				if err != nil {
					return twoparty.Cost{}, err
				}
				x, err := dataOwnerInput(s, xs, B, a.Seq, a.Hidden)
				if err != nil {
					return twoparty.Cost{}, err
				}
				m := twoparty.NewMeter(s)
				h, err := p.head(ctx, s, x)
				if err != nil {
					return twoparty.Cost{}, err
				}
				if h.Len() != B {
					return twoparty.Cost{}, fmt.Errorf("head gave %v, want %d entropies", h.Shape, B)
				}
				return m.Since(), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			rounds, bytes, err := HeadCost(a, B)
			if err != nil {
				t.Fatal(err)
			}
			if rounds != c.rounds {
				t.Errorf("HeadCost: %d rounds, want %d", rounds, c.rounds)
			}
			for p := range 2 {
				got := r[p].Stream
				if got.Rounds != rounds || got.BytesSent != bytes[p] {
					t.Errorf("party %d: %d rounds, %d bytes sent; formula %d rounds, %d bytes", p, got.Rounds, got.BytesSent, rounds, bytes[p])
				}
			}
		})
	}
	ok := Arch{Family: model.BERT, Layers: 1, Heads: 1, HeadDim: 2, Hidden: 4, Seq: 3, Labels: 2, MLPHidden: 2}
	exact := ok
	exact.Ablation.ExactEntropy = true
	tanh := ok
	tanh.TanhPooler = true
	ffn := ok
	ffn.Intermediate, ffn.Act = 8, "relu"
	for _, c := range []struct {
		name  string
		a     Arch
		batch int
	}{
		{"exact entropy", exact, 1},
		{"tanh pooler", tanh, 1},
		{"ffn", ffn, 1},
		{"batch 0", ok, 0},
		{"invalid arch", Arch{}, 1},
	} {
		if _, _, err := HeadCost(c.a, c.batch); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

package proxy

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// recorder is a softmax that records its inputs (the masked scores) before
// passing them to the proxy's MLP.
type recorder struct {
	nn.Module
	scores []*nn.Tensor
}

func (r *recorder) Forward(x *nn.Tensor) (*nn.Tensor, error) {
	r.scores = append(r.scores, x.Clone())
	return r.Module.Forward(x)
}

// randomProxy builds an untrained SelectFormer proxy of target (random MLPs,
// softmax fills drawn at random, entropy MLP of width 4) for inputs of T
// tokens.
func randomProxy(t *testing.T, target *model.Model, ph Shape, ab Ablation, T int) *Proxy {
	t.Helper()
	rng := nn.NewRNG(11)
	need := func(module string, d int) (*mlp.MLP, error) {
		switch {
		case strings.HasSuffix(module, "attn_softmax"):
			m, err := mlp.New(mlp.AttnSoftmax, module, T, d, 0, rng)
			if err == nil {
				for j := range m.Fill {
					m.Fill[j] = rng.NormFloat64()
				}
			}
			return m, err
		case strings.HasSuffix(module, "layernorm"):
			m, err := mlp.New(mlp.InvSqrt, module, 1, d, 1e-12, rng)
			if err == nil {
				// A positive reciprocal of moderate size.
				m.FC2.B.Value.Data[0] = 1
			}
			return m, err
		default:
			return mlp.New(mlp.SoftmaxEntropy, module, len(target.Config.Labels), d, 0, rng)
		}
	}
	scores := make([][]float64, len(target.Blocks))
	for i := range scores {
		for h := 0; h < target.Config.Heads; h++ {
			scores[i] = append(scores[i], float64(h))
		}
	}
	p, err := buildProxy(target, ph, ab, 4, scores, need)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// directRanges computes a proxy's maxima (over every row, padded ones
// included) the plain way: the blocks' own Forward on inputs whose padded
// rows are zeroed, the softmax MLP's probabilities P from its own Forward
// on the recorded masked scores, P·V, and each LayerNorm's statistics from
// its definition.
func directRanges(t *testing.T, p *Proxy, in model.Input) (*Ranges, *nn.Tensor) {
	t.Helper()
	m := p.Model
	m.SetTraining(false)
	x, mask, err := m.Embed(in)
	if err != nil {
		t.Fatal(err)
	}
	B, T, H := x.Shape[0], x.Shape[1], x.Shape[2]
	padded := func(bi, j int) bool { return mask != nil && mask.Data[bi*T+j] == 0 }
	r := &Ranges{Samples: B}
	ln := func(l *nn.LayerNorm, x *nn.Tensor, rows func(int) bool) LayerNormRanges {
		_, emulated := l.InvSqrt.(*mlp.MLP)
		out := LayerNormRanges{Emulated: emulated}
		for bi := 0; bi < B; bi++ {
			for tt := 0; tt < x.Shape[1]; tt++ {
				if !rows(tt) {
					continue
				}
				row := x.Data[(bi*x.Shape[1]+tt)*H : (bi*x.Shape[1]+tt+1)*H]
				mu, ss := 0.0, 0.0
				for _, a := range row {
					mu += a / float64(H)
				}
				for _, a := range row {
					ss += (a - mu) * (a - mu)
				}
				v := nn.New(1, 1)
				v.Data[0] = ss / float64(H)
				rv, err := l.InvSqrt.Forward(v)
				if err != nil {
					t.Fatal(err)
				}
				rr := rv.Data[0]
				pt := padded(bi, tt)
				out.SumSquares.observe(ss, pt)
				out.Var.observe(ss/float64(H), pt)
				out.R.observe(rr, pt)
				for j, a := range row {
					g := l.Gamma.Value.Data[j]
					out.Centred.observe(a-mu, pt)
					out.Square.observe((a-mu)*(a-mu), pt)
					out.RGamma.observe(rr*g, pt)
					if emulated {
						out.Product.observe((a-mu)*rr*g, pt)
					} else {
						out.Product.observe((a-mu)*rr, pt)
					}
				}
			}
		}
		return out
	}
	for i, b := range m.Blocks {
		last := i == len(m.Blocks)-1
		rows := func(tt int) bool { return !last || tt == 0 }
		x = x.Clone()
		for bi := 0; bi < B; bi++ {
			for j := 0; j < T; j++ {
				if padded(bi, j) {
					clear(x.Data[(bi*T+j)*H : (bi*T+j+1)*H])
				}
			}
		}
		var lr LayerRanges
		y := x
		if b.PreLN {
			lr.LN = ln(b.LN1, x, func(int) bool { return true })
			if y, err = b.LN1.Forward(x); err != nil {
				t.Fatal(err)
			}
		}
		e := p.AttnMLP[i]
		rec := &recorder{Module: b.Attn.Softmax}
		b.Attn.Softmax = rec
		next, err := b.Forward(x, mask)
		b.Attn.Softmax = rec.Module
		if err != nil {
			t.Fatal(err)
		}
		if e != nil {
			sc := rec.scores[0] // [B, nh, T, T], padded keys −Inf
			prob, err := e.Forward(sc)
			if err != nil {
				t.Fatal(err)
			}
			v, err := b.Attn.V.Forward(y)
			if err != nil {
				t.Fatal(err)
			}
			nh, d := b.Attn.Heads, e.Hidden()
			dh := v.Cols() / nh
			lr.Heads = make([]AttentionRanges, nh)
			for bi := 0; bi < B; bi++ {
				for h := 0; h < nh; h++ {
					a := &lr.Heads[h]
					for tt := 0; tt < T; tt++ {
						if !rows(tt) {
							continue
						}
						pt := padded(bi, tt)
						off := ((bi*nh+h)*T + tt) * T
						srow, prow := sc.Data[off:off+T], prob.Data[off:off+T]
						for c := 0; c < d; c++ {
							prod, pre := 0.0, e.FC1.B.Value.Data[c]
							for j, s := range srow {
								w := e.FC1.W.Value.Data[c*T+j]
								if math.IsInf(s, -1) {
									pre += e.Fill[j] * w
								} else {
									prod += s * w
									pre += s * w
								}
							}
							a.Product.observe(prod, pt)
							a.Pre.observe(pre, pt)
							a.Hidden.observe(max(pre, 0), pt)
						}
						for x := 0; x < dh; x++ {
							pv, bv := 0.0, 0.0
							for j := 0; j < T; j++ {
								if !padded(bi, j) {
									vj := v.Data[(bi*T+j)*v.Cols()+h*dh+x]
									pv += prow[j] * vj
									bv += e.FC2.B.Value.Data[j] * vj
								}
							}
							a.HN.observe(pv-bv, pt)
							a.Context.observe(pv, pt)
						}
					}
				}
			}
		}
		if !b.PreLN {
			// The LayerNorm's input x + Attn(x), recovered from its output
			// would need the inverse: recompute it.
			if err := b.Attn.SetMask(mask); err != nil {
				t.Fatal(err)
			}
			att, err := b.Attn.Forward(y)
			if err != nil {
				t.Fatal(err)
			}
			if err := nn.AddInPlace(att, x); err != nil {
				t.Fatal(err)
			}
			lr.LN = ln(b.LN1, att, rows)
		}
		r.Layers = append(r.Layers, lr)
		x = next
	}
	if m.FinalLN != nil {
		cls, _, err := model.FirstToken(x)
		if err != nil {
			t.Fatal(err)
		}
		cls.Shape = []int{B, 1, H}
		l := ln(m.FinalLN, cls, func(int) bool { return true })
		r.FinalLN = &l
	}
	logits, err := p.Logits(in)
	if err != nil {
		t.Fatal(err)
	}
	return r, logits
}

func tinyViT(t *testing.T) (*model.Model, model.Input) {
	t.Helper()
	cfg := model.Config{Family: model.ViT, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32, LayerNormEps: 1e-12, HiddenAct: "gelu",
		ImageSize: 8, PatchSize: 4, NumChannels: 1, Labels: model.DefaultLabels(3)}
	m, err := model.New(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	rng := nn.NewRNG(4)
	const n = 20
	px := make([][]float64, n)
	for i := range px {
		px[i] = make([]float64, 64)
		for j := range px[i] {
			px[i][j] = rng.NormFloat64()
		}
	}
	return m, model.Input{Pixels: px}
}

// TestValueRanges: on tiny random proxies (text with padding, ViT; every
// module emulated, and the exact softmax and LayerNorm ablations), the
// recorded maxima equal the direct computation's, the pass's logits equal
// Logits', and the batches' maxima merge to the whole set's.
func TestValueRanges(t *testing.T) {
	text, textIn, _ := tinyText(t)
	vit, vitIn := tinyViT(t)
	for _, c := range []struct {
		name   string
		target *model.Model
		in     model.Input
		T      int
		ab     Ablation
	}{
		{"text", text, textIn, 8, Ablation{}},
		{"text NoAttnSM", text, textIn, 8, NoAttnSM},
		{"text NoAttnLN", text, textIn, 8, NoAttnLN},
		{"vit", vit, vitIn, 5, Ablation{}},
		{"vit NoAttnLN", vit, vitIn, 5, NoAttnLN},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := randomProxy(t, c.target, Shape{Layers: 2, Heads: 2, MLPHidden: 4}, c.ab, c.T)
			in, err := c.in.Select(seq(20))
			if err != nil {
				t.Fatal(err)
			}
			got, logits, err := p.rangesBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			want, wantLogits := directRanges(t, p, in)
			for i, v := range logits.Data {
				if math.Abs(v-wantLogits.Data[i]) > 1e-12 {
					t.Fatalf("logit %d: %v, Logits %v", i, v, wantLogits.Data[i])
				}
			}
			if len(got.Layers) != 2 || got.Samples != 20 {
				t.Fatalf("%d layers, %d samples", len(got.Layers), got.Samples)
			}
			compareRanges(t, "pass", got, want)
			for i, l := range got.Layers {
				if (l.Heads == nil) != c.ab.ExactAttnSoftmax || (l.Heads != nil && len(l.Heads) != 2) {
					t.Errorf("layer %d: %d heads recorded, ablation %+v", i, len(l.Heads), c.ab)
				}
				if l.LN.Emulated == c.ab.ExactLayerNorm || !(l.LN.Square.All > 0) {
					t.Errorf("layer %d: layernorm %+v, ablation %+v", i, l.LN, c.ab)
				}
				if l.Heads != nil && !(l.Attention().Product.All > 0) {
					t.Errorf("layer %d: attention maxima %+v", i, l.Attention())
				}
			}
			if (got.FinalLN != nil) != (c.target.FinalLN != nil) {
				t.Errorf("final layernorm %v for a target with %v", got.FinalLN, c.target.FinalLN)
			}
			// Batches of 7 merge to the same maxima.
			all, err := p.ValueRanges(in, 7)
			if err != nil {
				t.Fatal(err)
			}
			compareRanges(t, "batched", all, got)
		})
	}
}

func compareRanges(t *testing.T, what string, got, want *Ranges) {
	t.Helper()
	same := func(name string, g, w Max) {
		for _, p := range [][2]float64{{g.All, w.All}, {g.Unpadded, w.Unpadded}} {
			if math.Abs(p[0]-p[1]) > 1e-9*max(1, math.Abs(p[1])) {
				t.Errorf("%s: %s %+v, want %+v", what, name, g, w)
				return
			}
		}
		if g.Unpadded > g.All {
			t.Errorf("%s: %s unpadded above all: %+v", what, name, g)
		}
	}
	sameLN := func(name string, g, w LayerNormRanges) {
		if g.Emulated != w.Emulated {
			t.Errorf("%s: %s emulated %v, want %v", what, name, g.Emulated, w.Emulated)
		}
		same(name+" x−μ", g.Centred, w.Centred)
		same(name+" (x−μ)²", g.Square, w.Square)
		same(name+" Σ(x−μ)²", g.SumSquares, w.SumSquares)
		same(name+" var", g.Var, w.Var)
		same(name+" r", g.R, w.R)
		same(name+" r·γ", g.RGamma, w.RGamma)
		same(name+" product", g.Product, w.Product)
	}
	if got.Samples != want.Samples || len(got.Layers) != len(want.Layers) {
		t.Fatalf("%s: %d samples, %d layers; want %d, %d", what, got.Samples, len(got.Layers), want.Samples, len(want.Layers))
	}
	for i := range got.Layers {
		g, w := got.Layers[i], want.Layers[i]
		if len(g.Heads) != len(w.Heads) {
			t.Fatalf("%s: layer %d: %d heads, want %d", what, i, len(g.Heads), len(w.Heads))
		}
		for h := range g.Heads {
			n := fmt.Sprintf("layer %d head %d", i, h)
			same(n+" q·Gᵀ", g.Heads[h].Product, w.Heads[h].Product)
			same(n+" pre", g.Heads[h].Pre, w.Heads[h].Pre)
			same(n+" h", g.Heads[h].Hidden, w.Heads[h].Hidden)
			same(n+" h·N", g.Heads[h].HN, w.Heads[h].HN)
			same(n+" P·V", g.Heads[h].Context, w.Heads[h].Context)
		}
		sameLN(fmt.Sprintf("layer %d layernorm", i), g.LN, w.LN)
	}
	if (got.FinalLN == nil) != (want.FinalLN == nil) {
		t.Fatalf("%s: final layernorm %v, want %v", what, got.FinalLN, want.FinalLN)
	}
	if got.FinalLN != nil {
		sameLN("final layernorm", *got.FinalLN, *want.FinalLN)
	}
}

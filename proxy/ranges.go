package proxy

import (
	"fmt"
	"math"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// Value ranges: an instrumented plaintext pass that records the largest
// magnitudes the products of a SelectFormer proxy's secure evaluation reach
// (proxy/secure), to decide how narrow a ring those products may be computed
// in (bench/TWOHOSTS.md, step 18).
//
// The pass follows the secure path, not Logits, where the two differ in what
// is computed: a text block's input has its padded rows zeroed (the data
// owner zeroes them before every block), so their queries are the query
// bias alone; a block's attention is evaluated for every token's query but
// in the last block, which runs on the class token alone (the secure path's
// default, Options.FullLastLayer unset), and so is a post-norm block's
// LayerNorm. The class token's results, and so the logits, equal Logits'.

// Max is the largest magnitude a value reaches, over every row the secure
// path computes (All) and over the rows of real tokens alone (Unpadded; equal
// to All without padding).
type Max struct {
	All, Unpadded float64
}

func (m *Max) observe(v float64, padded bool) {
	v = math.Abs(v)
	if v > m.All || math.IsNaN(v) {
		m.All = v
	}
	if !padded && (v > m.Unpadded || math.IsNaN(v)) {
		m.Unpadded = v
	}
}

func (m *Max) merge(o Max) {
	m.All = math.Max(m.All, o.All)
	m.Unpadded = math.Max(m.Unpadded, o.Unpadded)
}

// AttentionRanges are the maxima of one head's attention folded with its
// softmax MLP (proxy/secure's foldedAttention), with W1 [T, d], b1, W2
// [d, T] and b2 the MLP's layers (hidden width d), s the query's scaled
// scores q·kⱼ/√d_h and V the values, both over the unpadded keys j alone
// (the padded keys' are zero there), and Fill the MLP's padding fill.
type AttentionRanges struct {
	// Product is s·W1, the shared × shared product q_h·G_hᵀ.
	Product Max
	// Pre is the MLP's pre-activation s·W1 + b1 + Σ_{padded j} Fillⱼ·W1ⱼ:
	// what the secure path truncates by f + e and passes through ReLU.
	Pre Max
	// Hidden is h = ReLU(Pre).
	Hidden Max
	// HN is h·N[:d] = h·(W2·V), the shared × shared product of P·V.
	HN Max
	// Context is the attention output P·V = h·N[:d] + b2·V.
	Context Max
}

func (a *AttentionRanges) merge(o AttentionRanges) {
	a.Product.merge(o.Product)
	a.Pre.merge(o.Pre)
	a.Hidden.merge(o.Hidden)
	a.HN.merge(o.HN)
	a.Context.merge(o.Context)
}

// LayerNormRanges are the maxima of a LayerNorm as proxy/secure's layerNorm
// evaluates it over the hidden width H: the deviation c = x − μ, the square
// products c², their row sum Σc² (the LayerNorm MLP's input, scaled by 1/H
// in its first layer), the variance Σc²/H, the reciprocal r (the MLP's
// output, or the exact 1/√(var+ε)), r·γ (the operand the MLP's folded
// second layer gives) and the product c·r·γ (kept.Mul with an MLP; with
// the exact reciprocal the product is c·r, and γ is applied after).
type LayerNormRanges struct {
	// Emulated says that the reciprocal square root is an MLP.
	Emulated bool
	// Centred, Square, SumSquares, Var, R, RGamma and Product are |c|, c²,
	// Σc², Σc²/H, |r|, |r·γ| and the product (see the type comment).
	Centred, Square, SumSquares, Var, R, RGamma, Product Max
}

func (l *LayerNormRanges) merge(o LayerNormRanges) {
	l.Emulated = l.Emulated || o.Emulated
	for _, p := range []struct{ dst, src *Max }{{&l.Centred, &o.Centred}, {&l.Square, &o.Square}, {&l.SumSquares, &o.SumSquares},
		{&l.Var, &o.Var}, {&l.R, &o.R}, {&l.RGamma, &o.RGamma}, {&l.Product, &o.Product}} {
		p.dst.merge(*p.src)
	}
}

// LayerRanges are one block's maxima.
type LayerRanges struct {
	// Heads holds each kept head's attention maxima, nil when the block's
	// softmax is exact (no folded attention).
	Heads []AttentionRanges
	// LN is the block's LayerNorm (LN1: before the attention in ViT, after
	// it otherwise).
	LN LayerNormRanges
}

// Ranges are the maxima of a proxy's secure products over the inputs of
// ValueRanges.
type Ranges struct {
	// Samples counts the inputs.
	Samples int
	// Layers holds every block's maxima.
	Layers []LayerRanges
	// FinalLN is ViT's final LayerNorm on the class token (nil for text).
	FinalLN *LayerNormRanges
}

// Attention returns the maxima of layer i's heads together (the zero value
// for an exact softmax).
func (l LayerRanges) Attention() AttentionRanges {
	var a AttentionRanges
	for _, h := range l.Heads {
		a.merge(h)
	}
	return a
}

func (r *Ranges) merge(o *Ranges) {
	r.Samples += o.Samples
	if r.Layers == nil {
		r.Layers = make([]LayerRanges, len(o.Layers))
	}
	for i, l := range o.Layers {
		if l.Heads != nil && r.Layers[i].Heads == nil {
			r.Layers[i].Heads = make([]AttentionRanges, len(l.Heads))
		}
		for h := range l.Heads {
			r.Layers[i].Heads[h].merge(l.Heads[h])
		}
		r.Layers[i].LN.merge(l.LN)
	}
	if o.FinalLN != nil {
		if r.FinalLN == nil {
			r.FinalLN = &LayerNormRanges{}
		}
		r.FinalLN.merge(*o.FinalLN)
	}
}

// ValueRanges runs the instrumented plaintext pass (see Max and the types
// it is part of) of a SelectFormer proxy over every sample of in, in
// batches of batchSize, in evaluation mode.
func (p *Proxy) ValueRanges(in model.Input, batchSize int) (*Ranges, error) {
	if batchSize <= 0 {
		return nil, fmt.Errorf("proxy value ranges: batch size %d", batchSize)
	}
	out := &Ranges{}
	err := inBatches(in, batchSize, "proxy value ranges", func(batch model.Input) error {
		r, _, err := p.rangesBatch(batch)
		if err == nil {
			out.merge(r)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// rangesBatch is ValueRanges on one batch; it also returns the logits.
func (p *Proxy) rangesBatch(in model.Input) (*Ranges, *nn.Tensor, error) {
	if p.Kind != SelectFormer || p.head == nil {
		return nil, nil, fmt.Errorf("value ranges need an initialised SelectFormer proxy (have %q)", p.Kind)
	}
	m := p.Model
	m.SetTraining(false)
	x, mask, err := m.Embed(in)
	if err != nil {
		return nil, nil, err
	}
	B, T := x.Shape[0], x.Shape[1]
	padded := func(bi, t int) bool { return mask != nil && mask.Data[bi*T+t] == 0 }
	r := &Ranges{Samples: B, Layers: make([]LayerRanges, len(m.Blocks))}
	for i, b := range m.Blocks {
		if b.FFN != nil {
			return nil, nil, fmt.Errorf("layer %d has an FFN", i)
		}
		last := i == len(m.Blocks)-1
		// The secure path zeroes the padded rows of every block's input.
		x = x.Clone()
		zeroPadded(x, padded)
		// Every row's LayerNorm where it precedes the attention (the keys
		// need every row); the class row's alone after it in the last block.
		rows := func(t int) bool { return !last || t == 0 }
		y := x
		if b.PreLN {
			if r.Layers[i].LN, err = lnRanges(b.LN1, x, func(int) bool { return true }, padded); err != nil {
				return nil, nil, fmt.Errorf("layer %d: %w", i, err)
			}
			if y, err = b.LN1.Forward(x); err != nil {
				return nil, nil, fmt.Errorf("layer %d: %w", i, err)
			}
		}
		if e := p.AttnMLP[i]; e != nil {
			if r.Layers[i].Heads, err = attnRanges(b.Attn, e, y, rows, padded); err != nil {
				return nil, nil, fmt.Errorf("layer %d: %w", i, err)
			}
		}
		if err := b.Attn.SetMask(mask); err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		att, err := b.Attn.Forward(y)
		if err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if err := nn.AddInPlace(att, x); err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if b.PreLN {
			x = att
			continue
		}
		if r.Layers[i].LN, err = lnRanges(b.LN1, att, rows, padded); err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if x, err = b.LN1.Forward(att); err != nil {
			return nil, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if b.LN2 != nil {
			return nil, nil, fmt.Errorf("layer %d has a second LayerNorm", i)
		}
	}
	if m.FinalLN != nil {
		cls, _, err := model.FirstToken(x)
		if err != nil {
			return nil, nil, err
		}
		cls.Shape = []int{B, 1, cls.Cols()}
		l, err := lnRanges(m.FinalLN, cls, func(int) bool { return true }, func(int, int) bool { return false })
		if err != nil {
			return nil, nil, fmt.Errorf("final layernorm: %w", err)
		}
		r.FinalLN = &l
	}
	logits, err := p.head.forward(x)
	if err != nil {
		return nil, nil, err
	}
	return r, logits, nil
}

// zeroPadded zeroes the padded rows of x [B, T, H].
func zeroPadded(x *nn.Tensor, padded func(bi, t int) bool) {
	B, T, H := x.Shape[0], x.Shape[1], x.Shape[2]
	for bi := 0; bi < B; bi++ {
		for t := 0; t < T; t++ {
			if padded(bi, t) {
				clear(x.Data[(bi*T+t)*H : (bi*T+t+1)*H])
			}
		}
	}
}

// attnRanges records the folded attention's maxima of every head of a (its
// softmax the MLP e) on its input y [B, T, H], over the query rows t with
// rows(t).
func attnRanges(a *nn.MultiHeadAttention, e *mlp.MLP, y *nn.Tensor, rows func(int) bool, padded func(bi, t int) bool) ([]AttentionRanges, error) {
	q, err := a.Q.Forward(y)
	if err != nil {
		return nil, err
	}
	k, err := a.K.Forward(y)
	if err != nil {
		return nil, err
	}
	v, err := a.V.Forward(y)
	if err != nil {
		return nil, err
	}
	B, T, I := y.Shape[0], y.Shape[1], q.Cols()
	nh := a.Heads
	dh := I / nh
	d := e.Hidden()
	if e.In() != T || e.Out() != T || len(e.Fill) != T {
		return nil, fmt.Errorf("softmax mlp of width %d→%d (fill %d) for %d tokens", e.In(), e.Out(), len(e.Fill), T)
	}
	w1, w2 := e.FC1.W.Value.Data, e.FC2.W.Value.Data // [d, T], [T, d]
	b1, b2 := make([]float64, d), make([]float64, T)
	if e.FC1.B != nil {
		copy(b1, e.FC1.B.Value.Data)
	}
	if e.FC2.B != nil {
		copy(b2, e.FC2.B.Value.Data)
	}
	scale := 1 / math.Sqrt(float64(dh))
	out := make([]AttentionRanges, nh)
	s := make([]float64, T)
	n := make([]float64, d*dh) // N[:d] = W2·V over the unpadded keys
	nb := make([]float64, dh)  // N[d] = b2·V
	fill := make([]float64, d)
	hid := make([]float64, d)
	for bi := 0; bi < B; bi++ {
		clear(fill)
		for j := 0; j < T; j++ {
			if padded(bi, j) {
				for c := 0; c < d; c++ {
					fill[c] += e.Fill[j] * w1[c*T+j]
				}
			}
		}
		for h := 0; h < nh; h++ {
			ar := &out[h]
			clear(n)
			clear(nb)
			for j := 0; j < T; j++ {
				if padded(bi, j) {
					continue
				}
				vj := v.Data[(bi*T+j)*I+h*dh : (bi*T+j)*I+(h+1)*dh]
				for c := 0; c < d; c++ {
					wc := w2[j*d+c]
					for x, vv := range vj {
						n[c*dh+x] += wc * vv
					}
				}
				for x, vv := range vj {
					nb[x] += b2[j] * vv
				}
			}
			for t := 0; t < T; t++ {
				if !rows(t) {
					continue
				}
				pt := padded(bi, t)
				qt := q.Data[(bi*T+t)*I+h*dh : (bi*T+t)*I+(h+1)*dh]
				for j := 0; j < T; j++ {
					s[j] = 0
					if padded(bi, j) {
						continue
					}
					kj := k.Data[(bi*T+j)*I+h*dh : (bi*T+j)*I+(h+1)*dh]
					for x, qq := range qt {
						s[j] += qq * kj[x]
					}
					s[j] *= scale
				}
				for c := 0; c < d; c++ {
					prod := 0.0
					for j, sj := range s {
						prod += sj * w1[c*T+j]
					}
					pre := prod + b1[c] + fill[c]
					ar.Product.observe(prod, pt)
					ar.Pre.observe(pre, pt)
					hid[c] = max(pre, 0)
					ar.Hidden.observe(hid[c], pt)
				}
				for x := 0; x < dh; x++ {
					hn := 0.0
					for c, hc := range hid {
						hn += hc * n[c*dh+x]
					}
					ar.HN.observe(hn, pt)
					ar.Context.observe(hn+nb[x], pt)
				}
			}
		}
	}
	return out, nil
}

// lnRanges records the maxima of the LayerNorm ln on x [B, T, H], over the
// rows t with rows(t).
func lnRanges(ln *nn.LayerNorm, x *nn.Tensor, rows func(int) bool, padded func(bi, t int) bool) (LayerNormRanges, error) {
	B, T, H := x.Shape[0], x.Shape[1], x.Shape[2]
	_, emulated := ln.InvSqrt.(*mlp.MLP)
	out := LayerNormRanges{Emulated: emulated}
	type row struct{ bi, t int }
	var idx []row
	var c, vars []float64
	for bi := 0; bi < B; bi++ {
		for t := 0; t < T; t++ {
			if !rows(t) {
				continue
			}
			xr := x.Data[(bi*T+t)*H : (bi*T+t+1)*H]
			mu := 0.0
			for _, a := range xr {
				mu += a
			}
			mu /= float64(H)
			pt := padded(bi, t)
			ss := 0.0
			for _, a := range xr {
				ct := a - mu
				c = append(c, ct)
				out.Centred.observe(ct, pt)
				out.Square.observe(ct*ct, pt)
				ss += ct * ct
			}
			out.SumSquares.observe(ss, pt)
			out.Var.observe(ss/float64(H), pt)
			vars = append(vars, ss/float64(H))
			idx = append(idx, row{bi, t})
		}
	}
	if len(idx) == 0 {
		return out, nil
	}
	v := nn.New(len(vars), 1)
	copy(v.Data, vars)
	rs, err := ln.InvSqrt.Forward(v)
	if err != nil {
		return out, fmt.Errorf("layernorm %s: %w", ln.Gamma.Name, err)
	}
	if rs.Len() != len(vars) {
		return out, fmt.Errorf("layernorm %s: %d reciprocals for %d rows", ln.Gamma.Name, rs.Len(), len(vars))
	}
	g := ln.Gamma.Value.Data
	for k, rw := range idx {
		pt := padded(rw.bi, rw.t)
		r := rs.Data[k]
		out.R.observe(r, pt)
		for j := 0; j < H; j++ {
			ct := c[k*H+j]
			out.RGamma.observe(r*g[j], pt)
			if emulated {
				out.Product.observe(ct*r*g[j], pt)
			} else {
				out.Product.observe(ct*r, pt)
			}
		}
	}
	return out, nil
}

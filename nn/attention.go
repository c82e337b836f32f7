package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// DefaultMaskFill is the score given to masked (padding) keys before the softmax.
const DefaultMaskFill = -1e9

// MultiHeadAttention is multi-head self-attention over x [B, T, D]:
// softmax(Q·Kᵀ/√d_h, masked) · V per head, concatenated and projected by O.
// The softmax is the pluggable module Softmax, applied to scores [B, H, T, T] along
// the last dimension after masked keys' scores were set to MaskFill.
type MultiHeadAttention struct {
	// Q, K, V and O are the query, key, value and output projections.
	Q, K, V, O *Linear
	// Heads is the number of heads; the width D of Q, K and V must be a multiple.
	Heads int
	// Softmax normalises the scores; *Softmax by default.
	Softmax Module
	// MaskFill replaces the scores of masked keys (DefaultMaskFill by default).
	MaskFill float64
	// ProbDropout is applied to the attention probabilities (identity unless training).
	ProbDropout *Dropout

	mask          []float64
	b, t          int
	q, k, v, p    *Tensor
	maskForward   []float64
	scaleForwardB float64
}

// NewMultiHeadAttention returns attention of width dim with heads heads whose four
// projections are named qName, kName, vName and oName (each gets ".weight"/".bias"),
// initialised as by NewLinear (zero for a nil rng).
func NewMultiHeadAttention(qName, kName, vName, oName string, dim, heads int, rng *rand.Rand) (*MultiHeadAttention, error) {
	if heads <= 0 || dim%heads != 0 {
		return nil, fmt.Errorf("nn: attention width %d is not a multiple of %d heads", dim, heads)
	}
	return &MultiHeadAttention{
		Q: NewLinear(qName, dim, dim, true, rng), K: NewLinear(kName, dim, dim, true, rng),
		V: NewLinear(vName, dim, dim, true, rng), O: NewLinear(oName, dim, dim, true, rng),
		Heads: heads, Softmax: &Softmax{}, MaskFill: DefaultMaskFill, ProbDropout: &Dropout{},
	}, nil
}

// SetMask sets the key mask used by the following forward passes: mask [B, T] with 1
// for tokens to attend to and 0 for padding; nil attends to every token.
func (a *MultiHeadAttention) SetMask(mask *Tensor) error {
	if mask == nil {
		a.mask = nil
		return nil
	}
	if len(mask.Shape) != 2 {
		return fmt.Errorf("attention: mask shape %v, want [batch, seq]", mask.Shape)
	}
	a.mask = mask.Data
	return nil
}

// SetTraining switches attention-probability dropout on or off.
func (a *MultiHeadAttention) SetTraining(on bool) {
	if a.ProbDropout != nil {
		a.ProbDropout.SetTraining(on)
	}
	SetTraining(on, a.Softmax)
}

// Forward computes self-attention of x [B, T, D].
func (a *MultiHeadAttention) Forward(x *Tensor) (*Tensor, error) {
	if len(x.Shape) != 3 {
		return nil, fmt.Errorf("attention: input %v, want [batch, seq, dim]", x.Shape)
	}
	b, t := x.Shape[0], x.Shape[1]
	if a.mask != nil && len(a.mask) != b*t {
		return nil, fmt.Errorf("attention: mask of %d entries for input %v", len(a.mask), x.Shape)
	}
	q, err := a.Q.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("attention query: %w", err)
	}
	k, err := a.K.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("attention key: %w", err)
	}
	v, err := a.V.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("attention value: %w", err)
	}
	d := q.Cols()
	if a.Heads <= 0 || d%a.Heads != 0 || k.Cols() != d || v.Cols() != d {
		return nil, fmt.Errorf("attention: widths q %d k %d v %d do not split into %d heads", d, k.Cols(), v.Cols(), a.Heads)
	}
	h, dh := a.Heads, d/a.Heads
	scale := 1 / math.Sqrt(float64(dh))
	scores := New(b, h, t, t)
	qm, km, vm := q.matrix(), k.matrix(), v.matrix()
	sm := scores.matrix() // [B·H·T, T]
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			s := sub(sm, (bi*h+hi)*t, 0, t, t)
			gemm(false, true, scale, sub(qm, bi*t, hi*dh, t, dh), sub(km, bi*t, hi*dh, t, dh), 0, s)
			if a.mask != nil {
				for j := 0; j < t; j++ {
					if a.mask[bi*t+j] == 0 {
						for i := 0; i < t; i++ {
							s.Data[i*s.Stride+j] = a.MaskFill
						}
					}
				}
			}
		}
	}
	p, err := a.Softmax.Forward(scores)
	if err != nil {
		return nil, fmt.Errorf("attention softmax: %w", err)
	}
	if !SameShape(p, scores) {
		return nil, fmt.Errorf("attention: softmax returned %v for scores %v", p.Shape, scores.Shape)
	}
	if a.ProbDropout != nil {
		if p, err = a.ProbDropout.Forward(p); err != nil {
			return nil, fmt.Errorf("attention: %w", err)
		}
	}
	ctx := New(b, t, d)
	pm, cm := p.matrix(), ctx.matrix()
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			gemm(false, false, 1, sub(pm, (bi*h+hi)*t, 0, t, t), sub(vm, bi*t, hi*dh, t, dh), 0, sub(cm, bi*t, hi*dh, t, dh))
		}
	}
	out, err := a.O.Forward(ctx)
	if err != nil {
		return nil, fmt.Errorf("attention output: %w", err)
	}
	a.b, a.t, a.q, a.k, a.v, a.p = b, t, q, k, v, p
	a.maskForward = slices.Clone(a.mask)
	a.scaleForwardB = scale
	return out, nil
}

// Backward propagates through the projections, the weighted sum, the softmax and
// the scaled scores.
func (a *MultiHeadAttention) Backward(dy *Tensor) (*Tensor, error) {
	if a.p == nil {
		return nil, fmt.Errorf("attention: backward before forward")
	}
	dctx, err := a.O.Backward(dy)
	if err != nil {
		return nil, fmt.Errorf("attention output: %w", err)
	}
	b, t, d := a.b, a.t, a.q.Cols()
	h, dh := a.Heads, d/a.Heads
	dp := New(b, h, t, t)
	dv := New(b, t, d)
	dpm, pm, dcm, vm, dvm := dp.matrix(), a.p.matrix(), dctx.matrix(), a.v.matrix(), dv.matrix()
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			dc := sub(dcm, bi*t, hi*dh, t, dh)
			gemm(false, true, 1, dc, sub(vm, bi*t, hi*dh, t, dh), 0, sub(dpm, (bi*h+hi)*t, 0, t, t))
			gemm(true, false, 1, sub(pm, (bi*h+hi)*t, 0, t, t), dc, 0, sub(dvm, bi*t, hi*dh, t, dh))
		}
	}
	if a.ProbDropout != nil {
		if dp, err = a.ProbDropout.Backward(dp); err != nil {
			return nil, fmt.Errorf("attention: %w", err)
		}
	}
	ds, err := a.Softmax.Backward(dp)
	if err != nil {
		return nil, fmt.Errorf("attention softmax: %w", err)
	}
	if len(ds.Data) != b*h*t*t {
		return nil, fmt.Errorf("attention: softmax gradient %v, want [%d %d %d %d]", ds.Shape, b, h, t, t)
	}
	dq, dk := New(b, t, d), New(b, t, d)
	dsm, qm, km, dqm, dkm := ds.matrix(), a.q.matrix(), a.k.matrix(), dq.matrix(), dk.matrix()
	for bi := 0; bi < b; bi++ {
		for hi := 0; hi < h; hi++ {
			s := sub(dsm, (bi*h+hi)*t, 0, t, t)
			if a.maskForward != nil {
				for j := 0; j < t; j++ {
					if a.maskForward[bi*t+j] == 0 {
						for i := 0; i < t; i++ {
							s.Data[i*s.Stride+j] = 0
						}
					}
				}
			}
			gemm(false, false, a.scaleForwardB, s, sub(km, bi*t, hi*dh, t, dh), 0, sub(dqm, bi*t, hi*dh, t, dh))
			gemm(true, false, a.scaleForwardB, s, sub(qm, bi*t, hi*dh, t, dh), 0, sub(dkm, bi*t, hi*dh, t, dh))
		}
	}
	dx, err := a.Q.Backward(dq)
	if err != nil {
		return nil, fmt.Errorf("attention query: %w", err)
	}
	for _, pair := range []struct {
		l *Linear
		g *Tensor
	}{{a.K, dk}, {a.V, dv}} {
		g, err := pair.l.Backward(pair.g)
		if err != nil {
			return nil, fmt.Errorf("attention %s: %w", pair.l.W.Name, err)
		}
		if err := AddInPlace(dx, g); err != nil {
			return nil, fmt.Errorf("attention: %w", err)
		}
	}
	return dx, nil
}

// Params returns the parameters of Q, K, V, O and of the softmax module.
func (a *MultiHeadAttention) Params() []*Param {
	ps := slices.Concat(a.Q.Params(), a.K.Params(), a.V.Params(), a.O.Params())
	return append(ps, a.Softmax.Params()...)
}

// HeadDim returns the width of one head.
func (a *MultiHeadAttention) HeadDim() int { return a.Q.Out() / a.Heads }

// PruneHeads keeps only the listed heads (in the given order): it removes the other
// heads' rows from Q, K, V and their columns from O. Gradients are reset.
func (a *MultiHeadAttention) PruneHeads(keep []int) error {
	if len(keep) == 0 {
		return fmt.Errorf("attention: cannot prune every head")
	}
	dh, d := a.HeadDim(), a.Q.Out()
	seen := map[int]bool{}
	for _, h := range keep {
		if h < 0 || h >= a.Heads || seen[h] {
			return fmt.Errorf("attention: invalid or repeated head %d of %d", h, a.Heads)
		}
		seen[h] = true
	}
	nd := len(keep) * dh
	for _, l := range []*Linear{a.Q, a.K, a.V} {
		in := l.In()
		w := NewParam(l.W.Name, nd, in)
		for i, h := range keep {
			copy(w.Value.Data[i*dh*in:(i+1)*dh*in], l.W.Value.Data[h*dh*in:(h+1)*dh*in])
		}
		w.Frozen, w.NoDecay = l.W.Frozen, l.W.NoDecay
		l.W = w
		if l.B != nil {
			b := NewParam(l.B.Name, nd)
			for i, h := range keep {
				copy(b.Value.Data[i*dh:(i+1)*dh], l.B.Value.Data[h*dh:(h+1)*dh])
			}
			b.Frozen, b.NoDecay = l.B.Frozen, l.B.NoDecay
			l.B = b
		}
	}
	out := a.O.Out()
	w := NewParam(a.O.W.Name, out, nd)
	for r := 0; r < out; r++ {
		for i, h := range keep {
			copy(w.Value.Data[r*nd+i*dh:r*nd+(i+1)*dh], a.O.W.Value.Data[r*d+h*dh:r*d+(h+1)*dh])
		}
	}
	w.Frozen, w.NoDecay = a.O.W.Frozen, a.O.W.NoDecay
	a.O.W = w
	if a.O.B != nil && a.O.B.Grad != nil {
		a.O.B.Grad.Zero()
	}
	a.Heads = len(keep)
	return nil
}

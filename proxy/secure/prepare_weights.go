package secure

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The shared forms of the model owner's weights: affine maps, approximator
// MLPs and LayerNorms, each weight matrix shared once (protocol.ShareWeight).

// preparedLinear is a shared affine map: the weight-mask-prepared W and, at party 0,
// the encoded bias (added after truncation by f+extra).
type preparedLinear struct {
	w     *protocol.Weight
	b     []uint64
	extra uint
}

// preparedMLP is a shared approximator MLP.
type preparedMLP struct{ l1, l2 preparedLinear }

// preparedLayerNorm is a shared LayerNorm. With the MLP: l1 maps Σ(x−μ)² to the hidden
// layer (its weights are W1/hidden, kept with lnExtraBits more fractional
// bits), l2 maps the hidden layer directly to r·γ (weights W2⊗γ, bias b2·γ),
// which folds γ into the MLP and saves MulPrivateVector's round. Exact: γ is a
// private vector for protocol.MulPrivateVector.
type preparedLayerNorm struct {
	mlp   *preparedMLP
	gamma *protocol.Weight
	beta  []uint64
}

// shareLin shares l (party 0; nil at party 1) as an in×out weight whose
// entries are multiplied by scale and kept with extra more fractional bits.
func (p *Prepared) shareLin(ctx context.Context, s *protocol.Session, l *linear, in, out int, scale float64) (preparedLinear, error) {
	return p.shareLinExtra(ctx, s, l, in, out, scale, 0)
}

func (p *Prepared) shareLinExtra(ctx context.Context, s *protocol.Session, l *linear, in, out int, scale float64, extra uint) (preparedLinear, error) {
	ls := preparedLinear{extra: extra}
	var wt *share.Tensor
	if p.party == 0 {
		ws := l.w
		if scale != 1 {
			ws = make([]float64, len(l.w))
			for i, v := range l.w {
				ws[i] = v * scale
			}
		}
		enc, err := encode(ws, p.fp.FracBits+extra)
		if err != nil {
			return ls, err
		}
		if wt, err = share.FromData(enc, in, out); err != nil {
			return ls, err
		}
		if l.b != nil {
			bs := make([]float64, len(l.b))
			for i, v := range l.b {
				bs[i] = v * scale
			}
			if ls.b, err = encode(bs, p.fp.FracBits); err != nil {
				return ls, err
			}
		}
	}
	w, err := s.ShareWeight(ctx, p.id(), wt, in, out)
	if err != nil {
		return ls, err
	}
	ls.w = w
	return ls, nil
}

// shareMLP shares an approximator in→d→out.
func (p *Prepared) shareMLP(ctx context.Context, s *protocol.Session, m *mlpWeights, in, out int) (*preparedMLP, error) {
	d := p.arch.MLPHidden
	var l1, l2 *linear
	if m != nil {
		l1 = &linear{in: in, out: d, w: m.w1, b: m.b1}
		l2 = &linear{in: d, out: out, w: m.w2, b: m.b2}
	}
	a, err := p.shareLin(ctx, s, l1, in, d, 1)
	if err != nil {
		return nil, err
	}
	b, err := p.shareLin(ctx, s, l2, d, out, 1)
	if err != nil {
		return nil, err
	}
	return &preparedMLP{l1: a, l2: b}, nil
}

// prepareLN shares a LayerNorm (see preparedLayerNorm).
func (p *Prepared) prepareLN(ctx context.Context, s *protocol.Session, l *layerNormWeights) (*preparedLayerNorm, error) {
	h, d := p.arch.Hidden, p.arch.MLPHidden
	out := &preparedLayerNorm{}
	if p.party == 0 {
		var err error
		if out.beta, err = encode(l.beta, p.fp.FracBits); err != nil {
			return nil, err
		}
	}
	if p.arch.Ablation.ExactLayerNorm {
		var g *share.Tensor
		if p.party == 0 {
			enc, err := encode(l.gamma, p.fp.FracBits)
			if err != nil {
				return nil, err
			}
			g = &share.Tensor{Shape: []int{h}, Data: enc}
		}
		w, err := s.ShareVector(ctx, p.id(), g, h)
		if err != nil {
			return nil, err
		}
		out.gamma = w
		return out, nil
	}
	var l1, l2 *linear
	if p.party == 0 {
		m := l.inv
		l1 = &linear{in: 1, out: d, w: m.w1, b: m.b1}
		// W2⊗γ: [d, h]; b2·γ.
		w2 := make([]float64, d*h)
		for j := 0; j < d; j++ {
			for k := 0; k < h; k++ {
				w2[j*h+k] = m.w2[j] * l.gamma[k]
			}
		}
		b2 := make([]float64, h)
		for k := range b2 {
			b2[k] = m.b2[0] * l.gamma[k]
		}
		l2 = &linear{in: d, out: h, w: w2, b: b2}
	}
	a, err := p.shareLinExtra(ctx, s, l1, 1, d, 1/float64(h), lnExtraBits)
	if err != nil {
		return nil, err
	}
	if p.party == 0 {
		// The bias of the first layer is not scaled by 1/h.
		if a.b, err = encode(l.inv.b1, p.fp.FracBits); err != nil {
			return nil, err
		}
	}
	b, err := p.shareLin(ctx, s, l2, d, h, 1)
	if err != nil {
		return nil, err
	}
	out.mlp = &preparedMLP{l1: a, l2: b}
	return out, nil
}

package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// A block's feed-forward network and the activations the exact model uses
// (GeLU by its sigmoid form, tanh, the sigmoid itself); the proxies' ReLU
// is fused into the affine map (forward_linear.go).

// blockFFN finishes a block from the attention output att (residual added):
// pre-norm (ViT): att + FFN(LN2(att)); post-norm: h = LN1(att), then
// LN2(h + FFN(h)). A block without an FFN (a pruned proxy) returns att,
// respectively h.
func (p *Prepared) blockFFN(ctx context.Context, s *protocol.Session, att *share.Tensor, b *preparedBlock) (*share.Tensor, error) {
	if p.arch.Family == model.ViT {
		if b.ffnIn == nil {
			return att, nil
		}
		z, err := p.layerNorm(ctx, s, att, b.ln2)
		if err != nil {
			return nil, fmt.Errorf("layernorm 2: %w", err)
		}
		f, err := p.ffn(ctx, s, z, b)
		if err != nil {
			return nil, err
		}
		if err := share.AddInPlace(f, att); err != nil {
			return nil, fmt.Errorf("ffn residual: %w", err)
		}
		return f, nil
	}
	h, err := p.layerNorm(ctx, s, att, &b.ln1)
	if err != nil {
		return nil, fmt.Errorf("layernorm: %w", err)
	}
	if b.ffnIn == nil {
		return h, nil
	}
	f, err := p.ffn(ctx, s, h, b)
	if err != nil {
		return nil, err
	}
	if err := share.AddInPlace(f, h); err != nil {
		return nil, fmt.Errorf("ffn residual: %w", err)
	}
	if f, err = p.layerNorm(ctx, s, f, b.ln2); err != nil {
		return nil, fmt.Errorf("layernorm 2: %w", err)
	}
	return f, nil
}

// ffn evaluates the FFN of the exact model: lin → activation → lin.
func (p *Prepared) ffn(ctx context.Context, s *protocol.Session, x *share.Tensor, b *preparedBlock) (*share.Tensor, error) {
	var h *share.Tensor
	var err error
	if p.arch.Act == "relu" {
		h, err = p.linReLU(ctx, s, x, *b.ffnIn, nil)
	} else if h, err = p.lin(ctx, s, x, *b.ffnIn); err == nil {
		h, err = p.gelu(ctx, s, h)
	}
	if err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	out, err := p.lin(ctx, s, h, *b.ffnOut)
	if err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	return out, nil
}

// sigmoid returns σ(z) = 1/(1+e^{−|z|}) mirrored by the sign of z: the sign
// circuit, |z|, Exp on (−∞, 0], ReciprocalPositive on [1, 2], one multiplexer.
func (p *Prepared) sigmoid(ctx context.Context, s *protocol.Session, z *share.Tensor) (*share.Tensor, error) {
	neg, err := s.MSB(ctx, z)
	if err != nil {
		return nil, err
	}
	zn, err := s.MulBit(ctx, z, neg)
	if err != nil {
		return nil, err
	}
	abs := z.Clone() // |z| = z − 2·z·[z<0]
	for i := range abs.Data {
		abs.Data[i] -= 2 * zn.Data[i]
	}
	e, err := s.Exp(ctx, s.Neg(abs))
	if err != nil {
		return nil, err
	}
	sp, err := s.ReciprocalPositive(ctx, s.AddPublicScalar(e, p.fp.Scale()))
	if err != nil {
		return nil, err
	}
	// σ(z) = sp + [z<0]·(1 − 2sp).
	d := s.AddPublicScalar(s.MulPublicInt(sp, -2), p.fp.Scale())
	dn, err := s.MulBit(ctx, d, neg)
	if err != nil {
		return nil, err
	}
	if err := share.AddInPlace(sp, dn); err != nil {
		return nil, err
	}
	return sp, nil
}

// gelu returns x·σ(1.702·x), the sigmoid form of GeLU.
func (p *Prepared) gelu(ctx context.Context, s *protocol.Session, x *share.Tensor) (*share.Tensor, error) {
	z, err := s.MulPublicScalar(ctx, x, 1.702)
	if err != nil {
		return nil, err
	}
	sg, err := p.sigmoid(ctx, s, z)
	if err != nil {
		return nil, err
	}
	y, err := s.Mul(ctx, x, sg)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, y)
}

// tanh returns 2σ(2x) − 1.
func (p *Prepared) tanh(ctx context.Context, s *protocol.Session, x *share.Tensor) (*share.Tensor, error) {
	sg, err := p.sigmoid(ctx, s, s.MulPublicInt(x, 2))
	if err != nil {
		return nil, err
	}
	return s.AddPublicScalar(s.MulPublicInt(sg, 2), -p.fp.Scale()), nil
}

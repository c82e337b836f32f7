package secure

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// LayerNorm over shares: with its inverse-square-root MLP (γ folded in) or
// CrypTen's exact InvSqrt.

// layerNorm normalises x along its last dimension: exact mean subtraction,
// the squared deviation c² of c = x − μ (SquareKeep), then either the MLP
// for (γ-scaled) 1/√(var+ε) or CrypTen's InvSqrt and γ by
// MulPrivateVector; β by party 0. The product c·r is the square's kept
// opening (KeptOpening.Mul): c − a is opened once for both products, so
// each party sends R·H words fewer per LayerNorm of R rows than with
// Square and Mul.
func (p *Prepared) layerNorm(ctx context.Context, s *protocol.Session, x *share.Tensor, l *preparedLayerNorm) (*share.Tensor, error) {
	H, _ := lastDim(x)
	mu, err := s.Mean(ctx, x, -1)
	if err != nil {
		return nil, err
	}
	c := x.Clone()
	muRows, err := share.BroadcastLast(mu, H)
	if err != nil {
		return nil, err
	}
	if err := share.SubInPlace(c, muRows); err != nil {
		return nil, err
	}
	sq, kept, err := s.SquareKeep(ctx, c)
	if err != nil {
		return nil, err
	}
	ss, err := s.Sum(sq, -1) // Σ (x−μ)², 2f fractional bits
	if err != nil {
		return nil, err
	}
	if ss, err = s.Trunc(ctx, ss); err != nil {
		return nil, err
	}
	var y *share.Tensor
	if l.mlp != nil {
		v, err := reshape(ss, append(ss.Shape, 1)...)
		if err != nil {
			return nil, err
		}
		rg, err := p.mlp(ctx, s, v, l.mlp, nil) // r·γ, [..., H]
		if err != nil {
			return nil, err
		}
		if y, err = kept.Mul(ctx, s, rg); err != nil {
			return nil, err
		}
		if y, err = s.Trunc(ctx, y); err != nil {
			return nil, err
		}
	} else {
		v, err := s.MulPublicScalar(ctx, ss, 1/float64(H))
		if err != nil {
			return nil, err
		}
		if e, err := p.fp.Encode(p.arch.Eps); err == nil && e != 0 {
			v = s.AddPublicScalar(v, e)
		}
		k := p.arch.InvSqrtShift
		r, err := s.InvSqrt(ctx, s.MulPublicInt(v, int64(1)<<(2*k)))
		if err != nil {
			return nil, err
		}
		r = s.MulPublicInt(r, int64(1)<<k)
		rRows, err := share.BroadcastLast(r, H)
		if err != nil {
			return nil, err
		}
		if y, err = kept.Mul(ctx, s, rRows); err != nil {
			return nil, err
		}
		if y, err = s.Trunc(ctx, y); err != nil {
			return nil, err
		}
		if y, err = s.MulPrivateVectorFixed(ctx, y, l.gamma); err != nil {
			return nil, err
		}
	}
	addRowVec(p.party, y, l.beta)
	return y, nil
}

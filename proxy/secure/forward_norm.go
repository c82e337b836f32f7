package secure

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// LayerNorm over shares: with its inverse-square-root MLP (γ folded in) or
// CrypTen's exact InvSqrt.

// layerNormRing is ℓ, the ring Z_2^ℓ of the LayerNorm's two elementwise
// shared × shared products when its MLP emulates 1/√var (every proxy but
// the exact-LayerNorm ablation and the private embeddings' exact
// LayerNorm): the squared deviations (x − μ)² and the product (x − μ)·(r·γ)
// with the MLP's γ-scaled output, by one square-and-product quadruple mod
// 2^ℓ per element (protocol.SquareKeepRing), whose dealer-free generation
// sends ℓ(ℓ+1)/2 = 1,275 bits of Gilboa corrections per cross product
// instead of 2,080, and whose openings are packed at ℓ bits. Both
// products carry 2f fractional bits, so ℓ bounds them to |v| < 2^(ℓ−2−2f):
// 2^16 = 65,536 at f = 16, i.e. |x − μ| < 256 and |(x − μ)·r·γ| < 65,536.
// Measured on the quality tool's trained proxies (bench/TWOHOSTS.md, "Step
// 18, measured"), the largest need ℓ = 41 (|x − μ|² up to 73.6 and
// |(x − μ)·r·γ| up to 7.3; ℓ = 46, 2,585 and 421, for the all-MLP last
// phase): 50 keeps 9 bits (×512) of margin, 4 for the all-MLP variant;
// these are per-element values, not sums over the width. The sum
// Σ(x − μ)² over the row is not bounded by it (measured up to 32,890,
// ℓ = 50, on hidden 32, and it grows with the width): each square is truncated back to
// 64-bit shares (protocol.TruncByRing, the round the variance's truncation
// always took) before the row is summed. A value beyond the bound corrupts
// only its own candidate's score. At f > 16 the bound shrinks by 4× a bit of
// f, as attentionRing's does above f = 20.
const layerNormRing = 50

// layerNorm normalises x along its last dimension: exact mean subtraction,
// the squared deviation c² of c = x − μ (SquareKeep), then either the MLP
// for (γ-scaled) 1/√(var+ε) or CrypTen's InvSqrt and γ by
// MulPrivateVector; β by party 0. The product c·r is the square's kept
// opening (KeptOpening.Mul): c − a is opened once for both products, so
// each party sends R·H words fewer per LayerNorm of R rows than with
// Square and Mul. With the MLP both products run in Z_2^layerNormRing
// (SquareKeepRing), each truncated back to 64-bit shares by TruncByRing in
// the round its truncation takes anyway: the squares one by one before
// their sum (H truncations a row where Z_2^64 truncates the sum once; the
// same round), the product as before. The exact path stays in Z_2^64.
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
	ring := uint(64)
	if l.mlp != nil {
		ring = layerNormRing
	}
	f := p.fp.FracBits
	sq, kept, err := s.SquareKeepRing(ctx, c, ring) // (x−μ)², 2f fractional bits, mod 2^ring
	if err != nil {
		return nil, err
	}
	var ss *share.Tensor
	if ring < 64 {
		// Each square back to 64-bit shares with f fractional bits, then
		// Σ (x−μ)²: the sum may leave the ring's bound.
		if sq, err = s.TruncByRing(ctx, sq, f, ring); err != nil {
			return nil, err
		}
		if ss, err = s.Sum(sq, -1); err != nil {
			return nil, err
		}
	} else {
		if ss, err = s.Sum(sq, -1); err != nil { // Σ (x−μ)², 2f fractional bits
			return nil, err
		}
		if ss, err = s.Trunc(ctx, ss); err != nil {
			return nil, err
		}
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
		if y, err = kept.Mul(ctx, s, rg); err != nil { // mod 2^ring
			return nil, err
		}
		if y, err = s.TruncByRing(ctx, y, f, ring); err != nil {
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

package secure

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Products with the model owner's shared weights and their truncations:
// affine maps, the fused affine map and ReLU, the approximator MLPs, and
// one truncation for several tensors.

// lin computes x·W (+ b at party 0) with truncation.
func (p *Prepared) lin(ctx context.Context, s *protocol.Session, x *share.Tensor, l preparedLinear) (*share.Tensor, error) {
	y, err := s.MatMulWeights(ctx, x, l.w)
	if err != nil {
		return nil, err
	}
	if y, err = s.TruncBy(ctx, y, p.fp.FracBits+l.extra); err != nil {
		return nil, err
	}
	addRowVec(p.party, y, l.b)
	return y, nil
}

// linReLU computes ReLU(x·W + b (+ pre's terms)), b added by party 0, with
// the truncation fused into the ReLU (protocol.TruncReLU: 1 + 7 rounds
// where lin then ReLU takes 1 + 1 + 7). The bias and pre's terms (fixed
// point, f fractional bits) are added before the truncation by 2^k,
// k = f + extra, shifted left by k, so that the sign circuit sees the value
// whose ReLU is taken. This is exact: 2^k·v does not change the low k bits,
// so TruncBy(y + 2^k·v) = TruncBy(y) + v on the same dealer material, and
// the result equals lin followed by (+pre and) ReLU word for word, for
// |y + 2^k·v| < 2^62 (protocol.TruncBound, as for lin's |y|). pre receives
// the untruncated product and k.
func (p *Prepared) linReLU(ctx context.Context, s *protocol.Session, x *share.Tensor, l preparedLinear, pre func(y *share.Tensor, k uint)) (*share.Tensor, error) {
	y, err := s.MatMulWeights(ctx, x, l.w)
	if err != nil {
		return nil, err
	}
	return p.biasTruncReLU(ctx, s, y, l, pre)
}

// biasTruncReLU is linReLU after its product: y = x·W untruncated, l's bias
// (and pre's terms) added shifted, then TruncReLU.
func (p *Prepared) biasTruncReLU(ctx context.Context, s *protocol.Session, y *share.Tensor, l preparedLinear, pre func(y *share.Tensor, k uint)) (*share.Tensor, error) {
	return p.biasTruncReLURing(ctx, s, y, l, pre, 64)
}

// biasTruncReLURing is biasTruncReLU on y shared mod 2^ring
// (protocol.MatMulRing's output; 64: biasTruncReLU): the bias and pre's
// terms are added to the words, of which the truncation reads the low ring
// bits, and it returns 64-bit shares (protocol.TruncReLURing).
func (p *Prepared) biasTruncReLURing(ctx context.Context, s *protocol.Session, y *share.Tensor, l preparedLinear, pre func(y *share.Tensor, k uint), ring uint) (*share.Tensor, error) {
	k := p.fp.FracBits + l.extra
	addRowVecShifted(p.party, y, l.b, k)
	if pre != nil {
		pre(y, k)
	}
	return s.TruncReLURing(ctx, y, k, ring)
}

// mlp evaluates an approximator: lin → (+pre) → ReLU → lin, the first
// truncation fused into the ReLU (linReLU; pre gets the untruncated hidden
// layer and the shift to apply to its fixed-point terms).
func (p *Prepared) mlp(ctx context.Context, s *protocol.Session, x *share.Tensor, m *preparedMLP, pre func(h *share.Tensor, k uint)) (*share.Tensor, error) {
	h, err := p.linReLU(ctx, s, x, m.l1, pre)
	if err != nil {
		return nil, err
	}
	return p.lin(ctx, s, h, m.l2)
}

// truncMany truncates the tensors xs by 2^k in one TruncBy (one round)
// and returns them in their shapes.
func (p *Prepared) truncMany(ctx context.Context, s *protocol.Session, xs []*share.Tensor, k uint) ([]*share.Tensor, error) {
	n := 0
	for _, x := range xs {
		n += x.Len()
	}
	all := &share.Tensor{Shape: []int{n}, Data: make([]uint64, 0, n)}
	for _, x := range xs {
		all.Data = append(all.Data, x.Data...)
	}
	all, err := s.TruncBy(ctx, all, k)
	if err != nil {
		return nil, err
	}
	out := make([]*share.Tensor, len(xs))
	off := 0
	for j, x := range xs {
		out[j] = &share.Tensor{Shape: x.Shape, Data: all.Data[off : off+x.Len() : off+x.Len()]}
		off += x.Len()
	}
	return out, nil
}

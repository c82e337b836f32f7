package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// A block's attention on every token's keys and values: the projections to
// queries, keys and values, the scores, the softmax (its MLP, fused with V
// where it can be, or the exact one) and the context P·V.

// classQKV computes, for a last block prepared with split query and
// key/value weights, the class token's query [B, 1, I] and every token's keys
// and values [B, T, 2I] from the block input y [B, T, H]: both products in
// one round (MatMulWeightsMany), both truncations in one.
func (p *Prepared) classQKV(ctx context.Context, s *protocol.Session, y *share.Tensor, b *preparedBlock) (q, kv *share.Tensor, err error) {
	ys, err := s.MatMulWeightsMany(ctx, []*share.Tensor{y, firstToken(y)}, []*protocol.Weight{b.kv.w, b.q.w})
	if err != nil {
		return nil, nil, err
	}
	kv, q = ys[0], ys[1]
	nkv := kv.Len()
	both := &share.Tensor{Shape: []int{nkv + q.Len()}, Data: make([]uint64, nkv+q.Len())}
	copy(both.Data, kv.Data)
	copy(both.Data[nkv:], q.Data)
	if both, err = s.TruncBy(ctx, both, p.fp.FracBits+b.kv.extra); err != nil {
		return nil, nil, err
	}
	kv.Data, q.Data = both.Data[:nkv:nkv], both.Data[nkv:]
	addRowVec(p.party, kv, b.kv.b)
	addRowVec(p.party, q, b.q.b)
	return q, kv, nil
}

// softmaxPV computes the attention context P·V [B, nh, Tq, dh] of the
// softmax MLP P = ReLU(sc·W1 + b1 (+ pre's terms))·W2 + b2 without computing
// P: with h = ReLU(..) [B, nh, Tq, d],
//
//	P·V = h·(W2·V) + b2·V,
//
// and M = W2·V [B, nh, d, dh] and b2·V [B, nh, dh] are products of the model
// owner's weights by the shared V, available as soon as V is. They ride in
// the first layer's round: Vᵀ·[W2ᵀ | b2ᵀ] (b.attnV) and sc·W1 in one
// MatMulWeightsMany. Then TruncReLU gives h, one MatMul gives h·M, b2·V is
// added (shifted by f) and one truncation by f + f brings the 3f fractional
// bits back to f. Critical path: 1 + 7 + 1 + 1 rounds where the MLP then P·V
// took 1 + 7 + 1 + 1 + 1 + 1; M is not truncated (W2 rounded as before, one
// truncation instead of two). Range: |P·V| < 2^(62−3f) (pvFoldMaxFracBits).
// Padded tokens' values are zero, so they vanish from M and b2·V as from
// P·V.
func (p *Prepared) softmaxPV(ctx context.Context, s *protocol.Session, sc, vh *share.Tensor, b *preparedBlock, pre func(h *share.Tensor, k uint)) (*share.Tensor, error) {
	if len(vh.Shape) != 4 || len(sc.Shape) != 4 {
		return nil, fmt.Errorf("softmax and values: scores %v, values %v", sc.Shape, vh.Shape)
	}
	B, nh, dh := vh.Shape[0], vh.Shape[1], vh.Shape[3]
	d := p.arch.MLPHidden
	vt, err := share.TransposeLast2(vh) // [B, nh, dh, T]
	if err != nil {
		return nil, err
	}
	ys, err := s.MatMulWeightsMany(ctx, []*share.Tensor{sc, vt}, []*protocol.Weight{b.attn.l1.w, b.attnV.w})
	if err != nil {
		return nil, fmt.Errorf("softmax mlp and W2·V: %w", err)
	}
	mv := ys[1] // [B, nh, dh, d+1]: (W2·V)ᵀ | b2·V, 2f fractional bits
	h, err := p.biasTruncReLU(ctx, s, ys[0], b.attn.l1, pre)
	if err != nil {
		return nil, fmt.Errorf("softmax mlp: %w", err)
	}
	m := &share.Tensor{Shape: []int{B, nh, d, dh}, Data: make([]uint64, B*nh*d*dh)}
	bv := make([]uint64, B*nh*dh)
	for g := 0; g < B*nh; g++ {
		src := mv.Data[g*dh*(d+1) : (g+1)*dh*(d+1)]
		dst := m.Data[g*d*dh : (g+1)*d*dh]
		for c := 0; c < dh; c++ {
			for j := 0; j < d; j++ {
				dst[j*dh+c] = src[c*(d+1)+j]
			}
			bv[g*dh+c] = src[c*(d+1)+d]
		}
	}
	out, err := s.MatMul(ctx, h, m) // [B, nh, Tq, dh], 3f fractional bits
	if err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	f := p.fp.FracBits
	Tq := out.Shape[2]
	for g := 0; g < B*nh; g++ {
		for t := 0; t < Tq; t++ {
			row := out.Data[(g*Tq+t)*dh : (g*Tq+t+1)*dh]
			for c := range row {
				row[c] += bv[g*dh+c] << f
			}
		}
	}
	if out, err = s.TruncBy(ctx, out, 2*f+b.attnV.extra); err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	return out, nil
}

// blockQKV projects block i's attention input y to the queries q and the
// keys and values kv ([.., 2·inner], keys first), and returns the residual
// res the attention output adds to: x, or only its first (class) token where
// only the class token's output is needed (a class-query block, or the last
// block). With a padding mask, the key and value biases of the unpadded rows
// (padding.kvb) are added to kv.
func (p *Prepared) blockQKV(ctx context.Context, s *protocol.Session, i int, x, y *share.Tensor, b *preparedBlock, padding *paddingMask, last bool) (q, kv, res *share.Tensor, err error) {
	I := p.arch.inner()
	if b.q != nil {
		// The class token alone reaches the head: its query (one row per
		// candidate) and every token's keys and values, in one round and
		// one truncation.
		if q, kv, err = p.classQKV(ctx, s, y, b); err != nil {
			return nil, nil, nil, fmt.Errorf("qkv: %w", err)
		}
		res = firstToken(x)
	} else {
		qkv, err := p.lin(ctx, s, y, b.qkv) // the key and value biases are in padding.kvb
		if err != nil {
			return nil, nil, nil, fmt.Errorf("qkv: %w", err)
		}
		q, kv, res = cols(qkv, 0, I), cols(qkv, I, 3*I), x
		if last {
			q, res = firstToken(q), firstToken(x)
		}
	}
	if padding != nil {
		addKVBias(kv, padding.kvb, i, kvBiasLayers(p.arch, p.opt), x.Shape[0]*p.arch.Seq, 2*I)
	}
	return q, kv, res, nil
}

// attentionScores splits q and kv into heads and computes the truncated
// scores Q·Kᵀ [B, heads, Tq, T] (all heads and the batch in one exchange),
// returning them with the values split into heads, vh.
func (p *Prepared) attentionScores(ctx context.Context, s *protocol.Session, q, kv *share.Tensor) (sc, vh *share.Tensor, err error) {
	I, nh := p.arch.inner(), p.arch.Heads
	qh, err := share.SplitHeads(q, nh)
	if err != nil {
		return nil, nil, err
	}
	kh, err := share.SplitHeads(cols(kv, 0, I), nh)
	if err != nil {
		return nil, nil, err
	}
	if vh, err = share.SplitHeads(cols(kv, I, 2*I), nh); err != nil {
		return nil, nil, err
	}
	kt, err := share.TransposeLast2(kh)
	if err != nil {
		return nil, nil, err
	}
	sc, err = s.MatMul(ctx, qh, kt) // [B, nh, Tq, T], all heads and the batch in one exchange
	if err != nil {
		return nil, nil, fmt.Errorf("scores: %w", err)
	}
	if sc, err = s.Trunc(ctx, sc); err != nil {
		return nil, nil, fmt.Errorf("scores: %w", err)
	}
	return sc, vh, nil
}

// attentionValues turns block i's scores sc [B, heads, Tq, T] into the
// attention context P·V [B, heads, Tq, dh]: with the block's softmax MLP
// (fused with V where the block has attnV, see softmaxPV), or the exact
// softmax with the padded keys' scores shifted by −C. With a padding mask
// the MLP's hidden layer gets layer i's fill term (fillTerm).
func (p *Prepared) attentionValues(ctx context.Context, s *protocol.Session, i int, sc, vh *share.Tensor, b *preparedBlock, padding *paddingMask) (*share.Tensor, error) {
	var pr, ctxv *share.Tensor // P, or directly P·V (softmaxPV)
	var err error
	if b.attn != nil {
		var pre func(h *share.Tensor, k uint)
		if padding != nil {
			B, nh, Tq := sc.Shape[0], sc.Shape[1], sc.Shape[2]
			pre = fillTerm(padding.fill, i, p.arch.Layers, p.arch.MLPHidden, B, nh*Tq)
		}
		if b.attnV != nil {
			ctxv, err = p.softmaxPV(ctx, s, sc, vh, b, pre)
		} else {
			pr, err = p.mlp(ctx, s, sc, b.attn, pre)
		}
		if err != nil {
			return nil, fmt.Errorf("softmax mlp: %w", err)
		}
	} else {
		if padding != nil && !(p.opt.PublicMask && p.party != 0) {
			shiftPaddedScores(sc, padding.omm, uint64(maskShift)<<p.fp.FracBits)
		}
		if pr, err = s.Softmax(ctx, sc); err != nil {
			return nil, fmt.Errorf("softmax: %w", err)
		}
	}
	if pr != nil {
		if ctxv, err = s.MatMul(ctx, pr, vh); err != nil { // [B, nh, Tq, dh]
			return nil, fmt.Errorf("attention values: %w", err)
		}
		if ctxv, err = s.Trunc(ctx, ctxv); err != nil {
			return nil, fmt.Errorf("attention values: %w", err)
		}
	}
	return ctxv, nil
}

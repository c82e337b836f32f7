package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// A block's attention folded with its softmax MLP (Prepared.foldedAttention):
// no token's keys, values or scores.

// attentionRing is ℓ, the ring Z_2^ℓ of the folded attention's two shared ×
// shared products (q_h·G_hᵀ and h·N_h, with their biases): computed there,
// their dealer-free matrix triples send ℓ(ℓ+1)/2 = 1,485 bits of Gilboa
// corrections a multiply-add instead of 2,080, and their truncations return
// 64-bit shares in the same round (protocol.MatMulRing, TruncByRing,
// TruncReLURing). It bounds the products' values to |v| < 2^(ℓ−2) at
// 2f + e fractional bits: 2^12 = 4,096 at f = 16 (e = 8). Measured on the
// quality tool's trained proxies (bench/TWOHOSTS.md, "Step 18, measured"),
// the largest need ℓ = 47 (48 with the last phase's softmax emulated too):
// 54 keeps 7 bits (×128) of margin. A value beyond the bound corrupts only
// its own candidate's score.
const attentionRing = 54

// foldedAttention computes a block's attention context [B, heads, Tq, dh],
// folded with the softmax MLP (preparedAttentionFold), for every token's
// query (Tq = T) or, in a last block that runs on the class token alone
// (cf.classOnly), the class token's (Tq = 1), from the block's attention
// input y [B, T, H] (padded rows zero). Per batch row, with Y_aug = [y | m]
// ([T, H+1]; m the mask column, all ones without a mask), so that K =
// Y_aug·[Wk; b_K] and V = Y_aug·[Wv; b_V], and e = foldExtraBits(f) the
// extra fractional bits of W_mlp:
//
//  1. Ŷ = Y_augᵀ·[W1 | W2ᵀ | b2ᵀ] ([H+1, 2d+1]) and the queries
//     q = y·Wq + b_Q (the Tq rows) in one MatMulWeightsMany and one
//     truncation by f (q keeps f fractional bits, Ŷ f + e);
//  2. G = Ŷ[:, :d]ᵀ·[Wk; b_K] = W1ᵀ·K ([d, I]) and N = Ŷ[:, d:]ᵀ·[Wv; b_V]
//     = [W2·V; b2·V] ([d+1, I]) in one MatMulWeightsMany and one
//     truncation by f (f + e fractional bits);
//  3. the softmax MLP's hidden layer h = ReLU(q_h·G_hᵀ + b1 (+ fill)) of
//     every head, q_h·G_hᵀ = q_h·K_hᵀ·W1 = sc_h·W1, in one shared × shared
//     product in the ring Z_2^attentionRing (MatMulRing) and one
//     TruncReLURing by f + e, b1 and the padded scores' fill term added
//     shifted before it (biasTruncReLURing, fillTerm);
//  4. the context h·N_h[:d] + N_h[d] = (h·W2 + b2)·V_h = P_h·V_h in one
//     shared × shared product in Z_2^attentionRing, N_h[d] (each party its
//     share) added shifted by f to every query row, the public 1.0's
//     product with it, and one TruncByRing by f + e, which returns 64-bit
//     shares.
//
// 1 + 1 + 1 + 1 + 1 + 7 + 1 + 1 = 14 rounds, as the unfolded path, but the
// data owner opens Y_augᵀ (B·(H+1)·T words) and Ŷ (B·(2d+1)·(H+1)) instead
// of the keys and values (or the scores and V), the products with the
// model owner's weights have (H+1)·(2d+1) + Tq·I + (2d+1)·I outputs per
// batch row instead of T·2I + Tq·I + Tq·d + I·(d+1) (and no m⊗b key and
// value biases: the mask column carries them), and no shared × shared
// product has T columns (BlockCost). Every product carries 2f + e
// fractional bits before its truncation, so |Ŷ|, |G| and |N| must stay
// below 2^(62−2f−e), 2^22 at f = 16 (protocol.TruncBound), and the two
// shared × shared products, |q_h·G_hᵀ + b1 + fill| and the contexts, below
// 2^(attentionRing−2−2f−e), 2^12 at f = 16 (see attentionRing).
//
// View: the data owner's openings of its weight products' inputs are
// masked by the weight triples (X1 − A), the shared × shared products open
// Beaver-masked operands, the truncations and the sign circuit send bits
// masked by their correlations, as on the unfolded path: nothing crosses
// the wire in the clear.
func (p *Prepared) foldedAttention(ctx context.Context, s *protocol.Session, i int, y *share.Tensor, cf *preparedAttentionFold, padding *paddingMask) (*share.Tensor, error) {
	a := p.arch
	if len(y.Shape) != 3 || y.Shape[1] != a.Seq || y.Shape[2] != a.Hidden {
		return nil, fmt.Errorf("input %v, want [batch, %d, %d]", y.Shape, a.Seq, a.Hidden)
	}
	B, T, H, I, nh, dh, d := y.Shape[0], a.Seq, a.Hidden, a.inner(), a.Heads, a.HeadDim, a.MLPHidden
	f := p.fp.FracBits
	d2 := 2*d + 1
	// Y_augᵀ [B, H+1, T]: the last row is the mask as fixed point (m·2^f:
	// shares of the integer mask shifted, or the public mask or ones held by
	// party 0).
	// Scratch words (GetWords): every word is written below,
	// and MatMulWeightsMany keeps no reference to its operands.
	yt := &share.Tensor{Shape: []int{B, H + 1, T}, Data: share.GetWords(B * (H + 1) * T)}
	for bi := 0; bi < B; bi++ {
		src := y.Data[bi*T*H : (bi+1)*T*H]
		dst := yt.Data[bi*(H+1)*T : (bi+1)*(H+1)*T]
		if err := share.TransposeMatrix(dst[:H*T], src, T, H); err != nil {
			return nil, err
		}
		mrow := dst[H*T:]
		clear(mrow) // party 1's share of a public row is zero
		switch {
		case padding == nil:
			if p.party == 0 {
				for t := range mrow {
					mrow[t] = 1 << f
				}
			}
		case p.opt.PublicMask:
			if p.party == 0 {
				for t := range mrow {
					mrow[t] = padding.m.Data[bi*T+t] << f
				}
			}
		default:
			for t := range mrow {
				mrow[t] = padding.m.Data[bi*T+t] << f
			}
		}
	}
	// 1. Ŷ and the queries (the class rows', or every row's).
	yq := y
	if cf.classOnly {
		yq = firstToken(y)
	}
	Tq := yq.Shape[1]
	ys, err := s.MatMulWeightsMany(ctx, []*share.Tensor{yt, yq}, []*protocol.Weight{cf.mlp.w, cf.q.w})
	share.PutWords(yt.Data)
	if err != nil {
		return nil, fmt.Errorf("Y_augᵀ·W_mlp and queries: %w", err)
	}
	// One truncation by f + q's extra bits: q keeps f fractional bits, Ŷ
	// f + e (W_mlp's e extra bits more than Wq's).
	if cf.mlp.extra < cf.q.extra || cf.k.extra != cf.v.extra {
		return nil, fmt.Errorf("extra bits: W_mlp %d, Wq %d, Wk %d, Wv %d", cf.mlp.extra, cf.q.extra, cf.k.extra, cf.v.extra)
	}
	e := cf.mlp.extra - cf.q.extra
	if ys, err = p.truncMany(ctx, s, ys, f+cf.q.extra); err != nil {
		return nil, fmt.Errorf("Y_augᵀ·W_mlp and queries: %w", err)
	}
	yh, q := ys[0], ys[1] // [B, H+1, 2d+1] (f + e fractional bits), [B, Tq, I] (f)
	addRowVec(p.party, q, cf.q.b)
	// 2. G and N.
	yhT, err := share.TransposeLast2(yh) // [B, 2d+1, H+1]
	if err != nil {
		return nil, err
	}
	g1 := &share.Tensor{Shape: []int{B, d, H + 1}, Data: share.GetWords(B * d * (H + 1))[:0]}
	g2 := &share.Tensor{Shape: []int{B, d + 1, H + 1}, Data: share.GetWords(B * (d + 1) * (H + 1))[:0]}
	for bi := 0; bi < B; bi++ {
		blk := yhT.Data[bi*d2*(H+1) : (bi+1)*d2*(H+1)]
		g1.Data = append(g1.Data, blk[:d*(H+1)]...)
		g2.Data = append(g2.Data, blk[d*(H+1):]...)
	}
	gn, err := s.MatMulWeightsMany(ctx, []*share.Tensor{g1, g2}, []*protocol.Weight{cf.k.w, cf.v.w})
	share.PutWords(g1.Data)
	share.PutWords(g2.Data)
	if err != nil {
		return nil, fmt.Errorf("keys and values folded: %w", err)
	}
	if gn, err = p.truncMany(ctx, s, gn, f+cf.k.extra); err != nil {
		return nil, fmt.Errorf("keys and values folded: %w", err)
	}
	g, n := gn[0], gn[1] // [B, d, I], [B, d+1, I], f + e fractional bits
	// 3. h = ReLU(q_h·G_hᵀ + b1 (+ fill)), every head.
	qh, err := share.SplitHeads(q, nh) // [B, nh, Tq, dh]
	if err != nil {
		return nil, err
	}
	gt := &share.Tensor{Shape: []int{B, nh, dh, d}, Data: make([]uint64, B*nh*dh*d)}
	nt := &share.Tensor{Shape: []int{B, nh, d, dh}, Data: make([]uint64, B*nh*d*dh)}
	nb := make([]uint64, B*nh*dh)
	for bi := 0; bi < B; bi++ {
		gb, nbk := g.Data[bi*d*I:(bi+1)*d*I], n.Data[bi*(d+1)*I:(bi+1)*(d+1)*I]
		for h := 0; h < nh; h++ {
			gd := gt.Data[(bi*nh+h)*dh*d : (bi*nh+h+1)*dh*d]
			nd := nt.Data[(bi*nh+h)*d*dh : (bi*nh+h+1)*d*dh]
			for j := 0; j < d; j++ {
				for c := 0; c < dh; c++ {
					gd[c*d+j] = gb[j*I+h*dh+c]
				}
				copy(nd[j*dh:(j+1)*dh], nbk[j*I+h*dh:j*I+(h+1)*dh])
			}
			copy(nb[(bi*nh+h)*dh:(bi*nh+h+1)*dh], nbk[d*I+h*dh:d*I+(h+1)*dh])
		}
	}
	pre, err := s.MatMulRing(ctx, qh, gt, attentionRing) // [B, nh, Tq, d], 2f + e fractional bits, mod 2^attentionRing
	if err != nil {
		return nil, fmt.Errorf("softmax mlp: %w", err)
	}
	var fill func(h *share.Tensor, k uint)
	if padding != nil {
		fill = fillTerm(padding.fill, i, a.Layers, d, B, nh*Tq)
	}
	hid, err := p.biasTruncReLURing(ctx, s, pre, preparedLinear{b: cf.b1, extra: e}, fill, attentionRing) // f fractional bits, 64-bit shares
	if err != nil {
		return nil, fmt.Errorf("softmax mlp: %w", err)
	}
	// 4. P·V = h·N[:d] + N[d].
	out, err := s.MatMulRing(ctx, hid, nt, attentionRing) // [B, nh, Tq, dh], 2f + e fractional bits, mod 2^attentionRing
	if err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	for g := 0; g < B*nh; g++ {
		nbg := nb[g*dh : (g+1)*dh]
		for t := 0; t < Tq; t++ {
			row := out.Data[(g*Tq+t)*dh : (g*Tq+t+1)*dh]
			for c, v := range nbg {
				row[c] += v << f
			}
		}
	}
	if out, err = s.TruncByRing(ctx, out, f+e, attentionRing); err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	return out, nil
}

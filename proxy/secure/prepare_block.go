package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// An encoder block's shared weights: the attention projections (or, in a
// folded last block, the class attention's augmented weights), the softmax
// MLP, the FFN and LayerNorms, and the weights the padding mask multiplies
// (the fill term and the key and value biases).

// preparedAttentionFold is a last block's class-token attention folded with its
// softmax MLP (Prepared.foldedAttention). With Y_aug = [Y | m] the block's
// attention input and the padding mask column ([seq, hidden+1]):
//
//   - q is the query weight Wq [hidden, inner] (1/√headDim folded in) with
//     its bias, for the class rows alone;
//   - mlp is W_mlp = [W1 | W2ᵀ | b2ᵀ] ([seq, 2d+1], no bias) of the softmax
//     MLP, for Ŷ = Y_augᵀ·W_mlp;
//   - k and v are the augmented key and value weights [Wk; b_Kᵀ] and
//     [Wv; b_Vᵀ] ([hidden+1, inner], no bias), for G = Ŷ[:, :d]ᵀ·k and
//     N = Ŷ[:, d:]ᵀ·v;
//   - b1 is the softmax MLP's first bias (party 0's encoding).
//
// mlp carries foldExtraBits(f) extra fractional bits, q, k and v none (see
// prepareAttentionFold).
type preparedAttentionFold struct {
	q, mlp, k, v preparedLinear
	b1           []uint64
	// classOnly: the query of the class token alone (a last block that runs
	// on the class token alone), else every token's.
	classOnly bool
}

type preparedBlock struct {
	qkv, o preparedLinear
	// cf, set in a block whose attention is folded with its softmax MLP
	// (foldsAttention), replaces qkv, q, kv, attn and attnV.
	cf *preparedAttentionFold
	// q and kv, set instead of qkv in a last block that runs on the class
	// token alone: the query columns and the key and value columns shared as
	// two weights, so that the query is computed (and truncated, and the
	// dealer's material made) for the class token's rows only.
	q, kv *preparedLinear
	// attn is the softmax MLP. With attnV set (foldPV), only its first layer
	// is shared as such: its second layer W2 [d, seq] and bias b2 [seq] are
	// shared as attnV = [W2ᵀ | b2ᵀ] ([seq, d+1]), for the products W2·V and
	// b2·V that let P·V skip P (Prepared.softmaxPV).
	attn          *preparedMLP
	attnV         *preparedLinear
	ln1           preparedLayerNorm
	ffnIn, ffnOut *preparedLinear
	ln2           *preparedLayerNorm
}

// prepareBlock shares one block: folded with its softmax MLP
// (preparedAttentionFold) where foldsAttention; classOnly: the last block, which
// computes the query of the class token alone (unfolded: with its query and
// key/value weights shared apart).
func (p *Prepared) prepareBlock(ctx context.Context, s *protocol.Session, bw *blockWeights, classOnly bool) (preparedBlock, error) {
	a := p.arch
	fold := foldsAttention(a, p.opt)
	var b preparedBlock
	var qkv, o *linear
	var ln1 *layerNormWeights
	var attn *mlpWeights
	if bw != nil {
		// Fold 1/√headDim into the query columns (weights and bias).
		q := bw.qkv
		q.w = append([]float64(nil), q.w...)
		q.b = append([]float64(nil), q.b...)
		for r := 0; r < q.in; r++ {
			for c := 0; c < a.inner(); c++ {
				q.w[r*q.out+c] *= bw.scaleQK
			}
		}
		for c := 0; c < a.inner(); c++ {
			q.b[c] *= bw.scaleQK
		}
		if p.textual() && !fold {
			// Key and value biases are added as m⊗b (prepareKVBias).
			p.kvBiasAll = append(p.kvBiasAll, q.b[a.inner():]...)
			q.b = append(q.b[:a.inner():a.inner()], make([]float64, 2*a.inner())...)
		}
		qkv, o, ln1, attn = &q, &bw.o, &bw.ln1, bw.attn
	}
	var err error
	switch {
	case fold:
		if b.cf, err = p.prepareAttentionFold(ctx, s, qkv, attn); err != nil {
			return b, err
		}
		b.cf.classOnly = classOnly
	case classOnly:
		var q, kv *linear
		if qkv != nil {
			q, kv = splitCols(qkv, a.inner()), splitCols(qkv, -a.inner())
		}
		ql, err := p.shareLin(ctx, s, q, a.Hidden, a.inner(), 1)
		if err != nil {
			return b, err
		}
		kvl, err := p.shareLin(ctx, s, kv, a.Hidden, 2*a.inner(), 1)
		if err != nil {
			return b, err
		}
		b.q, b.kv = &ql, &kvl
	default:
		if b.qkv, err = p.shareLin(ctx, s, qkv, a.Hidden, 3*a.inner(), 1); err != nil {
			return b, err
		}
	}
	if b.o, err = p.shareLin(ctx, s, o, a.inner(), a.Hidden, 1); err != nil {
		return b, err
	}
	// A folded block's softmax MLP is in b.cf.
	if !fold && p.foldPV() {
		// The first layer as such; the second as [W2ᵀ | b2ᵀ] (see preparedBlock).
		d, T := a.MLPHidden, a.Seq
		var l1, wv *linear
		if attn != nil {
			l1 = &linear{in: T, out: d, w: attn.w1, b: attn.b1}
			wv = &linear{in: T, out: d + 1, w: make([]float64, T*(d+1))}
			for t := 0; t < T; t++ {
				for j := 0; j < d; j++ {
					wv.w[t*(d+1)+j] = attn.w2[j*T+t]
				}
				wv.w[t*(d+1)+d] = attn.b2[t]
			}
		}
		first, err := p.shareLin(ctx, s, l1, T, d, 1)
		if err != nil {
			return b, err
		}
		second, err := p.shareLin(ctx, s, wv, T, d+1, 1)
		if err != nil {
			return b, err
		}
		b.attn, b.attnV = &preparedMLP{l1: first}, &second
	} else if !fold && !a.Ablation.ExactAttnSoftmax {
		if b.attn, err = p.shareMLP(ctx, s, attn, a.Seq, a.Seq); err != nil {
			return b, err
		}
	}
	l1, err := p.prepareLN(ctx, s, ln1)
	if err != nil {
		return b, err
	}
	b.ln1 = *l1
	if a.Intermediate > 0 {
		var fi, fo *linear
		var l2 *layerNormWeights
		if bw != nil {
			fi, fo, l2 = bw.ffnIn, bw.ffnOut, bw.ln2
		}
		in, err := p.shareLin(ctx, s, fi, a.Hidden, a.Intermediate, 1)
		if err != nil {
			return b, err
		}
		out, err := p.shareLin(ctx, s, fo, a.Intermediate, a.Hidden, 1)
		if err != nil {
			return b, err
		}
		b.ffnIn, b.ffnOut = &in, &out
		if b.ln2, err = p.prepareLN(ctx, s, l2); err != nil {
			return b, err
		}
	}
	return b, nil
}

// The folded class attention's weights (preparedAttentionFold) are encoded with f
// fractional bits, except W_mlp, which carries e = foldExtraBits(f) more (8
// at f ≤ 16): the products Y_augᵀ·W_mlp and y₀·Wq share one truncation by
// f, which leaves q with f fractional bits and Ŷ with f + e, and every
// later product keeps those e bits until the TruncReLU and the context's
// truncation (by f + e each). So Ŷ's and G's and N's truncations and W1's
// and W2's rounding err 2^e times less than an ulp, and the folded
// attention is at least as precise as the unfolded one (TestClassAttention);
// every product carries 2f + e fractional bits before its truncation, so
// |Ŷ|, |G|, |N|, |q_h·G_hᵀ + b1| and the contexts must stay below
// 2^(62−2f−e): 2^22 for f ≤ 20, as the folded head's pre-activations.

// prepareAttentionFold shares a last block's class-token attention folded with
// its softmax MLP (preparedAttentionFold): qkv is the block's [Wq | Wk | Wv] with its
// biases (1/√headDim folded into the query columns) and attn the softmax
// MLP (both nil at party 1). Four weights: Wq [hidden, inner], W_mlp [seq,
// 2d+1] and the augmented Wk and Wv [hidden+1, inner]; the key and value
// biases are their last rows (multiplied by the mask column of Y_aug), so
// the layer needs no m⊗b, and the MLP's second layer is no weight of its
// own. Each costs one ShareWeight, once.
func (p *Prepared) prepareAttentionFold(ctx context.Context, s *protocol.Session, qkv *linear, attn *mlpWeights) (*preparedAttentionFold, error) {
	a := p.arch
	H, I, T, d := a.Hidden, a.inner(), a.Seq, a.MLPHidden
	cf := &preparedAttentionFold{}
	var q, wm, wk, wv *linear
	if qkv != nil {
		if attn == nil || qkv.b == nil {
			return nil, fmt.Errorf("class attention: missing softmax MLP or biases")
		}
		q = splitCols(qkv, I)
		wm = &linear{in: T, out: 2*d + 1, w: make([]float64, T*(2*d+1))}
		for t := 0; t < T; t++ {
			row := wm.w[t*(2*d+1) : (t+1)*(2*d+1)]
			copy(row[:d], attn.w1[t*d:(t+1)*d])
			for j := 0; j < d; j++ {
				row[d+j] = attn.w2[j*T+t]
			}
			row[2*d] = attn.b2[t]
		}
		aug := func(from int) *linear {
			l := &linear{in: H + 1, out: I, w: make([]float64, (H+1)*I)}
			for r := 0; r < H; r++ {
				copy(l.w[r*I:(r+1)*I], qkv.w[r*qkv.out+from:r*qkv.out+from+I])
			}
			copy(l.w[H*I:], qkv.b[from:from+I])
			return l
		}
		wk, wv = aug(I), aug(2*I)
		var err error
		if cf.b1, err = encode(attn.b1, p.fp.FracBits); err != nil {
			return nil, fmt.Errorf("class attention: %w", err)
		}
	}
	var err error
	if cf.q, err = p.shareLin(ctx, s, q, H, I, 1); err != nil {
		return nil, fmt.Errorf("class attention: query: %w", err)
	}
	if cf.mlp, err = p.shareLinExtra(ctx, s, wm, T, 2*d+1, 1, foldExtraBits(p.fp.FracBits)); err != nil {
		return nil, fmt.Errorf("class attention: softmax mlp: %w", err)
	}
	if cf.k, err = p.shareLin(ctx, s, wk, H+1, I, 1); err != nil {
		return nil, fmt.Errorf("class attention: keys: %w", err)
	}
	if cf.v, err = p.shareLin(ctx, s, wv, H+1, I, 1); err != nil {
		return nil, fmt.Errorf("class attention: values: %w", err)
	}
	return cf, nil
}

// splitCols returns the first c output columns of l (c > 0) or the columns
// after the first −c (c < 0), weights and bias.
func splitCols(l *linear, c int) *linear {
	from, to := 0, c
	if c < 0 {
		from, to = -c, l.out
	}
	n := to - from
	out := &linear{in: l.in, out: n, w: make([]float64, l.in*n)}
	for r := 0; r < l.in; r++ {
		copy(out.w[r*n:(r+1)*n], l.w[r*l.out+from:r*l.out+to])
	}
	if l.b != nil {
		out.b = append([]float64(nil), l.b[from:to]...)
	}
	return out
}

// prepareFill builds G = [diag(Fill_l)·W1_l] over the layers ([seq, layers·d])
// and shares it (private mask) or keeps it at party 0 (public mask).
func (p *Prepared) prepareFill(ctx context.Context, s *protocol.Session, net *Net) error {
	a := p.arch
	t, d, L := a.Seq, a.MLPHidden, a.Layers
	var g []float64
	if p.party == 0 {
		g = make([]float64, t*L*d)
		for l, b := range net.blocks {
			for j := 0; j < t; j++ {
				for k := 0; k < d; k++ {
					g[j*L*d+l*d+k] = b.attn.fill[j] * b.attn.w1[j*d+k]
				}
			}
		}
	}
	if p.opt.PublicMask {
		p.fillGClear = g
		return nil
	}
	var gt *share.Tensor
	if p.party == 0 {
		enc, err := encode(g, p.fp.FracBits)
		if err != nil {
			return fmt.Errorf("secure: prepare fill: %w", err)
		}
		gt = &share.Tensor{Shape: []int{t, L * d}, Data: enc}
	}
	w, err := s.ShareWeight(ctx, p.id(), gt, t, L*d)
	if err != nil {
		return fmt.Errorf("secure: prepare fill: %w", err)
	}
	p.fillG = w
	return nil
}

// prepareKVBias shares the key and value biases of every layer but a folded
// last one (kvBiasLayers) as a [1, layers·2·inner] weight (private mask) or
// keeps their encoding at party 0 (public mask); without such a layer
// there is nothing to share.
func (p *Prepared) prepareKVBias(ctx context.Context, s *protocol.Session) error {
	n := kvBiasLayers(p.arch, p.opt) * 2 * p.arch.inner()
	if n == 0 {
		return nil
	}
	var bt *share.Tensor
	if p.party == 0 {
		enc, err := encode(p.kvBiasAll, p.fp.FracBits)
		if err != nil {
			return fmt.Errorf("secure: prepare key and value biases: %w", err)
		}
		if len(enc) != n {
			return fmt.Errorf("secure: prepare key and value biases: %d values, want %d", len(enc), n)
		}
		p.kvBiasEnc = enc
		bt = &share.Tensor{Shape: []int{1, n}, Data: enc}
	}
	if p.opt.PublicMask {
		return nil
	}
	w, err := s.ShareWeight(ctx, p.id(), bt, 1, n)
	if err != nil {
		return fmt.Errorf("secure: prepare key and value biases: %w", err)
	}
	p.kvBias = w
	return nil
}

package secure

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Batch is one party's input to Forward. The data owner (party 1) passes the
// embedded candidates X ([B, seq, hidden] row-major reals, see Embed) and,
// for text models, the padding Mask (B rows of seq entries, 1 = token,
// 0 = padding; nil = no padding). With Options.PublicMask the model owner
// passes the same Mask (and no X); otherwise it passes nil.
type Batch struct {
	// X holds the embedded inputs (data owner only).
	X []float64
	// Mask is the attention mask.
	Mask [][]int
}

// maskState holds the secret (or public) padding mask of one batch.
type maskState struct {
	// m is the mask [B, T] as integer (0/1) shares (private) or clear words
	// (public): the last column of a folded class block's Y_aug.
	m *share.Tensor
	// h is the mask broadcast to [B, T, hidden] as integer (0/1) shares
	// (private) or clear words (public): it zeroes the padded rows of a block's
	// input (layers ≥ 1; the data owner zeroes its embeddings itself). It is
	// made on first use (hidden): a 1-layer proxy whose data owner embeds
	// never needs it, and it is B·T·hidden words.
	h *share.Tensor
	// kvb holds m⊗[b_K | b_V] of every layer but a folded last one
	// (kvBiasLayers): [B·T, layers·2·inner], the key and value biases of the
	// unpadded rows only; nil without such a layer.
	kvb *share.Tensor
	// omm is 1−m, [B, T], integer shares (private) or clear words (public).
	omm *share.Tensor
	// fill holds (1−m)·G: [B, layers·d] shares of fixed-point values.
	fill *share.Tensor
}

// encodeUnpadded encodes the data owner's embeddings xs [B, T, H] with the
// rows whose mask word w is 0 (padded tokens) left zero, without copying xs:
// the words, and on a bad value the error, of EncodeTensor on a copy of xs
// with those rows cleared (a padded row's values are never encoded). The
// words come from the word pool (share.GetWords): the caller may hand them
// back with share.PutWords once the tensor is no longer used.
func (p *Prepared) encodeUnpadded(xs []float64, w []uint64, B, T, H int) (*share.Tensor, error) {
	if len(xs) != B*T*H || len(w) != B*T {
		return nil, fmt.Errorf("%d values and %d mask words for [%d, %d, %d]", len(xs), len(w), B, T, H)
	}
	enc := &share.Tensor{Shape: []int{B, T, H}, Data: share.GetWords(B * T * H)}
	for r, v := range w {
		if v == 0 {
			clear(enc.Data[r*H : (r+1)*H])
			continue
		}
		if err := p.fp.EncodeSlice(enc.Data[r*H:(r+1)*H], xs[r*H:(r+1)*H]); err != nil {
			// Rare: redo it on the cleared copy for the error that names
			// the value's index in the whole tensor.
			c := slices.Clone(xs)
			for r, v := range w {
				if v == 0 {
					clear(c[r*H : (r+1)*H])
				}
			}
			_, err = p.fp.EncodeTensor(c, B, T, H)
			return nil, err
		}
	}
	return enc, nil
}

// hidden returns the mask broadcast to [B, T, w] (h), making it on first use.
func (mk *maskState) hidden(w int) *share.Tensor {
	if mk.h == nil {
		mk.h = broadcastLast(mk.m, w)
	}
	return mk.h
}

// Forward evaluates the secure forward pass of batch candidates and returns
// this party's shares of their entropies ([batch] fixed-point). Both parties
// call it with the same batch size; one call costs the same number of rounds
// whatever the batch size.
func (p *Prepared) Forward(ctx context.Context, s *protocol.Session, batch int, in *Batch) (*share.Tensor, error) {
	if s.Party() != p.party {
		return nil, fmt.Errorf("secure: forward: prepared for party %d, session of party %d", p.party, s.Party())
	}
	a := p.arch
	if batch <= 0 {
		return nil, fmt.Errorf("secure: forward: batch size %d", batch)
	}
	B, T, H := batch, a.Seq, a.Hidden
	W := H // width of the data owner's rows
	if p.emb != nil {
		W = a.EmbedRows
	}
	var x *share.Tensor
	var err error
	if p.party == 1 {
		if in == nil || len(in.X) != B*T*W {
			return nil, fmt.Errorf("secure: forward: data owner must pass %d×%d×%d embedded values", B, T, W)
		}
		xs := in.X
		var enc *share.Tensor
		if p.textual() && p.emb == nil {
			// Zero the padded tokens' embeddings (their keys and values must
			// vanish; their own outputs are never used): only the other
			// rows are encoded, into a zeroed tensor.
			w, err := maskWords(in.Mask, B, T)
			if err != nil {
				return nil, err
			}
			if enc, err = p.encodeUnpadded(xs, w, B, T, H); err != nil {
				return nil, fmt.Errorf("secure: forward: embeddings: %w", err)
			}
		}
		if enc != nil {
			// Encoded above.
		} else if p.emb != nil && p.textual() {
			// One-hot rows are ring integers.
			words, err := encode(xs, 0)
			if err == nil {
				enc, err = share.FromData(words, B, T, W)
			}
			if err != nil {
				return nil, fmt.Errorf("secure: forward: input rows: %w", err)
			}
		} else if enc, err = p.fp.EncodeTensor(xs, B, T, W); err != nil {
			return nil, fmt.Errorf("secure: forward: embeddings: %w", err)
		}
		x, err = s.ShareInput(1, enc)
		if p.textual() && p.emb == nil {
			// encodeUnpadded's scratch: ShareInput keeps no reference to it.
			share.PutWords(enc.Data)
		}
		if err != nil {
			return nil, fmt.Errorf("secure: forward: %w", err)
		}
	} else {
		if in != nil && in.X != nil {
			return nil, fmt.Errorf("secure: forward: the model owner has no inputs")
		}
		if x, err = s.ShareInput(1, nil, B, T, W); err != nil {
			return nil, fmt.Errorf("secure: forward: %w", err)
		}
	}
	in0 := x // this party's input shares: handed back to the word pool at the end
	if p.emb != nil {
		if x, err = p.embed(ctx, s, x); err != nil {
			return nil, fmt.Errorf("secure: forward embeddings: %w", err)
		}
	}
	var mk *maskState
	if p.textual() {
		if mk, err = p.mask(ctx, s, B, in); err != nil {
			return nil, err
		}
	}
	for i := range p.blocks {
		if x, err = p.block(ctx, s, i, x, mk, i == len(p.blocks)-1 && !p.opt.FullLastLayer); err != nil {
			return nil, fmt.Errorf("secure: forward layer %d: %w", i, err)
		}
	}
	h, err := p.head(ctx, s, x)
	if err != nil {
		return nil, fmt.Errorf("secure: forward head: %w", err)
	}
	// Every step made new tensors from the input shares (the blocks copy
	// the rows they keep), and none is kept past Forward: they are scratch.
	if in0 != x && len(in0.Data) > 0 && len(h.Data) > 0 && &in0.Data[0] != &h.Data[0] {
		share.PutWords(in0.Data)
	}
	return h, nil
}

// maskWords returns the mask as B·T ring words 0/1 (all ones for nil).
func maskWords(mask [][]int, B, T int) ([]uint64, error) {
	m := make([]uint64, B*T)
	for i := range m {
		m[i] = 1
	}
	if mask == nil {
		return m, nil
	}
	if len(mask) != B {
		return nil, fmt.Errorf("secure: forward: %d mask rows for batch %d", len(mask), B)
	}
	for b, row := range mask {
		if len(row) != T {
			return nil, fmt.Errorf("secure: forward: mask row %d has %d entries, want %d", b, len(row), T)
		}
		for t, v := range row {
			switch v {
			case 0:
				m[b*T+t] = 0
			case 1:
			default:
				return nil, fmt.Errorf("secure: forward: mask[%d][%d] = %d (want 0 or 1)", b, t, v)
			}
		}
	}
	return m, nil
}

// mask prepares the padding mask: shared by party 1 (private) or known to both.
func (p *Prepared) mask(ctx context.Context, s *protocol.Session, B int, in *Batch) (*maskState, error) {
	a := p.arch
	T, I2 := a.Seq, 2*a.inner()
	L := kvBiasLayers(a, p.opt)
	var m *share.Tensor
	var err error
	public := p.opt.PublicMask
	switch {
	case public || p.party == 1:
		var mask [][]int
		if in != nil {
			mask = in.Mask
		}
		w, err := maskWords(mask, B, T)
		if err != nil {
			return nil, err
		}
		m = &share.Tensor{Shape: []int{B, T}, Data: w}
		if !public {
			if m, err = s.ShareInput(1, m); err != nil {
				return nil, fmt.Errorf("secure: forward mask: %w", err)
			}
		}
	default:
		if in != nil && in.Mask != nil {
			return nil, fmt.Errorf("secure: forward: the mask is the data owner's private input (set Options.PublicMask to share it)")
		}
		if m, err = s.ShareInput(1, nil, B, T); err != nil {
			return nil, fmt.Errorf("secure: forward mask: %w", err)
		}
	}
	st := &maskState{m: m}
	switch {
	case L == 0:
		// A folded last block alone: its biases ride in its weights.
	case public:
		st.kvb = &share.Tensor{Shape: []int{B * T, L * I2}, Data: make([]uint64, B*T*L*I2)}
		if p.party == 0 {
			for r, v := range m.Data {
				if v == 1 {
					copy(st.kvb.Data[r*L*I2:(r+1)*L*I2], p.kvBiasEnc)
				}
			}
		}
	default:
		mc, err := reshape(m, B*T, 1)
		if err != nil {
			return nil, err
		}
		// m is an integer, the biases fixed point: no truncation.
		if st.kvb, err = s.MatMulWeights(ctx, mc, p.kvBias); err != nil {
			return nil, fmt.Errorf("secure: forward mask biases: %w", err)
		}
	}
	// 1−m: with a public mask both parties hold the clear words.
	omm := &share.Tensor{Shape: []int{B, T}, Data: make([]uint64, B*T)}
	for i, v := range m.Data {
		if public || p.party == 0 {
			omm.Data[i] = 1 - v
		} else {
			omm.Data[i] = -v
		}
	}
	st.omm = omm
	if !a.Ablation.ExactAttnSoftmax {
		d, L := a.MLPHidden, a.Layers
		if public {
			st.fill = &share.Tensor{Shape: []int{B, L * d}, Data: make([]uint64, B*L*d)}
			if p.party == 0 {
				f := make([]float64, B*L*d)
				for b := 0; b < B; b++ {
					for j := 0; j < T; j++ {
						if omm.Data[b*T+j] == 0 {
							continue
						}
						row := p.fillGClear[j*L*d : (j+1)*L*d]
						for k, g := range row {
							f[b*L*d+k] += g
						}
					}
				}
				if st.fill.Data, err = encode(f, p.fp.FracBits); err != nil {
					return nil, err
				}
			}
		} else if st.fill, err = s.MatMulWeights(ctx, omm, p.fillG); err != nil {
			// (1−m) is an integer, G fixed point: no truncation.
			return nil, fmt.Errorf("secure: forward mask fill: %w", err)
		}
	}
	return st, nil
}

// lin computes x·W (+ b at party 0) with truncation.
func (p *Prepared) lin(ctx context.Context, s *protocol.Session, x *share.Tensor, l linS) (*share.Tensor, error) {
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

// classQKV computes, for a last block prepared with split query and
// key/value weights, the class token's query [B, 1, I] and every token's keys
// and values [B, T, 2I] from the block input y [B, T, H]: both products in
// one round (MatMulWeightsMany), both truncations in one.
func (p *Prepared) classQKV(ctx context.Context, s *protocol.Session, y *share.Tensor, b *blockS) (q, kv *share.Tensor, err error) {
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
func (p *Prepared) linReLU(ctx context.Context, s *protocol.Session, x *share.Tensor, l linS, pre func(y *share.Tensor, k uint)) (*share.Tensor, error) {
	y, err := s.MatMulWeights(ctx, x, l.w)
	if err != nil {
		return nil, err
	}
	return p.biasTruncReLU(ctx, s, y, l, pre)
}

// biasTruncReLU is linReLU after its product: y = x·W untruncated, l's bias
// (and pre's terms) added shifted, then TruncReLU.
func (p *Prepared) biasTruncReLU(ctx context.Context, s *protocol.Session, y *share.Tensor, l linS, pre func(y *share.Tensor, k uint)) (*share.Tensor, error) {
	k := p.fp.FracBits + l.extra
	addRowVecShifted(p.party, y, l.b, k)
	if pre != nil {
		pre(y, k)
	}
	return s.TruncReLU(ctx, y, k)
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
func (p *Prepared) softmaxPV(ctx context.Context, s *protocol.Session, sc, vh *share.Tensor, b *blockS, pre func(h *share.Tensor, k uint)) (*share.Tensor, error) {
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

// mlp evaluates an approximator: lin → (+pre) → ReLU → lin, the first
// truncation fused into the ReLU (linReLU; pre gets the untruncated hidden
// layer and the shift to apply to its fixed-point terms).
func (p *Prepared) mlp(ctx context.Context, s *protocol.Session, x *share.Tensor, m *mlpS, pre func(h *share.Tensor, k uint)) (*share.Tensor, error) {
	h, err := p.linReLU(ctx, s, x, m.l1, pre)
	if err != nil {
		return nil, err
	}
	return p.lin(ctx, s, h, m.l2)
}

// block evaluates one encoder block on x [B, T, H]; in the last block only
// the first (class) token's output is needed, so queries and everything after
// the attention are computed for it alone (keys and values for all tokens,
// or, folded with the softmax MLP, classAttention).
func (p *Prepared) block(ctx context.Context, s *protocol.Session, i int, x *share.Tensor, mk *maskState, last bool) (*share.Tensor, error) {
	b := &p.blocks[i]
	y, err := p.blockInput(ctx, s, i, x, b, mk)
	if err != nil {
		return nil, err
	}
	var ctxv, res *share.Tensor
	if b.cf != nil {
		if ctxv, err = p.classAttention(ctx, s, i, y, b.cf, mk); err != nil {
			return nil, fmt.Errorf("class attention: %w", err)
		}
		res = firstToken(x)
	} else {
		var q, kv *share.Tensor
		if q, kv, res, err = p.blockQKV(ctx, s, i, x, y, b, mk, last); err != nil {
			return nil, err
		}
		sc, vh, err := p.attentionScores(ctx, s, q, kv)
		if err != nil {
			return nil, err
		}
		if ctxv, err = p.attentionValues(ctx, s, i, sc, vh, b, mk); err != nil {
			return nil, err
		}
	}
	merged, err := share.MergeHeads(ctxv)
	if err != nil {
		return nil, err
	}
	att, err := p.lin(ctx, s, merged, b.o)
	if err != nil {
		return nil, fmt.Errorf("attention output: %w", err)
	}
	addInPlace(att, res) // residual
	return p.blockFFN(ctx, s, att, b)
}

// classAttention computes a last block's attention context for the class
// token alone, [B, heads, 1, dh], folded with the softmax MLP (classFoldS),
// from the block's attention input y [B, T, H] (padded rows zero). Per
// batch row, with Y_aug = [y | m] ([T, H+1]; m the mask column, all ones
// without a mask), so that K = Y_aug·[Wk; b_K] and V = Y_aug·[Wv; b_V],
// and e = foldExtraBits(f) the extra fractional bits of W_mlp:
//
//  1. Ŷ = Y_augᵀ·[W1 | W2ᵀ | b2ᵀ] ([H+1, 2d+1]) and the class row's query
//     q = y₀·Wq + b_Q in one MatMulWeightsMany and one truncation by f
//     (q keeps f fractional bits, Ŷ f + e);
//  2. G = Ŷ[:, :d]ᵀ·[Wk; b_K] = W1ᵀ·K ([d, I]) and N = Ŷ[:, d:]ᵀ·[Wv; b_V]
//     = [W2·V; b2·V] ([d+1, I]) in one MatMulWeightsMany and one
//     truncation by f (f + e fractional bits);
//  3. the softmax MLP's hidden layer h = ReLU(q_h·G_hᵀ + b1 (+ fill)) of
//     every head, q_h·G_hᵀ = q_h·K_hᵀ·W1 = sc_h·W1, in one shared × shared
//     MatMul and one TruncReLU by f + e, b1 and the padded scores' fill
//     term added shifted before it (biasTruncReLU, fillTerm);
//  4. the context h·N_h[:d] + N_h[d] = (h·W2 + b2)·V_h = P_h·V_h in one
//     shared × shared MatMul, N_h[d] (each party its share) added shifted
//     by f, the public 1.0's product with it, and one truncation by f + e.
//
// 1 + 1 + 1 + 1 + 1 + 7 + 1 + 1 = 14 rounds, as the unfolded path, but the
// data owner opens Y_augᵀ (B·(H+1)·T words) and Ŷ (B·(2d+1)·(H+1)) instead
// of y and the scores and V, the products with the model owner's weights
// have (H+1)·(2d+1) + I + (2d+1)·I outputs per batch row instead of
// T·2I + I + T·d + I·(d+1), and no shared × shared product has T rows
// (BlockCost). Every product carries 2f + e fractional bits before its
// truncation, so |Ŷ|, |G|, |N|, |q_h·G_hᵀ + b1 + fill| and the contexts
// must stay below 2^(62−2f−e), 2^22 at f = 16 (protocol.TruncBound).
//
// View: the data owner's openings of its weight products' inputs are
// masked by the weight triples (X1 − A), the shared × shared products open
// Beaver-masked operands, the truncations and the sign circuit send bits
// masked by their correlations, as on the unfolded path: nothing crosses
// the wire in the clear.
func (p *Prepared) classAttention(ctx context.Context, s *protocol.Session, i int, y *share.Tensor, cf *classFoldS, mk *maskState) (*share.Tensor, error) {
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
	// Scratch from the word pool (GetWords): every word is written below,
	// and MatMulWeightsMany keeps no reference to its operands.
	yt := &share.Tensor{Shape: []int{B, H + 1, T}, Data: share.GetWords(B * (H + 1) * T)}
	for bi := 0; bi < B; bi++ {
		src := y.Data[bi*T*H : (bi+1)*T*H]
		dst := yt.Data[bi*(H+1)*T : (bi+1)*(H+1)*T]
		if err := share.TransposeInto(dst[:H*T], src, T, H); err != nil {
			share.PutWords(yt.Data)
			return nil, fmt.Errorf("Y_augᵀ: %w", err)
		}
		mrow := dst[H*T:]
		clear(mrow) // party 1's share of a public row is zero
		switch {
		case mk == nil:
			if p.party == 0 {
				for t := range mrow {
					mrow[t] = 1 << f
				}
			}
		case p.opt.PublicMask:
			if p.party == 0 {
				for t := range mrow {
					mrow[t] = mk.m.Data[bi*T+t] << f
				}
			}
		default:
			for t := range mrow {
				mrow[t] = mk.m.Data[bi*T+t] << f
			}
		}
	}
	// 1. Ŷ and the class rows' queries.
	ys, err := s.MatMulWeightsMany(ctx, []*share.Tensor{yt, firstToken(y)}, []*protocol.Weight{cf.mlp.w, cf.q.w})
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
	yh, q := ys[0], ys[1] // [B, H+1, 2d+1] (f + e fractional bits), [B, 1, I] (f)
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
	qh, err := share.SplitHeads(q, nh) // [B, nh, 1, dh]
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
	pre, err := s.MatMul(ctx, qh, gt) // [B, nh, 1, d], 2f + e fractional bits
	if err != nil {
		return nil, fmt.Errorf("softmax mlp: %w", err)
	}
	var fill func(h *share.Tensor, k uint)
	if mk != nil {
		fill = fillTerm(mk.fill, i, a.Layers, d, B, nh)
	}
	hid, err := p.biasTruncReLU(ctx, s, pre, linS{b: cf.b1, extra: e}, fill) // f fractional bits
	if err != nil {
		return nil, fmt.Errorf("softmax mlp: %w", err)
	}
	// 4. P·V = h·N[:d] + N[d].
	out, err := s.MatMul(ctx, hid, nt) // [B, nh, 1, dh], 2f + e fractional bits
	if err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	for j, v := range nb {
		out.Data[j] += v << f
	}
	if out, err = s.TruncBy(ctx, out, f+e); err != nil {
		return nil, fmt.Errorf("attention values: %w", err)
	}
	return out, nil
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

// blockInput is the attention's input of block i: x itself, after the first
// layernorm in the pre-norm (ViT) family, with the padded rows zeroed when a
// padding mask is in use (layers ≥ 1, or layer 0 when the model owner embeds:
// the data owner zeroes its own embeddings).
func (p *Prepared) blockInput(ctx context.Context, s *protocol.Session, i int, x *share.Tensor, b *blockS, mk *maskState) (*share.Tensor, error) {
	y := x
	var err error
	if p.arch.Family == model.ViT {
		if y, err = p.layerNorm(ctx, s, x, &b.ln1); err != nil {
			return nil, fmt.Errorf("layernorm: %w", err)
		}
	}
	if mk != nil && (i > 0 || p.emb != nil) {
		// Zero the padded rows: their keys and values must vanish.
		h := mk.hidden(p.arch.Hidden)
		if p.opt.PublicMask {
			y = y.Clone()
			for j := range y.Data {
				y.Data[j] *= h.Data[j]
			}
		} else if y, err = s.Mul(ctx, y, h); err != nil {
			return nil, fmt.Errorf("mask block input: %w", err)
		}
	}
	return y, nil
}

// blockQKV projects block i's attention input y to the queries q and the
// keys and values kv ([.., 2·inner], keys first), and returns the residual
// res the attention output adds to: x, or only its first (class) token where
// only the class token's output is needed (a class-query block, or the last
// block). With a padding mask, the key and value biases of the unpadded rows
// (mk.kvb) are added to kv.
func (p *Prepared) blockQKV(ctx context.Context, s *protocol.Session, i int, x, y *share.Tensor, b *blockS, mk *maskState, last bool) (q, kv, res *share.Tensor, err error) {
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
		qkv, err := p.lin(ctx, s, y, b.qkv) // the key and value biases are in mk.kvb
		if err != nil {
			return nil, nil, nil, fmt.Errorf("qkv: %w", err)
		}
		q, kv, res = cols(qkv, 0, I), cols(qkv, I, 3*I), x
		if last {
			q, res = firstToken(q), firstToken(x)
		}
	}
	if mk != nil {
		addKVBias(kv, mk.kvb, i, kvBiasLayers(p.arch, p.opt), x.Shape[0]*p.arch.Seq, 2*I)
	}
	return q, kv, res, nil
}

// addKVBias adds layer i's key and value biases to kv, rows rows of I2 =
// 2·inner words: kvb is [rows, layers·I2], every layer's biases side by side
// per row.
func addKVBias(kv, kvb *share.Tensor, i, layers, rows, I2 int) {
	L2 := layers * I2
	for r := 0; r < rows; r++ {
		dst := kv.Data[r*I2 : (r+1)*I2]
		src := kvb.Data[r*L2+i*I2 : r*L2+(i+1)*I2]
		for j := range dst {
			dst[j] += src[j]
		}
	}
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
func (p *Prepared) attentionValues(ctx context.Context, s *protocol.Session, i int, sc, vh *share.Tensor, b *blockS, mk *maskState) (*share.Tensor, error) {
	var pr, ctxv *share.Tensor // P, or directly P·V (softmaxPV)
	var err error
	if b.attn != nil {
		var pre func(h *share.Tensor, k uint)
		if mk != nil {
			B, nh, Tq := sc.Shape[0], sc.Shape[1], sc.Shape[2]
			pre = fillTerm(mk.fill, i, p.arch.Layers, p.arch.MLPHidden, B, nh*Tq)
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
		if mk != nil && !(p.opt.PublicMask && p.party != 0) {
			shiftPaddedScores(sc, mk.omm, uint64(maskShift)<<p.fp.FracBits)
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

// fillTerm is the hook that adds layer i's fill term to the softmax MLP's
// untruncated hidden layer h [B, heads, Tq, d] (rows = heads·Tq rows of d
// words per batch row): each batch row's d words of fill [B, layers·d],
// shifted left by k.
func fillTerm(fill *share.Tensor, i, layers, d, B, rows int) func(h *share.Tensor, k uint) {
	return func(h *share.Tensor, k uint) {
		per := rows * d
		for bi := 0; bi < B; bi++ {
			f := fill.Data[bi*layers*d+i*d : bi*layers*d+(i+1)*d]
			blk := h.Data[bi*per : (bi+1)*per]
			for r := 0; r < rows; r++ {
				row := blk[r*d : (r+1)*d]
				for j := range row {
					row[j] += f[j] << k
				}
			}
		}
	}
}

// shiftPaddedScores subtracts c·(1−m) from the scores sc [B, heads, Tq, T]
// (the padded keys' scores are 0, masked keys; this shifts them by −C), with
// omm = 1−m [B, T].
func shiftPaddedScores(sc, omm *share.Tensor, c uint64) {
	B, T := sc.Shape[0], sc.Shape[len(sc.Shape)-1]
	per := len(sc.Data) / (B * T)
	for bi := 0; bi < B; bi++ {
		om := omm.Data[bi*T : (bi+1)*T]
		blk := sc.Data[bi*per*T : (bi+1)*per*T]
		for r := 0; r < per; r++ {
			row := blk[r*T : (r+1)*T]
			for j := range row {
				row[j] -= c * om[j]
			}
		}
	}
}

// blockFFN finishes a block from the attention output att (residual added):
// pre-norm (ViT): att + FFN(LN2(att)); post-norm: h = LN1(att), then
// LN2(h + FFN(h)). A block without an FFN (a pruned proxy) returns att,
// respectively h.
func (p *Prepared) blockFFN(ctx context.Context, s *protocol.Session, att *share.Tensor, b *blockS) (*share.Tensor, error) {
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
		addInPlace(f, att)
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
	addInPlace(f, h)
	if f, err = p.layerNorm(ctx, s, f, b.ln2); err != nil {
		return nil, fmt.Errorf("layernorm 2: %w", err)
	}
	return f, nil
}

// ffn evaluates the FFN of the exact model: lin → activation → lin.
func (p *Prepared) ffn(ctx context.Context, s *protocol.Session, x *share.Tensor, b *blockS) (*share.Tensor, error) {
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

// layerNorm normalises x along its last dimension: exact mean subtraction,
// the squared deviation (Square), then either the MLP for (γ-scaled)
// 1/√(var+ε) or CrypTen's InvSqrt and γ by MulPrivateVector; β by party 0.
func (p *Prepared) layerNorm(ctx context.Context, s *protocol.Session, x *share.Tensor, l *lnS) (*share.Tensor, error) {
	H, _ := lastDim(x)
	mu, err := s.Mean(ctx, x, -1)
	if err != nil {
		return nil, err
	}
	c := x.Clone()
	subInPlace(c, broadcastLast(mu, H))
	sq, err := s.Square(ctx, c)
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
		if y, err = s.Mul(ctx, c, rg); err != nil {
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
		if y, err = s.Mul(ctx, c, broadcastLast(r, H)); err != nil {
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
	addInPlace(sp, dn)
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

// head maps the encoder output's class token to the entropy.
func (p *Prepared) head(ctx context.Context, s *protocol.Session, x *share.Tensor) (*share.Tensor, error) {
	a := p.arch
	B := x.Shape[0]
	cls, err := reshape(firstToken(x), B, a.Hidden)
	if err != nil {
		return nil, err
	}
	var z *share.Tensor
	if p.final != nil {
		if z, err = p.layerNorm(ctx, s, cls, p.final); err != nil {
			return nil, fmt.Errorf("final layernorm: %w", err)
		}
	} else {
		if a.TanhPooler {
			if z, err = p.lin(ctx, s, cls, *p.pool); err == nil {
				z, err = p.tanh(ctx, s, z)
			}
		} else {
			z, err = p.linReLU(ctx, s, cls, *p.pool, nil)
		}
		if err != nil {
			return nil, fmt.Errorf("pooler: %w", err)
		}
	}
	return p.entropy(ctx, s, z)
}

// entropy maps the head's features z [B, hidden] to the shared scores of
// the selection criterion [B] (the entropies by default). With the entropy
// MLP, its first layer is the classifier folded into it (prepareHead):
// z·W' + b' → TruncReLU → ·W2 + b2, truncation (1 + 7 + 1 + 1 rounds); the
// logits are never computed. With the exact score: the classifier (2
// rounds), then the criterion's exact score over MPC (RegisterExactScore;
// protocol.Entropy for the entropy).
func (p *Prepared) entropy(ctx context.Context, s *protocol.Session, z *share.Tensor) (*share.Tensor, error) {
	B := z.Shape[0]
	if p.ent == nil {
		exact, err := exactScore(p.arch.Criterion)
		if err != nil {
			return nil, err
		}
		logits, err := p.lin(ctx, s, z, *p.cls)
		if err != nil {
			return nil, fmt.Errorf("classifier: %w", err)
		}
		return exact(ctx, s, logits)
	}
	h, err := p.mlp(ctx, s, z, p.ent, nil)
	if err != nil {
		return nil, fmt.Errorf("classifier and entropy mlp: %w", err)
	}
	return reshape(h, B)
}

// Reveal opens shared fixed-point values to both parties (for tests and
// measurements: in selection, entropies are never revealed).
func Reveal(ctx context.Context, s *protocol.Session, x *share.Tensor) ([]float64, error) {
	v, err := s.Reveal(ctx, x)
	if err != nil {
		return nil, err
	}
	return s.FixedPoint().DecodeTensor(v), nil
}

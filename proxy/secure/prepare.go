package secure

import (
	"context"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Options tune the secure forward.
type Options struct {
	// PublicMask treats the attention (padding) mask as public: both parties
	// pass it to Forward and it is applied locally, without the secure
	// multiplication (and its cost) of the default private mask.
	PublicMask bool
	// WeightBase is the first weight id used by Prepare (ids WeightBase,
	// WeightBase+1, ... each shared once; two proxies prepared on the same
	// dealer need disjoint ranges).
	WeightBase uint64
	// FullLastLayer evaluates the last block on every token. By default only
	// the class token's query, attention output, LayerNorm and FFN are
	// computed there, which gives the same entropies for a fraction of the
	// cost: with the softmax MLP its attention folded with the MLP
	// (Prepared.classAttention: no token's keys, values or scores), with an
	// exact softmax every token's keys and values.
	FullLastLayer bool
	// PrivateEmbeddings keeps the embedding tables the model owner's secret:
	// the data owner passes raw input rows (EmbedRows) instead of
	// embeddings, and the embedding runs securely (see embed.go; its cost is
	// part of Forward's).
	PrivateEmbeddings bool

	// unfoldedPV keeps the softmax MLP's second layer and P·V apart, as with
	// more than pvFoldMaxFracBits fractional bits (for the tests that compare
	// both paths).
	unfoldedPV bool
	// unfoldedClass keeps the last block's class-token attention unfolded
	// (every token's keys and values, the scores, the softmax MLP and P·V, as
	// with an exact softmax) instead of classAttention (for the tests that
	// compare both paths).
	unfoldedClass bool
}

// foldsClass reports whether the last block of a network of architecture a
// runs its class-token attention folded with its softmax MLP
// (Prepared.classAttention): the last block runs on the class token alone
// (not Options.FullLastLayer) and its attention softmax is the MLP. Both
// parties decide alike: it depends on the public architecture and options
// only.
func foldsClass(a Arch, opt Options) bool {
	return !opt.FullLastLayer && !a.Ablation.ExactAttnSoftmax && !opt.unfoldedClass
}

// kvBiasLayers is the number of layers whose key and value biases are added
// as m⊗b (text families): every layer but a folded last one, whose biases
// ride in its augmented key and value weights (preparedClassFold).
func kvBiasLayers(a Arch, opt Options) int {
	if foldsClass(a, opt) {
		return a.Layers - 1
	}
	return a.Layers
}

// pvFoldMaxFracBits is the most fractional bits f with which a block folds
// the softmax MLP's second layer into P·V (Prepared.softmaxPV): its
// context rows carry 3f fractional bits before their truncation, so they
// must satisfy |P·V| < 2^(62−3f), 2^14 at f = 16. With more fractional bits
// the block computes P and then P·V (2 rounds more).
const pvFoldMaxFracBits = 16

// foldPV reports whether the blocks fold the softmax MLP's second layer into
// P·V (both parties decide alike: it depends on the public architecture,
// encoding and options only).
func (p *Prepared) foldPV() bool {
	return !p.arch.Ablation.ExactAttnSoftmax && p.fp.FracBits <= pvFoldMaxFracBits && !p.opt.unfoldedPV
}

// lnExtraBits is the extra precision of the LayerNorm MLP's first weights,
// which carry the 1/hidden of the variance (see preparedLayerNorm).
const lnExtraBits = 10

// maskShift is the C subtracted from padded scores before an exact softmax.
const maskShift = 32

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

// preparedClassFold is a last block's class-token attention folded with its
// softmax MLP (Prepared.classAttention). With Y_aug = [Y | m] the block's
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
// prepareClassFold).
type preparedClassFold struct {
	q, mlp, k, v preparedLinear
	b1           []uint64
}

type preparedBlock struct {
	qkv, o preparedLinear
	// cf, set in a last block whose class-token attention is folded
	// (foldsClass), replaces qkv, q, kv, attn and attnV.
	cf *preparedClassFold
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

// Prepared is a network whose weights have been shared once with the peer by
// the weight-mask trick on one session; Forward then evaluates any number of
// batches with it (on that session or on other sessions of the same party).
type Prepared struct {
	arch   Arch
	opt    Options
	party  int
	fp     share.FixedPoint
	blocks []preparedBlock
	final  *preparedLayerNorm
	pooler *preparedLinear
	// cls is the classifier, shared only with the exact entropy; otherwise
	// it is folded into ent's first layer (prepareHead).
	cls *preparedLinear
	// ent is the entropy MLP (nil: exact entropy), its first layer the
	// classifier composed with the MLP's W1.
	ent *preparedMLP
	// fillG is G = [diag(Fill_l)·W1_l]_l, [seq, layers·d]: the padded scores'
	// contribution (1−m)·G to every softmax MLP's first layer, computed for all
	// layers in one MatMulWeights (private mask) or by party 0 (public mask).
	fillG      *protocol.Weight
	fillGClear []float64
	// kvBias holds [b_K | b_V] of every layer but a folded last one
	// (kvBiasLayers), [1, layers·2·inner], for the masked biases m⊗b of text
	// models (kvBiasEnc: party 0's encoding; nil without such a layer).
	kvBias    *protocol.Weight
	kvBiasEnc []uint64
	kvBiasAll []float64
	emb       *preparedEmbedding
	nextID    uint64
}

// Arch returns the architecture.
func (p *Prepared) Arch() Arch { return p.arch }

// Prepare shares the model owner's clear network with the peer, once per
// network and session pair: party 0 passes net, party 1 passes nil and the
// same public architecture. Each weight matrix costs one round in which party
// 0 sends it masked (protocol.ShareWeight); biases, β and the softmax MLPs'
// fill values stay with party 0.
func Prepare(ctx context.Context, s *protocol.Session, arch Arch, net *Net, opt Options) (*Prepared, error) {
	if err := arch.Validate(); err != nil {
		return nil, err
	}
	party := s.Party()
	if party == 0 {
		if net == nil {
			return nil, fmt.Errorf("secure: prepare: the model owner must pass the network")
		}
		if net.Arch != arch {
			return nil, fmt.Errorf("secure: prepare: network architecture %+v differs from %+v", net.Arch, arch)
		}
		if err := net.check(); err != nil {
			return nil, err
		}
	} else if net != nil {
		return nil, fmt.Errorf("secure: prepare: the data owner must not pass weights")
	}
	if opt.PrivateEmbeddings && arch.EmbedRows <= 0 {
		return nil, fmt.Errorf("secure: prepare: private embeddings need Arch.EmbedRows")
	}
	p := &Prepared{arch: arch, opt: opt, party: party, fp: s.FixedPoint(), nextID: opt.WeightBase}
	if opt.PrivateEmbeddings {
		var e *embeddingWeights
		if net != nil {
			if e = net.emb; e == nil {
				return nil, fmt.Errorf("secure: prepare: the network has no embeddings")
			}
		}
		if err := p.prepareEmb(ctx, s, e); err != nil {
			return nil, fmt.Errorf("secure: prepare embeddings: %w", err)
		}
	}
	a := arch
	var nb []blockWeights
	if net != nil {
		nb = net.blocks
	}
	for i := 0; i < a.Layers; i++ {
		var bw *blockWeights
		if nb != nil {
			bw = &nb[i]
		}
		b, err := p.prepareBlock(ctx, s, bw, i == a.Layers-1 && !opt.FullLastLayer)
		if err != nil {
			return nil, fmt.Errorf("secure: prepare layer %d: %w", i, err)
		}
		p.blocks = append(p.blocks, b)
	}
	var err error
	if a.Family == "vit" {
		var f *layerNormWeights
		if net != nil {
			f = net.final
		}
		if p.final, err = p.prepareLN(ctx, s, f); err != nil {
			return nil, fmt.Errorf("secure: prepare final layernorm: %w", err)
		}
	} else {
		var l *linear
		if net != nil {
			l = net.pooler
		}
		ls, err := p.shareLin(ctx, s, l, a.Hidden, a.Hidden, 1)
		if err != nil {
			return nil, fmt.Errorf("secure: prepare pooler: %w", err)
		}
		p.pooler = &ls
	}
	if err := p.prepareHead(ctx, s, net); err != nil {
		return nil, err
	}
	if p.textual() {
		if !a.Ablation.ExactAttnSoftmax {
			if err := p.prepareFill(ctx, s, net); err != nil {
				return nil, err
			}
		}
		if err := p.prepareKVBias(ctx, s); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// prepareHead shares the classifier and the entropy MLP (net: party 0; nil
// at party 1). With the exact entropy (Arch.Ablation.ExactEntropy) the
// classifier is shared alone: protocol.Entropy needs the logits. Otherwise
// the classifier, z·Wc + bc, is followed directly by the entropy MLP's first
// layer, logits·W1 + b1: both affine maps are the model owner's, so it
// composes them in the clear, W' = Wc·W1 [hidden, d] and b' = bc·W1 + b1 (in
// float64, before encoding), and shares W' in place of Wc and W1. The head
// then runs z·W' + b' → TruncReLU → ·W2 + b2 (Prepared.entropy): the classifier's
// product and truncation, 2 rounds per forward pass, disappear, and one
// weight fewer is shared. The data owner learns the shape hidden×d of W'
// (it knows hidden, labels and d from Arch anyway) and nothing of the
// logits, which no step needs.
//
// W' is encoded with foldExtraBits(f) more fractional bits than the other
// weights (its truncation by f + extra costs the same round), so that its
// rounding adds less error than the classifier's product and truncation did.
func (p *Prepared) prepareHead(ctx context.Context, s *protocol.Session, net *Net) error {
	a := p.arch
	if a.Ablation.ExactEntropy {
		var cl *linear
		if net != nil {
			cl = &net.cls
		}
		ls, err := p.shareLin(ctx, s, cl, a.Hidden, a.Labels, 1)
		if err != nil {
			return fmt.Errorf("secure: prepare classifier: %w", err)
		}
		p.cls = &ls
		return nil
	}
	d := a.entropyHidden()
	var l1, l2 *linear
	if net != nil {
		var err error
		if l1, err = foldAffine(&net.cls, &linear{in: a.Labels, out: d, w: net.ent.w1, b: net.ent.b1}); err != nil {
			return fmt.Errorf("secure: prepare classifier and entropy mlp: %w", err)
		}
		l2 = &linear{in: d, out: 1, w: net.ent.w2, b: net.ent.b2}
	}
	first, err := p.shareLinExtra(ctx, s, l1, a.Hidden, d, 1, foldExtraBits(p.fp.FracBits))
	if err != nil {
		return fmt.Errorf("secure: prepare classifier and entropy mlp: %w", err)
	}
	second, err := p.shareLin(ctx, s, l2, d, 1, 1)
	if err != nil {
		return fmt.Errorf("secure: prepare entropy mlp: %w", err)
	}
	p.ent = &preparedMLP{l1: first, l2: second}
	return nil
}

// foldExtraBits is the number of extra fractional bits of the folded
// classifier and entropy MLP weights W' for f fractional bits: 8 for f ≤ 16,
// fewer above, none from f = 20. The hidden pre-activations carry 2f + extra
// fractional bits before their truncation (bound 2^62), so they must satisfy
// |z·W' + b'| < 2^(62−2f−extra): 2^22 for f ≤ 20, and above that the bound
// 2^(62−2f) of the unfolded products.
func foldExtraBits(f uint) uint {
	if 2*f+8 <= 40 {
		return 8
	}
	if 2*f >= 40 {
		return 0
	}
	return 40 - 2*f
}

// foldAffine composes two affine maps, x ↦ (x·A + a)·B + b = x·(A·B) +
// (a·B + b), in float64 (A [in, k] and B [k, out], row-major; nil biases are
// zero). It errs on mismatched shapes and on a non-finite result.
func foldAffine(first, second *linear) (*linear, error) {
	if first == nil || second == nil {
		return nil, fmt.Errorf("fold: missing map")
	}
	in, k, out := first.in, first.out, second.out
	if second.in != k || len(first.w) != in*k || len(second.w) != k*out ||
		(first.b != nil && len(first.b) != k) || (second.b != nil && len(second.b) != out) {
		return nil, fmt.Errorf("fold: %d×%d then %d×%d maps do not compose", first.in, first.out, second.in, second.out)
	}
	f := &linear{in: in, out: out, w: make([]float64, in*out), b: make([]float64, out)}
	for r := 0; r < in; r++ {
		row := f.w[r*out : (r+1)*out]
		for j := 0; j < k; j++ {
			a := first.w[r*k+j]
			for c, bv := range second.w[j*out : (j+1)*out] {
				row[c] += a * bv
			}
		}
	}
	if second.b != nil {
		copy(f.b, second.b)
	}
	if first.b != nil {
		for j, a := range first.b {
			for c, bv := range second.w[j*out : (j+1)*out] {
				f.b[c] += a * bv
			}
		}
	}
	for _, vs := range [][]float64{f.w, f.b} {
		for i, v := range vs {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("fold: composed weight %d is %v", i, v)
			}
		}
	}
	return f, nil
}

// textual reports whether inputs carry a padding mask (BERT, DistilBERT).
func (p *Prepared) textual() bool { return p.arch.Family != "vit" }

func (p *Prepared) id() uint64 { p.nextID++; return p.nextID - 1 }

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

// prepareBlock shares one block; classOnly: the last block, which computes
// the query of the class token alone: folded with its softmax MLP
// (preparedClassFold) where foldsClass, else with its query and key/value weights
// shared apart.
func (p *Prepared) prepareBlock(ctx context.Context, s *protocol.Session, bw *blockWeights, classOnly bool) (preparedBlock, error) {
	a := p.arch
	fold := classOnly && foldsClass(a, p.opt)
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
		if b.cf, err = p.prepareClassFold(ctx, s, qkv, attn); err != nil {
			return b, err
		}
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
	// A folded class block's softmax MLP is in b.cf.
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

// The folded class attention's weights (preparedClassFold) are encoded with f
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

// prepareClassFold shares a last block's class-token attention folded with
// its softmax MLP (preparedClassFold): qkv is the block's [Wq | Wk | Wv] with its
// biases (1/√headDim folded into the query columns) and attn the softmax
// MLP (both nil at party 1). Four weights: Wq [hidden, inner], W_mlp [seq,
// 2d+1] and the augmented Wk and Wv [hidden+1, inner]; the key and value
// biases are their last rows (multiplied by the mask column of Y_aug), so
// the layer needs no m⊗b, and the MLP's second layer is no weight of its
// own. Each costs one ShareWeight, once.
func (p *Prepared) prepareClassFold(ctx context.Context, s *protocol.Session, qkv *linear, attn *mlpWeights) (*preparedClassFold, error) {
	a := p.arch
	H, I, T, d := a.Hidden, a.inner(), a.Seq, a.MLPHidden
	cf := &preparedClassFold{}
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

package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Prepare shares the model owner's network once per session pair. Its
// steps live by what they share: prepare_weights.go (affine maps, the
// approximator MLPs, LayerNorm), prepare_block.go (an encoder block, the
// folded class attention, the padding mask's fill and bias weights),
// prepare_head.go (the classifier folded into the entropy MLP).

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
	// (Prepared.foldedAttention: no token's keys, values or scores), with an
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
	// unfoldedClass keeps every block's attention unfolded (every token's
	// keys and values, the scores, the softmax MLP and P·V, as with an exact
	// softmax) instead of foldedAttention (for the tests that compare both
	// paths).
	unfoldedClass bool
}

// foldsAttention reports whether the blocks of a network of architecture a
// run their attention folded with their softmax MLP
// (Prepared.foldedAttention): the attention softmax is the MLP. Every block
// then does, with the class token's query alone in a last block that runs
// on the class token alone (foldsClass) and every token's elsewhere. Both
// parties decide alike: it depends on the public architecture and options
// only.
func foldsAttention(a Arch, opt Options) bool {
	return !a.Ablation.ExactAttnSoftmax && !opt.unfoldedClass
}

// foldsClass reports whether the last block of a network of architecture a
// runs its class-token attention folded with its softmax MLP
// (Prepared.foldedAttention with the class query alone): the last block runs
// on the class token alone (not Options.FullLastLayer) and foldsAttention.
func foldsClass(a Arch, opt Options) bool {
	return !opt.FullLastLayer && foldsAttention(a, opt)
}

// kvBiasLayers is the number of layers whose key and value biases are added
// as m⊗b (text families): none when the blocks fold their attention
// (foldsAttention), whose biases ride in their augmented key and value
// weights (preparedAttentionFold), else every layer.
func kvBiasLayers(a Arch, opt Options) int {
	if foldsAttention(a, opt) {
		return 0
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

// textual reports whether inputs carry a padding mask (BERT, DistilBERT).
func (p *Prepared) textual() bool { return p.arch.Family != "vit" }

// id returns the next weight id (Options.WeightBase, then one more per
// shared weight).
func (p *Prepared) id() uint64 { p.nextID++; return p.nextID - 1 }

package secure

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The secure forward pass: Forward encodes and shares the data owner's
// input, runs the blocks (block) and the head. Its steps live by operation:
// forward_mask.go (the padding mask and its terms), forward_attention.go
// (queries, keys, values, scores, the softmax and P·V),
// forward_classattention.go (the last block's class attention folded with
// its softmax MLP), forward_linear.go (products with the model owner's
// weights, the approximator MLPs), forward_norm.go (LayerNorm),
// forward_ffn.go (the FFN and its activations), forward_head.go (pooler,
// classifier and the selection score).

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

// encodeUnpadded encodes the data owner's embeddings xs [B, T, H] with the
// rows whose mask word w is 0 (padded tokens) left zero, without copying xs:
// the words, and on a bad value the error, of EncodeTensor on a copy of xs
// with those rows cleared (a padded row's values are never encoded). The
// words are scratch words (share.GetWords): the caller may hand them
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
	in0 := x // this party's input shares: handed back as scratch words at the end
	if p.emb != nil {
		if x, err = p.embed(ctx, s, x); err != nil {
			return nil, fmt.Errorf("secure: forward embeddings: %w", err)
		}
	}
	var padding *paddingMask
	if p.textual() {
		if padding, err = p.shareMask(ctx, s, B, in); err != nil {
			return nil, err
		}
	}
	for i := range p.blocks {
		if x, err = p.block(ctx, s, i, x, padding, i == len(p.blocks)-1 && !p.opt.FullLastLayer); err != nil {
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

// block evaluates one encoder block on x [B, T, H]; in the last block only
// the first (class) token's output is needed, so queries and everything after
// the attention are computed for it alone (keys and values for all tokens,
// or, folded with the softmax MLP, foldedAttention).
func (p *Prepared) block(ctx context.Context, s *protocol.Session, i int, x *share.Tensor, padding *paddingMask, last bool) (*share.Tensor, error) {
	b := &p.blocks[i]
	y, err := p.blockInput(ctx, s, i, x, b, padding)
	if err != nil {
		return nil, err
	}
	var ctxv, res *share.Tensor
	if b.cf != nil {
		if ctxv, err = p.foldedAttention(ctx, s, i, y, b.cf, padding); err != nil {
			return nil, fmt.Errorf("folded attention: %w", err)
		}
		res = x
		if b.cf.classOnly {
			res = firstToken(x)
		}
	} else {
		var q, kv *share.Tensor
		if q, kv, res, err = p.blockQKV(ctx, s, i, x, y, b, padding, last); err != nil {
			return nil, err
		}
		sc, vh, err := p.attentionScores(ctx, s, q, kv)
		if err != nil {
			return nil, err
		}
		if ctxv, err = p.attentionValues(ctx, s, i, sc, vh, b, padding); err != nil {
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
	if err := share.AddInPlace(att, res); err != nil { // residual
		return nil, fmt.Errorf("attention residual: %w", err)
	}
	return p.blockFFN(ctx, s, att, b)
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

package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Private embeddings (Options.PrivateEmbeddings): for models whose embedding
// tables are the model owner's secret, the data owner shares its raw input
// rows instead of embeddings: one-hot token ids and token types (text,
// [B, T, vocab + types], ring integers) or flattened patches (ViT,
// [B, T, channels·p·p], row 0 — the class token's slot — zero). The
// embedding is one MatMulWeights with the table, to which party 0 adds the
// positions (and ViT's patch bias and class token); text models then apply
// their embedding LayerNorm exactly (protocol.InvSqrt, γ by
// MulPrivateVector, β by party 0). Cost: P1 msg(B·T·rows), plus a truncation
// (ViT) or the exact LayerNorm (text, 32 rounds of InvSqrt and 6 more).

// embeddingWeights is the model owner's clear embedding layer.
type embeddingWeights struct {
	table []float64         // [rows, hidden]: word then type rows (text) or the patch projection (ViT)
	add   []float64         // [seq, hidden]: positions (+ class token / patch bias for ViT)
	ln    *layerNormWeights // text: embedding LayerNorm (exact)
}

// preparedEmbedding is the shared embedding layer.
type preparedEmbedding struct {
	table *protocol.Weight
	add   []uint64
	ln    *preparedLayerNorm
}

// EmbedRows returns the data owner's private-embedding input of a batch for a
// model of configuration cfg, padded to seq: one-hot rows of width
// Arch.EmbedRows for text, flattened patches for ViT (see
// Options.PrivateEmbeddings). It needs no weight.
func EmbedRows(cfg model.Config, in model.Input, seq int) (*Batch, error) {
	switch cfg.Family {
	case model.ViT:
		c, p, size := cfg.NumChannels, cfg.PatchSize, cfg.ImageSize
		if p <= 0 || seq != cfg.NumPatches()+1 {
			return nil, fmt.Errorf("secure: embed rows: vit of %d patches, seq %d", cfg.NumPatches(), seq)
		}
		g, w := size/p, c*p*p
		x := make([]float64, len(in.Pixels)*seq*w)
		for i, img := range in.Pixels {
			if len(img) != c*size*size {
				return nil, fmt.Errorf("secure: embed rows: image %d has %d values, want %d", i, len(img), c*size*size)
			}
			for gy := 0; gy < g; gy++ {
				for gx := 0; gx < g; gx++ {
					dst := x[(i*seq+1+gy*g+gx)*w:]
					k := 0
					for cc := 0; cc < c; cc++ {
						for r := 0; r < p; r++ {
							copy(dst[k:k+p], img[cc*size*size+(gy*p+r)*size+gx*p:][:p])
							k += p
						}
					}
				}
			}
		}
		return &Batch{X: x}, nil
	case model.BERT, model.DistilBERT:
		v, tv := cfg.VocabSize, typeRows(cfg)
		w := v + tv
		x := make([]float64, len(in.IDs)*seq*w)
		for i, row := range in.IDs {
			if len(row) != seq {
				return nil, fmt.Errorf("secure: embed rows: sample %d has %d tokens, want %d", i, len(row), seq)
			}
			for t, id := range row {
				if id < 0 || id >= v {
					return nil, fmt.Errorf("secure: embed rows: token %d at sample %d outside the vocabulary of %d", id, i, v)
				}
				x[(i*seq+t)*w+id] = 1
				if tv > 0 {
					ty := 0
					if in.TypeIDs != nil {
						ty = in.TypeIDs[i][t]
					}
					if ty < 0 || ty >= tv {
						return nil, fmt.Errorf("secure: embed rows: token type %d at sample %d", ty, i)
					}
					x[(i*seq+t)*w+v+ty] = 1
				}
			}
		}
		return &Batch{X: x, Mask: in.Mask}, nil
	}
	return nil, fmt.Errorf("secure: embed rows: unknown family %q", cfg.Family)
}

func typeRows(cfg model.Config) int {
	if cfg.Family == model.BERT {
		return cfg.TypeVocabSize
	}
	return 0
}

// embFrom extracts the embedding layer of m for inputs of seq tokens.
func embFrom(m *model.Model, seq int) (*embeddingWeights, error) {
	c := m.Config
	h := c.Hidden
	e := &embeddingWeights{add: make([]float64, seq*h)}
	if c.Family == model.ViT {
		l := fromLinear(m.Patch)
		if l.out != h || len(m.PosEmb.Value.Data) != seq*h {
			return nil, fmt.Errorf("secure: vit embeddings do not fit seq %d", seq)
		}
		e.table = l.w
		copy(e.add, m.PosEmb.Value.Data)
		for j := 0; j < h; j++ {
			e.add[j] += m.CLS.Value.Data[j]
			for t := 1; t < seq; t++ {
				if l.b != nil {
					e.add[t*h+j] += l.b[j]
				}
			}
		}
		return e, nil
	}
	if seq > c.MaxPositions {
		return nil, fmt.Errorf("secure: seq %d beyond %d positions", seq, c.MaxPositions)
	}
	e.table = append([]float64(nil), m.Word.Table.Value.Data...)
	if m.TokenType != nil {
		e.table = append(e.table, m.TokenType.Table.Value.Data...)
	}
	copy(e.add, m.Position.Table.Value.Data[:seq*h])
	e.ln = fromLN(m.EmbLN, nil)
	return e, nil
}

// embedRowsOf returns the width of the private-embedding input rows.
func embedRowsOf(cfg model.Config) int {
	if cfg.Family == model.ViT {
		return cfg.NumChannels * cfg.PatchSize * cfg.PatchSize
	}
	return cfg.VocabSize + typeRows(cfg)
}

// prepareEmb shares the embedding table and, for text, the embedding
// LayerNorm's γ.
func (p *Prepared) prepareEmb(ctx context.Context, s *protocol.Session, e *embeddingWeights) error {
	a := p.arch
	h := a.Hidden
	out := &preparedEmbedding{}
	var tbl *share.Tensor
	if p.party == 0 {
		enc, err := encode(e.table, p.fp.FracBits)
		if err != nil {
			return err
		}
		if tbl, err = share.FromData(enc, a.EmbedRows, h); err != nil {
			return err
		}
		if out.add, err = encode(e.add, p.fp.FracBits); err != nil {
			return err
		}
	}
	w, err := s.ShareWeight(ctx, p.id(), tbl, a.EmbedRows, h)
	if err != nil {
		return err
	}
	out.table = w
	if p.textual() {
		ln := &preparedLayerNorm{}
		var g *share.Tensor
		if p.party == 0 {
			enc, err := encode(e.ln.gamma, p.fp.FracBits)
			if err != nil {
				return err
			}
			g = &share.Tensor{Shape: []int{h}, Data: enc}
			if ln.beta, err = encode(e.ln.beta, p.fp.FracBits); err != nil {
				return err
			}
		}
		if ln.gamma, err = s.ShareVector(ctx, p.id(), g, h); err != nil {
			return err
		}
		out.ln = ln
	}
	p.emb = out
	return nil
}

// embed computes the shared embeddings [B, T, H] from the shared input rows.
func (p *Prepared) embed(ctx context.Context, s *protocol.Session, rows *share.Tensor) (*share.Tensor, error) {
	x, err := s.MatMulWeights(ctx, rows, p.emb.table)
	if err != nil {
		return nil, err
	}
	if !p.textual() { // patches are fixed point; one-hot rows are integers
		if x, err = s.Trunc(ctx, x); err != nil {
			return nil, err
		}
	}
	if p.party == 0 {
		per := len(p.emb.add)
		for b := 0; b < len(x.Data)/per; b++ {
			blk := x.Data[b*per : (b+1)*per]
			for j := range blk {
				blk[j] += p.emb.add[j]
			}
		}
	}
	if p.emb.ln != nil {
		return p.layerNorm(ctx, s, x, p.emb.ln)
	}
	return x, nil
}

// Embed computes the data owner's public part of the forward pass: the
// frozen embeddings of m (token, position, type and embedding LayerNorm, or
// ViT's patch projection, class token and positions) of a batch, in
// evaluation mode, as a Batch for Forward. Text inputs must already be padded
// to one length; their Mask (nil = no padding) is carried over.
func Embed(m *model.Model, in model.Input) (*Batch, error) {
	if m == nil {
		return nil, fmt.Errorf("secure: embed with a nil model")
	}
	m.SetTraining(false)
	x, _, err := m.Embed(in)
	if err != nil {
		return nil, fmt.Errorf("secure: embed: %w", err)
	}
	return &Batch{X: x.Data, Mask: in.Mask}, nil
}

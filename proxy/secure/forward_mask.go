package secure

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The padding mask of a text batch (shared by the data owner, or public) and
// the terms it contributes to each block: the masked block input, the key
// and value biases of the unpadded rows, the softmax MLP's fill term and the
// exact softmax's shifted scores.

// paddingMask holds the secret (or public) padding mask of one batch.
type paddingMask struct {
	// m is the mask [B, T] as integer (0/1) shares (private) or clear words
	// (public): the last column of a folded class block's Y_aug.
	m *share.Tensor
	// bits is the private mask's clear words [B·T] at the data owner (party
	// 1), who keeps them and never sends them: a block's input (layers ≥ 1;
	// the data owner zeroes its embeddings itself) has its padded rows
	// zeroed by protocol.MulPrivateRowBits, where the data owner sends one
	// bit per row. nil at the model owner and with a public mask.
	bits []uint64
	// kvb holds m⊗[b_K | b_V] of every layer but a folded last one
	// (kvBiasLayers): [B·T, layers·2·inner], the key and value biases of the
	// unpadded rows only; nil without such a layer.
	kvb *share.Tensor
	// omm is 1−m, [B, T], integer shares (private) or clear words (public).
	omm *share.Tensor
	// fill holds (1−m)·G: [B, layers·d] shares of fixed-point values.
	fill *share.Tensor
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

// shareMask makes the batch's padding mask: shared by party 1 (private) or
// known to both (public), with the terms every block adds from it.
func (p *Prepared) shareMask(ctx context.Context, s *protocol.Session, B int, in *Batch) (*paddingMask, error) {
	a := p.arch
	T, I2 := a.Seq, 2*a.inner()
	L := kvBiasLayers(a, p.opt)
	var m *share.Tensor
	var bits []uint64
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
			bits = w // the data owner's clear mask, kept for MulPrivateRowBits
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
	st := &paddingMask{m: m, bits: bits}
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

// blockInput is the attention's input of block i: x itself, after the first
// layernorm in the pre-norm (ViT) family, with the padded rows zeroed when a
// padding mask is in use (layers ≥ 1, or layer 0 when the model owner embeds:
// the data owner zeroes its own embeddings).
func (p *Prepared) blockInput(ctx context.Context, s *protocol.Session, i int, x *share.Tensor, b *preparedBlock, padding *paddingMask) (*share.Tensor, error) {
	y := x
	var err error
	if p.arch.Family == model.ViT {
		if y, err = p.layerNorm(ctx, s, x, &b.ln1); err != nil {
			return nil, fmt.Errorf("layernorm: %w", err)
		}
	}
	if padding != nil && (i > 0 || p.emb != nil) {
		// Zero the padded rows: their keys and values must vanish. The
		// data owner knows the private mask in the clear, so the product is
		// one-sided: the model owner sends its masked share, the data owner
		// one bit per row.
		if p.opt.PublicMask {
			H := p.arch.Hidden
			if len(y.Data) != len(padding.m.Data)*H {
				return nil, fmt.Errorf("mask block input: %v rows for a mask of %v", y.Shape, padding.m.Shape)
			}
			y = y.Clone()
			for j := range y.Data {
				y.Data[j] *= padding.m.Data[j/H]
			}
		} else if y, err = s.MulPrivateRowBits(ctx, y, padding.bits); err != nil {
			return nil, fmt.Errorf("mask block input: %w", err)
		}
	}
	return y, nil
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

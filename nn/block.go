package nn

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// FFN is the position-wise feed-forward network Out(Act(In(x))).
type FFN struct {
	// In maps D to the intermediate width, Out maps it back.
	In, Out *Linear
	// Act is the activation (GeLU by default; a proxy may swap in ReLU).
	Act Module
}

// Forward computes Out(Act(In(x))).
func (f *FFN) Forward(x *Tensor) (*Tensor, error) {
	h, err := f.In.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	if h, err = f.Act.Forward(h); err != nil {
		return nil, fmt.Errorf("ffn activation: %w", err)
	}
	y, err := f.Out.Forward(h)
	if err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	return y, nil
}

// Backward propagates through Out, Act and In.
func (f *FFN) Backward(dy *Tensor) (*Tensor, error) {
	g, err := f.Out.Backward(dy)
	if err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	if g, err = f.Act.Backward(g); err != nil {
		return nil, fmt.Errorf("ffn activation: %w", err)
	}
	if g, err = f.In.Backward(g); err != nil {
		return nil, fmt.Errorf("ffn: %w", err)
	}
	return g, nil
}

// Params returns the parameters of In, Act and Out.
func (f *FFN) Params() []*Param {
	return slices.Concat(f.In.Params(), f.Act.Params(), f.Out.Params())
}

// Block is a transformer encoder layer.
//
// Post-LN (BERT, DistilBERT): h = LN1(x + Drop(Attn(x))); y = LN2(h + Drop(FFN(h))).
// Pre-LN (ViT):               h = x + Drop(Attn(LN1(x))); y = h + Drop(FFN(LN2(h))).
//
// A nil FFN removes the feed-forward sub-layer together with LN2 in the pre-LN form
// (y = h) and keeps LN2 in the post-LN form (y = LN2(h)) when LN2 is non-nil.
type Block struct {
	// Attn is the self-attention sub-layer.
	Attn *MultiHeadAttention
	// LN1 and LN2 are the two layer norms (see the type comment for their places).
	LN1, LN2 *LayerNorm
	// FFN is the feed-forward sub-layer; nil removes it.
	FFN *FFN
	// PreLN selects the pre-LN arrangement.
	PreLN bool
	// Drop1 and Drop2 are the hidden dropouts on the attention and FFN outputs.
	Drop1, Drop2 *Dropout
}

// BlockConfig sizes a Block.
type BlockConfig struct {
	// Dim, Heads and Intermediate are the hidden width, head count and FFN width.
	Dim, Heads, Intermediate int
	// Eps is the LayerNorm epsilon.
	Eps float64
	// Act is the FFN activation name ("gelu", "relu").
	Act string
	// PreLN selects the pre-LN arrangement.
	PreLN bool
	// HiddenDropout and AttentionDropout are the dropout probabilities.
	HiddenDropout, AttentionDropout float64
	// NoInit leaves the linear weights and biases zero (for weights about to be
	// loaded from a checkpoint).
	NoInit bool
}

// BlockNames gives the parameter-name prefixes of a block's sub-modules.
type BlockNames struct {
	// Query, Key, Value and Output name the attention projections.
	Query, Key, Value, Output string
	// LN1 and LN2 name the layer norms.
	LN1, LN2 string
	// FFNIn and FFNOut name the feed-forward linears.
	FFNIn, FFNOut string
}

// NewBlock returns a block with BERT-style initialisation: linear weights
// N(0, 0.02²), zero biases, unit LayerNorm. rng also drives the dropouts.
func NewBlock(c BlockConfig, n BlockNames, rng *rand.Rand) (*Block, error) {
	attn, err := NewMultiHeadAttention(n.Query, n.Key, n.Value, n.Output, c.Dim, c.Heads, nil)
	if err != nil {
		return nil, err
	}
	act, err := NewActivation(c.Act)
	if err != nil {
		return nil, err
	}
	if c.Intermediate <= 0 {
		return nil, fmt.Errorf("nn: block intermediate width %d", c.Intermediate)
	}
	b := &Block{
		Attn: attn, LN1: NewLayerNorm(n.LN1, c.Dim, c.Eps), LN2: NewLayerNorm(n.LN2, c.Dim, c.Eps),
		FFN:   &FFN{In: NewLinear(n.FFNIn, c.Dim, c.Intermediate, true, nil), Act: act, Out: NewLinear(n.FFNOut, c.Intermediate, c.Dim, true, nil)},
		PreLN: c.PreLN,
		Drop1: &Dropout{P: c.HiddenDropout, Rng: rng}, Drop2: &Dropout{P: c.HiddenDropout, Rng: rng},
	}
	attn.ProbDropout = &Dropout{P: c.AttentionDropout, Rng: rng}
	if !c.NoInit {
		if rng == nil {
			return nil, fmt.Errorf("nn: block initialisation needs an rng")
		}
		for _, l := range []*Linear{attn.Q, attn.K, attn.V, attn.O, b.FFN.In, b.FFN.Out} {
			InitNormal(l.W.Value, 0.02, rng)
		}
	}
	return b, nil
}

// SetTraining switches every dropout of the block on or off.
func (b *Block) SetTraining(on bool) {
	SetTraining(on, b.Attn, b.Drop1, b.Drop2)
	if b.FFN != nil {
		SetTraining(on, b.FFN.Act)
	}
}

// Forward applies the block to x [B, T, D] with key mask (see
// MultiHeadAttention.SetMask; nil attends everywhere).
func (b *Block) Forward(x, mask *Tensor) (*Tensor, error) {
	if err := b.Attn.SetMask(mask); err != nil {
		return nil, err
	}
	var (
		h   *Tensor
		err error
	)
	if b.PreLN {
		if h, err = chain(x, b.LN1, b.Attn, b.Drop1); err != nil {
			return nil, err
		}
		if err = AddInPlace(h, x); err != nil {
			return nil, err
		}
		if b.FFN == nil {
			return h, nil
		}
		y, err := chain(h, b.LN2, b.FFN, b.Drop2)
		if err != nil {
			return nil, err
		}
		if err = AddInPlace(y, h); err != nil {
			return nil, err
		}
		return y, nil
	}
	a, err := chain(x, b.Attn, b.Drop1)
	if err != nil {
		return nil, err
	}
	if err = AddInPlace(a, x); err != nil {
		return nil, err
	}
	if h, err = b.LN1.Forward(a); err != nil {
		return nil, err
	}
	if b.FFN == nil {
		if b.LN2 == nil {
			return h, nil
		}
		return b.LN2.Forward(h)
	}
	f, err := chain(h, b.FFN, b.Drop2)
	if err != nil {
		return nil, err
	}
	if err = AddInPlace(f, h); err != nil {
		return nil, err
	}
	return b.LN2.Forward(f)
}

// Backward propagates dy through the block and returns the input gradient.
func (b *Block) Backward(dy *Tensor) (*Tensor, error) {
	if b.PreLN {
		dh := dy
		if b.FFN != nil {
			g, err := chainBack(dy, b.Drop2, b.FFN, b.LN2)
			if err != nil {
				return nil, err
			}
			if err = AddInPlace(g, dy); err != nil {
				return nil, err
			}
			dh = g
		}
		g, err := chainBack(dh, b.Drop1, b.Attn, b.LN1)
		if err != nil {
			return nil, err
		}
		if err = AddInPlace(g, dh); err != nil {
			return nil, err
		}
		return g, nil
	}
	var (
		dh  *Tensor
		err error
	)
	switch {
	case b.FFN != nil:
		df, err := b.LN2.Backward(dy)
		if err != nil {
			return nil, err
		}
		if dh, err = chainBack(df, b.Drop2, b.FFN); err != nil {
			return nil, err
		}
		if err = AddInPlace(dh, df); err != nil {
			return nil, err
		}
	case b.LN2 != nil:
		if dh, err = b.LN2.Backward(dy); err != nil {
			return nil, err
		}
	default:
		dh = dy
	}
	da, err := b.LN1.Backward(dh)
	if err != nil {
		return nil, err
	}
	dx, err := chainBack(da, b.Drop1, b.Attn)
	if err != nil {
		return nil, err
	}
	if err = AddInPlace(dx, da); err != nil {
		return nil, err
	}
	return dx, nil
}

// Params returns the block's parameters: attention, LN1, FFN, LN2.
func (b *Block) Params() []*Param {
	ps := slices.Concat(b.Attn.Params(), b.LN1.Params())
	if b.FFN != nil {
		ps = append(ps, b.FFN.Params()...)
	}
	if b.LN2 != nil && (b.FFN != nil || !b.PreLN) {
		ps = append(ps, b.LN2.Params()...)
	}
	return ps
}

func chain(x *Tensor, mods ...Module) (*Tensor, error) {
	var err error
	for _, m := range mods {
		if x, err = m.Forward(x); err != nil {
			return nil, err
		}
	}
	return x, nil
}

func chainBack(dy *Tensor, mods ...Module) (*Tensor, error) {
	var err error
	for _, m := range mods {
		if dy, err = m.Backward(dy); err != nil {
			return nil, err
		}
	}
	return dy, nil
}

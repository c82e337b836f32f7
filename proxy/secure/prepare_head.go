package secure

import (
	"context"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/protocol"
)

// The head's shared weights: the classifier, folded into the entropy MLP's
// first layer unless the score is exact.

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

// FoldExtraBits is foldExtraBits for other packages: the extra fractional
// bits of the folded weights at f fractional bits (8 at the default f = 16),
// so that the folded attention's products carry 2f + FoldExtraBits(f).
func FoldExtraBits(f uint) uint { return foldExtraBits(f) }

package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// Kind distinguishes SelectFormer proxies from the MPCFormer-style baseline.
type Kind string

// Proxy kinds.
const (
	// SelectFormer is a proxy of Generate: pruned, FFN-free, MLP-emulated.
	SelectFormer Kind = "selectformer"
	// MPCFormer is the baseline of Baseline: full backbone, 2Quad softmax,
	// quadratic GeLU, distilled.
	MPCFormer Kind = "mpcformer"
)

// Proxy is a proxy model: a pruned copy of M_g whose nonlinear modules are
// replaced (see the package comment) plus the top softmax+entropy emulator.
type Proxy struct {
	// Kind says how the proxy was made.
	Kind Kind
	// Shape is its shape ⟨l, w, d⟩.
	Shape Shape
	// Ablation lists the modules kept exact.
	Ablation Ablation
	// Model holds the layers; its blocks have no FFN (SelectFormer) and their
	// attention softmax and LayerNorm reciprocal square roots may be MLPs.
	Model *model.Model
	// HeadsKept holds, per layer, the target's head indices that were kept.
	HeadsKept [][]int
	// AttnMLP and LNMLP hold each layer's softmax and LayerNorm MLPs (nil entries
	// where exact); FinalLNMLP is ViT's final LayerNorm MLP.
	AttnMLP, LNMLP []*mlp.MLP
	FinalLNMLP     *mlp.MLP
	// Entropy emulates softmax + the selection criterion's score over the
	// logits (nil: the exact score); the criterion is Criterion, the
	// prediction entropy by default.
	Entropy *mlp.MLP
	// SqrtEntropy says that Entropy was calibrated to the square root of the
	// criterion's score, √H for the entropy (Distill.SqrtEntropy): the proxy's
	// per-sample scores then rank samples alike; square them for scores.
	SqrtEntropy bool
	// Criterion names the selection criterion (mlp.RegisterCriterion) the
	// proxy scores candidates by; empty means mlp.DefaultCriterion, the
	// entropy (so proxies built before criteria existed keep theirs).
	Criterion string
	// TwoQuadC is the shift c of the baseline's 2Quad softmax (MPCFormer only).
	TwoQuadC float64

	head *head
	crit mlp.Criterion // looked up from Criterion by criterion()
}

// criterion returns the proxy's selection criterion.
func (p *Proxy) criterion() (mlp.Criterion, error) {
	if p.crit.Score != nil && (p.crit.Name == p.Criterion || (p.Criterion == "" && p.crit.Name == mlp.DefaultCriterion)) {
		return p.crit, nil
	}
	c, err := mlp.LookupCriterion(p.Criterion)
	if err != nil {
		return mlp.Criterion{}, fmt.Errorf("proxy: %w", err)
	}
	p.crit = c
	return c, nil
}

// exactScores returns the criterion's exact score of each row of logits.
func (p *Proxy) exactScores(logits *nn.Tensor) ([]float64, error) {
	c, err := p.criterion()
	if err != nil {
		return nil, err
	}
	return c.ScoreRows(logits), nil
}

// needFunc returns the ex vivo MLP of a module for hidden width d.
type needFunc func(module string, d int) (*mlp.MLP, error)

// buildProxy prunes M_g to the phase's shape and substitutes the MLPs (the
// entropy MLP of width entHidden when positive, d otherwise).
func buildProxy(mg *model.Model, ph Shape, ab Ablation, entHidden int, scores [][]float64, need needFunc) (*Proxy, error) {
	m, err := copyBottom(mg, ph.Layers, 1)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Kind: SelectFormer, Shape: ph, Ablation: ab, Model: m}
	for i := range m.Blocks {
		p.HeadsKept = append(p.HeadsKept, topHeads(scores[i], ph.Heads))
	}
	if err := p.shape(); err != nil {
		return nil, err
	}
	for i, b := range m.Blocks {
		if !ab.ExactAttnSoftmax {
			e, err := need(softmaxName(i), ph.MLPHidden)
			if err != nil {
				return nil, err
			}
			p.AttnMLP[i] = e.Clone(fmt.Sprintf("%s.d%d", softmaxName(i), ph.MLPHidden))
			b.Attn.Softmax = p.AttnMLP[i]
		}
		if !ab.ExactLayerNorm {
			e, err := need(lnName(i), ph.MLPHidden)
			if err != nil {
				return nil, err
			}
			p.LNMLP[i] = e.Clone(fmt.Sprintf("%s.d%d", lnName(i), ph.MLPHidden))
			b.LN1.InvSqrt = p.LNMLP[i]
		}
	}
	if m.FinalLN != nil && !ab.ExactLayerNorm {
		e, err := need(finalLNName, ph.MLPHidden)
		if err != nil {
			return nil, err
		}
		p.FinalLNMLP = e.Clone(fmt.Sprintf("%s.d%d", finalLNName, ph.MLPHidden))
		m.FinalLN.InvSqrt = p.FinalLNMLP
	}
	if !ab.ExactEntropy {
		d := ph.MLPHidden
		if entHidden > 0 {
			d = entHidden
		}
		e, err := need(entropyName, d)
		if err != nil {
			return nil, err
		}
		p.Entropy = e.Clone(fmt.Sprintf("%s.d%d", entropyName, d))
	}
	return p, nil
}

// shape applies the structural edits of a SelectFormer proxy to p.Model: heads
// pruned to HeadsKept, FFN and its LayerNorm removed, masked scores set to −Inf,
// embeddings frozen. The MLP slots are allocated (nil).
func (p *Proxy) shape() error {
	m := p.Model
	if len(p.HeadsKept) != len(m.Blocks) {
		return fmt.Errorf("proxy: %d head lists for %d layers", len(p.HeadsKept), len(m.Blocks))
	}
	for i, b := range m.Blocks {
		if err := b.Attn.PruneHeads(p.HeadsKept[i]); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		if p.Kind == SelectFormer {
			b.FFN, b.LN2 = nil, nil
		}
		b.Attn.MaskFill = math.Inf(-1)
	}
	for _, q := range m.EmbeddingParams() {
		q.Frozen = true
	}
	p.AttnMLP = make([]*mlp.MLP, len(m.Blocks))
	p.LNMLP = make([]*mlp.MLP, len(m.Blocks))
	p.head = newHead(m, p.Kind == SelectFormer)
	return nil
}

// Params returns every parameter of the proxy (embeddings included, frozen), the
// entropy MLP's last.
func (p *Proxy) Params() []*nn.Param {
	ps := p.Model.Params()
	if p.Entropy != nil {
		ps = append(ps, p.Entropy.Params()...)
	}
	return ps
}

// MLPs returns the proxy's MLPs by name (the prefix of their parameter names).
func (p *Proxy) MLPs() map[string]*mlp.MLP {
	out := map[string]*mlp.MLP{}
	add := func(m *mlp.MLP) {
		if m != nil {
			n := m.FC1.W.Name
			out[n[:len(n)-len(".fc1.weight")]] = m
		}
	}
	for i := range p.AttnMLP {
		add(p.AttnMLP[i])
		add(p.LNMLP[i])
	}
	add(p.FinalLNMLP)
	add(p.Entropy)
	return out
}

// head is the classification head of a proxy: class token → [final LayerNorm] →
// [pooler or pre-classifier → ReLU] → dropout → classifier. A SelectFormer proxy
// uses ReLU where the target has tanh (BERT's pooler), so that no other
// nonlinearity remains; the baseline keeps the target's head.
type head struct {
	m    *model.Model
	mods []nn.Module
	t    int
	own  bool
}

func newHead(m *model.Model, relu bool) *head {
	h := &head{m: m, own: relu}
	switch {
	case m.FinalLN != nil:
		h.mods = append(h.mods, m.FinalLN)
	case m.Pooler != nil:
		h.mods = append(h.mods, m.Pooler, &nn.ReLU{})
	case m.PreClassifier != nil:
		h.mods = append(h.mods, m.PreClassifier, &nn.ReLU{})
	}
	h.mods = append(h.mods, m.HeadDrop, m.Classifier)
	return h
}

func (h *head) forward(x *nn.Tensor) (*nn.Tensor, error) {
	if !h.own {
		return h.m.Head(x)
	}
	cls, t, err := model.FirstToken(x)
	if err != nil {
		return nil, fmt.Errorf("proxy head: %w", err)
	}
	h.t = t
	for _, mod := range h.mods {
		if cls, err = mod.Forward(cls); err != nil {
			return nil, fmt.Errorf("proxy head: %w", err)
		}
	}
	return cls, nil
}

func (h *head) backward(dl *nn.Tensor) (*nn.Tensor, error) {
	if !h.own {
		return h.m.HeadBackward(dl)
	}
	g := dl
	var err error
	for i := len(h.mods) - 1; i >= 0; i-- {
		if g, err = h.mods[i].Backward(g); err != nil {
			return nil, fmt.Errorf("proxy head: %w", err)
		}
	}
	return model.FirstTokenBackward(g, h.t), nil
}

// Logits returns the proxy's logits [B, labels] for a batch.
func (p *Proxy) Logits(in model.Input) (*nn.Tensor, error) {
	if p.head == nil {
		return nil, fmt.Errorf("proxy: not initialised (use Generate, Baseline or Load)")
	}
	x, mask, err := p.Model.Embed(in)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	for i, b := range p.Model.Blocks {
		if x, err = b.Forward(x, mask); err != nil {
			return nil, fmt.Errorf("proxy layer %d: %w", i, err)
		}
	}
	return p.head.forward(x)
}

// backward propagates the logits' gradient through the head and the blocks (the
// embeddings are frozen).
func (p *Proxy) backward(dl *nn.Tensor) error {
	dx, err := p.head.backward(dl)
	if err != nil {
		return err
	}
	for i := len(p.Model.Blocks) - 1; i >= 0; i-- {
		if dx, err = p.Model.Blocks[i].Backward(dx); err != nil {
			return fmt.Errorf("proxy layer %d: %w", i, err)
		}
	}
	return nil
}

// entropyOf returns the criterion's score per row of logits (the entropy by
// default): the MLP's output or, when the score is exact, the criterion's
// exact score.
func (p *Proxy) entropyOf(logits *nn.Tensor) ([]float64, error) {
	if p.Entropy == nil {
		return p.exactScores(logits)
	}
	y, err := p.Entropy.Forward(logits)
	if err != nil {
		return nil, fmt.Errorf("proxy entropy: %w", err)
	}
	return slices.Clone(y.Data), nil
}

// Forward returns the logits and the entropy of each sample of a batch (evaluation
// mode: no dropout).
func (p *Proxy) Forward(in model.Input) (*nn.Tensor, []float64, error) {
	p.Model.SetTraining(false)
	logits, err := p.Logits(in)
	if err != nil {
		return nil, nil, err
	}
	h, err := p.entropyOf(logits)
	if err != nil {
		return nil, nil, err
	}
	return logits, h, nil
}

// Entropies returns the entropy of every sample of in, evaluated in batches.
func (p *Proxy) Entropies(in model.Input, batchSize int) ([]float64, error) {
	if batchSize <= 0 {
		return nil, fmt.Errorf("proxy entropies: batch size %d", batchSize)
	}
	out := make([]float64, 0, in.Len())
	err := inBatches(in, batchSize, "proxy entropies", func(batch model.Input) error {
		_, h, err := p.Forward(batch)
		out = append(out, h...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// inBatches calls f on the samples of in, batchSize at a time in order
// (batchSize > 0), and wraps an error with what and the batch's range.
func inBatches(in model.Input, batchSize int, what string, f func(batch model.Input) error) error {
	n := in.Len()
	for off := 0; off < n; off += batchSize {
		idx := make([]int, 0, batchSize)
		for i := off; i < min(off+batchSize, n); i++ {
			idx = append(idx, i)
		}
		batch, err := in.Select(idx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := f(batch); err != nil {
			return fmt.Errorf("%s %d-%d: %w", what, off, off+len(idx)-1, err)
		}
	}
	return nil
}

// tuneInVivo fine-tunes the proxy end to end on the bootstrap set: cross-entropy
// of the logits plus, for the entropy MLP, EntropyWeight × the squared error
// between its output and the exact entropy of the proxy's own logits (the logits
// are detached there, so the auxiliary loss trains only the entropy MLP).
func (p *Proxy) tuneInVivo(ctx context.Context, boot model.Input, labels []int, cfg Config, stage string, log *slog.Logger) error {
	w := cfg.EntropyWeight
	if w <= 0 {
		w = 1
	}
	params := trainableParams(p.Params())
	step := func(batch model.Input, y []int, _ bool) (float64, error) {
		logits, err := p.Logits(batch)
		if err != nil {
			return 0, err
		}
		loss, dl, err := nn.CrossEntropy(logits, y)
		if err != nil {
			return 0, err
		}
		if p.Entropy != nil {
			det := logits.Clone()
			pred, err := p.Entropy.Forward(det)
			if err != nil {
				return 0, err
			}
			exact, err := p.exactScores(det)
			if err != nil {
				return 0, err
			}
			g := nn.New(pred.Shape...)
			for i, v := range pred.Data {
				d := v - exact[i]
				g.Data[i] = w * 2 * d / float64(len(exact))
			}
			if _, err := p.Entropy.Backward(g); err != nil {
				return 0, err
			}
		}
		if err := p.backward(dl); err != nil {
			return 0, err
		}
		return loss, nil
	}
	return trainLoop(ctx, boot, labels, cfg.InVivo, cfg.Seed+uint64(p.Shape.Layers)*31+uint64(p.Shape.MLPHidden), params, p.Model, step, stage, cfg.Progress, log)
}

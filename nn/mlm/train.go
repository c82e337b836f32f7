package mlm

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// Config sets up masked-language-model pretraining.
type Config struct {
	// Steps is the number of optimiser steps; BatchSize the sequences a step.
	Steps, BatchSize int
	// LR is AdamW's peak learning rate, reached after WarmupFrac of the steps
	// and decayed linearly to 0 at the last; WeightDecay its decoupled decay;
	// ClipNorm clips the global gradient norm (0: no clipping).
	LR, WeightDecay, WarmupFrac, ClipNorm float64
	// MaskRate is the fraction of the (non-special) tokens a sequence
	// predicts, BERT's 15% when 0.
	MaskRate float64
	// Seed fixes the order of the sequences and the masking.
	Seed uint64
	// EvalEvery is the number of steps between two points of the loss
	// curve (each also evaluates the held-out sequences); 0: Steps/20.
	EvalEvery int
	// Logger, if set, gets one line per point of the curve.
	Logger *slog.Logger
}

// Point is one point of the pretraining loss curve.
type Point struct {
	// Step is the number of optimiser steps taken.
	Step int `json:"step"`
	// TrainLoss is the mean masked-token cross-entropy (nats) of the steps
	// since the previous point (0 at step 0).
	TrainLoss float64 `json:"train_loss"`
	// EvalLoss and EvalAccuracy are the held-out sequences' masked-token
	// cross-entropy and top-1 accuracy (the same masks at every point).
	EvalLoss     float64 `json:"eval_loss"`
	EvalAccuracy float64 `json:"eval_accuracy"`
	// Seconds is the training time so far.
	Seconds float64 `json:"seconds"`
}

// Stats summarises a pretraining run.
type Stats struct {
	// Curve is the loss curve, one point every Config.EvalEvery steps and
	// one at the end; Curve[0] is the untrained model (step 0).
	Curve []Point
	// Duration is the wall-clock time of the run.
	Duration time.Duration
}

// Masked is a batch of sequences prepared for masked-language modelling:
// the corrupted inputs, and for each predicted position its place in the
// flattened batch (sequence·T + token) and its original token.
type Masked struct {
	// Input is the corrupted batch.
	Input model.Input
	// Positions and Targets are the predicted positions and their tokens.
	Positions, Targets []int
}

// Mask corrupts seqs (token ids of equal length, padded with v's [PAD]) as
// BERT does: each token other than [PAD], [CLS], [SEP], [MASK] and [UNK] is
// predicted with probability rate; a predicted token becomes [MASK] with
// probability 0.8, a uniformly drawn non-special token with probability
// 0.1, and stays itself otherwise. A batch with no candidate token fails;
// one where the draw picked none predicts its first candidate.
func Mask(seqs [][]int, v *wordpiece.Vocab, rate float64, rng *rand.Rand) (Masked, error) {
	var out Masked
	if len(seqs) == 0 || len(seqs[0]) == 0 {
		return out, errors.New("mlm: mask: empty batch")
	}
	if !(rate > 0 && rate <= 1) {
		return out, fmt.Errorf("mlm: mask rate %v outside (0, 1]", rate)
	}
	special := map[int]bool{v.PadID(): true, v.ClsID(): true, v.SepID(): true, v.MaskID(): true, v.UnkID(): true}
	if v.MaskID() < 0 {
		return out, fmt.Errorf("mlm: the vocabulary has no %s token", wordpiece.MaskToken)
	}
	var normal []int // the non-special ids, for random replacements
	for id := range v.Size() {
		if !special[id] {
			normal = append(normal, id)
		}
	}
	if len(normal) == 0 {
		return out, errors.New("mlm: the vocabulary has no ordinary tokens")
	}
	t := len(seqs[0])
	in := model.Input{IDs: make([][]int, len(seqs)), Mask: make([][]int, len(seqs))}
	first := -1
	for i, s := range seqs {
		if len(s) != t {
			return out, fmt.Errorf("mlm: mask: sequence %d has %d tokens, sequence 0 has %d", i, len(s), t)
		}
		ids, att := append([]int(nil), s...), make([]int, t)
		for j, id := range s {
			if id < 0 || id >= v.Size() {
				return out, fmt.Errorf("mlm: mask: token id %d of sequence %d outside the vocabulary of %d", id, i, v.Size())
			}
			if id != v.PadID() {
				att[j] = 1
			}
			if special[id] {
				continue
			}
			if first < 0 {
				first = i*t + j
			}
			if rng.Float64() >= rate {
				continue
			}
			out.Positions, out.Targets = append(out.Positions, i*t+j), append(out.Targets, id)
			switch r := rng.Float64(); {
			case r < 0.8:
				ids[j] = v.MaskID()
			case r < 0.9:
				ids[j] = normal[rng.IntN(len(normal))]
			}
		}
		in.IDs[i], in.Mask[i] = ids, att
	}
	if first < 0 {
		return out, errors.New("mlm: mask: the batch has no token to predict")
	}
	if len(out.Positions) == 0 {
		i, j := first/t, first%t
		out.Positions, out.Targets = []int{first}, []int{seqs[i][j]}
		in.IDs[i][j] = v.MaskID()
	}
	out.Input = in
	return out, nil
}

// gather returns the rows pos of x [B, T, H] as [len(pos), H].
func gather(x *nn.Tensor, pos []int) *nn.Tensor {
	h := x.Cols()
	g := nn.New(len(pos), h)
	for i, p := range pos {
		copy(g.Data[i*h:(i+1)*h], x.Data[p*h:(p+1)*h])
	}
	return g
}

// scatter places the rows of g [len(pos), H] at pos of a zero tensor shaped
// like x.
func scatter(g *nn.Tensor, pos []int, shape []int) *nn.Tensor {
	d := nn.New(shape...)
	h := g.Cols()
	for i, p := range pos {
		copy(d.Data[p*h:(p+1)*h], g.Data[i*h:(i+1)*h])
	}
	return d
}

// Loss returns the masked-token cross-entropy and top-1 accuracy of m with
// hd on a masked batch (a forward pass only).
func Loss(m *model.Model, hd *Head, b Masked) (loss, acc float64, err error) {
	x, err := m.Encode(b.Input)
	if err != nil {
		return 0, 0, err
	}
	logits, err := hd.Forward(gather(x, b.Positions))
	if err != nil {
		return 0, 0, err
	}
	loss, _, err = nn.CrossEntropy(logits, b.Targets)
	if err != nil {
		return 0, 0, err
	}
	right := 0
	for i, p := range nn.Argmax(logits) {
		if p == b.Targets[i] {
			right++
		}
	}
	return loss, float64(right) / float64(len(b.Targets)), nil
}

// step runs one forward and backward pass of a masked batch and returns its
// loss; the gradients accumulate.
func step(m *model.Model, hd *Head, b Masked) (float64, error) {
	x, err := m.Encode(b.Input)
	if err != nil {
		return 0, err
	}
	logits, err := hd.Forward(gather(x, b.Positions))
	if err != nil {
		return 0, err
	}
	loss, dl, err := nn.CrossEntropy(logits, b.Targets)
	if err != nil {
		return 0, err
	}
	dg, err := hd.Backward(dl)
	if err != nil {
		return 0, err
	}
	return loss, m.EncodeBackward(scatter(dg, b.Positions, x.Shape))
}

// Train pretrains m (a BERT or DistilBERT encoder; its pooler or
// pre-classifier and classifier are not used) and the head hd by masked
// language modelling on train, sequences of token ids of v (see Pack), with
// AdamW. Dropout is off (m stays in evaluation mode): a small model trained
// for few steps underfits. eval, if non-empty, is masked once (seeded) and
// scored at every point of the curve.
func Train(m *model.Model, hd *Head, v *wordpiece.Vocab, train, eval [][]int, cfg Config) (Stats, error) {
	var st Stats
	if cfg.Steps <= 0 || cfg.BatchSize <= 0 || !(cfg.LR > 0) {
		return st, fmt.Errorf("mlm: steps %d, batch size %d, learning rate %g must be positive", cfg.Steps, cfg.BatchSize, cfg.LR)
	}
	if len(train) == 0 {
		return st, errors.New("mlm: no training sequences")
	}
	rate := cfg.MaskRate
	if rate == 0 {
		rate = 0.15
	}
	every := cfg.EvalEvery
	if every <= 0 {
		every = max(cfg.Steps/20, 1)
	}
	rng := nn.NewRNG(cfg.Seed)
	var evalBatches []Masked
	erng := nn.NewRNG(cfg.Seed ^ 0x9e3779b97f4a7c15)
	for off := 0; off < len(eval); off += cfg.BatchSize {
		b, err := Mask(eval[off:min(off+cfg.BatchSize, len(eval))], v, rate, erng)
		if err != nil {
			return st, fmt.Errorf("mlm: held-out sequences: %w", err)
		}
		evalBatches = append(evalBatches, b)
	}
	evaluate := func() (float64, float64, error) {
		if len(evalBatches) == 0 {
			return math.NaN(), math.NaN(), nil
		}
		var loss, acc, n float64
		for _, b := range evalBatches {
			l, a, err := Loss(m, hd, b)
			if err != nil {
				return 0, 0, err
			}
			w := float64(len(b.Targets))
			loss, acc, n = loss+l*w, acc+a*w, n+w
		}
		return loss / n, acc / n, nil
	}
	m.SetTraining(false)
	params := append(m.Params(), hd.Params()...)
	opt := &nn.AdamW{LR: cfg.LR, WeightDecay: cfg.WeightDecay, ClipNorm: cfg.ClipNorm,
		WarmupSteps: int(math.Round(cfg.WarmupFrac * float64(cfg.Steps))), TotalSteps: cfg.Steps}
	start := time.Now()
	point := func(s int, train float64) error {
		el, ea, err := evaluate()
		if err != nil {
			return fmt.Errorf("mlm: held-out loss at step %d: %w", s, err)
		}
		p := Point{Step: s, TrainLoss: train, EvalLoss: el, EvalAccuracy: ea, Seconds: time.Since(start).Seconds()}
		st.Curve = append(st.Curve, p)
		if cfg.Logger != nil {
			cfg.Logger.Info("mlm pretraining", "step", s, "of", cfg.Steps, "train_loss", round(train), "eval_loss", round(el),
				"eval_accuracy", round(ea), "elapsed", time.Since(start).Round(time.Second))
		}
		return nil
	}
	if err := point(0, 0); err != nil {
		return st, err
	}
	var perm []int
	sum, count := 0.0, 0
	for s := 1; s <= cfg.Steps; s++ {
		if len(perm) < cfg.BatchSize {
			perm = append(perm, rng.Perm(len(train))...)
		}
		batch := make([][]int, 0, cfg.BatchSize)
		for _, i := range perm[:min(cfg.BatchSize, len(train))] {
			batch = append(batch, train[i])
		}
		perm = perm[min(cfg.BatchSize, len(train)):]
		b, err := Mask(batch, v, rate, rng)
		if err != nil {
			return st, fmt.Errorf("mlm: step %d: %w", s, err)
		}
		nn.ZeroGrad(params)
		loss, err := step(m, hd, b)
		if err != nil {
			return st, fmt.Errorf("mlm: step %d: %w", s, err)
		}
		if _, err := opt.Step(params); err != nil {
			return st, fmt.Errorf("mlm: step %d: %w", s, err)
		}
		sum, count = sum+loss, count+1
		if s%every == 0 || s == cfg.Steps {
			if err := point(s, sum/float64(count)); err != nil {
				return st, err
			}
			sum, count = 0, 0
		}
	}
	st.Duration = time.Since(start)
	return st, nil
}

func round(v float64) float64 { return math.Round(v*1e4) / 1e4 }

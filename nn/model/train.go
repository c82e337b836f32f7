package model

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/selectformer/selectformer/nn"
)

// TrainConfig sets up fine-tuning.
type TrainConfig struct {
	// Epochs and BatchSize set the schedule.
	Epochs, BatchSize int
	// LR is the peak AdamW learning rate; WeightDecay its decoupled decay.
	LR, WeightDecay float64
	// WarmupFrac is the fraction of steps spent warming up linearly (then the rate
	// decays linearly to 0).
	WarmupFrac float64
	// ClipNorm clips the global gradient norm (0: no clipping).
	ClipNorm float64
	// Seed fixes the order of the samples.
	Seed uint64
	// FreezeEmbeddings marks the embedding parameters Frozen (they stay marked
	// after training).
	FreezeEmbeddings bool
	// Logger, if set, receives one line per epoch.
	Logger *slog.Logger
}

// TrainStats summarises a training run.
type TrainStats struct {
	// Steps is the number of optimiser steps.
	Steps int
	// EpochLoss is the mean training loss of each epoch.
	EpochLoss []float64
	// Duration is the wall-clock time.
	Duration time.Duration
}

// Train fine-tunes m on in with labels using AdamW, warm-up and linear decay.
func Train(m *Model, in Input, labels []int, cfg TrainConfig) (TrainStats, error) {
	var st TrainStats
	n := in.Len()
	if n == 0 || len(labels) != n {
		return st, fmt.Errorf("train: %d samples and %d labels", n, len(labels))
	}
	if cfg.Epochs <= 0 || cfg.BatchSize <= 0 || cfg.LR <= 0 {
		return st, fmt.Errorf("train: epochs %d, batch size %d, learning rate %g must be positive", cfg.Epochs, cfg.BatchSize, cfg.LR)
	}
	for i, y := range labels {
		if y < 0 || y >= m.Config.NumLabels() {
			return st, fmt.Errorf("train: label %d of sample %d outside [0,%d)", y, i, m.Config.NumLabels())
		}
	}
	start := time.Now()
	params := m.Params()
	if cfg.FreezeEmbeddings {
		for _, p := range m.EmbeddingParams() {
			p.Frozen = true
		}
	}
	steps := cfg.Epochs * ((n + cfg.BatchSize - 1) / cfg.BatchSize)
	opt := &nn.AdamW{LR: cfg.LR, WeightDecay: cfg.WeightDecay, ClipNorm: cfg.ClipNorm,
		WarmupSteps: int(math.Round(cfg.WarmupFrac * float64(steps))), TotalSteps: steps}
	rng := nn.NewRNG(cfg.Seed)
	m.SetTraining(true)
	defer m.SetTraining(false)
	for epoch := 0; epoch < cfg.Epochs; epoch++ {
		perm := rng.Perm(n)
		total := 0.0
		for off := 0; off < n; off += cfg.BatchSize {
			idx := perm[off:min(off+cfg.BatchSize, n)]
			batch, err := in.Select(idx)
			if err != nil {
				return st, fmt.Errorf("train: %w", err)
			}
			y := make([]int, len(idx))
			for i, j := range idx {
				y[i] = labels[j]
			}
			nn.ZeroGrad(params)
			logits, err := m.Forward(batch)
			if err != nil {
				return st, fmt.Errorf("train epoch %d: %w", epoch, err)
			}
			loss, dl, err := nn.CrossEntropy(logits, y)
			if err != nil {
				return st, fmt.Errorf("train epoch %d: %w", epoch, err)
			}
			if err := m.Backward(dl); err != nil {
				return st, fmt.Errorf("train epoch %d: %w", epoch, err)
			}
			if _, err := opt.Step(params); err != nil {
				return st, fmt.Errorf("train epoch %d: %w", epoch, err)
			}
			total += loss * float64(len(idx))
			st.Steps++
		}
		st.EpochLoss = append(st.EpochLoss, total/float64(n))
		if cfg.Logger != nil {
			cfg.Logger.Info("train epoch", "epoch", epoch+1, "of", cfg.Epochs, "loss", total/float64(n), "elapsed", time.Since(start).Round(time.Millisecond))
		}
	}
	st.Duration = time.Since(start)
	return st, nil
}

// Metrics are evaluation results.
type Metrics struct {
	// Accuracy is the fraction of correct predictions (NaN without labels).
	Accuracy float64
	// PerClassAccuracy is the accuracy on each class's samples (NaN for a class
	// without samples).
	PerClassAccuracy []float64
	// ClassCounts is the number of samples of each class.
	ClassCounts []int
	// Loss is the mean cross-entropy (NaN without labels).
	Loss float64
	// Predictions is the arg-max class of each sample.
	Predictions []int
	// Entropy is each sample's prediction entropy in nats.
	Entropy []float64
}

// Predict returns the logits [N, labels] of in, evaluated in batches.
func Predict(m *Model, in Input, batchSize int) (*nn.Tensor, error) {
	n := in.Len()
	if batchSize <= 0 {
		return nil, fmt.Errorf("predict: batch size %d", batchSize)
	}
	m.SetTraining(false)
	c := m.Config.NumLabels()
	out := nn.New(n, c)
	idx := make([]int, 0, batchSize)
	for off := 0; off < n; off += batchSize {
		idx = idx[:0]
		for i := off; i < min(off+batchSize, n); i++ {
			idx = append(idx, i)
		}
		batch, err := in.Select(idx)
		if err != nil {
			return nil, fmt.Errorf("predict: %w", err)
		}
		logits, err := m.Forward(batch)
		if err != nil {
			return nil, fmt.Errorf("predict samples %d-%d: %w", off, off+len(idx)-1, err)
		}
		copy(out.Data[off*c:], logits.Data)
	}
	return out, nil
}

// Evaluate computes predictions and entropies of in and, when labels is non-nil,
// accuracy, per-class accuracy and loss.
func Evaluate(m *Model, in Input, labels []int, batchSize int) (Metrics, error) {
	var mt Metrics
	if labels != nil && len(labels) != in.Len() {
		return mt, fmt.Errorf("evaluate: %d samples and %d labels", in.Len(), len(labels))
	}
	logits, err := Predict(m, in, batchSize)
	if err != nil {
		return mt, fmt.Errorf("evaluate: %w", err)
	}
	mt.Predictions = nn.Argmax(logits)
	mt.Entropy = nn.Entropy(logits)
	mt.Accuracy, mt.Loss = math.NaN(), math.NaN()
	if labels == nil {
		return mt, nil
	}
	c := m.Config.NumLabels()
	mt.ClassCounts = make([]int, c)
	correct := make([]int, c)
	right := 0
	for i, y := range labels {
		if y < 0 || y >= c {
			return mt, fmt.Errorf("evaluate: label %d of sample %d outside [0,%d)", y, i, c)
		}
		mt.ClassCounts[y]++
		if mt.Predictions[i] == y {
			correct[y]++
			right++
		}
	}
	mt.PerClassAccuracy = make([]float64, c)
	for k := range correct {
		mt.PerClassAccuracy[k] = math.NaN()
		if mt.ClassCounts[k] > 0 {
			mt.PerClassAccuracy[k] = float64(correct[k]) / float64(mt.ClassCounts[k])
		}
	}
	if len(labels) > 0 {
		mt.Accuracy = float64(right) / float64(len(labels))
		if mt.Loss, _, err = nn.CrossEntropy(logits, labels); err != nil {
			return mt, fmt.Errorf("evaluate: %w", err)
		}
	}
	return mt, nil
}

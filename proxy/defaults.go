package proxy

import (
	"fmt"
	"math"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
)

// Defaults of Config.WithDefaults. The fine-tuning schedules are the ones the
// examples use on the demo ViT (a few seconds on 2 cores for a bootstrap of
// 100); targets of width WideHidden or more (BERT-base, ViT-base) get
// learning rates 20× smaller, as pretrained transformers are fine-tuned.
const (
	// DefaultPointsPerSample is the size of each MLP's synthesised data set
	// per bootstrap sample: 500 × 100 samples = 50,000 points.
	DefaultPointsPerSample = 500
	// MinDefaultPoints is the smallest default data set.
	MinDefaultPoints = 20_000
	// WideHidden is the target width from which the small learning rates
	// apply.
	WideHidden = 256
	// MaxPoints bounds Config.Points.
	MaxPoints = 1 << 28
	// maxMLPHidden bounds Config.EntropyHidden and every MLP width of a
	// proxy file (the bound of secure.MaxWidth, which this package cannot
	// import).
	maxMLPHidden = 1 << 16
	// plainReservoir is the reservoir of Plain generations.
	plainReservoir = 2048
)

// Defaults of the measured-best generation (Config without Plain), each the
// setting of bench/QUALITY.md's "Ours" (see the package comment,
// "Defaults", for the evidence behind each).
const (
	// DefaultObservedPoints is the smallest default MLP data set (Points)
	// of the default generation: half of it resampled from the observed
	// inputs, the rest synthesised.
	DefaultObservedPoints = 300_000
	// DefaultRealMix is the default Config.RealMix.
	DefaultRealMix = 0.5
	// DefaultReservoir is the default Config.Reservoir: observed rows kept
	// per module.
	DefaultReservoir = 8192
	// DefaultEntropyHidden is the default Config.EntropyHidden.
	DefaultEntropyHidden = 128
	// DefaultMixup is the largest default Distill.Mixup; MixupPerInput
	// scales it down to that many mixes per distillation input (bootstrap
	// and Public) for small sets.
	DefaultMixup  = 8000
	MixupPerInput = 20
)

// DefaultDistill returns the default distillation (Config.Distill when nil
// and not Plain) for a distillation set of inputs rows (the bootstrap and
// the public inputs) and the selection criterion crit (empty: the entropy):
// α = 0.8 at T = 1, class-balanced label loss, mixes of two inputs
// (min(DefaultMixup, MixupPerInput·inputs); none below two inputs), the
// entropy MLP calibrated 100 epochs at learning rate 0.003 on the tuned
// proxy's logits, to √H where the criterion allows it. Extra is left empty
// (Generate fills it from Config.Public).
func DefaultDistill(inputs int, crit string) *Distill {
	d := &Distill{Weight: 0.8, Temperature: 1, BalanceClasses: true, Calibrate: 100, CalibrateLR: 3e-3}
	if inputs >= 2 {
		d.Mixup = DefaultMixup
		if inputs < DefaultMixup/MixupPerInput {
			d.Mixup = MixupPerInput * inputs
		}
	}
	if c, err := mlp.LookupCriterion(crit); err == nil && c.Sqrt {
		d.SqrtEntropy = true
	}
	return d
}

// ablation returns the ablation of phase i (PhaseAblations[i] when set).
func (c Config) ablation(i int) Ablation {
	if len(c.PhaseAblations) > 0 {
		return c.PhaseAblations[i]
	}
	return c.Ablation
}

// DefaultPoints returns the default size of each MLP's synthesised data set
// for a bootstrap of n samples: 500·n, at least 20,000 and at most the
// paper's 5.12 million (mlp.DefaultPoints, reached at n = 10,240).
func DefaultPoints(n int) int {
	if n > mlp.DefaultPoints/DefaultPointsPerSample {
		return mlp.DefaultPoints
	}
	return min(max(DefaultPointsPerSample*n, MinDefaultPoints), mlp.DefaultPoints)
}

// WithDefaults returns c with every zero setting replaced by a default scaled
// to the target and to a bootstrap of n samples, so that Config{Seed: s}
// works:
//   - Tune: 4 epochs, batches of min(16, n), learning rate 1e-3 (5e-5 for a
//     target of hidden width ≥ WideHidden); InVivo: 8 epochs, the same
//     batches, half the learning rate. Each zero field is filled on its own.
//   - Points: DefaultPoints(n) with Plain (50,000 for the quickstart's
//     bootstrap of 100, instead of the paper's 5.12 million that take 40 s
//     per MLP), otherwise at least DefaultObservedPoints.
//   - MLP: 2 epochs, batches of 128, learning rate 1e-2, each when zero.
//
// Without Plain, the measured-best generation's settings too:
//   - Distill: DefaultDistill(n + Public.Len(), Criterion) when nil; its
//     Extra, when empty, is Public.
//   - RealMix DefaultRealMix when zero and CentreSoftmax set, unless
//     Synthesised; Reservoir DefaultReservoir when zero.
//   - EntropyHidden: DefaultEntropyHidden when zero.
//   - PhaseAblations: NoAttnSM in the last phase (the others all MLPs) when
//     nil with a zero Ablation, unless AllMLP.
//
// Applied twice it changes nothing more. Negative or non-finite settings
// are left as they are for Validate to reject. target may be nil
// (small-target learning rates).
func (c Config) WithDefaults(target *model.Model, n int) Config {
	lr := 1e-3
	if target != nil && target.Config.Hidden >= WideHidden {
		lr = 5e-5
	}
	batch := 16
	if n > 0 {
		batch = min(batch, n)
	}
	fill := func(t *TrainConfig, epochs int, lr float64) {
		if t.Epochs == 0 {
			t.Epochs = epochs
		}
		if t.BatchSize == 0 {
			t.BatchSize = batch
		}
		if t.LR == 0 {
			t.LR = lr
		}
	}
	fill(&c.Tune, 4, lr)
	fill(&c.InVivo, 8, lr/2)
	if c.Points == 0 {
		c.Points = DefaultPoints(n)
		if !c.Plain {
			c.Points = max(c.Points, DefaultObservedPoints)
		}
	}
	if !c.Plain {
		c = c.bestDefaults(n)
	} else if c.Distill != nil && c.Distill.Extra.Len() == 0 && c.Public.Len() > 0 {
		d := *c.Distill
		d.Extra = c.Public
		c.Distill = &d
	}
	if c.MLP.Epochs == 0 {
		c.MLP.Epochs = 2
	}
	if c.MLP.BatchSize == 0 {
		c.MLP.BatchSize = 128
	}
	if c.MLP.LR == 0 {
		c.MLP.LR = 1e-2
	}
	return c
}

// bestDefaults fills the zero settings of the measured-best generation (see
// WithDefaults) for a bootstrap of n samples.
func (c Config) bestDefaults(n int) Config {
	if c.Distill == nil {
		c.Distill = DefaultDistill(max(n, 0)+c.Public.Len(), c.Criterion)
	}
	if c.Distill.Extra.Len() == 0 && c.Public.Len() > 0 {
		d := *c.Distill
		d.Extra = c.Public
		c.Distill = &d
	}
	if !c.Synthesised {
		if c.RealMix == 0 {
			c.RealMix = DefaultRealMix
		}
		c.CentreSoftmax = true
	}
	if c.Reservoir == 0 {
		c.Reservoir = DefaultReservoir
	}
	if c.EntropyHidden == 0 {
		c.EntropyHidden = DefaultEntropyHidden
	}
	if !c.AllMLP && c.PhaseAblations == nil && c.Ablation == (Ablation{}) && len(c.Phases) > 0 {
		c.PhaseAblations = make([]Ablation, len(c.Phases))
		c.PhaseAblations[len(c.Phases)-1] = NoAttnSM
	}
	return c
}

// Validate checks c for a generation from target with a bootstrap of n
// samples, after WithDefaults: the phases fit the target, every schedule is
// positive and finite. Generate runs it first; a caller that must not start
// anything costly or revealing on settings that would fail (as selection
// does before the bootstrap is sent) runs it beforehand.
func (c Config) Validate(target *model.Model, n int) error {
	if target == nil {
		return fmt.Errorf("proxy: nil target model")
	}
	c = c.WithDefaults(target, n)
	if len(c.Phases) == 0 {
		return fmt.Errorf("proxy: no phases")
	}
	for i, p := range c.Phases {
		if p.Layers <= 0 || p.Layers > target.Config.Layers || p.Heads <= 0 || p.Heads > target.Config.Heads || p.MLPHidden <= 0 {
			return fmt.Errorf("proxy: phase %d shape %+v does not fit a target of %d layers and %d heads", i+1, p, target.Config.Layers, target.Config.Heads)
		}
	}
	if err := c.Tune.validate("tune"); err != nil {
		return err
	}
	if err := c.InVivo.validate("in vivo"); err != nil {
		return err
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case c.Points < 2 || c.Points > MaxPoints:
		return fmt.Errorf("proxy: points %d per MLP data set (2 to %d)", c.Points, MaxPoints)
	case c.MLP.Epochs < 0 || c.MLP.BatchSize < 0 || !(c.MLP.LR > 0) || !finite(c.MLP.LR) || c.MLP.Test < 0:
		return fmt.Errorf("proxy: mlp: epochs %d, batch size %d, learning rate %g, test rows %d", c.MLP.Epochs, c.MLP.BatchSize, c.MLP.LR, c.MLP.Test)
	case len(c.PhaseAblations) != 0 && len(c.PhaseAblations) != len(c.Phases):
		return fmt.Errorf("proxy: %d phase ablations for %d phases", len(c.PhaseAblations), len(c.Phases))
	case c.EntropyHidden < 0 || c.EntropyHidden > maxMLPHidden:
		return fmt.Errorf("proxy: entropy MLP hidden width %d (0 to %d)", c.EntropyHidden, maxMLPHidden)
	case c.Reservoir < 0:
		return fmt.Errorf("proxy: reservoir %d", c.Reservoir)
	case !(c.RealMix >= 0 && c.RealMix <= 1):
		return fmt.Errorf("proxy: real mix %g outside [0, 1]", c.RealMix)
	case c.EntropyWeight < 0 || !finite(c.EntropyWeight):
		return fmt.Errorf("proxy: entropy weight %g", c.EntropyWeight)
	case c.Plain && (c.AllMLP || c.Synthesised):
		return fmt.Errorf("proxy: AllMLP and Synthesised opt out of parts of the default generation; with Plain there is nothing to opt out of (set the fields themselves)")
	case c.Public.Len() > 0 && c.Distill == nil:
		return fmt.Errorf("proxy: %d public inputs but no distillation (Plain without Distill tunes on the bootstrap labels only): drop Plain or set Distill", c.Public.Len())
	}
	if m := c.Public.Len(); m > 0 {
		if _, err := c.Public.Select(nil); err != nil {
			return fmt.Errorf("proxy: public inputs: %w", err)
		}
		if (c.Public.Pixels != nil) != (target.Config.Family == model.ViT) {
			kind := "texts"
			if c.Public.Pixels != nil {
				kind = "images"
			}
			return fmt.Errorf("proxy: the %d public inputs are %s, which a %s target does not take: give inputs of the target's kind (images for a ViT, token ids for BERT or DistilBERT)", m, kind, target.Config.Family)
		}
		tc := target.Config
		for i, img := range c.Public.Pixels {
			if want := tc.NumChannels * tc.ImageSize * tc.ImageSize; len(img) != want {
				return fmt.Errorf("proxy: public input %d has %d values, the target takes images of %d×%d×%d", i, len(img), tc.NumChannels, tc.ImageSize, tc.ImageSize)
			}
		}
	}
	if n <= 0 {
		return fmt.Errorf("proxy: a bootstrap of %d samples", n)
	}
	crit, err := mlp.LookupCriterion(c.Criterion)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	if c.Distill != nil && c.Distill.SqrtEntropy && !crit.Sqrt {
		return fmt.Errorf("proxy: criterion %q has no √ calibration (Distill.SqrtEntropy)", crit.Name)
	}
	return nil
}

package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// Shape is the shape ⟨l, w, d⟩ of a proxy: the proxy of one phase of the
// selection schedule (selection.Phase, which adds the fraction it keeps).
type Shape struct {
	// Layers is l, the number of bottom layers kept.
	Layers int `json:"layers"`
	// Heads is w, the attention heads kept per layer.
	Heads int `json:"heads"`
	// MLPHidden is d, the hidden width of every MLP of the proxy (the width
	// proxy/secure's Arch calls MLPHidden; Arch.Hidden is the model's width).
	// Its JSON key stays "hidden", so proxy files saved before the rename load.
	MLPHidden int `json:"hidden"`
}

// Ablation keeps nonlinear modules exact instead of emulating them with MLPs, as
// in the paper's Table 3. The zero value is the full method.
type Ablation struct {
	// ExactAttnSoftmax keeps the attention softmax exact (NoAttnSM).
	ExactAttnSoftmax bool `json:"exact_attn_softmax"`
	// ExactLayerNorm keeps LayerNorm's reciprocal square root exact (NoAttnLN).
	ExactLayerNorm bool `json:"exact_layernorm"`
	// ExactEntropy keeps the top softmax and entropy exact.
	ExactEntropy bool `json:"exact_entropy"`
}

// The ablations of the paper's Table 3.
var (
	// NoAttnSM keeps the attention softmax exact.
	NoAttnSM = Ablation{ExactAttnSoftmax: true}
	// NoAttnLN keeps LayerNorm exact.
	NoAttnLN = Ablation{ExactLayerNorm: true}
	// NoApprox keeps every nonlinear module exact (still pruned, FFN removed, ReLU).
	NoApprox = Ablation{ExactAttnSoftmax: true, ExactLayerNorm: true, ExactEntropy: true}
)

// TrainConfig sets up one fine-tuning stage (AdamW, linear warm-up and decay).
type TrainConfig struct {
	// Epochs and BatchSize set the schedule.
	Epochs, BatchSize int
	// LR is the peak learning rate; WeightDecay the decoupled decay.
	LR, WeightDecay float64
}

func (c TrainConfig) validate(name string) error {
	if c.Epochs <= 0 || c.BatchSize <= 0 || !(c.LR > 0) || math.IsInf(c.LR, 0) || !(c.WeightDecay >= 0) || math.IsInf(c.WeightDecay, 0) {
		return fmt.Errorf("proxy: %s: epochs %d, batch size %d, learning rate %g, weight decay %g", name, c.Epochs, c.BatchSize, c.LR, c.WeightDecay)
	}
	return nil
}

// Config configures Generate.
//
// Its zero settings are the measured-best generation (see the package
// comment, "Defaults", and WithDefaults): distillation from the adapted
// target on the bootstrap, Public and mixed inputs, MLPs trained on observed
// as well as synthesised activations, centred softmax MLPs, entropy MLPs of
// DefaultEntropyHidden units calibrated to √H, the last phase's attention
// softmax exact. Plain selects the paper's generation instead.
type Config struct {
	// Phases are the proxies' shapes ⟨l_i, w_i, d_i⟩, one per phase of the
	// schedule.
	Phases []Shape
	// Plain selects the paper's generation (§4.2): with it every zero
	// setting below means what the paper does (in-vivo tuning on the
	// bootstrap labels, purely synthesised MLP data sets, uncentred softmax
	// MLPs, entropy MLPs of each phase's d, every module emulated, DefaultPoints);
	// fields set explicitly still apply. Without it (the default), zero
	// settings are the measured-best generation (WithDefaults).
	Plain bool
	// Public holds inputs the model owner holds in the clear (its
	// pretraining or other unlabelled data of the target's input kind; no
	// labels needed): the distillation set holds them besides the bootstrap
	// (Distill.Extra, when that is empty). Texts must be tokenized to the
	// bootstrap's sequence length. Without them the default generation
	// distils on the bootstrap and mixes of it alone, and says so in the
	// log.
	Public model.Input
	// Ablation keeps modules exact (zero value: every module emulated, or,
	// by default, the last phase's attention softmax exact: see
	// PhaseAblations).
	Ablation Ablation
	// PhaseAblations, if set, holds one ablation per phase and replaces
	// Ablation: e.g. a cheap all-MLP proxy for the first phase, which sees
	// every candidate, and an exact attention softmax (protocol.Softmax over
	// MPC) for the last, which sees few. The secure evaluation takes each
	// proxy's own ablation (secure.Arch.Ablation). Unless Plain, nil with a
	// zero Ablation means exactly that: NoAttnSM in the last phase, every
	// module emulated in the others (AllMLP opts out).
	PhaseAblations []Ablation
	// AllMLP, without Plain, keeps the default generation's every module
	// emulated (no exact softmax in the last phase): the paper's all-MLP
	// proxies from the measured-best training.
	AllMLP bool
	// EntropyHidden is the hidden width of every proxy's entropy MLP (0: the
	// phase's d with Plain, DefaultEntropyHidden otherwise). The entropy MLP
	// runs once per candidate on C logits, so a wider one costs little over
	// MPC next to the attention MLPs, which run per head and token.
	EntropyHidden int
	// Tune fine-tunes M_g; InVivo fine-tunes each proxy.
	Tune, InVivo TrainConfig
	// MLP trains the MLPs ex vivo (N, batch size, learning rate ...).
	MLP mlp.TrainConfig
	// Points is the size of each synthesised data set (DefaultPoints of the
	// bootstrap size when 0; see WithDefaults for every default).
	Points int
	// PooledGaussian fits one ⟨μ, σ⟩ per module instead of one per feature (see
	// mlp.Observer.Gaussian).
	PooledGaussian bool
	// Reservoir is the number of observed rows kept per module (when 0:
	// 2048 with Plain, DefaultReservoir otherwise).
	Reservoir int
	// RealMix in [0, 1] is the share of the ex vivo data set of each attention
	// softmax and LayerNorm MLP resampled from the module's observed inputs
	// (the reservoir) rather than synthesised from the Gaussian fit
	// (mlp.Dataset.RealFrac; 0: DefaultRealMix, or with Plain the paper's
	// purely synthesised points; Synthesised opts out without Plain). The
	// entropy MLP's data set stays synthesised: M_g's logits are observed on
	// the bootstrap alone (a few hundred rows), and the calibration of
	// Distill trains it on real logits.
	RealMix float64
	// Synthesised, without Plain, keeps the default generation's ex vivo
	// data sets purely synthesised and its softmax MLPs uncentred (RealMix
	// and CentreSoftmax as set).
	Synthesised bool
	// CentreSoftmax trains each attention softmax MLP on rows minus their
	// mean, fitted to centred observations (mlp.Dataset.Centre): the
	// softmax ignores a row's common shift, and the centring folds into the
	// MLP's first layer (same form, same secure evaluation). The default
	// generation sets it (unless Synthesised).
	CentreSoftmax bool
	// EntropyWeight weighs the in-vivo loss of the entropy MLP (1 when 0).
	EntropyWeight float64
	// Criterion names the selection criterion (mlp.RegisterCriterion) the
	// final MLP ("entropy MLP") is trained toward and the proxies record
	// (Proxy.Criterion); empty: mlp.DefaultCriterion, the prediction
	// entropy.
	Criterion string
	// Distill, if set, tunes the proxies toward M_g's predictions (see
	// Distill); nil means DefaultDistill, or with Plain the paper's tuning on
	// the bootstrap labels only.
	Distill *Distill
	// Seed fixes every random choice.
	Seed uint64
	// Logger receives progress lines (slog.Default() when nil).
	Logger *slog.Logger
	// Progress, if set, is called at the end of every step of every stage,
	// and once more when the proxies are generated (StageGenerated, with
	// the whole generation's time).
	Progress func(Progress)
}

// StageGenerated is the Progress stage Generate reports last, once, when
// every proxy is ready: Done = Total = 1 and Elapsed the time Generate took.
const StageGenerated = "generated"

// Progress reports how far a long stage is.
type Progress struct {
	// Stage names the stage ("tune", "ex vivo <mlp>", "in vivo phase <n>",
	// phases numbered from 1; StageGenerated at the end).
	Stage string
	// Done and Total count its steps.
	Done, Total int
	// Elapsed is the time spent in the stage (in StageGenerated, the
	// whole generation's).
	Elapsed time.Duration
}

// Result is the output of Generate.
type Result struct {
	// Proxies holds one proxy per phase, in order.
	Proxies []*Proxy
	// Backbone is M_g after fine-tuning (the exact bottom layers).
	Backbone *model.Model
	// HeadScores holds each layer's normalised head importance (see the package
	// comment).
	HeadScores [][]float64
	// Reports holds the ex vivo report of every trained MLP, keyed by its name.
	Reports map[string]mlp.Report
}

// Generate builds the proxies of cfg.Phases from target and the bootstrap set
// (boot, labels). Zero settings of cfg get defaults scaled to the bootstrap
// (Config.WithDefaults); cfg is checked first (Config.Validate). The target
// is not modified.
func Generate(ctx context.Context, target *model.Model, boot model.Input, labels []int, cfg Config) (*Result, error) {
	start := time.Now()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.WithDefaults(target, boot.Len())
	if err := cfg.Validate(target, boot.Len()); err != nil {
		return nil, fmt.Errorf("proxy generate: %w", err)
	}
	L := 0
	for _, p := range cfg.Phases {
		L = max(L, p.Layers)
	}
	if boot.Len() == 0 || len(labels) != boot.Len() {
		return nil, fmt.Errorf("proxy generate: %d bootstrap samples, %d labels", boot.Len(), len(labels))
	}
	if err := cfg.Distill.validate(target); err != nil {
		return nil, err
	}
	if err := cfg.Distill.checkSeq(boot); err != nil {
		return nil, fmt.Errorf("proxy generate: %w", err)
	}
	logGeneration(log, cfg, boot.Len())
	points := cfg.Points
	keep := cfg.Reservoir
	if keep <= 0 {
		keep = plainReservoir
	}

	// 1. M_g: copy, fine-tune, observe, score heads.
	mg, err := copyBottom(target, L, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("proxy generate: %w", err)
	}
	obs, err := newObservers(mg, keep, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("proxy generate: %w", err)
	}
	scores, err := tuneBackbone(ctx, mg, boot, labels, cfg, obs, log)
	if err != nil {
		return nil, fmt.Errorf("proxy generate: tune M_g: %w", err)
	}
	res := &Result{Backbone: mg, HeadScores: scores, Reports: map[string]mlp.Report{}}

	// 2. Ex vivo MLPs: one data set per module, one MLP per (module, d).
	datasets := map[string]*mlp.Dataset{}
	for i, o := range obs.list() {
		if o.obs == nil || o.obs.Rows() < 2 {
			return nil, fmt.Errorf("proxy generate: module %s was not observed", o.name)
		}
		ds, err := newDataset(o, points, cfg, cfg.Seed+uint64(i)*7919+1)
		if err != nil {
			return nil, fmt.Errorf("proxy generate: %w", err)
		}
		datasets[o.name] = ds
	}
	trained := map[string]*mlp.MLP{}
	need := func(module string, d int) (*mlp.MLP, error) {
		key := fmt.Sprintf("%s.d%d", module, d)
		if m, ok := trained[key]; ok {
			return m, nil
		}
		mc := cfg.MLP
		mc.Seed = cfg.Seed ^ uint64(len(trained)+1)*0x2545f4914f6cdd1d
		mc.Logger = nil
		start := time.Now()
		if cfg.Progress != nil {
			mc.Progress = func(done, total int) {
				cfg.Progress(Progress{Stage: "ex vivo " + key, Done: done, Total: total, Elapsed: time.Since(start)})
			}
		}
		m, rep, err := mlp.Train(ctx, datasets[module], d, key, mc)
		if err != nil {
			return nil, fmt.Errorf("ex vivo %s: %w", key, err)
		}
		log.Info("proxy: ex vivo MLP trained", "mlp", key, "report", rep.String())
		trained[key], res.Reports[key] = m, rep
		return m, nil
	}

	// 3. Proxies.
	var ts *teacherSet
	if cfg.Distill != nil {
		if ts, err = newTeacherSet(mg, boot, labels, cfg.Distill, cfg.Seed); err != nil {
			return nil, fmt.Errorf("proxy generate: %w", err)
		}
	}
	for pi, ph := range cfg.Phases {
		p, err := buildProxy(mg, ph, cfg.ablation(pi), cfg.EntropyHidden, scores, need)
		if err != nil {
			return nil, fmt.Errorf("proxy generate: phase %d: %w", pi+1, err)
		}
		if p.crit, err = mlp.LookupCriterion(cfg.Criterion); err != nil {
			return nil, fmt.Errorf("proxy generate: %w", err)
		}
		p.Criterion = p.crit.Name
		stage := fmt.Sprintf("in vivo phase %d", pi+1)
		if ts != nil {
			if err = p.distillInVivo(ctx, ts, cfg, stage, log); err == nil {
				err = p.calibrateEntropy(ctx, ts, cfg, fmt.Sprintf("entropy calibration phase %d", pi+1), log)
			}
		} else {
			err = p.tuneInVivo(ctx, boot, labels, cfg, stage, log)
		}
		if err != nil {
			return nil, fmt.Errorf("proxy generate: phase %d: %w", pi+1, err)
		}
		res.Proxies = append(res.Proxies, p)
	}
	took := time.Since(start)
	log.Info("proxy: generated", "phases", len(res.Proxies), "took", took.Round(time.Millisecond))
	if cfg.Progress != nil {
		cfg.Progress(Progress{Stage: StageGenerated, Done: 1, Total: 1, Elapsed: took})
	}
	return res, nil
}

// newDataset builds the ex vivo data set of an observed module of M_g (see
// Config.RealMix and Config.CentreSoftmax).
func newDataset(o *observed, points int, cfg Config, seed uint64) (*mlp.Dataset, error) {
	ds, err := mlp.NewDataset(o.obs, points, cfg.PooledGaussian, o.eps, seed)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", o.name, err)
	}
	if o.obs.Kind != mlp.SoftmaxEntropy {
		ds.RealFrac = cfg.RealMix
	} else {
		ds.Criterion = cfg.Criterion
	}
	if cfg.CentreSoftmax && o.obs.Kind == mlp.AttnSoftmax {
		if ds.Gauss, err = o.obs.CentredGaussian(); err != nil {
			return nil, fmt.Errorf("module %s: %w", o.name, err)
		}
		ds.Centre = true
	}
	return ds, nil
}

// copyBottom returns a new model with the bottom L layers of src and every other
// parameter copied.
func copyBottom(src *model.Model, L int, seed uint64) (*model.Model, error) {
	cfg := src.Config
	cfg.Layers = L
	m, err := model.New(cfg, seed)
	if err != nil {
		return nil, err
	}
	if err := copyParams(m, src.Params()); err != nil {
		return nil, err
	}
	return m, nil
}

// copyParams copies the values of the source parameters with the same names into
// dst's parameters (every parameter of dst must be found with its shape).
func copyParams(dst *model.Model, src []*nn.Param) error {
	byName := make(map[string]*nn.Param, len(src))
	for _, p := range src {
		byName[p.Name] = p
	}
	for _, p := range dst.Params() {
		s, ok := byName[p.Name]
		if !ok {
			return fmt.Errorf("copy parameters: %s missing in the source", p.Name)
		}
		if !slices.Equal(s.Value.Shape, p.Value.Shape) {
			return fmt.Errorf("copy parameters: %s has shape %v in the source, %v here", p.Name, s.Value.Shape, p.Value.Shape)
		}
		copy(p.Value.Data, s.Value.Data)
	}
	return nil
}

// observed is one recorded module of M_g.
type observed struct {
	name string
	obs  *mlp.Observer // nil until the first batch for attention (width = sequence length)
	eps  float64
	keep int
	seed uint64
}

// observers holds the recorders of M_g's nonlinear modules.
type observers struct {
	softmax, ln []*observed
	finalLN     *observed
	logits      *observed
}

func (o *observers) list() []*observed {
	l := slices.Concat(o.softmax, o.ln)
	if o.finalLN != nil {
		l = append(l, o.finalLN)
	}
	return append(l, o.logits)
}

// Module names of the observed modules (also the MLP name prefixes).
func softmaxName(i int) string { return fmt.Sprintf("proxy.layer.%d.attn_softmax", i) }
func lnName(i int) string      { return fmt.Sprintf("proxy.layer.%d.attn_layernorm", i) }

const (
	finalLNName = "proxy.final_layernorm"
	entropyName = "proxy.softmax_entropy"
)

func newObservers(m *model.Model, keep int, seed uint64) (*observers, error) {
	o := &observers{}
	eps := m.Config.LayerNormEps
	for i := range m.Blocks {
		ln, err := mlp.NewObserver(mlp.InvSqrt, 1, keep, seed+uint64(i)*2+1)
		if err != nil {
			return nil, err
		}
		o.ln = append(o.ln, &observed{name: lnName(i), obs: ln, eps: eps})
		o.softmax = append(o.softmax, &observed{name: softmaxName(i), keep: keep, seed: seed + uint64(i)*2 + 1000})
	}
	if m.FinalLN != nil {
		f, err := mlp.NewObserver(mlp.InvSqrt, 1, keep, seed+99)
		if err != nil {
			return nil, err
		}
		o.finalLN = &observed{name: finalLNName, obs: f, eps: eps}
	}
	lg, err := mlp.NewObserver(mlp.SoftmaxEntropy, m.Config.NumLabels(), keep, seed+101)
	if err != nil {
		return nil, err
	}
	o.logits = &observed{name: entropyName, obs: lg}
	return o, nil
}

// tuneBackbone fine-tunes M_g (embeddings frozen), records its nonlinear modules'
// inputs and scores its heads during the last epoch.
func tuneBackbone(ctx context.Context, mg *model.Model, boot model.Input, labels []int, cfg Config, obs *observers, log *slog.Logger) ([][]float64, error) {
	recording := false
	var recErr error
	record := func(o *observed, kind mlp.Kind) func(in, out *nn.Tensor) {
		return func(in, _ *nn.Tensor) {
			if !recording || recErr != nil {
				return
			}
			if o.obs == nil {
				ob, err := mlp.NewObserver(kind, in.Cols(), o.keep, o.seed)
				if err != nil {
					recErr = err
					return
				}
				o.obs = ob
			}
			if in.Cols() != o.obs.Width {
				recErr = fmt.Errorf("%s: rows of width %d after rows of width %d (use one sequence length)", o.name, in.Cols(), o.obs.Width)
				return
			}
			if err := o.obs.Observe(in.Data); err != nil {
				recErr = fmt.Errorf("%s: %w", o.name, err)
			}
		}
	}
	type restore struct {
		b      *nn.Block
		sm, ln nn.Module
	}
	var saved []restore
	for i, b := range mg.Blocks {
		saved = append(saved, restore{b, b.Attn.Softmax, b.LN1.InvSqrt})
		b.Attn.Softmax = &nn.Recorder{Inner: b.Attn.Softmax, OnForward: record(obs.softmax[i], mlp.AttnSoftmax)}
		b.LN1.InvSqrt = &nn.Recorder{Inner: b.LN1.InvSqrt, OnForward: record(obs.ln[i], mlp.InvSqrt)}
	}
	var finalInv nn.Module
	if mg.FinalLN != nil {
		finalInv = mg.FinalLN.InvSqrt
		mg.FinalLN.InvSqrt = &nn.Recorder{Inner: finalInv, OnForward: record(obs.finalLN, mlp.InvSqrt)}
	}
	defer func() {
		for _, s := range saved {
			s.b.Attn.Softmax, s.b.LN1.InvSqrt = s.sm, s.ln
		}
		if mg.FinalLN != nil {
			mg.FinalLN.InvSqrt = finalInv
		}
	}()
	for _, p := range mg.EmbeddingParams() {
		p.Frozen = true
	}
	scores := make([][]float64, len(mg.Blocks))
	for i := range scores {
		scores[i] = make([]float64, mg.Blocks[i].Attn.Heads)
	}
	params := trainableParams(mg.Params())
	cw := cfg.Distill.classWeights(labels, mg.Config.NumLabels())
	step := func(batch model.Input, y []int, last bool) (float64, error) {
		recording = last
		logits, err := mg.Forward(batch)
		if err != nil {
			return 0, err
		}
		if recErr != nil {
			return 0, recErr
		}
		if last {
			if err := obs.logits.obs.Observe(logits.Data); err != nil {
				return 0, fmt.Errorf("logits: %w", err)
			}
		}
		loss, dl, err := weightedCrossEntropy(logits, y, cw)
		if err != nil {
			return 0, err
		}
		if err := backwardNoEmbed(mg, dl); err != nil {
			return 0, err
		}
		if last {
			for i, b := range mg.Blocks {
				accumulateHeadScores(b.Attn, scores[i])
			}
		}
		return loss, nil
	}
	if err := trainLoop(ctx, boot, labels, cfg.Tune, cfg.Seed, params, mg, step, "tune", cfg.Progress, log); err != nil {
		return nil, err
	}
	for _, s := range scores {
		norm := 0.0
		for _, v := range s {
			norm += v * v
		}
		norm = math.Sqrt(norm)
		for h := range s {
			if norm > 0 {
				s[h] /= norm
			}
		}
	}
	return scores, nil
}

// accumulateHeadScores adds |Σ W_O ⊙ ∂L/∂W_O| over each head's columns.
func accumulateHeadScores(a *nn.MultiHeadAttention, s []float64) {
	w, g := a.O.W.Value, a.O.W.Grad
	out, in := w.Shape[0], w.Shape[1]
	dh := in / a.Heads
	for h := 0; h < a.Heads; h++ {
		sum := 0.0
		for r := 0; r < out; r++ {
			for c := h * dh; c < (h+1)*dh; c++ {
				sum += w.Data[r*in+c] * g.Data[r*in+c]
			}
		}
		s[h] += math.Abs(sum)
	}
}

// backwardNoEmbed propagates through the head and the blocks of a model whose
// embeddings are frozen (the embedding gradients are not needed).
func backwardNoEmbed(m *model.Model, dl *nn.Tensor) error {
	dx, err := m.HeadBackward(dl)
	if err != nil {
		return err
	}
	for i := len(m.Blocks) - 1; i >= 0; i-- {
		if dx, err = m.Blocks[i].Backward(dx); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return nil
}

// trainableParams drops frozen parameters (whose gradients are not computed).
func trainableParams(ps []*nn.Param) []*nn.Param {
	var out []*nn.Param
	for _, p := range ps {
		if !p.Frozen {
			out = append(out, p)
		}
	}
	return out
}

// trainLoop runs epochs of shuffled mini-batches; step computes the loss and
// accumulates the gradients of one batch (last: in the last epoch).
func trainLoop(ctx context.Context, in model.Input, labels []int, tc TrainConfig, seed uint64, params []*nn.Param, mod interface{ SetTraining(bool) },
	step func(model.Input, []int, bool) (float64, error), stage string, progress func(Progress), log *slog.Logger) error {
	n := in.Len()
	per := (n + tc.BatchSize - 1) / tc.BatchSize
	total := tc.Epochs * per
	opt := &nn.AdamW{LR: tc.LR, WeightDecay: tc.WeightDecay, ClipNorm: 1, WarmupSteps: total / 20, TotalSteps: total + 1}
	rng := nn.NewRNG(seed ^ 0x7f4a7c15)
	mod.SetTraining(true)
	defer mod.SetTraining(false)
	start := time.Now()
	done := 0
	for e := 0; e < tc.Epochs; e++ {
		perm := rng.Perm(n)
		sum := 0.0
		for off := 0; off < n; off += tc.BatchSize {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
			idx := perm[off:min(off+tc.BatchSize, n)]
			batch, err := in.Select(idx)
			if err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
			y := make([]int, len(idx))
			for i, j := range idx {
				y[i] = labels[j]
			}
			nn.ZeroGrad(params)
			loss, err := step(batch, y, e == tc.Epochs-1)
			if err != nil {
				return fmt.Errorf("%s epoch %d: %w", stage, e, err)
			}
			if _, err := opt.Step(params); err != nil {
				return fmt.Errorf("%s epoch %d: %w", stage, e, err)
			}
			sum += loss * float64(len(idx))
			done++
			if progress != nil {
				progress(Progress{Stage: stage, Done: done, Total: total, Elapsed: time.Since(start)})
			}
		}
		el := time.Since(start)
		log.Info("proxy: "+stage, "epoch", e+1, "of", tc.Epochs, "loss", sum/float64(n), "elapsed", el.Round(time.Millisecond),
			"eta", time.Duration(float64(el)*float64(total-done)/float64(done)).Round(time.Second))
	}
	return nil
}

// topHeads returns the indices of the w highest scores, in increasing index order.
func topHeads(s []float64, w int) []int {
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s[idx[a]] > s[idx[b]] })
	keep := slices.Clone(idx[:w])
	slices.Sort(keep)
	return keep
}

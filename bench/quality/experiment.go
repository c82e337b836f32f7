package quality

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/selectformer/selectformer/internal/dataset"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/nn"
	"github.com/selectformer/selectformer/selection"
)

// Method names, in the order of the report.
const (
	Random       = "Random"
	Oracle       = "Oracle"
	OracleCkpt   = "Oracle (checkpoint)"
	OursMPC      = "Ours (MPC)"
	Ours         = "Ours (plaintext)"
	OursMLP      = "Ours (all MLPs)"
	OursPaper    = "Ours (label tuning)"
	Ours1        = "Ours (1 phase)"
	Ours3        = "Ours (3 phases)"
	NoApprox     = "NoApprox"
	MPCFormer    = "MPCFormer"
	MarginOracle = "Margin (target)"
	BalancedEnt  = "Balanced entropy (target)"
)

// AllMethods lists every method in report order.
var AllMethods = []string{Random, Oracle, OracleCkpt, OursMPC, Ours, OursMLP, OursPaper, Ours1, Ours3, NoApprox, MPCFormer, MarginOracle, BalancedEnt}

// Shape is one phase of a schedule: the proxy and how many candidates it
// keeps, as a multiple of the final selection (the last phase keeps the
// final selection).
type Shape struct {
	Proxy proxy.Shape
	Times float64
}

// Config configures an evaluation.
type Config struct {
	// Setting is the data and target.
	Setting Setting
	// Seeds is the number of repetitions; SecureSeeds of them (the first)
	// run Ours through the MPC pipeline (the others draw the bootstrap from
	// the seed and evaluate the same proxies in plaintext only).
	Seeds, SecureSeeds int
	// Budgets are the purchase sizes as fractions of the pool, bootstrap
	// included; the MPC pipeline runs at the first.
	Budgets []float64
	// Bootstrap is the bootstrap's fraction of the pool.
	Bootstrap float64
	// Schedule is Ours' schedule; OnePhase and ThreePhase the alternatives.
	Schedule, OnePhase, ThreePhase []Shape
	// Generate is the proxy generation of the paper (labels only); Distill
	// and ExVivo, if set, are Ours' improvements (Ours (label tuning) keeps
	// Generate).
	Generate proxy.Config
	Distill  *proxy.Distill
	ExVivo   *ExVivo
	// EntropyHidden is the width of Ours' entropy MLPs
	// (proxy.Config.EntropyHidden; 0: each phase's d).
	EntropyHidden int
	// FinalExactSoftmax keeps the attention softmax exact in the last phase
	// of each of Ours' schedules (proxy.Config.PhaseAblations; over MPC,
	// protocol.Softmax); "Ours (all MLPs)" is the main schedule without it.
	FinalExactSoftmax bool
	// Methods restricts the methods (nil: AllMethods).
	Methods []string
	// Jobs is the number of seeds evaluated at once.
	Jobs int
	// Logger receives progress.
	Logger *slog.Logger
}

// ExVivo is Ours' training of the ex vivo MLPs on M_g's observed module
// inputs besides the Gaussian-synthesised points (see proxy.Config).
type ExVivo struct {
	// RealMix is proxy.Config.RealMix; CentreSoftmax proxy.Config.CentreSoftmax.
	RealMix       float64
	CentreSoftmax bool
	// Reservoir and Points override proxy.Config's when positive.
	Reservoir, Points int
}

// apply sets the fields of e in c.
func (e *ExVivo) apply(c *proxy.Config) {
	if e == nil {
		return
	}
	c.RealMix, c.CentreSoftmax = e.RealMix, e.CentreSoftmax
	if e.Reservoir > 0 {
		c.Reservoir = e.Reservoir
	}
	if e.Points > 0 {
		c.Points = e.Points
	}
}

// Run is one seed's outcome at one budget for one method.
type Run struct {
	Accuracy float64
	// Selected are the selected pool indices (bootstrap excluded).
	Selected []int
}

// Fidelity is the Spearman correlation of one proxy's entropies with the
// target's on the candidates.
type Fidelity struct {
	// Variant names the generation; Phase is the schedule position.
	Variant string
	Phase   int
	Shape   proxy.Shape
	// Ablation is the proxy's (modules kept exact).
	Ablation proxy.Ablation
	// Oracle and Checkpoint are the correlations with the adapted and the
	// unadapted target's entropies.
	Oracle, Checkpoint float64
	// Logits is the correlation with the adapted target's entropies of the
	// exact entropy of the proxy's logits (what the proxy would give with an
	// exact softmax-entropy instead of its entropy MLP).
	Logits float64
}

// SeedResult is one seed's outcomes.
type SeedResult struct {
	Seed      uint64
	Bootstrap []int
	// Runs maps budget index → method → run.
	Runs []map[string]Run
	// Fidelity lists the proxies' fidelity.
	Fidelity []Fidelity
	// Secure is set when Ours ran through the MPC pipeline.
	Secure *SecureRun
	// Seconds is the time spent on the seed.
	Seconds float64
}

// Result is an evaluation's outcome.
type Result struct {
	Config  Config
	Data    *Data
	Seeds   []*SeedResult
	Seconds float64
}

func (c *Config) methods() []string {
	if c.Methods == nil {
		return AllMethods
	}
	return c.Methods
}

func (c *Config) has(m string) bool { return slices.Contains(c.methods(), m) }

// sizes returns the bootstrap size and the final selection size at budget b.
func (c *Config) sizes(n int, b float64) (boot, final int) {
	boot = max(1, int(math.Round(c.Bootstrap*float64(n))))
	return boot, int(math.Round(b*float64(n))) - boot
}

// Evaluate runs the evaluation on prepared data.
func Evaluate(ctx context.Context, d *Data, cfg Config) (*Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Seeds < 1 || len(cfg.Budgets) == 0 || cfg.Jobs < 1 {
		return nil, fmt.Errorf("quality: %d seeds, %d budgets, %d jobs", cfg.Seeds, len(cfg.Budgets), cfg.Jobs)
	}
	n := d.Pool.Len()
	for _, b := range cfg.Budgets {
		nb, k := cfg.sizes(n, b)
		if k < 1 || nb+k > n {
			return nil, fmt.Errorf("quality: budget %g of a pool of %d with a bootstrap of %d", b, n, nb)
		}
	}
	start := time.Now()
	res := &Result{Config: cfg, Data: d, Seeds: make([]*SeedResult, cfg.Seeds)}
	errs := make([]error, cfg.Seeds)
	next := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				res.Seeds[s], errs[s] = evalSeed(ctx, d, &cfg, s)
				if errs[s] != nil {
					cfg.Logger.Error("quality: seed failed", "seed", s+1, "err", errs[s])
				}
			}
		}()
	}
	for s := range cfg.Seeds {
		if ctx.Err() != nil {
			break
		}
		next <- s
	}
	close(next)
	wg.Wait()
	for s, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("quality: seed %d: %w", s+1, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// params converts a schedule into selection parameters for budget b.
func params(n, boot, final int, sched []Shape) (selection.Params, error) {
	p := selection.Params{PoolSize: n, Budget: boot + final, Bootstrap: boot, BatchSize: 64, Workers: 2}
	cands := float64(n - boot)
	for _, s := range sched {
		keep := min(1, s.Times*float64(final)/cands)
		p.Schedule = append(p.Schedule, selection.Phase{Proxy: s.Proxy, Keep: keep})
	}
	p.Schedule[len(p.Schedule)-1].Keep = 0
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}

// finalAblations returns the per-phase ablations of a schedule of Ours:
// nil (every module emulated), or, with FinalExactSoftmax, the attention
// softmax exact in the last phase.
func (c *Config) finalAblations(sched []Shape) []proxy.Ablation {
	if !c.FinalExactSoftmax || len(sched) == 0 {
		return nil
	}
	out := make([]proxy.Ablation, len(sched))
	out[len(out)-1] = proxy.NoAttnSM
	return out
}

func phasesOf(sched []Shape) []proxy.Shape {
	out := make([]proxy.Shape, len(sched))
	for i, s := range sched {
		out[i] = s.Proxy
	}
	return out
}

// cascade selects in plaintext: phase i keeps its quota of the survivors
// of phase i−1 by the proxy's entropies (ent[i] indexed by pool index).
func cascade(p selection.Params, ent [][]float64, cands []int) ([]int, error) {
	cur := cands
	for i := range p.Schedule {
		keep := p.Budget - p.Bootstrap
		if i < len(p.Schedule)-1 {
			keep = int(float64(p.PoolSize-p.Bootstrap)*p.Schedule[i].Keep + 0.5)
		}
		next, err := TopK(Pick(ent[i], cur), cur, keep)
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

// poolScores evaluates proxies on the whole pool.
func poolScores(ps []*proxy.Proxy, pool model.Input) ([][]float64, error) {
	out := make([][]float64, len(ps))
	for i, p := range ps {
		h, err := p.Entropies(pool, 256)
		if err != nil {
			return nil, fmt.Errorf("proxy %d entropies: %w", i, err)
		}
		out[i] = h
	}
	return out, nil
}

// logitEntropies returns the exact entropy of the proxy's logits on every
// sample of in (batches of 256).
func logitEntropies(p *proxy.Proxy, in model.Input) ([]float64, error) {
	n := in.Len()
	out := make([]float64, 0, n)
	for off := 0; off < n; off += 256 {
		idx := dataset.Indices(min(256, n-off))
		for i := range idx {
			idx[i] += off
		}
		batch, err := in.Select(idx)
		if err != nil {
			return nil, err
		}
		lg, _, err := p.Forward(batch)
		if err != nil {
			return nil, fmt.Errorf("proxy logits: %w", err)
		}
		out = append(out, nn.Entropy(lg)...)
	}
	return out, nil
}

func labelsOf(y, idx []int) []int {
	out := make([]int, len(idx))
	for i, j := range idx {
		out[i] = y[j]
	}
	return out
}

// BalancedScore is the "balanced entropy" criterion: the entropy plus β times
// the expected surprisal of the predicted class under the prior π (the
// bootstrap's class frequencies, add-one smoothed): H(p) + β·Σ_c p_c·(−log π_c).
// On a skewed pool it prefers uncertain points predicted to be of rare
// classes.
func BalancedScore(logits *nn.Tensor, prior []float64, beta float64) []float64 {
	h := nn.Entropy(logits)
	c := logits.Cols()
	p := make([]float64, c)
	for i := range h {
		nn.SoftmaxRows(logits.Data[i*c:(i+1)*c], p, c)
		for j := range p {
			h[i] += beta * p[j] * -math.Log(prior[j])
		}
	}
	return h
}

// Prior returns the add-one smoothed class frequencies of labels.
func Prior(labels []int, classes int) []float64 {
	p := make([]float64, classes)
	for _, y := range labels {
		p[y]++
	}
	for c := range p {
		p[c] = (p[c] + 1) / float64(len(labels)+classes)
	}
	return p
}

// balancedBeta weighs the prior term of BalancedScore.
const balancedBeta = 0.5

func evalSeed(ctx context.Context, d *Data, cfg *Config, s int) (*SeedResult, error) {
	start := time.Now()
	log := cfg.Logger.With("seed", s+1)
	seed := uint64(s + 1)
	n := d.Pool.Len()
	sr := &SeedResult{Seed: seed, Runs: make([]map[string]Run, len(cfg.Budgets))}
	nb, k0 := cfg.sizes(n, cfg.Budgets[0])
	p0, err := params(n, nb, k0, cfg.Schedule)
	if err != nil {
		return nil, fmt.Errorf("schedule: %w", err)
	}
	oursGen := cfg.Generate
	oursGen.Seed = cfg.Generate.Seed + seed
	oursGen.Distill = cfg.Distill
	paperGen := oursGen
	paperGen.Distill = nil
	cfg.ExVivo.apply(&oursGen)
	oursGen.EntropyHidden = cfg.EntropyHidden
	allMLPGen := oursGen
	oursGen.PhaseAblations = cfg.finalAblations(cfg.Schedule)
	sel := map[string][]int{} // at the first budget (for the report's overlap of MPC vs plaintext)
	var oursProxies []*proxy.Proxy
	if s < cfg.SecureSeeds && cfg.has(OursMPC) {
		run, err := SecureSelect(ctx, d, p0, oursGen, cfg.Logger.With("seed", s+1, "party", "mpc"))
		if err != nil {
			return nil, err
		}
		sr.Secure, sr.Bootstrap, oursProxies = run, run.Result.Bootstrap, run.Proxies
		sel[OursMPC] = run.Result.Selected
		log.Info("quality: secure selection done", "seconds", run.Seconds)
	} else {
		sr.Bootstrap, err = RandomPick(dataset.Indices(n), nb, seed*7919)
		if err != nil {
			return nil, err
		}
	}
	boot := sr.Bootstrap
	bootIn, err := d.Pool.Select(boot)
	if err != nil {
		return nil, err
	}
	bootY := labelsOf(d.PoolY, boot)
	cands := Candidates(n, boot)

	// The targets: the checkpoint, and the checkpoint adapted to the
	// bootstrap as M_g is (embeddings frozen, the Tune schedule).
	ckptLogits, err := model.Predict(d.Target, d.Pool, 256)
	if err != nil {
		return nil, err
	}
	adapted, err := Clone(d.Target)
	if err != nil {
		return nil, err
	}
	tc := cfg.Generate.Tune
	if _, err := model.Train(adapted, bootIn, bootY, model.TrainConfig{Epochs: tc.Epochs, BatchSize: tc.BatchSize, LR: tc.LR,
		WeightDecay: tc.WeightDecay, WarmupFrac: 0.05, ClipNorm: 1, FreezeEmbeddings: true, Seed: seed}); err != nil {
		return nil, fmt.Errorf("adapting the target: %w", err)
	}
	oracleLogits, err := model.Predict(adapted, d.Pool, 256)
	if err != nil {
		return nil, err
	}
	oracleH, ckptH := nn.Entropy(oracleLogits), nn.Entropy(ckptLogits)
	fid := func(variant string, ps []*proxy.Proxy, ent [][]float64) error {
		for i, p := range ps {
			a, err := proxy.Spearman(Pick(ent[i], cands), Pick(oracleH, cands))
			if err != nil {
				return err
			}
			b, err := proxy.Spearman(Pick(ent[i], cands), Pick(ckptH, cands))
			if err != nil {
				return err
			}
			lh, err := logitEntropies(p, d.Pool)
			if err != nil {
				return err
			}
			c, err := proxy.Spearman(Pick(lh, cands), Pick(oracleH, cands))
			if err != nil {
				return err
			}
			sr.Fidelity = append(sr.Fidelity, Fidelity{Variant: variant, Phase: i, Shape: p.Shape, Ablation: p.Ablation, Oracle: a, Checkpoint: b, Logits: c})
		}
		return nil
	}

	// Proxies.
	gen := func(c proxy.Config, phases []proxy.Shape) (*proxy.Result, error) {
		c.Phases = phases
		c.Logger = cfg.Logger.With("seed", s+1, "stage", "generate")
		r, err := proxy.Generate(ctx, d.Target, bootIn, bootY, c)
		if err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		return r, nil
	}
	var oursEnt [][]float64
	if oursProxies == nil && (cfg.has(Ours) || cfg.has(OursMPC)) {
		r, err := gen(oursGen, phasesOf(cfg.Schedule))
		if err != nil {
			return nil, err
		}
		oursProxies = r.Proxies
	}
	if oursProxies != nil {
		if oursEnt, err = poolScores(oursProxies, d.Pool); err != nil {
			return nil, err
		}
		if err := fid("ours", oursProxies, oursEnt); err != nil {
			return nil, err
		}
	}
	type variant struct {
		method string
		sched  []Shape
		ent    [][]float64
	}
	var variants []variant
	if oursEnt != nil {
		variants = append(variants, variant{Ours, cfg.Schedule, oursEnt})
	}
	var backbone *model.Model
	if cfg.has(Ours1) || cfg.has(Ours3) || cfg.has(MPCFormer) {
		// One generation holds the 1- and 3-phase proxies (same M_g).
		var phases []proxy.Shape
		var abl []proxy.Ablation
		add := func(sched []Shape) {
			phases = append(phases, phasesOf(sched)...)
			abl = append(abl, cfg.finalAblations(sched)...)
		}
		if cfg.has(Ours1) {
			add(cfg.OnePhase)
		}
		if cfg.has(Ours3) {
			add(cfg.ThreePhase)
		}
		if len(phases) == 0 {
			add(cfg.OnePhase)
		}
		c := oursGen
		c.PhaseAblations = abl
		r, err := gen(c, phases)
		if err != nil {
			return nil, err
		}
		backbone = r.Backbone
		ent, err := poolScores(r.Proxies, d.Pool)
		if err != nil {
			return nil, err
		}
		off := 0
		if cfg.has(Ours1) {
			variants = append(variants, variant{Ours1, cfg.OnePhase, ent[:len(cfg.OnePhase)]})
			if err := fid("ours, 1 phase", r.Proxies[:len(cfg.OnePhase)], ent[:len(cfg.OnePhase)]); err != nil {
				return nil, err
			}
			off = len(cfg.OnePhase)
		}
		if cfg.has(Ours3) {
			variants = append(variants, variant{Ours3, cfg.ThreePhase, ent[off : off+len(cfg.ThreePhase)]})
			if err := fid("ours, 3 phases", r.Proxies[off:off+len(cfg.ThreePhase)], ent[off:off+len(cfg.ThreePhase)]); err != nil {
				return nil, err
			}
		}
	}
	// scheduleVariant generates the main schedule's proxies with c, scores
	// the pool and records the method and the proxies' fidelity.
	scheduleVariant := func(method, fidName string, c proxy.Config) error {
		r, err := gen(c, phasesOf(cfg.Schedule))
		if err != nil {
			return err
		}
		ent, err := poolScores(r.Proxies, d.Pool)
		if err != nil {
			return err
		}
		variants = append(variants, variant{method, cfg.Schedule, ent})
		return fid(fidName, r.Proxies, ent)
	}
	if cfg.has(OursMLP) && cfg.FinalExactSoftmax {
		if err := scheduleVariant(OursMLP, "ours, all MLPs", allMLPGen); err != nil {
			return nil, err
		}
	}
	if cfg.has(OursPaper) && cfg.Distill != nil {
		if err := scheduleVariant(OursPaper, "label tuning (paper)", paperGen); err != nil {
			return nil, err
		}
	}
	if cfg.has(NoApprox) {
		c := oursGen
		c.Ablation, c.PhaseAblations = proxy.NoApprox, nil
		if err := scheduleVariant(NoApprox, "NoApprox", c); err != nil {
			return nil, err
		}
	}
	if cfg.has(MPCFormer) {
		bp, err := proxy.Baseline(ctx, backbone, bootIn, 0, cfg.Generate.InVivo, oursGen.Seed, cfg.Logger.With("seed", s+1, "stage", "mpcformer"))
		if err != nil {
			return nil, fmt.Errorf("mpcformer baseline: %w", err)
		}
		ent, err := poolScores([]*proxy.Proxy{bp}, d.Pool)
		if err != nil {
			return nil, err
		}
		variants = append(variants, variant{MPCFormer, []Shape{{Proxy: bp.Shape}}, ent})
		if err := fid("MPCFormer", []*proxy.Proxy{bp}, ent); err != nil {
			return nil, err
		}
	}
	prior := Prior(bootY, d.NumClasses())
	balanced := BalancedScore(oracleLogits, prior, balancedBeta)
	margin := Margin(oracleLogits)

	// Selections and fine-tuning at every budget.
	done := map[uint64]float64{}
	for bi, b := range cfg.Budgets {
		_, k := cfg.sizes(n, b)
		runs := map[string][]int{}
		if cfg.has(Random) {
			if runs[Random], err = RandomPick(cands, k, seed*104729+uint64(bi)); err != nil {
				return nil, err
			}
		}
		top := func(name string, score []float64) error {
			if cfg.has(name) {
				runs[name], err = TopK(Pick(score, cands), cands, k)
			}
			return err
		}
		if err := top(Oracle, oracleH); err != nil {
			return nil, err
		}
		if err := top(OracleCkpt, ckptH); err != nil {
			return nil, err
		}
		if err := top(MarginOracle, margin); err != nil {
			return nil, err
		}
		if err := top(BalancedEnt, balanced); err != nil {
			return nil, err
		}
		for _, v := range variants {
			p, err := params(n, nb, k, v.sched)
			if err != nil {
				return nil, fmt.Errorf("%s at budget %g: %w", v.method, b, err)
			}
			if runs[v.method], err = cascade(p, v.ent, cands); err != nil {
				return nil, err
			}
		}
		if bi == 0 && sel[OursMPC] != nil {
			runs[OursMPC] = sel[OursMPC]
		}
		sr.Runs[bi] = map[string]Run{}
		names := make([]string, 0, len(runs))
		for name := range runs {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			set := runs[name]
			buy := slices.Concat(boot, set)
			key := setKey(buy)
			acc, ok := done[key]
			if !ok {
				if acc, err = d.FineTune(buy, seed*31+uint64(bi)); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				done[key] = acc
			}
			sr.Runs[bi][name] = Run{Accuracy: acc, Selected: set}
			log.Info("quality: fine-tuned", "budget", b, "method", name, "accuracy", acc)
		}
	}
	sr.Seconds = time.Since(start).Seconds()
	log.Info("quality: seed done", "seconds", sr.Seconds)
	return sr, nil
}

// setKey hashes a purchase (order-insensitive).
func setKey(idx []int) uint64 {
	s := slices.Clone(idx)
	slices.Sort(s)
	h := fnv.New64a()
	for _, v := range s {
		fmt.Fprintf(h, "%d,", v)
	}
	return h.Sum64()
}

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

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
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
	// Generate is the paper's plain generation (proxy.Config.Plain: labels
	// only, every module emulated, purely synthesised MLP data sets):
	// "Ours (label tuning)", and the schedules of the Oracle's adaptation
	// and the MPCFormer baseline. Its Seed is also the base of Ours'
	// generation seeds.
	Generate proxy.Config
	// Tweak, if set, edits Ours' generation. Without it Ours is the
	// library's default generation: a proxy.Config with only Phases, Seed
	// and Public (the public split) set, so a change of default shows in
	// Ours' rows. Tweak sees the default resolved for the seed's bootstrap
	// (proxy.Config.WithDefaults, every setting spelled out) with Plain set,
	// so that a zero it writes means zero: the tool's ablation flags.
	Tweak func(*proxy.Config)
	// NoPublic leaves the public split out of Ours' generation (no
	// Config.Public): the library's fallback for a model owner without
	// unlabelled inputs of its own, distillation on the bootstrap and
	// mixes of it alone.
	NoPublic bool
	// Methods restricts the methods (nil: AllMethods).
	Methods []string
	// Jobs is the number of seeds evaluated at once.
	Jobs int
	// Logger receives progress.
	Logger *slog.Logger
}

// Phase1 is what the first phase of a multi-phase schedule keeps of the
// Oracle's final selection: Kept of its Oracle points survive, out of
// Oracle; Survivors is how many candidates the phase keeps of Candidates.
type Phase1 struct {
	Kept, Oracle, Survivors, Candidates int
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
	// Phase1 holds, per budget index, what Ours' first phase (plaintext,
	// the main schedule) does to the Oracle's final selection (absent when
	// the schedule has one phase or Ours or the Oracle is not evaluated).
	Phase1 map[int]Phase1
	// Secure is set when Ours ran through the MPC pipeline.
	Secure *SecureRun
	// GenSeconds is the time Ours' proxy generation (the main schedule)
	// took: inside the MPC run when there was one, else in plaintext (0
	// when Ours was not generated).
	GenSeconds float64
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

// finalAblations returns the per-phase ablations of a schedule of Ours
// whose generation is ours (resolved): nil (every module emulated), or, when
// ours keeps the last phase's attention softmax exact, that on sched's last
// phase.
func finalAblations(ours proxy.Config, sched []Shape) []proxy.Ablation {
	if !finalExact(ours) || len(sched) == 0 {
		return nil
	}
	out := make([]proxy.Ablation, len(sched))
	out[len(out)-1] = proxy.NoAttnSM
	return out
}

// finalExact reports whether the resolved generation ours keeps the last
// phase's attention softmax exact.
func finalExact(ours proxy.Config) bool {
	a := ours.PhaseAblations
	return len(a) > 0 && a[len(a)-1].ExactAttnSoftmax
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

// evalSeed evaluates every configured method on seed s+1: the bootstrap
// (through the MPC pipeline for the first SecureSeeds seeds), the target's
// scores, the proxies of each variant and their fidelity, then at every
// budget each method's selection and the accuracy of fine-tuning on it.
func evalSeed(ctx context.Context, d *Data, cfg *Config, s int) (*SeedResult, error) {
	start := time.Now()
	e := newSeedEval(d, cfg, s)
	nb, _ := cfg.sizes(e.n, cfg.Budgets[0])
	gens := seedConfigs(cfg, d, e.seed, nb)
	oursProxies, mpcSel, err := e.bootstrap(ctx, gens.ours)
	if err != nil {
		return nil, err
	}
	if err := e.targets(); err != nil {
		return nil, err
	}
	if err := e.oursVariant(ctx, gens.ours, oursProxies); err != nil {
		return nil, err
	}
	backbone, err := e.phaseVariants(ctx, gens)
	if err != nil {
		return nil, err
	}
	if err := e.scheduleVariants(ctx, gens); err != nil {
		return nil, err
	}
	if err := e.mpcformerVariant(ctx, backbone, gens.ours.Seed); err != nil {
		return nil, err
	}
	scores := e.targetScores()

	// Selections and fine-tuning at every budget.
	done := map[uint64]float64{}
	for bi, b := range cfg.Budgets {
		runs, err := e.selectAt(bi, b, scores)
		if err != nil {
			return nil, err
		}
		if bi == 0 && mpcSel != nil {
			runs[OursMPC] = mpcSel
		}
		if err := e.fineTune(bi, b, runs, done); err != nil {
			return nil, err
		}
	}
	e.sr.Seconds = time.Since(start).Seconds()
	e.log.Info("quality: seed done", "seconds", e.sr.Seconds)
	return e.sr, nil
}

// seedEval is what the steps of one seed's evaluation share: the inputs, the
// bootstrap and candidates, the target's entropies, the plaintext variants
// gathered so far, and the result being filled.
type seedEval struct {
	d    *Data
	cfg  *Config
	s    int    // the seed's index
	seed uint64 // s + 1
	log  *slog.Logger
	n    int // pool size
	sr   *SeedResult

	boot   []int       // the bootstrap's pool indices
	bootIn model.Input // its points
	bootY  []int       // and labels
	cands  []int       // the pool indices outside the bootstrap

	// oracleLogits are the target's logits on the pool after adaptation to
	// the bootstrap; oracleH their entropies, ckptH the checkpoint's.
	oracleLogits   *nn.Tensor
	oracleH, ckptH []float64

	variants []variant
}

// variant is a plaintext cascade: a method, its schedule, and its proxies'
// entropies on the pool (one row per phase, indexed by pool index).
type variant struct {
	method string
	sched  []Shape
	ent    [][]float64
}

// newSeedEval starts the evaluation of seed index s.
func newSeedEval(d *Data, cfg *Config, s int) *seedEval {
	seed := uint64(s + 1)
	return &seedEval{d: d, cfg: cfg, s: s, seed: seed, log: cfg.Logger.With("seed", s+1), n: d.Pool.Len(),
		sr: &SeedResult{Seed: seed, Runs: make([]map[string]Run, len(cfg.Budgets))}}
}

// seedGens are the proxy generation configurations of one seed's variants.
type seedGens struct {
	// ours is Ours: the library's default generation with the seed's
	// generation seed and the public split (or Tweak's edit of it), as
	// given to proxy.Generate and to the MPC pipeline's model owner.
	ours proxy.Config
	// resolved is ours with every default spelled out for the main
	// schedule (proxy.Config.WithDefaults).
	resolved proxy.Config
	// paper is the paper's plain generation (label tuning).
	paper proxy.Config
	// allMLP is ours without the final phase's ablations (every module an MLP).
	allMLP proxy.Config
}

// oursConfig returns Ours' generation for the seed with generation seed
// offset seed and a bootstrap of nb samples (see Config.Tweak), and its
// resolution for the main schedule.
func oursConfig(cfg *Config, d *Data, seed uint64, nb int) (ours, resolved proxy.Config) {
	ours = proxy.Config{Seed: cfg.Generate.Seed + seed, Public: d.Public}
	if cfg.NoPublic {
		ours.Public = model.Input{}
	}
	resolve := func(c proxy.Config) proxy.Config {
		c.Phases = phasesOf(cfg.Schedule)
		c = c.WithDefaults(d.Target, nb)
		c.Phases = nil
		return c
	}
	if cfg.Tweak != nil {
		ours = resolve(ours)
		ours.Plain = true
		cfg.Tweak(&ours)
		if ours.Distill == nil {
			ours.Public = model.Input{} // label tuning: nothing to distil on
		}
	}
	return ours, resolve(ours)
}

// seedConfigs derives the seed's generation configurations from cfg.
func seedConfigs(cfg *Config, d *Data, seed uint64, nb int) seedGens {
	ours, resolved := oursConfig(cfg, d, seed, nb)
	paperGen := cfg.Generate
	paperGen.Plain = true
	paperGen.Seed = ours.Seed
	paperGen.Distill = nil
	allMLPGen := ours
	if ours.Plain {
		allMLPGen.PhaseAblations = nil
	} else {
		allMLPGen.AllMLP = true
	}
	return seedGens{ours: ours, resolved: resolved, paper: paperGen, allMLP: allMLPGen}
}

// bootstrap draws the seed's bootstrap and sets the candidates: through the
// MPC pipeline at the first budget (for the first SecureSeeds seeds, when
// Ours (MPC) is evaluated), returning its proxies and its selection, or
// else at random from the seed.
func (e *seedEval) bootstrap(ctx context.Context, oursGen proxy.Config) (proxies []*proxy.Proxy, selected []int, err error) {
	cfg, sr := e.cfg, e.sr
	nb, k0 := cfg.sizes(e.n, cfg.Budgets[0])
	p0, err := params(e.n, nb, k0, cfg.Schedule)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule: %w", err)
	}
	if e.s < cfg.SecureSeeds && cfg.has(OursMPC) {
		run, err := SecureSelect(ctx, e.d, p0, oursGen, cfg.Logger.With("seed", e.s+1, "party", "mpc"))
		if err != nil {
			return nil, nil, err
		}
		sr.Secure, sr.Bootstrap, proxies = run, run.Result.Bootstrap, run.Proxies
		sr.GenSeconds = run.GenSeconds
		selected = run.Result.Selected
		e.log.Info("quality: secure selection done", "seconds", run.Seconds)
	} else {
		sr.Bootstrap, err = RandomPick(dataset.Indices(e.n), nb, e.seed*7919)
		if err != nil {
			return nil, nil, err
		}
	}
	e.boot = sr.Bootstrap
	if e.bootIn, err = e.d.Pool.Select(e.boot); err != nil {
		return nil, nil, err
	}
	e.bootY = labelsOf(e.d.PoolY, e.boot)
	e.cands = Candidates(e.n, e.boot)
	return proxies, selected, nil
}

// targets computes the target's entropies on the pool: the checkpoint's,
// and those of the checkpoint adapted to the bootstrap as M_g is
// (embeddings frozen, the Tune schedule), the Oracle.
func (e *seedEval) targets() error {
	ckptLogits, err := model.Predict(e.d.Target, e.d.Pool, 256)
	if err != nil {
		return err
	}
	adapted, err := Clone(e.d.Target)
	if err != nil {
		return err
	}
	tc := e.cfg.Generate.Tune
	if _, err := model.Train(adapted, e.bootIn, e.bootY, model.TrainConfig{Epochs: tc.Epochs, BatchSize: tc.BatchSize, LR: tc.LR,
		WeightDecay: tc.WeightDecay, WarmupFrac: 0.05, ClipNorm: 1, FreezeEmbeddings: true, Seed: e.seed}); err != nil {
		return fmt.Errorf("adapting the target: %w", err)
	}
	if e.oracleLogits, err = model.Predict(adapted, e.d.Pool, 256); err != nil {
		return err
	}
	e.oracleH, e.ckptH = nn.Entropy(e.oracleLogits), nn.Entropy(ckptLogits)
	return nil
}

// fidelity records, for each proxy ps[i] of a variant with pool entropies
// ent[i], the Spearman correlation over the candidates of its entropies with
// the Oracle's and the checkpoint's, and of its logits' exact entropies with
// the Oracle's.
func (e *seedEval) fidelity(variant string, ps []*proxy.Proxy, ent [][]float64) error {
	cands := e.cands
	for i, p := range ps {
		a, err := proxy.Spearman(Pick(ent[i], cands), Pick(e.oracleH, cands))
		if err != nil {
			return err
		}
		b, err := proxy.Spearman(Pick(ent[i], cands), Pick(e.ckptH, cands))
		if err != nil {
			return err
		}
		lh, err := logitEntropies(p, e.d.Pool)
		if err != nil {
			return err
		}
		c, err := proxy.Spearman(Pick(lh, cands), Pick(e.oracleH, cands))
		if err != nil {
			return err
		}
		e.sr.Fidelity = append(e.sr.Fidelity, Fidelity{Variant: variant, Phase: i, Shape: p.Shape, Ablation: p.Ablation, Oracle: a, Checkpoint: b, Logits: c})
	}
	return nil
}

// generate generates proxies of the given phases from the target and the
// bootstrap with c.
func (e *seedEval) generate(ctx context.Context, c proxy.Config, phases []proxy.Shape) (*proxy.Result, error) {
	c.Phases = phases
	c.Logger = e.cfg.Logger.With("seed", e.s+1, "stage", "generate")
	r, err := proxy.Generate(ctx, e.d.Target, e.bootIn, e.bootY, c)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return r, nil
}

// addVariant scores the pool with the proxies ps, adds the variant of
// method on sched, and records the proxies' fidelity under fidName.
func (e *seedEval) addVariant(method string, sched []Shape, fidName string, ps []*proxy.Proxy) error {
	ent, err := poolScores(ps, e.d.Pool)
	if err != nil {
		return err
	}
	e.variants = append(e.variants, variant{method, sched, ent})
	return e.fidelity(fidName, ps, ent)
}

// oursVariant adds Ours on the main schedule with the given proxies (the
// MPC pipeline's), generated with oursGen when nil and Ours or Ours (MPC)
// is evaluated.
func (e *seedEval) oursVariant(ctx context.Context, oursGen proxy.Config, proxies []*proxy.Proxy) error {
	if proxies == nil && (e.cfg.has(Ours) || e.cfg.has(OursMPC)) {
		oursGen.Progress = genTimer(oursGen.Progress, &e.sr.GenSeconds)
		r, err := e.generate(ctx, oursGen, phasesOf(e.cfg.Schedule))
		if err != nil {
			return err
		}
		proxies = r.Proxies
	}
	if proxies == nil {
		return nil
	}
	return e.addVariant(Ours, e.cfg.Schedule, "ours", proxies)
}

// phaseVariants adds Ours on the 1- and 3-phase schedules, from one
// generation that holds both (the same M_g), and returns that generation's
// backbone (for the MPCFormer baseline); nil when none of Ours (1 phase),
// Ours (3 phases) and MPCFormer is evaluated.
func (e *seedEval) phaseVariants(ctx context.Context, gens seedGens) (*model.Model, error) {
	cfg := e.cfg
	if !cfg.has(Ours1) && !cfg.has(Ours3) && !cfg.has(MPCFormer) {
		return nil, nil
	}
	var phases []proxy.Shape
	var abl []proxy.Ablation
	add := func(sched []Shape) {
		phases = append(phases, phasesOf(sched)...)
		abl = append(abl, finalAblations(gens.resolved, sched)...)
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
	c := gens.ours
	c.PhaseAblations = abl
	if abl == nil {
		c.AllMLP = !c.Plain // explicitly every module emulated
	}
	r, err := e.generate(ctx, c, phases)
	if err != nil {
		return nil, err
	}
	ent, err := poolScores(r.Proxies, e.d.Pool)
	if err != nil {
		return nil, err
	}
	off := 0
	if cfg.has(Ours1) {
		e.variants = append(e.variants, variant{Ours1, cfg.OnePhase, ent[:len(cfg.OnePhase)]})
		if err := e.fidelity("ours, 1 phase", r.Proxies[:len(cfg.OnePhase)], ent[:len(cfg.OnePhase)]); err != nil {
			return nil, err
		}
		off = len(cfg.OnePhase)
	}
	if cfg.has(Ours3) {
		e.variants = append(e.variants, variant{Ours3, cfg.ThreePhase, ent[off : off+len(cfg.ThreePhase)]})
		if err := e.fidelity("ours, 3 phases", r.Proxies[off:off+len(cfg.ThreePhase)], ent[off:off+len(cfg.ThreePhase)]); err != nil {
			return nil, err
		}
	}
	return r.Backbone, nil
}

// scheduleVariants adds the main schedule's other variants that are
// evaluated, each from its own generation: all MLPs (when Ours keeps the
// last phase's softmax exact), label tuning (when Ours distils), and
// NoApprox.
func (e *seedEval) scheduleVariants(ctx context.Context, gens seedGens) error {
	cfg := e.cfg
	// one generates the main schedule's proxies with c, scores the pool and
	// records the method and the proxies' fidelity.
	one := func(method, fidName string, c proxy.Config) error {
		r, err := e.generate(ctx, c, phasesOf(cfg.Schedule))
		if err != nil {
			return err
		}
		return e.addVariant(method, cfg.Schedule, fidName, r.Proxies)
	}
	if cfg.has(OursMLP) && finalExact(gens.resolved) {
		if err := one(OursMLP, "ours, all MLPs", gens.allMLP); err != nil {
			return err
		}
	}
	if cfg.has(OursPaper) && gens.resolved.Distill != nil {
		if err := one(OursPaper, "label tuning (paper)", gens.paper); err != nil {
			return err
		}
	}
	if cfg.has(NoApprox) {
		c := gens.ours
		c.Ablation, c.PhaseAblations = proxy.NoApprox, nil
		if err := one(NoApprox, "NoApprox", c); err != nil {
			return err
		}
	}
	return nil
}

// mpcformerVariant adds the MPCFormer baseline, distilled from backbone
// with the generation seed genSeed, when it is evaluated.
func (e *seedEval) mpcformerVariant(ctx context.Context, backbone *model.Model, genSeed uint64) error {
	if !e.cfg.has(MPCFormer) {
		return nil
	}
	bp, err := proxy.Baseline(ctx, backbone, e.bootIn, 0, e.cfg.Generate.InVivo, genSeed, e.cfg.Logger.With("seed", e.s+1, "stage", "mpcformer"))
	if err != nil {
		return fmt.Errorf("mpcformer baseline: %w", err)
	}
	return e.addVariant(MPCFormer, []Shape{{Proxy: bp.Shape}}, "MPCFormer", []*proxy.Proxy{bp})
}

// targetScores are the target-based criteria's scores on the pool, by
// method name (the Oracle's entropies, the checkpoint's, the margin, the
// balanced entropy with the bootstrap's prior).
func (e *seedEval) targetScores() map[string][]float64 {
	prior := Prior(e.bootY, e.d.NumClasses())
	return map[string][]float64{
		Oracle:       e.oracleH,
		OracleCkpt:   e.ckptH,
		MarginOracle: Margin(e.oracleLogits),
		BalancedEnt:  BalancedScore(e.oracleLogits, prior, balancedBeta),
	}
}

// targetOrder is the order targetScores' methods select in.
var targetOrder = []string{Oracle, OracleCkpt, MarginOracle, BalancedEnt}

// selectAt returns each evaluated method's selection among the candidates
// at budget b (index bi): Random, the top of each target score, and each
// variant's plaintext cascade.
func (e *seedEval) selectAt(bi int, b float64, scores map[string][]float64) (map[string][]int, error) {
	cfg, cands := e.cfg, e.cands
	nb, k := cfg.sizes(e.n, b)
	runs := map[string][]int{}
	var err error
	if cfg.has(Random) {
		if runs[Random], err = RandomPick(cands, k, e.seed*104729+uint64(bi)); err != nil {
			return nil, err
		}
	}
	for _, name := range targetOrder {
		if !cfg.has(name) {
			continue
		}
		if runs[name], err = TopK(Pick(scores[name], cands), cands, k); err != nil {
			return nil, err
		}
	}
	for _, v := range e.variants {
		p, err := params(e.n, nb, k, v.sched)
		if err != nil {
			return nil, fmt.Errorf("%s at budget %g: %w", v.method, b, err)
		}
		if runs[v.method], err = cascade(p, v.ent, cands); err != nil {
			return nil, err
		}
		if v.method == Ours && len(p.Schedule) > 1 && runs[Oracle] != nil {
			ph, err := phase1(p, v.ent[0], cands, runs[Oracle])
			if err != nil {
				return nil, err
			}
			if e.sr.Phase1 == nil {
				e.sr.Phase1 = map[int]Phase1{}
			}
			e.sr.Phase1[bi] = ph
		}
	}
	return runs, nil
}

// phase1 returns what the first phase of p, ranking cands by ent (indexed
// by pool index), keeps of the Oracle's selection oracle.
func phase1(p selection.Params, ent []float64, cands, oracle []int) (Phase1, error) {
	keep := int(float64(p.PoolSize-p.Bootstrap)*p.Schedule[0].Keep + 0.5)
	surv, err := TopK(Pick(ent, cands), cands, keep)
	if err != nil {
		return Phase1{}, err
	}
	ph := Phase1{Oracle: len(oracle), Survivors: len(surv), Candidates: len(cands)}
	for _, i := range oracle {
		if slices.Contains(surv, i) {
			ph.Kept++
		}
	}
	return ph, nil
}

// fineTune fine-tunes on the bootstrap plus each selection of runs (in the
// order of the methods' names; a purchase already fine-tuned on, in done, is
// not fine-tuned again) and records the runs at budget index bi.
func (e *seedEval) fineTune(bi int, b float64, runs map[string][]int, done map[uint64]float64) error {
	e.sr.Runs[bi] = map[string]Run{}
	names := make([]string, 0, len(runs))
	for name := range runs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		set := runs[name]
		buy := slices.Concat(e.boot, set)
		key := setKey(buy)
		acc, ok := done[key]
		if !ok {
			var err error
			if acc, err = e.d.FineTune(buy, e.seed*31+uint64(bi)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			done[key] = acc
		}
		e.sr.Runs[bi][name] = Run{Accuracy: acc, Selected: set}
		e.log.Info("quality: fine-tuned", "budget", b, "method", name, "accuracy", acc)
	}
	return nil
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

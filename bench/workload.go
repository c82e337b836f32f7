package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection"
)

// Phase is one phase of a workload's schedule (as selection.Phase is one of
// a selection's): its proxy shape and the fraction that survives it.
type Phase struct {
	// Layers, Heads (0: all of the shape) and MLPHidden are the proxy's shape
	// ⟨l, w, d⟩ (ignored by an exact workload).
	Layers    int `json:"layers"`
	Heads     int `json:"heads"`
	MLPHidden int `json:"mlp_dim"`
	// Survive is the fraction of the pool, bootstrap included, that
	// survives the phase, as the paper's Table 4 states schedules
	// (100% → 50% → 30% → 20%). The last phase's is the budget.
	Survive float64 `json:"survive"`
	// Workers, if positive, is the phase's own number of batch lanes
	// (selection.Phase.Workers; 0: the workload's Workers): a phase of a
	// small proxy whose batches are latency-bound runs more at once.
	Workers int `json:"workers,omitempty"`
	// BatchSize, if positive, is the phase's own batch size
	// (selection.Phase.BatchSize; 0: the workload's BatchSize): a phase of
	// a small proxy whose batches are latency-bound pays its rounds per
	// batch fewer times in larger batches.
	BatchSize int `json:"batch_size,omitempty"`
}

// String renders the phase as ⟨l L, w H, d d⟩.
func (p Phase) String() string {
	return fmt.Sprintf("⟨%dL,%dH,d%d⟩", p.Layers, p.Heads, p.MLPHidden)
}

// PaperDelay is a selection delay the SelectFormer paper reports.
type PaperDelay struct {
	// Label names the setting, e.g. "SelectFormer, BERT on QQP".
	Label string `json:"label"`
	// Pool is the number of candidates selected from.
	Pool int `json:"pool"`
	// Hours is the reported delay.
	Hours float64 `json:"hours"`
}

// Workload is a selection benchmark modelled on one of the paper's settings:
// a target shape, the pool size, the schedule and the defaults of a sample
// run (Samples candidates in batches of BatchSize on Workers lanes).
type Workload struct {
	// Name identifies the workload (Workloads).
	Name string `json:"name"`
	// Target describes the target model in words.
	Target string `json:"target"`
	// Shape is the bench shape (Shapes) of the proxies.
	Shape string `json:"shape"`
	// Seq is the padded sequence length (128 text; 197 tokens for ViT-B/16
	// style inputs at 224 pixels).
	Seq int `json:"seq"`
	// Exact runs the exact target model of Layers layers (the Oracle)
	// instead of proxies: one phase.
	Exact bool `json:"exact"`
	// Pool is the full pool size the run projects to.
	Pool int `json:"pool"`
	// Budget and Bootstrap are fractions of the pool (0.20 and 0.05 in the
	// paper's default setting).
	Budget    float64 `json:"budget"`
	Bootstrap float64 `json:"bootstrap"`
	// Phases is the schedule.
	Phases []Phase `json:"phases"`
	// Samples is the default number of synthetic candidates of a sample run.
	Samples int `json:"samples"`
	// BatchSize and Workers configure the batch loop (selection.Params):
	// Workers is the number of batch lanes, the batches in flight with the
	// pipeline on. Rounds per batch do not depend on the batch size, so the
	// forward's critical path is ≈ candidates ÷ (BatchSize × Workers) ×
	// rounds per batch, and the memory in flight grows with BatchSize ×
	// Workers.
	BatchSize int `json:"batch_size"`
	Workers   int `json:"workers"`
	// MemoryBudget is each party's budget of prefetched dealer material
	// in bytes (selection.Params.MemoryBudget; 0: selection's default).
	MemoryBudget int64 `json:"memory_budget,omitempty"`
	// Paper holds the paper's reported delays to compare with; Paper[0], if
	// any, is the one of the same setting.
	Paper []PaperDelay `json:"paper,omitempty"`
}

// The paper's reported delays (hours; §5.2, Table 2): SelectFormer on
// DistilBERT/SST2 ≈ 20 h, the Oracle 3740 h; BERT on SST2/QNLI/QQP 37/51/131 h;
// MPCFormer's proxies 279/388/998 h.
var (
	paperSST2DistilBERT = PaperDelay{"SelectFormer, DistilBERT on SST2", 42000, 20}
	paperOracleSST2     = PaperDelay{"Oracle, DistilBERT on SST2", 42000, 3740}
	paperBERT           = []PaperDelay{
		{"SelectFormer, BERT on QQP", 149000, 131}, {"MPCFormer, BERT on QQP", 149000, 998},
		{"SelectFormer, BERT on SST2", 42000, 37}, {"SelectFormer, BERT on QNLI", 58000, 51},
		{"MPCFormer, BERT on SST2", 42000, 279}, {"MPCFormer, BERT on QNLI", 58000, 388},
	}
)

// qqpPhase1Lanes and qqpPhase1Batch are the lanes and batch size of
// qqp-bert's phase 1: 60 lanes are the most that keep a dealer-free run's
// streams within the transport's default bound (2 × lanes + 5 ≤ 128: the
// parties' control, session and abort streams, a stream per lane, and
// beaver/ot's base stream and one per session and lane stream); batches
// of 8 are the largest whose 1,024-sample run's phase 1 (973 candidates,
// 122 batches) still gives the 60 lanes two waves (SteadySampleBatches;
// TestQQPBertSampleWaves).
const (
	qqpPhase1Lanes = 60
	qqpPhase1Batch = 8
)

// Workloads are the standard workloads of `mpcbench select` (the paper's
// settings; seq 128 text, 197 tokens ViT; budget 20%, bootstrap 5%). Their
// default sample sizes keep a run (with and without the link) within about
// ten minutes on an idle 2-core machine.
//
// Batches and lanes are chosen for the pipelined scheduler. Its lanes are
// served by priority (protocol.ComputeGate: one lane per core computes at
// once, the oldest batch first, and the link sends the oldest batch's
// frames first), so more lanes no longer means more activations alive at
// once: 16 lanes, 128 candidates in flight for the one-layer proxies
// (sst2-distilbert, cifar10-vitsmall: 3.2 and 2.5 GB of peak heap, both
// parties and the dealer), 128 for qqp-bert (32 lanes of 4: its
// ⟨3L,12H,d16⟩ phase holds three times a layer's activations per
// candidate, but since every block folds its attention (no keys, values
// or scores) 32 lanes peak at the 3.1 GB 16 lanes took before, and they
// bring its phase 2 from 1.95 h to its bandwidth bound, 1.48 h, where 16
// lanes' 66,505 rounds kept the link idle; its 1,024 samples give the
// phase-2 lanes two waves); the Oracle keeps 2 lanes of 3 (its 6-layer batches are
// compute-bound and the largest). With 8 lanes each batch's 51 rounds
// (2.55 s at 50 ms) were longer than the link needed for the other lanes'
// bytes, so the link idled; 16 lanes halve the latency bound. Default
// samples give the lanes at least two waves in the phases that dominate
// the delay, so that their steady rate is measured (SampleRun's Steady).
// sst2-distilbert runs batches of 16 since its one-layer proxies fold the
// class token's attention (proxy/secure): a batch's material and
// activations shrank 20-fold, so the lanes hold twice the candidates and
// the latency bound halves (0.51 h → 0.35 h projected over the paper WAN,
// 2,048 samples, the dealer on the same WAN); its 2,048 samples give the
// last phase's 16 lanes two waves of 16.
// qqp-bert's phase 1 runs lanes and batches of its own (qqpPhase1Lanes,
// qqpPhase1Batch): its ⟨1L,1H,d2⟩ batches are latency-bound (a batch's
// rounds do not grow with its size), and its activations are a fraction
// of phase 2's. At phase 2's 16 lanes of 4 it took 110,635 of the run's
// 177,722 rounds projected; on 60 lanes of 4, 29,535 (0.41 h at 50 ms);
// on 60 lanes of 8, 14,785, and the phase projects 0.30–0.35 h instead
// of 0.59 h (runs under load), its peak heap (0.6–0.8 GB) still far below
// phase 2's (30 lanes of 16 give the same rounds and 0.34 h;
// bench/RESULTS.md, "qqp-bert's phase 1 in batches of its own").
// Prefetch is bounded at 256 MiB per party (three of sst2-distilbert's
// 85 MB batches): with selection's 1 GiB default the parties held 1 GB
// each and the heap grew without a gain over the link.
var Workloads = []Workload{
	{Name: "sst2-distilbert", Target: "DistilBERT (6 layers, 12 heads, hidden 768)", Shape: "distilbert", Seq: 128, Pool: 42000,
		Budget: 0.20, Bootstrap: 0.05, Samples: 2048, BatchSize: 16, Workers: 16, MemoryBudget: 256 << 20,
		Phases: []Phase{{1, 12, 2, 0.50, 0, 0}, {1, 12, 8, 0.30, 0, 0}, {1, 12, 16, 0.20, 0, 0}},
		Paper:  []PaperDelay{paperSST2DistilBERT, paperOracleSST2}},
	{Name: "qqp-bert", Target: "BERT-base (12 layers, 12 heads, hidden 768)", Shape: "bert-base", Seq: 128, Pool: 149000,
		Budget: 0.20, Bootstrap: 0.05, Samples: 1024, BatchSize: 4, Workers: 32, MemoryBudget: 256 << 20,
		Phases: []Phase{{1, 1, 2, 0.30, qqpPhase1Lanes, qqpPhase1Batch}, {3, 12, 16, 0.20, 0, 0}},
		Paper:  paperBERT},
	{Name: "cifar10-vitsmall", Target: "ViT-small (12 layers, 6 heads, hidden 384)", Shape: "vit-small", Seq: 197, Pool: 50000,
		Budget: 0.20, Bootstrap: 0.05, Samples: 512, BatchSize: 8, Workers: 16, MemoryBudget: 256 << 20,
		Phases: []Phase{{1, 6, 16, 0.20, 0, 0}}},
	{Name: "oracle-sst2-distilbert", Target: "the exact 6-layer DistilBERT (the paper's Oracle)", Shape: "distilbert", Seq: 128, Exact: true, Pool: 42000,
		Budget: 0.20, Bootstrap: 0.05, Samples: 12, BatchSize: 3, Workers: 2, MemoryBudget: 256 << 20,
		Phases: []Phase{{6, 12, 0, 0.20, 0, 0}},
		Paper:  []PaperDelay{paperOracleSST2}},
}

// TinyWorkload is a small workload for tests and smoke runs: two phases of
// one-layer proxies of the "tiny" shape on 8-token inputs, batches of 4 on
// 4 lanes (several batches per lane, so that the pipeline prefetches).
var TinyWorkload = Workload{Name: "tiny", Target: "tiny DistilBERT-like model, 8 tokens (tests)", Shape: "tiny", Seq: 8, Pool: 1000,
	Budget: 0.20, Bootstrap: 0.05, Samples: 40, BatchSize: 4, Workers: 4,
	Phases: []Phase{{1, 2, 2, 0.50, 0, 0}, {1, 4, 4, 0.20, 0, 0}}}

// WorkloadByName returns the named workload of Workloads (or "tiny").
func WorkloadByName(name string) (Workload, error) {
	for _, w := range append(Workloads, TinyWorkload) {
		if w.Name == name {
			return w, nil
		}
	}
	names := make([]string, 0, len(Workloads)+1)
	for _, w := range Workloads {
		names = append(names, w.Name)
	}
	return Workload{}, fmt.Errorf("bench: unknown workload %q (known: %s, tiny)", name, strings.Join(names, ", "))
}

// Validate checks the workload.
func (w Workload) Validate() error {
	switch {
	case w.Pool <= 0 || w.Samples <= 0:
		return fmt.Errorf("bench: workload %s: pool %d, samples %d", w.Name, w.Pool, w.Samples)
	case w.Bootstrap < 0 || w.Budget <= w.Bootstrap || w.Budget > 1:
		return fmt.Errorf("bench: workload %s: budget %g, bootstrap %g", w.Name, w.Budget, w.Bootstrap)
	case len(w.Phases) == 0:
		return fmt.Errorf("bench: workload %s: no phases", w.Name)
	case w.Exact && len(w.Phases) != 1:
		return fmt.Errorf("bench: workload %s: an exact workload has one phase", w.Name)
	case w.BatchSize <= 0 || w.Workers <= 0:
		return fmt.Errorf("bench: workload %s: batch %d, workers %d", w.Name, w.BatchSize, w.Workers)
	case w.MemoryBudget < 0:
		return fmt.Errorf("bench: workload %s: memory budget %d", w.Name, w.MemoryBudget)
	}
	prev := 1.0
	for i, p := range w.Phases {
		if p.Workers < 0 || p.Workers > selection.MaxWorkers {
			return fmt.Errorf("bench: workload %s: phase %d on %d lanes (1..%d, or 0 for the workload's)", w.Name, i+1, p.Workers, selection.MaxWorkers)
		}
		if p.BatchSize < 0 || p.BatchSize > selection.MaxBatchSize {
			return fmt.Errorf("bench: workload %s: phase %d in batches of %d (1..%d, or 0 for the workload's)", w.Name, i+1, p.BatchSize, selection.MaxBatchSize)
		}
		if p.Survive > prev || p.Survive < w.Budget {
			return fmt.Errorf("bench: workload %s: phase %d keeps %g of the pool after %g", w.Name, i+1, p.Survive, prev)
		}
		prev = p.Survive
	}
	if math.Abs(prev-w.Budget) > 1e-9 {
		return fmt.Errorf("bench: workload %s: last phase keeps %g, budget %g", w.Name, prev, w.Budget)
	}
	for i := range w.Phases {
		if _, err := w.Arch(i); err != nil {
			return fmt.Errorf("bench: workload %s phase %d: %w", w.Name, i, err)
		}
	}
	return nil
}

// Params returns the selection parameters of a run of w on a pool of n
// candidates: bootstrap and budget rounded from the fractions (at least one
// bootstrap point and one point bought beyond it), each phase's Keep the
// fraction of the candidates (pool without bootstrap) that survive it.
func (w Workload) Params(n int) (selection.Params, error) {
	boot := max(1, int(math.Round(w.Bootstrap*float64(n))))
	budget := max(boot+1, int(math.Round(w.Budget*float64(n))))
	p := selection.Params{PoolSize: n, Budget: budget, Bootstrap: boot, BatchSize: w.BatchSize, Workers: w.Workers}
	cand := float64(n - boot)
	for _, ph := range w.Phases {
		keep := (ph.Survive*float64(n) - float64(boot)) / cand
		p.Schedule = append(p.Schedule, selection.Phase{Proxy: proxy.Shape{Layers: ph.Layers, Heads: ph.Heads, MLPHidden: ph.MLPHidden}, Keep: keep, Workers: ph.Workers, BatchSize: ph.BatchSize})
	}
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("bench: workload %s on %d candidates: %w", w.Name, n, err)
	}
	return p, nil
}

// PhaseSizes returns, for a pool of n, each phase's candidates (entering)
// and kept counts, as selection computes them from Params(n).
func (w Workload) PhaseSizes(n int) (cand, kept []int, err error) {
	p, err := w.Params(n)
	if err != nil {
		return nil, nil, err
	}
	in := n - p.Bootstrap
	for i, st := range p.Schedule {
		k := int(float64(n-p.Bootstrap)*st.Keep + 0.5)
		if i == len(p.Schedule)-1 {
			k = p.Budget - p.Bootstrap
		}
		cand, kept = append(cand, in), append(kept, k)
		in = k
	}
	return cand, kept, nil
}

// PhaseWorkers returns the batch lanes of phase i: its own Workers, or
// the workload's (i outside the phases: the workload's).
func (w Workload) PhaseWorkers(i int) int {
	if i >= 0 && i < len(w.Phases) && w.Phases[i].Workers > 0 {
		return w.Phases[i].Workers
	}
	return w.Workers
}

// PhaseBatchSize returns the batch size of phase i: its own BatchSize,
// or the workload's (i outside the phases: the workload's).
func (w Workload) PhaseBatchSize(i int) int {
	if i >= 0 && i < len(w.Phases) && w.Phases[i].BatchSize > 0 {
		return w.Phases[i].BatchSize
	}
	return w.BatchSize
}

// BatchesText says the workload's batches and lanes in words: "batches
// of 4 on 16 lanes", and the phases with lanes or a batch size of their
// own, "batches of 4 on 16 lanes (phase 1: 60 lanes; phase 2: 8 on 16)".
func (w Workload) BatchesText() string {
	s := fmt.Sprintf("batches of %d on %d lanes", w.BatchSize, w.Workers)
	var own []string
	for i, p := range w.Phases {
		switch {
		case p.BatchSize > 0:
			own = append(own, fmt.Sprintf("phase %d: %d on %d", i+1, p.BatchSize, w.PhaseWorkers(i)))
		case p.Workers > 0:
			own = append(own, fmt.Sprintf("phase %d: %d lanes", i+1, p.Workers))
		}
	}
	if len(own) > 0 {
		s += " (" + strings.Join(own, "; ") + ")"
	}
	return s
}

// Forward returns the ForwardConfig of phase i (batch b).
func (w Workload) Forward(i, b int) ForwardConfig {
	p := w.Phases[i]
	return ForwardConfig{Shape: w.Shape, Layers: p.Layers, Heads: p.Heads, MLPHidden: p.MLPHidden, Seq: w.Seq, Batch: b, Exact: w.Exact}
}

// Arch returns the architecture of phase i's network.
func (w Workload) Arch(i int) (secure.Arch, error) {
	if i < 0 || i >= len(w.Phases) {
		return secure.Arch{}, fmt.Errorf("bench: workload %s has no phase %d", w.Name, i)
	}
	return ShapeArch(w.Forward(i, 1))
}

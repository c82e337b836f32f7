package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// SelectConfig configures a sample run of a workload: the real selection
// pipeline (selection.ModelOwner and selection.DataOwner with checkpoints
// on, the dealer, the secure forward of each phase's network, QuickSelect)
// on Samples synthetic candidates. The networks have random weights of the
// workload's shapes and the candidates random embeddings: costs do not
// depend on values.
type SelectConfig struct {
	// Workload is the workload.
	Workload Workload
	// Samples is the pool size of the run (Workload.Samples when 0).
	Samples int
	// Link, if set, emulates the link between the parties (in-process runs;
	// processes use a relay).
	Link *transport.Profile
	// DealerLinks, where set, put the dealer on a host of its own behind
	// a link to party 0 and one to party 1 (nil: no link, the dealer in
	// process with its words handed over by function calls). In-process
	// runs serve the correlated randomness from a networked dealer over
	// link-emulated pipes (twoparty.Config.DealerLinks); separate
	// processes reach the dealer through a relay per party. The sample run
	// without a link (the compute bound) has none. They need Link and the
	// provider "dealer".
	DealerLinks [2]*transport.Profile
	// StateDir holds the checkpoints; "" makes a temporary directory that
	// is removed afterwards. It must hold no checkpoint of these parties: a
	// sample run starts fresh (Select uses the subdirectories compute and
	// link).
	StateDir string
	// Seed fixes the random weights and inputs.
	Seed uint64
	// Logger receives selection's progress (discarded when nil).
	Logger *slog.Logger
	// Provider names where the correlated randomness comes from, a source
	// of package beaver/source: "dealer" (the default when empty: the
	// run's dealer, in process or behind DealerLinks) or "ot" (no dealer:
	// the parties make it themselves by oblivious transfer over their own
	// connection, ot.Provider; in-process runs only) or "he" (as "ot", but
	// the weight-mask correlations by lattice encryption, ot.Lattice).
	// With a dealer-free source the phases' dealer bytes are the parties'
	// own traffic of the provider.
	Provider string
	// Pipeline is the batch scheduler's mode of both parties
	// (selection.Params.Pipeline): "on" (the default when empty: every
	// lane at once, dealer material prefetched) or "off" (one batch at a
	// time, every dealer request on the critical path).
	Pipeline selection.PipelineMode
	// MemoryBudget bounds each party's prefetched dealer material
	// (selection.Params.MemoryBudget): the workload's when 0 (and
	// selection.DefaultMemoryBudget when that is 0 too), negative for no
	// prefetch.
	MemoryBudget int64

	// OwnProcess reports that the party runs alone in its OS process (the
	// children of mpcbench select --processes): its phases then record
	// the process's CPU seconds (Span.CPUSeconds), each party's own, which
	// a projection charges to the party's own host.
	OwnProcess bool

	// Stall is the watchdog of an in-process run (RunSelect): a run in
	// which no batch finishes and no byte crosses the parties' link for
	// this long is stuck, and is cancelled with an error wrapping
	// ErrStuck that says where each party stands and what its goroutines
	// wait on (logged in full to Logger). DefaultStall when 0; negative:
	// no watchdog.
	Stall time.Duration

	// resume (tests) lets a run resume from StateDir's checkpoints.
	resume bool
	// beforeBatch (tests), if set, is called by each party before it
	// meters a batch: a test delays one party's batches with it, or
	// plants a stall.
	beforeBatch func(ctx context.Context, party int)
	// progress is what RunSelect's watchdog watches (nil: none).
	progress *progress
}

// stall returns the watchdog's threshold (0: none).
func (c SelectConfig) stall() time.Duration {
	switch {
	case c.Stall < 0:
		return 0
	case c.Stall == 0:
		return DefaultStall
	}
	return c.Stall
}

// PipelineNames are the values of SelectConfig.Pipeline.
var PipelineNames = []string{string(selection.PipelineOn), string(selection.PipelineOff)}

// pipeline returns c.Pipeline with the default applied.
func (c SelectConfig) pipeline() selection.PipelineMode {
	if c.Pipeline == "" {
		return selection.PipelineOn
	}
	return c.Pipeline
}

// paramsBudget returns the selection.Params.MemoryBudget of a run: the
// configuration's, else the workload's (0: selection's default).
func (c SelectConfig) paramsBudget() int64 {
	if c.MemoryBudget != 0 {
		return c.MemoryBudget
	}
	return c.Workload.MemoryBudget
}

// memoryBudget returns the prefetch budget each party runs with (0 with
// the pipeline off or a negative budget: nothing is prefetched).
func (c SelectConfig) memoryBudget() int64 {
	b := c.paramsBudget()
	switch {
	case c.pipeline() == selection.PipelineOff || b < 0:
		return 0
	case b == 0:
		return selection.DefaultMemoryBudget
	}
	return b
}

// checkPipeline checks c.Pipeline.
func (c SelectConfig) checkPipeline() error {
	switch c.Pipeline {
	case "", selection.PipelineOn, selection.PipelineOff:
		return nil
	}
	return fmt.Errorf("bench: select: pipeline %q: want one of %v", c.Pipeline, PipelineNames)
}

// Check checks the configuration's workload, provider, pipeline mode and
// dealer links.
func (c SelectConfig) Check() error {
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	if err := c.checkProvider(); err != nil {
		return err
	}
	if c.DealerLinks != [2]*transport.Profile{} {
		switch {
		case c.source().DealerFree:
			return fmt.Errorf("bench: select: the provider %q has no dealer to put behind a link", c.Provider)
		case c.Link == nil:
			return fmt.Errorf("bench: select: dealer links need a link between the parties")
		}
	}
	return c.checkPipeline()
}

// dealerSpecs describes c's dealer links (zero when there are none).
func (c SelectConfig) dealerSpecs() [2]LinkSpec {
	if c.DealerLinks == [2]*transport.Profile{} {
		return [2]LinkSpec{}
	}
	return [2]LinkSpec{SpecOf(c.DealerLinks[0]), SpecOf(c.DealerLinks[1])}
}

// source returns the source c.Provider names (source.Default when empty;
// the zero Source, which Check refuses, when no source has the name).
func (c SelectConfig) source() source.Source {
	name := c.Provider
	if name == "" {
		name = source.Default
	}
	s, _ := source.ByName(name)
	return s
}

// checkProvider checks c.Provider.
func (c SelectConfig) checkProvider() error {
	if c.source().Open == nil {
		return fmt.Errorf("bench: select: provider %q: want one of %v", c.Provider, source.Names())
	}
	return nil
}

// provider returns party p's provider of a run from the source
// c.Provider names: the run's dealer, or a dealer-free provider on the
// parties' connection.
func (c SelectConfig) provider(ctx context.Context, p *twoparty.Party) (beaver.Provider, error) {
	op, err := c.source().Open(ctx, source.InProcess(p.ID, p.Conn, p.Provider))
	if err != nil {
		return nil, fmt.Errorf("bench: select: %w", err)
	}
	return op.Provider, nil
}

func (c SelectConfig) samples() int {
	if c.Samples > 0 {
		return c.Samples
	}
	return c.Workload.Samples
}

// Span is the cost of one part of a phase as one party saw it.
type Span struct {
	// Stream holds the party's online traffic and rounds of the part (for
	// the forward: summed over the batches; Rounds is the critical path:
	// the busiest batch lane's rounds with the pipeline on, the sum over
	// the lanes with it off).
	Stream transport.Stats `json:"stream"`
	// Dealer is the party's dealer traffic during the part.
	Dealer beaver.DealerStats `json:"dealer"`
	// Seconds is the part's wall time.
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the CPU time (user + system) of the party's process
	// during the part, recorded only when the party runs alone in its
	// process (SelectConfig.OwnProcess): the forward's from the weight
	// sharing's end, where its provider starts making the batches'
	// material, to the last batch's end.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// HEProducts and HEPasses are the data owner's HE weight products
	// during the part and the passes over encrypted weights they took
	// (ot.HEStats; zero without a lattice provider).
	HEProducts int64 `json:"he_products,omitempty"`
	HEPasses   int64 `json:"he_passes,omitempty"`
}

// PartyPhase is one party's record of one phase of a sample run.
type PartyPhase struct {
	// Stats are selection's statistics of the phase.
	Stats selection.PhaseStats `json:"stats"`
	// Prepare is the weight sharing; Forward the batches (Seconds from the
	// first batch's start to the last one's end, Dealer from the weight
	// sharing's end, where the prefetching of the batches' material
	// starts, to the last batch's end); Batches and Candidates
	// count them; RoundsPerBatch is the largest round count of one batch.
	Prepare        Span  `json:"prepare"`
	Forward        Span  `json:"forward"`
	Batches        int   `json:"batches"`
	Candidates     int   `json:"candidates"`
	RoundsPerBatch int64 `json:"rounds_per_batch"`
	// Steady is the forward's rate after the first wave of batches.
	Steady Steady `json:"steady"`
}

// Steady is a phase's forward rate in steady state: Candidates were
// computed in Seconds once the first wave of batches (one per lane) had
// ended, measured from the end of the first wave's last batch to the end of
// the phase's last batch. Zero when the sample's phase ran a single wave.
type Steady struct {
	Seconds    float64 `json:"seconds"`
	Candidates int     `json:"candidates"`
}

// PerCandidate returns the steady seconds per candidate, 0 if unmeasured.
func (s Steady) PerCandidate() float64 {
	if s.Candidates <= 0 || s.Seconds <= 0 {
		return 0
	}
	return s.Seconds / float64(s.Candidates)
}

// PartyRun is one party's record of a sample run.
type PartyRun struct {
	Party  int          `json:"party"`
	Phases []PartyPhase `json:"phases"`
	// Seconds is the wall time of the party's selection.Run.
	Seconds float64 `json:"seconds"`
	// Selected is selection's result: the pool indices chosen beyond the
	// bootstrap sample, ascending.
	Selected []int `json:"selected,omitempty"`
	// Bootstrap is the bootstrap's size; OpeningBytes the size of its
	// openings message (selection.Result.OpeningBytes).
	Bootstrap    int   `json:"bootstrap,omitempty"`
	OpeningBytes int64 `json:"opening_bytes,omitempty"`
}

// RunSelectParty runs party's side of a sample run of cfg over conn with
// prov (for parties in separate processes; RunSelect runs both in one).
// onPhase, if set, is called when a phase starts (its weights are shared).
func RunSelectParty(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider, cfg SelectConfig, onPhase func(phase int)) (*PartyRun, error) {
	w := cfg.Workload
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	params, err := w.Params(cfg.samples())
	if err != nil {
		return nil, err
	}
	params.Pipeline, params.MemoryBudget = cfg.pipeline(), cfg.paramsBudget()
	dir := cfg.StateDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "mpcbench-select-"); err != nil {
			return nil, fmt.Errorf("bench: select: %w", err)
		}
		defer os.RemoveAll(dir)
	} else if _, err := os.Stat(selection.StateFile(dir, party)); err == nil && !cfg.resume {
		return nil, fmt.Errorf("bench: select: %s holds a checkpoint; a sample run starts fresh", dir)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ev := &synthEvaluator{w: w, party: party, seed: cfg.Seed, prov: prov, onPhase: onPhase, beforeBatch: cfg.beforeBatch, ownProcess: cfg.OwnProcess, progress: cfg.progress}
	hash := "bench/" + w.Name
	start := time.Now()
	var res *selection.Result
	switch party {
	case 0:
		mo := &selection.ModelOwner{Params: params, Evaluator: ev, EmbeddingHash: hash, StateDir: dir, Logger: log}
		res, err = mo.Run(ctx, conn, prov)
	case 1:
		// The data owner commits to synthetic candidates of the
		// workload's size, so that the run counts the root in its hello
		// and the bootstrap's openings.
		do := &selection.DataOwner{Params: params, Evaluator: ev, EmbeddingHash: hash, StateDir: dir, Logger: log,
			Items: synthItems{n: params.PoolSize, size: w.ItemBytes()}}
		res, err = do.Run(ctx, conn, prov)
	default:
		return nil, fmt.Errorf("bench: select: party %d", party)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: select %s party %d: %w", w.Name, party, err)
	}
	out := &PartyRun{Party: party, Seconds: time.Since(start).Seconds(), Selected: res.Selected, Bootstrap: len(res.Bootstrap), OpeningBytes: res.OpeningBytes}
	if len(res.Phases) != len(w.Phases) {
		return nil, fmt.Errorf("bench: select: %d phase results for %d phases", len(res.Phases), len(w.Phases))
	}
	for i, ps := range res.Phases {
		pp := PartyPhase{Stats: ps}
		if m := ev.meter(i); m != nil {
			pp.Prepare, pp.Forward = m.prepare, m.forward
			pp.Forward.Seconds = m.last.Sub(m.first).Seconds()
			pp.Forward.Dealer = subDealer(m.dealerEnd, m.dealerStart)
			pp.Forward.CPUSeconds = (m.cpuEnd - m.cpuStart).Seconds()
			pp.Forward.HEProducts, pp.Forward.HEPasses = m.heEnd.Products-m.heStart.Products, m.heEnd.Passes-m.heStart.Passes
			pp.Forward.Stream.Rounds = criticalRounds(m.slotRounds, cfg.pipeline())
			pp.Batches, pp.Candidates, pp.RoundsPerBatch = m.batches, m.candidates, m.maxBatchRounds
			pp.Steady = m.steady(LanesInFlight(w, i, string(cfg.pipeline())))
		}
		out.Phases = append(out.Phases, pp)
	}
	return out, nil
}

// criticalRounds is the forward's critical path from each lane's rounds:
// with the pipeline on the lanes run at once, so the busiest lane's; with
// it off one batch runs at a time, so their sum.
func criticalRounds(lanes map[*protocol.Session]int64, mode selection.PipelineMode) int64 {
	var out int64
	for _, r := range lanes {
		if mode == selection.PipelineOff {
			out += r
		} else {
			out = max(out, r)
		}
	}
	return out
}

// dealerTotal is a span's dealer traffic both ways.
func dealerTotal(d beaver.DealerStats) int64 { return d.BytesRecv + d.BytesSent }

func subDealer(a, b beaver.DealerStats) beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: a.BytesRecv - b.BytesRecv, BytesSent: a.BytesSent - b.BytesSent, Items: a.Items - b.Items}
}

func addDealer(a, b beaver.DealerStats) beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: a.BytesRecv + b.BytesRecv, BytesSent: a.BytesSent + b.BytesSent, Items: a.Items + b.Items}
}

// synthEvaluator is a selection.Evaluator of random networks of a
// workload's shapes (model owner) and random candidates (data owner) that
// meters the weight sharing and every batch.
type synthEvaluator struct {
	w       Workload
	party   int
	seed    uint64
	prov    beaver.Provider
	onPhase func(int)
	// beforeBatch is SelectConfig.beforeBatch.
	beforeBatch func(ctx context.Context, party int)
	// progress, if set, counts the batches done for a watchdog.
	progress *progress
	// ownProcess is SelectConfig.OwnProcess: the meters read the
	// process's CPU time.
	ownProcess bool

	mu     sync.Mutex
	meters map[int]*phaseMeter
}

// phaseMeter accumulates one phase's costs.
type phaseMeter struct {
	mu               sync.Mutex
	prepare, forward Span
	first, last      time.Time
	// dealerStart is the provider's count when the weight sharing ended,
	// dealerEnd when the phase's last batch ended: no item is in flight
	// at either point, so both parties count the same items.
	dealerStart, dealerEnd beaver.DealerStats
	// cpuStart and cpuEnd are the process's CPU time at the same points
	// (zero unless the party runs alone in its process).
	cpuStart, cpuEnd    time.Duration
	heStart, heEnd      ot.HEStats
	slotRounds          map[*protocol.Session]int64
	batches, candidates int
	maxBatchRounds      int64
	ends                []batchEnd
}

// batchEnd is when a batch of n candidates finished.
type batchEnd struct {
	at time.Time
	n  int
}

// steady measures the forward's rate once the first wave is done: with
// lanes batches in flight, the batches that ended after the lanes-th end
// and the time from that end to the last. A phase's first wave pays
// start-up costs a full run pays once (the heap growing to its working set,
// the dealer filling the prefetch queue, first use of every weight), so
// the time per candidate of the whole sample would charge them to every
// candidate of the projection. Zero when every batch ran in the first
// wave.
func (m *phaseMeter) steady(lanes int) Steady {
	ends := slices.SortedFunc(slices.Values(m.ends), func(a, b batchEnd) int { return a.at.Compare(b.at) })
	lanes = max(lanes, 1)
	if len(ends) <= lanes {
		return Steady{}
	}
	st := Steady{Seconds: ends[len(ends)-1].at.Sub(ends[lanes-1].at).Seconds()}
	for _, e := range ends[lanes:] {
		st.Candidates += e.n
	}
	return st
}

// cpu returns the process's CPU time if the party runs alone in its
// process, else 0.
func (e *synthEvaluator) cpu() time.Duration {
	if !e.ownProcess {
		return 0
	}
	return processCPU()
}

func (e *synthEvaluator) meter(phase int) *phaseMeter {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.meters[phase]
}

// Arch implements selection.Evaluator: the workload's architecture (the
// sequence length is the workload's; the data owner announces none).
func (e *synthEvaluator) Arch(phase, _ int) (secure.Arch, error) {
	return e.w.Arch(phase)
}

// Prepare implements selection.Evaluator: party 0 shares a random network
// of the phase's shape.
func (e *synthEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, weightBase uint64) (selection.Forwarder, error) {
	if e.onPhase != nil {
		e.onPhase(phase)
	}
	e.progress.setPhase(e.party, phase)
	want, err := e.w.Arch(phase)
	if err != nil {
		return nil, err
	}
	if arch != want {
		return nil, fmt.Errorf("bench: phase %d architecture %+v, workload's %+v", phase+1, arch, want)
	}
	var net *secure.Net
	if e.party == 0 {
		if net, err = secure.RandomNet(arch, e.seed+uint64(phase)+1); err != nil {
			return nil, err
		}
	}
	if s.Rehearsal() {
		// The model owner learning the phase's dealer work
		// (selection.DealerBudget): nothing to meter.
		p, err := secure.Prepare(ctx, s, arch, net, secure.Options{WeightBase: weightBase})
		if err != nil {
			return nil, err
		}
		return &synthForwarder{e: e, p: p, m: &phaseMeter{slotRounds: map[*protocol.Session]int64{}}, phase: phase}, nil
	}
	m := &phaseMeter{slotRounds: map[*protocol.Session]int64{}}
	start, meter, cpu0 := time.Now(), NewMeter(s), e.cpu()
	p, err := secure.Prepare(ctx, s, arch, net, secure.Options{WeightBase: weightBase})
	if err != nil {
		return nil, err
	}
	c := meter.Since()
	m.prepare = Span{Stream: c.Stream, Dealer: c.Dealer, Seconds: time.Since(start).Seconds()}
	// The forward's provider traffic counts from here, not from the first
	// batch's start: the lanes' producers fetch the first batches'
	// material before the batches start (selection/lanes), each party at
	// its own pace, so a count from each party's first batch would leave
	// out a part of the items one party sent and the other received
	// (TestSelectTinyDealerFree: every byte counted once each way).
	m.dealerStart, m.cpuStart, m.heStart = e.prov.Stats(), e.cpu(), heStats(e.prov)
	m.prepare.CPUSeconds = (m.cpuStart - cpu0).Seconds()
	e.mu.Lock()
	if e.meters == nil {
		e.meters = map[int]*phaseMeter{}
	}
	e.meters[phase] = m
	e.mu.Unlock()
	return &synthForwarder{e: e, p: p, m: m, phase: phase}, nil
}

// synthForwarder runs and meters the batches of one phase.
type synthForwarder struct {
	e     *synthEvaluator
	p     *secure.Prepared
	m     *phaseMeter
	phase int
}

// Forward implements selection.Forwarder: party 1 draws random embeddings
// (and padding) for the candidates idx.
func (f *synthForwarder) Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
	var in *secure.Batch
	if f.e.party == 1 && len(idx) > 0 {
		cfg := f.e.w.Forward(f.phase, len(idx))
		cfg.Seed = f.e.seed ^ uint64(idx[0])<<20 ^ uint64(f.phase)
		xs, mask := forwardInputs(f.p.Arch(), cfg)
		in = &secure.Batch{X: xs, Mask: mask}
	}
	if s.Rehearsal() {
		// The scheduler learning the batch's dealer requests: nothing to
		// meter.
		return f.p.Forward(ctx, s, len(idx), in)
	}
	if f.e.beforeBatch != nil {
		f.e.beforeBatch(ctx, f.e.party)
	}
	m := f.m
	m.mu.Lock()
	if m.first.IsZero() {
		m.first = time.Now()
	}
	m.mu.Unlock()
	s0 := s.Stream().Stats()
	t, err := f.p.Forward(ctx, s, len(idx), in)
	if err != nil {
		return nil, err
	}
	c := s.Stream().Stats().Sub(s0)
	f.e.progress.batchDone(f.e.party)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.last, m.dealerEnd, m.cpuEnd, m.heEnd = time.Now(), f.e.prov.Stats(), f.e.cpu(), heStats(f.e.prov)
	m.forward.Stream = m.forward.Stream.Add(c)
	m.slotRounds[s] += c.Rounds
	m.batches++
	m.candidates += len(idx)
	m.ends = append(m.ends, batchEnd{at: m.last, n: len(idx)})
	m.maxBatchRounds = max(m.maxBatchRounds, c.Rounds)
	return t, nil
}

// SampleRun is the outcome of a sample run (both parties).
type SampleRun struct {
	Workload string `json:"workload"`
	// Link names the emulated link ("none" without one).
	Link string `json:"link"`
	// DealerLinks are the dealer's links to party 0 and party 1
	// (SelectConfig.DealerLinks; zero: the dealer in process, no link).
	DealerLinks [2]LinkSpec `json:"dealer_links,omitzero"`
	Samples     int         `json:"samples"`
	// CPU names the processor the run ran on (Machine.CPU).
	CPU string `json:"cpu,omitempty"`
	// Processes reports whether the dealer and the parties ran as separate
	// OS processes over TLS (else in one process over an in-memory pipe).
	Processes bool `json:"processes"`
	// Provider is SelectConfig.Provider ("ot", "he": the correlations were
	// made over the parties' own link, so DealerBytes crossed it too).
	Provider string `json:"provider,omitempty"`
	// Pipeline is the batch scheduler's mode ("on" or "off"; "" in runs
	// recorded before the pipelined scheduler, whose slots ran at once
	// like the lanes with it on). Workers (lanes) and BatchSize are the
	// batch loop's; MemoryBudget is each party's prefetch budget in bytes
	// (0: nothing prefetched).
	Pipeline     string `json:"pipeline,omitempty"`
	Workers      int    `json:"workers,omitempty"`
	BatchSize    int    `json:"batch_size,omitempty"`
	MemoryBudget int64  `json:"memory_budget,omitempty"`
	// Seconds is the wall time of the run (the slower party's selection.Run).
	Seconds float64 `json:"seconds"`
	// CPUSeconds is the CPU time (user + system) of the run: this process's
	// during an in-process run (both parties and the dealer), the three
	// processes' in all with separate processes; with Cores and Seconds it
	// tells what share of the machine the run got. LoadBefore and
	// LoadAfter are the load averages (/proc/loadavg) around the run.
	CPUSeconds float64    `json:"cpu_seconds,omitempty"`
	Cores      int        `json:"cores"`
	LoadBefore string     `json:"load_before,omitempty"`
	LoadAfter  string     `json:"load_after,omitempty"`
	Phases     []PhaseRun `json:"phases"`
	// Selected holds the selected pool indices (both parties agree on
	// them), ascending.
	Selected []int `json:"selected,omitempty"`
	// PeakHeapAll is the peak Go heap of the whole in-process run (both
	// parties and the dealer); per phase in PhaseRun.
	PeakHeapAll uint64 `json:"peak_heap_all,omitempty"`
	// PeakHeapDealer is the dealer process's peak Go heap and RSS* the
	// processes' peak resident set sizes (processes only).
	PeakHeapDealer uint64 `json:"peak_heap_dealer,omitempty"`
	RSSP0          uint64 `json:"rss_p0,omitempty"`
	RSSP1          uint64 `json:"rss_p1,omitempty"`
	RSSDealer      uint64 `json:"rss_dealer,omitempty"`
	// Commitment is what the data owner's commitment to its pool added
	// (the root in its hello, the bootstrap's openings); nil in runs
	// recorded before it.
	Commitment *CommitmentCost `json:"commitment,omitempty"`
	// Dilation, above 1, says that the run emulated two hosts on this
	// one: each party's process ran on its own 1/Dilation of the cores,
	// over the link with its latency multiplied and its bandwidth divided
	// by Dilation, and every wall time above has been divided by it since
	// (Dilate), so that they are those of two hosts of Cores cores each
	// over the link itself. CPU seconds are as measured.
	Dilation float64 `json:"dilation,omitempty"`
}

// Dilate turns a run made at a k-fold slower clock (each party's process
// on 1/k of the cores, the link k times slower: latency ×k, bandwidth
// ÷k) into the run of two hosts with all the cores each: it divides every
// wall time of the run, its phases, their parts and their steady rates by
// k and records k in Dilation. It assumes that a party's work spreads over
// its cores, as the compute bound does. It fails for k ≤ 1 or a run
// already dilated.
func (r *SampleRun) Dilate(k float64) error {
	if !(k > 1) || r.Dilation != 0 {
		return fmt.Errorf("bench: dilate a run by %g (dilated %g already)", k, r.Dilation)
	}
	r.Dilation = k
	r.Seconds /= k
	for i := range r.Phases {
		ph := &r.Phases[i]
		ph.Seconds /= k
		ph.Steady.Seconds /= k
		for _, part := range []*Part{&ph.Prepare, &ph.Forward, &ph.Select} {
			part.Seconds /= k
		}
	}
	return nil
}

// PerParty reports whether every phase of the run holds each party's own
// CPU time of its weight sharing and forward (each party ran alone in its
// process: mpcbench select --processes).
func (r *SampleRun) PerParty() bool {
	for _, ph := range r.Phases {
		if !ph.Prepare.PerParty() || !ph.Forward.PerParty() {
			return false
		}
	}
	return len(r.Phases) > 0
}

// Part is the cost of one part of a phase (both parties).
type Part struct {
	// Rounds on the critical path.
	Rounds int64 `json:"rounds"`
	// BytesP0 and BytesP1 are the bytes each party sent (P0→P1, P1→P0).
	BytesP0 int64 `json:"bytes_p0"`
	BytesP1 int64 `json:"bytes_p1"`
	// DealerBytes is the dealer traffic of both parties.
	DealerBytes int64 `json:"dealer_bytes"`
	// DealerDown[p] is what party p received from the dealer and
	// DealerUp[p] what it sent it (the directions of the dealer's links;
	// DealerBytes is their sum). Zero in runs recorded before they were
	// counted apart: then all of DealerBytes counts as dealer → party 1,
	// which received every dealer word of the built-in kinds before their
	// words were split between the parties (beaver.Correlation.DealtTo). A phase's
	// QuickSelect part (Select) counts each party's remainder as received.
	DealerDown [2]int64 `json:"dealer_down,omitzero"`
	DealerUp   [2]int64 `json:"dealer_up,omitzero"`
	Seconds    float64  `json:"seconds"`
	// CPUSeconds[p] is party p's CPU time during the part, measured when
	// each party ran alone in its process (Span.CPUSeconds; zero
	// otherwise).
	CPUSeconds [2]float64 `json:"cpu_seconds,omitzero"`
	// HEProducts and HEPasses are the data owner's HE weight products and
	// its passes over encrypted weights (Span.HEProducts; only party 1
	// computes them).
	HEProducts int64 `json:"he_products,omitempty"`
	HEPasses   int64 `json:"he_passes,omitempty"`
}

// PerParty reports whether the part holds each party's own CPU time.
func (p Part) PerParty() bool { return p.CPUSeconds[0] > 0 && p.CPUSeconds[1] > 0 }

// dealerDirections returns the part's dealer bytes each way per party.
func (p Part) dealerDirections() (down, up [2]int64) {
	if p.DealerDown == [2]int64{} && p.DealerUp == [2]int64{} {
		return [2]int64{0, p.DealerBytes}, [2]int64{}
	}
	return p.DealerDown, p.DealerUp
}

// PhaseRun is one phase of a sample run.
type PhaseRun struct {
	Phase int    `json:"phase"`
	Proxy string `json:"proxy"`
	// Candidates entered the phase, Kept survived it, in Batches batches.
	Candidates int `json:"candidates"`
	Kept       int `json:"kept"`
	Batches    int `json:"batches"`
	// Rounds is the phase's critical path: weight sharing, the batch slot
	// with the most rounds, QuickSelect.
	Rounds int64 `json:"rounds"`
	// BytesP0 and BytesP1 are the bytes each party sent in the phase
	// (P0→P1 and P1→P0: each direction).
	BytesP0 int64 `json:"bytes_p0"`
	BytesP1 int64 `json:"bytes_p1"`
	// DealerBytes is the dealer traffic of both parties.
	DealerBytes int64 `json:"dealer_bytes"`
	// Seconds is the phase's wall time (the slower party's).
	Seconds float64 `json:"seconds"`
	// PeakHeapAll is the peak Go heap during the phase of the whole
	// in-process run (both parties and the dealer in one process).
	PeakHeapAll uint64 `json:"peak_heap_all,omitempty"`
	// PeakHeapP0 and PeakHeapP1 are each party's process's peak Go heap
	// during the phase (processes only).
	PeakHeapP0 uint64 `json:"peak_heap_p0,omitempty"`
	PeakHeapP1 uint64 `json:"peak_heap_p1,omitempty"`
	// Comparisons and Steps count QuickSelect's work.
	Comparisons int64 `json:"comparisons"`
	Steps       int   `json:"steps"`
	// PeakInFlight is the most batches in flight at once (the larger of
	// the parties'); Prefetched the batches whose dealer material party 0
	// fetched ahead of use; PeakPrefetchP0 and PeakPrefetchP1 the most
	// bytes of prefetched material each party held at once (within
	// SampleRun.MemoryBudget), BatchMaterialBytes one full batch's.
	PeakInFlight       int   `json:"peak_in_flight,omitempty"`
	Prefetched         int   `json:"prefetched,omitempty"`
	PeakPrefetchP0     int64 `json:"peak_prefetch_p0,omitempty"`
	PeakPrefetchP1     int64 `json:"peak_prefetch_p1,omitempty"`
	BatchMaterialBytes int64 `json:"batch_material_bytes,omitempty"`
	// RoundsPerBatch is the rounds of one batch's forward.
	RoundsPerBatch int64 `json:"rounds_per_batch"`
	// Steady is the forward's steady-state rate (the party with the
	// larger seconds per candidate); zero in runs recorded before it was
	// measured and in phases of a single wave.
	Steady Steady `json:"steady,omitzero"`
	// Prepare (weight sharing), Forward (the batches) and Select
	// (QuickSelect: the phase's remainder) split the phase.
	Prepare Part `json:"prepare"`
	Forward Part `json:"forward"`
	Select  Part `json:"select"`
}

// NewSampleRun assembles a sample run from both parties' records.
func NewSampleRun(cfg SelectConfig, parties [2]*PartyRun) (*SampleRun, error) {
	w := cfg.Workload
	p0, p1 := parties[0], parties[1]
	if p0 == nil || p1 == nil || len(p0.Phases) != len(w.Phases) || len(p1.Phases) != len(w.Phases) {
		return nil, fmt.Errorf("bench: select: incomplete party records")
	}
	r := &SampleRun{Workload: w.Name, Link: "none", Samples: cfg.samples(), Provider: cfg.Provider, Seconds: max(p0.Seconds, p1.Seconds), Cores: runtime.NumCPU(),
		Pipeline: string(cfg.pipeline()), Workers: w.Workers, BatchSize: w.BatchSize, MemoryBudget: cfg.memoryBudget(),
		DealerLinks: cfg.dealerSpecs(), CPU: CurrentMachine().CPU}
	if cfg.Link != nil {
		r.Link = cfg.Link.Name
	}
	if !slices.Equal(p0.Selected, p1.Selected) {
		return nil, fmt.Errorf("bench: select: the parties selected different indices (%d and %d)", len(p0.Selected), len(p1.Selected))
	}
	r.Selected = p0.Selected
	if p0.OpeningBytes != p1.OpeningBytes {
		return nil, fmt.Errorf("bench: select: the parties counted openings of %d and %d bytes", p0.OpeningBytes, p1.OpeningBytes)
	}
	cc := commitmentCost(w, p1.Bootstrap, p1.OpeningBytes)
	r.Commitment = &cc
	for i := range w.Phases {
		a, b := p0.Phases[i], p1.Phases[i]
		if a.Stats.In != b.Stats.In || a.Stats.Out != b.Stats.Out || a.Stats.Comparisons != b.Stats.Comparisons {
			return nil, fmt.Errorf("bench: select: phase %d: parties disagree (%+v vs %+v)", i+1, a.Stats, b.Stats)
		}
		ph := PhaseRun{Phase: i, Proxy: w.Phases[i].String(), Candidates: a.Stats.In, Kept: a.Stats.Out, Batches: a.Stats.Batches,
			Rounds:  a.Stats.ForwardRounds + a.Stats.SelectRounds,
			BytesP0: a.Stats.BytesSent, BytesP1: b.Stats.BytesSent, DealerBytes: a.Stats.RandomnessBytes + b.Stats.RandomnessBytes,
			Seconds: max(a.Stats.Seconds, b.Stats.Seconds), Comparisons: a.Stats.Comparisons, Steps: a.Stats.Steps,
			RoundsPerBatch: max(a.RoundsPerBatch, b.RoundsPerBatch),
			PeakInFlight:   max(a.Stats.PeakInFlight, b.Stats.PeakInFlight), Prefetched: a.Stats.Prefetched,
			PeakPrefetchP0: a.Stats.PeakPrefetchBytes, PeakPrefetchP1: b.Stats.PeakPrefetchBytes,
			BatchMaterialBytes: max(a.Stats.BatchMaterialBytes, b.Stats.BatchMaterialBytes)}
		if w.Exact {
			ph.Proxy = fmt.Sprintf("exact %d-layer %s", w.Phases[i].Layers, w.Shape)
		}
		part := func(x, y Span) Part {
			return Part{Rounds: max(x.Stream.Rounds, y.Stream.Rounds), BytesP0: x.Stream.BytesSent, BytesP1: y.Stream.BytesSent,
				DealerBytes: x.Dealer.BytesRecv + x.Dealer.BytesSent + y.Dealer.BytesRecv + y.Dealer.BytesSent, Seconds: max(x.Seconds, y.Seconds),
				DealerDown: [2]int64{x.Dealer.BytesRecv, y.Dealer.BytesRecv}, DealerUp: [2]int64{x.Dealer.BytesSent, y.Dealer.BytesSent},
				CPUSeconds: [2]float64{x.CPUSeconds, y.CPUSeconds},
				HEProducts: x.HEProducts + y.HEProducts, HEPasses: x.HEPasses + y.HEPasses}
		}
		ph.Prepare, ph.Forward = part(a.Prepare, b.Prepare), part(a.Forward, b.Forward)
		ph.Steady = a.Steady
		if b.Steady.PerCandidate() > a.Steady.PerCandidate() {
			ph.Steady = b.Steady
		}
		rest := func(p PartyPhase) float64 { return p.Stats.Seconds - p.Prepare.Seconds - p.Forward.Seconds }
		ph.Select = Part{Rounds: a.Stats.SelectRounds,
			BytesP0:     max(0, ph.BytesP0-ph.Prepare.BytesP0-ph.Forward.BytesP0),
			BytesP1:     max(0, ph.BytesP1-ph.Prepare.BytesP1-ph.Forward.BytesP1),
			DealerBytes: max(0, ph.DealerBytes-ph.Prepare.DealerBytes-ph.Forward.DealerBytes),
			Seconds:     max(0, rest(a), rest(b))}
		for p, pp := range []PartyPhase{a, b} {
			ph.Select.DealerDown[p] = max(0, pp.Stats.RandomnessBytes-dealerTotal(pp.Prepare.Dealer)-dealerTotal(pp.Forward.Dealer))
		}
		r.Phases = append(r.Phases, ph)
	}
	return r, nil
}

// RunSelect runs a sample run with both parties in this process
// (transport.Pipe, optionally link-emulated, and an in-process dealer),
// sampling the Go heap per phase.
func RunSelect(ctx context.Context, cfg SelectConfig) (*SampleRun, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	dir := cfg.StateDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "mpcbench-select-"); err != nil {
			return nil, fmt.Errorf("bench: select: %w", err)
		}
		defer os.RemoveAll(dir)
	}
	pc := cfg
	pc.StateDir = dir // both parties' files are per party (state-p<p>.json)
	pc.progress = newProgress()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if stall := cfg.stall(); stall > 0 {
		go pc.progress.watch(ctx, cancel, stall, min(max(stall/20, 10*time.Millisecond), 5*time.Second), cfg.Logger)
	}
	load, cpu0 := LoadAverage(), processCPU()
	sampler := StartHeapSampler(0)
	r, err := twoparty.Run(ctx, twoparty.Config{Transport: transport.Options{Link: cfg.Link}, DealerLinks: cfg.DealerLinks},
		func(ctx context.Context, p *twoparty.Party) (*PartyRun, error) {
			pc.progress.conns[p.ID].Store(p.Conn)
			prov, err := pc.provider(ctx, p)
			if err != nil {
				return nil, err
			}
			return RunSelectParty(ctx, p.ID, p.Conn, prov, pc, sampler.SetPhase)
		})
	peaks := sampler.Stop()
	if cause := context.Cause(ctx); errors.Is(cause, ErrStuck) {
		return nil, fmt.Errorf("bench: select: %w", cause)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: select: %w", err)
	}
	run, err := NewSampleRun(cfg, r.Out)
	if err != nil {
		return nil, err
	}
	for i := range run.Phases {
		if i < len(peaks) {
			run.Phases[i].PeakHeapAll = peaks[i]
		}
	}
	run.PeakHeapAll = Peak(peaks)
	run.CPUSeconds = (processCPU() - cpu0).Seconds()
	run.LoadBefore, run.LoadAfter = load, LoadAverage()
	return run, nil
}

// heStats returns the lattice provider's counters behind prov, or zero
// counters for any other provider.
func heStats(prov beaver.Provider) ot.HEStats {
	if o, ok := beaver.As[*ot.Provider](prov); ok {
		if l, ok := o.WeightMasks().(*ot.Lattice); ok {
			return l.Stats()
		}
	}
	return ot.HEStats{}
}

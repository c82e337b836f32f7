package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// SelectReport is the outcome of `mpcbench select`: the sample runs, the
// QuickSelect measurements at the full pool's sizes and the projection.
type SelectReport struct {
	Workload Workload `json:"workload"`
	// Link is the emulated link's profile (name "none" without one);
	// LatencySeconds is its one-way latency.
	Link             string  `json:"link"`
	BandwidthBytesPS int64   `json:"bandwidth_bytes_per_s"`
	LatencySeconds   float64 `json:"latency_seconds"`
	// Sample is the sample run over the link; Compute the same run without
	// a link (nil when there is no link: Sample is then that run).
	Sample  *SampleRun `json:"sample"`
	Compute *SampleRun `json:"compute,omitempty"`
	// TopK holds QuickSelect measured at each phase's full-pool size, in
	// phase order, and possibly at other pools' sizes after them
	// (MeasureTopKAt).
	TopK []TopKCost `json:"topk"`
	// MeasuredSeconds is the sample run's wall time over the link.
	MeasuredSeconds float64 `json:"measured_seconds"`
	// Projection is the full-pool projection.
	Projection *Projection `json:"projection"`
	// Processes and CrossCheck are set by a --processes run.
	Processes  *SampleRun  `json:"processes,omitempty"`
	CrossCheck *CrossCheck `json:"cross_check,omitempty"`
	// Off is the baseline of a pipelined report: the same sample run over
	// the link with the pipeline off (one batch at a time), and
	// OffProjection its projection (the compute bound is the shared run
	// without a link). Set by RunOff or SetOff.
	Off           *SampleRun  `json:"off,omitempty"`
	OffProjection *Projection `json:"off_projection,omitempty"`
	// Deployments are the same sample over the link with the dealer
	// placed elsewhere than in Sample (Sample.DealerLinks), e.g. beside
	// the data owner on a LAN, each with its projection: what the
	// dealer's placement costs. Set by RunDeployment or AddDeployment.
	Deployments []Deployment `json:"deployments,omitempty"`
	// Sharded is the projection on several worker pairs per party
	// (`select --shards K`; ProjectShards), when asked for.
	Sharded *ShardedProjection `json:"sharded,omitempty"`
}

// Deployment is a sample run over the report's link with the dealer
// placed as its DealerLinks say, and its projection (the compute bound is
// the report's shared run without a link).
type Deployment struct {
	// Placement describes where the dealer sat (DealerPlacement).
	Placement  string      `json:"placement"`
	Sample     *SampleRun  `json:"sample"`
	Projection *Projection `json:"projection"`
}

// DealerBesideP1 returns the dealer links of a dealer on a LAN beside the
// data owner (party 1, which receives about half of the dealer's bytes:
// the words of the kinds dealt to it), reaching the model owner over the
// parties' link.
func DealerBesideP1(link *transport.Profile) [2]*transport.Profile {
	lan, err := transport.ProfileByName("lan")
	if err != nil {
		panic(err) // a built-in profile
	}
	return [2]*transport.Profile{link, &lan}
}

// RunDeployment runs cfg's sample over its link with the dealer behind
// links dealer (cfg.StateDir, if set, gets a subdirectory of its own) and
// adds it to the report's deployments.
func (r *SelectReport) RunDeployment(ctx context.Context, cfg SelectConfig, dealer [2]*transport.Profile) error {
	if cfg.Link == nil {
		return fmt.Errorf("bench: select: a dealer deployment needs a link")
	}
	cfg.DealerLinks = dealer
	cfg.Logger = nil
	if cfg.StateDir != "" {
		cfg.StateDir = filepath.Join(cfg.StateDir, fmt.Sprintf("deployment%d", len(r.Deployments)+1))
	}
	run, err := RunSelect(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: select: %s: %w", DealerPlacement(cfg.dealerSpecs()), err)
	}
	return r.AddDeployment(run)
}

// AddDeployment adds run (a sample run of the same workload over the same
// link, e.g. the Sample of a `select --dealer-link ... --json` report) to
// the report's deployments and projects it.
func (r *SelectReport) AddDeployment(run *SampleRun) error {
	switch {
	case run == nil || len(run.Phases) != len(r.Workload.Phases) || run.Workload != r.Workload.Name:
		return fmt.Errorf("bench: select: deployment run does not match workload %s", r.Workload.Name)
	case run.Link != r.Link || r.Link == "none" || r.Link == "":
		return fmt.Errorf("bench: select: deployment over link %q, report over %q", run.Link, r.Link)
	}
	p, err := r.projectFrom(run, r.Workload.Pool)
	if err != nil {
		return err
	}
	r.Deployments = append(r.Deployments, Deployment{Placement: DealerPlacement(run.DealerLinks), Sample: run, Projection: p})
	return nil
}

// RunOff runs the report's baseline: cfg's sample run over its link with
// the pipeline off (cfg.StateDir, if set, gets the subdirectory "off"),
// and sets Off and OffProjection. The report's own runs must be
// pipelined and over a link.
func (r *SelectReport) RunOff(ctx context.Context, cfg SelectConfig) error {
	if cfg.Link == nil {
		return fmt.Errorf("bench: select: the pipeline-off baseline needs a link")
	}
	cfg.Pipeline = selection.PipelineOff
	cfg.Logger = nil
	if cfg.StateDir != "" {
		cfg.StateDir = filepath.Join(cfg.StateDir, "off")
	}
	run, err := RunSelect(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: select: pipeline off: %w", err)
	}
	return r.SetOff(run)
}

// SetOff sets the report's baseline to run (a sample run of the same
// workload over the same link with the pipeline off, e.g. the Sample of a
// `select --pipeline=off` report) and projects it.
func (r *SelectReport) SetOff(run *SampleRun) error {
	switch {
	case run == nil || len(run.Phases) != len(r.Workload.Phases) || run.Workload != r.Workload.Name:
		return fmt.Errorf("bench: select: baseline run does not match workload %s", r.Workload.Name)
	case run.Pipeline != string(selection.PipelineOff):
		return fmt.Errorf("bench: select: baseline run with pipeline %q, want off", run.Pipeline)
	case r.Sample == nil || r.Sample.Pipeline == string(selection.PipelineOff):
		return fmt.Errorf("bench: select: a baseline needs a pipelined report")
	case run.Link != r.Link || r.Link == "none" || r.Link == "":
		return fmt.Errorf("bench: select: baseline over link %q, report over %q", run.Link, r.Link)
	}
	p, err := r.projectFrom(run, r.Workload.Pool)
	if err != nil {
		return err
	}
	r.Off, r.OffProjection = run, p
	return nil
}

// PipelineGain compares a pipelined report with its baseline (the pipeline
// off), the figures of the scheduler's acceptance: the speed-ups and how
// close the pipelined projection comes to the larger of the bandwidth and
// compute bounds.
type PipelineGain struct {
	// MeasuredSpeedup is the baseline's over-link sample time ÷ the
	// pipelined one's (0 when their sample sizes differ).
	MeasuredSpeedup float64 `json:"measured_speedup"`
	// ProjectedSpeedup is the baseline's projected delay ÷ the pipelined
	// one's.
	ProjectedSpeedup float64 `json:"projected_speedup"`
	// OverBound is the pipelined projected delay ÷ max(bandwidth bound,
	// compute bound).
	OverBound float64 `json:"over_bound"`
}

// Gain returns the pipelined report's gain over its baseline (false when
// the report has none).
func (r *SelectReport) Gain() (PipelineGain, bool) {
	if r.Off == nil || r.OffProjection == nil || r.Projection == nil || r.Projection.Seconds <= 0 {
		return PipelineGain{}, false
	}
	g := PipelineGain{ProjectedSpeedup: r.OffProjection.Seconds / r.Projection.Seconds}
	if r.Off.Samples == r.Sample.Samples && r.Sample.Seconds > 0 {
		g.MeasuredSpeedup = r.Off.Seconds / r.Sample.Seconds
	}
	if b := max(r.Projection.Bounds.BandwidthSeconds, r.Projection.Bounds.ComputeSeconds); b > 0 {
		g.OverBound = r.Projection.Seconds / b
	}
	return g, true
}

// ComputeRun returns the run the compute bound comes from: the separate
// processes' run when it holds each party's own CPU seconds (each party
// then on a host of its own: Projection.ComputeHosts), else the run
// without a link, both parties on this machine.
func (r *SelectReport) ComputeRun() *SampleRun {
	if r.Processes != nil && r.Processes.PerParty() {
		return r.Processes
	}
	if r.Compute != nil {
		return r.Compute
	}
	return r.Sample
}

// LinkString describes the link: its name, bandwidth and latency.
func (r *SelectReport) LinkString() string {
	if p := r.linkProfile(); p != nil {
		return p.String()
	}
	return "none (no link emulation)"
}

// linkProfile returns the report's link (nil for none).
func (r *SelectReport) linkProfile() *transport.Profile {
	if r.Link == "none" || r.Link == "" {
		return nil
	}
	return &transport.Profile{Name: r.Link, Bandwidth: r.BandwidthBytesPS, Latency: secondsDuration(r.LatencySeconds)}
}

// Select runs `mpcbench select` in this process: the sample run without a
// link (the compute bound), the sample run over cfg.Link (when set),
// QuickSelect at each phase's full-pool size, and the projection.
func Select(ctx context.Context, cfg SelectConfig) (*SelectReport, error) {
	w := cfg.Workload
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	rep := &SelectReport{Workload: w, Link: "none"}
	if cfg.Link != nil {
		rep.Link, rep.BandwidthBytesPS, rep.LatencySeconds = cfg.Link.Name, cfg.Link.Bandwidth, cfg.Link.Latency.Seconds()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	nolink := cfg
	nolink.Link, nolink.DealerLinks = nil, [2]*transport.Profile{}
	nolink.Logger = nil
	if cfg.StateDir != "" {
		nolink.StateDir = filepath.Join(cfg.StateDir, "compute")
		cfg.StateDir = filepath.Join(cfg.StateDir, "link")
	}
	log.Info("mpcbench select: sample run without a link", "workload", w.Name, "samples", cfg.samples())
	comp, err := RunSelect(ctx, nolink)
	if err != nil {
		return nil, err
	}
	rep.Sample = comp
	if cfg.Link != nil {
		log.Info("mpcbench select: sample run over the link", "workload", w.Name, "link", cfg.Link.String())
		lr := cfg
		lr.Logger = nil
		if rep.Sample, err = RunSelect(ctx, lr); err != nil {
			return nil, err
		}
		rep.Compute = comp
	}
	rep.MeasuredSeconds = rep.Sample.Seconds
	cand, kept, err := w.PhaseSizes(w.Pool)
	if err != nil {
		return nil, err
	}
	for i := range cand {
		log.Info("mpcbench select: QuickSelect at the pool's size", "phase", i+1, "n", cand[i], "k", kept[i])
		c, err := MeasureTopK(ctx, cand[i], kept[i], cfg.Seed+uint64(i))
		if err != nil {
			return nil, err
		}
		rep.TopK = append(rep.TopK, *c)
	}
	if rep.Projection, err = rep.Project(w.Pool); err != nil {
		return nil, err
	}
	return rep, nil
}

// Project projects the report's runs to a pool of n (QuickSelect measured
// where TopK holds the size, modelled from the measurements elsewhere).
func (r *SelectReport) Project(n int) (*Projection, error) {
	return r.projectFrom(r.headline(), n)
}

// headline is the run the report projects its delay from: the processes'
// run where it emulated two hosts (SampleRun.Dilation: each party's
// compute on its own cores), the in-process sample run otherwise.
func (r *SelectReport) headline() *SampleRun {
	if r.Processes != nil && r.Processes.Dilation > 1 {
		return r.Processes
	}
	return r.Sample
}

func (r *SelectReport) projectFrom(sample *SampleRun, n int) (*Projection, error) {
	topk, err := r.topk()
	if err != nil {
		return nil, err
	}
	return Project(r.Workload, n, r.linkProfile(), sample, r.ComputeRun(), topk)
}

// topk returns QuickSelect's cost at (n, k): measured where TopK holds
// the size, modelled from the measurements elsewhere.
func (r *SelectReport) topk() (func(n, k int) (TopKCost, error), error) {
	model, err := NewTopKModel(r.TopK)
	if err != nil {
		return nil, err
	}
	return func(n, k int) (TopKCost, error) {
		for _, t := range r.TopK {
			if t.N == n && t.K == k {
				return t, nil
			}
		}
		return model.Predict(n, k), nil
	}, nil
}

// ProjectShards projects the report's sample to a pool of n (the
// workload's when 0) on sc.Shards worker pairs per party (ProjectShards;
// QuickSelect as in Project).
func (r *SelectReport) ProjectShards(n int, sc ShardConfig) (*ShardedProjection, error) {
	return r.ProjectShardsFrom(r.Sample, n, sc)
}

// ProjectShardsFrom is ProjectShards of another sample over the report's
// link (a deployment's, or the baseline's), with the report's run without
// a link as its compute bound.
func (r *SelectReport) ProjectShardsFrom(sample *SampleRun, n int, sc ShardConfig) (*ShardedProjection, error) {
	topk, err := r.topk()
	if err != nil {
		return nil, err
	}
	return ProjectShards(r.Workload, n, r.linkProfile(), sample, r.ComputeRun(), topk, sc)
}

// MeasureTopKAt measures QuickSelect at each phase's size of a pool of n
// where the report holds no measurement of that size yet (so that a
// projection to n uses measured costs, not the model), adding them to
// TopK.
func (r *SelectReport) MeasureTopKAt(ctx context.Context, n int, seed uint64) error {
	cand, kept, err := r.Workload.PhaseSizes(n)
	if err != nil {
		return err
	}
next:
	for i := range cand {
		for _, t := range r.TopK {
			if t.N == cand[i] && t.K == kept[i] {
				continue next
			}
		}
		c, err := MeasureTopK(ctx, cand[i], kept[i], seed+uint64(i))
		if err != nil {
			return err
		}
		r.TopK = append(r.TopK, *c)
	}
	return nil
}

// Check is one compared figure of a CrossCheck.
type Check struct {
	Name      string  `json:"name"`
	InProcess float64 `json:"in_process"`
	Processes float64 `json:"processes"`
	// RelDiff is |processes − in-process| / in-process.
	RelDiff float64 `json:"rel_diff"`
	OK      bool    `json:"ok"`
}

// CrossCheck compares a sample run of separate processes over TLS and a
// relay with the in-process emulation of the same link.
type CrossCheck struct {
	Tolerance float64 `json:"tolerance"`
	Checks    []Check `json:"checks"`
	// Agree reports whether every check is within Tolerance.
	Agree bool `json:"agree"`
	// ProcessesProjection is the projection from the processes' run.
	ProcessesProjection *Projection `json:"processes_projection"`
	// InProcessProjection is the in-process run's projection where the
	// processes' run emulated two hosts and replaced it as the report's
	// (both parties' compute on this host's cores: wall times charge
	// each party the other's work too).
	InProcessProjection *Projection `json:"in_process_projection,omitempty"`
}

// Compare checks the processes' run against the report's in-process run
// over the same link: per phase the forward's bytes each direction per
// candidate, rounds per batch and seconds per candidate, and the projected
// delay. Each must agree within tol (relative). It sets r.Processes and
// r.CrossCheck. A processes' run that emulated two hosts (Dilation) is
// checked on its bytes and rounds only, and the report's projection is
// then made from it (headline).
func (r *SelectReport) Compare(proc *SampleRun, tol float64) (*CrossCheck, error) {
	if proc == nil || len(proc.Phases) != len(r.Sample.Phases) {
		return nil, fmt.Errorf("bench: cross-check: processes' run does not match")
	}
	cc := &CrossCheck{Tolerance: tol, Agree: true}
	add := func(name string, a, b float64) {
		d := math.Abs(b - a)
		if a != 0 {
			d /= math.Abs(a)
		} else if b == 0 {
			d = 0
		} else {
			d = math.Inf(1)
		}
		ok := d <= tol
		cc.Agree = cc.Agree && ok
		cc.Checks = append(cc.Checks, Check{Name: name, InProcess: a, Processes: b, RelDiff: d, OK: ok})
	}
	for i, a := range r.Sample.Phases {
		b := proc.Phases[i]
		pa, pb := float64(a.Forward.BytesP0)/float64(a.Candidates), float64(b.Forward.BytesP0)/float64(b.Candidates)
		add(fmt.Sprintf("phase %d forward bytes P0→P1 per candidate", i+1), pa, pb)
		pa, pb = float64(a.Forward.BytesP1)/float64(a.Candidates), float64(b.Forward.BytesP1)/float64(b.Candidates)
		add(fmt.Sprintf("phase %d forward bytes P1→P0 per candidate", i+1), pa, pb)
		add(fmt.Sprintf("phase %d forward rounds per batch", i+1), float64(a.RoundsPerBatch), float64(b.RoundsPerBatch))
		if proc.Dilation == 0 { // two hosts emulated: their times are not this host's
			add(fmt.Sprintf("phase %d forward seconds per candidate", i+1), a.Forward.Seconds/float64(a.Candidates), b.Forward.Seconds/float64(b.Candidates))
		}
	}
	pp, err := r.projectFrom(proc, r.Workload.Pool)
	if err != nil {
		return nil, err
	}
	if proc.Dilation == 0 {
		add("projected hours", r.Projection.Hours, pp.Hours)
	}
	cc.ProcessesProjection = pp
	if proc.Dilation > 1 {
		cc.InProcessProjection = r.Projection
	}
	r.Processes, r.CrossCheck = proc, cc
	if proc.PerParty() || proc.Dilation > 1 {
		// Each party's CPU measured on its own: the compute bound charges
		// it to the party's own host (ComputeRun).
		if r.Projection, err = r.Project(r.Projection.Pool); err != nil {
			return nil, err
		}
	}
	return cc, nil
}

// PoolCurve returns the projected delay (hours, over the report's link) at
// each pool size of sizes, sorted, with QuickSelect modelled from the
// measurements.
func (r *SelectReport) PoolCurve(sizes []int) ([][2]float64, error) {
	sort.Ints(sizes)
	var out [][2]float64
	for _, n := range sizes {
		p, err := r.Project(n)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]float64{float64(n), p.Hours})
	}
	return out, nil
}

// secondsDuration converts seconds to a time.Duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// DecodeSelectReport parses a SelectReport (`mpcbench select --json`
// output) and checks that it is complete and consistent: a known-looking
// workload, a sample run and projection with one entry per phase.
func DecodeSelectReport(b []byte) (*SelectReport, error) {
	var r SelectReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: select report: %w", err)
	}
	n := len(r.Workload.Phases)
	switch {
	case r.Workload.Name == "" || n == 0:
		return nil, fmt.Errorf("bench: select report: no workload")
	case r.Sample == nil || r.Projection == nil:
		return nil, fmt.Errorf("bench: select report of %s: no sample run or projection", r.Workload.Name)
	case len(r.Sample.Phases) != n || len(r.Projection.Phases) != n || len(r.TopK) < n:
		return nil, fmt.Errorf("bench: select report of %s: %d phases, sample %d, projection %d, topk %d", r.Workload.Name, n, len(r.Sample.Phases), len(r.Projection.Phases), len(r.TopK))
	case r.Compute != nil && len(r.Compute.Phases) != n:
		return nil, fmt.Errorf("bench: select report of %s: compute run of %d phases", r.Workload.Name, len(r.Compute.Phases))
	case r.Processes != nil && len(r.Processes.Phases) != n:
		return nil, fmt.Errorf("bench: select report of %s: processes' run of %d phases", r.Workload.Name, len(r.Processes.Phases))
	case r.Sample.Dilation != 0 || r.Processes != nil && r.Processes.Dilation != 0 && !(r.Processes.Dilation > 1):
		return nil, fmt.Errorf("bench: select report of %s: a dilated run other than a processes' run dilated above 1", r.Workload.Name)
	case (r.Off != nil) != (r.OffProjection != nil) || r.Off != nil && (len(r.Off.Phases) != n || len(r.OffProjection.Phases) != n):
		return nil, fmt.Errorf("bench: select report of %s: incomplete pipeline-off baseline", r.Workload.Name)
	}
	if sp := r.Sharded; sp != nil && (len(sp.Phases) != n || sp.Shards < 1 || sp.Shards > MaxShards) {
		return nil, fmt.Errorf("bench: select report of %s: sharded projection of %d phases on %d pairs", r.Workload.Name, len(sp.Phases), sp.Shards)
	}
	for _, d := range r.Deployments {
		if d.Sample == nil || d.Projection == nil || len(d.Sample.Phases) != n || len(d.Projection.Phases) != n {
			return nil, fmt.Errorf("bench: select report of %s: incomplete dealer deployment %q", r.Workload.Name, d.Placement)
		}
	}
	if err := r.Workload.Validate(); err != nil {
		return nil, fmt.Errorf("bench: select report: %w", err)
	}
	for _, pr := range []struct {
		p   *Projection
		run *SampleRun
	}{{r.Projection, r.Sample}, {r.OffProjection, r.Off}} {
		if pr.p != nil && pr.p.Lanes < 0 {
			return nil, fmt.Errorf("bench: select report of %s: %d lanes", r.Workload.Name, pr.p.Lanes)
		}
		if pr.p != nil && pr.run != nil && pr.p.Lanes == 0 { // a report from before the pipeline: its slots ran at once
			pr.p.Pipeline, pr.p.Lanes = string(selection.PipelineOn), LanesInFlight(r.Workload, -1, pr.run.Pipeline)
		}
	}
	return &r, nil
}

package main

// The select subcommand:
//
//	mpcbench select --workload W [--samples N] [--link lan|paper-wan|none | --bandwidth B --rtt T]
//	    [--dealer-link paper-wan|lan|none|P0LINK,P1LINK] [--pipeline on|off] [--memory-budget BYTES] [--compare-off] [--processes [--two-hosts]] [--json] [--batch B] [--workers K]
//	    [--seed S] [--timeout D] [--stall D] [--pool N] [--shards K [--dealers K|1] [--internal-link lan|paper-wan|none]]
//
// runs a sample selection of the workload (package bench: Select) and
// projects it to the workload's full pool (--pool: another pool size,
// QuickSelect measured at its sizes). With --shards K it also projects the
// selection on K worker pairs per party (shards.go); with --processes too it
// instead measures the selection of the quickstart's demo on 1, 2, 4 ... K
// worker pairs as processes of the peer binaries (shards_proc.go). With
// --processes (and no --shards) the dealer and
// the two parties also run as three child processes (select-party) over TLS,
// the parties' connection through a linkem relay (bench.Relay) with the
// link, and the report cross-checks that run against the in-process
// emulation: the command fails if they differ by more than --tolerance.
// With a dealer-free --provider (ot, he) there is no dealer process: two
// hosts, the parties' link carrying the correlations too. Each party then
// measures its own CPU seconds per phase and its peak RSS, and the
// projection's compute bound charges the busier party's CPU to a host of
// its own with this machine's cores (bench.Projection.ComputeHosts) instead
// of both parties to this machine. With --two-hosts too, the processes' run
// emulates the two hosts on this one (twoHosts): each party's process pinned
// to its own half of the CPUs, the link and the clock dilated by the ratio,
// the run's wall times divided back; the projection is then that run's, so
// that each party's compute overlaps the link as on two hosts, where the
// in-process run's wall time charges both parties to the same cores.
// --dealer-link places the dealer as a third host: behind a link of that
// profile to each party (two comma-separated profiles: to P0, to P1; "none":
// in process, no link); by default on the parties' link (a custom
// --bandwidth/--rtt link included). Its traffic crosses the emulated links
// in the sample over the link (in process, a networked dealer over
// link-emulated pipes; with --processes, a linkem relay in front of each of
// the dealer process's listeners), and the projection bounds each link.
// --pipeline picks the batch scheduler's mode of both parties (the
// children's too); with --compare-off a pipelined run also runs its sample
// over the link with the pipeline off and reports the speed-up. --stall
// bounds the silence of an in-process sample run (bench.SelectConfig.Stall:
// no batch finished and no byte crossed the parties' link): a stuck run
// fails with an error wrapping bench.ErrStuck that says where each party
// stands, and logs what every goroutine waits on.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/internal/memlimit"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

func init() {
	commands["select"] = command{"end-to-end selection delay of a workload: a sample run, projected to the full pool", runSelect}
	commands["select-party"] = command{"(internal) one process of select --processes", runSelectChild}
}

// selectFlags are the flags describing a sample run, shared with the
// children.
type selectFlags struct {
	workload        *string
	samples         *int
	batch, workers  *int
	seed            *uint64
	link, bandwidth *string
	rtt             *time.Duration
	timeout         *time.Duration
	stall           *time.Duration
	provider        *string
	pipeline        *string
	memoryBudget    *string
	dealerLink      *string
	bandwidthGiven  bool
	linkGiven       bool
	rttGiven        bool
	fs              *flag.FlagSet
}

func addSelectFlags(fs *flag.FlagSet) *selectFlags {
	names := []string{}
	for _, w := range bench.Workloads {
		names = append(names, w.Name)
	}
	return &selectFlags{
		fs:        fs,
		workload:  fs.String("workload", "sst2-distilbert", "workload: "+strings.Join(names, ", ")+" (or tiny)"),
		samples:   fs.Int("samples", 0, "candidates of the sample run (0: the workload's default)"),
		batch:     fs.Int("batch", 0, "candidates per batch (0: the workload's; a phase with a batch size of its own keeps it)"),
		workers:   fs.Int("workers", 0, "batches in flight (0: the workload's)"),
		seed:      fs.Uint64("seed", 1, "seed of the random weights and inputs"),
		link:      fs.String("link", "paper-wan", "emulated link: "+strings.Join(transport.ProfileNames(), ", ")),
		bandwidth: fs.String("bandwidth", "", "custom link: bandwidth per direction, e.g. 100MB (with --rtt)"),
		rtt:       fs.Duration("rtt", 0, "custom link: round-trip time, e.g. 100ms (one-way latency = rtt/2)"),
		timeout:   fs.Duration("timeout", 2*time.Hour, "give up after this long"),
		stall: fs.Duration("stall", bench.DefaultStall, "a run in which no batch finishes and no byte crosses the parties' link for this long is stuck: cancel it, "+
			"say where each party stands and log what its goroutines wait on (0: never)"),
		provider:     fs.String("provider", source.Default, "where the correlated randomness comes from (in process): "+source.Usage()),
		pipeline:     fs.String("pipeline", "on", "batch scheduler: on (every lane at once, dealer material prefetched) or off (one batch at a time)"),
		memoryBudget: fs.String("memory-budget", "", "bytes of prefetched dealer material each party may hold, e.g. 512MiB (default: the workload's; 0: no prefetch)"),
		dealerLink: fs.String("dealer-link", "", "the dealer as a third host: its link to both parties ("+strings.Join(transport.ProfileNames(), ", ")+
			"), or to P0 and to P1 comma-separated (paper-wan,lan: beside the data owner), or none (in process); default: the parties' link"),
	}
}

// config returns the parsed configuration.
func (f *selectFlags) config() (bench.SelectConfig, error) {
	f.fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "link":
			f.linkGiven = true
		case "bandwidth":
			f.bandwidthGiven = true
		case "rtt":
			f.rttGiven = true
		}
	})
	w, err := bench.WorkloadByName(*f.workload)
	if err != nil {
		return bench.SelectConfig{}, err
	}
	if *f.batch > 0 {
		w.BatchSize = *f.batch
	}
	if *f.workers > 0 {
		w.Workers = *f.workers
	}
	if *f.batch < 0 || *f.workers < 0 || *f.samples < 0 {
		return bench.SelectConfig{}, fmt.Errorf("negative --batch, --workers or --samples")
	}
	if _, err := sourceFlag("", *f.provider); err != nil {
		return bench.SelectConfig{}, err
	}
	cfg := bench.SelectConfig{Workload: w, Samples: *f.samples, Seed: *f.seed, Provider: *f.provider, Pipeline: selection.PipelineMode(*f.pipeline), Stall: *f.stall}
	switch {
	case *f.stall < 0:
		return cfg, fmt.Errorf("negative --stall %v", *f.stall)
	case *f.stall == 0:
		cfg.Stall = -1 // no watchdog
	}
	if *f.pipeline != string(selection.PipelineOn) && *f.pipeline != string(selection.PipelineOff) {
		return cfg, fmt.Errorf("--pipeline %q: want on or off", *f.pipeline)
	}
	if *f.memoryBudget != "" {
		b, err := parseBytes(*f.memoryBudget)
		if err != nil {
			return cfg, fmt.Errorf("--memory-budget: %w", err)
		}
		cfg.MemoryBudget = b
		if b == 0 {
			cfg.MemoryBudget = -1 // no prefetch
		}
	}
	link, err := f.profile()
	if err != nil {
		return cfg, err
	}
	cfg.Link = link
	if cfg.DealerLinks, err = f.dealerLinks(link, cfg.Provider); err != nil {
		return cfg, err
	}
	if err := w.Validate(); err != nil {
		return cfg, err
	}
	n := *f.samples
	if n == 0 {
		n = w.Samples
	}
	if _, err := w.Params(n); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// profile returns the link of the flags (nil for none).
func (f *selectFlags) profile() (*transport.Profile, error) {
	custom := f.bandwidthGiven || f.rttGiven
	if custom {
		if f.linkGiven {
			return nil, errors.New("--link cannot be combined with --bandwidth/--rtt")
		}
		if *f.rtt < 0 {
			return nil, fmt.Errorf("negative --rtt %v", *f.rtt)
		}
		p := transport.Profile{Name: "custom", Latency: *f.rtt / 2}
		if *f.bandwidth != "" {
			bw, err := bench.ParseBandwidth(*f.bandwidth)
			if err != nil {
				return nil, err
			}
			p.Bandwidth = bw
		}
		return &p, nil
	}
	if *f.link == "" || *f.link == "none" {
		return nil, nil
	}
	p, err := transport.ProfileByName(*f.link)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// dealerLinks returns the dealer's links of the flags: --dealer-link's
// profiles, or by default the parties' link to both (none without a link
// or without a dealer).
func (f *selectFlags) dealerLinks(link *transport.Profile, provider string) ([2]*transport.Profile, error) {
	var out [2]*transport.Profile
	v := strings.TrimSpace(*f.dealerLink)
	if v == "" {
		if link == nil || source.DealerFree(provider) {
			return out, nil
		}
		return [2]*transport.Profile{link, link}, nil
	}
	names := strings.Split(v, ",")
	if len(names) == 1 {
		names = append(names, names[0])
	}
	if len(names) != 2 {
		return out, fmt.Errorf("--dealer-link %q: want one profile, or two comma-separated (to P0, to P1)", v)
	}
	for p, n := range names {
		n = strings.TrimSpace(n)
		if n == "none" {
			continue
		}
		prof, err := transport.ProfileByName(n)
		if err != nil {
			return out, fmt.Errorf("--dealer-link: %w", err)
		}
		out[p] = &prof
	}
	if out != ([2]*transport.Profile{}) {
		switch {
		case link == nil:
			return out, fmt.Errorf("--dealer-link %q needs a link between the parties (--link or --bandwidth/--rtt)", v)
		case source.DealerFree(provider):
			return out, fmt.Errorf("--dealer-link %q: the provider %s has no dealer", v, provider)
		}
	}
	return out, nil
}

// selectChildArgs renders a run's configuration as a child's flags (the
// link is the relay's).
func selectChildArgs(cfg bench.SelectConfig, timeout time.Duration) []string {
	w := cfg.Workload
	args := []string{"--workload", w.Name, "--samples", strconv.Itoa(cfg.Samples), "--batch", strconv.Itoa(w.BatchSize),
		"--workers", strconv.Itoa(w.Workers), "--seed", strconv.FormatUint(cfg.Seed, 10), "--link", "none", "--timeout", timeout.String(),
		"--pipeline", string(pipelineOf(cfg))}
	if cfg.Provider != "" {
		args = append(args, "--provider", cfg.Provider)
	}
	switch {
	case cfg.MemoryBudget < 0:
		args = append(args, "--memory-budget", "0")
	case cfg.MemoryBudget > 0:
		args = append(args, "--memory-budget", strconv.FormatInt(cfg.MemoryBudget, 10))
	}
	return args
}

// pipelineOf returns cfg's pipeline mode, "on" when unset.
func pipelineOf(cfg bench.SelectConfig) selection.PipelineMode {
	if cfg.Pipeline == "" {
		return selection.PipelineOn
	}
	return cfg.Pipeline
}

// parseBytes parses a byte count: a number of bytes, optionally with a
// unit (bench.ParseBandwidth's: KB, MB, GB, KiB, MiB, GiB).
func parseBytes(s string) (int64, error) {
	return bench.ParseBandwidth(s)
}

func runSelect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("select", stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	twoHostsFlag := fs.Bool("two-hosts", false, "with --processes and a dealer-free --provider: emulate the deployment's two hosts on this one: each party's process pinned to its own half of the CPUs, the link and the clock dilated by the ratio (latency ×2, bandwidth ÷2 and every wall time ÷2 on an even split), so that each party computes on CPUs of its own beside the link; the projection is then the processes' run's, and the cross-check compares bytes and rounds only")
	processes := fs.Bool("processes", false, "also run the dealer and both parties as OS processes over TLS through a linkem relay and cross-check; with --shards K, instead measure the quickstart demo's selection on 1, 2, 4 ... K worker pairs as processes of the peer binaries (from the module's source), each link through its own relay")
	tol := fs.Float64("tolerance", 0.10, "with --processes: largest relative difference allowed between the two runs")
	compareOff := fs.Bool("compare-off", false, "with the pipeline on: also run the sample over the link with the pipeline off (the baseline) and report the speed-up")
	pool := fs.Int("pool", 0, "project to a pool of N candidates (0: the workload's); QuickSelect is measured at its phases' sizes")
	var peer peerOptions
	fs.StringVar(&peer.Bin, "peer-bin", "", "with --processes --shards: a directory holding prebuilt quickstart, dealer, modelowner, dataowner and mkpool binaries (default: build them from the module's source with the go tool)")
	fs.StringVar(&peer.Logs, "peer-logs", "", "with --processes --shards: run every process at -log info and write each one's log to this directory (RUN-NN-ROLE.log)")
	shf := addShardFlags(fs)
	sf := addSelectFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := sf.config()
	if err != nil {
		return fmt.Errorf("select: %w", err)
	}
	if err := setPool(&cfg, *pool); err != nil {
		return fmt.Errorf("select: %w", err)
	}
	sc, err := shf.config()
	if err != nil {
		return fmt.Errorf("select: %w", err)
	}
	var hosts *twoHosts
	if *twoHostsFlag {
		if !*processes || sc.Shards > 1 || !source.DealerFree(cfg.Provider) {
			return errors.New("select: --two-hosts needs --processes, no --shards and a dealer-free --provider (two hosts, no third)")
		}
		if hosts, err = newTwoHosts(); err != nil {
			return fmt.Errorf("select: --two-hosts: %w", err)
		}
	}
	if *processes && sc.Shards > 1 {
		// The measured sharded run instead of the sample (shards.go).
		ctx, cancel := context.WithTimeout(ctx, *sf.timeout)
		defer cancel()
		scale, runs, err := measureShardScaling(ctx, cfg, sc, shardDemoRun, peer, slog.New(slog.NewTextHandler(stderr, nil)))
		if err != nil {
			return fmt.Errorf("select: --processes with --shards %d: %w", sc.Shards, err)
		}
		return printShardScaling(stdout, shardDemoRun, fmt.Sprintf("%s (%.3g MB/s per direction, %v one way)", cfg.Link.Name, float64(cfg.Link.Bandwidth)/1e6, cfg.Link.Latency), scale, runs)
	}
	if *compareOff && (cfg.Pipeline == selection.PipelineOff || cfg.Link == nil) {
		return errors.New("select: --compare-off needs --pipeline=on and a link")
	}
	ctx, cancel := context.WithTimeout(ctx, *sf.timeout)
	defer cancel()
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	rep, err := bench.Select(ctx, cfg)
	if err != nil {
		return fmt.Errorf("select: %w", err)
	}
	if sc.Shards > 1 {
		if rep.Sharded, err = rep.ProjectShards(0, sc); err != nil {
			return fmt.Errorf("select: %w", err)
		}
	}
	if *compareOff {
		cfg.Logger.Info("mpcbench select: sample run over the link with the pipeline off", "workload", cfg.Workload.Name)
		if err := rep.RunOff(ctx, cfg); err != nil {
			return fmt.Errorf("select: %w", err)
		}
	}
	if *processes {
		proc, err := runSelectProcesses(ctx, selectChildArgs(cfg, *sf.timeout), cfg, hosts, stderr)
		if err != nil {
			return fmt.Errorf("select: processes: %w", err)
		}
		if _, err := rep.Compare(proc, *tol); err != nil {
			return fmt.Errorf("select: %w", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := printSelect(stdout, rep); err != nil {
		return err
	}
	if rep.CrossCheck != nil && !rep.CrossCheck.Agree {
		return fmt.Errorf("select: the processes' run and the in-process emulation differ by more than %.0f%%", 100*rep.CrossCheck.Tolerance)
	}
	return nil
}

// flagTooSmall is the mark printed after a projected figure whose sample
// was too small to project from (bench.Projection.TooSmall).
func flagTooSmall(p *bench.Projection) string {
	if p.TooSmall == "" {
		return ""
	}
	return " (UNRELIABLE: sample too small, see the warning)"
}

// limitingText names a projection's limiting bound, with the link that
// sets it when it is the bandwidth bound.
func limitingText(p *bench.Projection) string {
	if p.Limiting == bench.BoundBandwidth && p.LimitingLink != "" {
		return p.Limiting + ", " + p.LimitingLink + " link"
	}
	return p.Limiting
}

// printLinkBounds prints a projection's bound per link.
func printLinkBounds(w io.Writer, p *bench.Projection) { printLinks(w, p.Bounds.Links, p.LimitingLink) }

// printLinks prints each link's bound, marking the largest (limiting).
func printLinks(w io.Writer, links []bench.LinkBound, limiting string) {
	for _, l := range links {
		mark := ""
		if l.Link == limiting {
			mark = "  ← largest"
		}
		fmt.Fprintf(w, "  link %s (%s): busiest direction %s (of %s one way, %s the other) → %.4g s = %.2f h%s\n", l.Link, l.Profile, bench.FormatBytes(float64(max(l.Bytes[0], l.Bytes[1]))),
			bench.FormatBytes(float64(l.Bytes[0])), bench.FormatBytes(float64(l.Bytes[1])), l.Seconds, l.Seconds/3600, mark)
	}
}

// inFlightText says the batches in flight on the critical path: "16", or
// by phase when the phases differ ("60, 16 by phase").
func inFlightText(p *bench.Projection) string {
	var by []string
	same := true
	for i := range p.Phases {
		by = append(by, strconv.Itoa(p.PhaseLanes(i)))
		same = same && p.PhaseLanes(i) == p.PhaseLanes(0)
	}
	if same || len(by) == 0 {
		return strconv.Itoa(p.PhaseLanes(0))
	}
	return strings.Join(by, ", ") + " by phase"
}

// printSelect prints a report as text.
func printSelect(w io.Writer, rep *bench.SelectReport) error {
	p := rep.Projection
	fmt.Fprintf(w, "workload %s (%s), pool %d, link %s\n", rep.Workload.Name, rep.Workload.Target, rep.Workload.Pool, rep.LinkString())
	s := rep.Sample
	fmt.Fprintf(w, "%s", s.Placement())
	for q, l := range s.DealerLinks {
		if !l.None() {
			fmt.Fprintf(w, "; dealer↔P%d %s", q, l)
		}
	}
	fmt.Fprintf(w, "; CPU %s\n", s.CPU)
	fmt.Fprintf(w, "sample run: %d candidates, %.1f s over the link; pipeline %s, %s (%s in flight on the critical path), prefetch budget %s per party\n\n",
		s.Samples, rep.MeasuredSeconds, s.Pipeline, rep.Workload.BatchesText(), inFlightText(p), bench.FormatBytes(float64(s.MemoryBudget)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tproxy\tcandidates\tkept\trounds\tP0→P1 B\tP1→P0 B\tdealer B\tseconds\tpeak heap\tin flight\tprefetch held P0/P1\t")
	for _, ph := range s.Phases {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%s\t%d\t%s / %s\t\n", ph.Phase+1, ph.Proxy, ph.Candidates, ph.Kept, ph.Rounds, ph.BytesP0, ph.BytesP1, ph.DealerBytes, ph.Seconds,
			bench.FormatBytes(float64(ph.PeakHeapAll)), ph.PeakInFlight, bench.FormatBytes(float64(ph.PeakPrefetchP0)), bench.FormatBytes(float64(ph.PeakPrefetchP1)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if c := s.Commitment; c != nil {
		fmt.Fprintf(w, "commitment to the pool: root %d B in the data owner's hello; bootstrap openings %s for %d candidates of %d B (projected to the pool's bootstrap: %s)\n",
			c.RootBytes, bench.FormatBytes(float64(c.OpeningBytes)), c.Openings, c.ItemBytes, bench.FormatBytes(float64(c.ProjectedOpeningBytes)))
	}
	fmt.Fprintf(w, "\nprojected to %d candidates: %.2f h%s over %s, pipeline %s (limiting bound: %s)\n", p.Pool, p.Hours, flagTooSmall(p), p.Link, p.Pipeline, limitingText(p))
	if p.AtBandwidth {
		fmt.Fprintf(w, "the phases' paces sum to %.2f h, below the bandwidth bound no run can beat: projected at the bound\n", p.PaceSeconds/3600)
	}
	if pr := rep.Processes; pr != nil && pr.Dilation > 1 {
		fmt.Fprintf(w, "two hosts emulated: each party's process on %d of this host's %d cores, the link and the clock dilated ×%g (its latency ×%[3]g, its bandwidth ÷%[3]g, the run's wall times ÷%[3]g): the projection is the processes' run's, with each party's compute beside the link on cores of its own\n",
			int(math.Round(float64(pr.Cores)/pr.Dilation)), pr.Cores, pr.Dilation)
		if cc := rep.CrossCheck; cc != nil && cc.InProcessProjection != nil {
			fmt.Fprintf(w, "the in-process run over the link, both parties on this host's %d cores, projects %.2f h\n", rep.Sample.Cores, cc.InProcessProjection.Hours)
		}
	}
	fmt.Fprintf(w, "bounds: bandwidth %.2f h, latency %.2f h, compute %.2f h (%s)\n", p.BoundsHours[0], p.BoundsHours[1], p.BoundsHours[2], computeHostsText(p))
	printLinkBounds(w, p)
	if pr := rep.Processes; pr != nil && pr.PerParty() {
		printPartyCPU(w, pr)
	}
	if p.TooSmall != "" {
		fmt.Fprintf(w, "WARNING: %s\n", p.TooSmall)
	}
	for _, ph := range p.Phases {
		fmt.Fprintf(w, "  phase %d: %d → %d, %.2f h (forward %.2f h, %d batches on %d lanes, %d rounds; QuickSelect %d comparisons (expected %.0f), %.1f s)\n",
			ph.Phase+1, ph.Candidates, ph.Kept, ph.Seconds/3600, ph.ForwardSeconds/3600, ph.Batches, p.PhaseLanes(ph.Phase), ph.Rounds, ph.TopK.Comparisons, ph.ExpectedComparisons, ph.TopKSeconds)
	}
	if op := rep.OffProjection; rep.Off != nil && op != nil {
		fmt.Fprintf(w, "pipeline off (baseline): sample %.1f s over the link; projected %.2f h%s (limiting bound: %s); bounds: bandwidth %.2f h, latency %.2f h, compute %.2f h\n",
			rep.Off.Seconds, op.Hours, flagTooSmall(op), op.Limiting, op.BoundsHours[0], op.BoundsHours[1], op.BoundsHours[2])
		if g, ok := rep.Gain(); ok {
			fmt.Fprintf(w, "pipeline gain: projected speed-up %.2f×, measured %.2f×; projected ÷ max(bandwidth, compute bound) = %.2f\n", g.ProjectedSpeedup, g.MeasuredSpeedup, g.OverBound)
		}
	}
	for _, d := range rep.Workload.Paper {
		fmt.Fprintf(w, "paper: %s (%d candidates): %.0f h\n", d.Label, d.Pool, d.Hours)
	}
	if cc := rep.CrossCheck; cc != nil {
		fmt.Fprintf(w, "\ncross-check, separate processes over TLS through a linkem relay vs in-process (tolerance %.0f%%):\n", 100*cc.Tolerance)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range cc.Checks {
			ok := "ok"
			if !c.OK {
				ok = "DIFFERS"
			}
			fmt.Fprintf(tw, "  %s\t%.4g\t%.4g\t%+.1f%%\t%s\n", c.Name, c.InProcess, c.Processes, 100*c.RelDiff, ok)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "agree: %v\n", cc.Agree)
		for _, run := range []*bench.SampleRun{rep.Sample, rep.Processes} {
			if run != nil && run.CPUSeconds > 0 && run.Seconds > 0 && run.Cores > 0 {
				// A dilated run's share of the machine is of its real wall
				// time, Dilation times the one it reports.
				dilated, wall := "", run.Seconds
				if run.Dilation > 1 {
					wall *= run.Dilation
					dilated = fmt.Sprintf(" (two hosts emulated: %.1f s of real time ÷%g)", wall, run.Dilation)
				}
				fmt.Fprintf(w, "  %s run: %.1f s wall, %.1f s CPU: %.0f%% of %d cores (load %s → %s)%s\n", map[bool]string{false: "in-process", true: "processes'"}[run.Processes],
					run.Seconds, run.CPUSeconds, 100*run.CPUSeconds/(wall*float64(run.Cores)), run.Cores, run.LoadBefore, run.LoadAfter, dilated)
			}
		}
	}
	if rep.Sharded != nil {
		return printSharded(w, rep)
	}
	return nil
}

// computeHostsText says where a projection's compute bound charges the
// parties' CPU.
func computeHostsText(p *bench.Projection) string {
	if p.ComputeHosts == bench.ComputeOwn {
		return fmt.Sprintf("each party on a host of its own with %d cores: the busier party's CPU seconds from the separate processes' run", p.ComputeCores)
	}
	return "both parties on this machine: the run without a link"
}

// printPartyCPU prints each party's CPU seconds and peak RSS per phase of
// a run with each party in its own process, per candidate too.
func printPartyCPU(w io.Writer, run *bench.SampleRun) {
	fmt.Fprintf(w, "each party in its own process: peak RSS P0 %s, P1 %s\n", bench.FormatBytes(float64(run.RSSP0)), bench.FormatBytes(float64(run.RSSP1)))
	for _, ph := range run.Phases {
		f := ph.Forward.CPUSeconds
		fmt.Fprintf(w, "  phase %d: CPU-s P0 %.2f + %.4f per candidate, P1 %.2f + %.4f per candidate (weight sharing + forward)", ph.Phase+1,
			ph.Prepare.CPUSeconds[0], f[0]/float64(max(ph.Candidates, 1)), ph.Prepare.CPUSeconds[1], f[1]/float64(max(ph.Candidates, 1)))
		if hp := ph.Forward; hp.HEProducts > 0 {
			fmt.Fprintf(w, "; P1's HE products %d in %d passes over the weights", hp.HEProducts, hp.HEPasses)
		}
		fmt.Fprintln(w)
	}
}

// runSelectProcesses runs the sample run of cfg over its link as child
// processes: the dealer (none with a dealer-free source: the two parties
// then make the correlations over their own link), party 0 listening, and
// party 1 dialling party 0 through a relay (bench.Relay, linkem's) that
// applies the link. Each party measures its own CPU seconds per phase
// (bench.SelectConfig.OwnProcess) and its peak RSS.
//
// With hosts (select --two-hosts) the run emulates two hosts: party 0's
// process runs on hosts.CPUs[0] and party 1's on hosts.CPUs[1], over the
// link dilated by hosts.K, and the run returned is dilated back
// (bench.SampleRun.Dilate).
func runSelectProcesses(ctx context.Context, childArgs []string, cfg bench.SelectConfig, hosts *twoHosts, stderr io.Writer) (*bench.SampleRun, error) {
	exe, err := executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "mpcbench-select-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fps := map[string]string{}
	for _, r := range roles {
		id, err := transport.GenerateIdentity("mpcbench-" + r)
		if err != nil {
			return nil, err
		}
		if err := id.Save(filepath.Join(dir, r+".crt"), filepath.Join(dir, r+".key")); err != nil {
			return nil, err
		}
		fps[r] = id.Fingerprint()
	}
	var children []*child
	defer func() { killChildren(children) }()
	start := func(role string, extra ...string) (*child, error) {
		args := append([]string{"select-party", "--role", role, "--dir", dir,
			"--fp-dealer", fps["dealer"], "--fp-p0", fps["p0"], "--fp-p1", fps["p1"]}, extra...)
		c, err := spawnPinned(exe, role, append(args, childArgs...), hosts.cpus(role))
		if err != nil {
			return nil, err
		}
		children = append(children, c)
		return c, nil
	}
	listen := func(c *child) (*listenMsg, error) {
		l, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		if l.Listen == nil {
			return nil, fmt.Errorf("%s: no listen line", c.role)
		}
		return l.Listen, nil
	}
	load := bench.LoadAverage()
	free := source.DealerFree(cfg.Provider)
	var dealer *child
	dl := &listenMsg{}
	if !free {
		if dealer, err = start("dealer"); err != nil {
			return nil, err
		}
		if dl, err = listen(dealer); err != nil {
			return nil, err
		}
	}
	// The relays, linkem's, in this process: in front of the dealer's
	// listener of each party it has a link to, and between the parties.
	relayLog := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var stops []func()
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	relay := func(target string, prof *transport.Profile) (string, error) {
		if prof == nil {
			prof = &transport.NoLink
		}
		addr, stop, err := startRelay(ctx, target, *prof, relayLog)
		if err != nil {
			return "", err
		}
		stops = append(stops, stop)
		return addr, nil
	}
	dealerAddr := dl.Dealer
	for q, prof := range cfg.DealerLinks {
		if prof != nil && !free {
			if dealerAddr[q], err = relay(dl.Dealer[q], prof); err != nil {
				return nil, err
			}
		}
	}
	p0, err := start("p0", "--dealer", dealerAddr[0])
	if err != nil {
		return nil, err
	}
	pl, err := listen(p0)
	if err != nil {
		return nil, err
	}
	peer, err := relay(pl.P0, hosts.link(cfg.Link))
	if err != nil {
		return nil, err
	}
	p1, err := start("p1", "--dealer", dealerAddr[1], "--peer", peer)
	if err != nil {
		return nil, err
	}
	var reps [3]*partyReport
	for i, c := range []*child{p0, p1, dealer} {
		if c == nil {
			reps[i] = &partyReport{Role: "dealer"}
			continue
		}
		l, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		if l.Report == nil || l.Report.Role != c.role || (c.role != "dealer" && l.Report.Select == nil) {
			return nil, fmt.Errorf("%s: bad report", c.role)
		}
		reps[i] = l.Report
		if want := len(hosts.cpus(c.role)); want > 0 && l.Report.Procs != want {
			return nil, fmt.Errorf("%s: ran on %d CPUs, not the %d it was pinned to (GOMAXPROCS set in the environment?)", c.role, l.Report.Procs, want)
		}
	}
	for _, c := range children {
		select {
		case <-c.done:
			if c.err != nil {
				return nil, fmt.Errorf("%s: %w; stderr:\n%s", c.role, c.err, c.stderr.String())
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s to exit: %w", c.role, ctx.Err())
		}
	}
	children = nil
	run, err := bench.NewSampleRun(cfg, [2]*bench.PartyRun{reps[0].Select, reps[1].Select})
	if err != nil {
		return nil, err
	}
	run.Processes = true
	for i := range run.Phases {
		if i < len(reps[0].PhasePeaks) {
			run.Phases[i].PeakHeapP0 = reps[0].PhasePeaks[i]
		}
		if i < len(reps[1].PhasePeaks) {
			run.Phases[i].PeakHeapP1 = reps[1].PhasePeaks[i]
		}
	}
	run.PeakHeapDealer, run.RSSP0, run.RSSP1, run.RSSDealer = reps[2].PeakHeap, reps[0].RSS, reps[1].RSS, reps[2].RSS
	run.CPUSeconds = reps[0].CPUSeconds + reps[1].CPUSeconds + reps[2].CPUSeconds
	run.LoadBefore, run.LoadAfter = load, bench.LoadAverage()
	if hosts != nil {
		if err := run.Dilate(hosts.K); err != nil {
			return nil, err
		}
	}
	return run, nil
}

// twoHosts is the emulation of the deployment's two hosts on this one
// (select --two-hosts): each party's process on CPUs of its own, the link
// and the clock dilated by K, the ratio of this host's CPUs to a party's.
// A party's compute then takes K times as long as on a host of all the
// CPUs (if its work spreads over them, as the compute bound assumes), and
// so do the link's delays: the run is this deployment's at a K-fold
// slower clock.
type twoHosts struct {
	CPUs [2][]int
	K    float64
}

// newTwoHosts splits this host's CPUs into two equal halves, one a party
// (an odd one left out, then idle).
func newTwoHosts() (*twoHosts, error) {
	cpus, err := hostCPUs()
	if err != nil {
		return nil, err
	}
	if len(cpus) < 2 {
		return nil, fmt.Errorf("emulating two hosts needs at least 2 CPUs; this process may run on %d", len(cpus))
	}
	h := len(cpus) / 2
	return &twoHosts{CPUs: [2][]int{cpus[:h], cpus[h : 2*h]}, K: float64(len(cpus)) / float64(h)}, nil
}

// cpus returns the CPUs of the process of role: none (not pinned) without
// the emulation and for a dealer.
func (h *twoHosts) cpus(role string) []int {
	switch {
	case h == nil:
		return nil
	case role == "p0":
		return h.CPUs[0]
	case role == "p1":
		return h.CPUs[1]
	}
	return nil
}

// link returns the link p dilated by K: its one-way latency ×K, its
// bandwidth ÷K (p itself without the emulation, or for no link).
func (h *twoHosts) link(p *transport.Profile) *transport.Profile {
	if h == nil || p == nil {
		return p
	}
	d := *p
	d.Name = fmt.Sprintf("%s dilated ×%g", p.Name, h.K)
	d.Latency = time.Duration(float64(p.Latency) * h.K)
	if p.Bandwidth > 0 {
		d.Bandwidth = max(1, int64(float64(p.Bandwidth)/h.K))
	}
	return &d
}

// startRelay starts a linkem relay (bench.Relay) from a new loopback
// listener to target with link prof; stop ends it and waits for it.
func startRelay(ctx context.Context, target string, prof transport.Profile, log *slog.Logger) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- bench.Relay(rctx, ln, target, prof, log) }()
	return ln.Addr().String(), func() { cancel(); <-done }, nil
}

// runSelectChild is one child of select --processes.
func runSelectChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("select-party", stderr)
	cf := addChildFlags(fs, "party 0's address (for p1: the relay's)")
	sf := addSelectFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := sf.config()
	if err != nil {
		return fmt.Errorf("select-party: %w", err)
	}
	id, fp, err := cf.identity()
	if err != nil {
		return fmt.Errorf("select-party: %w", err)
	}
	role, dealerAddr, peerAddr := cf.role, cf.dealer, cf.peer
	ctx, cancel := context.WithTimeout(ctx, *sf.timeout)
	defer cancel()
	defer memlimit.Start(partyMemoryTarget(cfg), 0)()
	sampler := bench.StartHeapSampler(0)
	prof := startHeapProfiler(*role)
	enc := json.NewEncoder(stdout)
	rep := &partyReport{Role: *role, Procs: runtime.GOMAXPROCS(0)}
	if *role == "dealer" {
		rep.Dealer, err = serveDealer(ctx, id, fp, enc)
	} else {
		rep.Select, err = selectParty(ctx, *role, id, fp, cfg, *dealerAddr, *peerAddr, enc, func(i int) { prof.setPhase(i); sampler.SetPhase(i) })
	}
	peaks := sampler.Stop()
	profRSS := prof.finish()
	if err != nil {
		return fmt.Errorf("select-party %s: %w", *role, err)
	}
	rep.PeakHeap = bench.Peak(peaks)
	if *role != "dealer" {
		rep.PhasePeaks = peaks
	}
	if rep.RSS, err = peakRSS(); err != nil {
		return fmt.Errorf("select-party %s: %w", *role, err)
	}
	rep.RSS = max(rep.RSS, profRSS)
	rep.CPUSeconds = bench.ProcessCPUSeconds()
	return enc.Encode(childLine{Report: rep})
}

// partyMemoryTarget is the soft memory limit of a party's process
// (internal/memlimit: it follows the live heap when that outgrows it): a
// working set of 3 GiB (a dealer-free party 1's prepared encryptions of a
// phase, 2.6 GB compact at sst2-distilbert's defaults, and the lanes'
// activations) plus twice the prefetch budget (the material prefetched,
// and as much drawn by the lanes): 3.5 GiB at the workloads' 256 MiB,
// below issue 38's 4 GB a party.
func partyMemoryTarget(cfg bench.SelectConfig) int64 {
	return 3<<30 + 2*max(cmp.Or(cfg.MemoryBudget, cfg.Workload.MemoryBudget), 0)
}

// selectParty opens the party's source of correlated randomness (cfg's
// provider: through the dealer at dealerAddr, or dealer-free over the
// parties' connection), connects to the other party and runs the party's
// side of the sample run, alone in this process.
func selectParty(ctx context.Context, role string, id *transport.Identity, fp map[string]string, cfg bench.SelectConfig,
	dealerAddr, peerAddr string, enc *json.Encoder, onPhase func(int)) (*bench.PartyRun, error) {
	party := 0
	if role == "p1" {
		party = 1
	}
	var ln *transport.Listener
	if party == 0 {
		var err error
		if ln, err = transport.Listen("127.0.0.1:0", id, transport.Options{}); err != nil {
			return nil, err
		}
		defer ln.Close()
		if err := enc.Encode(childLine{Listen: &listenMsg{P0: ln.Addr().String()}}); err != nil {
			return nil, err
		}
	}
	src, ok := source.ByName(cmp.Or(cfg.Provider, source.Default))
	if !ok {
		return nil, fmt.Errorf("provider %q: want %s", cfg.Provider, source.Choices())
	}
	env := source.Env{Party: party, Peer: func(ctx context.Context) (*transport.Conn, error) {
		var pc *transport.Conn
		var err error
		if party == 0 {
			pc, err = ln.Accept(ctx, fp["p1"])
		} else {
			pc, err = transport.Dial(ctx, peerAddr, id, fp["p0"], transport.Options{})
		}
		if err != nil {
			return nil, fmt.Errorf("connect to the other party: %w", err)
		}
		return pc, nil
	}}
	if dealerAddr != "" {
		env.Dealer = func(ctx context.Context) (beaver.Provider, io.Closer, error) {
			dc, err := transport.Dial(ctx, dealerAddr, id, fp["dealer"], transport.Options{})
			if err != nil {
				return nil, nil, fmt.Errorf("dial dealer: %w", err)
			}
			prov, err := dealer.Connect(ctx, dc, party)
			if err != nil {
				dc.Close()
				return nil, nil, err
			}
			return prov, dc, nil
		}
	}
	op, err := src.Open(ctx, env)
	if err != nil {
		return nil, err
	}
	defer op.Closer.Close()
	pc, prov := op.Conn, op.Provider
	defer pc.Close()
	cfg.OwnProcess = true
	res, err := bench.RunSelectParty(ctx, party, pc, prov, cfg, onPhase)
	if err != nil {
		return nil, err
	}
	if party == 0 { // let party 1 read the last message and hang up first
		select {
		case <-pc.Done():
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for party 1 to hang up: %w", ctx.Err())
		case <-time.After(30 * time.Second):
		}
	}
	return res, nil
}

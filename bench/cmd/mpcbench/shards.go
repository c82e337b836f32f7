package main

// The sharded projection of the select subcommand:
//
//	mpcbench select ... --shards K [--dealers K|1] [--internal-link lan|paper-wan|none] [--pool N]
//
// projects the sample run (one pair of machines) on K worker pairs per
// party (bench.ProjectShards): in each phase the candidates split into K
// contiguous shards at batch boundaries, each pair runs its shard over its
// own link (a link like --link) on machines like the sample's, so the
// largest shard sets the phase's pace; the workers gather their entropy
// shares to their coordinators over each party's internal network
// (--internal-link); QuickSelect and the appraisal run at the full size on
// the coordinators' link. A dealer on links of its own is one host per
// pair (the default, --dealers K: the reference deployment of
// examples/k8s, nothing shared) or one host serving all K pairs
// (--dealers 1: its links carry every shard's traffic, a floor of each
// phase). --shards 1 (the default) prints today's output unchanged.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/transport"
)

// shardFlags are the flags of the sharded projection.
type shardFlags struct {
	shards, dealers *int
	internal        *string
}

func addShardFlags(fs *flag.FlagSet) *shardFlags {
	return &shardFlags{
		shards: fs.Int("shards", 1, fmt.Sprintf("also project the selection on K worker pairs per party (1 to %d; 1: one pair, today's run): each pair on its own link like --link, "+
			"the largest shard setting each phase's pace, QuickSelect at the full size on the coordinators' link", bench.MaxShards)),
		dealers: fs.Int("dealers", 0, "with --shards K and a dealer on links of its own: K (one dealer host per pair, the reference deployment: nothing shared; 0, the default, is K) or 1 (one dealer host serving the K pairs, its links shared)"),
		internal: fs.String("internal-link", "lan", "with --shards: each party's internal network between its coordinator and its workers (jobs, and gathering 8 B per candidate): "+
			strings.Join(transport.ProfileNames(), ", ")),
	}
}

// config returns the sharded projection's configuration.
func (f *shardFlags) config() (bench.ShardConfig, error) {
	sc := bench.ShardConfig{Shards: *f.shards, Dealers: *f.dealers}
	p, err := transport.ProfileByName(*f.internal)
	if err != nil {
		return sc, fmt.Errorf("--internal-link: %w", err)
	}
	sc.Internal = &p
	if err := sc.Check(); err != nil {
		return sc, fmt.Errorf("--shards %d --dealers %d: %w", sc.Shards, sc.Dealers, err)
	}
	return sc, nil
}

// setPool sets the pool cfg's projection reaches (0: the workload's).
func setPool(cfg *bench.SelectConfig, pool int) error {
	switch {
	case pool < 0:
		return fmt.Errorf("--pool %d: want a positive pool size (0: the workload's)", pool)
	case pool == 0:
		return nil
	}
	w := cfg.Workload
	w.Pool = pool
	if _, _, err := w.PhaseSizes(pool); err != nil {
		return fmt.Errorf("--pool %d: %w", pool, err)
	}
	cfg.Workload = w
	return nil
}

// measureShardScaling runs the measured sharded run (shards_proc.go): the
// selection of the quickstart's MNIST demo (demo) as OS processes on loopback, on one pair and on 2, 4, ...
// up to sc.Shards worker pairs per party (and sc.Shards itself), every
// pair's link and the coordinators' through its own relay of cfg.Link, one
// dealer per pair (the coordinators sharing pair 0's) on unshaped loopback. It returns each run against the
// one pair's (bench.ShardScaling; ProjectedSeconds is ProjectShards's
// model applied to the one-pair run's measured phases, projectFromOnePair:
// the demo's model is no bench workload to project a sample of) and the
// runs themselves. The workload of cfg is not used: the peer binaries run
// the demo.
func measureShardScaling(ctx context.Context, cfg bench.SelectConfig, sc bench.ShardConfig, demo shardDemo, peer peerOptions, log *slog.Logger) ([]bench.ShardScaling, []*shardMeasurement, error) {
	if cfg.Link == nil {
		return nil, nil, errors.New("a measured sharded run needs a link (--link lan|paper-wan or --bandwidth/--rtt): each pair's own link is what scales")
	}
	dir, err := os.MkdirTemp("", "mpcbench-shards-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	k, err := newPeerKit(ctx, dir, demo, peer, *cfg.Link, log)
	if err != nil {
		return nil, nil, err
	}
	if _, err := k.run(ctx, "generate", "", 1); err != nil {
		return nil, nil, fmt.Errorf("generating the proxies: %w", err)
	}
	proxies := filepath.Join(k.dir, "generate", "mo", "proxies")
	counts := []int{1}
	for n := 2; n < sc.Shards; n *= 2 {
		counts = append(counts, n)
	}
	counts = append(counts, sc.Shards)
	var runs []*shardMeasurement
	for _, n := range counts {
		m, err := k.run(ctx, fmt.Sprintf("k%d", n), proxies, n)
		if err != nil {
			return nil, nil, err
		}
		log.Info("measured sharded run", "shards", n, "wall", m.Wall, "cpu", m.CPU)
		runs = append(runs, m)
	}
	var out []bench.ShardScaling
	for _, m := range runs {
		out = append(out, bench.ShardScaling{Shards: m.Shards, Link: bench.SpecOf(cfg.Link).Name, OnePairSeconds: runs[0].Wall.Seconds(),
			Seconds: m.Wall.Seconds(), ProjectedSeconds: projectFromOnePair(runs[0], m.Shards, 2*cfg.Link.Latency)})
	}
	return out, runs, nil
}

// printShardScaling prints the measured sharded runs.
func printShardScaling(w io.Writer, demo shardDemo, link string, sc []bench.ShardScaling, runs []*shardMeasurement) error {
	fmt.Fprintf(w, "measured sharded selection (quickstart MNIST demo, %d candidates, %s) as OS processes on loopback, each pair's and the coordinators' link through its own relay of %s, one dealer per pair (the coordinators sharing pair 0's) on unshaped loopback:\n",
		demo.Pool, demo, link)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pairs\tprocesses\tlinks\twall s\tphases s\tCPU s\tCPU/wall\tspeed-up\tefficiency\tprojected s\tmodel error\tselected\t")
	for i, s := range sc {
		m := runs[i]
		ph := make([]string, len(m.Phases))
		for j, p := range m.Phases {
			ph[j] = fmt.Sprintf("%.1f", p.Seconds)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.1f\t%+.0f%%\t%d\t\n", s.Shards, m.Processes, m.LinkRelays, s.Seconds, strings.Join(ph, " + "), m.CPU.Seconds(),
			m.CPU.Seconds()/s.Seconds, s.Speedup(), s.Efficiency(), s.ProjectedSeconds, 100*s.ModelError(), m.Selected)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "projected: bench.ProjectShards's model applied to the one-pair run's phases (outside the phases unchanged; per phase QuickSelect, its rounds × the round trip, unchanged and the forward paced by the largest shard, ⌈batches ÷ K⌉); model error = (measured − projected) ÷ projected.")
	fmt.Fprintf(w, "CPU/wall is the processes' CPU time over the wall time (this machine has %d cores): well below the cores, the links bound the run; near them, the CPU does.\n", runtime.NumCPU())
	return nil
}

// printSharded prints a report's sharded projection, and the same with
// the other dealer deployment (one dealer host for every pair, or one per
// pair) where the run has a dealer on links of its own.
func printSharded(w io.Writer, rep *bench.SelectReport) error {
	sp := rep.Sharded
	fmt.Fprintf(w, "\nsharded on %d worker pairs per party (%s): %s\n", sp.Shards, bench.ShardDealerKind(sp), sp.Assumption)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tcandidates\tshards\tlargest\tpair s\tshared dealer s\tjobs s\tgather s\tQuickSelect s\thours\tlimiting (pairs' part)\t")
	for _, ph := range sp.Phases {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t%.3f\t%.1f\t%.3f\t%s\t\n", ph.Phase+1, ph.Candidates, ph.Shards, ph.LargestShard, ph.Pair.Seconds, ph.SharedDealerSeconds,
			ph.JobSeconds, ph.GatherSeconds, ph.TopKSeconds, ph.Seconds/3600, limitingOf(ph.Limiting, ph.LimitingLink))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	speedup := 0.0
	if sp.Seconds > 0 {
		speedup = sp.UnshardedSeconds / sp.Seconds
	}
	fmt.Fprintf(w, "projected to %d candidates on %d pairs: %.2f h%s over %s (limiting bound: %s); one pair: %.2f h (%.1f× faster on %d pairs)\n",
		sp.Pool, sp.Shards, sp.Hours, tooSmallMark(sp.TooSmall), sp.Link, limitingOf(sp.Limiting, sp.LimitingLink), sp.UnshardedSeconds/3600, speedup, sp.Shards)
	fmt.Fprintf(w, "bound model (each phase's pairs at their largest bound instead of the sample's measured rate): %.2f h\n", sp.BoundModelSeconds/3600)
	fmt.Fprintf(w, "bounds: bandwidth %.2f h, latency %.2f h, compute %.2f h (each pair's machines like the sample's: %s)\n", sp.BoundsHours[0], sp.BoundsHours[1], sp.BoundsHours[2], rep.ComputeRun().CPU)
	printLinks(w, sp.Bounds.Links, sp.LimitingLink)
	if sp.Dealers > 0 && sp.Shards > 1 {
		alt := bench.ShardConfig{Shards: sp.Shards, Dealers: sp.Shards, Internal: internalProfile(sp.Internal)}
		if sp.Dealers != 1 {
			alt.Dealers = 1
		}
		ap, err := rep.ProjectShards(sp.Pool, alt)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "with %s instead: %.2f h%s (limiting bound: %s; bound model %.2f h)\n", bench.ShardDealerKind(ap), ap.Hours, tooSmallMark(ap.TooSmall),
			limitingOf(ap.Limiting, ap.LimitingLink), ap.BoundModelSeconds/3600)
	}
	return nil
}

// internalProfile returns the profile of an internal network's spec (no
// shaping for "none").
func internalProfile(l bench.LinkSpec) *transport.Profile {
	if p := l.Profile(); p != nil {
		return p
	}
	return &transport.NoLink
}

// limitingOf names a limiting bound, with the link when it is the
// bandwidth bound.
func limitingOf(bound, link string) string {
	if bound == bench.BoundBandwidth && link != "" {
		return bound + ", " + link + " link"
	}
	return bound
}

// tooSmallMark flags a figure projected from a sample too small to
// project from.
func tooSmallMark(tooSmall string) string {
	if tooSmall == "" {
		return ""
	}
	return " (UNRELIABLE: sample too small)"
}

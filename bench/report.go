package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/share"
)

// Machine describes the machine a report ran on.
type Machine struct {
	// CPU is /proc/cpuinfo's first "model name" (runtime.GOARCH elsewhere),
	// the ring GEMM kernel this process runs (share.RingKernel) and the HE
	// weight product's kernel (he.MacKernel), e.g. "AMD EPYC, ring kernel
	// avx512-vpmullq, HE kernel avx512": the kernels decide the compute
	// bound as much as the processor does.
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Load is the 1-, 5- and 15-minute load average (/proc/loadavg) when the
	// machine was described ("" where unknown).
	Load string `json:"load"`
	Date string `json:"date"`
}

// CurrentMachine describes this machine now.
func CurrentMachine() Machine {
	m := Machine{CPU: runtime.GOARCH, Cores: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Load: LoadAverage(), Date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.CPU += ", ring kernel " + share.RingKernel() + ", HE kernel " + he.MacKernel()
	return m
}

// LoadAverage returns the first three fields of /proc/loadavg ("" where
// there is none).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// hours renders hours with sensible precision.
func hours(h float64) string {
	switch {
	case h >= 100:
		return fmt.Sprintf("%.0f h", h)
	case h >= 1:
		return fmt.Sprintf("%.1f h", h)
	default:
		return fmt.Sprintf("%.2f h", h)
	}
}

// schedule renders a workload's schedule.
func schedule(w Workload) string {
	var ps, sv []string
	for _, p := range w.Phases {
		if w.Exact {
			ps = append(ps, fmt.Sprintf("exact %d-layer %s", p.Layers, w.Shape))
		} else {
			ps = append(ps, p.String())
		}
		sv = append(sv, fmt.Sprintf("%.0f%%", 100*p.Survive))
	}
	return strings.Join(ps, " → ") + " (pool surviving, bootstrap included: 100% → " + strings.Join(sv, " → ") + ")"
}

// WriteSelectSummary writes the summary table of the reports: per workload
// the sample, the projection, the three bounds (the bandwidth bound the
// largest link's, named), the limiting one, the CPU of the runs and the
// paper's delay for the same setting (Workload.Paper[0]) with our ratio;
// one row per pipeline mode (the baseline's, with the pipeline off, where
// the report has one) and per placement of the dealer (Deployments), then
// the pipeline's gain over its baseline.
func WriteSelectSummary(w io.Writer, reps []*SelectReport) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| workload | pool | pipeline | dealer | sample (candidates, measured s) | projected | bandwidth bound (link) | latency bound | compute bound | limiting | CPU | paper, same setting | ours ÷ paper |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	var warnings []string
	row := func(r *SelectReport, run *SampleRun, p *Projection) {
		paper, ratio := "—", "—"
		if len(r.Workload.Paper) > 0 {
			d := r.Workload.Paper[0]
			paper = fmt.Sprintf("%s: %s", d.Label, hours(d.Hours))
			ratio = fmt.Sprintf("%.3g", p.Hours/d.Hours)
		}
		proj := "**" + hours(p.Hours) + "**"
		if p.TooSmall != "" {
			proj = hours(p.Hours) + " ⚠ sample too small"
			warnings = append(warnings, fmt.Sprintf("⚠ `%s` (%s, %s): %s.", r.Workload.Name, modeString(run, p), run.Placement(), p.TooSmall))
		}
		fmt.Fprintf(bw, "| `%s` | %d | %s | %s | %d, %.0f s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Workload.Name, p.Pool, modeString(run, p), run.Placement(),
			run.Samples, run.Seconds, proj, bandwidthBound(p), hours(p.BoundsHours[1]), hours(p.BoundsHours[2]), limiting(p), runCPU(run, r), paper, ratio)
	}
	for _, r := range reps {
		row(r, r.Sample, r.Projection)
		if r.Off != nil && r.OffProjection != nil {
			row(r, r.Off, r.OffProjection)
		}
		for _, d := range r.Deployments {
			row(r, d.Sample, d.Projection)
		}
	}
	if len(warnings) > 0 {
		fmt.Fprintf(bw, "\n%s\n", strings.Join(warnings, "\n"))
	}
	var gains []string
	for _, r := range reps {
		if g, ok := r.Gain(); ok {
			gains = append(gains, gainString(r, g))
		}
	}
	if len(gains) > 0 {
		fmt.Fprintf(bw, "\nPipeline on against off (same machine, same link; the off row's compute bound is the shared run without a link): %s\n", strings.Join(gains, " "))
	}
	return bw.Flush()
}

// bandwidthBound renders a projection's bandwidth bound and the link that
// sets it.
func bandwidthBound(p *Projection) string {
	if p.LimitingLink == "" {
		return hours(p.BoundsHours[0])
	}
	return fmt.Sprintf("%s (%s)", hours(p.BoundsHours[0]), p.LimitingLink)
}

// limiting names a projection's limiting bound, with its link when it is
// the bandwidth bound.
func limiting(p *Projection) string {
	if p.Limiting == BoundBandwidth && p.LimitingLink != "" {
		return fmt.Sprintf("%s (%s)", p.Limiting, p.LimitingLink)
	}
	return p.Limiting
}

// runCPU names the CPU of a run: its own record, else that of the report's
// compute run, else "not recorded" (runs from before the CPU was kept).
func runCPU(run *SampleRun, r *SelectReport) string {
	for _, x := range []*SampleRun{run, r.ComputeRun(), r.Sample} {
		if x != nil && x.CPU != "" {
			return x.CPU
		}
	}
	return "not recorded"
}

// WriteLinkBounds writes a projection's bound per link as a markdown
// table: each direction's bytes, the bandwidth, the bound.
func WriteLinkBounds(w io.Writer, p *Projection) error {
	if len(p.Bounds.Links) == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| link | profile | one way | other way | bandwidth | bound |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|")
	for _, l := range p.Bounds.Links {
		ways := [2]string{"P0→P1", "P1→P0"}
		if l.Link != LinkParties {
			party := strings.TrimPrefix(l.Link, "dealer↔")
			ways = [2]string{"dealer→" + party, party + "→dealer"}
		}
		bwText := "unlimited"
		if l.BandwidthBytesPS > 0 {
			bwText = FormatBytes(float64(l.BandwidthBytesPS)) + "/s"
		}
		mark := ""
		if l.Link == p.LimitingLink {
			mark = " (largest)"
		}
		fmt.Fprintf(bw, "| %s | %s | %s %s | %s %s | %s | %s%s |\n", l.Link, l.Profile, ways[0], FormatBytes(float64(l.Bytes[0])), ways[1], FormatBytes(float64(l.Bytes[1])),
			bwText, hours(l.Seconds/3600), mark)
	}
	return bw.Flush()
}

// modeString describes a run's batch scheduling: the pipeline mode and the
// batches in flight on the critical path.
func modeString(run *SampleRun, p *Projection) string {
	switch {
	case p.Pipeline == "off":
		return "off (1 batch at a time)"
	case run.Pipeline == "":
		return fmt.Sprintf("before the pipeline (%d slots)", p.Lanes)
	}
	s := fmt.Sprintf("on (%d lanes", p.Lanes)
	for i := range p.Phases {
		if l := p.PhaseLanes(i); l != p.Lanes {
			s += fmt.Sprintf("; phase %d: %d", i+1, l)
		}
	}
	return s + ")"
}

// gainString states a workload's pipeline gain against the goals of the
// pipelined scheduler (speed-up ≥ 1.5×, projected ≤ 1.2 × max(bandwidth,
// compute bound)).
func gainString(r *SelectReport, g PipelineGain) string {
	meets := func(ok bool) string {
		if ok {
			return "meets"
		}
		return "misses"
	}
	s := fmt.Sprintf("`%s`: projected speed-up %.2f× (off %s ÷ on %s; goal ≥ 1.5×: %s)", r.Workload.Name, g.ProjectedSpeedup,
		hours(r.OffProjection.Hours), hours(r.Projection.Hours), meets(g.ProjectedSpeedup >= 1.5))
	if g.MeasuredSpeedup > 0 {
		s += fmt.Sprintf(", measured speed-up of the sample over the link %.2f× (%.0f s ÷ %.0f s)", g.MeasuredSpeedup, r.Off.Seconds, r.Sample.Seconds)
	}
	return s + fmt.Sprintf("; pipelined projected ÷ max(bandwidth, compute bound) = %.2f (goal ≤ 1.2: %s).", g.OverBound, meets(g.OverBound <= 1.2))
}

// WriteSelectDetails writes one workload's sample run, cross-check and
// projection as markdown.
func WriteSelectDetails(w io.Writer, r *SelectReport) error {
	bw := bufio.NewWriter(w)
	wl, p := r.Workload, r.Projection
	fmt.Fprintf(bw, "### `%s`: %s, pool %d\n\n", wl.Name, wl.Target, wl.Pool)
	fmt.Fprintf(bw, "Schedule %s; budget %.0f%%, bootstrap %.0f%%; sequence %d; %s, pipeline %s", schedule(wl), 100*wl.Budget, 100*wl.Bootstrap, wl.Seq, wl.BatchesText(), modeString(r.Sample, p))
	if b := r.Sample.MemoryBudget; b > 0 {
		fmt.Fprintf(bw, ", prefetch budget %s per party", FormatBytes(float64(b)))
	}
	fmt.Fprint(bw, ". ")
	fmt.Fprintf(bw, "Link: %s; %s. CPU: %s.\n\n", r.LinkString(), r.Sample.Placement(), runCPU(r.Sample, r))
	fmt.Fprintf(bw, "Sample run (%d synthetic candidates, random weights; the whole pipeline with checkpoints; %.1f s over the link", r.Sample.Samples, r.MeasuredSeconds)
	if r.Compute != nil {
		fmt.Fprintf(bw, ", %.1f s without", r.Compute.Seconds)
	}
	fmt.Fprint(bw, "). Bytes are what each party sent; dealer bytes both parties' traffic with the dealer; peak heap is the one process's (both parties and the dealer).")
	for _, run := range []*SampleRun{r.Sample, r.Compute, r.Processes} {
		if run == nil || run.CPUSeconds == 0 || run.Cores == 0 || run.Seconds == 0 {
			continue
		}
		kind := "in-process"
		if run.Processes {
			kind = "separate processes'"
		}
		fmt.Fprintf(bw, " The %s run with link %s took %.0f s of wall time and %.0f s of CPU time on %d cores (it got %.0f%% of the machine; load average %s before, %s after).",
			kind, run.Link, run.Seconds, run.CPUSeconds, run.Cores, 100*run.CPUSeconds/(float64(run.Cores)*run.Seconds), run.LoadBefore, run.LoadAfter)
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw)
	fmt.Fprintln(bw, "| phase | network | candidates → kept | rounds | P0→P1 | P1→P0 | dealer | s over link | s no link | peak heap | batches in flight | prefetch held P0 / P1 |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	comp := r.ComputeRun()
	for i, ph := range r.Sample.Phases {
		fmt.Fprintf(bw, "| %d | %s | %d → %d | %d | %s | %s | %s | %.1f | %.1f | %s | %d | %s / %s |\n", ph.Phase+1, ph.Proxy, ph.Candidates, ph.Kept, ph.Rounds,
			FormatBytes(float64(ph.BytesP0)), FormatBytes(float64(ph.BytesP1)), FormatBytes(float64(ph.DealerBytes)), ph.Seconds, comp.Phases[i].Seconds, FormatBytes(float64(ph.PeakHeapAll)),
			ph.PeakInFlight, FormatBytes(float64(ph.PeakPrefetchP0)), FormatBytes(float64(ph.PeakPrefetchP1)))
	}
	fmt.Fprintln(bw)
	if off, op := r.Off, r.OffProjection; off != nil && op != nil {
		fmt.Fprintf(bw, "Baseline, the same sample over the link with the pipeline off (one batch at a time, no prefetch): %.1f s; projected **%s**, bounds: bandwidth %s, latency %s (%d rounds), compute %s (shared): %s-bound.\n\n",
			off.Seconds, hours(op.Hours), hours(op.BoundsHours[0]), hours(op.BoundsHours[1]), op.Rounds, hours(op.BoundsHours[2]), op.Limiting)
		fmt.Fprintln(bw, "| phase | rounds on / off | s over link on / off | peak heap on / off |")
		fmt.Fprintln(bw, "|---|---|---|---|")
		for i, ph := range r.Sample.Phases {
			o := off.Phases[i]
			fmt.Fprintf(bw, "| %d | %d / %d | %.1f / %.1f | %s / %s |\n", ph.Phase+1, ph.Rounds, o.Rounds, ph.Seconds, o.Seconds, FormatBytes(float64(ph.PeakHeapAll)), FormatBytes(float64(o.PeakHeapAll)))
		}
		fmt.Fprintln(bw)
		if g, ok := r.Gain(); ok {
			fmt.Fprintf(bw, "%s\n\n", gainString(r, g))
		}
	}
	if pr := r.Processes; pr != nil {
		fmt.Fprintf(bw, "Separate processes (`--processes`: dealer, P0 and P1 as OS processes over TLS, P0↔P1 through a linkem relay with the link): %.1f s; peak Go heap per party and phase:", pr.Seconds)
		for _, ph := range pr.Phases {
			fmt.Fprintf(bw, " phase %d P0 %s, P1 %s;", ph.Phase+1, FormatBytes(float64(ph.PeakHeapP0)), FormatBytes(float64(ph.PeakHeapP1)))
		}
		fmt.Fprintf(bw, " dealer %s. Peak RSS: P0 %s, P1 %s, dealer %s.", FormatBytes(float64(pr.PeakHeapDealer)),
			FormatBytes(float64(pr.RSSP0)), FormatBytes(float64(pr.RSSP1)), FormatBytes(float64(pr.RSSDealer)))
		fmt.Fprintf(bw, "%s\n\n", hePassesString(pr.Phases))
		if cc := r.CrossCheck; cc != nil {
			fmt.Fprintf(bw, "Cross-check against the in-process emulation (tolerance %.0f%%; agree: **%v**):\n\n", 100*cc.Tolerance, cc.Agree)
			fmt.Fprintln(bw, "| figure | in-process | processes | difference |")
			fmt.Fprintln(bw, "|---|---|---|---|")
			for _, c := range cc.Checks {
				fmt.Fprintf(bw, "| %s | %.4g | %.4g | %+.1f%% |\n", c.Name, c.InProcess, c.Processes, 100*c.RelDiff)
			}
			fmt.Fprintln(bw)
		}
	}
	fmt.Fprintf(bw, "Projected to the pool of %d (forward: the sample's per-candidate cost × candidates, rounds per batch × ⌈batches ÷ lanes⌉, the phase's batches in flight with the pipeline %s; QuickSelect measured at the phase's size):\n\n", p.Pool, p.Pipeline)
	fmt.Fprintln(bw, "| phase | candidates → kept | batches | lanes | rounds | P0→P1 | P1→P0 | dealer | QuickSelect comparisons (expected) | QuickSelect s | hours | hours no link |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for i, ph := range p.Phases {
		fmt.Fprintf(bw, "| %d | %d → %d | %d | %d | %d | %s | %s | %s | %d (%.0f) | %.1f | %.2f | %.2f |\n", ph.Phase+1, ph.Candidates, ph.Kept, ph.Batches, p.PhaseLanes(i), ph.Rounds,
			FormatBytes(float64(ph.BytesP0)), FormatBytes(float64(ph.BytesP1)), FormatBytes(float64(ph.DealerBytes)),
			ph.TopK.Comparisons, ph.ExpectedComparisons, ph.TopKSeconds, ph.Seconds/3600, ph.ComputeSeconds/3600)
	}
	fmt.Fprintln(bw)
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := WriteLinkBounds(w, p); err != nil {
		return err
	}
	if len(p.Bounds.Links) > 0 {
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "**Projected delay %s** over %s (%s); bounds: bandwidth %s (the busiest direction of the %s link), latency %s (%d rounds), compute %s (CPU: %s): **%s-bound**.",
		hours(p.Hours), p.Link, DealerPlacement(p.DealerLinks), hours(p.BoundsHours[0]), linkOr(p.LimitingLink, LinkParties), hours(p.BoundsHours[1]), p.Rounds, hours(p.BoundsHours[2]), runCPU(r.ComputeRun(), r), limiting(p))
	if p.TooSmall != "" {
		fmt.Fprintf(bw, " ⚠ Not a steady-rate projection: %s.", p.TooSmall)
	}
	if p.AtBandwidth {
		fmt.Fprintf(bw, " The phases' paces summed to %s, below the bandwidth bound: projected at the bound.", hours(p.PaceSeconds/3600))
	}
	if c := r.ComputeRun(); c.CPUSeconds > 0 && c.Seconds > 0 && c.Cores > 0 {
		share := c.CPUSeconds / (float64(c.Cores) * c.Seconds)
		fmt.Fprintf(bw, " The run without a link got %.0f%% of the %d cores; at the whole machine the compute bound would be about %s (the bound × that share).",
			100*share, c.Cores, hours(p.BoundsHours[2]*share))
	}
	if len(wl.Paper) > 0 {
		d := wl.Paper[0]
		fmt.Fprintf(bw, " The paper: %s, %s (ours ÷ paper = %.3g).", d.Label, hours(d.Hours), p.Hours/d.Hours)
	}
	fmt.Fprintln(bw)
	fmt.Fprintln(bw)
	for _, d := range r.Deployments {
		dp := d.Projection
		fmt.Fprintf(bw, "With the %s instead (the same sample over the link: %.1f s on %s): projected **%s**, %s-bound; bounds: bandwidth %s, latency %s, compute %s (shared).\n\n",
			d.Placement, d.Sample.Seconds, runCPU(d.Sample, r), hours(dp.Hours), limiting(dp), bandwidthBound(dp), hours(dp.BoundsHours[1]), hours(dp.BoundsHours[2]))
		if err := bw.Flush(); err != nil {
			return err
		}
		if err := WriteLinkBounds(w, dp); err != nil {
			return err
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}

// linkOr returns link, or def when it is empty.
func linkOr(link, def string) string {
	if link == "" {
		return def
	}
	return link
}

// ShardRow is one row of the sharded projections' table: a sharded
// projection (ProjectShards) of a sample run, the placement of its
// dealer (DealerPlacement) and the CPU the sample ran on.
type ShardRow struct {
	Placement string
	CPU       string
	P         *ShardedProjection
}

// WriteShardSummary writes the sharded projections as a markdown table:
// per row the workload, pool, worker pairs, dealer placement and hosts,
// the projection, its bound model and the same sample on one pair, the bounds (the
// bandwidth bound's link named), the limiting bound overall and per phase
// (of the pairs' part), and the CPU.
func WriteShardSummary(w io.Writer, rows []ShardRow) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "| workload | pool | pairs | dealer | dealer hosts | projected | bound model | one pair | bandwidth bound (link) | latency bound | compute bound | limiting | limiting per phase (pairs' part) | CPU |")
	fmt.Fprintln(bw, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		p := r.P
		proj := "**" + hours(p.Hours) + "**"
		if p.TooSmall != "" {
			proj = hours(p.Hours) + " ⚠ sample too small"
		}
		bwb := hours(p.BoundsHours[0])
		if p.LimitingLink != "" {
			bwb = fmt.Sprintf("%s (%s)", bwb, p.LimitingLink)
		}
		lim := p.Limiting
		if p.Limiting == BoundBandwidth && p.LimitingLink != "" {
			lim = fmt.Sprintf("%s (%s)", p.Limiting, p.LimitingLink)
		}
		var per []string
		for _, ph := range p.Phases {
			s := ph.Limiting
			if ph.Limiting == BoundBandwidth && ph.LimitingLink != "" {
				s = ph.LimitingLink
			}
			per = append(per, fmt.Sprintf("%d: %s", ph.Phase+1, s))
		}
		fmt.Fprintf(bw, "| `%s` | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", p.Workload, p.Pool, p.Shards, r.Placement, ShardDealerKind(p), proj,
			hours(p.BoundModelSeconds/3600), hours(p.UnshardedSeconds/3600), bwb, hours(p.BoundsHours[1]), hours(p.BoundsHours[2]), lim, strings.Join(per, "; "), r.CPU)
	}
	return bw.Flush()
}

// hePassesString says how many passes over the encrypted weights the data
// owner's HE products took in each phase's forward (products on the same
// weights that waited together share one), or nothing without HE products.
func hePassesString(phases []PhaseRun) string {
	var b strings.Builder
	for _, ph := range phases {
		if f := ph.Forward; f.HEProducts > 0 {
			if b.Len() == 0 {
				b.WriteString(" The data owner's HE products and their passes over the encrypted weights:")
			}
			fmt.Fprintf(&b, " phase %d %d in %d (%.1f a pass);", ph.Phase+1, f.HEProducts, f.HEPasses, float64(f.HEProducts)/float64(max(f.HEPasses, 1)))
		}
	}
	return strings.TrimSuffix(b.String(), ";") + map[bool]string{true: ".", false: ""}[b.Len() > 0]
}

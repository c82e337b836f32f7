package bench

import (
	"fmt"

	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// Bound names, in Projection.Limiting.
const (
	BoundCompute   = "compute"
	BoundBandwidth = "bandwidth"
	BoundLatency   = "latency"
)

// PhaseProjection is one phase of a projected full-pool run.
type PhaseProjection struct {
	Phase      int `json:"phase"`
	Candidates int `json:"candidates"`
	Kept       int `json:"kept"`
	Batches    int `json:"batches"`
	// Lanes is the batches of the phase in flight on the critical path
	// (LanesInFlight: the phase's own lanes, or the workload's, with the
	// pipeline on; 1 with it off; 0 in projections made before phases
	// had lanes of their own: Projection.Lanes).
	Lanes int `json:"lanes,omitempty"`
	// Rounds is the critical path: weight sharing, rounds per batch ×
	// ⌈batches ÷ Lanes⌉, QuickSelect.
	Rounds      int64 `json:"rounds"`
	BytesP0     int64 `json:"bytes_p0"`
	BytesP1     int64 `json:"bytes_p1"`
	DealerBytes int64 `json:"dealer_bytes"`
	// DealerDown[p] is the bytes the dealer sends party p and DealerUp[p]
	// the bytes party p sends the dealer (its requests): the directions of
	// the dealer's links (see Part.DealerDown; QuickSelect's dealer bytes
	// are counted to the party that received them, TopKCost.DealerDown).
	DealerDown [2]int64 `json:"dealer_down,omitzero"`
	DealerUp   [2]int64 `json:"dealer_up,omitzero"`
	// ForwardSeconds and ForwardComputeSeconds are the batches' projected
	// time with the link and without (per-candidate time of the sample
	// runs × candidates).
	ForwardSeconds        float64 `json:"forward_seconds"`
	ForwardComputeSeconds float64 `json:"forward_compute_seconds"`
	// TopK is QuickSelect at the phase's pool size (measured, or modelled
	// with TopKModel); TopKSeconds its time with the link: compute + rounds
	// × one-way latency + busiest direction / bandwidth (its steps are
	// sequential, so nothing overlaps).
	TopK                TopKCost `json:"topk"`
	ExpectedComparisons float64  `json:"expected_comparisons"`
	TopKSeconds         float64  `json:"topk_seconds"`
	// Seconds and ComputeSeconds are the phase's projected time with the
	// link and without.
	Seconds        float64 `json:"seconds"`
	ComputeSeconds float64 `json:"compute_seconds"`
}

// Bounds are lower bounds on a run's delay: per link, its busiest
// direction's bytes ÷ its bandwidth (Links; BandwidthSeconds is the
// largest), the critical path's rounds × the parties' link's one-way
// latency (a round is one exchange in which both parties send at once, so
// it costs one one-way delay: half the round-trip time), and the compute
// time (the same run without a link).
type Bounds struct {
	BandwidthSeconds float64 `json:"bandwidth_seconds"`
	LatencySeconds   float64 `json:"latency_seconds"`
	ComputeSeconds   float64 `json:"compute_seconds"`
	// Links holds each link's bandwidth bound: the parties' link
	// (LinkParties) and, where the dealer is a host of its own
	// (SampleRun.DealerLinks), its link to each party (LinkDealerP0,
	// LinkDealerP1). Empty in projections made before links were counted
	// apart (BandwidthSeconds is then the parties' link's).
	Links []LinkBound `json:"links,omitempty"`
}

// The links of Bounds.Links.
const (
	LinkParties  = "P0↔P1"
	LinkDealerP0 = "dealer↔P0"
	LinkDealerP1 = "dealer↔P1"
)

// LinkBound is one link's bandwidth bound: the bytes of its busiest
// direction ÷ its bandwidth (per direction).
type LinkBound struct {
	// Link names the link (LinkParties, LinkDealerP0, LinkDealerP1) and
	// Profile its emulated profile.
	Link             string `json:"link"`
	Profile          string `json:"profile"`
	BandwidthBytesPS int64  `json:"bandwidth_bytes_per_s"`
	// Bytes are the bytes each way: P0→P1 and P1→P0 on the parties' link,
	// dealer→party and party→dealer on a dealer's link.
	Bytes [2]int64 `json:"bytes"`
	// Seconds is max(Bytes) ÷ BandwidthBytesPS (0 for an unlimited link).
	Seconds float64 `json:"seconds"`
}

// NewLinkBound returns the bound of link (over spec) carrying a bytes one
// way and b the other.
func NewLinkBound(link string, spec LinkSpec, a, b int64) LinkBound {
	l := LinkBound{Link: link, Profile: spec.Name, BandwidthBytesPS: spec.BandwidthBytesPS, Bytes: [2]int64{a, b}}
	if spec.BandwidthBytesPS > 0 {
		l.Seconds = float64(max(a, b)) / float64(spec.BandwidthBytesPS)
	}
	return l
}

// LimitingLink returns the link with the largest bandwidth bound ("" when
// Links is empty; the first of equal ones).
func (b Bounds) LimitingLink() string {
	best, name := -1.0, ""
	for _, l := range b.Links {
		if l.Seconds > best {
			best, name = l.Seconds, l.Link
		}
	}
	return name
}

// LinkSpec is an emulated link of a run: its profile's name ("none"
// without a link), bandwidth per direction (bytes/s, 0: unlimited) and
// one-way latency.
type LinkSpec struct {
	Name             string  `json:"name"`
	BandwidthBytesPS int64   `json:"bandwidth_bytes_per_s"`
	LatencySeconds   float64 `json:"latency_seconds"`
}

// SpecOf describes profile p ("none" for nil).
func SpecOf(p *transport.Profile) LinkSpec {
	if p == nil {
		return LinkSpec{Name: "none"}
	}
	return LinkSpec{Name: p.Name, BandwidthBytesPS: p.Bandwidth, LatencySeconds: p.Latency.Seconds()}
}

// None reports whether the spec is no link.
func (l LinkSpec) None() bool { return l.Name == "" || l.Name == "none" }

// Profile returns the spec's profile (nil for none).
func (l LinkSpec) Profile() *transport.Profile {
	if l.None() {
		return nil
	}
	return &transport.Profile{Name: l.Name, Bandwidth: l.BandwidthBytesPS, Latency: secondsDuration(l.LatencySeconds)}
}

// String describes the spec as transport.Profile.String does.
func (l LinkSpec) String() string {
	if p := l.Profile(); p != nil {
		return p.String()
	}
	return "none"
}

// DealerPlacement describes where a run's dealer sat: in process (no
// link), or its link to each party.
func DealerPlacement(links [2]LinkSpec) string {
	switch {
	case links[0].None() && links[1].None():
		return "dealer in process (no link)"
	case links[0] == links[1]:
		return fmt.Sprintf("dealer on %s to both parties", links[0].Name)
	}
	return fmt.Sprintf("dealer on %s to P0, %s to P1", links[0].Name, links[1].Name)
}

// Placement says where the run's correlated randomness came from: no
// dealer (a dealer-free source: the parties' own link carried it), or the
// dealer's place (DealerPlacement).
func (r *SampleRun) Placement() string {
	if source.DealerFree(r.Provider) {
		return fmt.Sprintf("no dealer (-provider %s: the parties make the correlated randomness over their own link)", r.Provider)
	}
	return DealerPlacement(r.DealerLinks)
}

// Limiting returns the largest bound's name.
func (b Bounds) Limiting() string {
	switch {
	case b.ComputeSeconds >= b.BandwidthSeconds && b.ComputeSeconds >= b.LatencySeconds:
		return BoundCompute
	case b.BandwidthSeconds >= b.LatencySeconds:
		return BoundBandwidth
	default:
		return BoundLatency
	}
}

// Projection is a workload's projected full-pool run.
type Projection struct {
	Workload string `json:"workload"`
	Pool     int    `json:"pool"`
	Link     string `json:"link"`
	// Pipeline is the mode of the projected run (its over-link sample's:
	// "on", or "off"), Lanes the batches in flight on the critical path:
	// the workload's lanes with the pipeline on, 1 with it off (a phase
	// with lanes of its own: PhaseProjection.Lanes).
	Pipeline string `json:"pipeline,omitempty"`
	Lanes    int    `json:"lanes,omitempty"`
	// Seconds (Hours) is the projected delay with the link.
	Seconds float64 `json:"seconds"`
	Hours   float64 `json:"hours"`
	// Rounds, BytesP0, BytesP1 and DealerBytes total the phases.
	Rounds      int64      `json:"rounds"`
	BytesP0     int64      `json:"bytes_p0"`
	BytesP1     int64      `json:"bytes_p1"`
	DealerBytes int64      `json:"dealer_bytes"`
	Bounds      Bounds     `json:"bounds"`
	BoundsHours [3]float64 `json:"bounds_hours"` // bandwidth (the largest link's), latency, compute
	Limiting    string     `json:"limiting"`
	// LimitingLink names the link whose bandwidth bound is the largest
	// (Bounds.LimitingLink): the limiting one when Limiting is bandwidth.
	LimitingLink string `json:"limiting_link,omitempty"`
	// DealerLinks are the dealer's links to party 0 and party 1 in the
	// over-link sample (SampleRun.DealerLinks; zero: in process).
	DealerLinks [2]LinkSpec       `json:"dealer_links,omitzero"`
	Phases      []PhaseProjection `json:"phases"`
	// ComputeHosts says where the compute bound charges the parties' CPU:
	// ComputeShared (both parties on one machine: the wall time of the run
	// without a link, where they took turns on its cores) or ComputeOwn
	// (each party on a host of its own with ComputeCores cores: the larger
	// of the parties' CPU seconds ÷ ComputeCores, from a run with each
	// party in its own process). Empty in projections made before.
	ComputeHosts string `json:"compute_hosts,omitempty"`
	ComputeCores int    `json:"compute_cores,omitempty"`
	// TooSmall, when not empty, says why the sample was too small to
	// project from (SteadySampleBatches): a phase of the over-link sample
	// ran fewer batches than twice the lanes in flight, so no steady rate
	// was measured and the projection charges the phase's start-up to
	// every candidate. The figure is flagged wherever it is printed, and
	// `mpcbench report --regenerate` refuses it.
	TooSmall string `json:"too_small,omitempty"`
	// AtBandwidth says that the phases' paces summed to less than the
	// bandwidth bound (PaceSeconds), which no run can beat: every byte
	// of the busiest direction crosses at the link's rate. Seconds is
	// then the bound. A sample's pace can undercut it by a few percent
	// (the emulated link's queues let a short sample's first bursts
	// through ahead of the rate; qqp-bert's 1,024 samples gave phases
	// summing to 1.74 h against a 1.83 h bound).
	AtBandwidth bool    `json:"at_bandwidth,omitempty"`
	PaceSeconds float64 `json:"pace_seconds,omitempty"`
}

// PhaseLanes returns the batches of phase i in flight on the critical
// path: the phase's Lanes, or, in a projection made before phases had
// lanes of their own, the run's.
func (p *Projection) PhaseLanes(i int) int {
	if i >= 0 && i < len(p.Phases) && p.Phases[i].Lanes > 0 {
		return p.Phases[i].Lanes
	}
	return p.Lanes
}

// The values of Projection.ComputeHosts.
const (
	ComputeShared = "shared"
	ComputeOwn    = "own"
)

// SteadySampleBatches is the fewest batches a phase of a sample must run
// for its steady rate to be measured (see Project): the first wave of lanes
// batches pays the phase's start-up and the rate is measured over the
// batches after it, so at least one more full wave, 2 × lanes batches in
// all. A sample with fewer in some phase is too small to project from.
func SteadySampleBatches(lanes int) int { return 2 * max(lanes, 1) }

// tooSmall returns why run (phase i of lanes(i) batches in flight) is too
// small to project from, or "": the phase whose batches fall furthest
// short of its SteadySampleBatches, with the sample size that would do
// (scaled from it).
func tooSmall(run *SampleRun, lanes func(i int) int) string {
	at, more := -1, 0
	for i, ph := range run.Phases {
		need := SteadySampleBatches(lanes(i))
		if ph.Batches >= need {
			continue
		}
		if m := run.Samples * need / max(ph.Batches, 1); at < 0 || m > more {
			at, more = i, m
		}
	}
	if at < 0 {
		return ""
	}
	ph, l := run.Phases[at], lanes(at)
	return fmt.Sprintf("the sample is too small to project from: phase %d ran %d batch(es) of the %d needed (2 × %d lanes) to measure a steady rate, "+
		"so the projection charges the phase's start-up to every candidate and overstates the delay; rerun with --samples %d or more",
		at+1, ph.Batches, SteadySampleBatches(l), l, max(more, run.Samples+1))
}

// Project projects a workload to a pool of n candidates (Workload.Pool when
// n is 0) from its sample runs with the link (linkRun) and without
// (computeRun; the same run when link is nil) and QuickSelect's cost at the
// phases' pool sizes (topk(N, K)).
//
// Per phase, the forward's bytes and dealer bytes are the sample's per
// candidate times the phase's candidates, its seconds the sample's plus its
// steady rate for the remaining candidates (forwardSeconds: the start-up
// of a phase is paid once, not per candidate), its rounds the sample's per
// batch times ⌈batches ÷ lanes⌉ (LanesInFlight of the phase in the
// over-link run's mode: all the phase's lanes run at once with the
// pipeline on, one batch at a time with it off), plus the weight sharing
// once; QuickSelect's cost is topk's.
func Project(w Workload, n int, link *transport.Profile, linkRun, computeRun *SampleRun, topk func(n, k int) (TopKCost, error)) (*Projection, error) {
	if n == 0 {
		n = w.Pool
	}
	if linkRun == nil || computeRun == nil {
		return nil, fmt.Errorf("bench: project: missing sample run")
	}
	if len(linkRun.Phases) != len(w.Phases) || len(computeRun.Phases) != len(w.Phases) {
		return nil, fmt.Errorf("bench: project: sample runs of %d and %d phases for %d", len(linkRun.Phases), len(computeRun.Phases), len(w.Phases))
	}
	cand, kept, err := w.PhaseSizes(n)
	if err != nil {
		return nil, err
	}
	mode := linkRun.Pipeline
	switch selection.PipelineMode(mode) {
	case "":
		mode = string(selection.PipelineOn)
	case selection.PipelineOn, selection.PipelineOff:
	default:
		return nil, fmt.Errorf("bench: project: sample run with pipeline %q", mode)
	}
	lanes := func(i int) int { return LanesInFlight(w, i, mode) }
	pr := &Projection{Workload: w.Name, Pool: n, Link: "none", Pipeline: mode, Lanes: lanes(-1), ComputeHosts: ComputeShared}
	own := computeRun.PerParty()
	if own {
		pr.ComputeHosts, pr.ComputeCores = ComputeOwn, max(computeRun.Cores, 1)
	}
	var lat float64
	if link != nil {
		pr.Link = link.Name
		lat = link.Latency.Seconds()
	}
	dealer := !source.DealerFree(linkRun.Provider) && linkRun.DealerLinks != [2]LinkSpec{}
	if dealer {
		pr.DealerLinks = linkRun.DealerLinks
	}
	for i := range w.Phases {
		lr, cr := linkRun.Phases[i], computeRun.Phases[i]
		if err := checkSamplePhase(i, lr, cr); err != nil {
			return nil, err
		}
		c := cand[i]
		tk, err := topk(c, kept[i])
		if err != nil {
			return nil, err
		}
		ph := pairPhase(w, i, c, lanes(i), lr, cr)
		prepareCompute := cr.Prepare.Seconds
		if own {
			var all float64
			ph.ForwardComputeSeconds, all = ownHostSeconds(cr, float64(c)/float64(cr.Candidates), pr.ComputeCores)
			prepareCompute = all - ph.ForwardComputeSeconds
		}
		ph.Kept, ph.TopK, ph.ExpectedComparisons = kept[i], tk, ExpectedComparisons(c, kept[i])
		ph.Rounds += tk.Rounds
		ph.BytesP0 += tk.BytesP0
		ph.BytesP1 += tk.BytesP1
		ph.DealerBytes += tk.DealerBytes
		for p, d := range tk.DealerDown() {
			ph.DealerDown[p] += d
		}
		ph.TopKSeconds = topKSeconds(tk, link)
		ph.Seconds = lr.Prepare.Seconds + ph.ForwardSeconds + ph.TopKSeconds
		ph.ComputeSeconds = prepareCompute + ph.ForwardComputeSeconds + tk.Seconds
		pr.Phases = append(pr.Phases, ph)
		pr.Seconds += ph.Seconds
		pr.Rounds += ph.Rounds
		pr.BytesP0 += ph.BytesP0
		pr.BytesP1 += ph.BytesP1
		pr.DealerBytes += ph.DealerBytes
		pr.Bounds.ComputeSeconds += ph.ComputeSeconds
	}
	if link != nil {
		b0, b1 := pr.BytesP0, pr.BytesP1
		if source.DealerFree(linkRun.Provider) {
			// No dealer: the provider's traffic shares the parties' link,
			// each party's in the direction it sent it (its DealerUp: the
			// bytes party p sent are the bytes the other received, so
			// DealerBytes, both parties' sent and received, counts every
			// byte twice). Runs recorded without the directions count all
			// of DealerBytes on the busiest direction.
			var up [2]int64
			for _, ph := range pr.Phases {
				up[0] += ph.DealerUp[0]
				up[1] += ph.DealerUp[1]
			}
			switch {
			case up != [2]int64{}:
				b0 += up[0]
				b1 += up[1]
			case b0 >= b1:
				b0 += pr.DealerBytes
			default:
				b1 += pr.DealerBytes
			}
		}
		pr.Bounds.Links = []LinkBound{NewLinkBound(LinkParties, SpecOf(link), b0, b1)}
		if dealer {
			var down, up [2]int64
			for _, ph := range pr.Phases {
				for p := range 2 {
					down[p] += ph.DealerDown[p]
					up[p] += ph.DealerUp[p]
				}
			}
			for p, name := range []string{LinkDealerP0, LinkDealerP1} {
				if !pr.DealerLinks[p].None() {
					pr.Bounds.Links = append(pr.Bounds.Links, NewLinkBound(name, pr.DealerLinks[p], down[p], up[p]))
				}
			}
		}
		for _, l := range pr.Bounds.Links {
			pr.Bounds.BandwidthSeconds = max(pr.Bounds.BandwidthSeconds, l.Seconds)
		}
		pr.Bounds.LatencySeconds = float64(pr.Rounds) * lat
		if pr.Seconds < pr.Bounds.BandwidthSeconds {
			pr.PaceSeconds, pr.AtBandwidth = pr.Seconds, true
			pr.Seconds = pr.Bounds.BandwidthSeconds
		}
	} else {
		pr.Seconds = pr.Bounds.ComputeSeconds
	}
	pr.TooSmall = tooSmall(linkRun, lanes)
	pr.Hours = pr.Seconds / 3600
	pr.BoundsHours = [3]float64{pr.Bounds.BandwidthSeconds / 3600, pr.Bounds.LatencySeconds / 3600, pr.Bounds.ComputeSeconds / 3600}
	pr.Limiting = pr.Bounds.Limiting()
	pr.LimitingLink = pr.Bounds.LimitingLink()
	return pr, nil
}

// checkSamplePhase checks that phase i of both sample runs ran batches.
func checkSamplePhase(i int, lr, cr PhaseRun) error {
	if lr.Forward.Seconds <= 0 || cr.Forward.Seconds <= 0 || cr.Candidates <= 0 || lr.Candidates <= 0 {
		return fmt.Errorf("bench: project: phase %d of the sample ran no batch", i+1)
	}
	return nil
}

// pairPhase projects the weight sharing and the forward of phase i on c
// candidates on one pair of machines (the sample's: linkRun's phase lr,
// computeRun's cr), lanes batches in flight: the part of a phase
// projection before QuickSelect (Kept, TopK, ExpectedComparisons and
// TopKSeconds are left zero; Seconds and ComputeSeconds are the weight
// sharing plus the forward). Per candidate, the forward's bytes and dealer
// bytes are the sample's times c ÷ the sample's candidates, its rounds the
// weight sharing's plus the sample's per batch × ⌈batches ÷ lanes⌉, its
// seconds forwardSeconds of the sample's. The dealer links' directions
// are the over-link run's (what crossed its dealer links, framing and
// requests included, when it had them), scaled alike.
func pairPhase(w Workload, i, c, lanes int, lr, cr PhaseRun) PhaseProjection {
	per := float64(c) / float64(cr.Candidates)
	bs := w.PhaseBatchSize(i)
	nb := (c + bs - 1) / bs
	waves := (nb + lanes - 1) / lanes
	ph := PhaseProjection{Phase: i, Candidates: c, Batches: nb, Lanes: lanes}
	ph.Rounds = cr.Prepare.Rounds + int64(waves)*cr.RoundsPerBatch
	ph.BytesP0 = cr.Prepare.BytesP0 + int64(float64(cr.Forward.BytesP0)*per)
	ph.BytesP1 = cr.Prepare.BytesP1 + int64(float64(cr.Forward.BytesP1)*per)
	ph.DealerBytes = cr.Prepare.DealerBytes + int64(float64(cr.Forward.DealerBytes)*per)
	perL := float64(c) / float64(lr.Candidates)
	pd, pu := lr.Prepare.dealerDirections()
	fd, fu := lr.Forward.dealerDirections()
	for p := range 2 {
		ph.DealerDown[p] = pd[p] + int64(float64(fd[p])*perL)
		ph.DealerUp[p] = pu[p] + int64(float64(fu[p])*perL)
	}
	ph.ForwardSeconds = forwardSeconds(lr.Forward.Seconds, lr.Candidates, lr.Steady, c)
	ph.ForwardComputeSeconds = forwardSeconds(cr.Forward.Seconds, cr.Candidates, cr.Steady, c)
	ph.Seconds = lr.Prepare.Seconds + ph.ForwardSeconds
	ph.ComputeSeconds = cr.Prepare.Seconds + ph.ForwardComputeSeconds
	return ph
}

// ownHostSeconds is a phase's compute time (the forward's, and the
// weight sharing's with it) with each party on a host of its own of cores
// cores: the busier party's CPU seconds, the forward's scaled by per (the
// projected candidates ÷ the sample's), spread over its cores. It assumes
// the party keeps its cores busy (its lanes run at once), so it is a lower
// bound, as the other bounds are.
func ownHostSeconds(cr PhaseRun, per float64, cores int) (forward, phase float64) {
	for p := range 2 {
		f := cr.Forward.CPUSeconds[p] * per / float64(cores)
		forward = max(forward, f)
		phase = max(phase, cr.Prepare.CPUSeconds[p]/float64(cores)+f)
	}
	return forward, phase
}

// topKSeconds is QuickSelect's time over link (nil: none): its compute,
// plus its rounds × the one-way latency and its busiest direction ÷ the
// bandwidth (its steps are sequential, so nothing overlaps).
func topKSeconds(tk TopKCost, link *transport.Profile) float64 {
	s := tk.Seconds
	if link != nil {
		s += float64(tk.Rounds) * link.Latency.Seconds()
		if link.Bandwidth > 0 {
			s += float64(max(tk.BytesP0, tk.BytesP1)) / float64(link.Bandwidth)
		}
	}
	return s
}

// forwardSeconds projects a phase's forward to c candidates from a sample
// whose forward took seconds for n: the sample's time once (its first wave
// with the phase's start-up included) plus the steady rate for the other
// c − n candidates, or the sample's rate per candidate times c when the
// sample measured no steady rate (a single wave, or a run recorded before
// it was measured) or projects to fewer candidates than it ran.
func forwardSeconds(seconds float64, n int, st Steady, c int) float64 {
	per := st.PerCandidate()
	if per <= 0 || c <= n {
		return seconds / float64(n) * float64(c)
	}
	return seconds + per*float64(c-n)
}

// LanesInFlight is the number of batches phase i of a run of w in mode
// (a selection.PipelineMode; "" is on) has in flight on its critical
// path: the phase's lanes (Workload.PhaseWorkers; i outside the phases:
// w.Workers) with the pipeline on (every lane at once), 1 with it off.
func LanesInFlight(w Workload, i int, mode string) int {
	if selection.PipelineMode(mode) == selection.PipelineOff {
		return 1
	}
	return max(1, w.PhaseWorkers(i))
}

// BoundModelSeconds is the delay the bounds predict for the same work over
// another link: per phase, the forward takes the largest of its compute,
// bandwidth and latency bounds (batches overlap computation and
// communication), and QuickSelect the sum of its (its steps are
// sequential). A dealer's link (Projection.DealerLinks) whose profile is
// the parties' link's follows link (the dealer on the same network); one
// of another profile keeps its bandwidth. It draws the delay-vs-link
// curves of the report.
func BoundModelSeconds(p *Projection, link transport.Profile) float64 {
	lat, bw := link.Latency.Seconds(), float64(link.Bandwidth)
	var dbw [2]float64
	for q, d := range p.DealerLinks {
		switch {
		case d.None():
		case d.Name == p.Link:
			dbw[q] = bw
		default:
			dbw[q] = float64(d.BandwidthBytesPS)
		}
	}
	total := 0.0
	for _, ph := range p.Phases {
		fb0, fb1 := ph.BytesP0-ph.TopK.BytesP0, ph.BytesP1-ph.TopK.BytesP1
		fr := ph.Rounds - ph.TopK.Rounds
		f := ph.ForwardComputeSeconds
		if bw > 0 {
			f = max(f, float64(max(fb0, fb1))/bw)
		}
		for q := range 2 {
			if dbw[q] > 0 {
				down := ph.DealerDown[q]
				if q == 1 {
					down -= ph.TopK.DealerBytes
				}
				f = max(f, float64(max(down, ph.DealerUp[q]))/dbw[q])
			}
		}
		f = max(f, float64(fr)*lat)
		q := ph.TopK.Seconds + float64(ph.TopK.Rounds)*lat
		if bw > 0 {
			q += float64(max(ph.TopK.BytesP0, ph.TopK.BytesP1)) / bw
		}
		total += f + q
	}
	return total
}

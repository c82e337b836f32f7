package bench

import (
	"fmt"

	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/transport"
)

// MaxShards bounds ShardConfig.Shards: the worker pairs per party a
// projection accepts.
const MaxShards = 4096

// GatherBytesPerCandidate is what a worker sends its coordinator per
// candidate of its shard once the shard's forward is done: its party's
// share of the candidate's entropy, one ring word.
const GatherBytesPerCandidate = 8

// The links of a sharded projection (ShardedProjection.Bounds.Links) with
// more than one worker pair; LinkDealerP0 and LinkDealerP1 name a dealer's
// links when each pair has its own dealer (the largest shard's pair's).
const (
	// LinkPair is one worker pair's link (model-owner worker k ↔
	// data-owner worker k; the pair of the largest shard).
	LinkPair = "P0↔P1 pair"
	// LinkCoordinators is the coordinators' link: QuickSelect at the
	// phase's full size.
	LinkCoordinators = "P0↔P1 coordinators"
	// LinkDealerSharedP0 and LinkDealerSharedP1 are the links of one
	// dealer host serving every pair: all shards' dealer traffic.
	LinkDealerSharedP0 = "dealer↔P0 (shared by the pairs)"
	LinkDealerSharedP1 = "dealer↔P1 (shared by the pairs)"
	// LinkInternalP0 and LinkInternalP1 are each party's internal network
	// at its coordinator: the jobs it sends its workers one way, the
	// entropy shares they gather to it the other.
	LinkInternalP0 = "P0 internal"
	LinkInternalP1 = "P1 internal"
)

// ShardConfig describes a selection sharded over worker pairs: in each
// phase the candidates split into Shards contiguous shards at batch
// boundaries (ShardSizes), worker pair k (model-owner worker k ↔
// data-owner worker k) runs shard k's forward over its own link on
// machines like the sample's, each worker hands its party's shares of the
// shard's entropies to its party's coordinator over the party's internal
// network, and the coordinators run QuickSelect at the phase's full size
// over their own link (the parties' link of the sample).
type ShardConfig struct {
	// Shards is the number of worker pairs K (1: today's single pair, no
	// workers; at most MaxShards).
	Shards int `json:"shards"`
	// Dealers is the number of dealer hosts when the run has a dealer on
	// links of its own: K (the default when 0: the reference deployment,
	// examples/k8s), each pair its own dealer, whose links carry its
	// shard's, the coordinators drawing from pair 0's after the phase's
	// forward; or 1, one host serving the K pairs, whose links then carry
	// every shard's dealer traffic. A run without a dealer link (the
	// dealer-free providers, or the dealer in process) ignores it.
	Dealers int `json:"dealers"`
	// Internal is each party's internal network between its coordinator
	// and its workers (nil: transport.LAN).
	Internal *transport.Profile `json:"-"`
}

// dealers returns the configuration's dealer hosts (one per pair when
// unset).
func (c ShardConfig) dealers() int {
	if c.Dealers == 0 {
		return c.Shards
	}
	return c.Dealers
}

// internal returns the internal network's profile.
func (c ShardConfig) internal() transport.Profile {
	if c.Internal == nil {
		return transport.LAN
	}
	return *c.Internal
}

// Check checks the configuration.
func (c ShardConfig) Check() error {
	switch {
	case c.Shards < 1 || c.Shards > MaxShards:
		return fmt.Errorf("bench: shards %d: want 1 to %d worker pairs", c.Shards, MaxShards)
	case c.Dealers < 0 || c.Dealers > 1 && c.Dealers != c.Shards:
		return fmt.Errorf("bench: %d dealers for %d worker pairs: want 1 (one dealer host serving every pair) or %d (one per pair)", c.Dealers, c.Shards, c.Shards)
	case c.Internal != nil && (c.Internal.Bandwidth < 0 || c.Internal.Latency < 0):
		return fmt.Errorf("bench: internal network %s: negative bandwidth or latency", c.Internal)
	}
	return nil
}

// ShardSizes returns the candidates of each of k shards of n candidates
// in batches of batch: with nb = ⌈n ÷ batch⌉ batches, shard i gets batches
// [i·nb/k, (i+1)·nb/k) (contiguous, at batch boundaries; the last batch may
// be short, and with fewer batches than shards some shards are empty).
func ShardSizes(n, batch, k int) ([]int, error) {
	if n < 0 || batch <= 0 || k < 1 || k > MaxShards {
		return nil, fmt.Errorf("bench: shard %d candidates in batches of %d over %d shards", n, batch, k)
	}
	nb := (n + batch - 1) / batch
	out := make([]int, k)
	for i := range k {
		lo, hi := i*nb/k*batch, (i+1)*nb/k*batch
		out[i] = max(0, min(hi, n)-min(lo, n))
	}
	return out, nil
}

// ShardPhase is one phase of a sharded projection.
type ShardPhase struct {
	Phase      int `json:"phase"`
	Candidates int `json:"candidates"`
	Kept       int `json:"kept"`
	// Batches counts the phase's batches (all shards), Shards the shards
	// that got candidates and LargestShard the largest one's candidates:
	// the phase waits for its pair.
	Batches      int `json:"batches"`
	Shards       int `json:"shards"`
	LargestShard int `json:"largest_shard"`
	// Pair is the largest shard's pair: its weight sharing and forward
	// (pairPhase; Pair.Seconds is their time at the sample's measured
	// rate over the pair's link, Pair.ComputeSeconds without a link).
	Pair PhaseProjection `json:"pair"`
	// SharedDealerSeconds is the bandwidth bound of a dealer host shared
	// by the pairs (every shard's dealer traffic over its busiest link
	// direction; 0 without one): the sample had its dealer to itself, so
	// this bound is not in Pair.Seconds.
	SharedDealerSeconds float64 `json:"shared_dealer_seconds,omitempty"`
	// ForwardSeconds is the pairs' part of the phase: the larger of
	// Pair.Seconds and SharedDealerSeconds.
	ForwardSeconds float64 `json:"forward_seconds"`
	// JobBytes are what the model owner's coordinator sends its workers
	// (the phase's proxy weights, estimated as what the model owner sends
	// in the sample's weight sharing, to each worker) and JobSeconds their
	// time on its internal network; GatherBytes are the entropy shares
	// each party's workers send its coordinator (GatherBytesPerCandidate
	// per candidate) and GatherSeconds their time. Both 0 with one pair.
	JobBytes      int64   `json:"job_bytes,omitempty"`
	JobSeconds    float64 `json:"job_seconds,omitempty"`
	GatherBytes   int64   `json:"gather_bytes,omitempty"`
	GatherSeconds float64 `json:"gather_seconds,omitempty"`
	// TopK is QuickSelect at the phase's full size on the coordinators'
	// link, TopKSeconds its time there (as Projection's).
	TopK        TopKCost `json:"topk"`
	TopKSeconds float64  `json:"topk_seconds"`
	// Seconds is the phase's delay: JobSeconds + ForwardSeconds +
	// GatherSeconds + TopKSeconds.
	Seconds float64 `json:"seconds"`
	// BoundSeconds is the phase's delay by the bound model: JobSeconds +
	// the largest of Bounds' but the internal networks' (the pairs' part
	// taking its largest bound, as
	// if computation and communication overlapped perfectly) +
	// GatherSeconds + TopKSeconds. Below Seconds where the sample ran
	// slower than its bounds (a loaded machine, or start-up).
	BoundSeconds float64 `json:"bound_seconds"`
	// Bounds are the bounds of the phase's pairs' part (weight sharing
	// and forward of the largest shard, jobs and gathering; not
	// QuickSelect), Limiting the largest and LimitingLink the link of
	// the largest bandwidth bound.
	Bounds       Bounds `json:"bounds"`
	Limiting     string `json:"limiting"`
	LimitingLink string `json:"limiting_link,omitempty"`
}

// ShardedProjection is a workload projected on K worker pairs per party
// (ShardConfig) from a sample run of one pair.
type ShardedProjection struct {
	Workload string `json:"workload"`
	Pool     int    `json:"pool"`
	Link     string `json:"link"`
	Pipeline string `json:"pipeline,omitempty"`
	Lanes    int    `json:"lanes,omitempty"`
	// Shards is K; Dealers the dealer hosts assumed (1 or K; 0 when the
	// run has no dealer on links of its own); DealerShared whether one
	// dealer host serves several pairs.
	Shards       int  `json:"shards"`
	Dealers      int  `json:"dealers"`
	DealerShared bool `json:"dealer_shared"`
	// Internal is each party's internal network (ShardConfig.Internal).
	Internal LinkSpec `json:"internal"`
	// DealerLinks are the dealer's links of the sample (zero: none).
	DealerLinks [2]LinkSpec `json:"dealer_links,omitzero"`
	// Assumption states the deployment the projection assumes, in words.
	Assumption string `json:"assumption"`
	// Seconds (Hours) is the projected delay; UnshardedSeconds the same
	// sample's projection on one pair (Project).
	Seconds          float64 `json:"seconds"`
	Hours            float64 `json:"hours"`
	UnshardedSeconds float64 `json:"unsharded_seconds"`
	// BoundModelSeconds totals the phases' BoundSeconds: the delay if each
	// pair went at its largest bound rather than the sample's measured
	// rate.
	BoundModelSeconds float64 `json:"bound_model_seconds"`
	// Rounds is the critical path: the largest shard's pair's rounds plus
	// QuickSelect's, per phase.
	Rounds int64 `json:"rounds"`
	// Bounds are the run's bounds: compute and latency of the largest
	// shards' pairs and QuickSelect, and per link its busiest direction ÷
	// its bandwidth (ShardedLinks); BoundsHours bandwidth, latency,
	// compute in hours.
	Bounds       Bounds       `json:"bounds"`
	BoundsHours  [3]float64   `json:"bounds_hours"`
	Limiting     string       `json:"limiting"`
	LimitingLink string       `json:"limiting_link,omitempty"`
	Phases       []ShardPhase `json:"phases"`
	// TooSmall is Projection.TooSmall of the same sample.
	TooSmall string `json:"too_small,omitempty"`
}

// ProjectShards projects a workload to a pool of n candidates (Workload.Pool
// when 0) on sc.Shards worker pairs per party, from the sample runs of one
// pair with the link (linkRun) and without (computeRun) and QuickSelect's
// cost (topk), as Project does for one pair:
//
//   - per phase the candidates split into ShardSizes; each pair runs its
//     shard's weight sharing and forward as the sample's pair did (its
//     link, its rounds on its lanes, its machine), so the phase waits for
//     the largest shard's pair: Project's arithmetic at that shard's size
//     (the sample's measured rate over its link);
//   - with a dealer per pair (sc.Dealers K or 0, the default), or the
//     dealer-free providers (their traffic on the pair's link, in the
//     sample's rate), nothing is shared; a dealer host serving several
//     pairs (sc.Dealers 1 with a dealer on links of its own) carries
//     every shard's dealer traffic: its links' bandwidth bound is a floor
//     of the pairs' part;
//   - the model owner's coordinator sends each worker the phase's proxy,
//     and each worker its coordinator GatherBytesPerCandidate per
//     candidate, over the party's internal network (sc.Internal): one-way
//     latency + bytes ÷ bandwidth each;
//   - QuickSelect runs at the phase's full size on the coordinators' link
//     (the sample's parties' link), as in Project.
//
// With one pair it is Project's projection exactly (no workers: no jobs,
// no gathering, nothing shared).
func ProjectShards(w Workload, n int, link *transport.Profile, linkRun, computeRun *SampleRun, topk func(n, k int) (TopKCost, error), sc ShardConfig) (*ShardedProjection, error) {
	if err := sc.Check(); err != nil {
		return nil, err
	}
	base, err := Project(w, n, link, linkRun, computeRun, topk)
	if err != nil {
		return nil, err
	}
	n = base.Pool
	cand, kept, err := w.PhaseSizes(n)
	if err != nil {
		return nil, err
	}
	k := sc.Shards
	internal := sc.internal()
	sp := &ShardedProjection{Workload: w.Name, Pool: n, Link: base.Link, Pipeline: base.Pipeline, Lanes: base.Lanes, Shards: k,
		Internal: SpecOf(&internal), DealerLinks: base.DealerLinks, UnshardedSeconds: base.Seconds, TooSmall: base.TooSmall}
	hasDealer := base.DealerLinks != [2]LinkSpec{}
	if hasDealer {
		sp.Dealers = sc.dealers()
		sp.DealerShared = k > 1 && sp.Dealers == 1
	}
	sp.Assumption = shardAssumption(sp, linkRun.Provider)
	var lat float64
	if link != nil {
		lat = link.Latency.Seconds()
	}
	ilat, ibw := internal.Latency.Seconds(), float64(internal.Bandwidth)
	// Totals per link over the phases: the pair's (the largest shard's,
	// QuickSelect's too with one pair), the coordinators', the dealer's
	// each way, the internal networks'.
	var pair, coord [2]int64
	var pairUp [2]int64 // a dealer-free provider's traffic each way on the pair's link
	var pairDealerBytes int64
	var down, up [2]int64
	var jobs, gathers int64
	for i := range w.Phases {
		lr, cr := linkRun.Phases[i], computeRun.Phases[i]
		bs := w.PhaseBatchSize(i)
		sizes, err := ShardSizes(cand[i], bs, k)
		if err != nil {
			return nil, err
		}
		tk, err := topk(cand[i], kept[i])
		if err != nil {
			return nil, err
		}
		ph := ShardPhase{Phase: i, Candidates: cand[i], Kept: kept[i], Batches: (cand[i] + bs - 1) / bs, TopK: tk}
		var sdown, sup [2]int64 // every shard's dealer traffic
		for _, s := range sizes {
			if s == 0 {
				continue
			}
			ph.Shards++
			ph.LargestShard = max(ph.LargestShard, s)
			if sp.DealerShared {
				p := pairPhase(w, i, s, base.Phases[i].Lanes, lr, cr)
				for q := range 2 {
					sdown[q] += p.DealerDown[q]
					sup[q] += p.DealerUp[q]
				}
			}
		}
		ph.Pair = pairPhase(w, i, ph.LargestShard, base.Phases[i].Lanes, lr, cr)
		ph.ForwardSeconds = ph.Pair.Seconds
		ph.Bounds.ComputeSeconds = ph.Pair.ComputeSeconds
		ph.Bounds.LatencySeconds = float64(ph.Pair.Rounds) * lat
		if link != nil {
			b0, b1 := partiesBytes(linkRun.Provider, ph.Pair.BytesP0, ph.Pair.BytesP1, ph.Pair.DealerUp, ph.Pair.DealerBytes)
			name := LinkParties
			if k > 1 {
				name = LinkPair
			}
			ph.Bounds.Links = append(ph.Bounds.Links, NewLinkBound(name, SpecOf(link), b0, b1))
		}
		if hasDealer && link != nil {
			names := [2]string{LinkDealerP0, LinkDealerP1}
			d, u := ph.Pair.DealerDown, ph.Pair.DealerUp
			if sp.DealerShared {
				names, d, u = [2]string{LinkDealerSharedP0, LinkDealerSharedP1}, sdown, sup
			}
			for q := range 2 {
				if base.DealerLinks[q].None() {
					continue
				}
				l := NewLinkBound(names[q], base.DealerLinks[q], d[q], u[q])
				ph.Bounds.Links = append(ph.Bounds.Links, l)
				if sp.DealerShared {
					ph.SharedDealerSeconds = max(ph.SharedDealerSeconds, l.Seconds)
				}
			}
			for q := range 2 {
				down[q] += d[q]
				up[q] += u[q]
			}
		}
		ph.ForwardSeconds = max(ph.ForwardSeconds, ph.SharedDealerSeconds)
		if k > 1 {
			ph.JobBytes = int64(ph.Shards) * cr.Prepare.BytesP0
			ph.GatherBytes = GatherBytesPerCandidate * int64(cand[i])
			ph.JobSeconds, ph.GatherSeconds = ilat, ilat
			if ibw > 0 {
				ph.JobSeconds += float64(ph.JobBytes) / ibw
				ph.GatherSeconds += float64(ph.GatherBytes) / ibw
			}
			spec := SpecOf(&internal)
			ph.Bounds.Links = append(ph.Bounds.Links, NewLinkBound(LinkInternalP0, spec, ph.JobBytes, ph.GatherBytes),
				NewLinkBound(LinkInternalP1, spec, 0, ph.GatherBytes))
			jobs += ph.JobBytes
			gathers += ph.GatherBytes
		}
		for _, l := range ph.Bounds.Links {
			ph.Bounds.BandwidthSeconds = max(ph.Bounds.BandwidthSeconds, l.Seconds)
		}
		ph.Limiting, ph.LimitingLink = ph.Bounds.Limiting(), ph.Bounds.LimitingLink()
		ph.TopKSeconds = topKSeconds(tk, link)
		ph.Seconds = ph.JobSeconds + ph.ForwardSeconds + ph.GatherSeconds + ph.TopKSeconds
		pairBW := 0.0 // the pairs' and dealers' links (the internal networks' are JobSeconds and GatherSeconds)
		for _, l := range ph.Bounds.Links {
			if l.Link != LinkInternalP0 && l.Link != LinkInternalP1 {
				pairBW = max(pairBW, l.Seconds)
			}
		}
		ph.BoundSeconds = ph.JobSeconds + max(ph.Bounds.ComputeSeconds, ph.Bounds.LatencySeconds, pairBW) + ph.GatherSeconds + ph.TopKSeconds
		sp.Phases = append(sp.Phases, ph)
		sp.Seconds += ph.Seconds
		sp.BoundModelSeconds += ph.BoundSeconds
		sp.Rounds += ph.Pair.Rounds + tk.Rounds
		sp.Bounds.ComputeSeconds += ph.Pair.ComputeSeconds + tk.Seconds
		tb := [2]int64{tk.BytesP0, tk.BytesP1}
		for p := range 2 {
			pairUp[p] += ph.Pair.DealerUp[p]
			if k == 1 { // one pair: the coordinators' link is the pair's
				tb[p] += [2]int64{ph.Pair.BytesP0, ph.Pair.BytesP1}[p]
				pair[p] += tb[p]
			} else {
				pair[p] += [2]int64{ph.Pair.BytesP0, ph.Pair.BytesP1}[p]
				coord[p] += tb[p]
			}
		}
		pairDealerBytes += ph.Pair.DealerBytes + tk.DealerBytes
		for p, d := range tk.DealerDown() { // QuickSelect's dealer words, to the coordinators
			down[p] += d
		}
	}
	if link != nil {
		if k == 1 {
			b0, b1 := partiesBytes(linkRun.Provider, pair[0], pair[1], pairUp, pairDealerBytes)
			sp.Bounds.Links = []LinkBound{NewLinkBound(LinkParties, SpecOf(link), b0, b1)}
		} else {
			// The dealer-free providers' traffic rides on each pair's link
			// (QuickSelect's, on the coordinators', is in TopK's bytes).
			b0, b1 := partiesBytes(linkRun.Provider, pair[0], pair[1], pairUp, pairDealerBytes)
			sp.Bounds.Links = []LinkBound{NewLinkBound(LinkPair, SpecOf(link), b0, b1), NewLinkBound(LinkCoordinators, SpecOf(link), coord[0], coord[1])}
		}
		if hasDealer {
			names := [2]string{LinkDealerP0, LinkDealerP1}
			if sp.DealerShared {
				names = [2]string{LinkDealerSharedP0, LinkDealerSharedP1}
			}
			for q := range 2 {
				if !base.DealerLinks[q].None() {
					sp.Bounds.Links = append(sp.Bounds.Links, NewLinkBound(names[q], base.DealerLinks[q], down[q], up[q]))
				}
			}
		}
		sp.Bounds.LatencySeconds = float64(sp.Rounds) * lat
	} else if k == 1 {
		sp.Seconds = sp.Bounds.ComputeSeconds
	}
	if k > 1 {
		spec := SpecOf(&internal)
		sp.Bounds.Links = append(sp.Bounds.Links, NewLinkBound(LinkInternalP0, spec, jobs, gathers), NewLinkBound(LinkInternalP1, spec, 0, gathers))
	}
	for _, l := range sp.Bounds.Links {
		sp.Bounds.BandwidthSeconds = max(sp.Bounds.BandwidthSeconds, l.Seconds)
	}
	sp.Hours = sp.Seconds / 3600
	sp.BoundsHours = [3]float64{sp.Bounds.BandwidthSeconds / 3600, sp.Bounds.LatencySeconds / 3600, sp.Bounds.ComputeSeconds / 3600}
	sp.Limiting, sp.LimitingLink = sp.Bounds.Limiting(), sp.Bounds.LimitingLink()
	return sp, nil
}

// partiesBytes returns the bytes each way on the parties' link of parts
// that sent b0 (P0→P1) and b1 (P1→P0), with a dealer-free provider's
// traffic (provider "ot" or "he") added: each party's in the direction it
// sent it (up), or, for runs recorded without the directions, all of
// dealerBytes on the busiest direction (as Project counts it).
func partiesBytes(provider string, b0, b1 int64, up [2]int64, dealerBytes int64) (int64, int64) {
	if !source.DealerFree(provider) {
		return b0, b1
	}
	switch {
	case up != [2]int64{}:
		return b0 + up[0], b1 + up[1]
	case b0 >= b1:
		return b0 + dealerBytes, b1
	}
	return b0, b1 + dealerBytes
}

// shardAssumption states a sharded projection's deployment in words.
func shardAssumption(sp *ShardedProjection, provider string) string {
	if sp.Shards == 1 {
		return "one pair of machines (today's run: no workers, nothing shared)"
	}
	s := fmt.Sprintf("%d worker pairs per party, each pair on its own %s link and on machines like the sample's (its shard at the sample's measured rate)", sp.Shards, sp.Link)
	switch {
	case source.DealerFree(provider):
		s += fmt.Sprintf("; no dealer: each pair makes its own correlations (the %s provider) on its link", provider)
	case sp.DealerLinks == [2]LinkSpec{}:
		s += "; the dealer in process (its links not counted)"
	case sp.DealerShared:
		s += fmt.Sprintf("; one dealer host serving the %d pairs (%s): its links carry every shard's dealer traffic", sp.Shards, DealerPlacement(sp.DealerLinks))
	default:
		s += fmt.Sprintf("; a dealer host per pair (%s each; the reference deployment, the coordinators drawing from pair 0's after the phase's forward): no dealer link shared", DealerPlacement(sp.DealerLinks))
	}
	s += fmt.Sprintf("; jobs and gathering (%d B per candidate) on each party's internal %s network; QuickSelect at the full size on the coordinators' %s link",
		GatherBytesPerCandidate, sp.Internal, sp.Link)
	return s
}

// ShardDealerKind names a sharded projection's dealer deployment: no
// dealer link, one dealer host shared by the pairs, or one per pair.
func ShardDealerKind(sp *ShardedProjection) string {
	switch {
	case sp.Dealers == 0:
		return "no dealer link"
	case sp.DealerShared:
		return "1 dealer host (shared)"
	}
	return fmt.Sprintf("%d dealer host(s), one per pair", sp.Dealers)
}

// ShardScaling compares a measured sharded run with one pair's on the
// same workload, sample and links (K worker pairs per party as OS
// processes on loopback, each pair's link emulated by a relay) and with
// the projection of the one-pair sample to the run's size: the check of
// ProjectShards's model. `mpcbench select --shards K --processes` runs
// it with the peer binaries' coordinator and worker modes.
type ShardScaling struct {
	// Shards is K; Link the pairs' link profile.
	Shards int    `json:"shards"`
	Link   string `json:"link"`
	// OnePairSeconds is the measured wall time of the run on one pair,
	// Seconds on K pairs, ProjectedSeconds ProjectShards's figure for K
	// pairs from the one-pair run.
	OnePairSeconds   float64 `json:"one_pair_seconds"`
	Seconds          float64 `json:"seconds"`
	ProjectedSeconds float64 `json:"projected_seconds"`
	// Limiting is the projection's limiting bound: the scaling is only
	// expected where it is a per-pair link's, not the shared CPU of one
	// machine running every pair.
	Limiting string `json:"limiting"`
}

// Speedup is the one-pair time ÷ the K-pair time (0 when unmeasured).
func (s ShardScaling) Speedup() float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return s.OnePairSeconds / s.Seconds
}

// Efficiency is the speed-up ÷ K: 1 for perfect scaling.
func (s ShardScaling) Efficiency() float64 {
	if s.Shards <= 0 {
		return 0
	}
	return s.Speedup() / float64(s.Shards)
}

// ModelError is (measured − projected) ÷ projected: how far the measured
// K-pair run is from ProjectShards's figure (0 when either is missing).
func (s ShardScaling) ModelError() float64 {
	if s.ProjectedSeconds <= 0 || s.Seconds <= 0 {
		return 0
	}
	return (s.Seconds - s.ProjectedSeconds) / s.ProjectedSeconds
}

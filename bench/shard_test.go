package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// TestShardSizes checks the shard rule: contiguous shards at batch
// boundaries, batches [i·nb/k, (i+1)·nb/k), the last batch short.
func TestShardSizes(t *testing.T) {
	tests := []struct {
		n, batch, k int
		want        []int
	}{
		{10, 4, 1, []int{10}},
		{10, 4, 2, []int{4, 6}},       // 3 batches: [0,1) and [1,3), the last one of 2
		{12, 4, 3, []int{4, 4, 4}},    // one batch each
		{3, 4, 4, []int{0, 0, 0, 3}},  // one batch, three empty shards
		{950, 4, 8, nil},              // checked below: 238 batches
		{0, 4, 2, []int{0, 0}},        // nothing to shard
		{17, 1, 4, []int{4, 4, 4, 5}}, // batches of one
		{1000000, 16, 32, nil},        // checked below
		{37250, 4, 8, []int{4656, 4656, 4656, 4656, 4656, 4656, 4656, 4658}}, // qqp-bert's phase 2 at its pool
	}
	for _, tc := range tests {
		got, err := ShardSizes(tc.n, tc.batch, tc.k)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ShardSizes(%d, %d, %d) = %v, want %v", tc.n, tc.batch, tc.k, got, tc.want)
		}
		sum, nb := 0, (tc.n+tc.batch-1)/tc.batch
		for i, s := range got {
			sum += s
			if i < len(got)-1 && s%tc.batch != 0 {
				t.Errorf("ShardSizes(%d, %d, %d): shard %d of %d candidates ends inside a batch", tc.n, tc.batch, tc.k, i, s)
			}
			if s > (nb+tc.k-1)/tc.k*tc.batch {
				t.Errorf("ShardSizes(%d, %d, %d): shard %d has %d candidates, more than ⌈batches ÷ k⌉ batches", tc.n, tc.batch, tc.k, i, s)
			}
		}
		if len(got) != tc.k || sum != tc.n {
			t.Errorf("ShardSizes(%d, %d, %d) = %v: %d shards of %d candidates in all", tc.n, tc.batch, tc.k, got, len(got), sum)
		}
	}
	for _, tc := range [][3]int{{-1, 4, 2}, {10, 0, 2}, {10, 4, 0}, {10, 4, MaxShards + 1}} {
		if _, err := ShardSizes(tc[0], tc[1], tc[2]); err == nil {
			t.Errorf("ShardSizes%v accepted", tc)
		}
	}
}

// shardRuns returns the sample runs with and without the link of the
// shard tests: fakeRun's (per candidate 1000 B from P0, 3000 B from P1,
// sec s over the link, 0.1 s without) with dealer traffic per candidate
// down[p] to party p and up[p] from it, behind dealer links (none: no
// dealer link) or made by provider.
func shardRuns(w Workload, sec float64, dealer [2]*transport.Profile, provider string, down, up [2]int64) (lr, cr *SampleRun) {
	runs := [2]*SampleRun{fakeRun(w, 0.1), fakeRun(w, sec)}
	for _, r := range runs {
		r.Provider = provider
		if dealer != [2]*transport.Profile{} {
			r.DealerLinks = [2]LinkSpec{SpecOf(dealer[0]), SpecOf(dealer[1])}
		}
		for i := range r.Phases {
			f := &r.Phases[i].Forward
			n := int64(r.Phases[i].Candidates)
			f.DealerBytes = 0
			for p := range 2 {
				f.DealerDown[p], f.DealerUp[p] = down[p]*n, up[p]*n
				f.DealerBytes += (down[p] + up[p]) * n
			}
		}
	}
	return runs[1], runs[0]
}

// shardTopK is QuickSelect's cost of the shard tests: 70 rounds, 40 B per
// candidate each way, 7 dealer bytes per candidate, 0.5 s.
func shardTopK(n, k int) (TopKCost, error) {
	return TopKCost{N: n, K: k, Comparisons: int64(3 * n), Steps: 10, Rounds: 70, BytesP0: int64(40 * n), BytesP1: int64(40 * n), DealerBytes: int64(7 * n), Seconds: 0.5}, nil
}

// TestProjectShardsOnePair checks that one pair is today's projection
// exactly: the same delay, rounds, bounds per link and limiting bound, per
// phase too, with and without a link, the dealer on links of its own or in
// process, and the dealer-free provider.
func TestProjectShardsOnePair(t *testing.T) {
	w := TinyWorkload
	thin := &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}
	lan := &transport.Profile{Name: "lan", Bandwidth: 1e9, Latency: 100 * time.Microsecond}
	slow := &transport.Profile{Name: "slow", Bandwidth: 1e9, Latency: time.Second}
	tests := []struct {
		name     string
		link     *transport.Profile
		dealer   [2]*transport.Profile
		provider string
		sec      float64
	}{
		{"no link", nil, [2]*transport.Profile{}, "", 0.1},
		{"latency, dealer in process", slow, [2]*transport.Profile{}, "", 0.2},
		{"dealer on the parties' link", thin, [2]*transport.Profile{thin, thin}, "", 0.6},
		{"dealer beside P1", thin, [2]*transport.Profile{thin, lan}, "", 0.6},
		{"dealer-free", thin, [2]*transport.Profile{}, "ot", 0.9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lr, cr := shardRuns(w, tc.sec, tc.dealer, tc.provider, [2]int64{10, 4900}, [2]int64{1, 90})
			if tc.link == nil {
				lr = cr
			}
			for _, n := range []int{0, 5000} {
				base, err := Project(w, n, tc.link, lr, cr, shardTopK)
				if err != nil {
					t.Fatal(err)
				}
				for _, dealers := range []int{0, 1} {
					sp, err := ProjectShards(w, n, tc.link, lr, cr, shardTopK, ShardConfig{Shards: 1, Dealers: dealers})
					if err != nil {
						t.Fatal(err)
					}
					if sp.Seconds != base.Seconds || sp.UnshardedSeconds != base.Seconds || sp.Hours != base.Hours || sp.Rounds != base.Rounds || sp.Pool != base.Pool ||
						!reflect.DeepEqual(sp.Bounds, base.Bounds) || sp.BoundsHours != base.BoundsHours || sp.Limiting != base.Limiting || sp.LimitingLink != base.LimitingLink {
						t.Errorf("pool %d: one pair %g s, %d rounds, bounds %+v, limiting %s %s; Project %g s, %d rounds, bounds %+v, limiting %s %s",
							n, sp.Seconds, sp.Rounds, sp.Bounds, sp.Limiting, sp.LimitingLink, base.Seconds, base.Rounds, base.Bounds, base.Limiting, base.LimitingLink)
					}
					for i, ph := range sp.Phases {
						b := base.Phases[i]
						if tc.link != nil && ph.Seconds != b.Seconds || ph.TopK != b.TopK || ph.TopKSeconds != b.TopKSeconds || ph.Shards != 1 || ph.LargestShard != b.Candidates ||
							ph.JobBytes != 0 || ph.GatherBytes != 0 || ph.SharedDealerSeconds != 0 || ph.Pair.ForwardSeconds != b.ForwardSeconds {
							t.Errorf("pool %d phase %d: %+v; Project's %+v", n, i, ph, b)
						}
					}
				}
			}
		})
	}
}

// TestProjectShardsDivide checks K pairs with a dealer each: each phase's
// pairs' part is the unsharded one's at the largest shard's size (the
// fake run's forward is linear: sec per candidate, weight sharing 1 s once
// per pair), QuickSelect unchanged at the full size on the coordinators'
// link, gathering 8 B per candidate on the internal network, and the
// delay falls with K.
func TestProjectShardsDivide(t *testing.T) {
	w := TinyWorkload // pool 1000: phases of 950 and 450 candidates in batches of 4 on 4 lanes
	thin := &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}
	internal := &transport.Profile{Name: "int", Bandwidth: 1000, Latency: 2 * time.Millisecond}
	const sec = 0.6
	lr, cr := shardRuns(w, sec, [2]*transport.Profile{thin, thin}, "", [2]int64{10, 4900}, [2]int64{1, 90})
	base, err := Project(w, 0, thin, lr, cr, shardTopK)
	if err != nil {
		t.Fatal(err)
	}
	prev := base.Seconds
	for _, k := range []int{2, 4, 8, 64} {
		sp, err := ProjectShards(w, 0, thin, lr, cr, shardTopK, ShardConfig{Shards: k, Dealers: k, Internal: internal})
		if err != nil {
			t.Fatal(err)
		}
		if sp.DealerShared || sp.Dealers != k || sp.UnshardedSeconds != base.Seconds {
			t.Errorf("K = %d: dealers %d shared %v unsharded %g", k, sp.Dealers, sp.DealerShared, sp.UnshardedSeconds)
		}
		var rounds int64
		for i, ph := range sp.Phases {
			b := base.Phases[i]
			sizes, _ := ShardSizes(b.Candidates, w.BatchSize, k)
			largest := 0
			for _, s := range sizes {
				largest = max(largest, s)
			}
			if ph.LargestShard != largest || largest*k < b.Candidates || largest > b.Candidates/k+w.BatchSize {
				t.Errorf("K = %d phase %d: largest shard %d (want %d) of %d", k, i, ph.LargestShard, largest, b.Candidates)
			}
			// The pair's forward is the unsharded forward's share of the
			// largest shard; its weight sharing is the sample's, once.
			if want := b.ForwardSeconds * float64(largest) / float64(b.Candidates); math.Abs(ph.Pair.ForwardSeconds-want) > 1e-9 ||
				math.Abs(ph.ForwardSeconds-(1+want)) > 1e-9 {
				t.Errorf("K = %d phase %d: pair forward %g s, pairs' part %g s; want %g and %g", k, i, ph.Pair.ForwardSeconds, ph.ForwardSeconds, want, 1+want)
			}
			nb := (largest + w.BatchSize - 1) / w.BatchSize
			if want := int64(2 + 10*((nb+w.Workers-1)/w.Workers)); ph.Pair.Rounds != want {
				t.Errorf("K = %d phase %d: pair rounds %d, want %d", k, i, ph.Pair.Rounds, want)
			}
			rounds += ph.Pair.Rounds + 70
			// QuickSelect is unchanged: the full size, the same link.
			if ph.TopK != b.TopK || ph.TopKSeconds != b.TopKSeconds || ph.Kept != b.Kept {
				t.Errorf("K = %d phase %d: QuickSelect %+v %g s, want %+v %g s", k, i, ph.TopK, ph.TopKSeconds, b.TopK, b.TopKSeconds)
			}
			// Jobs (the weights, 100 B, to each worker) and gathering (8 B per
			// candidate) on the internal network: 2 ms + bytes ÷ 1000 B/s.
			if ph.GatherBytes != 8*int64(b.Candidates) || math.Abs(ph.GatherSeconds-(0.002+float64(8*b.Candidates)/1000)) > 1e-9 ||
				ph.JobBytes != int64(ph.Shards)*100 || math.Abs(ph.JobSeconds-(0.002+float64(ph.JobBytes)/1000)) > 1e-9 {
				t.Errorf("K = %d phase %d: job %d B %g s, gather %d B %g s", k, i, ph.JobBytes, ph.JobSeconds, ph.GatherBytes, ph.GatherSeconds)
			}
			if want := ph.JobSeconds + ph.ForwardSeconds + ph.GatherSeconds + ph.TopKSeconds; math.Abs(ph.Seconds-want) > 1e-9 {
				t.Errorf("K = %d phase %d: %g s, want %g", k, i, ph.Seconds, want)
			}
			// The bound model: the pair's largest bound, here its own
			// dealer's link to P1 (4900 B per candidate at 10 kB/s) against
			// its compute (0.1 s per candidate and the weight sharing's 1 s)
			// and latency (1 ms per round).
			dealer := float64(4900*largest) / 1e4
			if want := ph.JobSeconds + max(dealer, 1+0.1*float64(largest), float64(ph.Pair.Rounds)*0.001) + ph.GatherSeconds + ph.TopKSeconds; math.Abs(ph.BoundSeconds-want) > 1e-9 || ph.BoundSeconds > ph.Seconds {
				t.Errorf("K = %d phase %d: bound model %g s, want %g (≤ %g)", k, i, ph.BoundSeconds, want, ph.Seconds)
			}
		}
		if sp.Rounds != rounds || math.Abs(sp.Bounds.LatencySeconds-float64(rounds)*0.001) > 1e-9 {
			t.Errorf("K = %d: rounds %d (want %d), latency bound %g", k, sp.Rounds, rounds, sp.Bounds.LatencySeconds)
		}
		links := map[string]LinkBound{}
		for _, l := range sp.Bounds.Links {
			links[l.Link] = l
		}
		for _, name := range []string{LinkPair, LinkCoordinators, LinkDealerP0, LinkDealerP1, LinkInternalP0, LinkInternalP1} {
			if _, ok := links[name]; !ok || len(links) != 6 {
				t.Errorf("K = %d: links %v, want %s among 6", k, sp.Bounds.Links, name)
			}
		}
		if c := links[LinkCoordinators].Bytes; c != [2]int64{40 * 1400, 40 * 1400} {
			t.Errorf("K = %d: coordinators' link %v", k, c)
		}
		if sp.Seconds >= prev {
			t.Errorf("K = %d: %g s, not below %g s with fewer pairs", k, sp.Seconds, prev)
		}
		prev = sp.Seconds
	}
}

// TestProjectShardsSharedDealer checks one dealer host serving K pairs:
// its links carry every shard's dealer traffic, so their bound stays the
// unsharded run's (K × a pair's) while each pair's own dealer link's falls
// with K; once it exceeds the pairs' time it limits the phase.
func TestProjectShardsSharedDealer(t *testing.T) {
	w := TinyWorkload
	thin := &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}
	const sec = 0.6 // per candidate over the link; the dealer sends P1 4900 B: 0.49 s at 10 kB/s
	lr, cr := shardRuns(w, sec, [2]*transport.Profile{thin, thin}, "", [2]int64{10, 4900}, [2]int64{1, 90})
	base, err := Project(w, 0, thin, lr, cr, shardTopK)
	if err != nil {
		t.Fatal(err)
	}
	var baseDealer LinkBound
	for _, l := range base.Bounds.Links {
		if l.Link == LinkDealerP1 {
			baseDealer = l
		}
	}
	for _, k := range []int{2, 4, 8} {
		shared, err := ProjectShards(w, 0, thin, lr, cr, shardTopK, ShardConfig{Shards: k, Dealers: 1})
		if err != nil {
			t.Fatal(err)
		}
		own, err := ProjectShards(w, 0, thin, lr, cr, shardTopK, ShardConfig{Shards: k, Dealers: k})
		if err != nil {
			t.Fatal(err)
		}
		if !shared.DealerShared || shared.Dealers != 1 || own.DealerShared || own.Dealers != k {
			t.Fatalf("K = %d: shared %v (%d dealers), own %v (%d dealers)", k, shared.DealerShared, shared.Dealers, own.DealerShared, own.Dealers)
		}
		// The default (Dealers 0) is the deployed topology: one dealer
		// host per pair, said so in words.
		def, err := ProjectShards(w, 0, thin, lr, cr, shardTopK, ShardConfig{Shards: k})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(def, own) || !strings.Contains(def.Assumption, "a dealer host per pair") || !strings.Contains(shared.Assumption, fmt.Sprintf("one dealer host serving the %d pairs", k)) {
			t.Errorf("K = %d: the default projection (%d dealers, shared %v, %g s, %q) is not one dealer host per pair's (%g s; shared: %q)",
				k, def.Dealers, def.DealerShared, def.Seconds, def.Assumption, own.Seconds, shared.Assumption)
		}
		find := func(p *ShardedProjection, name string) LinkBound {
			for _, l := range p.Bounds.Links {
				if l.Link == name {
					return l
				}
			}
			t.Fatalf("K = %d: no link %s in %+v", k, name, p.Bounds.Links)
			return LinkBound{}
		}
		// Every shard's traffic: the unsharded run's (the fake weight
		// sharing draws no dealer words), up to a byte per shard of
		// rounding.
		sl := find(shared, LinkDealerSharedP1)
		if d := sl.Bytes[0] - baseDealer.Bytes[0]; d < -int64(2*k) || d > 0 {
			t.Errorf("K = %d: shared dealer link %v, unsharded %v", k, sl.Bytes, baseDealer.Bytes)
		}
		ol := find(own, LinkDealerP1)
		if ratio := sl.Seconds / ol.Seconds; ratio < 0.8*float64(k) || ratio > float64(k)+1e-9 {
			t.Errorf("K = %d: shared dealer link %g s, a pair's own %g s: ratio %g", k, sl.Seconds, ol.Seconds, ratio)
		}
		if shared.LimitingLink != LinkDealerSharedP1 || shared.Limiting != BoundBandwidth {
			t.Errorf("K = %d: shared dealer: limiting %s %s", k, shared.Limiting, shared.LimitingLink)
		}
		for i, ph := range shared.Phases {
			o := own.Phases[i]
			if ph.SharedDealerSeconds <= 0 || ph.ForwardSeconds != max(ph.Pair.Seconds, ph.SharedDealerSeconds) || ph.ForwardSeconds < o.ForwardSeconds ||
				ph.Pair.Seconds != o.Pair.Seconds || o.SharedDealerSeconds != 0 {
				t.Errorf("K = %d phase %d: shared %+v, own %+v", k, i, ph, o)
			}
			// 0.49 s per candidate for the whole phase on the shared link
			// against 0.6 s per candidate of the largest shard: the shared
			// link limits from K = 2 on.
			if ph.LimitingLink != LinkDealerSharedP1 || ph.ForwardSeconds != ph.SharedDealerSeconds {
				t.Errorf("K = %d phase %d: limiting %s %s, pairs' part %g s, shared dealer %g s", k, i, ph.Limiting, ph.LimitingLink, ph.ForwardSeconds, ph.SharedDealerSeconds)
			}
		}
		if shared.Seconds <= own.Seconds {
			t.Errorf("K = %d: shared dealer %g s, not above one per pair %g s", k, shared.Seconds, own.Seconds)
		}
	}
}

// TestShardConfigCheck refuses impossible configurations.
func TestShardConfigCheck(t *testing.T) {
	w := TinyWorkload
	lr, cr := shardRuns(w, 0.1, [2]*transport.Profile{}, "", [2]int64{}, [2]int64{})
	for _, sc := range []ShardConfig{{Shards: 0}, {Shards: -1}, {Shards: MaxShards + 1}, {Shards: 4, Dealers: 3}, {Shards: 4, Dealers: -1},
		{Shards: 2, Internal: &transport.Profile{Name: "bad", Bandwidth: -1}}} {
		if err := sc.Check(); err == nil {
			t.Errorf("%+v accepted", sc)
		}
		if _, err := ProjectShards(w, 0, nil, lr, cr, shardTopK, sc); err == nil {
			t.Errorf("%+v projected", sc)
		}
	}
	for _, sc := range []ShardConfig{{Shards: 1}, {Shards: 4, Dealers: 1}, {Shards: 4, Dealers: 4}, {Shards: MaxShards}} {
		if err := sc.Check(); err != nil {
			t.Errorf("%+v: %v", sc, err)
		}
	}
}

// TestShardScaling checks the measured-against-projected arithmetic of
// the sharded run's check.
func TestShardScaling(t *testing.T) {
	tests := []struct {
		s                         ShardScaling
		speedup, efficiency, merr float64
	}{
		{ShardScaling{Shards: 4, OnePairSeconds: 100, Seconds: 40, ProjectedSeconds: 32}, 2.5, 0.625, 0.25},
		{ShardScaling{Shards: 2, OnePairSeconds: 100, Seconds: 50, ProjectedSeconds: 50}, 2, 1, 0},
		{ShardScaling{Shards: 2, OnePairSeconds: 100}, 0, 0, 0},
	}
	for _, tc := range tests {
		if g := tc.s.Speedup(); math.Abs(g-tc.speedup) > 1e-12 {
			t.Errorf("%+v: speed-up %g, want %g", tc.s, g, tc.speedup)
		}
		if g := tc.s.Efficiency(); math.Abs(g-tc.efficiency) > 1e-12 {
			t.Errorf("%+v: efficiency %g, want %g", tc.s, g, tc.efficiency)
		}
		if g := tc.s.ModelError(); math.Abs(g-tc.merr) > 1e-12 {
			t.Errorf("%+v: model error %g, want %g", tc.s, g, tc.merr)
		}
	}
}

// TestDecodeSelectReportSharded checks that a report's sharded
// projection is decoded and checked, and that QuickSelect measurements
// beyond the phases' (another pool's, MeasureTopKAt) are accepted.
func TestDecodeSelectReportSharded(t *testing.T) {
	w := TinyWorkload
	lr, cr := shardRuns(w, 0.2, [2]*transport.Profile{}, "", [2]int64{}, [2]int64{})
	p, err := Project(w, 0, nil, lr, cr, shardTopK)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ProjectShards(w, 0, nil, lr, cr, shardTopK, ShardConfig{Shards: 4})
	if err != nil {
		t.Fatal(err)
	}
	var tks []TopKCost
	for _, ph := range p.Phases {
		tks = append(tks, ph.TopK)
	}
	good := &SelectReport{Workload: w, Link: "none", Sample: cr, TopK: append(tks, TopKCost{N: 4750, K: 2250}), Projection: p, Sharded: sp}
	b, err := json.Marshal(good)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSelectReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Sharded == nil || got.Sharded.Shards != 4 || got.Sharded.Seconds != sp.Seconds || len(got.TopK) != 3 {
		t.Errorf("decoded sharded %+v, %d QuickSelect costs", got.Sharded, len(got.TopK))
	}
	for _, bad := range []func(r *SelectReport){
		func(r *SelectReport) { r.Sharded.Phases = r.Sharded.Phases[:1] },
		func(r *SelectReport) { r.Sharded.Shards = 0 },
		func(r *SelectReport) { r.Sharded.Shards = MaxShards + 1 },
		func(r *SelectReport) { r.TopK = r.TopK[:1] },
	} {
		var r SelectReport
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		bad(&r)
		bb, _ := json.Marshal(&r)
		if _, err := DecodeSelectReport(bb); err == nil {
			t.Errorf("a bad report was decoded: %s", bb)
		}
	}
}

// TestProjectShardsDealerFree checks K pairs with the dealer-free
// provider: no dealer link and nothing shared, each pair's link carrying
// its own provider traffic (each party's in the direction it sent it).
func TestProjectShardsDealerFree(t *testing.T) {
	w := TinyWorkload
	thin := &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}
	lr, cr := shardRuns(w, 0.9, [2]*transport.Profile{}, "he", [2]int64{3000, 500}, [2]int64{500, 3000})
	for _, dealers := range []int{1, 4} {
		sp, err := ProjectShards(w, 0, thin, lr, cr, shardTopK, ShardConfig{Shards: 4, Dealers: dealers})
		if err != nil {
			t.Fatal(err)
		}
		if sp.Dealers != 0 || sp.DealerShared || !strings.Contains(sp.Assumption, "no dealer") || ShardDealerKind(sp) != "no dealer link" {
			t.Errorf("dealers %d: %d dealers, shared %v, %q", dealers, sp.Dealers, sp.DealerShared, sp.Assumption)
		}
		var pair [2]int64
		for i, ph := range sp.Phases {
			if ph.SharedDealerSeconds != 0 || ph.ForwardSeconds != ph.Pair.Seconds {
				t.Errorf("phase %d: %+v", i, ph)
			}
			n := int64(ph.LargestShard)
			pair[0] += ph.Pair.BytesP0 + 500*n
			pair[1] += ph.Pair.BytesP1 + 3000*n
		}
		for _, l := range sp.Bounds.Links {
			switch l.Link {
			case LinkPair:
				if l.Bytes != pair {
					t.Errorf("pair link %v, want %v (the provider's traffic included)", l.Bytes, pair)
				}
			case LinkCoordinators, LinkInternalP0, LinkInternalP1:
			default:
				t.Errorf("dealer-free run with link %s", l.Link)
			}
		}
	}
}

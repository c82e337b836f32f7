package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// TestWorkloadSizes checks each standard workload's schedule at its full
// pool against the paper's selectivities (Table 4: 100% → 50% → 30% → 20%
// of the pool, bootstrap 5% included) and that its default sample is a
// valid selection.
func TestWorkloadSizes(t *testing.T) {
	tests := []struct {
		name       string
		cand, kept []int
	}{
		{"sst2-distilbert", []int{39900, 18900, 10500}, []int{18900, 10500, 6300}},
		{"qqp-bert", []int{141550, 37250}, []int{37250, 22350}},
		{"cifar10-vitsmall", []int{47500}, []int{7500}},
		{"oracle-sst2-distilbert", []int{39900}, []int{6300}},
		{"tiny", []int{950, 450}, []int{450, 150}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := WorkloadByName(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Validate(); err != nil {
				t.Fatal(err)
			}
			cand, kept, err := w.PhaseSizes(w.Pool)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cand, tc.cand) || !slices.Equal(kept, tc.kept) {
				t.Errorf("pool %d: candidates %v kept %v, want %v %v", w.Pool, cand, kept, tc.cand, tc.kept)
			}
			if _, err := w.Params(w.Samples); err != nil {
				t.Errorf("default sample: %v", err)
			}
		})
	}
	if _, err := WorkloadByName("gpt-4"); err == nil {
		t.Error("unknown workload accepted")
	}
}

func TestWorkloadInvalid(t *testing.T) {
	base := TinyWorkload
	tests := []struct {
		name string
		edit func(w *Workload)
	}{
		{"no phases", func(w *Workload) { w.Phases = nil }},
		{"growing phase", func(w *Workload) {
			w.Phases = []Phase{{1, 1, 2, 0.3, 0, 0}, {1, 1, 2, 0.5, 0, 0}, {1, 1, 2, 0.2, 0, 0}}
		}},
		{"last phase not the budget", func(w *Workload) { w.Phases = []Phase{{1, 1, 2, 0.5, 0, 0}, {1, 1, 2, 0.3, 0, 0}} }},
		{"exact with two phases", func(w *Workload) { w.Exact = true }},
		{"zero batch", func(w *Workload) { w.BatchSize = 0 }},
		{"budget below bootstrap", func(w *Workload) { w.Budget = 0.04 }},
		{"unknown shape", func(w *Workload) { w.Shape = "gpt" }},
		{"too many heads", func(w *Workload) { w.Phases = []Phase{{1, 9, 2, 0.5, 0, 0}, {1, 4, 4, 0.2, 0, 0}} }},
		{"no samples", func(w *Workload) { w.Samples = 0 }},
		{"negative memory budget", func(w *Workload) { w.MemoryBudget = -1 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := base
			w.Phases = slices.Clone(base.Phases)
			tc.edit(&w)
			if err := w.Validate(); err == nil {
				t.Errorf("%+v validated", w)
			}
		})
	}
}

// TestExpectedComparisons checks Knuth's formula against its closed forms
// and bounds, and against the mean of a plain simulation of TopK's
// partitioning (random pivots, every remaining value compared once).
func TestExpectedComparisons(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{3, 2}, {100, 2}, {1000, 500}, {1000, 999}, {39900, 18900}, {141550, 37250}} {
		c := ExpectedComparisons(tc.n, tc.k)
		if sym := ExpectedComparisons(tc.n, tc.n+1-tc.k); math.Abs(sym-c) > 1e-6*c {
			t.Errorf("C(%d,%d) = %g, C(n, n+1−k) = %g", tc.n, tc.k, c, sym)
		}
		if lo, hi := 2*float64(tc.n)-2*harmonic(tc.n)-1e-6, 3.3863*float64(tc.n); c < lo || c > hi {
			t.Errorf("C(%d,%d) = %g not in [%g, %g]", tc.n, tc.k, c, lo, hi)
		}
	}
	if got, want := ExpectedComparisons(100, 1), 2*(100-harmonic(100)); math.Abs(got-want) > 1e-9 {
		t.Errorf("C(100,1) = %g, want 2(n − H_n) = %g", got, want)
	}
	if got := ExpectedSteps(50, 1); math.Abs(got-harmonic(50)) > 1e-9 {
		t.Errorf("steps(50,1) = %g, want H_50", got)
	}
	// Simulation of the same partitioning in the clear.
	const n, k, trials = 600, 200, 400
	var sum float64
	seed := uint64(7)
	next := func(m int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int((seed >> 33) % uint64(m))
	}
	for range trials {
		active := make([]int, n) // value = rank
		for i := range active {
			active[i] = i
		}
		need := k
		for need > 0 && len(active) > need {
			piv := active[next(len(active))]
			sum += float64(len(active) - 1)
			var above, below []int
			for _, v := range active {
				switch {
				case v > piv:
					above = append(above, v)
				case v < piv:
					below = append(below, v)
				}
			}
			if len(above) >= need {
				active = above
			} else {
				need -= len(above) + 1
				active = below
			}
		}
	}
	if mean, want := sum/trials, ExpectedComparisons(n, k); math.Abs(mean-want) > 0.06*want {
		t.Errorf("simulated mean %g comparisons, formula %g", mean, want)
	}
}

// TestMeasureTopK runs QuickSelect on shared values: 6 rounds per step
// (CompareRevealBounded), at least n−1 comparisons, both parties sending alike;
// bad sizes are refused.
func TestMeasureTopK(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{10, 3}, {500, 100}, {2000, 1500}} {
		c, err := MeasureTopK(context.Background(), tc.n, tc.k, 3)
		if err != nil {
			t.Fatal(err)
		}
		if c.N != tc.n || c.K != tc.k || c.Comparisons < int64(tc.n-1) || c.Steps < 1 || c.Rounds != 6*int64(c.Steps) ||
			c.BytesP0 <= 0 || c.BytesP0 != c.BytesP1 || c.DealerBytes <= 0 || c.Dealer[0] <= 0 || c.Dealer[1] <= 0 || c.Dealer[0]+c.Dealer[1] != c.DealerBytes || !c.Measured {
			t.Errorf("%+v", c)
		}
	}
	for _, tc := range []struct{ n, k int }{{0, 0}, {5, 6}, {5, -1}} {
		if _, err := MeasureTopK(context.Background(), tc.n, tc.k, 1); err == nil {
			t.Errorf("keep %d of %d accepted", tc.k, tc.n)
		}
	}
	m, err := NewTopKModel([]TopKCost{{N: 100, K: 10, Comparisons: 300, Steps: 10, Rounds: 70, BytesP0: 3000, BytesP1: 3000, DealerBytes: 600, Dealer: [2]int64{150, 450}, Seconds: 0.3}})
	if err != nil {
		t.Fatal(err)
	}
	p := m.Predict(1000, 100)
	want := ExpectedComparisons(1000, 100)
	if p.Comparisons != int64(want) || p.BytesP0 != int64(want*10) || math.Abs(p.Seconds-want*0.001) > 1e-9 || p.Measured {
		t.Errorf("predicted %+v for %g comparisons", p, want)
	}
	// The dealer bytes split as measured (a quarter to party 0); a cost
	// recorded before the split counts them all to party 1.
	if d := int64(want * 2); p.DealerBytes != d || p.Dealer != [2]int64{d / 4, d - d/4} || p.DealerDown() != p.Dealer {
		t.Errorf("predicted dealer bytes %d split %v for %g comparisons", p.DealerBytes, p.Dealer, want)
	}
	if old := (TopKCost{DealerBytes: 600}); old.DealerDown() != [2]int64{0, 600} {
		t.Errorf("an unsplit cost's dealer bytes go %v", old.DealerDown())
	}
	if _, err := NewTopKModel(nil); err == nil {
		t.Error("empty model accepted")
	}
}

// fakeRun is a sample run of w in which every phase's forward costs, per
// candidate, 1000 B from P0, 3000 B from P1, 500 dealer bytes and sec s;
// 10 rounds per batch; weight sharing 2 rounds, 100 B and 1 s.
func fakeRun(w Workload, sec float64) *SampleRun {
	cand, kept, _ := w.PhaseSizes(w.Samples)
	r := &SampleRun{Workload: w.Name, Samples: w.Samples}
	for i := range w.Phases {
		c := float64(cand[i])
		r.Phases = append(r.Phases, PhaseRun{Phase: i, Candidates: cand[i], Kept: kept[i], RoundsPerBatch: 10,
			Prepare: Part{Rounds: 2, BytesP0: 100, Seconds: 1},
			Forward: Part{BytesP0: int64(1000 * c), BytesP1: int64(3000 * c), DealerBytes: int64(500 * c), Seconds: sec * c}})
	}
	return r
}

func TestProject(t *testing.T) {
	w := TinyWorkload // pool 1000: phases 950 → 450 → 150, batches of 4 on 4 lanes
	topk := func(n, k int) (TopKCost, error) {
		return TopKCost{N: n, K: k, Comparisons: int64(3 * n), Steps: 10, Rounds: 70, BytesP0: int64(40 * n), BytesP1: int64(40 * n), Seconds: 0.5}, nil
	}
	// Pipelined: 238 batches on 4 lanes, ⌈238/4⌉ = 60 waves; 113 batches, 29.
	rounds := int64((2 + 10*60 + 70) + (2 + 10*29 + 70))
	bytesP1 := int64(3000*(950+450) + 40*(950+450))
	tests := []struct {
		name     string
		link     *transport.Profile
		sec      float64
		limiting string
		hours    float64
		// pace, when not 0, is the phases' paces' sum, below the
		// bandwidth bound: the projection is the bound (AtBandwidth).
		pace float64
	}{
		{"no link", nil, 0.1, BoundCompute, (2 + 0.1*1400 + 1) / 3600, 0},
		{"latency", &transport.Profile{Name: "slow", Bandwidth: 1e9, Latency: time.Second}, 0.2, BoundLatency, (2 + 0.2*1400 + 1 + 140 + float64(40*950+40*450)/1e9) / 3600, 0},
		{"bandwidth", &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}, 0.2, BoundBandwidth, float64(bytesP1) / 1e4 / 3600,
			2 + 0.2*1400 + 1 + 0.14 + float64(40*950+40*450)/1e4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comp := fakeRun(w, 0.1)
			lr := fakeRun(w, tc.sec)
			p, err := Project(w, 0, tc.link, lr, comp, topk)
			if err != nil {
				t.Fatal(err)
			}
			if p.Pool != 1000 || p.Rounds != rounds || p.BytesP1 != bytesP1 || p.BytesP0 != 200+1000*1400+40*1400 || p.DealerBytes != 500*1400 {
				t.Errorf("pool %d rounds %d (want %d) bytes %d/%d (want P1 %d) dealer %d", p.Pool, p.Rounds, rounds, p.BytesP0, p.BytesP1, bytesP1, p.DealerBytes)
			}
			if math.Abs(p.Hours-tc.hours) > 1e-9 || p.Limiting != tc.limiting {
				t.Errorf("hours %g (want %g), limiting %s (want %s), bounds %+v", p.Hours, tc.hours, p.Limiting, tc.limiting, p.Bounds)
			}
			if p.AtBandwidth != (tc.pace != 0) || math.Abs(p.PaceSeconds-tc.pace) > 1e-9 {
				t.Errorf("paces summed to %g s, at the bandwidth bound %v; want %g s", p.PaceSeconds, p.AtBandwidth, tc.pace)
			}
			if math.Abs(p.Bounds.ComputeSeconds-(2+0.1*1400+1)) > 1e-9 {
				t.Errorf("compute bound %g", p.Bounds.ComputeSeconds)
			}
			if tc.link != nil {
				if want := float64(rounds) * tc.link.Latency.Seconds(); math.Abs(p.Bounds.LatencySeconds-want) > 1e-9 {
					t.Errorf("latency bound %g, want %g", p.Bounds.LatencySeconds, want)
				}
				if want := float64(bytesP1) / float64(tc.link.Bandwidth); math.Abs(p.Bounds.BandwidthSeconds-want) > 1e-9 {
					t.Errorf("bandwidth bound %g, want %g", p.Bounds.BandwidthSeconds, want)
				}
				if m := BoundModelSeconds(p, *tc.link); m < p.Bounds.LatencySeconds-1e-9 && m < p.Bounds.BandwidthSeconds-1e-9 {
					t.Errorf("bound model %g below both bounds %+v", m, p.Bounds)
				}
			}
		})
	}
	bad := fakeRun(w, 0.1)
	bad.Phases = bad.Phases[:1]
	if _, err := Project(w, 0, nil, bad, bad, topk); err == nil {
		t.Error("a run with a missing phase was projected")
	}
}

// TestProjectOwnHosts: a compute run that holds each party's own CPU
// seconds (each party alone in its process) charges the busier party's
// CPU to a host of its own, per phase (by hand: the tiny workload's 950
// and 450 candidates from samples of fakeRun's sizes, 2 cores each);
// without them the compute bound stays the shared run's wall time.
func TestProjectOwnHosts(t *testing.T) {
	w := TinyWorkload
	topk := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k, Seconds: 0.5}, nil }
	comp := fakeRun(w, 0.1)
	comp.Cores = 2
	var want float64
	for i := range comp.Phases {
		ph := &comp.Phases[i]
		c := float64(ph.Candidates)
		// P0 busier in the forward of phase 1, P1 in phase 2; P0's
		// weight sharing the larger in both.
		ph.Prepare.CPUSeconds = [2]float64{3, 1}
		ph.Forward.CPUSeconds = [2]float64{0.3 * c, 0.2 * c}
		full := []float64{950, 450}[i]
		if i == 1 {
			ph.Forward.CPUSeconds = [2]float64{0.1 * c, 0.4 * c}
		}
		want += max(3+ph.Forward.CPUSeconds[0]/c*full, 1+ph.Forward.CPUSeconds[1]/c*full)/2 + 0.5
	}
	if !comp.PerParty() {
		t.Fatal("per-party CPU not recognised")
	}
	p, err := Project(w, 0, nil, comp, comp, topk)
	if err != nil {
		t.Fatal(err)
	}
	if p.ComputeHosts != ComputeOwn || p.ComputeCores != 2 || math.Abs(p.Bounds.ComputeSeconds-want) > 1e-9 {
		t.Errorf("compute %q on %d cores: %g s, want own hosts of 2 cores, %g s", p.ComputeHosts, p.ComputeCores, p.Bounds.ComputeSeconds, want)
	}
	comp.Phases[1].Forward.CPUSeconds[1] = 0 // one party's CPU missing
	if p, err = Project(w, 0, nil, comp, comp, topk); err != nil || p.ComputeHosts != ComputeShared {
		t.Errorf("a run without every party's CPU projected on %q hosts (%v)", p.ComputeHosts, err)
	}
}

// TestProjectPipelineModes checks the projected critical path in each
// pipeline mode (numbers by hand): the tiny workload at its pool of 1000
// has 950 and 450 candidates in batches of 4 (238 and 113 batches) on 4
// lanes; a batch takes 10 rounds, the weight sharing 2, QuickSelect 70.
// With the pipeline on (or a run from before it, mode "") the 4 lanes run
// at once: ⌈238/4⌉ = 60 and ⌈113/4⌉ = 29 waves; with it off the batches
// run one at a time. Over a link of 0.5 s one-way latency the latency
// bound is rounds × 0.5 s.
func TestProjectPipelineModes(t *testing.T) {
	w := TinyWorkload
	topk := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k, Rounds: 70}, nil }
	link := &transport.Profile{Name: "slow", Bandwidth: 1e9, Latency: 500 * time.Millisecond}
	tests := []struct {
		mode           string
		lanes          int
		rounds         int64
		latencySeconds float64
	}{
		{"", 4, (2 + 10*60 + 70) + (2 + 10*29 + 70), 1034 * 0.5},
		{"on", 4, 672 + 362, 517},
		{"off", 1, (2 + 10*238 + 70) + (2 + 10*113 + 70), 3654 * 0.5},
	}
	for _, tc := range tests {
		t.Run("mode "+tc.mode, func(t *testing.T) {
			comp := fakeRun(w, 0.1)
			lr := fakeRun(w, 0.1)
			lr.Pipeline = tc.mode
			p, err := Project(w, 0, link, lr, comp, topk)
			if err != nil {
				t.Fatal(err)
			}
			wantMode := tc.mode
			if wantMode == "" {
				wantMode = "on"
			}
			if p.Lanes != tc.lanes || p.Pipeline != wantMode || p.Rounds != tc.rounds || math.Abs(p.Bounds.LatencySeconds-tc.latencySeconds) > 1e-9 {
				t.Errorf("lanes %d pipeline %q rounds %d latency bound %g s; want %d %q %d %g", p.Lanes, p.Pipeline, p.Rounds, p.Bounds.LatencySeconds, tc.lanes, wantMode, tc.rounds, tc.latencySeconds)
			}
			if got := LanesInFlight(w, 0, tc.mode); got != tc.lanes {
				t.Errorf("LanesInFlight = %d, want %d", got, tc.lanes)
			}
		})
	}
	bad := fakeRun(w, 0.1)
	bad.Pipeline = "sometimes"
	if _, err := Project(w, 0, link, bad, fakeRun(w, 0.1), topk); err == nil {
		t.Error("a run of an unknown pipeline mode was projected")
	}
}

// TestProjectPhaseLanes: a phase with lanes of its own is projected on
// them (numbers by hand, as TestProjectPipelineModes): the tiny workload's
// phase 1 on 8 lanes, ⌈238/8⌉ = 30 waves, its phase 2 on the workload's 4,
// ⌈113/4⌉ = 29; with the pipeline off both run one batch at a time. A
// sample whose phase 1 ran fewer than 2 × 8 batches is too small, named
// by that phase's lanes, though 2 × 4 would do for the workload's.
func TestProjectPhaseLanes(t *testing.T) {
	w := TinyWorkload
	w.Phases = slices.Clone(w.Phases)
	w.Phases[0].Workers = 8
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	topk := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k, Rounds: 70}, nil }
	link := &transport.Profile{Name: "slow", Bandwidth: 1e9, Latency: 500 * time.Millisecond}
	for _, tc := range []struct {
		mode   string
		lanes  [2]int
		rounds [2]int64
	}{
		{"on", [2]int{8, 4}, [2]int64{2 + 10*30 + 70, 2 + 10*29 + 70}},
		{"off", [2]int{1, 1}, [2]int64{2 + 10*238 + 70, 2 + 10*113 + 70}},
	} {
		lr := fakeRun(w, 0.1)
		lr.Pipeline = tc.mode
		for i := range lr.Phases {
			lr.Phases[i].Batches = 10
		}
		p, err := Project(w, 0, link, lr, fakeRun(w, 0.1), topk)
		if err != nil {
			t.Fatal(err)
		}
		for i, ph := range p.Phases {
			if ph.Lanes != tc.lanes[i] || p.PhaseLanes(i) != tc.lanes[i] || ph.Rounds != tc.rounds[i] {
				t.Errorf("pipeline %s phase %d: %d lanes (PhaseLanes %d), %d rounds; want %d, %d", tc.mode, i+1, ph.Lanes, p.PhaseLanes(i), ph.Rounds, tc.lanes[i], tc.rounds[i])
			}
		}
		if want := tc.rounds[0] + tc.rounds[1]; p.Rounds != want || math.Abs(p.Bounds.LatencySeconds-float64(want)*0.5) > 1e-9 {
			t.Errorf("pipeline %s: %d rounds, latency bound %g s; want %d", tc.mode, p.Rounds, p.Bounds.LatencySeconds, want)
		}
		if want := map[string]string{"on": "on (4 lanes; phase 1: 8)", "off": "off (1 batch at a time)"}[tc.mode]; modeString(lr, p) != want {
			t.Errorf("pipeline %s: mode %q, want %q", tc.mode, modeString(lr, p), want)
		}
		flagged := tc.mode == "on"
		if (p.TooSmall != "") != flagged || flagged && !strings.Contains(p.TooSmall, "phase 1 ran 10 batch(es) of the 16 needed (2 × 8 lanes)") {
			t.Errorf("pipeline %s: too small %q", tc.mode, p.TooSmall)
		}
	}
	if got := w.BatchesText(); got != "batches of 4 on 4 lanes (phase 1: 8 lanes)" {
		t.Errorf("lanes in words: %q", got)
	}
	// Lanes beyond selection's bound are refused by the workload.
	w.Phases[0].Workers = selection.MaxWorkers + 1
	if err := w.Validate(); err == nil {
		t.Error("a phase on too many lanes validated")
	}
	if p, err := w.Params(1000); err == nil {
		t.Errorf("params of a phase on too many lanes: %+v", p.Schedule)
	}
}

// TestProjectPhaseBatchSize: a phase in batches of its own size is cut
// into them wherever the projection counts batches (numbers by hand, as
// TestProjectPhaseLanes): the tiny workload's phase 1 in batches of 8,
// ⌈950/8⌉ = 119 batches on 4 lanes, ⌈119/4⌉ = 30 waves; its phase 2 in
// the workload's 4, 113 batches, 29 waves; sharded on 2 pairs, phase 1's
// shards are 59 and 60 of its batches of 8. The schedule passed to selection carries
// the size, the words say it, and a size beyond selection's bound is
// refused.
func TestProjectPhaseBatchSize(t *testing.T) {
	w := TinyWorkload
	w.Phases = slices.Clone(w.Phases)
	w.Phases[0].BatchSize = 8
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	topk := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k, Rounds: 70}, nil }
	link := &transport.Profile{Name: "slow", Bandwidth: 1e9, Latency: 500 * time.Millisecond}
	p, err := Project(w, 0, link, fakeRun(w, 0.1), fakeRun(w, 0.1), topk)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		batches int
		rounds  int64
	}{{119, 2 + 10*30 + 70}, {113, 2 + 10*29 + 70}} {
		if ph := p.Phases[i]; ph.Batches != want.batches || ph.Rounds != want.rounds {
			t.Errorf("phase %d: %d batches, %d rounds; want %d, %d", i+1, ph.Batches, ph.Rounds, want.batches, want.rounds)
		}
	}
	sp, err := ProjectShards(w, 0, link, fakeRun(w, 0.1), fakeRun(w, 0.1), topk, ShardConfig{Shards: 2, Dealers: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Batches [59, 119) of 8, the last partial: 950 − 59·8 = 478 candidates.
	if ph := sp.Phases[0]; ph.Batches != 119 || ph.LargestShard != 478 || ph.Pair.Batches != 60 {
		t.Errorf("sharded phase 1: %d batches, largest shard %d of %d batches; want 119, 478 of 60", ph.Batches, ph.LargestShard, ph.Pair.Batches)
	}
	params, err := w.Params(1000)
	if err != nil || params.PhaseBatchSize(0) != 8 || params.PhaseBatchSize(1) != 4 {
		t.Errorf("params: %+v, %v", params.Schedule, err)
	}
	if got := w.BatchesText(); got != "batches of 4 on 4 lanes (phase 1: 8 on 4)" {
		t.Errorf("batches in words: %q", got)
	}
	w.Phases[0].BatchSize = selection.MaxBatchSize + 1
	if err := w.Validate(); err == nil {
		t.Error("a phase in too large batches validated")
	}
}

// TestQQPBertSampleWaves: qqp-bert's default sample gives every phase's
// lanes two waves of the phase's own batches (SteadySampleBatches: the
// projection measures a steady rate), and a dealer-free run of it opens
// no more streams than the transport's default bound (2 × lanes + 5: the
// parties' control, session and abort streams, a stream per lane, and
// beaver/ot's base stream and one per session and lane stream).
func TestQQPBertSampleWaves(t *testing.T) {
	w, err := WorkloadByName("qqp-bert")
	if err != nil {
		t.Fatal(err)
	}
	cand, _, err := w.PhaseSizes(w.Samples)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.Phases {
		bs, lanes := w.PhaseBatchSize(i), w.PhaseWorkers(i)
		if nb := (cand[i] + bs - 1) / bs; nb < SteadySampleBatches(lanes) {
			t.Errorf("phase %d: %d candidates of the %d-sample run make %d batches of %d, fewer than two waves of %d lanes", i+1, cand[i], w.Samples, nb, bs, lanes)
		}
		if 2*lanes+5 > transport.DefaultMaxStreams {
			t.Errorf("phase %d: %d lanes open %d streams dealer-free, more than %d", i+1, lanes, 2*lanes+5, transport.DefaultMaxStreams)
		}
	}
}

// TestSelectConfigBudget checks which prefetch budget a run uses: the
// configuration's, else the workload's, else selection's default; none
// with the pipeline off or a negative budget.
func TestSelectConfigBudget(t *testing.T) {
	w := TinyWorkload
	w.MemoryBudget = 5 << 20
	tests := []struct {
		name         string
		cfg          SelectConfig
		params, held int64
	}{
		{"selection's default", SelectConfig{Workload: TinyWorkload}, 0, selection.DefaultMemoryBudget},
		{"workload's", SelectConfig{Workload: w}, 5 << 20, 5 << 20},
		{"configuration's", SelectConfig{Workload: w, MemoryBudget: 7 << 20}, 7 << 20, 7 << 20},
		{"no prefetch", SelectConfig{Workload: w, MemoryBudget: -1}, -1, 0},
		{"pipeline off", SelectConfig{Workload: w, Pipeline: selection.PipelineOff}, 5 << 20, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.paramsBudget(); got != tc.params {
				t.Errorf("params budget %d, want %d", got, tc.params)
			}
			if got := tc.cfg.memoryBudget(); got != tc.held {
				t.Errorf("budget %d, want %d", got, tc.held)
			}
		})
	}
	if err := (SelectConfig{Workload: w, Pipeline: "sometimes"}).Check(); err == nil {
		t.Error("pipeline \"sometimes\" accepted")
	}
}

func TestBoundsLimiting(t *testing.T) {
	for _, tc := range []struct {
		b    Bounds
		want string
	}{
		{Bounds{BandwidthSeconds: 1, LatencySeconds: 2, ComputeSeconds: 3}, BoundCompute},
		{Bounds{BandwidthSeconds: 3, LatencySeconds: 2, ComputeSeconds: 1}, BoundBandwidth},
		{Bounds{BandwidthSeconds: 1, LatencySeconds: 3, ComputeSeconds: 2}, BoundLatency},
		{Bounds{BandwidthSeconds: 0, LatencySeconds: 0, ComputeSeconds: 0}, BoundCompute},
	} {
		if got := tc.b.Limiting(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.b, got, tc.want)
		}
	}
}

func TestHeapSampler(t *testing.T) {
	h := StartHeapSampler(time.Millisecond)
	h.SetPhase(2)
	h.SetPhase(1) // ignored: phases only move forward
	buf := make([]byte, 8<<20)
	time.Sleep(5 * time.Millisecond)
	peaks := h.Stop()
	if len(peaks) != 3 || peaks[2] == 0 || Peak(peaks) != peaks[2] || len(buf) == 0 {
		t.Errorf("peaks %v", peaks)
	}
}

// TestHeapInUse checks the stop-free reading against MemStats.HeapInuse
// (the two name the same spans) and that it sees a large allocation.
func TestHeapInUse(t *testing.T) {
	runtime.GC()
	before := HeapInUse()
	buf := make([]byte, 64<<20)
	buf[len(buf)-1] = 1
	got := HeapInUse()
	// Tests running beside this one allocate between the two readings (a
	// CI flake: 1.3 MiB apart), so each try brackets HeapInUse by
	// MemStats read before and after it, and one of five tries must agree
	// within 1 MiB: a wrong metric misses every time.
	var agree bool
	var lo, hi runtime.MemStats
	for range 5 {
		runtime.ReadMemStats(&lo)
		now := int64(HeapInUse())
		runtime.ReadMemStats(&hi)
		if now >= int64(min(lo.HeapInuse, hi.HeapInuse))-1<<20 && now <= int64(max(lo.HeapInuse, hi.HeapInuse))+1<<20 {
			agree = true
			break
		}
	}
	if !agree {
		t.Errorf("HeapInUse outside MemStats.HeapInuse read around it (%d, %d) by more than 1 MiB in five tries", lo.HeapInuse, hi.HeapInuse)
	}
	if got < before+60<<20 {
		t.Errorf("HeapInUse %d after a 64 MiB allocation, %d before", got, before)
	}
	runtime.KeepAlive(buf)
}

var (
	tinyOnce sync.Once
	tinyRep  *SelectReport
	tinyErr  error
	tinyDir  string
)

// tinyReport runs the tiny workload end to end once for the tests below.
func tinyReport(t *testing.T) *SelectReport {
	t.Helper()
	tinyOnce.Do(func() {
		var err error
		if tinyDir, err = os.MkdirTemp("", "bench-select-test-"); err != nil {
			tinyErr = err
			return
		}
		link := transport.Profile{Name: "test", Bandwidth: 100_000_000, Latency: 2 * time.Millisecond}
		cfg := SelectConfig{Workload: TinyWorkload, Link: &link, DealerLinks: [2]*transport.Profile{&link, &link}, Seed: 1, StateDir: tinyDir}
		if tinyRep, tinyErr = Select(context.Background(), cfg); tinyErr == nil {
			tinyErr = tinyRep.RunOff(context.Background(), cfg)
		}
		if tinyErr == nil {
			tinyErr = tinyRep.RunDeployment(context.Background(), cfg, DealerBesideP1(&link))
		}
	})
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyRep
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tinyDir != "" {
		os.RemoveAll(tinyDir)
	}
	os.Exit(code)
}

// TestSelectTiny runs the tiny workload end to end (sample runs with and
// without the link, QuickSelect at the pool's sizes, projection): the
// phases have the schedule's sizes, a batch costs what a lone Forward of the
// same network costs in rounds, the checkpoints were written, and the
// projection is consistent.
// TestSelectDealerLinks checks the tiny report's dealer placements: the
// sample over the link ran with the dealer behind the link (its dealer
// words and requests crossed it: the parties together received about the
// words the in-process dealer of the run without a link counted, each
// party its own kinds' words, and each sent requests), the deployment
// beside the data owner recorded its links, and each projection bounds all
// three links, each dealer link carrying its party's part of the dealer
// bytes.
func TestSelectDealerLinks(t *testing.T) {
	rep := tinyReport(t)
	if len(rep.Deployments) != 1 {
		t.Fatalf("%d deployments", len(rep.Deployments))
	}
	d := rep.Deployments[0]
	if d.Sample.DealerLinks[1].Name != "lan" || d.Sample.DealerLinks[0].Name != "test" || d.Placement != "dealer on test to P0, lan to P1" {
		t.Errorf("deployment %q with links %+v", d.Placement, d.Sample.DealerLinks)
	}
	if rep.Compute.DealerLinks != ([2]LinkSpec{}) {
		t.Errorf("the run without a link has dealer links %+v", rep.Compute.DealerLinks)
	}
	for _, run := range []*SampleRun{rep.Sample, d.Sample} {
		for i, ph := range run.Phases {
			var down, up [2]int64
			for _, part := range []Part{ph.Prepare, ph.Forward, ph.Select} {
				for p := range 2 {
					down[p] += part.DealerDown[p]
					up[p] += part.DealerUp[p]
				}
			}
			c := rep.Compute.Phases[i]
			// (QuickSelect's comparisons, hence its dealer words, vary
			// from run to run: within 10%.)
			if down[0]+up[0]+down[1]+up[1] != ph.DealerBytes || math.Abs(float64(down[0]+down[1]-c.DealerBytes)) > 0.1*float64(c.DealerBytes) ||
				ph.Forward.DealerUp[0] <= 0 || ph.Forward.DealerUp[1] <= 0 || down[0] <= 0 || down[1] <= 0 {
				t.Errorf("phase %d: dealer traffic down %v up %v over the links (%d in all); %d dealer bytes without a link", i+1, down, up, ph.DealerBytes, c.DealerBytes)
			}
		}
	}
	for _, p := range []*Projection{rep.Projection, d.Projection} {
		if len(p.Bounds.Links) != 3 || p.Bounds.Links[0].Link != LinkParties || p.Bounds.Links[1].Link != LinkDealerP0 || p.Bounds.Links[2].Link != LinkDealerP1 ||
			p.Bounds.Links[1].Bytes[0]+p.Bounds.Links[2].Bytes[0] < p.DealerBytes/2 || p.Bounds.Links[1].Bytes[0] <= 0 || p.Bounds.Links[2].Bytes[0] <= 0 {
			t.Errorf("links %+v (dealer bytes %d)", p.Bounds.Links, p.DealerBytes)
		}
		if p.LimitingLink == "" || p.Bounds.BandwidthSeconds <= 0 {
			t.Errorf("limiting link %q, bandwidth bound %g", p.LimitingLink, p.Bounds.BandwidthSeconds)
		}
	}
	if d.Projection.Bounds.Links[2].Seconds >= rep.Projection.Bounds.Links[2].Seconds {
		t.Errorf("the dealer↔P1 bound on a LAN (%g s) is not below the one on the link (%g s)", d.Projection.Bounds.Links[2].Seconds, rep.Projection.Bounds.Links[2].Seconds)
	}
	for _, bad := range []SelectConfig{
		{Workload: TinyWorkload, DealerLinks: [2]*transport.Profile{&transport.LAN, nil}},
		{Workload: TinyWorkload, Link: &transport.LAN, Provider: "ot", DealerLinks: [2]*transport.Profile{nil, &transport.LAN}},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("dealer links %v with link %v and provider %q accepted", bad.DealerLinks, bad.Link, bad.Provider)
		}
	}
}

func TestSelectTiny(t *testing.T) {
	start := time.Now()
	rep := tinyReport(t)
	w := TinyWorkload
	cand, kept, err := w.PhaseSizes(w.Samples)
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []*SampleRun{rep.Sample, rep.Compute} {
		if run == nil || len(run.Phases) != len(w.Phases) || run.Seconds <= 0 || run.PeakHeapAll == 0 {
			t.Fatalf("run %+v", run)
		}
		// The commitment: the bootstrap's openings, each 45 bytes, the
		// item and at most ⌈log2 n⌉ hashes, after a 4-byte count.
		c, n := run.Commitment, w.Samples
		per := int64(45 + w.ItemBytes())
		if c == nil || c.Openings == 0 || c.ItemBytes != 4*w.Seq || c.RootBytes != 79 ||
			c.OpeningBytes < 4+int64(c.Openings)*per || c.OpeningBytes > 4+int64(c.Openings)*(per+32*int64(bits.Len(uint(n-1)))) ||
			c.ProjectedOpeningBytes <= c.OpeningBytes {
			t.Errorf("commitment %+v", c)
		}
		for i, ph := range run.Phases {
			fw, err := Forward(context.Background(), w.Forward(i, 2))
			if err != nil {
				t.Fatal(err)
			}
			if ph.Candidates != cand[i] || ph.Kept != kept[i] || ph.Batches != (cand[i]+w.BatchSize-1)/w.BatchSize {
				t.Errorf("phase %d: %d → %d in %d batches, want %d → %d", i, ph.Candidates, ph.Kept, ph.Batches, cand[i], kept[i])
			}
			if ph.RoundsPerBatch != fw.Rounds || ph.Prepare.Rounds != fw.PrepareRounds || ph.Prepare.BytesP0 != fw.PrepareBytesP0 {
				t.Errorf("phase %d: %d rounds per batch, prepare %+v; a lone Forward: %d, prepare %d rounds %d B", i, ph.RoundsPerBatch, ph.Prepare, fw.Rounds, fw.PrepareRounds, fw.PrepareBytesP0)
			}
			if ph.Forward.BytesP0 <= 0 || ph.Forward.BytesP1 <= 0 || ph.Forward.DealerBytes <= 0 || ph.Select.BytesP0 <= 0 ||
				ph.Rounds < ph.Forward.Rounds+ph.Select.Rounds || ph.Comparisons < int64(cand[i]-1) || ph.Select.Rounds != 6*int64(ph.Steps) {
				t.Errorf("phase %d: %+v", i, ph)
			}
		}
	}
	for p := range 2 {
		for _, sub := range []string{"link", "off"} {
			if _, err := os.Stat(selection.StateFile(filepath.Join(tinyDir, sub), p)); err != nil {
				t.Errorf("no checkpoint of party %d in %s: %v", p, sub, err)
			}
		}
	}
	// The baseline (the pipeline off) runs one batch at a time: more
	// rounds on the critical path in every phase, nothing prefetched, and
	// a projection with one batch in flight.
	on, off := rep.Sample, rep.Off
	if off == nil || off.Pipeline != "off" || on.Pipeline != "on" || off.MemoryBudget != 0 || on.MemoryBudget != selection.DefaultMemoryBudget || len(off.Phases) != len(on.Phases) {
		t.Fatalf("pipelined run %+v, baseline %+v", on, off)
	}
	for i := range on.Phases {
		a, b := on.Phases[i], off.Phases[i]
		if b.Forward.Rounds <= a.Forward.Rounds || b.Rounds <= a.Rounds || b.RoundsPerBatch != a.RoundsPerBatch {
			t.Errorf("phase %d: forward rounds on %d, off %d; phase rounds on %d, off %d; per batch %d, %d", i, a.Forward.Rounds, b.Forward.Rounds, a.Rounds, b.Rounds, a.RoundsPerBatch, b.RoundsPerBatch)
		}
		if b.PeakInFlight != 1 || b.Prefetched != 0 || b.PeakPrefetchP0 != 0 || a.PeakInFlight < 2 || a.PeakInFlight > w.Workers {
			t.Errorf("phase %d: in flight %d on, %d off; prefetched off %d (%d B)", i, a.PeakInFlight, b.PeakInFlight, b.Prefetched, b.PeakPrefetchP0)
		}
		if a.PeakPrefetchP0 > on.MemoryBudget || a.PeakPrefetchP1 > on.MemoryBudget {
			t.Errorf("phase %d: prefetch held %d/%d B over the budget %d", i, a.PeakPrefetchP0, a.PeakPrefetchP1, on.MemoryBudget)
		}
	}
	if on.Phases[0].Prefetched == 0 || on.Phases[0].PeakPrefetchP0 == 0 || on.Phases[0].PeakPrefetchP1 == 0 {
		t.Errorf("phase 0 (%d batches on %d lanes) prefetched nothing: %+v", on.Phases[0].Batches, w.Workers, on.Phases[0])
	}
	op := rep.OffProjection
	if op == nil || op.Lanes != 1 || op.Pipeline != "off" || rep.Projection.Lanes != w.Workers || op.Rounds <= rep.Projection.Rounds ||
		op.Bounds.LatencySeconds <= rep.Projection.Bounds.LatencySeconds || op.Bounds.ComputeSeconds != rep.Projection.Bounds.ComputeSeconds {
		t.Errorf("projection off %+v, on %+v", op, rep.Projection)
	}
	if g, ok := rep.Gain(); !ok || g.ProjectedSpeedup <= 0 || g.MeasuredSpeedup <= 0 || g.OverBound <= 0 {
		t.Errorf("gain %+v %v", g, ok)
	}
	pr := rep.Projection
	if pr.Pool != w.Pool || pr.Hours <= 0 || pr.Bounds.ComputeSeconds <= 0 || pr.Bounds.LatencySeconds <= 0 || pr.Bounds.BandwidthSeconds <= 0 || len(pr.Phases) != len(w.Phases) {
		t.Errorf("projection %+v", pr)
	}
	for i, ph := range pr.Phases {
		if !ph.TopK.Measured || ph.TopK.N != ph.Candidates || ph.TopK.K != ph.Kept || ph.Seconds < ph.TopKSeconds {
			t.Errorf("projected phase %d: %+v", i, ph)
		}
	}
	// The JSON round trip decodes and a truncated one is refused.
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := DecodeSelectReport(b); err != nil || back.Projection.Hours != pr.Hours || back.OffProjection.Hours != op.Hours {
		t.Errorf("round trip: %v", err)
	}
	if _, err := DecodeSelectReport(b[:len(b)/2]); err == nil {
		t.Error("truncated report decoded")
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Logf("tiny workload took %v (over the 20 s goal; machine load %s)", el, LoadAverage())
	}
}

// TestCompare checks the cross-check: a run agrees with itself and a run
// whose forward is 20% slower disagrees on exactly the time figures.
func TestCompare(t *testing.T) {
	rep := *tinyReport(t)
	cc, err := rep.Compare(rep.Sample, 0.10)
	if err != nil || !cc.Agree {
		t.Fatalf("self-comparison: %v %+v", err, cc)
	}
	slow := *rep.Sample
	slow.Phases = slices.Clone(rep.Sample.Phases)
	for i := range slow.Phases {
		slow.Phases[i].Forward.Seconds *= 1.2
		slow.Phases[i].Steady.Seconds *= 1.2
	}
	cc, err = rep.Compare(&slow, 0.10)
	if err != nil {
		t.Fatal(err)
	}
	if cc.Agree {
		t.Error("a 20% slower forward agreed")
	}
	for _, c := range cc.Checks {
		wantOK := !strings.Contains(c.Name, "seconds") && !strings.Contains(c.Name, "projected")
		if c.OK != wantOK {
			t.Errorf("%+v", c)
		}
	}
	short := slow
	short.Phases = short.Phases[:1]
	if _, err := rep.Compare(&short, 0.1); err == nil {
		t.Error("a run with a missing phase was compared")
	}
}

// TestDilate: a run dilated by k has every wall time divided by k and its
// CPU seconds as measured; it cannot be dilated twice or by k ≤ 1. The
// report's projection is then made from such a processes' run (two hosts
// emulated), and the cross-check compares its bytes and rounds only.
func TestDilate(t *testing.T) {
	rep := *tinyReport(t)
	run := *rep.Sample
	run.Phases = slices.Clone(rep.Sample.Phases)
	for i := range run.Phases {
		run.Phases[i].Forward.CPUSeconds = [2]float64{3, 5}
		run.Phases[i].Prepare.CPUSeconds = [2]float64{1, 1}
	}
	for _, k := range []float64{1, 0.5, 0, -2} {
		if err := run.Dilate(k); err == nil {
			t.Errorf("dilated by %g", k)
		}
	}
	if err := run.Dilate(2); err != nil {
		t.Fatal(err)
	}
	if run.Seconds != rep.Sample.Seconds/2 || run.Dilation != 2 {
		t.Errorf("run: %g s, dilation %g; want %g s, 2", run.Seconds, run.Dilation, rep.Sample.Seconds/2)
	}
	for i, ph := range run.Phases {
		was := rep.Sample.Phases[i]
		if ph.Seconds != was.Seconds/2 || ph.Steady.Seconds != was.Steady.Seconds/2 || ph.Prepare.Seconds != was.Prepare.Seconds/2 ||
			ph.Forward.Seconds != was.Forward.Seconds/2 || ph.Select.Seconds != was.Select.Seconds/2 {
			t.Errorf("phase %d: %+v, from %+v", i+1, ph, was)
		}
		if ph.Forward.CPUSeconds != [2]float64{3, 5} || ph.Steady.Candidates != was.Steady.Candidates {
			t.Errorf("phase %d: CPU seconds %v, steady candidates %d changed", i+1, ph.Forward.CPUSeconds, ph.Steady.Candidates)
		}
	}
	if err := run.Dilate(2); err == nil {
		t.Error("dilated twice")
	}
	before := rep.Projection
	cc, err := rep.Compare(&run, 0.10)
	if err != nil || !cc.Agree {
		t.Fatalf("%v %+v", err, cc)
	}
	for _, c := range cc.Checks {
		if strings.Contains(c.Name, "seconds") || strings.Contains(c.Name, "projected") {
			t.Errorf("a dilated run's times were compared: %+v", c)
		}
	}
	if len(cc.Checks) != 3*len(run.Phases) {
		t.Errorf("%d checks, want bytes both ways and rounds of %d phases", len(cc.Checks), len(run.Phases))
	}
	want, err := rep.projectFrom(&run, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cc.InProcessProjection != before {
		t.Error("the in-process run's projection not kept beside the dilated run's")
	}
	if rep.Projection == before || rep.Projection.Seconds != want.Seconds || rep.Projection.ComputeHosts != ComputeOwn {
		t.Errorf("projection %g s on %q hosts, want the dilated processes' run's %g s on own hosts (in-process %g s)",
			rep.Projection.Seconds, rep.Projection.ComputeHosts, want.Seconds, before.Seconds)
	}
	b, err := json.Marshal(&rep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSelectReport(b); err != nil {
		t.Errorf("a report with a dilated processes' run: %v", err)
	}
	rep.Sample = &run
	if b, err = json.Marshal(&rep); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeSelectReport(b); err == nil {
		t.Error("a report with a dilated in-process run decoded")
	}
}

func TestWritePlotsAndMarkdown(t *testing.T) {
	rep := tinyReport(t)
	dir := t.TempDir()
	files, err := WritePlots(dir, []*SelectReport{rep})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG (%v)", f, err)
		}
	}
	var md bytes.Buffer
	if err := WriteSelectSummary(&md, []*SelectReport{rep}); err != nil {
		t.Fatal(err)
	}
	if err := WriteSelectDetails(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"`tiny`", rep.Projection.Limiting + "-bound", "| 1 | ⟨1L,2H,d2⟩ |", "Projected to the pool of 1000", "| on (4 lanes) |",
		"| off (1 batch at a time) |", "projected speed-up", "pipelined projected ÷ max(bandwidth, compute bound) =", "⌈batches ÷ lanes⌉", "| batches | lanes | rounds |", "Baseline, the same sample",
		"| dealer on test to both parties |", "| dealer on test to P0, lan to P1 |", "| dealer↔P1 | test |", "| dealer↔P1 | lan |", "With the dealer on test to P0, lan to P1 instead",
		"| " + rep.Sample.CPU + " |", "CPU: " + rep.Sample.CPU} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if _, err := WritePlots(dir, nil); err == nil {
		t.Error("plots of nothing")
	}
}

func FuzzDecodeSelectReport(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"workload":{"name":"x","phases":[{"layers":1}]},"sample":{"phases":[{}]},"projection":{"phases":[{}]},"topk":[{}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"workload":{"name":"x","phases":[{"layers":1}]},"sample":{"phases":[{}]},"projection":{"phases":[{}]},"topk":[{}],"off_projection":{"phases":[{}]}}`))
	f.Add([]byte(`{"workload":{"name":"tiny","target":"t","shape":"tiny","seq":8,"pool":1000,"budget":0.2,"bootstrap":0.05,"phases":[{"layers":1,"heads":2,"mlp_dim":2,"survive":0.5},{"layers":1,"heads":4,"mlp_dim":4,"survive":0.2}],"samples":40,"batch_size":4,"workers":4},` +
		`"sample":{"phases":[{},{}]},"projection":{"phases":[{},{}]},"topk":[{},{}],"off":{"pipeline":"off","phases":[{},{}]},"off_projection":{"phases":[{},{}]}}`))
	f.Add([]byte(`{"workload":{"name":"tiny","target":"t","shape":"tiny","seq":8,"pool":1000,"budget":0.2,"bootstrap":0.05,"phases":[{"layers":1,"heads":2,"mlp_dim":2,"survive":0.5},{"layers":1,"heads":4,"mlp_dim":4,"survive":0.2}],"samples":40,"batch_size":4,"workers":4},` +
		`"sample":{"phases":[{},{}]},"projection":{"phases":[{},{}]},"topk":[{},{},{"n":5}],"sharded":{"shards":4,"phases":[{},{}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeSelectReport(b)
		if err != nil {
			return
		}
		n := len(r.Workload.Phases)
		if n == 0 || len(r.Sample.Phases) != n || len(r.Projection.Phases) != n || r.Workload.Validate() != nil || r.Projection.Lanes < 1 ||
			(r.Off == nil) != (r.OffProjection == nil) || r.Off != nil && (len(r.Off.Phases) != n || r.OffProjection.Lanes < 1) ||
			len(r.TopK) < n || r.Sharded != nil && (len(r.Sharded.Phases) != n || r.Sharded.Shards < 1 || r.Sharded.Shards > MaxShards) {
			t.Fatalf("accepted an inconsistent report: %+v", r)
		}
	})
}

// TestSelectTinyDealerFree runs the tiny workload with no dealer (the
// parties make their correlations by OT) and with the in-process dealer on
// the same seed: the online forward costs the same rounds and bytes, the
// phases' online bytes leave out the OT streams, and the OT traffic shows
// as the phases' dealer bytes, every byte counted once each way. The data
// owner's batches start late (while its lanes' producers already fetch
// their material), as on a loaded machine: the counts must not depend on
// when a party's first batch starts.
func TestSelectTinyDealerFree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	late := func(_ context.Context, party int) {
		if party == 1 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	runs := map[string]*SampleRun{}
	for _, prov := range []string{"dealer", "ot", "he"} {
		run, err := RunSelect(ctx, SelectConfig{Workload: TinyWorkload, Samples: 16, Seed: 3, Provider: prov, beforeBatch: late})
		if err != nil {
			t.Fatalf("%s: %v", prov, err)
		}
		runs[prov] = run
	}
	d, o := runs["dealer"], runs["ot"]
	if len(d.Phases) != len(o.Phases) {
		t.Fatalf("%d phases with the dealer, %d without", len(d.Phases), len(o.Phases))
	}
	for i := range d.Phases {
		dp, op := d.Phases[i], o.Phases[i]
		if dp.Forward.BytesP0 != op.Forward.BytesP0 || dp.Forward.BytesP1 != op.Forward.BytesP1 || dp.Forward.Rounds != op.Forward.Rounds || dp.Prepare != withSeconds(op.Prepare, dp.Prepare.Seconds) {
			t.Errorf("phase %d: forward %+v prepare %+v with the dealer, %+v %+v without", i, dp.Forward, dp.Prepare, op.Forward, op.Prepare)
		}
		if op.BytesP0 > 2*dp.BytesP0 || op.BytesP1 > 2*dp.BytesP1 {
			t.Errorf("phase %d: online bytes %d/%d without a dealer, %d/%d with: OT traffic counted as online", i, op.BytesP0, op.BytesP1, dp.BytesP0, dp.BytesP1)
		}
		if op.DealerBytes <= 10*dp.DealerBytes {
			t.Errorf("phase %d: %d B of OT traffic, %d B from the dealer", i, op.DealerBytes, dp.DealerBytes)
		}
		// What one party sent the other received, in the same part.
		for _, prov := range []string{"ot", "he"} {
			ph := runs[prov].Phases[i]
			for _, part := range []Part{ph.Prepare, ph.Forward} {
				if part.DealerDown != [2]int64{part.DealerUp[1], part.DealerUp[0]} || part.DealerBytes != 2*(part.DealerUp[0]+part.DealerUp[1]) {
					t.Errorf("%s: phase %d: provider traffic received %v, sent %v, %d B in all: want what one party sent received by the other", prov, i, part.DealerDown, part.DealerUp, part.DealerBytes)
				}
			}
		}
	}
	// The data owner's HE products and their passes over the weights are
	// counted, and only with HE.
	for i, ph := range runs["he"].Phases {
		if f := ph.Forward; f.HEProducts == 0 || f.HEPasses < 1 || f.HEPasses > f.HEProducts {
			t.Errorf("he: phase %d: %d HE products in %d passes", i, f.HEProducts, f.HEPasses)
		}
		if f := o.Phases[i].Forward; f.HEProducts != 0 || f.HEPasses != 0 {
			t.Errorf("ot: phase %d: %d HE products in %d passes, want none", i, f.HEProducts, f.HEPasses)
		}
	}
	if s := hePassesString(runs["he"].Phases); !strings.Contains(s, "phase 1 ") {
		t.Errorf("HE passes said as %q", s)
	}
	if s := hePassesString(o.Phases); s != "" {
		t.Errorf("HE passes said without HE: %q", s)
	}
	// Without a dealer the OT traffic crosses the parties' link: the
	// bandwidth bound counts it, each party's in the direction it sent it
	// (what one party sent the other received: DealerBytes counts every
	// byte twice).
	link := transport.Profile{Name: "test", Bandwidth: 1 << 20, Latency: time.Millisecond}
	noTopK := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k}, nil }
	pd, err := Project(TinyWorkload, 0, &link, d, d, noTopK)
	if err != nil {
		t.Fatal(err)
	}
	po, err := Project(TinyWorkload, 0, &link, o, o, noTopK)
	if err != nil {
		t.Fatal(err)
	}
	var up [2]int64
	for _, ph := range po.Phases {
		up[0] += ph.DealerUp[0]
		up[1] += ph.DealerUp[1]
	}
	// The projection scales each part's counts to the pool, truncating
	// each: a few bytes of rounding per phase.
	if d := po.DealerBytes - 2*(up[0]+up[1]); up[0] == 0 || up[1] == 0 || d < -4*int64(len(po.Phases)) || d > 4*int64(len(po.Phases)) {
		t.Errorf("provider traffic sent %v, %d B both parties' sent and received: want every byte counted once each way", up, po.DealerBytes)
	}
	if want := float64(max(po.BytesP0+up[0], po.BytesP1+up[1])) / float64(link.Bandwidth); po.Bounds.BandwidthSeconds != want || pd.Bounds.BandwidthSeconds >= want/10 {
		t.Errorf("bandwidth bound %.1f s without a dealer (want %.1f), %.1f s with", po.Bounds.BandwidthSeconds, want, pd.Bounds.BandwidthSeconds)
	}
	if _, err := RunSelect(ctx, SelectConfig{Workload: TinyWorkload, Samples: 16, Provider: "tee"}); err == nil || !strings.Contains(err.Error(), "tee") {
		t.Errorf("provider tee: %v", err)
	}
}

// withSeconds returns p with its Seconds set to s (to compare the rest).
func withSeconds(p Part, s float64) Part {
	p.Seconds = s
	return p
}

// TestSelectTinyPipelineModesAlike runs the tiny workload with the pipeline
// on and with it off in the same selection session: a first run stops when
// the model owner starts phase 0 (the coin and the bootstrap sample are
// checkpointed by then), and both modes resume from copies of its state
// directories with the same deterministic dealer, so the bootstrap, the
// candidates and the correlated randomness of every batch are the same. The
// selected indices must be identical, and the pipeline off must take more
// rounds on the critical path in every phase, with one batch in flight and
// nothing prefetched.
func TestSelectTinyPipelineModesAlike(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seeds := [2]share.Seed{{9}, {10}}
	run := func(ctx context.Context, cfg SelectConfig, onPhase0 func(int)) ([2]*PartyRun, error) {
		r, err := twoparty.Run(ctx, twoparty.Config{Seeds: seeds}, func(ctx context.Context, p *twoparty.Party) (*PartyRun, error) {
			var on func(int)
			if p.ID == 0 {
				on = onPhase0
			}
			return RunSelectParty(ctx, p.ID, p.Conn, p.Provider, cfg, on)
		})
		if err != nil {
			return [2]*PartyRun{}, err
		}
		return r.Out, nil
	}
	base := t.TempDir()
	cfg := SelectConfig{Workload: TinyWorkload, Seed: 5, StateDir: base}
	stopCtx, stop := context.WithCancel(ctx)
	if _, err := run(stopCtx, cfg, func(int) { stop() }); err == nil {
		t.Fatal("the stopped run finished")
	}
	stop()
	if _, err := os.Stat(selection.StateFile(base, 0)); err != nil {
		t.Fatalf("no checkpoint after the stopped run: %v", err)
	}
	runs := map[selection.PipelineMode]*SampleRun{}
	for _, mode := range []selection.PipelineMode{selection.PipelineOn, selection.PipelineOff} {
		dir := filepath.Join(t.TempDir(), string(mode))
		if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.StateDir, c.Pipeline, c.resume = dir, mode, true
		parties, err := run(ctx, c, nil)
		if err != nil {
			t.Fatalf("pipeline %s: %v", mode, err)
		}
		if runs[mode], err = NewSampleRun(c, parties); err != nil {
			t.Fatalf("pipeline %s: %v", mode, err)
		}
	}
	on, off := runs[selection.PipelineOn], runs[selection.PipelineOff]
	if want := TinyWorkload.Samples/5 - 2; len(on.Selected) != want || !slices.Equal(on.Selected, off.Selected) {
		t.Errorf("selected %v with the pipeline on, %v off (want %d each, alike)", on.Selected, off.Selected, want)
	}
	for i := range on.Phases {
		a, b := on.Phases[i], off.Phases[i]
		if a.Candidates != b.Candidates || a.Kept != b.Kept || a.Forward.BytesP0 != b.Forward.BytesP0 || a.Forward.BytesP1 != b.Forward.BytesP1 {
			t.Errorf("phase %d: work differs: on %+v, off %+v", i, a.Forward, b.Forward)
		}
		if b.Forward.Rounds <= a.Forward.Rounds || b.PeakInFlight != 1 || a.PeakInFlight < 2 || b.Prefetched != 0 {
			t.Errorf("phase %d: forward rounds on %d, off %d; in flight on %d, off %d; prefetched off %d", i, a.Forward.Rounds, b.Forward.Rounds, a.PeakInFlight, b.PeakInFlight, b.Prefetched)
		}
	}
	// A sample run refuses a state directory holding a checkpoint unless
	// it resumes (tests only).
	c := cfg
	if _, err := run(ctx, c, nil); err == nil || !strings.Contains(err.Error(), "checkpoint") {
		t.Errorf("a run over a checkpoint: %v", err)
	}
}

func TestSteadyRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tests := []struct {
		name  string
		ends  []batchEnd
		lanes int
		want  Steady
	}{
		{"single wave", []batchEnd{{at(5), 8}, {at(5.1), 8}}, 2, Steady{}},
		{"slow first wave", []batchEnd{{at(7), 8}, {at(7.2), 8}, {at(8.2), 8}, {at(8.4), 8}, {at(9.2), 4}}, 2,
			Steady{Seconds: 2, Candidates: 20}},
		{"out of order", []batchEnd{{at(9.2), 4}, {at(7.2), 8}, {at(8.4), 8}, {at(7), 8}, {at(8.2), 8}}, 2,
			Steady{Seconds: 2, Candidates: 20}},
		{"one lane", []batchEnd{{at(3), 8}, {at(4), 8}, {at(5), 8}}, 1, Steady{Seconds: 2, Candidates: 16}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &phaseMeter{ends: tc.ends}
			got := m.steady(tc.lanes)
			if math.Abs(got.Seconds-tc.want.Seconds) > 1e-9 || got.Candidates != tc.want.Candidates {
				t.Errorf("steady = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestForwardSecondsProjection(t *testing.T) {
	tests := []struct {
		name    string
		seconds float64
		n       int
		st      Steady
		c       int
		want    float64
	}{
		// 100 candidates in 10 s, the first wave slow: the steady 0.05 s
		// per candidate for the other 900, the start-up once.
		{"steady rate", 10, 100, Steady{Seconds: 2, Candidates: 40}, 1000, 10 + 0.05*900},
		{"no steady window", 10, 100, Steady{}, 1000, 100},
		{"fewer than the sample", 10, 100, Steady{Seconds: 2, Candidates: 40}, 50, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := forwardSeconds(tc.seconds, tc.n, tc.st, tc.c); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("forwardSeconds = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestProjectTooSmall: a projection from a sample whose phases ran fewer
// than 2 × lanes batches (no steady rate measured) says so (issue 30:
// `select --samples 16` projected 3.60 h against a 1.23 h compute bound
// without a word).
func TestProjectTooSmall(t *testing.T) {
	w := TinyWorkload // 4 lanes, samples 40
	noTopK := func(n, k int) (TopKCost, error) { return TopKCost{N: n, K: k}, nil }
	for _, tc := range []struct {
		name    string
		mode    string
		batches [2]int
		want    string // "" : not too small
	}{
		{"one batch", "on", [2]int{1, 1}, "phase 1 ran 1 batch(es) of the 8 needed (2 × 4 lanes) to measure a steady rate"},
		{"second phase short", "on", [2]int{8, 5}, "phase 2 ran 5 batch(es) of the 8 needed"},
		{"enough", "on", [2]int{8, 8}, ""},
		{"pipeline off", "off", [2]int{2, 2}, ""},
		{"pipeline off, one batch", "off", [2]int{1, 3}, "phase 1 ran 1 batch(es) of the 2 needed (2 × 1 lanes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lr := fakeRun(w, 0.1)
			lr.Pipeline = tc.mode
			for i := range lr.Phases {
				lr.Phases[i].Batches = tc.batches[i]
			}
			p, err := Project(w, 0, nil, lr, lr, noTopK)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" && p.TooSmall != "" || tc.want != "" && !strings.Contains(p.TooSmall, tc.want) {
				t.Fatalf("TooSmall = %q, want %q", p.TooSmall, tc.want)
			}
			if tc.want != "" && !strings.Contains(p.TooSmall, "rerun with --samples ") {
				t.Fatalf("TooSmall %q does not say what to do", p.TooSmall)
			}
		})
	}
}

// TestProjectLinkBounds checks the bound of each link, numbers by hand: the
// tiny workload's pool of 1000 runs 950 + 450 = 1400 candidates through the
// forward; the fake run sends, per candidate, 1000 B from P0 and 3000 B
// from P1 (plus 100 B of weight sharing per phase from P0 and QuickSelect's 40 B per
// candidate each way), and the dealer traffic per candidate is set per
// case. A link's bound is its busiest direction ÷ its bandwidth; the
// largest names the limiting link.
func TestProjectLinkBounds(t *testing.T) {
	w := TinyWorkload
	const tkDealer = 7 // QuickSelect's dealer bytes per candidate, counted to P1
	topk := func(n, k int) (TopKCost, error) {
		return TopKCost{N: n, K: k, Rounds: 70, BytesP0: int64(40 * n), BytesP1: int64(40 * n), DealerBytes: int64(tkDealer * n)}, nil
	}
	thin := &transport.Profile{Name: "thin", Bandwidth: 10_000, Latency: time.Millisecond}
	lan := &transport.Profile{Name: "lan", Bandwidth: 1e9, Latency: 100 * time.Microsecond}
	const c = 1400
	parties := [2]int64{2*100 + 1000*c + 40*c, 3000*c + 40*c}
	tests := []struct {
		name    string
		dealer  [2]*transport.Profile
		down    [2]int64 // per candidate (zero: the legacy DealerBytes only)
		up      [2]int64
		bytes   int64 // DealerBytes per candidate
		links   map[string][2]int64
		limit   string
		seconds float64 // the bandwidth bound
	}{
		{"dealer in process", [2]*transport.Profile{}, [2]int64{}, [2]int64{}, 500,
			map[string][2]int64{LinkParties: parties}, LinkParties, float64(parties[1]) / 1e4},
		{"dealer on the parties' link, fewer bytes than P1 sends", [2]*transport.Profile{thin, thin}, [2]int64{0, 480}, [2]int64{0, 20}, 500,
			map[string][2]int64{LinkParties: parties, LinkDealerP0: {0, 0}, LinkDealerP1: {480*c + tkDealer*c, 20 * c}}, LinkParties, float64(parties[1]) / 1e4},
		{"dealer on the parties' link, more bytes", [2]*transport.Profile{thin, thin}, [2]int64{10, 4900}, [2]int64{1, 90}, 5001,
			map[string][2]int64{LinkParties: parties, LinkDealerP0: {10 * c, 1 * c}, LinkDealerP1: {4900*c + tkDealer*c, 90 * c}}, LinkDealerP1, float64(4900*c+tkDealer*c) / 1e4},
		{"dealer beside P1 on a LAN", [2]*transport.Profile{thin, lan}, [2]int64{10, 4900}, [2]int64{1, 90}, 5001,
			map[string][2]int64{LinkParties: parties, LinkDealerP0: {10 * c, 1 * c}, LinkDealerP1: {4900*c + tkDealer*c, 90 * c}}, LinkParties, float64(parties[1]) / 1e4},
		{"dealer beside P0 on a LAN", [2]*transport.Profile{lan, thin}, [2]int64{10, 4900}, [2]int64{1, 90}, 5001,
			map[string][2]int64{LinkParties: parties, LinkDealerP0: {10 * c, 1 * c}, LinkDealerP1: {4900*c + tkDealer*c, 90 * c}}, LinkDealerP1, float64(4900*c+tkDealer*c) / 1e4},
		{"run recorded without directions: all to P1", [2]*transport.Profile{thin, thin}, [2]int64{}, [2]int64{}, 5000,
			map[string][2]int64{LinkParties: parties, LinkDealerP0: {0, 0}, LinkDealerP1: {5000*c + tkDealer*c, 0}}, LinkDealerP1, float64(5000*c+tkDealer*c) / 1e4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runs := [2]*SampleRun{fakeRun(w, 0.1), fakeRun(w, 0.2)}
			for _, r := range runs {
				if tc.dealer != [2]*transport.Profile{} {
					r.DealerLinks = [2]LinkSpec{SpecOf(tc.dealer[0]), SpecOf(tc.dealer[1])}
				}
				for i := range r.Phases {
					f := &r.Phases[i].Forward
					n := int64(r.Phases[i].Candidates)
					f.DealerBytes = tc.bytes * n
					for p := range 2 {
						f.DealerDown[p], f.DealerUp[p] = tc.down[p]*n, tc.up[p]*n
					}
				}
			}
			p, err := Project(w, 0, thin, runs[1], runs[0], topk)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Bounds.Links) != len(tc.links) {
				t.Fatalf("links %+v, want %v", p.Bounds.Links, tc.links)
			}
			for _, l := range p.Bounds.Links {
				want, ok := tc.links[l.Link]
				if !ok || l.Bytes != want {
					t.Errorf("%s: bytes %v, want %v", l.Link, l.Bytes, want)
				}
				prof := thin
				switch l.Link {
				case LinkDealerP0:
					prof = tc.dealer[0]
				case LinkDealerP1:
					prof = tc.dealer[1]
				}
				if wantS := float64(max(l.Bytes[0], l.Bytes[1])) / float64(prof.Bandwidth); math.Abs(l.Seconds-wantS) > 1e-9 || l.Profile != prof.Name {
					t.Errorf("%s: %g s over %s, want %g s over %s", l.Link, l.Seconds, l.Profile, wantS, prof.Name)
				}
			}
			if p.LimitingLink != tc.limit || math.Abs(p.Bounds.BandwidthSeconds-tc.seconds) > 1e-9 || p.Limiting != BoundBandwidth {
				t.Errorf("limiting %s link %s, bandwidth bound %g s; want bandwidth, %s, %g s", p.Limiting, p.LimitingLink, p.Bounds.BandwidthSeconds, tc.limit, tc.seconds)
			}
			if m := BoundModelSeconds(p, *thin); m < p.Bounds.BandwidthSeconds-1e-9 {
				t.Errorf("bound model %g s below the bandwidth bound %g s", m, p.Bounds.BandwidthSeconds)
			}
		})
	}
}

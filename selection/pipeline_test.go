package selection

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/transport"
)

// shifted is testValue + 1: its squares are at least 2e-3 apart, so the
// squared selection equals the plaintext one.
func shifted(phase, idx int) float64 { return testValue(phase, idx) + 1 }

// squared is the plaintext of what the square evaluator computes.
func squared(phase, idx int) float64 { v := shifted(phase, idx); return v * v }

// fixedCoins are the two parties' fixed contributions to the coin toss.
func fixedCoins() [2]*bytes.Reader {
	return [2]*bytes.Reader{bytes.NewReader(bytes.Repeat([]byte{7}, 32)), bytes.NewReader(bytes.Repeat([]byte{9}, 32))}
}

type pipeRun struct {
	p      [2]Params
	dirs   [2]string
	square bool
	delay  func(phase int, idx []int) time.Duration
	// stopAfter > 0 closes the data owner's connection once that many
	// batches of phase stopPhase (0 when unset) are done.
	stopAfter, stopPhase int
	// diverge makes every real batch draw one item more than rehearsed.
	diverge bool
	// dealerFree makes the parties' correlations by OT (ot.Provider)
	// instead of drawing them from the fixed-seed dealer.
	dealerFree bool
}

// runPipe runs a selection with the substitute evaluator (shifted, or its
// square when square), the fixed coin and fixed dealer seeds.
func runPipe(t *testing.T, c pipeRun) ([2]*Result, [2]error) {
	t.Helper()
	var res [2]*Result
	coins := fixedCoins()
	errs := pair(t, [2]share.Seed{{3}, {4}}, func(ctx context.Context, p int, conn *transport.Conn, prov beaver.Provider) error {
		if c.dealerFree {
			var err error
			if prov, err = ot.NewProvider(conn, p, ot.ProviderOptions{}); err != nil {
				return err
			}
		}
		ev := &valueEvaluator{party: p, value: shifted, fp: share.DefaultFixedPoint, square: c.square, delay: c.delay, diverge: c.diverge}
		var err error
		if p == 0 {
			mo := &ModelOwner{Params: c.p[0], Evaluator: ev, EmbeddingHash: "emb", StateDir: c.dirs[0], Logger: quiet(), coinSource: coins[0]}
			res[0], err = mo.Run(ctx, conn, prov)
		} else {
			do := &DataOwner{Params: c.p[1], Evaluator: ev, EmbeddingHash: "emb", StateDir: c.dirs[1], Logger: quiet(), coinSource: coins[1]}
			if c.stopAfter > 0 {
				var once sync.Once
				do.OnProgress = func(pr Progress) {
					if pr.Phase == c.stopPhase && pr.Done >= c.stopAfter {
						once.Do(func() { conn.Close() })
					}
				}
			}
			res[1], err = do.Run(ctx, conn, prov)
		}
		return err
	})
	return res, errs
}

// TestPipelineModesSelectAlike: with the pipeline on, off, on without room
// to prefetch, on with a budget of two batches, and with the parties in
// different modes, a selection over a forward that draws dealer material
// (squares: square pairs and wrap pairs) gives the same survivors and
// the bit-identical revealed mean entropy (every batch draws the same
// correlated randomness whatever the mode); with the pipeline off one batch
// runs at a time and nothing is prefetched; with it on, batches are
// prefetched, never more bytes than the budget, and never more than
// Workers batches run at once.
func TestPipelineModesSelectAlike(t *testing.T) {
	base := testParams()
	base.Appraisal = AppraiseMean
	with := func(mode PipelineMode, budget int64) Params {
		p := base
		p.Pipeline, p.MemoryBudget = mode, budget
		return p
	}
	ref, errs := runPipe(t, pipeRun{p: [2]Params{with(PipelineOff, 0), with(PipelineOff, 0)}, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	want := plainSchedule(base, ref[0].Bootstrap, squared)
	for i := range want {
		if !slices.Equal(ref[0].Survivors[i], want[i]) {
			t.Fatalf("pipeline off, phase %d: %v, plaintext %v", i, ref[0].Survivors[i], want[i])
		}
	}
	for _, r := range ref {
		for i, ps := range r.Phases {
			if ps.PeakInFlight != 1 || ps.Prefetched != 0 || ps.PeakPrefetchBytes != 0 {
				t.Errorf("pipeline off, phase %d: %+v", i, ps)
			}
		}
	}
	// The material of one full batch, as the pipelined run measures it.
	on, errs := runPipe(t, pipeRun{p: [2]Params{with(PipelineOn, 0), with(PipelineOn, 0)}, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	// The forward's critical path: one lane's batches on, all batches off.
	if a, b := on[0].Phases[0].ForwardRounds, ref[0].Phases[0].ForwardRounds; a*2 > b {
		t.Errorf("forward rounds on the critical path: %d pipelined, %d one batch at a time", a, b)
	}
	batchBytes := on[1].Phases[0].BatchMaterialBytes
	if batchBytes == 0 {
		t.Fatalf("pipeline on recorded no batch material: %+v", on[1].Phases[0])
	}
	cases := []struct {
		name         string
		p0, p1       Params
		wantPrefetch int // 1: some batches prefetched, 0: none, -1: either
	}{
		{"on", with(PipelineOn, 0), with(PipelineOn, 0), 1},
		{"on, budget under one batch", with(PipelineOn, batchBytes-1), with(PipelineOn, batchBytes-1), 0},
		{"on, no prefetch", with(PipelineOn, -1), with(PipelineOn, -1), 0},
		{"on, budget of two batches", with(PipelineOn, 2*batchBytes), with(PipelineOn, 2*batchBytes), 1},
		{"model owner on, data owner off", with(PipelineOn, 0), with(PipelineOff, 0), -1},
		{"model owner off, data owner on", with(PipelineOff, 0), with(PipelineOn, 0), -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, errs := runPipe(t, pipeRun{p: [2]Params{c.p0, c.p1}, square: true})
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			for party, r := range res {
				if !slices.Equal(r.Selected, ref[0].Selected) || !slices.Equal(r.Bootstrap, ref[0].Bootstrap) {
					t.Fatalf("party %d selected %v, pipeline off %v", party, r.Selected, ref[0].Selected)
				}
				for i := range r.Survivors {
					if !slices.Equal(r.Survivors[i], ref[0].Survivors[i]) {
						t.Fatalf("party %d phase %d survivors differ from pipeline off", party, i)
					}
				}
				if r.Appraisal.Mean != ref[0].Appraisal.Mean {
					t.Errorf("party %d: mean entropy %v, pipeline off %v: the entropies differ", party, r.Appraisal.Mean, ref[0].Appraisal.Mean)
				}
				p := []Params{c.p0, c.p1}[party].WithDefaults()
				prefetched := 0
				for i, ps := range r.Phases {
					prefetched += ps.Prefetched
					limit := p.Workers
					if p.Pipeline == PipelineOff {
						limit = 1
					}
					if ps.PeakInFlight < 1 || ps.PeakInFlight > limit {
						t.Errorf("party %d phase %d: %d batches in flight, limit %d", party, i, ps.PeakInFlight, limit)
					}
					if ps.PeakPrefetchBytes > max(p.MemoryBudget, 0) {
						t.Errorf("party %d phase %d: %d prefetched bytes held, budget %d", party, i, ps.PeakPrefetchBytes, p.MemoryBudget)
					}
				}
				if p.Pipeline == PipelineOff && prefetched > 0 || c.wantPrefetch >= 0 && (c.wantPrefetch == 1) != (prefetched > 0) {
					t.Errorf("party %d: %d batches prefetched (want some: %d)", party, prefetched, c.wantPrefetch)
				}
				t.Logf("party %d phase 0: %+v", party, r.Phases[0])
			}
		})
	}
}

// TestPipelinePrefetchesEveryBatch: with the pipeline on and room in the
// budget, the scheduler rehearses a full batch and the partial last one
// before the lanes start, so every batch of every phase runs on material
// fetched ahead, each lane's first batch and the partial one included (with
// the template learnt from the first finished batch, as before rehearsals,
// the lanes' first batches drew every item on their critical path).
func TestPipelinePrefetchesEveryBatch(t *testing.T) {
	p := testParams()
	p.Pipeline = PipelineOn
	res, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	for party, r := range res {
		for i, ps := range r.Phases {
			if ps.In%p.BatchSize == 0 {
				t.Fatalf("phase %d: %d candidates make no partial batch; the test needs one", i, ps.In)
			}
			if ps.Prefetched != ps.Batches || ps.BatchMaterialBytes == 0 {
				t.Errorf("party %d phase %d: %d of %d batches prefetched (%d bytes a batch)", party, i, ps.Prefetched, ps.Batches, ps.BatchMaterialBytes)
			}
		}
	}
}

// TestPipelineRefusesDivergentForward: a Forwarder whose batches draw other
// items than its rehearsal (its requests depend on something other than
// public shapes) fails the run on both sides, rather than consuming material
// out of step or hanging: a party that finds the divergence returns an
// error naming the template, and a party whose peer found it first the
// peer's abort (whose public code says only that its run failed).
func TestPipelineRefusesDivergentForward(t *testing.T) {
	p := testParams()
	p.Pipeline = PipelineOn
	_, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, square: true, diverge: true})
	named := 0
	for party, err := range errs {
		var pa *PeerAbortError
		switch {
		case err != nil && strings.Contains(err.Error(), "template"):
			named++
		case errors.As(err, &pa) && pa.Party == 1-party:
		default:
			t.Errorf("party %d: error %v, want one naming the template or the peer's abort", party, err)
		}
	}
	if named == 0 {
		t.Errorf("no party named the template: %v", errs)
	}
}

// TestPipelineResumeOutOfOrder: with the pipeline on, the first batch of
// phase 0 is slow, so later batches finish (and are checkpointed) before
// it; the link drops once the data owner has finished five batches (the
// model owner may be a batch behind). The checkpoint then holds batches
// that are not a prefix of the phase, and the resumed run redoes exactly
// the missing ones (fresh correlated randomness: a new epoch) and selects
// the plaintext schedule's choice.
func TestPipelineResumeOutOfOrder(t *testing.T) {
	p := testParams()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	slow := func(phase int, idx []int) time.Duration {
		if phase == 0 && idx[0] < p.BatchSize { // batch 0 (later batches start past the first 16 indices)
			return 2 * time.Second
		}
		return 0
	}
	_, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, dirs: dirs, square: true, delay: slow, stopAfter: 5})
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("interrupted run: %v", errs)
	}
	for party := range 2 {
		st, err := (&checkpointStore{dir: dirs[party], party: party}).load()
		if err != nil {
			t.Fatal(err)
		}
		var done []int
		for _, b := range st.Phases[0].Batches {
			done = append(done, b.Batch)
		}
		slices.Sort(done)
		if len(done) < 4 || slices.Contains(done, 0) {
			t.Fatalf("party %d checkpointed batches %v: want at least 4, batch 0 not among them", party, done)
		}
	}
	res, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, dirs: dirs, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if res[0].Epoch != 2 || res[0].Phases[0].Resumed < 4 || res[0].Phases[0].Resumed == res[0].Phases[0].Batches {
		t.Fatalf("resumed run: epoch %d, phase 0 %+v", res[0].Epoch, res[0].Phases[0])
	}
	want := plainSchedule(p, res[0].Bootstrap, squared)
	for party, r := range res {
		if !slices.Equal(r.Selected, want[len(want)-1]) {
			t.Fatalf("party %d resumed selection %v, plaintext %v", party, r.Selected, want[len(want)-1])
		}
	}
}

// TestSecurePipelineOnOff: the real secure forward (proxies generated from
// the bootstrap) with the same coin and dealer seeds selects the same
// indices with the pipeline on and off up to near-ties, and reveals the same
// mean entropy up to rounding: the pipeline changes when batches run, not
// what they compute. (Not bit for bit: a truncation rounds by the low bits
// of the shares, protocol.TruncBy, and the lanes' input-sharing seeds differ
// between the two runs, so scores may differ by a few units in the last
// place and near-tied candidates may swap; a batch run on the wrong inputs
// or material would change whole batches of scores.)
func TestSecurePipelineOnOff(t *testing.T) {
	f := newSecureFixture(t)
	f.p.Appraisal = AppraiseMean
	var res [2][2]*Result
	var proxies = []*ModelOwner{}
	for i, mode := range []PipelineMode{PipelineOff, PipelineOn} {
		f.p.Pipeline = mode
		mo, do := f.owners([2]string{})
		coins := fixedCoins()
		mo.coinSource, do.coinSource = coins[0], coins[1]
		if i > 0 {
			mo.Proxies = proxies[0].Proxies // same coin, same bootstrap: reuse the generated proxies
		}
		r, errs := f.run(t, mo, do, 0)
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("pipeline %s: %v", mode, errs)
		}
		proxies = append(proxies, mo)
		res[i] = r
		t.Logf("pipeline %s: phase 0 %+v", mode, r[0].Phases[0])
	}
	off, on := res[0][0], res[1][0]
	last := len(off.Survivors) - 1
	if !slices.Equal(off.Bootstrap, on.Bootstrap) || !slices.Equal(off.Selected, off.Survivors[last]) || !slices.Equal(on.Selected, on.Survivors[last]) {
		t.Fatalf("pipeline off: bootstrap %v, selected %v; on: %v, %v", off.Bootstrap, off.Selected, on.Bootstrap, on.Selected)
	}
	// Near-ties apart (sessiontest.PhaseNearTies), phase by phase on the
	// proxies' plaintext entropies.
	swaps, err := sessiontest.PhaseNearTies(candidates(f.p.PoolSize, off.Bootstrap), off.Survivors, on.Survivors,
		sessiontest.ProxyScores(proxies[0].Proxies, f.pool), sessiontest.SecureScoreTol)
	if err != nil {
		t.Fatalf("pipeline off selected %v, on %v: %v", off.Selected, on.Selected, err)
	}
	t.Logf("pipeline on against off: near-tie swaps by phase %v", swaps)
	if math.Abs(off.Appraisal.Mean-on.Appraisal.Mean) > 1e-3 || res[1][1].Appraisal.Mean != on.Appraisal.Mean {
		t.Fatalf("mean entropy off %v, on %v / %v", off.Appraisal.Mean, on.Appraisal.Mean, res[1][1].Appraisal.Mean)
	}
	if off.Phases[0].PeakInFlight != 1 || on.Phases[0].PeakInFlight < 1 || on.Phases[0].ForwardRounds >= off.Phases[0].ForwardRounds {
		t.Fatalf("phase 0 off %+v, on %+v", off.Phases[0], on.Phases[0])
	}
}

// TestPhaseLanesSelectAlike: a schedule whose first phase runs more lanes
// than the run's (Phase.Workers 6, the second phase the run's 3) selects
// what the same run on uniform lanes selects, phase by phase, and the
// plaintext schedule's choice: lanes change which batches run at once and
// their dealer counters, not what a batch computes. The first phase's
// critical path shrinks with its lanes (15 batches: 3 a lane instead of
// 5; its forward rounds are the largest lane's), the second's does not
// change. So it goes with the dealer, interrupted after five batches of
// the first phase and resumed (the checkpoint holds batches by number,
// not lane), and with no dealer (ot.Provider: each item made by the two
// parties on its lane's stream).
func TestPhaseLanesSelectAlike(t *testing.T) {
	uniform := testParams()
	uniform.Pipeline = PipelineOn
	wide := uniform
	wide.Schedule = slices.Clone(uniform.Schedule)
	wide.Schedule[0].Workers = 2 * uniform.Workers
	ref, errs := runPipe(t, pipeRun{p: [2]Params{uniform, uniform}, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	want := plainSchedule(uniform, ref[0].Bootstrap, squared)
	selectAlikeRuns(t, wide, 5, 0, func(t *testing.T, res [2]*Result, resumed bool) {
		t.Helper()
		sameSelection(t, res, ref, want, "uniform lanes")
		if resumed {
			if res[0].Phases[0].Resumed == 0 {
				t.Errorf("the resumed run resumed no batch: %+v", res[0].Phases[0])
			}
			return
		}
		for party, r := range res {
			w, u := r.Phases, ref[party].Phases
			if w[0].Batches != 15 || w[0].ForwardRounds*5 != u[0].ForwardRounds*3 || w[1].ForwardRounds != u[1].ForwardRounds {
				t.Errorf("party %d: forward rounds %d, %d on phase lanes 6, 3; %d, %d on 3, 3 (phase 1: %d batches)",
					party, w[0].ForwardRounds, w[1].ForwardRounds, u[0].ForwardRounds, u[1].ForwardRounds, w[0].Batches)
			}
			if w[0].PeakInFlight > 6 || w[1].PeakInFlight > 3 {
				t.Errorf("party %d: %d and %d batches in flight, lanes 6 and 3", party, w[0].PeakInFlight, w[1].PeakInFlight)
			}
		}
	})
}

// selectAlikeRuns runs p three ways, each checked by check: with the
// dealer; with the dealer, interrupted once stopAfter batches of phase
// stopPhase are done and resumed (resumed set); and with no dealer
// (ot.Provider).
func selectAlikeRuns(t *testing.T, p Params, stopAfter, stopPhase int, check func(t *testing.T, res [2]*Result, resumed bool)) {
	t.Helper()
	t.Run("dealer", func(t *testing.T) {
		res, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, square: true})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		check(t, res, false)
	})
	t.Run("dealer resumed", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		if _, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, dirs: dirs, square: true, stopAfter: stopAfter, stopPhase: stopPhase}); errs[0] == nil || errs[1] == nil {
			t.Fatalf("interrupted run: %v", errs)
		}
		res, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, dirs: dirs, square: true})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		check(t, res, true)
	})
	t.Run("dealer-free", func(t *testing.T) {
		res, errs := runPipe(t, pipeRun{p: [2]Params{p, p}, square: true, dealerFree: true})
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		check(t, res, false)
	})
}

// sameSelection fails t unless each party's res selects what ref (the
// run of another shape, named other) and the plaintext schedule (want)
// selected, phase by phase.
func sameSelection(t *testing.T, res, ref [2]*Result, want [][]int, other string) {
	t.Helper()
	for party, r := range res {
		for i := range want {
			if !slices.Equal(r.Survivors[i], want[i]) || !slices.Equal(r.Survivors[i], ref[party].Survivors[i]) {
				t.Fatalf("party %d phase %d: survivors %v, %s %v, plaintext %v", party, i+1, r.Survivors[i], other, ref[party].Survivors[i], want[i])
			}
		}
		if !slices.Equal(r.Selected, ref[party].Selected) {
			t.Fatalf("party %d selected %v, %s %v", party, r.Selected, other, ref[party].Selected)
		}
	}
}

// TestPhaseBatchSizesSelectAlike: a schedule whose phases cut their
// candidates into batches of their own sizes (Phase.BatchSize: 8 in
// phase 1, 32 in phase 2; the run's 16) selects what the same run in
// uniform batches selects, phase by phase, and the plaintext schedule's
// choice: a batch's size changes which candidates share a secure forward,
// not what a candidate's entropy is. Each phase counts its own batches (29
// of 8, 4 of 32), and since a batch's rounds do not depend on its size
// the critical path follows the batches a lane runs (phase 1: 10 instead
// of 5; phase 2: 2 instead of 3). So it goes with the dealer, interrupted
// in the second phase and resumed (the checkpoint's batch numbers are the
// phase's own), and with no dealer (ot.Provider).
func TestPhaseBatchSizesSelectAlike(t *testing.T) {
	uniform := testParams()
	uniform.Pipeline = PipelineOn
	sized := uniform
	sized.Schedule = slices.Clone(uniform.Schedule)
	sized.Schedule[0].BatchSize = uniform.BatchSize / 2
	sized.Schedule[1].BatchSize = 2 * uniform.BatchSize
	ref, errs := runPipe(t, pipeRun{p: [2]Params{uniform, uniform}, square: true})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	want := plainSchedule(uniform, ref[0].Bootstrap, squared)
	selectAlikeRuns(t, sized, 1, 1, func(t *testing.T, res [2]*Result, resumed bool) {
		t.Helper()
		sameSelection(t, res, ref, want, "uniform batches")
		if r := res[0].Phases; resumed && (r[0].Resumed != 29 || r[1].Resumed == 0 || r[1].Resumed == r[1].Batches) {
			t.Errorf("the resumed run: phase 1 %+v, phase 2 %+v; want phase 1's 29 batches and some of phase 2's resumed", r[0], r[1])
		}
		for party, r := range res {
			s, u := r.Phases, ref[party].Phases
			if s[0].Batches != 29 || s[1].Batches != 4 || u[0].Batches != 15 || u[1].Batches != 8 {
				t.Errorf("party %d: batches %d, %d in sizes 8, 32; %d, %d in 16", party, s[0].Batches, s[1].Batches, u[0].Batches, u[1].Batches)
			}
			if !resumed && (s[0].ForwardRounds*5 != u[0].ForwardRounds*10 || s[1].ForwardRounds*3 != u[1].ForwardRounds*2) {
				t.Errorf("party %d: forward rounds %d, %d in batches of 8, 32; %d, %d of 16", party, s[0].ForwardRounds, s[1].ForwardRounds, u[0].ForwardRounds, u[1].ForwardRounds)
			}
		}
	})
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestSelectDealerFreeNoHang runs the dealer-free providers (ot, and he:
// its weight masks by lattice encryption, each weight's encryption shared
// by every lane) under the pipeline shape of the workloads' defaults,
// shrunk to the tiny proxies: batches of 16 on 8 lanes (one phase of 9
// batches: a wave on every lane, then a partial batch), two compute slots
// (GOMAXPROCS 2, as on the 2-core machine whatever this one has) and a
// prefetch budget that holds nothing (every batch draws its material as it
// runs) or about two batches (it fills at once; the other lanes draw
// directly). The last case gives the phase its 8 lanes of its own
// (Phase.Workers) over a run's 2, the scheduler opening the phase's, and
// its batches of 16 of its own (Phase.BatchSize) over a run's 4. On d5bf317 every run stopped (the mpcbench hang of issue 38):
// lanes holding both compute slots waited for material whose other half
// the peer's lanes, queued for the peer's slots, had yet to draw. The
// watchdog ends a run that stops moving within 30 s, so a regression fails
// here with the goroutines' summary instead of hanging.
func TestSelectDealerFreeNoHang(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	w := TinyWorkload
	w.BatchSize, w.Workers = 16, 8
	w.Phases = slices.Clone(w.Phases[:1]) // TinyWorkload's own phases stay as they are
	w.Phases[0].Survive = w.Budget
	for _, c := range []struct {
		prov     string
		budget   int64
		ownLanes bool
	}{{"ot", 1 << 20, false}, {"he", 1, false}, {"he", 1 << 20, true}} {
		t.Run(fmt.Sprintf("%s/budget=%d/own-lanes=%v", c.prov, c.budget, c.ownLanes), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			w := w
			if c.ownLanes {
				w.Phases = slices.Clone(w.Phases)
				w.Workers, w.Phases[0].Workers = 2, w.Workers
				w.BatchSize, w.Phases[0].BatchSize = 4, w.BatchSize
			}
			start := time.Now()
			run, err := RunSelect(ctx, SelectConfig{Workload: w, Samples: 144, Seed: 5, Provider: c.prov, MemoryBudget: c.budget, Stall: 30 * time.Second})
			if err != nil {
				if errors.Is(err, ErrStuck) || ctx.Err() != nil {
					t.Fatalf("stuck after %v: %v", time.Since(start).Round(time.Second), err)
				}
				t.Fatal(err)
			}
			ph := run.Phases[0]
			if ph.Batches <= w.PhaseWorkers(0) || ph.PeakInFlight > w.PhaseWorkers(0) || c.ownLanes && ph.PeakInFlight <= w.Workers {
				t.Fatalf("%d batches: not more than the lanes", ph.Batches)
			}
			if bs := w.PhaseBatchSize(0); ph.Batches != (ph.Candidates+bs-1)/bs {
				t.Fatalf("%d batches of %d candidates, not in batches of %d", ph.Batches, ph.Candidates, bs)
			}
			t.Logf("%v: %d batches, %d prefetched", time.Since(start).Round(10*time.Millisecond), ph.Batches, ph.Prefetched)
		})
	}
}

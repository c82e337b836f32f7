package lanes

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// startPair returns both parties' schedulers of c (Party, Conn and
// Provider set here) over a pipe, with an in-process dealer of fixed seeds,
// started at epoch 1.
func startPair(t *testing.T, c Config) [2]*Scheduler {
	t.Helper()
	d := dealer.NewWithSeeds(share.Seed{1}, share.Seed{2})
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	var s [2]*Scheduler
	var errs [2]error
	var wg sync.WaitGroup
	for party, conn := range []*transport.Conn{c0, c1} {
		prov, err := d.Provider(party)
		if err != nil {
			t.Fatal(err)
		}
		c.Party, c.Conn, c.Provider = party, conn, prov
		if s[party], err = New(c); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[party] = s[party].Start(context.Background(), 1)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	return s
}

// TestRunPrefetchDrawsWhatDirectDraws: with the pipeline on and a budget,
// Run rehearses a full and the partial batch and serves every batch from
// prefetched material; each party's output shares are then bit for bit
// those of a run that draws every item when needed (pipeline off), on the
// same dealer seeds: the same kinds at the same counters. A batch whose
// run departs from its rehearsal fails with an error naming the template.
func TestRunPrefetchDrawsWhatDirectDraws(t *testing.T) {
	const n, phase = 10, 1 // batches of 4, 4 and 2
	pending := []int{0, 1, 2}
	var directOut [2]map[int][]uint64 // the direct run's shares, for the prefetched run to match
	var batchBytes int64              // a full batch's material (party 0), from the prefetched run
	input := func(party, size int) *share.Tensor {
		x, _ := share.NewTensor(size)
		for i := range x.Data {
			x.Data[i] = uint64(party*1000+i*37) << 12
		}
		return x
	}
	for _, tc := range []struct {
		name    string
		on      bool
		diverge bool
		budget  int64 // bytes; streamed: a quarter of a lane's two batches
	}{{"direct", false, false, 1 << 30}, {"prefetched", true, false, 1 << 30}, {"streamed", true, false, -1}, {"diverging", true, true, 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			budget := tc.budget
			if budget < 0 {
				budget = 2 * 2 * batchBytes / 4 // two lanes: room for windows, no whole batch
			}
			s := startPair(t, Config{FixedPoint: share.DefaultFixedPoint, BatchSize: 4, Workers: 2, Pipeline: tc.on,
				MemoryBudget: budget, MinStreamWindow: 1, ControlStream: 2, LaneStreamBase: 16})
			var mu sync.Mutex
			out := [2]map[int][]uint64{{}, {}}
			var st [2]Stats
			var errs [2]error
			var wg sync.WaitGroup
			for party := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run := func(extra int) func(ctx context.Context, slot *protocol.Session, b int) error {
						return func(ctx context.Context, slot *protocol.Session, b int) error {
							lo, hi := s[party].Span(b, n)
							y, err := slot.ReLU(ctx, input(party, hi-lo+extra))
							if err == nil && !slot.Rehearsal() {
								mu.Lock()
								out[party][b] = y.Data
								mu.Unlock()
							}
							return err
						}
					}
					extra := 0
					if tc.diverge {
						extra = 1
					}
					st[party], errs[party] = s[party].Run(ctx, phase, 2, n, pending, run(0), run(extra))
				}()
			}
			wg.Wait()
			if tc.diverge {
				for party, err := range errs {
					if err == nil || !strings.Contains(err.Error(), "template") {
						t.Errorf("party %d: error %v, want one naming the template", party, err)
					}
				}
				return
			}
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			want, wantStreamed := 0, 0
			if tc.on {
				want = len(pending)
			}
			if tc.budget < 0 {
				want, wantStreamed = 0, len(pending)
			}
			for party := range 2 {
				if st[party].Prefetched != want || st[party].Streamed != wantStreamed || tc.on && (st[party].BatchBytes == 0 || st[party].PeakHeld == 0) {
					t.Errorf("party %d: %+v, want %d batches prefetched and %d streamed", party, st[party], want, wantStreamed)
				}
				if st[party].PeakHeld > budget {
					t.Errorf("party %d: %d bytes held, budget %d", party, st[party].PeakHeld, budget)
				}
				if tc.budget > 0 && party == 0 {
					batchBytes = st[party].BatchBytes
				}
				if len(out[party]) != len(pending) {
					t.Errorf("party %d: %d batches ran, want %d", party, len(out[party]), len(pending))
				}
				for _, b := range pending {
					got := out[party][b]
					if ref := directOut[party][b]; tc.on && !slices.Equal(got, ref) {
						t.Errorf("party %d batch %d: %s shares differ from the direct run's", party, b, tc.name)
					}
				}
			}
			if !tc.on {
				directOut = out
			}
		})
	}
}

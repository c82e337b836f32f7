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

// reluInput is party's share of a batch of size: the parties' shares sum
// to positive values, their own ReLU.
func reluInput(party, size int) *share.Tensor {
	x, _ := share.NewTensor(size)
	for i := range x.Data {
		x.Data[i] = uint64(party*1000+i*37) << 12
	}
	return x
}

// runReLUs runs phase's pending batches (of size of n candidates, on
// lanes lanes) on both parties' schedulers s, each batch a ReLU of
// reluInput on its span, its rehearsal one of extra more items, and
// returns each party's output shares by batch, its Stats and its error.
func runReLUs(ctx context.Context, s [2]*Scheduler, phase, lanes, size, n int, pending []int, extra int) (out [2]map[int][]uint64, st [2]Stats, errs [2]error) {
	var mu sync.Mutex
	out = [2]map[int][]uint64{{}, {}}
	var wg sync.WaitGroup
	for party := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := func(extra int) func(ctx context.Context, slot *protocol.Session, b int) error {
				return func(ctx context.Context, slot *protocol.Session, b int) error {
					lo, hi := Span(b, n, size)
					y, err := slot.ReLU(ctx, reluInput(party, hi-lo+extra))
					if err == nil && !slot.Rehearsal() {
						mu.Lock()
						out[party][b] = y.Data
						mu.Unlock()
					}
					return err
				}
			}
			st[party], errs[party] = s[party].Run(ctx, phase, lanes, size, n, pending, run(0), run(extra))
		}()
	}
	wg.Wait()
	return out, st, errs
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
			s := startPair(t, Config{FixedPoint: share.DefaultFixedPoint, Workers: 2, Pipeline: tc.on,
				MemoryBudget: budget, MinStreamWindow: 1, ControlStream: 2, LaneStreamBase: 16})
			extra := 0
			if tc.diverge {
				extra = 1
			}
			out, st, errs := runReLUs(ctx, s, phase, 2, 4, n, pending, extra)
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

// TestRunPhaseBatchSizes: each Run cuts its phase's candidates into
// batches of its own size, and the prefetch takes that size's full batch
// for its template: phase 0 in batches of 4 and phase 1 in batches of 8
// (the last of each partial) on one scheduler pair, every batch
// prefetched, a full batch of 8 drawing more material than one of 4, and
// every batch's ReLU the plaintext's on exactly its span.
func TestRunPhaseBatchSizes(t *testing.T) {
	const n = 22
	s := startPair(t, Config{FixedPoint: share.DefaultFixedPoint, Workers: 2, Pipeline: true,
		MemoryBudget: 1 << 30, ControlStream: 2, LaneStreamBase: 16})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var batchBytes [2]int64
	for phase, size := range []int{4, 8} {
		nb := Batches(n, size)
		pending := make([]int, nb)
		for b := range pending {
			pending[b] = b
		}
		out, st, errs := runReLUs(ctx, s, phase, 2, size, n, pending, 0)
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("phase %d in batches of %d: %v", phase, size, errs)
		}
		for party := range 2 {
			if st[party].Prefetched != nb || st[party].Streamed != 0 || st[party].BatchBytes == 0 {
				t.Errorf("phase %d, party %d: %+v; want all %d batches prefetched", phase, party, st[party], nb)
			}
		}
		batchBytes[phase] = st[0].BatchBytes
		for b := range nb {
			lo, hi := Span(b, n, size)
			y0, y1 := out[0][b], out[1][b]
			if len(y0) != hi-lo || len(y1) != hi-lo {
				t.Fatalf("phase %d batch %d: %d and %d outputs, want %d", phase, b, len(y0), len(y1), hi-lo)
			}
			x0, x1 := reluInput(0, hi-lo), reluInput(1, hi-lo)
			for i := range y0 {
				if got, want := y0[i]+y1[i], x0.Data[i]+x1.Data[i]; got != want {
					t.Errorf("phase %d batch %d item %d: ReLU %x, want %x", phase, b, i, got, want)
				}
			}
		}
	}
	if batchBytes[1] <= batchBytes[0] {
		t.Errorf("a full batch of 8 drew %d bytes, one of 4 %d", batchBytes[1], batchBytes[0])
	}
}

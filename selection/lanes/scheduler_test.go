package lanes

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// TestSchedulerAssignsBatches: both parties' schedulers run batch pending[j]
// on lane j mod W (the same stream on both sides), every batch once; a
// failing batch's error is returned rather than the cancellation it causes
// in the other slots; weight ids are distinct per phase and epoch. A phase
// may run on fewer lanes than the scheduler opened (its own width: batch
// pending[j] on lane j mod its width, counters by it), never on none or
// more.
func TestSchedulerAssignsBatches(t *testing.T) {
	d, err := dealer.New()
	if err != nil {
		t.Fatal(err)
	}
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	ctx := context.Background()
	var scheds [2]*Scheduler
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for party, c := range []*transport.Conn{c0, c1} {
		prov, err := d.Provider(party)
		if err != nil {
			t.Fatal(err)
		}
		scheds[party], err = New(Config{Party: party, Conn: c, Provider: prov, FixedPoint: share.DefaultFixedPoint,
			Workers: 3, Pipeline: true, MemoryBudget: 1 << 30, ControlStream: 2, LaneStreamBase: 16})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[party] = scheds[party].Start(ctx, 3)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	pending := []int{0, 2, 3, 5, 6, 7, 9}
	var mu sync.Mutex
	// Phase 0 on all 3 lanes; phase 1 on a width of its own, the
	// scheduler's first 2 lanes: batch pending[j] on lane j mod W.
	for phase, W := range []int{3, 2} {
		ran := [2]map[int]uint32{{}, {}}
		for party := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[party] = scheds[party].Run(ctx, phase, W, 4, 40, pending, func(ctx context.Context, slot *protocol.Session, b int) error {
					mu.Lock()
					defer mu.Unlock()
					if _, dup := ran[party][b]; dup {
						t.Errorf("party %d: batch %d ran twice", party, b)
					}
					ran[party][b] = slot.StreamID()
					return nil
				}, nil)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		for j, b := range pending {
			if want := 16 + uint32(j%W); ran[0][b] != want || ran[1][b] != want {
				t.Errorf("%d lanes: batch %d on streams %d, %d; want %d", W, b, ran[0][b], ran[1][b], want)
			}
		}
		if len(ran[0]) != len(pending) {
			t.Errorf("%d lanes: %d batches ran, want %d", W, len(ran[0]), len(pending))
		}
	}
	if c2, c3 := scheds[0].batchCounter(1, 2, 7), scheds[0].batchCounter(1, 3, 7); c2 == c3 || c2 != 3<<EpochShift|1<<phaseShift|3<<batchShift {
		t.Errorf("batch 7's counters: %x on 2 lanes, %x on 3", c2, c3)
	}
	for _, w := range []int{0, 4} {
		if _, err := scheds[0].Run(ctx, 3, w, 4, 40, pending, func(context.Context, *protocol.Session, int) error { return nil }, nil); err == nil || !strings.Contains(err.Error(), "lanes") {
			t.Errorf("a phase on %d of 3 lanes: error %v", w, err)
		}
	}

	boom := errors.New("boom")
	_, err = scheds[0].Run(ctx, 2, 3, 4, 40, pending, func(ctx context.Context, slot *protocol.Session, b int) error {
		if b == 3 {
			return boom
		}
		// The others wait for the cancellation, which needs batch 3 to
		// run: a batch that waits for anything but its peer gives its
		// compute slot back first (protocol.ComputeGate).
		slot.Leave()
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want the failing batch's", err)
	}

	if a, b := scheds[0].WeightBase(0), scheds[0].WeightBase(1); a == b || a>>EpochShift != 3 {
		t.Errorf("weight bases %x, %x", a, b)
	}
	if _, err := scheds[0].Run(ctx, 3, 3, 0, 40, pending, func(context.Context, *protocol.Session, int) error { return nil }, nil); err == nil || !strings.Contains(err.Error(), "batches of 0") {
		t.Errorf("a phase in batches of 0: error %v", err)
	}
}

// TestNewRefuses: a Config that cannot schedule (another party's provider,
// no lanes, overlapping or overflowing streams) is an error, and
// so is an epoch outside 1..MaxEpoch−1.
func TestNewRefuses(t *testing.T) {
	d, err := dealer.New()
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := d.Provider(0)
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	good := Config{Party: 0, Conn: c0, Provider: p0, FixedPoint: share.DefaultFixedPoint, Workers: 2, ControlStream: 2, LaneStreamBase: 16}
	if _, err := New(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"party", func(c *Config) { c.Party = 2 }},
		{"other party's provider", func(c *Config) { c.Party = 1 }},
		{"no connection", func(c *Config) { c.Conn = nil }},
		{"no provider", func(c *Config) { c.Provider = nil }},
		{"no lanes", func(c *Config) { c.Workers = 0 }},
		{"control stream on a lane", func(c *Config) { c.ControlStream = 17 }},
		{"lanes past the last stream", func(c *Config) { c.LaneStreamBase = 1<<32 - 1 }},
	} {
		c := good
		tc.edit(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	s, _ := New(good)
	for _, e := range []uint64{0, MaxEpoch} {
		if err := s.Start(context.Background(), e); err == nil {
			t.Errorf("epoch %d: no error", e)
		}
	}
}

// TestBatchesSpan: a phase's candidates are cut into batches of its size,
// the last one partial.
func TestBatchesSpan(t *testing.T) {
	for _, tc := range []struct {
		n, size, batches int
		last             [2]int
	}{
		{9, 4, 3, [2]int{8, 9}},
		{8, 4, 2, [2]int{4, 8}},
		{9, 16, 1, [2]int{0, 9}},
		{33, 16, 3, [2]int{32, 33}},
		{1, 1, 1, [2]int{0, 1}},
	} {
		nb := Batches(tc.n, tc.size)
		if nb != tc.batches {
			t.Errorf("%d candidates in %d batches of %d, want %d", tc.n, nb, tc.size, tc.batches)
			continue
		}
		if lo, hi := Span(nb-1, tc.n, tc.size); lo != tc.last[0] || hi != tc.last[1] {
			t.Errorf("%d in batches of %d: last batch [%d, %d), want %v", tc.n, tc.size, lo, hi, tc.last)
		}
	}
}

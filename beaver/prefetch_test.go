package beaver

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestPrefetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := testSeeds(10)
	d := NewDealerWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	// Record a schedule of mixed requests on two streams from party 1's calls.
	rng := rand.New(rand.NewPCG(4, 4))
	var sched []Request
	for i := range 40 {
		sched = append(sched, randomRequest(rng, uint32(i%2)))
	}
	rec := NewRecorder(p1)
	pf, err := NewPrefetch(rec, 8, sched)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if err := pf.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	for i, r := range sched {
		if got := pf.Position(r.Stream); got != uint64(i/2) {
			t.Fatalf("position %d before call %d", got, i)
		}
		m1, err := pf.Material(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		m0, err := p0.Material(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRelation(r, [2]Material{m0, m1}, func(id uint64, k, n int) []uint64 {
			w, _ := Typed{p0}.WeightMask(ctx, id, k, n)
			return w
		}); err != nil {
			t.Fatalf("item %d %v: %v", i, r, err)
		}
	}
	if got := len(rec.Requests()); got != len(sched) {
		t.Fatalf("recorder saw %d requests, want %d", got, len(sched))
	}
	if pf.Offline() <= 0 {
		t.Error("no offline time recorded")
	}
	t.Logf("offline %v, online waited %v", pf.Offline(), pf.Waited())
	// Past the schedule, calls go straight through.
	if _, err := (Typed{pf}).Triples(ctx, 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := pf.Seek(0, pf.Position(0)+1); err != nil {
		t.Fatal(err)
	}
}

func TestPrefetchMismatch(t *testing.T) {
	ctx := context.Background()
	d, _ := NewDealer()
	p1, _ := d.Provider(1)
	pf, err := NewPrefetch(p1, 2, []Request{{Kind: KindTriple, Stream: 1, N: 4}, {Kind: KindTrunc, Stream: 1, N: 4, FracBits: 16}})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if _, err := (Typed{pf}).Triples(ctx, 1, 5); err == nil || !strings.Contains(err.Error(), "schedule") {
		t.Fatalf("mismatch: %v", err)
	}
	if err := pf.Seek(1, 10); err == nil {
		t.Fatal("seek during schedule accepted")
	}
	if _, err := NewPrefetch(p1, 0, nil); err == nil {
		t.Fatal("capacity 0 accepted")
	}
	if _, err := NewPrefetch(p1, 1, []Request{{Kind: KindTriple, N: -1}}); err == nil {
		t.Fatal("bad schedule accepted")
	}
}

// TestWrappersBindSessions: Recorder and Prefetch pass the session binding
// through to the provider they wrap.
func TestWrappersBindSessions(t *testing.T) {
	ctx := context.Background()
	d, err := NewDealer()
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	rec := NewRecorder(p1)
	errc := make(chan error, 1)
	go func() { errc <- p0.BindSession(ctx, SessionID{4}) }()
	if err := rec.BindSession(ctx, SessionID{4}); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if id, ok := rec.Session(); !ok || id != (SessionID{4}) {
		t.Fatalf("recorder session %v %v", id, ok)
	}
	pf, err := NewPrefetch(p0, 1, []Request{{Kind: KindTriple, Stream: 1, N: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if err := pf.BindSession(ctx, SessionID{4}); err != nil {
		t.Fatalf("same session: %v", err)
	}
	if err := pf.BindSession(ctx, SessionID{5}); err == nil {
		t.Fatal("prefetch moved to another session")
	}
	if id, ok := pf.Session(); !ok || id != (SessionID{4}) {
		t.Fatalf("prefetch session %v %v", id, ok)
	}
}

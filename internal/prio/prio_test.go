package prio

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// waitFor polls until the gate has n waiters.
func waitFor(t *testing.T, g *Gate, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.Waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters, want %d", g.Waiting(), n)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func TestGateServesByPriority(t *testing.T) {
	tests := []struct {
		name  string
		slots int
		prios []int64 // in the order the waiters arrive
		want  []int64 // the order they are served
	}{
		{"lowest first", 1, []int64{5, 1, 3}, []int64{1, 3, 5}},
		{"equal in arrival order", 1, []int64{2, 2, 1, 2}, []int64{1, 2, 2, 2}},
		{"two slots", 2, []int64{9, 4, 7}, []int64{4, 7, 9}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGate(tc.slots)
			ctx := context.Background()
			for range tc.slots { // hold every slot
				if err := g.Acquire(ctx, 0, nil); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var served []int64
			var wg sync.WaitGroup
			for i, p := range tc.prios {
				wg.Go(func() {
					if err := g.Acquire(ctx, p, nil); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					served = append(served, p)
					mu.Unlock()
				})
				waitFor(t, g, i+1)
			}
			// Hand the slots on one at a time: each release serves one
			// waiter, which keeps its slot.
			for i := range tc.prios {
				g.Release()
				deadline := time.Now().Add(10 * time.Second)
				for {
					mu.Lock()
					n := len(served)
					mu.Unlock()
					if n == i+1 {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("release %d served %d waiters", i, n)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
			wg.Wait()
			for i := range tc.want {
				if served[i] != tc.want[i] {
					t.Fatalf("served %v, want %v", served, tc.want)
				}
			}
		})
	}
}

func TestGateAbandonedWait(t *testing.T) {
	g := NewGate(1)
	bg := context.Background()
	if err := g.Acquire(bg, 0, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	errs := make(chan error, 2)
	go func() { errs <- g.Acquire(ctx, 1, nil) }()
	go func() { errs <- g.Acquire(bg, 2, done) }()
	waitFor(t, g, 2)
	cancel()
	close(done)
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) && !errors.Is(err, ErrDone) {
			t.Errorf("abandoned wait returned %v", err)
		}
	}
	if n := g.Waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
	// Neither abandoned wait holds a slot: after one release, one slot is
	// free, and a second acquire must wait.
	g.Release()
	if err := g.Acquire(bg, 0, nil); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel2()
	if err := g.Acquire(short, 0, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("acquire on a full gate: %v", err)
	}
}

func TestGateNoSlotLostUnderContention(t *testing.T) {
	// Many goroutines acquire and release, some abandoning their wait: at
	// the end every slot is free again.
	const slots = 3
	g := NewGate(slots)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 50 {
				ctx, cancel := context.WithCancel(context.Background())
				if (i+j)%7 == 0 {
					cancel()
				}
				if err := g.Acquire(ctx, int64(j%5), nil); err == nil {
					g.Release()
				}
				cancel()
			}
		})
	}
	wg.Wait()
	for range slots {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := g.Acquire(ctx, 0, nil); err != nil {
			t.Fatalf("a slot was lost: %v", err)
		}
		cancel()
	}
}

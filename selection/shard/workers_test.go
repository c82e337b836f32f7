package shard

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// TestWorkersDoneToReconnecting: after a successful run, Done tells the
// attached workers the selection is done (Serve returns nil), and a worker
// that was not attached then (restarting, its link dropped) is answered
// "done" when it attaches afterwards and ends without error, instead of
// being refused; AwaitDone returns once every worker has been told. A
// worker that never comes back does not hold the coordinator: AwaitDone
// returns at its context's end, naming it. After a failed run (Close), a
// worker is refused with words that tell it to connect again.
func TestWorkersDoneToReconnecting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// serve attaches worker (0, k) to coord and returns its Serve's error.
	serve := func(coord *Workers, k int) chan error {
		a, b := transport.Pipe(transport.Options{})
		t.Cleanup(func() { a.Close(); b.Close() })
		go func() { _ = coord.Attach(ctx, a) }()
		errc := make(chan error, 1)
		go func() {
			errc <- (&Worker{Party: 0, Shard: k, StateDir: t.TempDir(), Logger: quiet()}).Serve(ctx, b, nil)
		}()
		return errc
	}
	ended := func(what string, errc chan error) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Serve still running after 10 s", what)
			return nil
		}
	}

	coord, _ := NewWorkers(0, 3)
	coord.Logger = quiet()
	if err := coord.AwaitDone(ctx); err == nil {
		t.Errorf("AwaitDone before Done succeeded")
	}
	w0 := serve(coord, 0)
	waitAttached(t, coord, 0)
	coord.Done(ctx)
	if err := ended("worker 0, attached at the end", w0); err != nil {
		t.Errorf("worker 0, attached at the end: %v", err)
	}
	// Worker 1 comes back after the run: told "done", it ends without error.
	if err := ended("worker 1, reconnecting after the end", serve(coord, 1)); err != nil {
		t.Errorf("worker 1, reconnecting after the end: %v, want nil (told done)", err)
	}
	// Worker 2 never comes back: AwaitDone ends with its context.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	start := time.Now()
	err := coord.AwaitDone(short)
	cancelShort()
	if err == nil || !strings.Contains(err.Error(), "[2]") || time.Since(start) > 5*time.Second {
		t.Errorf("AwaitDone with worker 2 missing: %v after %v; want an error naming worker 2 at the context's end", err, time.Since(start))
	}
	// It comes back after all: told, and AwaitDone returns nil at once.
	if err := ended("worker 2, reconnecting late", serve(coord, 2)); err != nil {
		t.Errorf("worker 2, reconnecting late: %v", err)
	}
	if err := coord.AwaitDone(ctx); err != nil {
		t.Errorf("AwaitDone with every worker told: %v", err)
	}
	// A worker that reconnects twice is told twice.
	if err := ended("worker 1 again", serve(coord, 1)); err != nil {
		t.Errorf("worker 1 again: %v", err)
	}

	// After a failed run (Close, not Done) a worker is refused, told to
	// connect again (to the restarted coordinator).
	failed, _ := NewWorkers(0, 2)
	failed.Logger = quiet()
	failed.Close()
	err = ended("worker 0 after a failed run", serve(failed, 0))
	if !errors.Is(err, ErrWorkerRefused) || !strings.Contains(err.Error(), "connect again") {
		t.Errorf("worker 0 after a failed run: %v, want refused, to connect again", err)
	}
}

// waitAttached waits (at most 10 s) until worker k is attached to coord.
func waitAttached(t *testing.T, coord *Workers, k int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		coord.mu.Lock()
		c := coord.conns[k]
		coord.mu.Unlock()
		if c != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker %d not attached in 10 s", k)
		}
		time.Sleep(time.Millisecond)
	}
}

package peer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/selectformer/selectformer/selection/shard"
	"github.com/selectformer/selectformer/transport"
)

// TestWorkerToldDoneAfterRun: a coordinator's workers over mutual TLS on
// loopback (ServeWorkers, RunWorker, in process). When the selection ends
// (shard.Workers.Done), a worker attached exits without error, and so does a
// worker that reconnects only afterwards (restarting, or its link dropped):
// it is told "done", not refused, so a Kubernetes Indexed Job does not fail
// an index of a selection that succeeded; AwaitWorkers then returns at
// once. A worker that never comes back does not hold the coordinator:
// AwaitWorkers returns at -connect-timeout, naming it. A worker whose
// coordinator is gone fails with ExitPeer (3) at its -connect-timeout.
func TestWorkerToldDoneAfterRun(t *testing.T) {
	id, err := transport.GenerateIdentity("party")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &Party{ID: id, Logger: log}
	p.flags.Endpoint.Timeout = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serve := func(shards int) (*shard.Workers, io.Closer, string) {
		addrc := make(chan net.Addr, 1)
		ws, ln, err := p.ServeWorkers(ctx, 0, shards, "127.0.0.1:0", func(a net.Addr) { addrc <- a })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ws, ln, (<-addrc).String()
	}
	worker := func(k int, addr string) chan error {
		errc := make(chan error, 1)
		go func() {
			w := &shard.Worker{Party: 0, Shard: k, StateDir: t.TempDir(), Logger: log}
			errc <- p.RunWorker(ctx, w, 0, addr, io.Discard, "modelowner")
		}()
		return errc
	}
	ended := func(what string, errc chan error) error {
		t.Helper()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still running after 30 s", what)
			return nil
		}
	}

	ws, ln, addr := serve(2)
	w0 := worker(0, addr)
	time.Sleep(200 * time.Millisecond) // worker 0 attaches (if not, it is told as it does)
	ws.Done(ctx)
	if err := ended("worker 0", w0); err != nil {
		t.Errorf("worker 0, attached at the end: %v, want nil (exit 0)", err)
	}
	if err := ended("worker 1", worker(1, addr)); err != nil {
		t.Errorf("worker 1, connecting after the end: %v, want nil (exit 0)", err)
	}
	start := time.Now()
	if err := p.AwaitWorkers(ctx, ws); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("AwaitWorkers with both workers told: %v after %v", err, time.Since(start))
	}
	ln.Close()

	// Worker 1 of a new selection never comes back: the coordinator waits
	// its -connect-timeout, no longer.
	p.flags.Endpoint.Timeout = 300 * time.Millisecond
	ws, _, addr = serve(2)
	ws.Done(ctx)
	start = time.Now()
	if err := p.AwaitWorkers(ctx, ws); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("AwaitWorkers with no worker back: %v after %v; want an error at -connect-timeout", err, time.Since(start))
	}

	// A worker whose coordinator is gone: ExitPeer at its -connect-timeout.
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = gone.Addr().String()
	gone.Close()
	var pe *Error
	if err := ended("a worker without coordinator", worker(0, addr)); !errors.As(err, &pe) || pe.Code != ExitPeer {
		t.Errorf("a worker without coordinator: %v, want an ExitPeer error", err)
	}
}

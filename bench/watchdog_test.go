package bench

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/testharness/syncbuf"
)

// TestSelectWatchdogStuck plants a stall: the data owner's third batch
// waits for nothing but the run's end, so no batch finishes and, once the
// model owner waits for it, no byte moves. The watchdog must cancel the
// run within its threshold (here 1 s) with an error wrapping ErrStuck that
// says where each party stands (the phase, the batches done) and what the
// goroutines wait on (the planted wait among them), and log the summary.
// The same run with the watchdog on and no stall finishes.
func TestSelectWatchdogStuck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log syncbuf.Buffer
	calls := map[int]int{}
	stall := func(ctx context.Context, party int) {
		if party != 1 {
			return
		}
		calls[party]++ // party 1's batches run on its lanes, one at a time here
		if calls[party] == 3 {
			<-ctx.Done() // the planted stall: a wait nobody ends
		}
	}
	cfg := SelectConfig{Workload: TinyWorkload, Samples: 40, Seed: 2, Pipeline: "off", Stall: time.Second,
		Logger: slog.New(slog.NewTextHandler(&log, nil)), beforeBatch: stall}
	start := time.Now()
	_, err := RunSelect(ctx, cfg)
	if !errors.Is(err, ErrStuck) {
		t.Fatalf("planted stall: %v, want ErrStuck", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("stuck run ended after %v", d)
	}
	msg := err.Error()
	for _, want := range []string{"no batch finished", "party 0 in phase 1", "party 1 in phase 1, 2 batches done", "TestSelectWatchdogStuck"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q: %v", want, msg)
		}
	}
	if l := log.String(); !strings.Contains(l, "stuck") || !strings.Contains(l, "TestSelectWatchdogStuck") {
		t.Errorf("log without the goroutine summary:\n%s", l)
	}
	cfg.beforeBatch, cfg.Stall = nil, 5*time.Second
	if _, err := RunSelect(ctx, cfg); err != nil {
		t.Fatalf("run without a stall: %v", err)
	}
}

// TestGoroutineSummary groups goroutines by stack: three waiting on the
// same channel at the same line make one group of three.
func TestGoroutineSummary(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	for range 3 {
		go waitForSummary(block)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := GoroutineSummary(0)
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "bench.waitForSummary") && strings.HasPrefix(strings.TrimSpace(l), "3 × [chan receive]") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no group of 3 waiting in waitForSummary:\n%s", s)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitForSummary(c chan struct{}) { <-c }

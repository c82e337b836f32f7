package party

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/testharness/syncbuf"
)

// testLogger logs to buf without time stamps.
func testLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
}

// TestProgressLogLines pins the log lines written when stderr is no
// terminal: the first and last batch of each phase and one line per
// interval between, phases from 1, figures rounded, stale reports dropped.
func TestProgressLogLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(io.Discard, false)
	var clock time.Time
	p.now = func() time.Time { return clock }
	f := p.Func(2, testLogger(&buf))
	for _, step := range []struct {
		at time.Duration
		pr selection.Progress
	}{
		{0, selection.Progress{Phase: 0, Done: 1, Total: 8, Rate: 0.5, ETA: 14 * time.Second}},
		{time.Second, selection.Progress{Phase: 0, Done: 2, Total: 8, Rate: 0.66, ETA: 9 * time.Second}}, // within the interval
		{time.Second, selection.Progress{Phase: 0, Done: 1, Total: 8, Rate: 0.66, ETA: 9 * time.Second}}, // stale
		{6 * time.Second, selection.Progress{Phase: 0, Done: 5, Total: 8, Rate: 0.8333, ETA: 3600 * time.Millisecond}},
		{7 * time.Second, selection.Progress{Phase: 0, Done: 8, Total: 8, Rate: 1.142857}},
		{7500 * time.Millisecond, selection.Progress{Phase: 1, Done: 1, Total: 3, Rate: 12.345, ETA: 163 * time.Millisecond}},
		{8 * time.Second, selection.Progress{Phase: 0, Done: 8, Total: 8}}, // stale phase
		{9 * time.Second, selection.Progress{Phase: 1, Done: 3, Total: 3}},
	} {
		clock = time.Unix(1000, 0).Add(step.at)
		f(step.pr)
	}
	p.Close()
	want := `level=INFO msg=progress phase=1/2 batches=1/8 percent=12 batches_per_s=0.5 left=14s
level=INFO msg=progress phase=1/2 batches=5/8 percent=62 batches_per_s=0.83 left=4s
level=INFO msg=progress phase=1/2 batches=8/8 percent=100 batches_per_s=1.1
level=INFO msg=progress phase=2/2 batches=1/3 percent=33 batches_per_s=12 left=0s
level=INFO msg=progress phase=2/2 batches=3/3 percent=100
`
	if got := buf.String(); got != want {
		t.Fatalf("log lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestProgressLogThroughWriter: with the logger writing through Writer, as
// the binaries set it up, concurrent reports neither deadlock nor lose
// the last line (regression: update logged while holding the lock that
// Writer takes).
func TestProgressLogThroughWriter(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		var buf bytes.Buffer
		p := NewProgress(&buf, terminal)
		log := slog.New(slog.NewTextHandler(p.Writer(), nil))
		f := p.Func(1, log)
		done := make(chan struct{})
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			for d := 1; d <= 20; d++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					f(selection.Progress{Phase: 0, Done: d, Total: 20, Rate: 1, ETA: time.Second})
					log.Info("other")
				}()
			}
			wg.Wait()
			p.Close()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("terminal=%v: progress reporting deadlocked", terminal)
		}
		last := "batches=20/20"
		if terminal {
			last = "(20/20)"
		}
		if !strings.Contains(buf.String(), last) {
			t.Errorf("terminal=%v: output lacks %q:\n%s", terminal, last, buf.String())
		}
	}
}

// TestProgressResumedPhase: a phase whose first report comes after resumed
// batches starts its lines there; a phase with more reports than the
// schedule has phases still counts them.
func TestProgressResumedPhase(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(io.Discard, false)
	f := p.Func(1, testLogger(&buf))
	f(selection.Progress{Phase: 1, Done: 6, Total: 10, Rate: 2, ETA: 2 * time.Second})
	if want := "level=INFO msg=progress phase=2/2 batches=6/10 percent=60 batches_per_s=2 left=2s\n"; buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

// TestProgressBar drives the terminal path into a buffer: one bar per phase
// with its number, count and percentage, ended by a newline; a log line
// written through Writer clears the bar first and starts a line of its own.
func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, true)
	log := slog.New(slog.NewTextHandler(p.Writer(), nil))
	f := p.Func(2, log)
	for d := 1; d <= 4; d++ {
		f(selection.Progress{Phase: 0, Done: d, Total: 4, Rate: 2, ETA: time.Duration(4-d) * 500 * time.Millisecond})
		if d == 2 {
			log.Warn("something happened")
		}
	}
	f(selection.Progress{Phase: 1, Done: 1, Total: 3, Rate: 1.5, ETA: 2 * time.Second})
	p.Close()
	out := buf.String()
	for _, want := range []string{"phase 1/2", "2 batches/s, 1s left", "(2/4)", "100%", "(4/4)", "phase 2/2, 1.5 batches/s, 2s left", "(1/3)"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
	if !strings.Contains(out, "(4/4) \n\rphase 2/2") {
		t.Errorf("finished bar not left on its own line: %q", out)
	}
	if !strings.HasSuffix(out, "(1/3) \n") {
		t.Errorf("unfinished bar not ended by a newline: %q", out)
	}
	i := strings.Index(out, "time=")
	if i < 0 || !strings.Contains(out[i:], "something happened\"\n") || !strings.HasSuffix(out[:i], "\r") {
		t.Errorf("log line not on a cleared line: %q", out)
	}
	if strings.Contains(out, "level=INFO msg=progress") {
		t.Errorf("log lines written on a terminal: %q", out)
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{&bytes.Buffer{}, f, io.Discard} {
		if IsTerminal(w) {
			t.Errorf("IsTerminal(%T) = true", w)
		}
	}
}

func TestRoundRate(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{
		{0, 0}, {-1, 0}, {0.012345, 0.012}, {0.5, 0.5}, {0.8333, 0.83}, {1.142857, 1.1}, {9.96, 10}, {12.5, 13}, {345.6, 346},
	} {
		if got := roundRate(tc.in); got != tc.want {
			t.Errorf("roundRate(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want time.Duration }{
		{1499 * time.Millisecond, time.Second}, {61*time.Minute + 31*time.Second, 62 * time.Minute},
	} {
		if got := roundETA(tc.in); got != tc.want {
			t.Errorf("roundETA(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestDropEngineProgress: the engine's own progress records are dropped,
// everything else (with attributes and groups) passes.
func TestDropEngineProgress(t *testing.T) {
	var buf bytes.Buffer
	log := DropEngineProgress(testLogger(&buf)).With("party", 1).WithGroup("g")
	log.Info("selection: progress", "phase", 0)
	log.Info("selection: phase done", "phase", 1)
	if want := "level=INFO msg=\"selection: phase done\" party=1 g.phase=1\n"; buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

// TestProgressSteps: before the first phase, Step writes a line per step
// (a repeat is dropped) and Where names the step; the first phase's report
// ends the steps, later steps are ignored, and Where names the phase and its
// batches (what an interrupted party prints).
func TestProgressSteps(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(io.Discard, false)
	if w := p.Where(); w != "" {
		t.Fatalf("Where before anything = %q", w)
	}
	f := p.Func(2, testLogger(&buf))
	p.Step("connecting")
	p.Step("connecting")
	if w := p.Where(); w != "while connecting" {
		t.Fatalf("Where = %q", w)
	}
	p.Labeler(func(_ context.Context, idx []int, _ model.Input) ([]int, error) { return idx, nil })(context.Background(), []int{4, 2}, model.Input{})
	p.GenerationProgress()(proxy.Progress{Stage: "tune", Done: 1, Total: 4})
	f(selection.Progress{Phase: 0, Done: 0, Total: 8})
	f(selection.Progress{Phase: 0, Done: 3, Total: 8})
	p.Step("late")
	if w := p.Where(); w != "in phase 1 of 2 after 3 of 8 batches" {
		t.Fatalf("Where = %q", w)
	}
	p.Close()
	want := `level=INFO msg=step step=connecting
level=INFO msg=step step="labelling the bootstrap sample (2 points)"
level=INFO msg=step step="generating the proxies: tune"
level=INFO msg=progress phase=1/2 batches=0/8 percent=0
`
	if got := buf.String(); got != want {
		t.Fatalf("log lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestProgressStepSpinner: on a terminal a step draws a spinner with its
// name, which the first phase's bar replaces on a line of its own.
func TestProgressStepSpinner(t *testing.T) {
	var buf syncbuf.Buffer
	p := NewProgress(&buf, true)
	f := p.Func(1, testLogger(&bytes.Buffer{}))
	p.Step("pretraining")
	time.Sleep(3 * spinInterval)
	f(selection.Progress{Phase: 0, Done: 0, Total: 4})
	f(selection.Progress{Phase: 0, Done: 4, Total: 4})
	p.Close()
	out := buf.String()
	i, j := strings.Index(out, "pretraining"), strings.Index(out, "phase 1/1")
	if i < 0 || j < i || !strings.Contains(out[i:j], "\n") {
		t.Fatalf("terminal output %q: want the step's spinner, then the phase's bar on its own line", out)
	}
}

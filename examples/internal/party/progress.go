package party

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
)

// IsTerminal reports whether w is a terminal (an *os.File on a TTY).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress shows the progress of a selection's phases. On a terminal it
// draws a live bar per phase (phase i/n, batches done/total, percent, rate
// and time left) with github.com/schollz/progressbar; otherwise it writes
// log lines at Info level: the first and the last batch of every phase and
// at most one line per Interval in between, phases numbered from 1 as in
// the summary, rates and times rounded.
//
// Before the first phase, Step names what the party is doing (pretraining,
// connecting, generating the proxies ...): a spinner with the step and its
// elapsed time on a terminal, a "step" log line otherwise, so that progress
// shows from the first second. Where says where the run is (for the
// message of an interrupted run).
//
// Use Writer as the log output, so that log lines do not tear the bar, and
// Func as the OnProgress callback; Close ends an unfinished bar's line.
type Progress struct {
	// Interval is the least time between two log lines of a phase
	// (selection.ProgressLogInterval unless changed before the first update).
	Interval time.Duration

	mu       sync.Mutex
	w        io.Writer
	terminal bool
	now      func() time.Time
	log      *slog.Logger
	phases   int
	bar      *progressbar.ProgressBar
	phase    int // phase of the current bar or log lines; -1 before the first
	done     int // most batches reported done in phase
	total    int // batches of phase
	lastLog  time.Time
	step     string        // the current step before the first phase
	stopSpin chan struct{} // closed to stop the spinner's ticker
}

// spinInterval is how often a step's spinner is redrawn.
const spinInterval = 120 * time.Millisecond

// SetLog sets the logger of the step and progress lines written when not on
// a terminal (Func sets it too).
func (p *Progress) SetLog(log *slog.Logger) {
	p.mu.Lock()
	p.log = log
	p.mu.Unlock()
}

// Step reports what the party does now, before its first phase (steps after
// the first phase's report, and a repeat of the current step, are ignored): on a terminal a spinner with name
// and the time elapsed, which the next step or the first phase replaces;
// otherwise an Info line msg=step step=name.
func (p *Progress) Step(name string) {
	p.mu.Lock()
	if p.phase >= 0 || name == p.step {
		p.mu.Unlock()
		return
	}
	p.endBar()
	p.step = name
	log := p.log
	if p.terminal {
		p.bar = progressbar.NewOptions(-1,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(name),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionSetSpinnerChangeInterval(0), // ticked below, under p.mu
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
		)
		_ = p.bar.RenderBlank()
		stop, bar := make(chan struct{}), p.bar
		p.stopSpin = stop
		go func() {
			t := time.NewTicker(spinInterval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					p.mu.Lock()
					if p.bar == bar {
						_ = bar.Add(0)
					}
					p.mu.Unlock()
				}
			}
		}()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if log != nil {
		log.Info("step", "step", name)
	}
}

// Labeler wraps the model owner's labelling of the bootstrap sample so that
// it shows as a step ("labelling the bootstrap sample").
func (p *Progress) Labeler(l selection.Labeler) selection.Labeler {
	if l == nil {
		return nil
	}
	return func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
		p.Step(fmt.Sprintf("labelling the bootstrap sample (%d points)", len(idx)))
		return l(ctx, idx, in)
	}
}

// GenerationProgress returns a proxy.Config.Progress callback that shows
// proxy generation as steps ("generating the proxies: <stage>").
func (p *Progress) GenerationProgress() func(proxy.Progress) {
	return func(pr proxy.Progress) { p.Step("generating the proxies: " + pr.Stage) }
}

// Where says where the run is, for a message about a stop: "in phase 1 of 2
// after 3 of 8 batches", or "while <step>" before the first phase, or "" if
// nothing was reported yet.
func (p *Progress) Where() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.phase >= 0:
		return fmt.Sprintf("in phase %d of %d after %d of %d batches", p.phase+1, max(p.phases, p.phase+1), p.done, p.total)
	case p.step != "":
		return "while " + p.step
	}
	return ""
}

// NewProgress returns a Progress writing to w, drawing bars if terminal is
// set (see IsTerminal).
func NewProgress(w io.Writer, terminal bool) *Progress {
	return &Progress{Interval: selection.ProgressLogInterval, w: w, terminal: terminal, now: time.Now, phase: -1}
}

// Writer returns a writer for log output on the same stream: each write
// first clears the bar, which is drawn again after it.
func (p *Progress) Writer() io.Writer { return progressWriter{p} }

type progressWriter struct{ p *Progress }

func (pw progressWriter) Write(b []byte) (int, error) {
	p := pw.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil || p.bar.IsFinished() {
		return p.w.Write(b)
	}
	_ = p.bar.Clear()
	n, err := p.w.Write(b)
	_ = p.bar.Add(0) // redraw
	return n, err
}

// Func returns the OnProgress callback of a selection with phases phases;
// log receives the lines when not on a terminal. It is safe for concurrent
// use (the selection calls it from its workers).
func (p *Progress) Func(phases int, log *slog.Logger) func(selection.Progress) {
	p.mu.Lock()
	p.phases, p.log = phases, log
	p.mu.Unlock()
	return p.update
}

func (p *Progress) update(pr selection.Progress) {
	// The log line is written after unlocking: the logger may write through
	// Writer, which locks too.
	if log, args := p.advance(pr); log != nil {
		log.Info("progress", args...)
	}
}

// advance records pr and draws the bar; it returns the logger and the
// arguments of a log line to write, if one is due.
func (p *Progress) advance(pr selection.Progress) (*slog.Logger, []any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.Total <= 0 || pr.Phase < p.phase || (pr.Phase == p.phase && pr.Done <= p.done) {
		return nil, nil // a stale report of a worker that lost the race
	}
	newPhase := pr.Phase != p.phase
	if newPhase {
		p.endBar()
		p.phase, p.lastLog = pr.Phase, time.Time{}
	}
	p.done, p.total = min(pr.Done, pr.Total), pr.Total
	name := fmt.Sprintf("phase %d/%d", pr.Phase+1, max(p.phases, pr.Phase+1))
	if p.terminal {
		if newPhase {
			p.bar = progressbar.NewOptions(pr.Total,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(name),
				progressbar.OptionSetWidth(30),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(false),
				progressbar.OptionSetElapsedTime(false),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
			)
		}
		desc := name
		if pr.Done < pr.Total && pr.Rate > 0 {
			desc = fmt.Sprintf("%s, %g batches/s, %s left", name, roundRate(pr.Rate), roundETA(pr.ETA))
		}
		// Describe before Set: Describe on a finished bar would draw it
		// again below its final line.
		p.bar.Describe(desc)
		_ = p.bar.Set(p.done)
		return nil, nil
	}
	if p.log == nil {
		return nil, nil
	}
	now := p.now()
	if !newPhase && pr.Done < pr.Total && now.Sub(p.lastLog) < p.Interval {
		return nil, nil
	}
	p.lastLog = now
	args := []any{"phase", fmt.Sprintf("%d/%d", pr.Phase+1, max(p.phases, pr.Phase+1)),
		"batches", fmt.Sprintf("%d/%d", p.done, pr.Total), "percent", 100 * p.done / pr.Total}
	if pr.Rate > 0 {
		args = append(args, "batches_per_s", roundRate(pr.Rate))
		if pr.Done < pr.Total {
			args = append(args, "left", roundETA(pr.ETA))
		}
	}
	return p.log, args
}

// endBar ends the current bar's (or step spinner's) line if it is not
// finished.
func (p *Progress) endBar() {
	if p.stopSpin != nil {
		close(p.stopSpin)
		p.stopSpin = nil
	}
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Exit() // runs OnCompletion: the newline
	}
	p.bar = nil
}

// Close ends an unfinished bar's line, so that what follows starts on a
// line of its own.
func (p *Progress) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endBar()
}

// roundRate rounds a rate to 2 significant digits (whole numbers from 10).
func roundRate(r float64) float64 {
	if r >= 10 {
		return math.Round(r)
	}
	if r <= 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	scale := math.Pow(10, 1-math.Floor(math.Log10(r)))
	return math.Round(r*scale) / scale
}

// roundETA rounds a time left to the second (to the minute from an hour).
func roundETA(d time.Duration) time.Duration {
	if d >= time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// DropEngineProgress returns a logger like log without the selection
// engine's own "selection: progress" records, for use where a Progress
// reports progress instead (its lines number phases from 1 and round).
func DropEngineProgress(log *slog.Logger) *slog.Logger {
	return slog.New(dropProgress{log.Handler()})
}

type dropProgress struct{ slog.Handler }

func (h dropProgress) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "selection: progress" {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h dropProgress) WithAttrs(as []slog.Attr) slog.Handler {
	return dropProgress{h.Handler.WithAttrs(as)}
}

func (h dropProgress) WithGroup(name string) slog.Handler {
	return dropProgress{h.Handler.WithGroup(name)}
}

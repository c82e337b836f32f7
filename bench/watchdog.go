package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// ErrStuck is wrapped by the error of a run the watchdog cancelled: no
// batch finished and no byte crossed the parties' link for
// SelectConfig.Stall.
var ErrStuck = errors.New("bench: the run is stuck")

// DefaultStall is SelectConfig.Stall when 0: the longest silence a healthy
// sample run may keep. The link does not lengthen it: the connection counts
// bytes per frame as they cross (a message of 500 MB over 10 MB/s moves
// bytes all along), and a round trip of the emulated WANs is well under a
// second. What a healthy run may spend with no byte moving is compute
// between exchanges and between batches: the longest are a phase's
// preparation and the model owner encrypting one weight matrix of the he
// provider (sst2-distilbert's 768×1536: 5–7 s, bench/TWOHOSTS.md), far
// below this on a loaded machine too.
const DefaultStall = 10 * time.Minute

// progress is what the watchdog of one in-process run watches: each
// party's phase, its batches finished, and the parties' connections.
type progress struct {
	phase   [2]atomic.Int64
	batches [2]atomic.Int64
	conns   [2]atomic.Pointer[transport.Conn]
	// stallHook (tests), if set, is called by a party before each batch:
	// a test plants a stall with it.
	stallHook func(ctx context.Context, party int)
}

func newProgress() *progress {
	p := &progress{}
	for i := range p.phase {
		p.phase[i].Store(-1)
	}
	return p
}

// setPhase records that party started phase (0-based).
func (p *progress) setPhase(party, phase int) {
	if p != nil && party >= 0 && party < 2 {
		p.phase[party].Store(int64(phase))
	}
}

// batchDone records that party finished a batch.
func (p *progress) batchDone(party int) {
	if p != nil && party >= 0 && party < 2 {
		p.batches[party].Add(1)
	}
}

// mark is a snapshot of everything that counts as progress.
type mark struct {
	batches [2]int64
	bytes   [2]int64
}

func (p *progress) mark() mark {
	var m mark
	for i := range 2 {
		m.batches[i] = p.batches[i].Load()
		if c := p.conns[i].Load(); c != nil {
			st := c.Stats()
			m.bytes[i] = st.BytesSent + st.BytesRecv
		}
	}
	return m
}

// where says where each party stands.
func (p *progress) where() string {
	var b strings.Builder
	for i := range 2 {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "party %d ", i)
		if ph := p.phase[i].Load(); ph >= 0 {
			fmt.Fprintf(&b, "in phase %d", ph+1)
		} else {
			b.WriteString("before phase 1")
		}
		fmt.Fprintf(&b, ", %d batches done", p.batches[i].Load())
		if c := p.conns[i].Load(); c != nil {
			st := c.Stats()
			fmt.Fprintf(&b, ", %d B sent, %d B received", st.BytesSent, st.BytesRecv)
		}
	}
	return b.String()
}

// watch cancels the run (cancel, with an error wrapping ErrStuck) once
// nothing moved for stall, polling every tick; it returns when ctx ends.
// The error says where each party stands and how its goroutines wait
// (GoroutineSummary: the lanes' producers, consumers and the providers'
// items by what they wait on); the whole summary goes to log.
func (p *progress) watch(ctx context.Context, cancel context.CancelCauseFunc, stall, tick time.Duration, log *slog.Logger) {
	t := time.NewTicker(tick)
	defer t.Stop()
	last, since := p.mark(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if m := p.mark(); m != last {
			last, since = m, time.Now()
			continue
		}
		if quiet := time.Since(since); quiet >= stall {
			sum := GoroutineSummary(12)
			if log != nil {
				log.Error("mpcbench select: stuck: no batch finished and no byte crossed the parties' link", "for", quiet.Round(time.Second), "where", p.where(), "goroutines", "\n"+sum)
			}
			cancel(fmt.Errorf("%w: no batch finished and no byte crossed the parties' link for %v: %s; goroutines by what they wait on:\n%s",
				ErrStuck, quiet.Round(time.Second), p.where(), sum))
			return
		}
	}
}

// GoroutineSummary returns the goroutines of this process grouped by
// their stack (the functions, without runtime frames and arguments; each
// group once, with its count and state), largest groups first: what a
// stuck run shows of who waits on what. max bounds the functions shown
// per stack (≤ 0: all).
func GoroutineSummary(max int) string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return summarizeStacks(buf, max)
}

// goroutineHeader matches "goroutine 7 [select, 2 minutes]:".
var goroutineHeader = regexp.MustCompile(`^goroutine \d+ (?:gp=\S+ m=\S+ (?:mp=\S+ )?)?\[([^,\]]+)`)

// summarizeStacks groups the goroutine dump b (runtime.Stack's format).
func summarizeStacks(b []byte, max int) string {
	type group struct {
		state, stack string
		n            int
	}
	groups := map[string]*group{}
	for _, blk := range bytes.Split(b, []byte("\n\n")) {
		lines := strings.Split(strings.TrimSpace(string(blk)), "\n")
		m := goroutineHeader.FindStringSubmatch(lines[0])
		if m == nil {
			continue
		}
		var fns []string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "created by") {
				continue
			}
			f := l
			if i := strings.LastIndex(f, "("); i > 0 && strings.HasSuffix(f, ")") {
				f = f[:i]
			}
			f = f[strings.LastIndex(f, "/")+1:]
			if strings.HasPrefix(f, "runtime.") || strings.HasPrefix(f, "sync.runtime_") || strings.HasPrefix(f, "testing.") {
				continue
			}
			fns = append(fns, f)
		}
		if max > 0 && len(fns) > max {
			fns = append(fns[:max], "…")
		}
		key := m[1] + "|" + strings.Join(fns, " ← ")
		g := groups[key]
		if g == nil {
			g = &group{state: m[1], stack: strings.Join(fns, " ← ")}
			groups[key] = g
		}
		g.n++
	}
	all := make([]*group, 0, len(groups))
	for _, g := range groups {
		all = append(all, g)
	}
	slices.SortFunc(all, func(a, b *group) int {
		return cmp.Or(b.n-a.n, strings.Compare(a.stack, b.stack))
	})
	var out strings.Builder
	for _, g := range all {
		if g.stack == "" {
			continue // runtime-only goroutines (GC workers and the like)
		}
		fmt.Fprintf(&out, "%4d × [%s] %s\n", g.n, g.state, g.stack)
	}
	return out.String()
}

package beaver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Prefetch splits a computation into an offline and an online phase: for a
// declared schedule of requests it produces material ahead of use, on a
// background goroutine per stream, into a bounded buffer (capacity items per
// stream), and serves the online calls from the buffer. Calls on a stream
// must follow its schedule (kind and sizes; a mismatch is an error, not a
// silent desynchronisation); once a stream's schedule is used up, or on
// streams without one, calls go straight to the underlying provider, and so
// do weight masks (never scheduled: they are keyed by weight id, not by
// stream).
//
// Prefetch is itself a Provider: it implements Material, Position and Seek
// over its buffers and hands the rest to the underlying provider. Bind the
// underlying provider to its session before wrapping it (the producers start
// at NewPrefetch); binding the Prefetch then only checks the id. Offline
// reports the time spent producing material, Waited the time online calls
// spent waiting for it.
//
// Deprecated: material is fetched ahead by one mechanism,
// protocol.Prefetch (a computation's rehearsed protocol.Script drawn ahead
// on its stream), which protocol.Session.Ahead, selection's batch lanes
// and mpcbench use. Prefetch stays only while beaver/ot's tests use it.
type Prefetch struct {
	p      Provider
	queues map[uint32]*pfQueue
	cancel context.CancelFunc
	wg     sync.WaitGroup

	offline, waited atomic.Int64 // nanoseconds
}

type pfQueue struct {
	sched []Request
	ch    chan pfItem
	base  uint64 // the provider's position of the stream at start

	mu       sync.Mutex
	consumed int
	produced atomic.Int64
	done     chan struct{} // closed when the producer stops
}

type pfItem struct {
	m   Material
	err error
}

var _ Provider = (*Prefetch)(nil)

// NewPrefetch starts producing the scheduled material of p (requests in
// order per stream; their Counter fields are ignored) with at most capacity
// items buffered per stream. Close stops it. A weight mask in the schedule
// is an error.
func NewPrefetch(p Provider, capacity int, schedule []Request) (*Prefetch, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("beaver: prefetch capacity %d, want ≥ 1", capacity)
	}
	byStream := map[uint32][]Request{}
	for i, r := range schedule {
		r.Counter = 0
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("beaver: prefetch schedule item %d: %w", i, err)
		}
		if r.Kind == KindWeightMask {
			return nil, fmt.Errorf("beaver: prefetch schedule item %d: %v: weight masks are not prefetched", i, r)
		}
		byStream[r.Stream] = append(byStream[r.Stream], r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pf := &Prefetch{p: p, queues: map[uint32]*pfQueue{}, cancel: cancel}
	for st, sched := range byStream {
		q := &pfQueue{sched: sched, ch: make(chan pfItem, capacity), base: p.Position(st), done: make(chan struct{})}
		pf.queues[st] = q
		pf.wg.Add(1)
		go pf.produce(ctx, q)
	}
	return pf, nil
}

func (pf *Prefetch) produce(ctx context.Context, q *pfQueue) {
	defer pf.wg.Done()
	defer close(q.done)
	for _, r := range q.sched {
		t0 := time.Now()
		m, err := pf.p.Material(ctx, r)
		pf.offline.Add(int64(time.Since(t0)))
		select {
		case q.ch <- pfItem{m, err}:
			q.produced.Add(1)
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}

// Ready blocks until every stream's buffer is full or its schedule entirely
// produced (so an online phase that fits in the buffers never waits), or ctx
// ends.
func (pf *Prefetch) Ready(ctx context.Context) error {
	for {
		ready := true
		for _, q := range pf.queues {
			select {
			case <-q.done:
				continue
			default:
			}
			if len(q.ch) < cap(q.ch) {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("beaver: prefetch: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Offline returns the total time the producers spent making material.
func (pf *Prefetch) Offline() time.Duration { return time.Duration(pf.offline.Load()) }

// Waited returns the total time online calls waited for material.
func (pf *Prefetch) Waited() time.Duration { return time.Duration(pf.waited.Load()) }

// Close stops the producers and waits for them; buffered material is dropped
// (never reused: the underlying provider's counters have moved past it).
func (pf *Prefetch) Close() error {
	pf.cancel()
	pf.wg.Wait()
	return nil
}

// Material implements Provider: it serves r from the stream's buffer while
// the stream's schedule lasts, and from the underlying provider after it.
func (pf *Prefetch) Material(ctx context.Context, r Request) (Material, error) {
	if r.Counter != 0 {
		return Material{}, fmt.Errorf("beaver: prefetch %v: the provider assigns counters (Position, Seek); the request's must be zero", r)
	}
	q := pf.queues[r.Stream]
	if r.Kind == KindWeightMask {
		q = nil
	}
	if q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
	}
	if q == nil || q.consumed >= len(q.sched) {
		return pf.p.Material(ctx, r)
	}
	if want := q.sched[q.consumed]; want != r {
		return Material{}, fmt.Errorf("beaver: prefetch: stream %d call %d is %v, the schedule says %v", r.Stream, q.consumed, r, want)
	}
	t0 := time.Now()
	var it pfItem
	select {
	case it = <-q.ch:
	case <-ctx.Done():
		return Material{}, fmt.Errorf("beaver: prefetch %v: %w", r, ctx.Err())
	}
	pf.waited.Add(int64(time.Since(t0)))
	q.consumed++
	if it.err != nil {
		return Material{}, it.err
	}
	return it.m, nil
}

// Party returns the underlying provider's party.
func (pf *Prefetch) Party() int { return pf.p.Party() }

// Position returns the counter of the next item the caller will get on
// stream (not the producer's, which runs ahead).
func (pf *Prefetch) Position(stream uint32) uint64 {
	if q := pf.queues[stream]; q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.consumed < len(q.sched) {
			return q.base + uint64(q.consumed)
		}
	}
	return pf.p.Position(stream)
}

// Seek implements Provider; it is refused on a stream whose schedule is not
// used up.
func (pf *Prefetch) Seek(stream uint32, pos uint64) error {
	if q := pf.queues[stream]; q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.consumed < len(q.sched) {
			return fmt.Errorf("beaver: prefetch: seek on stream %d while its schedule is being served", stream)
		}
	}
	return pf.p.Seek(stream, pos)
}

// Stats returns the underlying provider's dealer traffic.
func (pf *Prefetch) Stats() DealerStats { return pf.p.Stats() }

// SetSessionBudget implements SessionBudgeter: it passes work on to the
// underlying provider when that announces budgets (see
// Client.SetSessionBudget: it counts only while that is not bound yet).
func (pf *Prefetch) SetSessionBudget(work uint64) {
	if b, ok := pf.p.(SessionBudgeter); ok {
		b.SetSessionBudget(work)
	}
}

// AnnouncesBudget implements SessionBudgeter: whether the wrapped
// provider announces budgets.
func (pf *Prefetch) AnnouncesBudget() bool {
	b, ok := pf.p.(SessionBudgeter)
	return ok && b.AnnouncesBudget()
}

// BindSession binds the underlying provider (see Provider.BindSession). Its
// producers start at NewPrefetch, so bind the provider before wrapping it;
// binding the Prefetch then only checks the id.
func (pf *Prefetch) BindSession(ctx context.Context, id SessionID) error {
	return pf.p.BindSession(ctx, id)
}

// Session returns the underlying provider's session.
func (pf *Prefetch) Session() (SessionID, bool) { return pf.p.Session() }

// Recorder is a Provider wrapper that records the requests made through it,
// in order: run a computation once with it to obtain the schedule a Prefetch
// needs for the next run of the same computation. It records every request
// of a stream kind (weight masks, never prefetched, are passed through
// unrecorded) and overrides nothing but Material.
//
// Deprecated: protocol.Rehearse learns a computation's requests without
// running it; Recorder stays only while beaver/ot's tests use it.
type Recorder struct {
	Provider
	mu   sync.Mutex
	reqs []Request
}

// NewRecorder wraps p.
func NewRecorder(p Provider) *Recorder { return &Recorder{Provider: p} }

// Requests returns the recorded schedule (Counter fields zero).
func (r *Recorder) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Material records q and forwards it.
func (r *Recorder) Material(ctx context.Context, q Request) (Material, error) {
	if q.Kind != KindWeightMask {
		r.mu.Lock()
		r.reqs = append(r.reqs, q)
		r.mu.Unlock()
	}
	return r.Provider.Material(ctx, q)
}

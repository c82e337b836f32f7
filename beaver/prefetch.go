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
// streams without one, calls go straight to the underlying provider.
//
// Prefetch is itself a Provider. Offline reports the time spent producing
// material, Waited the time online calls spent waiting for it.
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
	m   material
	err error
}

var _ Provider = (*Prefetch)(nil)

// NewPrefetch starts producing the scheduled material of p (requests in
// order per stream; their Counter fields are ignored) with at most capacity
// items buffered per stream. Close stops it.
func NewPrefetch(p Provider, capacity int, schedule []Request) (*Prefetch, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("beaver: prefetch capacity %d, want ≥ 1", capacity)
	}
	byStream := map[uint32][]Request{}
	for i, r := range schedule {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("beaver: prefetch schedule item %d: %w", i, err)
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
		m, err := fetch(ctx, pf.p, r)
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

// next serves r from the stream's buffer while its schedule lasts.
func (pf *Prefetch) next(ctx context.Context, r Request) (material, error) {
	q := pf.queues[r.Stream]
	if q != nil {
		q.mu.Lock()
		defer q.mu.Unlock()
	}
	if q == nil || q.consumed >= len(q.sched) {
		return fetch(ctx, pf.p, r)
	}
	want := q.sched[q.consumed]
	want.Counter, r.Counter = 0, 0
	if want != r {
		return material{}, fmt.Errorf("beaver: prefetch: stream %d call %d is %v, the schedule says %v", r.Stream, q.consumed, r, want)
	}
	t0 := time.Now()
	var it pfItem
	select {
	case it = <-q.ch:
	case <-ctx.Done():
		return material{}, fmt.Errorf("beaver: prefetch %v: %w", r, ctx.Err())
	}
	pf.waited.Add(int64(time.Since(t0)))
	q.consumed++
	if it.err != nil {
		return material{}, it.err
	}
	return it.m, nil
}

// Party returns the underlying provider's party.
func (pf *Prefetch) Party() int { return pf.p.Party() }

// Triples implements Provider.
func (pf *Prefetch) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	m, err := pf.next(ctx, Request{Kind: KindTriple, Stream: stream, N: n})
	if err != nil {
		return Triple{}, err
	}
	return m.triple(), nil
}

// SquarePairs implements Provider.
func (pf *Prefetch) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	m, err := pf.next(ctx, Request{Kind: KindSquare, Stream: stream, N: n})
	if err != nil {
		return SquarePair{}, err
	}
	return m.square(), nil
}

// MatTriples implements Provider.
func (pf *Prefetch) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	mat, err := pf.next(ctx, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n})
	if err != nil {
		return Triple{}, err
	}
	return mat.triple(), nil
}

// WeightMask implements Provider (never buffered).
func (pf *Prefetch) WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error) {
	return pf.p.WeightMask(ctx, weightID, k, n)
}

// WeightTriple implements Provider.
func (pf *Prefetch) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	mat, err := pf.next(ctx, Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// WeightVectorTriple implements Provider.
func (pf *Prefetch) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	mat, err := pf.next(ctx, Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// ANDTriples implements Provider.
func (pf *Prefetch) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := pf.next(ctx, Request{Kind: KindAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// CrossANDTriples implements Provider.
func (pf *Prefetch) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := pf.next(ctx, Request{Kind: KindCrossAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// TruncPairs implements Provider.
func (pf *Prefetch) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	m, err := pf.next(ctx, Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits})
	if err != nil {
		return TruncPair{}, err
	}
	return m.truncPair(), nil
}

// BitPairs implements Provider.
func (pf *Prefetch) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	m, err := pf.next(ctx, Request{Kind: KindBitPair, Stream: stream, N: n})
	if err != nil {
		return BitPair{}, err
	}
	return m.bitPair(), nil
}

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

// Recorder is a Provider wrapper that records the requests made through it,
// in order: run a computation once with it to obtain the schedule a Prefetch
// needs for the next run of the same computation.
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

func (r *Recorder) add(q Request) {
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
}

// Triples records and forwards.
func (r *Recorder) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	r.add(Request{Kind: KindTriple, Stream: stream, N: n})
	return r.Provider.Triples(ctx, stream, n)
}

// SquarePairs records and forwards.
func (r *Recorder) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	r.add(Request{Kind: KindSquare, Stream: stream, N: n})
	return r.Provider.SquarePairs(ctx, stream, n)
}

// MatTriples records and forwards.
func (r *Recorder) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	r.add(Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n})
	return r.Provider.MatTriples(ctx, stream, batch, m, k, n)
}

// WeightTriple records and forwards.
func (r *Recorder) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	r.add(Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n})
	return r.Provider.WeightTriple(ctx, stream, weightID, m, k, n)
}

// WeightVectorTriple records and forwards.
func (r *Recorder) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	r.add(Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n})
	return r.Provider.WeightVectorTriple(ctx, stream, weightID, m, n)
}

// ANDTriples records and forwards.
func (r *Recorder) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	r.add(Request{Kind: KindAND, Stream: stream, N: words})
	return r.Provider.ANDTriples(ctx, stream, words)
}

// CrossANDTriples records and forwards.
func (r *Recorder) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	r.add(Request{Kind: KindCrossAND, Stream: stream, N: words})
	return r.Provider.CrossANDTriples(ctx, stream, words)
}

// TruncPairs records and forwards.
func (r *Recorder) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	r.add(Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits})
	return r.Provider.TruncPairs(ctx, stream, n, fracBits)
}

// BitPairs records and forwards.
func (r *Recorder) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	r.add(Request{Kind: KindBitPair, Stream: stream, N: n})
	return r.Provider.BitPairs(ctx, stream, n)
}

// BindSession binds the wrapped provider (see SessionBinder).
func (r *Recorder) BindSession(ctx context.Context, id SessionID) error {
	return BindSession(ctx, r.Provider, id)
}

// Session returns the wrapped provider's session.
func (r *Recorder) Session() (SessionID, bool) { return sessionOf(r.Provider) }

// BindSession binds the wrapped provider (see SessionBinder). Its
// producers start at NewPrefetch, so bind the provider before wrapping it;
// binding the Prefetch then only checks the id.
func (pf *Prefetch) BindSession(ctx context.Context, id SessionID) error {
	return BindSession(ctx, pf.p, id)
}

// Session returns the wrapped provider's session.
func (pf *Prefetch) Session() (SessionID, bool) { return sessionOf(pf.p) }

// sessionOf returns p's session, if p has one.
func sessionOf(p Provider) (SessionID, bool) {
	if b, ok := p.(SessionBinder); ok {
		return b.Session()
	}
	return SessionID{}, false
}

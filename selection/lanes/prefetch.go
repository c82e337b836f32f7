package lanes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
)

// laneProvider is the provider of the batch lanes' sessions: it serves the
// lanes' requests from the running phase's prefetched material (or passes
// them to the party's provider, recording what a batch drawn directly draws
// to check it against the rehearsed template), and everything else
// straight from the party's provider.
type laneProvider struct {
	beaver.Provider
	s   *Scheduler
	cur atomic.Pointer[phaseFetch]
}

// Unwrap implements beaver.Wrapper.
func (l *laneProvider) Unwrap() beaver.Provider { return l.Provider }

func newLaneProvider(p beaver.Provider, s *Scheduler) *laneProvider {
	return &laneProvider{Provider: p, s: s}
}

// Material implements beaver.Provider.
func (l *laneProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if pf := l.cur.Load(); pf != nil {
		if lf := pf.laneOf(r.Stream); lf != nil {
			return pf.material(ctx, lf, r)
		}
	}
	return l.Provider.Material(ctx, r)
}

// Ready implements protocol.MaterialReady: a lane's request is at hand
// when its running batch is served from prefetched material and the item
// is drawn. Any other request waits for the provider (a dealer-free one
// makes each item with the peer), and the session gives its compute slot
// back meanwhile.
func (l *laneProvider) Ready(r beaver.Request) bool {
	pf := l.cur.Load()
	if pf == nil {
		return false
	}
	lf := pf.laneOf(r.Stream)
	if lf == nil {
		return false
	}
	lb := lf.cur.Load()
	return lb != nil && lb.prefetched && lb.pre.Ready()
}

var _ protocol.MaterialReady = (*laneProvider)(nil)

// phaseFetch is the prefetching state of one Run: per lane, its
// pending batches in order and a producer that fetches the next batch's
// material while the current one runs.
type phaseFetch struct {
	base  beaver.Provider
	s     *Scheduler
	phase int
	// workers is the phase's number of lanes W (≤ the scheduler's);
	// size the candidates of its full batch.
	workers int
	size    int
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	lanes   []*laneFetch
	byNum   map[int]*laneBatch

	record    bool            // prefetch: learn the templates by rehearsal
	tmplMu    sync.Mutex      // guards tmpl and tokens until tmplReady
	tmpl      protocol.Script // the template of a full batch
	tmplReady chan struct{}
	tokens    chan struct{} // one per full batch of material the budget holds
	// window is the window of a streamed batch (0: none) and windows the
	// budget's part kept for them, free: a batch that starts without a
	// token streams its material through a window (protocol.NewPrefetchWindow)
	// if one is free; set with the tokens.
	window  int64
	windows chan struct{}

	// tail is the template of the phase's last batch when it is partial
	// (nil if unknown): set by the rehearsal before the producers start,
	// read-only afterwards.
	tail       *protocol.Script
	held, peak atomic.Int64
	prefetched atomic.Int64
	streamed   atomic.Int64
}

// laneFetch is one lane's part of a phaseFetch.
type laneFetch struct {
	stream  uint32
	batches []*laneBatch
	cur     atomic.Pointer[laneBatch]
}

// laneBatch is one batch of a lane. Its material is either prefetched (the
// producer claimed it first) or drawn directly (the batch started first).
type laneBatch struct {
	b, lane int
	full    bool

	mu         sync.Mutex
	decided    bool
	prefetched bool          // served from a Prefetch, full (a token) or streamed
	streamed   bool          // through a window, not a token
	claimed    chan struct{} // closed when the batch starts
	fetched    chan struct{} // closed when its prefetched material is all fetched
	done       chan struct{} // closed when it is finished

	// pre is lb's prefetched material, drawn by the phase's template for
	// a batch of its size, and bytes its size (set when it is claimed for
	// prefetching, under mu).
	pre   *protocol.Prefetch
	bytes int64

	// The consumer's side, under cmu (prefetched no longer changes once
	// the batch has started). Never held while waiting for the producer,
	// who takes mu.
	cmu   sync.Mutex
	drawn int // items drawn directly
	rec   []beaver.Request
}

// templateOf returns the template of lb's size, if known: the script of
// a batch's dealer requests (protocol.Rehearse).
func (pf *phaseFetch) templateOf(lb *laneBatch) (protocol.Script, bool) {
	if lb.full {
		if !pf.templateKnown() {
			return protocol.Script{}, false
		}
		return pf.tmpl, true
	}
	if pf.tail != nil {
		return *pf.tail, true
	}
	return protocol.Script{}, false
}

// beginPhase starts the prefetching of phase's pending batches (of size
// of its n candidates) on W lanes and routes the lanes' requests through it. When rehearse is
// set and the budget allows prefetching, the phase's template (the dealer
// requests of a full batch) is recorded first, by rehearsing a full
// pending batch's run on a session that talks to nobody (see rehearse),
// so that the lanes' first batches are prefetched too.
func (l *laneProvider) beginPhase(ctx context.Context, phase, W, size, n int, pending []int, rehearse func(context.Context, *protocol.Session, int) error) (*phaseFetch, error) {
	s := l.s
	ctx, cancel := context.WithCancel(ctx)
	pf := &phaseFetch{base: l.Provider, s: s, phase: phase, workers: W, size: size, ctx: ctx, cancel: cancel,
		record: s.budget > 0, tmplReady: make(chan struct{})}
	pf.lanes = make([]*laneFetch, W)
	for w := range pf.lanes {
		pf.lanes[w] = &laneFetch{stream: s.slotStream(w)}
	}
	pf.byNum = make(map[int]*laneBatch, len(pending))
	for j, b := range pending {
		lo, hi := Span(b, n, size)
		lb := &laneBatch{b: b, lane: j % W, full: hi-lo == size, claimed: make(chan struct{}), fetched: make(chan struct{}), done: make(chan struct{})}
		pf.byNum[b] = lb
		lf := pf.lanes[lb.lane]
		lf.batches = append(lf.batches, lb)
	}
	if pf.record && rehearse != nil {
		if err := pf.rehearse(ctx, n, pending, rehearse); err != nil {
			cancel()
			return nil, err
		}
	}
	l.cur.Store(pf)
	if pf.record {
		for _, lf := range pf.lanes {
			pf.wg.Add(1)
			go pf.produce(lf)
		}
	}
	return pf, nil
}

// rehearse records the phase's templates from rehearsals (protocol.Rehearse:
// a run on a session that talks to nobody and draws zeros) of the last full
// pending batch and of the partial last batch, if pending (none: nothing to
// record). The requests of a computation depend on its public shapes
// alone, and every batch checks its own against the template as it draws.
func (pf *phaseFetch) rehearse(ctx context.Context, n int, pending []int, run func(context.Context, *protocol.Session, int) error) error {
	s := pf.s
	full, tail := -1, -1
	for _, b := range pending {
		if lo, hi := Span(b, n, pf.size); hi-lo == pf.size {
			full = max(full, b)
		} else {
			tail = b
		}
	}
	record := func(b int) (protocol.Script, error) {
		sc, err := protocol.Rehearse(ctx, s.party, s.slotStream(0), s.fp, func(ctx context.Context, sess *protocol.Session) error {
			return run(ctx, sess, b)
		}, protocol.RehearseFor(s.prov)...)
		if err != nil {
			return protocol.Script{}, fmt.Errorf("lanes: phase %d: rehearsal of batch %d: %w", pf.phase+1, b, err)
		}
		if len(sc.Requests) > MaxBatchItems {
			return protocol.Script{}, fmt.Errorf("lanes: phase %d: rehearsal of batch %d drew %d dealer items, more than the %d a batch may", pf.phase+1, b, len(sc.Requests), MaxBatchItems)
		}
		return sc, nil
	}
	pf.tmplMu.Lock()
	defer pf.tmplMu.Unlock()
	if tail >= 0 {
		t, err := record(tail)
		if err != nil {
			return err
		}
		pf.tail = &t
		if full < 0 {
			// No full batch to take the budget's measure: the tail's.
			pf.setTokens(t.Bytes)
		}
	}
	if full >= 0 {
		t, err := record(full)
		if err != nil {
			return err
		}
		pf.setTemplate(t)
	}
	return nil
}

// setTemplate makes t (the script of a full batch) the phase's template
// and hands out the budget's tokens; tmplMu is held.
func (pf *phaseFetch) setTemplate(t protocol.Script) {
	pf.tmpl = t
	pf.setTokens(t.Bytes)
	close(pf.tmplReady)
}

// setTokens hands out the budget's tokens, one per batch of material of
// the given bytes (a partial batch takes a whole one); tmplMu is held.
func (pf *phaseFetch) setTokens(bytes int64) {
	n, budget := 0, pf.s.budget
	if bytes > 0 {
		if full := int64(2*pf.workers) * bytes; budget < full {
			// The budget cannot hold two batches a lane: keep part of it
			// for windows, so that a batch that starts without a whole
			// batch's share streams its material (a round trip per half
			// window) instead of drawing item by item (a round trip each).
			w := min(budget/int64(2*pf.workers), MaxStreamWindow, bytes)
			if w >= min(pf.s.minWindow, bytes) {
				pf.window = w
				pf.windows = make(chan struct{}, pf.workers)
				for range pf.workers {
					pf.windows <- struct{}{}
				}
				budget -= w * int64(pf.workers)
			}
		}
		// A lane holds at most two batches' material: the running one and
		// the next.
		n = int(min(budget/bytes, int64(2*pf.workers)))
	}
	pf.tokens = make(chan struct{}, n)
	for range n {
		pf.tokens <- struct{}{}
	}
}

// The window of a streamed batch: the budget's share of a lane's two
// batches when it cannot hold them whole, at most MaxStreamWindow (and a
// batch's material), at least Config.MinStreamWindow (DefaultMinStreamWindow;
// or a batch's material, if smaller): a smaller window would cost nearly a
// round trip per item, as drawing directly does.
const (
	DefaultMinStreamWindow = 1 << 20
	MaxStreamWindow        = 64 << 20
)

// endPhase stops the producers and routes the lanes' requests to the
// party's provider again.
func (l *laneProvider) endPhase() {
	if pf := l.cur.Swap(nil); pf != nil {
		pf.cancel()
		pf.wg.Wait()
	}
}

// laneOf returns the lane of stream, or nil.
func (pf *phaseFetch) laneOf(stream uint32) *laneFetch {
	w := int64(stream) - int64(pf.s.laneBase)
	if w < 0 || w >= int64(len(pf.lanes)) {
		return nil
	}
	return pf.lanes[w]
}

// stats returns the batches prefetched, the peak bytes held and a full
// batch's material bytes.
func (pf *phaseFetch) stats() (int, int, int64, int64) {
	pf.tmplMu.Lock()
	defer pf.tmplMu.Unlock()
	return int(pf.prefetched.Load()), int(pf.streamed.Load()), pf.peak.Load(), pf.tmpl.Bytes
}

// begin claims batch b for its lane: it uses the prefetched material if the
// producer claimed it first, or claims it for prefetching itself if the
// phase's template is known and the budget holds one more batch (the
// producer then fetches its items ahead of the protocol's requests);
// otherwise it seeks the lane's stream to the batch's counters and draws
// directly.
func (pf *phaseFetch) begin(ctx context.Context, b int) (*laneBatch, error) {
	lb := pf.byNum[b]
	if lb == nil {
		return nil, fmt.Errorf("batch not pending")
	}
	lf := pf.lanes[lb.lane]
	lb.mu.Lock()
	if !lb.decided {
		lb.decided = true
		if t, ok := pf.templateOf(lb); ok {
			switch {
			case pf.tryToken():
				pf.claimPrefetch(lb, t)
			case pf.tryWindow():
				pf.claimStream(lb, t)
			}
		}
	}
	direct := !lb.prefetched
	lb.mu.Unlock()
	close(lb.claimed)
	if direct {
		if err := pf.base.Seek(lf.stream, pf.s.batchCounter(pf.phase, pf.workers, b)); err != nil {
			close(lb.done)
			return nil, fmt.Errorf("position dealer stream: %w", err)
		}
	}
	lf.cur.Store(lb)
	return lb, nil
}

// templateKnown reports whether the phase's template is recorded.
func (pf *phaseFetch) templateKnown() bool {
	select {
	case <-pf.tmplReady:
		return true
	default:
		return false
	}
}

// tryToken takes a batch's share of the budget if one is free.
func (pf *phaseFetch) tryToken() bool {
	select {
	case <-pf.tokens:
		return true
	default:
		return false
	}
}

// tryWindow takes a free window, if the phase keeps any.
func (pf *phaseFetch) tryWindow() bool {
	select {
	case <-pf.windows: // nil when the phase keeps none: never ready
		return true
	default:
		return false
	}
}

// claimStream marks lb (whose mu is held, and for which a window was taken)
// as served from material following t streamed through the window: the
// lane's producer draws it as the batch runs.
func (pf *phaseFetch) claimStream(lb *laneBatch, t protocol.Script) {
	lb.decided, lb.prefetched, lb.streamed = true, true, true
	lb.pre = protocol.NewPrefetchWindow(t, pf.lanes[lb.lane].stream, pf.s.party, pf.window)
	lb.bytes = pf.window
	pf.streamed.Add(1)
	pf.hold(pf.window)
}

// hold counts b more bytes held and keeps the peak.
func (pf *phaseFetch) hold(b int64) {
	h := pf.held.Add(b)
	for {
		p := pf.peak.Load()
		if h <= p || pf.peak.CompareAndSwap(p, h) {
			break
		}
	}
}

// claimPrefetch marks lb (whose mu is held, and for which a token was
// taken) as served from prefetched material following t.
func (pf *phaseFetch) claimPrefetch(lb *laneBatch, t protocol.Script) {
	lb.decided, lb.prefetched = true, true
	lb.pre, lb.bytes = protocol.NewPrefetch(t, pf.lanes[lb.lane].stream), t.Bytes
	pf.prefetched.Add(1)
	pf.hold(t.Bytes)
}

// finish ends batch lb (ok: it succeeded): it checks what the batch drew
// against the phase's template for its size and frees the batch's share of
// the budget.
func (pf *phaseFetch) finish(lb *laneBatch, ok bool) error {
	pf.lanes[lb.lane].cur.Store(nil)
	defer close(lb.done)
	lb.cmu.Lock()
	defer lb.cmu.Unlock()
	if lb.prefetched {
		pf.held.Add(-lb.bytes)
		if lb.streamed {
			pf.windows <- struct{}{}
		} else {
			pf.tokens <- struct{}{}
		}
		if n := lb.pre.Served(); ok && n != lb.pre.Len() {
			return fmt.Errorf("drew %d dealer items where the phase's template for a batch of its size drew %d (a Forwarder must draw the same sequence for every batch of a size)", n, lb.pre.Len())
		}
		return nil
	}
	if lb.drawn > MaxBatchItems {
		return fmt.Errorf("drew %d dealer items, more than the %d a batch may", lb.drawn, MaxBatchItems)
	}
	if !ok || !pf.record || !lb.full || !pf.templateKnown() {
		return nil
	}
	if !slices.Equal(lb.rec, pf.tmpl.Requests) {
		return fmt.Errorf("drew %d dealer items that differ from the phase's template for a full batch (%d items; a Forwarder must draw the same sequence for every batch of a size, whatever the values)", len(lb.rec), len(pf.tmpl.Requests))
	}
	return nil
}

// material serves lane lf's request r for the lane's running batch.
func (pf *phaseFetch) material(ctx context.Context, lf *laneFetch, r beaver.Request) (beaver.Material, error) {
	lb := lf.cur.Load()
	if lb == nil {
		return pf.base.Material(ctx, r)
	}
	lb.cmu.Lock()
	defer lb.cmu.Unlock()
	if !lb.prefetched {
		// Checked before drawing: the batch's counters stay inside its own
		// sub-stream (batchCounter), whatever the Forwarder asks.
		if lb.drawn >= MaxBatchItems {
			return beaver.Material{}, fmt.Errorf("lanes: %v: the batch draws more than the %d dealer items a batch may", r, MaxBatchItems)
		}
		m, err := pf.base.Material(ctx, r)
		if err != nil {
			return m, err
		}
		lb.drawn++
		if pf.record && lb.full && len(lb.rec) < MaxBatchItems {
			q := r
			q.Stream = 0
			lb.rec = append(lb.rec, q)
		}
		return m, nil
	}
	m, err := lb.pre.Material(ctx, r)
	if errors.Is(err, protocol.ErrOffScript) {
		err = fmt.Errorf("lanes: the batch departs from the phase's template for a batch of its size (a Forwarder must draw the same sequence for every batch of a size, whatever the values): %w", err)
	}
	return m, err
}

// produce fetches the material of lf's batches, in order, at most one
// batch ahead of the lane: batch i once batch i−1 has started and its own
// material is fetched (or, if it draws directly, once it is done, since it
// then uses the stream's counters), once the phase's template is known,
// and once the budget holds one more batch. A batch that started without
// prefetched material is left to draw directly; one the lane claimed for
// prefetching as it started is fetched at once.
func (pf *phaseFetch) produce(lf *laneFetch) {
	defer pf.wg.Done()
	ctx := pf.ctx
	wait := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for i, lb := range lf.batches {
		if !lb.full && pf.tail == nil {
			return
		}
		if i > 0 {
			prev := lf.batches[i-1]
			if !wait(prev.claimed) {
				return
			}
			prev.mu.Lock()
			pre := prev.prefetched
			prev.mu.Unlock()
			if !pre && !wait(prev.done) || pre && !wait(prev.fetched) {
				return
			}
		}
		if lb.full {
			select {
			case <-pf.tmplReady:
			case <-lb.claimed:
			case <-ctx.Done():
				return
			}
		}
		lb.mu.Lock()
		undecided := !lb.decided
		lb.mu.Unlock()
		if undecided {
			select {
			case <-pf.tokens:
				lb.mu.Lock()
				if t, ok := pf.templateOf(lb); ok && !lb.decided {
					pf.claimPrefetch(lb, t)
				} else {
					pf.tokens <- struct{}{}
				}
				lb.mu.Unlock()
			case <-lb.claimed:
			case <-ctx.Done():
				return
			}
		}
		lb.mu.Lock()
		pre := lb.prefetched
		lb.mu.Unlock()
		if pre && !pf.fetch(ctx, lf, lb) {
			return
		}
	}
}

// fetch draws lb's material, the phase's template on lf's stream from the
// batch's counters (lb.pre); it reports whether all went well.
func (pf *phaseFetch) fetch(ctx context.Context, lf *laneFetch, lb *laneBatch) bool {
	defer close(lb.fetched)
	if err := pf.base.Seek(lf.stream, pf.s.batchCounter(pf.phase, pf.workers, lb.b)); err != nil {
		lb.pre.Abort(fmt.Errorf("lanes: prefetch: position dealer stream: %w", err))
		return false
	}
	// One sequence: a networked dealer gets every request before it
	// answers the first, so the batch costs one round trip to it.
	if err := lb.pre.Draw(ctx, pf.base); err != nil {
		return false
	}
	return true
}

package protocol

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// This file is the one mechanism that fetches a computation's dealer
// material ahead of its run: a rehearsal learns the requests (Rehearse:
// they depend on public shapes alone), a Prefetch draws them as one
// sequence (beaver.DrawSequence: one round trip to a networked dealer) and
// serves them back in order, refusing any request that departs from the
// rehearsal. Session.Ahead runs one computation that way; the batch lanes
// of a selection (package selection/lanes) prefetch every batch of a phase
// from the one Script its rehearsal gives.

// ErrOffScript is wrapped by the error of a request that departs from the
// rehearsed script of its Prefetch, or goes past its end.
var ErrOffScript = errors.New("protocol: request departs from the rehearsal")

// Script is the sequence of dealer requests a computation draws on its
// session's stream, learnt by rehearsing it (Rehearse).
type Script struct {
	// Requests are the requests of stream kinds, in order, with zero
	// Stream and Counter fields (weight masks are not part of a script:
	// they are keyed by weight id, not by stream).
	Requests []beaver.Request
	// Bytes is the size of the requests' material for the rehearsing
	// party.
	Bytes int64
}

// Rehearse runs op once on a rehearsal session of party on the stream
// with id streamID (NewRehearsal) and returns the requests it drew on that
// stream. op's results are meaningless; what it draws is what its real
// run on a session of that stream will draw, whatever the values.
//
// opts make the rehearsal draw what a run on a given provider draws
// (RehearseFor): a provider that makes weight triples inside the
// computation (beaver.WeightsOnline) takes none from a script.
func Rehearse(ctx context.Context, party int, streamID uint32, fp share.FixedPoint, op func(ctx context.Context, s *Session) error, opts ...RehearsalOption) (Script, error) {
	dry, err := NewRehearsal(party, streamID, fp)
	if err != nil {
		return Script{}, err
	}
	for _, o := range opts {
		o(dry)
	}
	if err := op(ctx, dry); err != nil {
		return Script{}, err
	}
	return dry.src.(*rehearsalProvider).script(streamID), nil
}

// RehearsalOption adjusts a rehearsal (Rehearse) to the provider of the
// real run.
type RehearsalOption func(*Session)

// RehearseFor returns the options that make a rehearsal draw what a run
// whose session has provider prov draws: with a provider that makes weight
// triples inside the computation (beaver.WeightsOnline), the products with
// the model owner's weights (MatMulWeights) draw nothing.
func RehearseFor(prov beaver.Provider) []RehearsalOption {
	if beaver.WeightsOnline(prov) == nil {
		return nil
	}
	return []RehearsalOption{func(s *Session) { s.weightsOnline = true }}
}

// Prefetch is the material of one Script drawn ahead on one stream: Draw
// draws it (from any goroutine, once), Material serves it in order to the
// computation it was rehearsed from, checking each request against the
// script. Its zero value is not usable; see NewPrefetch.
type Prefetch struct {
	stream uint32
	reqs   []beaver.Request // the script on the stream
	items  chan aheadItem   // drawn, in order; an error ends it

	// window bounds the bytes drawn but not yet served (0: none): the
	// drawer waits while held plus the next item's bytes would exceed it
	// (an item larger than the window passes alone).
	window int64
	wmu    sync.Mutex
	wcond  *sync.Cond
	held   int64
	party  int

	// The consumer's side: Material is called by one computation at a
	// time, and holds mu while it waits for the next item; served mirrors
	// next for Served, which must not wait for that (the drawer may ask it
	// while Material waits for the drawer).
	mu     sync.Mutex
	next   int
	failed error
	served atomic.Int64
}

type aheadItem struct {
	m   beaver.Material
	err error
}

// NewPrefetch returns the (not yet drawn) material of sc on stream.
func NewPrefetch(sc Script, stream uint32) *Prefetch {
	reqs := make([]beaver.Request, len(sc.Requests))
	for i, r := range sc.Requests {
		r.Stream = stream
		reqs[i] = r
	}
	// One slot more than the items: a failure after the last item is
	// still delivered without blocking the drawer.
	return &Prefetch{stream: stream, reqs: reqs, items: make(chan aheadItem, len(reqs)+1)}
}

// NewPrefetchWindow is NewPrefetch with a window: Draw requests the script
// in chunks of at most half the window (party's material; an item larger
// than that is a chunk alone), each as one sequence (one round trip to a
// networked dealer), and requests the next chunk only once the material
// drawn but not yet served leaves room for it; so a script streams through
// a bounded buffer, a round trip per half window, while the computation
// runs. A chunk is requested only when it can be received whole: a drawer
// never leaves a dealer's reply unread. window ≤ 0 means none.
func NewPrefetchWindow(sc Script, stream uint32, party int, window int64) *Prefetch {
	f := NewPrefetch(sc, stream)
	if window > 0 {
		f.window, f.party = window, party
		f.wcond = sync.NewCond(&f.wmu)
	}
	return f
}

// itemBytes is the bytes of the party's material of r.
func itemBytes(r beaver.Request, party int) int64 {
	var n int64
	for _, w := range r.PartWords(party) {
		n += 8 * int64(w)
	}
	return n
}

// acquire waits until b more bytes fit the window (or nothing is held),
// then counts them held; it fails when ctx ends.
func (f *Prefetch) acquire(ctx context.Context, b int64) error {
	stop := context.AfterFunc(ctx, func() {
		f.wmu.Lock()
		f.wcond.Broadcast()
		f.wmu.Unlock()
	})
	defer stop()
	f.wmu.Lock()
	defer f.wmu.Unlock()
	for f.held > 0 && f.held+b > f.window {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.wcond.Wait()
	}
	f.held += b
	return nil
}

// release counts item i's bytes served.
func (f *Prefetch) release(i int) {
	if f.wcond == nil {
		return
	}
	f.wmu.Lock()
	f.held -= itemBytes(f.reqs[i], f.party)
	f.wcond.Broadcast()
	f.wmu.Unlock()
}

// Ready reports whether Material would return at once: the next item (or
// the draw's failure) is drawn.
func (f *Prefetch) Ready() bool { return len(f.items) > 0 }

// Len returns the number of items of the script.
func (f *Prefetch) Len() int { return len(f.reqs) }

// Served returns the number of items Material has served. It does not
// wait for a Material call in progress.
func (f *Prefetch) Served() int { return int(f.served.Load()) }

// Draw draws the script's items from p as one sequence from p's current
// position on the stream (beaver.DrawSequence) and hands them to Material
// as each is complete. Call it once; it returns the first error, which
// Material reports too.
func (f *Prefetch) Draw(ctx context.Context, p beaver.Provider) error {
	err := f.draw(ctx, p)
	if err != nil {
		f.items <- aheadItem{err: err}
	}
	return err
}

// draw draws the script: at once, or chunk by chunk within the window.
func (f *Prefetch) draw(ctx context.Context, p beaver.Provider) error {
	deliver := func(_ int, m beaver.Material) error {
		f.items <- aheadItem{m: m} // never blocks: the channel holds the script
		return nil
	}
	if f.wcond == nil {
		return beaver.DrawSequence(ctx, p, f.reqs, deliver)
	}
	half := max(f.window/2, 1)
	for i := 0; i < len(f.reqs); {
		j, b := i+1, itemBytes(f.reqs[i], f.party)
		for j < len(f.reqs) && b+itemBytes(f.reqs[j], f.party) <= half {
			b += itemBytes(f.reqs[j], f.party)
			j++
		}
		if err := f.acquire(ctx, b); err != nil {
			return err
		}
		if err := beaver.DrawSequence(ctx, p, f.reqs[i:j], deliver); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// Abort makes err the outcome of a Draw that cannot start (say, the
// stream could not be positioned); call it instead of Draw.
func (f *Prefetch) Abort(err error) { f.items <- aheadItem{err: err} }

// Material serves r, the computation's next request on the stream, from
// the drawn items: it waits for the item if it is not drawn yet, and
// refuses a request that is not the script's next (a computation that
// departs from its rehearsal) or one past its end.
func (f *Prefetch) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed != nil {
		return beaver.Material{}, f.failed
	}
	if f.next >= len(f.reqs) {
		return beaver.Material{}, fmt.Errorf("%w: %v: more dealer items than the rehearsal drew (%d)", ErrOffScript, r, len(f.reqs))
	}
	if want := f.reqs[f.next]; r != want {
		return beaver.Material{}, fmt.Errorf("%w: dealer item %d is %v where the rehearsal drew %v", ErrOffScript, f.next, r, want)
	}
	select {
	case it := <-f.items:
		if it.err != nil {
			f.failed = fmt.Errorf("protocol: dealer items drawn ahead: %w", it.err)
			return beaver.Material{}, f.failed
		}
		// Served counts the item before its bytes leave the window, so a
		// drawer the release wakes sees it served.
		f.next++
		f.served.Store(int64(f.next))
		f.release(f.next - 1)
		return it.m, nil
	case <-ctx.Done():
		return beaver.Material{}, fmt.Errorf("protocol: %v: %w", r, ctx.Err())
	}
}

// Ahead runs op on s with its dealer material drawn ahead: it first
// rehearses op (Rehearse) to learn the items op draws on s's stream, then
// runs op for real while those items are drawn as one sequence (Prefetch)
// in the background, and serves op's requests from that sequence in order.
// With a networked dealer op then waits for one round trip to the dealer
// in all, not one per item; rounds and bytes between the parties are
// unchanged, and so is every item op draws (the same kinds at the same
// counters).
//
// op runs twice, first on the rehearsal session, whose results are
// meaningless: op must keep only what its second run produces and must not
// depend on state its first run changes. Requests on other streams, and
// weight masks, pass straight to s's provider. A request that departs from
// the rehearsed sequence is an error, never a silent desynchronisation. A
// rehearsal session runs op once, on itself.
func (s *Session) Ahead(ctx context.Context, op func(ctx context.Context, s *Session) error) error {
	if s.dry {
		return op(ctx, s)
	}
	sc, err := Rehearse(ctx, s.party, s.StreamID(), s.fp, op, RehearseFor(s.src)...)
	if err != nil {
		return fmt.Errorf("protocol: rehearsal: %w", err)
	}
	if len(sc.Requests) == 0 {
		return op(ctx, s)
	}
	base := s.src
	pf := NewPrefetch(sc, s.StreamID())
	dctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = pf.Draw(dctx, base) // Material reports the error
	}()
	s.setProvider(pf.Wrap(base))
	err = op(ctx, s)
	s.setProvider(base)
	cancel()
	wg.Wait()
	if n := pf.Served(); err == nil && n != pf.Len() {
		err = fmt.Errorf("protocol: drew %d of the %d dealer items its rehearsal drew", n, pf.Len())
	}
	return err
}

// Wrap returns a provider that serves the requests of stream kinds on f's
// stream from f (Material) and everything else, weight masks included,
// from base: the provider of a session whose computation on that stream f
// was rehearsed from.
func (f *Prefetch) Wrap(base beaver.Provider) beaver.Provider {
	return &aheadProvider{Provider: base, pf: f}
}

// aheadProvider is a Prefetch's Wrap.
type aheadProvider struct {
	beaver.Provider
	pf *Prefetch
}

// Unwrap implements beaver.Wrapper.
func (a *aheadProvider) Unwrap() beaver.Provider { return a.Provider }

// Ready implements MaterialReady: a request of f's stream is at hand once
// its item is drawn; any other is drawn from base, which may wait.
func (q *aheadProvider) Ready(r beaver.Request) bool {
	return r.Stream == q.pf.stream && q.pf.Ready()
}

// Material implements beaver.Provider.
func (q *aheadProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if r.Stream != q.pf.stream {
		return q.Provider.Material(ctx, r)
	}
	return q.pf.Material(ctx, r)
}

// rehearsalProvider is the provider of a rehearsal session (NewRehearsal):
// it hands out zeros of the right shapes for every request, draws nothing
// from any dealer, and records the requests of stream kinds in order.
type rehearsalProvider struct {
	party int

	mu   sync.Mutex
	reqs []beaver.Request
}

var _ beaver.Provider = (*rehearsalProvider)(nil)

// script returns the recorded requests on stream, with zero Stream fields,
// and the bytes of their material.
func (r *rehearsalProvider) script(stream uint32) Script {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sc Script
	for _, q := range r.reqs {
		if q.Stream != stream {
			continue
		}
		for _, w := range q.PartWords(r.party) {
			sc.Bytes += 8 * int64(w)
		}
		q.Stream = 0
		sc.Requests = append(sc.Requests, q)
	}
	return sc
}

// Party implements beaver.Provider.
func (r *rehearsalProvider) Party() int { return r.party }

// Material implements beaver.Provider: zeros of the shapes q.PartWords
// gives, and the request recorded.
func (r *rehearsalProvider) Material(ctx context.Context, q beaver.Request) (beaver.Material, error) {
	if err := q.Validate(); err != nil {
		return beaver.Material{}, err
	}
	if err := ctx.Err(); err != nil {
		return beaver.Material{}, err
	}
	m := beaver.Material{Kind: q.Kind}
	for _, w := range q.PartWords(r.party) {
		var part []uint64
		if w > 0 {
			part = make([]uint64, w)
		}
		m.Parts = append(m.Parts, part)
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
	return m, nil
}

// WeightMask implements beaver.Provider: k·n zeros, not recorded (a weight
// mask is no dealer request).
func (r *rehearsalProvider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	words, err := share.BoundedProduct(beaver.MaxItemWords, k, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: rehearsal: weight mask w%d %d×%d: %w", id, k, n, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return make([]uint64, words), nil
}

// BindSession implements beaver.Provider: a rehearsal draws nothing to
// bind.
func (r *rehearsalProvider) BindSession(context.Context, beaver.SessionID) error { return nil }

// Session implements beaver.Provider: a rehearsal is always ready.
func (r *rehearsalProvider) Session() (beaver.SessionID, bool) { return beaver.SessionID{}, true }

// Position implements beaver.Provider: a rehearsal keeps no counters.
func (r *rehearsalProvider) Position(uint32) uint64 { return 0 }

// Seek implements beaver.Provider: a rehearsal keeps no counters.
func (r *rehearsalProvider) Seek(uint32, uint64) error { return nil }

// Stats implements beaver.Provider: a rehearsal has no dealer traffic.
func (r *rehearsalProvider) Stats() beaver.DealerStats { return beaver.DealerStats{} }

package protocol

import (
	"context"
	"fmt"
	"sync"

	"github.com/selectformer/selectformer/beaver"
)

// Ahead runs op on s with its dealer material drawn ahead: it first
// rehearses op (NewRehearsal) to learn the items op draws on s's stream,
// then runs op for real while those items are drawn as one sequence
// (beaver.DrawSequence) in the background, and serves op's requests from
// that sequence in order. With a networked dealer op then waits for one
// round trip to the dealer in all, not one per item; rounds and bytes
// between the parties are unchanged, and so is every item op draws (the
// same kinds at the same counters).
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
	rec := beaver.NewRehearsal(s.party)
	dry, err := NewRehearsal(s.party, s.StreamID(), rec, s.fp)
	if err != nil {
		return err
	}
	if err := op(ctx, dry); err != nil {
		return fmt.Errorf("protocol: rehearsal: %w", err)
	}
	var seq []beaver.Request
	for _, r := range rec.Requests() {
		if r.Stream == s.StreamID() {
			seq = append(seq, r)
		}
	}
	if len(seq) == 0 {
		return op(ctx, s)
	}
	base := s.prov.Provider
	q := &aheadProvider{Provider: base, stream: s.StreamID(), seq: seq, items: make(chan aheadItem, len(seq))}
	dctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := beaver.DrawSequence(dctx, base, seq, func(_ int, m beaver.Material) error {
			q.items <- aheadItem{m: m}
			return nil
		})
		if err != nil {
			q.items <- aheadItem{err: err}
		}
	}()
	s.prov.Provider = q
	err = op(ctx, s)
	s.prov.Provider = base
	cancel()
	wg.Wait()
	if err == nil && q.next != len(seq) {
		err = fmt.Errorf("protocol: drew %d of the %d dealer items its rehearsal drew", q.next, len(seq))
	}
	return err
}

// aheadProvider serves the requests of Ahead's op on its stream from the
// sequence drawn in the background.
type aheadProvider struct {
	beaver.Provider
	stream uint32
	seq    []beaver.Request
	items  chan aheadItem
	next   int // used only by op's goroutine
	failed error
}

type aheadItem struct {
	m   beaver.Material
	err error
}

// Material implements beaver.Provider.
func (q *aheadProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if r.Stream != q.stream {
		return q.Provider.Material(ctx, r)
	}
	if q.failed != nil {
		return beaver.Material{}, q.failed
	}
	if q.next >= len(q.seq) {
		return beaver.Material{}, fmt.Errorf("protocol: %v: more dealer items than the rehearsal drew (%d)", r, len(q.seq))
	}
	if want := q.seq[q.next]; r != want {
		return beaver.Material{}, fmt.Errorf("protocol: dealer item %d is %v where the rehearsal drew %v", q.next, r, want)
	}
	select {
	case it := <-q.items:
		if it.err != nil {
			q.failed = fmt.Errorf("protocol: dealer items drawn ahead: %w", it.err)
			return beaver.Material{}, q.failed
		}
		q.next++
		return it.m, nil
	case <-ctx.Done():
		return beaver.Material{}, fmt.Errorf("protocol: %v: %w", r, ctx.Err())
	}
}

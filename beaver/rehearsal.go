package beaver

import (
	"context"
	"sync"
)

// Rehearsal is the Provider of a rehearsal (protocol.NewRehearsal): it
// hands out zeros of the right shapes for every request, draws nothing from
// any dealer, and records the requests of stream kinds in order. A
// computation's requests depend only on public shapes, so the record is
// the sequence the real computation will draw: what a scheduler needs to
// fetch its material ahead (DrawSequence). It is safe for concurrent use,
// but a record is only meaningful for one computation at a time.
type Rehearsal struct {
	party int

	mu    sync.Mutex
	reqs  []Request
	bytes int64
}

var _ Provider = (*Rehearsal)(nil)

// NewRehearsal returns an empty rehearsal provider for party (0 or 1).
func NewRehearsal(party int) *Rehearsal { return &Rehearsal{party: party} }

// Requests returns the recorded requests of stream kinds, in order, with
// the streams they named and zero counters.
func (r *Rehearsal) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Bytes returns the size of the recorded requests' material for the party.
func (r *Rehearsal) Bytes() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Party implements Provider.
func (r *Rehearsal) Party() int { return r.party }

// Material implements Provider: zeros of the shapes r.PartWords gives.
func (r *Rehearsal) Material(ctx context.Context, q Request) (Material, error) {
	if err := q.Validate(); err != nil {
		return Material{}, err
	}
	if err := ctx.Err(); err != nil {
		return Material{}, err
	}
	m := Material{Kind: q.Kind}
	var n int64
	for _, w := range q.PartWords(r.party) {
		var part []uint64
		if w > 0 {
			part = make([]uint64, w)
		}
		m.Parts = append(m.Parts, part)
		n += 8 * int64(w)
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.bytes += n
	r.mu.Unlock()
	return m, nil
}

// WeightMask implements Provider: k·n zeros, not recorded (a weight mask is
// no dealer request).
func (r *Rehearsal) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if err := checkWeightMask(id, k, n); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return make([]uint64, k*n), nil
}

// BindSession implements Provider: a rehearsal draws nothing to bind.
func (r *Rehearsal) BindSession(context.Context, SessionID) error { return nil }

// Session implements Provider: a rehearsal is always ready.
func (r *Rehearsal) Session() (SessionID, bool) { return SessionID{}, true }

// Position implements Provider: a rehearsal keeps no counters.
func (r *Rehearsal) Position(uint32) uint64 { return 0 }

// Seek implements Provider: a rehearsal keeps no counters.
func (r *Rehearsal) Seek(uint32, uint64) error { return nil }

// Stats implements Provider: a rehearsal has no dealer traffic.
func (r *Rehearsal) Stats() DealerStats { return DealerStats{} }

package dealer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// corrector supplies a party with its dealer words of a request.
type corrector interface {
	// correct returns r.CorrectionWords(party) words and the dealer traffic
	// (request bytes sent, bytes received) it cost.
	correct(ctx context.Context, r beaver.Request) (corr []uint64, sent, recv int64, err error)
}

// seededProvider is a Provider for one party whose material is expanded from
// the party's session seed, which the dealer derives from its own seed and
// the session id; its dealer words come from the session's corrector.
type seededProvider struct {
	party int
	// bind presents a session id to the dealer and returns this party's
	// session seed and corrector.
	bind func(ctx context.Context, id beaver.SessionID) (share.Seed, corrector, error)
	// auto, if set, supplies the default session of a provider used
	// without BindSession (the in-process dealer's); nil: binding is
	// required.
	auto func() (beaver.SessionID, share.Seed, corrector)

	pos beaver.Counters // the stream positions (Position, Seek)

	bindMu sync.Mutex // serializes BindSession
	mu     sync.Mutex
	sess   *providerSession // nil until bound

	bytesRecv, bytesSent, items atomic.Int64
}

// providerSession is the session a provider is bound to.
type providerSession struct {
	id   beaver.SessionID
	keys *keyCache
	src  corrector // the party's dealer words
}

var _ beaver.Provider = (*seededProvider)(nil)

func newSeededProvider(party int, bind func(context.Context, beaver.SessionID) (share.Seed, corrector, error), auto func() (beaver.SessionID, share.Seed, corrector)) *seededProvider {
	return &seededProvider{party: party, bind: bind, auto: auto}
}

// Party implements beaver.Provider.
func (p *seededProvider) Party() int { return p.party }

// Describe implements beaver.Describer: a dealer makes the correlations
// (in process or over the network alike).
func (p *seededProvider) Describe() beaver.Description {
	return beaver.Description{Source: "dealer"}
}

// BindSession implements beaver.Provider.
func (p *seededProvider) BindSession(ctx context.Context, id beaver.SessionID) error {
	p.bindMu.Lock()
	defer p.bindMu.Unlock()
	if err := p.boundTo(id); err != nil || p.isBound() {
		return err
	}
	if id.IsZero() {
		return fmt.Errorf("beaver: bind session: the zero session id is reserved")
	}
	seed, src, err := p.bind(ctx, id)
	if err != nil {
		return fmt.Errorf("beaver: party %d: bind session %s…: %w", p.party, id.Short(), err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil { // material of the default session was drawn meanwhile
		return fmt.Errorf("beaver: party %d: bind session %s…: the provider already handed out material of session %s…", p.party, id.Short(), p.sess.id.Short())
	}
	p.sess = &providerSession{id: id, keys: newKeyCache(seed, p.party), src: src}
	return nil
}

// boundTo returns an error if p is bound to a session other than id.
func (p *seededProvider) boundTo(id beaver.SessionID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil && p.sess.id != id {
		return fmt.Errorf("beaver: party %d: bind session %s…: the provider already serves session %s…", p.party, id.Short(), p.sess.id.Short())
	}
	return nil
}

func (p *seededProvider) isBound() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess != nil
}

// Session implements beaver.Provider.
func (p *seededProvider) Session() (beaver.SessionID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil {
		return beaver.SessionID{}, false
	}
	return p.sess.id, true
}

// session returns the bound session, binding the default one if the
// provider has one.
func (p *seededProvider) session() (*providerSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil {
		return p.sess, nil
	}
	if p.auto == nil {
		return nil, fmt.Errorf("no session bound: call BindSession with the id both parties agreed on before drawing material")
	}
	id, seed, src := p.auto()
	p.sess = &providerSession{id: id, keys: newKeyCache(seed, p.party), src: src}
	return p.sess, nil
}

// Material implements beaver.Provider: it validates r, assigns it the stream's
// next counter and returns this party's material.
func (p *seededProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if err := r.Validate(); err != nil {
		return beaver.Material{}, err
	}
	if r.Counter != 0 {
		return beaver.Material{}, fmt.Errorf("beaver: %v: the provider assigns counters (Position, Seek); the request's must be zero", r)
	}
	if err := ctx.Err(); err != nil {
		return beaver.Material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	s, err := p.session()
	if err != nil {
		return beaver.Material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	if r.Counter, err = p.pos.Take(r.Stream, 1); err != nil {
		return beaver.Material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	local := expandLocal(s.keys, r)
	corr, err := p.correction(ctx, s, r)
	if err != nil {
		return beaver.Material{}, err
	}
	p.items.Add(1)
	return assemble(p.party, r, local, corr), nil
}

// correction fetches this party's dealer words of r (counter assigned)
// from the session's corrector and counts their traffic; it returns nil
// for a kind that gives the party none.
func (p *seededProvider) correction(ctx context.Context, s *providerSession, r beaver.Request) ([]uint64, error) {
	if !r.DealtTo(p.party) {
		return nil, nil
	}
	c, sent, recv, err := s.src.correct(ctx, r)
	p.bytesSent.Add(sent)
	p.bytesRecv.Add(recv)
	if err != nil {
		return nil, fmt.Errorf("beaver: %v: %w", r, err)
	}
	if want := r.CorrectionWords(p.party); len(c) != want {
		return nil, fmt.Errorf("beaver: %v: dealer sent %d words, want %d", r, len(c), want)
	}
	return c, nil
}

// Position implements beaver.Provider.
func (p *seededProvider) Position(stream uint32) uint64 { return p.pos.Position(stream) }

// Seek implements beaver.Provider: it moves stream's counter to pos, never
// backwards (that would hand out material already used).
func (p *seededProvider) Seek(stream uint32, pos uint64) error { return p.pos.Seek(stream, pos) }

// Stats implements beaver.Provider.
func (p *seededProvider) Stats() beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: p.bytesRecv.Load(), BytesSent: p.bytesSent.Load(), Items: p.items.Load()}
}

// seqCorrector is a corrector that pipelines a sequence of requests.
type seqCorrector interface {
	corrector
	// correctSeq returns the corrections of rs (one stream, counters
	// assigned, in counter order) to deliver in order, and the dealer
	// traffic the sequence cost.
	correctSeq(ctx context.Context, rs []beaver.Request, deliver func(i int, corr []uint64) error) (sent, recv int64, err error)
}

var _ beaver.Sequencer = (*seededProvider)(nil)

// MaterialSeq implements beaver.Sequencer. When its dealer is networked a
// party pipelines the dealer words of the sequence's items whose kind is
// dealt to it (one round trip for them all) and expands the others' in
// between, delivering every item in order.
func (p *seededProvider) MaterialSeq(ctx context.Context, rs []beaver.Request, deliver func(i int, m beaver.Material) error) error {
	if err := beaver.CheckSequence(rs); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("beaver: sequence: %w", err)
	}
	s, err := p.session()
	if err != nil {
		return fmt.Errorf("beaver: sequence: %w", err)
	}
	st := rs[0].Stream
	base, err := p.pos.Take(st, len(rs))
	if err != nil {
		return fmt.Errorf("beaver: sequence of %d items: %w", len(rs), err)
	}
	seq := make([]beaver.Request, len(rs))
	for i, r := range rs {
		r.Counter = base + uint64(i)
		seq[i] = r
	}
	item := func(i int, corr []uint64) error {
		r := seq[i]
		if want := r.CorrectionWords(p.party); len(corr) != want {
			return fmt.Errorf("beaver: %v: dealer sent %d words, want %d", r, len(corr), want)
		}
		p.items.Add(1)
		return deliver(i, assemble(p.party, r, expandLocal(s.keys, r), corr))
	}
	if sc, ok := s.src.(seqCorrector); ok {
		// next is the first item not delivered yet; local delivers the
		// items before upto, none of them dealt to this party.
		next := 0
		local := func(upto int) error {
			for ; next < upto; next++ {
				if err := item(next, nil); err != nil {
					return err
				}
			}
			return nil
		}
		dealt, at := dealtItems(seq, p.party)
		var err error
		if len(dealt) > 0 {
			var sent, recv int64
			sent, recv, err = sc.correctSeq(ctx, dealt, func(j int, corr []uint64) error {
				if err := local(at[j]); err != nil {
					return err
				}
				next++
				return item(at[j], corr)
			})
			p.bytesSent.Add(sent)
			p.bytesRecv.Add(recv)
		}
		if err == nil {
			err = local(len(seq))
		}
		if err != nil {
			return fmt.Errorf("beaver: sequence of %d items on stream %d: %w", len(seq), st, err)
		}
		return nil
	}
	for i, r := range seq {
		corr, err := p.correction(ctx, s, r)
		if err != nil {
			return err
		}
		if err := item(i, corr); err != nil {
			return err
		}
	}
	return nil
}

// dealtItems returns the requests of rs that give party dealer words, in
// order, and their indices in rs.
func dealtItems(rs []beaver.Request, party int) (dealt []beaver.Request, at []int) {
	for i, r := range rs {
		if r.DealtTo(party) {
			dealt = append(dealt, r)
			at = append(at, i)
		}
	}
	return dealt, at
}

// WeightMask implements beaver.Provider: party 0's mask of weight id, expanded from
// its session seed.
func (p *seededProvider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if err := beaver.CheckWeightMask(id, k, n); err != nil {
		return nil, err
	}
	if p.party != 0 {
		return nil, fmt.Errorf("beaver: weight mask %d asked by party %d: only the model owner (party 0) holds weight masks", id, p.party)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
	}
	s, err := p.session()
	if err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
	}
	return weightMask(s.keys.seed, id, k, n), nil
}

// weightMask expands the model owner's mask of weight id (k×n) from seed0.
func weightMask(seed0 share.Seed, id uint64, k, n int) []uint64 {
	return weightMaskInto(make([]uint64, k*n), seed0, id, k, n)
}

// weightMaskInto expands the mask of weight id (k×n) into dst (k·n words,
// whatever they held) and returns it.
func weightMaskInto(dst []uint64, seed0 share.Seed, id uint64, k, n int) []uint64 {
	b := blockFor(seed0, fmt.Sprintf("beaver/party=0/weightmask/id=%d/k=%d/n=%d", id, k, n))
	fillCTR(dst, b, 0)
	return dst
}

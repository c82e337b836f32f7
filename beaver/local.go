package beaver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/share"
)

// corrector supplies a party with its dealer words of a request.
type corrector interface {
	// correct returns r.CorrectionWords(party) words and the dealer traffic
	// (request bytes sent, bytes received) it cost.
	correct(ctx context.Context, r Request) (corr []uint64, sent, recv int64, err error)
}

// seededProvider is a Provider for one party whose material is expanded from
// the party's session seed, which the dealer derives from its own seed and
// the session id; its dealer words come from the session's corrector.
type seededProvider struct {
	party int
	// bind presents a session id to the dealer and returns this party's
	// session seed and corrector (nil where the party draws no dealer
	// words: a networked party 0 that did not ask for them).
	bind func(ctx context.Context, id SessionID) (share.Seed, corrector, error)
	// auto, if set, supplies the default session of a provider used
	// without BindSession (the in-process dealer's); nil: binding is
	// required.
	auto func() (SessionID, share.Seed, corrector)

	bindMu sync.Mutex // serializes BindSession
	mu     sync.Mutex
	sess   *providerSession // nil until bound
	pos    map[uint32]uint64

	bytesRecv, bytesSent, items atomic.Int64
}

// providerSession is the session a provider is bound to.
type providerSession struct {
	id   SessionID
	keys *keyCache
	src  corrector // nil: the party cannot draw dealer words
}

var _ Provider = (*seededProvider)(nil)

func newSeededProvider(party int, bind func(context.Context, SessionID) (share.Seed, corrector, error), auto func() (SessionID, share.Seed, corrector)) *seededProvider {
	return &seededProvider{party: party, bind: bind, auto: auto, pos: make(map[uint32]uint64)}
}

// Party implements Provider.
func (p *seededProvider) Party() int { return p.party }

// BindSession implements Provider.
func (p *seededProvider) BindSession(ctx context.Context, id SessionID) error {
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
		return fmt.Errorf("beaver: party %d: bind session %s…: %w", p.party, id.short(), err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil { // material of the default session was drawn meanwhile
		return fmt.Errorf("beaver: party %d: bind session %s…: the provider already handed out material of session %s…", p.party, id.short(), p.sess.id.short())
	}
	p.sess = &providerSession{id: id, keys: newKeyCache(seed, p.party), src: src}
	return nil
}

// boundTo returns an error if p is bound to a session other than id.
func (p *seededProvider) boundTo(id SessionID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil && p.sess.id != id {
		return fmt.Errorf("beaver: party %d: bind session %s…: the provider already serves session %s…", p.party, id.short(), p.sess.id.short())
	}
	return nil
}

func (p *seededProvider) isBound() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess != nil
}

// Session implements Provider.
func (p *seededProvider) Session() (SessionID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil {
		return SessionID{}, false
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

// Material implements Provider: it validates r, assigns it the stream's
// next counter and returns this party's material.
func (p *seededProvider) Material(ctx context.Context, r Request) (Material, error) {
	if err := r.Validate(); err != nil {
		return Material{}, err
	}
	if r.Counter != 0 {
		return Material{}, fmt.Errorf("beaver: %v: the provider assigns counters (Position, Seek); the request's must be zero", r)
	}
	if err := ctx.Err(); err != nil {
		return Material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	s, err := p.session()
	if err != nil {
		return Material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	p.mu.Lock()
	r.Counter = p.pos[r.Stream]
	if r.Counter == math.MaxUint64 {
		p.mu.Unlock()
		return Material{}, fmt.Errorf("beaver: %v: counter space of stream %d exhausted", r.Kind, r.Stream)
	}
	p.pos[r.Stream] = r.Counter + 1
	p.mu.Unlock()
	local := expandLocal(s.keys, r)
	corr, err := p.correction(ctx, s, r)
	if err != nil {
		return Material{}, err
	}
	p.items.Add(1)
	return assemble(p.party, r, local, corr), nil
}

// correction fetches this party's dealer words of r (counter assigned)
// from the session's corrector and counts their traffic; it returns nil
// for a kind that gives the party none.
func (p *seededProvider) correction(ctx context.Context, s *providerSession, r Request) ([]uint64, error) {
	if !r.dealtTo(p.party) {
		return nil, nil
	}
	if s.src == nil {
		return nil, fmt.Errorf("beaver: %v: kind %v gives the %s dealer words, and this provider has no dealer connection for them (a networked model owner connects with ConnectOptions.DealerWords)", r, r.Kind, roleName(p.party))
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

// Position implements Provider.
func (p *seededProvider) Position(stream uint32) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[stream]
}

// Seek implements Provider: it moves stream's counter to pos. Moving
// backwards would hand out material already used, so it is an error.
func (p *seededProvider) Seek(stream uint32, pos uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.pos[stream]; pos < cur {
		return fmt.Errorf("beaver: seek stream %d back from %d to %d would reuse correlated randomness", stream, cur, pos)
	}
	p.pos[stream] = pos
	return nil
}

// Stats implements Provider.
func (p *seededProvider) Stats() DealerStats {
	return DealerStats{BytesRecv: p.bytesRecv.Load(), BytesSent: p.bytesSent.Load(), Items: p.items.Load()}
}

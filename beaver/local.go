package beaver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/share"
)

// corrector supplies party 1 with the dealer's correction words of a request.
type corrector interface {
	// correct returns r.CorrectionWords() words and the dealer traffic
	// (request bytes sent, bytes received) it cost.
	correct(ctx context.Context, r Request) (corr []uint64, sent, recv int64, err error)
}

// seededProvider is a Provider for one party whose material is expanded from
// the party's session seed, which the dealer derives from its own seed and
// the session id; party 1's corrections come from the session's corrector.
type seededProvider struct {
	party int
	// bind presents a session id to the dealer and returns this party's
	// session seed and (party 1) corrector.
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
	src  corrector // nil for party 0
}

var (
	_ Provider      = (*seededProvider)(nil)
	_ SessionBinder = (*seededProvider)(nil)
)

func newSeededProvider(party int, bind func(context.Context, SessionID) (share.Seed, corrector, error), auto func() (SessionID, share.Seed, corrector)) *seededProvider {
	return &seededProvider{party: party, bind: bind, auto: auto, pos: make(map[uint32]uint64)}
}

// Party implements Provider.
func (p *seededProvider) Party() int { return p.party }

// BindSession implements SessionBinder.
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

// Session implements SessionBinder.
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

// next validates r, assigns it the stream's next counter and returns this
// party's material.
func (p *seededProvider) next(ctx context.Context, r Request) (material, error) {
	if err := r.Validate(); err != nil {
		return material{}, err
	}
	if err := ctx.Err(); err != nil {
		return material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	s, err := p.session()
	if err != nil {
		return material{}, fmt.Errorf("beaver: %v: %w", r.Kind, err)
	}
	p.mu.Lock()
	r.Counter = p.pos[r.Stream]
	if r.Counter == math.MaxUint64 {
		p.mu.Unlock()
		return material{}, fmt.Errorf("beaver: %v: counter space of stream %d exhausted", r.Kind, r.Stream)
	}
	p.pos[r.Stream] = r.Counter + 1
	p.mu.Unlock()
	local := expandLocal(s.keys, r)
	var corr []uint64
	if p.party == 1 {
		c, sent, recv, err := s.src.correct(ctx, r)
		p.bytesSent.Add(sent)
		p.bytesRecv.Add(recv)
		if err != nil {
			return material{}, fmt.Errorf("beaver: %v: %w", r, err)
		}
		if len(c) != r.CorrectionWords() {
			return material{}, fmt.Errorf("beaver: %v: dealer sent %d words, want %d", r, len(c), r.CorrectionWords())
		}
		corr = c
	}
	p.items.Add(1)
	return assemble(p.party, r, local, corr), nil
}

// Triples implements Provider.
func (p *seededProvider) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	m, err := p.next(ctx, Request{Kind: KindTriple, Stream: stream, N: n})
	if err != nil {
		return Triple{}, err
	}
	return m.triple(), nil
}

// SquarePairs implements Provider.
func (p *seededProvider) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	m, err := p.next(ctx, Request{Kind: KindSquare, Stream: stream, N: n})
	if err != nil {
		return SquarePair{}, err
	}
	return m.square(), nil
}

// MatTriples implements Provider.
func (p *seededProvider) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	mat, err := p.next(ctx, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n})
	if err != nil {
		return Triple{}, err
	}
	return mat.triple(), nil
}

// WeightMask implements Provider.
func (p *seededProvider) WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error) {
	if p.party != 0 {
		return nil, fmt.Errorf("beaver: weight mask %d asked by party %d: only the model owner (party 0) holds weight masks", weightID, p.party)
	}
	if _, err := prod(k, n); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d (%d×%d): %w", weightID, k, n, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", weightID, err)
	}
	s, err := p.session()
	if err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", weightID, err)
	}
	return weightMask(s.keys.seed, weightID, k, n), nil
}

// WeightTriple implements Provider.
func (p *seededProvider) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	mat, err := p.next(ctx, Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// WeightVectorTriple implements Provider.
func (p *seededProvider) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	mat, err := p.next(ctx, Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// ANDTriples implements Provider.
func (p *seededProvider) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := p.next(ctx, Request{Kind: KindAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// CrossANDTriples implements Provider.
func (p *seededProvider) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := p.next(ctx, Request{Kind: KindCrossAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// TruncPairs implements Provider.
func (p *seededProvider) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	m, err := p.next(ctx, Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits})
	if err != nil {
		return TruncPair{}, err
	}
	return m.truncPair(), nil
}

// BitPairs implements Provider.
func (p *seededProvider) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	m, err := p.next(ctx, Request{Kind: KindBitPair, Stream: stream, N: n})
	if err != nil {
		return BitPair{}, err
	}
	return m.bitPair(), nil
}

// Position implements Provider.
func (p *seededProvider) Position(stream uint32) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[stream]
}

// Seek moves stream's counter to pos. Moving backwards would hand out
// material already used, so it is an error.
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

// fetch asks any Provider for the material of r (r.Counter is ignored: the
// provider assigns the stream's next counter).
func fetch(ctx context.Context, p Provider, r Request) (material, error) {
	switch r.Kind {
	case KindTriple:
		t, err := p.Triples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindSquare:
		t, err := p.SquarePairs(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.A2}}, err
	case KindMatTriple:
		t, err := p.MatTriples(ctx, r.Stream, r.Batch, r.M, r.K, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindWeightTriple:
		t, err := p.WeightTriple(ctx, r.Stream, r.WeightID, r.M, r.K, r.N)
		return material{r.Kind, [][]uint64{t.A, t.C}}, err
	case KindWeightVectorTriple:
		t, err := p.WeightVectorTriple(ctx, r.Stream, r.WeightID, r.M, r.N)
		return material{r.Kind, [][]uint64{t.A, t.C}}, err
	case KindAND:
		t, err := p.ANDTriples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindCrossAND:
		t, err := p.CrossANDTriples(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.A, t.B, t.C}}, err
	case KindTrunc:
		t, err := p.TruncPairs(ctx, r.Stream, r.N, r.FracBits)
		return material{r.Kind, [][]uint64{t.R, t.MSB, t.LowShifted}}, err
	case KindBitPair:
		t, err := p.BitPairs(ctx, r.Stream, r.N)
		return material{r.Kind, [][]uint64{t.Packed, t.Arith, t.A, t.AR}}, err
	}
	return material{}, fmt.Errorf("beaver: fetch of unknown kind %v", r.Kind)
}

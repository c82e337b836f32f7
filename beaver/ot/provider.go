package ot

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// DefaultStreamBase is the first transport stream id of a Provider's OT
// traffic: the session's base OTs run on it, and the generator of beaver
// stream s on DefaultStreamBase+1+s. It lies far above the stream ids the
// protocols use for their own messages.
const DefaultStreamBase uint32 = 0x4f540000 // "OT\0\0"

// ProviderOptions configures NewProvider; the zero value is usable.
type ProviderOptions struct {
	// StreamBase is the transport stream of the base OTs; the generator of
	// beaver stream s runs on StreamBase+1+s. Zero means DefaultStreamBase.
	// Both parties must use the same base.
	StreamBase uint32
	// MaskSeed is the model owner's secret seed of its weight masks: the
	// mask of weight id w (k×n) is expanded from MaskSeed, the session id,
	// w, k and n, so it is fixed per weight id within a session, and a
	// model owner that restarts a session (resume) with the same MaskSeed
	// reveals W − B for the same B again. Zero means a fresh random seed.
	// Party 1 ignores it.
	MaskSeed share.Seed
	// Linear chooses how the weight-mask correlations (KindWeightTriple,
	// KindWeightVectorTriple) are made: LinearOT (the zero value) by vector
	// OLE on IKNP correlated OTs, LinearHE by RLWE encryption of the model
	// owner's masks (package beaver/he, see he.go). Every other kind runs on
	// OT in both modes. Both parties must choose the same mode: BindSession
	// fails on both sides with ErrModeMismatch otherwise.
	Linear Linear
	// HEParams are the parameters of LinearHE; nil means he.DefaultParams().
	// Both parties must use the same (BindSession compares their
	// fingerprints). Ignored with LinearOT.
	HEParams *he.Params
	// HECompact makes party 1 keep the encrypted weights with
	// he.LoadWeightsCompact: half the memory (he.Sizes.P1WeightsCompact),
	// their seeded halves regenerated for every item (about a fifth more
	// work). Only party 1's memory and time depend on it; the messages are
	// the same.
	HECompact bool
}

// Linear is a Provider's way of making the weight-mask correlations.
type Linear uint8

const (
	// LinearOT makes them by vector OLE on IKNP correlated OTs
	// (WeightTriples, WeightVectorTriples): Θ(m·k·n) bytes per item.
	LinearOT Linear = 0
	// LinearHE makes them with package beaver/he (Nimbus layout): the model
	// owner uploads each encrypted mask (and its projections) once per
	// session, and per item the data owner sends its outputs, about 68 bits
	// per output word plus its ciphertexts' second halves, with check
	// columns the model owner verifies before it uses its share.
	LinearHE Linear = 1
)

// String returns "ot" or "he" (the names of the -provider flags).
func (l Linear) String() string {
	switch l {
	case LinearOT:
		return "ot"
	case LinearHE:
		return "he"
	}
	return fmt.Sprintf("linear(%d)", uint8(l))
}

// Provider is a beaver.Provider with no dealer: the two parties make every
// correlation themselves with the OT generators of this package, over
// dedicated streams of their own connection. BindSession runs the session's
// base OTs (Setup, once); the first request on beaver stream s then opens the
// generator s on its own transport stream (StreamBase+1+s), so requests on
// distinct streams run concurrently without mixing their messages, and
// requests on one stream are serialized. Both parties must make the same
// requests in the same order per stream (as the protocols do: the two
// parties' calls on a stream pair up in order); a mismatch fails with an
// error on both sides (the message lengths differ) or, for requests of equal
// message shapes, yields unrelated material that the protocol's openings
// expose. Each stream keeps a counter (Position, Seek) so that a caller that
// resumes at a position works as with the dealer; the counter does not key
// the material, which is fresh at every call.
//
// Weight masks (WeightMask, party 0 only) are expanded from the model
// owner's MaskSeed and the session, the same for every request of an id and
// shape. With LinearOT, WeightTriple and WeightVectorTriple requests run the
// vector-OLE generator with that fixed mask; with LinearHE they run package
// beaver/he's protocol on the stream's generator (he.go): party 0 uploads
// each encrypted mask and projection once per session, party 1 keeps them
// in a cache all streams share, and per item sends its header words and one
// message of outputs, which party 0 checks before it returns its share.
//
// Stats reports the OT traffic (payload bytes of the base OTs and of every
// generator) in DealerStats' fields; OTStats gives the detail. To run the
// offline generation ahead of the online phase, bind the provider and draw
// the computation's rehearsed script (protocol.Rehearse) with a
// protocol.Prefetch per stream: both parties then generate each stream's
// items in script order.
type Provider struct {
	party    int
	open     func(id uint32) Conn
	base     uint32
	maskSeed share.Seed
	// mask expands party 0's weight masks (p.weightMask; a view test fixes
	// the mask).
	mask func(sid beaver.SessionID, id uint64, k, n int) []uint64
	// linear is the mode of the weight-mask kinds; he its state (LinearHE).
	linear Linear
	he     *heState

	bindMu sync.Mutex // serializes BindSession
	mu     sync.Mutex // guards sess, bindErr, pos, streams
	sess   *Session
	// bindErr is the failure of an earlier Setup: the base-OT stream is
	// then out of step, so the provider stays unusable.
	bindErr error
	pos     map[uint32]uint64
	streams map[uint32]*provStream

	setup                       Stats // the base OTs' traffic, set once at bind
	bytesRecv, bytesSent, items atomic.Int64
}

// provStream is one beaver stream: its generator, created at first use, and
// the lock that keeps its calls in order.
type provStream struct {
	mu  sync.Mutex
	gen atomic.Pointer[Gen]
}

var (
	_ beaver.Provider       = (*Provider)(nil)
	_ beaver.WeightReleaser = (*Provider)(nil)
)

// NewProvider returns party's dealer-free provider on conn, the parties' own
// connection (the OT traffic runs on its streams StreamBase, StreamBase+1,
// …). Bind it to the session both parties agreed (BindSession) before
// drawing material.
func NewProvider(conn *transport.Conn, party int, opts ProviderOptions) (*Provider, error) {
	if conn == nil {
		return nil, fmt.Errorf("ot: new provider: nil connection")
	}
	return newProvider(func(id uint32) Conn { return conn.Stream(id) }, party, opts)
}

// newProvider is NewProvider on any stream opener (tests record traffic).
func newProvider(open func(uint32) Conn, party int, opts ProviderOptions) (*Provider, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("ot: new provider: party %d, want 0 or 1", party)
	}
	p := &Provider{party: party, base: opts.StreamBase, maskSeed: opts.MaskSeed,
		pos: map[uint32]uint64{}, streams: map[uint32]*provStream{}}
	if p.base == 0 {
		p.base = DefaultStreamBase
	}
	if p.base == math.MaxUint32 {
		return nil, fmt.Errorf("ot: new provider: stream base %d leaves no generator stream", p.base)
	}
	if party == 0 && p.maskSeed == (share.Seed{}) {
		s, err := share.NewSeed()
		if err != nil {
			return nil, fmt.Errorf("ot: new provider: mask seed: %w", err)
		}
		p.maskSeed = s
	}
	p.mask = p.weightMask
	switch opts.Linear {
	case LinearOT:
	case LinearHE:
		params := he.DefaultParams()
		if opts.HEParams != nil {
			params = *opts.HEParams
		}
		h, err := newHEState(params)
		if err != nil {
			return nil, fmt.Errorf("ot: new provider: %w", err)
		}
		h.compact = opts.HECompact
		p.linear, p.he = LinearHE, h
	default:
		return nil, fmt.Errorf("ot: new provider: unknown linear mode %v", opts.Linear)
	}
	p.open = func(id uint32) Conn { return &countConn{Conn: open(id), p: p} }
	return p, nil
}

// countConn counts a provider's OT payload bytes.
type countConn struct {
	Conn
	p *Provider
}

func (c *countConn) Exchange(ctx context.Context, send, recv []uint64) error {
	err := c.Conn.Exchange(ctx, send, recv)
	if err == nil {
		c.p.bytesSent.Add(8 * int64(len(send)))
		c.p.bytesRecv.Add(8 * int64(len(recv)))
	}
	return err
}

func (c *countConn) SendWords(ctx context.Context, w []uint64) error {
	err := c.Conn.SendWords(ctx, w)
	if err == nil {
		c.p.bytesSent.Add(8 * int64(len(w)))
	}
	return err
}

func (c *countConn) RecvWords(ctx context.Context, dst []uint64) error {
	err := c.Conn.RecvWords(ctx, dst)
	if err == nil {
		c.p.bytesRecv.Add(8 * int64(len(dst)))
	}
	return err
}

// Party implements beaver.Provider.
func (p *Provider) Party() int { return p.party }

// BindSession implements beaver.Provider: it runs the session's base OTs
// with the peer (Setup on stream StreamBase: 3 rounds, 19,552 bytes per
// party), which fails with ErrSessionMismatch when the peer binds another
// id and with ErrModeMismatch when it runs another Linear mode or other HE
// parameters. With LinearHE party 0 then makes a fresh key pair, its public
// seed derived from id, and sends its public key (one more message on
// StreamBase, he.Sizes.PublicKey rounded up to words: 221,224 bytes with
// he.DefaultParams). Binding again to the same id is a no-op; another id is
// an error, and so is any bind after a failed Setup (the base-OT stream is
// out of step) or, with LinearHE, after a failed check of the peer's
// outputs (the key is discarded: the error wraps
// beaver.ErrCorrelationCheck).
func (p *Provider) BindSession(ctx context.Context, id beaver.SessionID) error {
	p.bindMu.Lock()
	defer p.bindMu.Unlock()
	p.mu.Lock()
	sess, bindErr := p.sess, p.bindErr
	p.mu.Unlock()
	var heErr error
	if p.he != nil {
		heErr = p.he.err()
	}
	switch {
	case heErr != nil:
		return fmt.Errorf("ot: party %d: bind session %s: the HE key was discarded after a failed check: %w", p.party, short(id), heErr)
	case bindErr != nil:
		return fmt.Errorf("ot: party %d: bind session %s: an earlier setup failed: %w", p.party, short(id), bindErr)
	case sess != nil && sess.ID() == id:
		return nil
	case sess != nil:
		return fmt.Errorf("ot: party %d: bind session %s: the provider already serves session %s", p.party, short(id), short(sess.ID()))
	case id.IsZero():
		return fmt.Errorf("ot: party %d: bind session: the zero session id is reserved", p.party)
	}
	c := p.open(p.base)
	before := p.bytesSent.Load()
	beforeR := p.bytesRecv.Load()
	cfg := setupConfig(LinearOT, nil)
	rounds := int64(3)
	if p.linear == LinearHE {
		fp := p.he.fingerprint()
		cfg = setupConfig(LinearHE, &fp)
		rounds++
	}
	s, err := setup(ctx, c, p.party, id, cfg)
	if err == nil && p.linear == LinearHE {
		err = p.he.keys(ctx, c, p.party, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.bindErr = err
		return fmt.Errorf("ot: party %d: bind session %s: %w", p.party, short(id), err)
	}
	p.sess = s
	p.setup = Stats{WordsSent: (p.bytesSent.Load() - before) / 8, WordsRecv: (p.bytesRecv.Load() - beforeR) / 8, Rounds: rounds}
	return nil
}

func short(id beaver.SessionID) string { return id.String()[:16] + "…" }

// Session implements beaver.Provider.
func (p *Provider) Session() (beaver.SessionID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess == nil {
		return beaver.SessionID{}, false
	}
	return p.sess.ID(), true
}

// Material implements beaver.Provider: it validates r, assigns it the
// stream's next counter and generates this party's part with the peer on
// the stream's generator.
func (p *Provider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if err := r.Validate(); err != nil {
		return beaver.Material{}, err
	}
	if r.Counter != 0 {
		return beaver.Material{}, fmt.Errorf("ot: %v: the provider assigns counters (Position, Seek); the request's must be zero", r)
	}
	if err := ctx.Err(); err != nil {
		return beaver.Material{}, fmt.Errorf("ot: %v: %w", r, err)
	}
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess == nil {
		return beaver.Material{}, fmt.Errorf("ot: %v: no session bound: call BindSession with the id both parties agreed on before drawing material", r)
	}
	st, err := p.stream(sess, r.Stream)
	if err != nil {
		return beaver.Material{}, fmt.Errorf("ot: %v: %w", r, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	p.mu.Lock()
	c := p.pos[r.Stream]
	if c == math.MaxUint64 {
		p.mu.Unlock()
		return beaver.Material{}, fmt.Errorf("ot: %v: counter space of stream %d exhausted", r.Kind, r.Stream)
	}
	p.pos[r.Stream] = c + 1
	p.mu.Unlock()
	r.Counter = c
	g := st.gen.Load()
	if g == nil {
		var err error
		if g, err = sess.NewGen(p.open(p.base+1+r.Stream), r.Stream); err != nil {
			return beaver.Material{}, fmt.Errorf("ot: %v: %w", r, err)
		}
		st.gen.Store(g)
	}
	m, err := p.generate(ctx, g, sess.ID(), r)
	if err != nil {
		return beaver.Material{}, fmt.Errorf("ot: party %d: %v: %w", p.party, r, err)
	}
	p.items.Add(1)
	return m, nil
}

// stream returns the state of beaver stream id.
func (p *Provider) stream(sess *Session, id uint32) (*provStream, error) {
	if id >= math.MaxUint32-p.base {
		return nil, fmt.Errorf("stream %d has no transport stream above base %#x", id, p.base)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.streams[id]
	if st == nil {
		st = &provStream{}
		p.streams[id] = st
	}
	return st, nil
}

// generate runs the registered Generator of r's kind (Register) and lays
// the result out as beaver.Material.
func (p *Provider) generate(ctx context.Context, g *Gen, sid beaver.SessionID, r beaver.Request) (beaver.Material, error) {
	if p.linear == LinearHE && (r.Kind == beaver.KindWeightTriple || r.Kind == beaver.KindWeightVectorTriple) {
		ps, err := p.heGenerate(ctx, g, sid, r)
		if err != nil {
			return beaver.Material{}, err
		}
		return beaver.Material{Kind: r.Kind, Parts: ps}, nil
	}
	gen, ok := generators[r.Kind]
	if !ok {
		return beaver.Material{}, fmt.Errorf("kind %v has no OT generator (ot.Register): the OT provider does not serve it", r.Kind)
	}
	it := Item{Request: r, Party: p.party, WeightMask: func(int, int) []uint64 { return nil }}
	if p.party == 0 {
		it.WeightMask = func(k, n int) []uint64 { return p.mask(sid, r.WeightID, k, n) }
	}
	ps, err := gen(ctx, g, it)
	if err != nil {
		return beaver.Material{}, err
	}
	return beaver.Material{Kind: r.Kind, Parts: ps}, nil
}

// WeightMask implements beaver.Provider: party 0's mask of weight id (k×n),
// expanded from its MaskSeed and the session, with no traffic.
func (p *Provider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if _, err := checkSize(fmt.Sprintf("weight mask %d", id), k, n); err != nil {
		return nil, err
	}
	if p.party != 0 {
		return nil, fmt.Errorf("ot: weight mask %d asked by party %d: only the model owner (party 0) holds weight masks", id, p.party)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ot: weight mask %d: %w", id, err)
	}
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("ot: weight mask %d: no session bound: call BindSession with the id both parties agreed on before drawing material", id)
	}
	return p.mask(sess.ID(), id, k, n), nil
}

// weightMask expands party 0's mask of weight id (k×n) for session sid.
func (p *Provider) weightMask(sid beaver.SessionID, id uint64, k, n int) []uint64 {
	dom := make([]byte, 0, 96)
	dom = append(dom, "selectformer/beaver/ot/weightmask/v1/"...)
	dom = append(dom, sid[:]...)
	dom = binary.LittleEndian.AppendUint64(dom, id)
	dom = binary.LittleEndian.AppendUint64(dom, uint64(k))
	dom = binary.LittleEndian.AppendUint64(dom, uint64(n))
	return share.NewPRG(p.maskSeed, string(dom)).Words(k * n)
}

// Position implements beaver.Provider.
func (p *Provider) Position(stream uint32) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[stream]
}

// Seek implements beaver.Provider: it moves stream's counter to pos
// (forward only, as for the dealer; the material never depends on it).
func (p *Provider) Seek(stream uint32, pos uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.pos[stream]; pos < cur {
		return fmt.Errorf("ot: seek stream %d back from %d to %d", stream, cur, pos)
	}
	p.pos[stream] = pos
	return nil
}

// Stats implements beaver.Provider with the OT traffic: the payload bytes
// this party sent and received on the base-OT and generator streams, and
// the items served.
func (p *Provider) Stats() beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: p.bytesRecv.Load(), BytesSent: p.bytesSent.Load(), Items: p.items.Load()}
}

// OTStats returns the OT work so far: the base OTs' words and rounds plus
// every generator's (see Stats). It waits for calls in flight.
func (p *Provider) OTStats() Stats {
	p.mu.Lock()
	total := p.setup
	gens := make([]*provStream, 0, len(p.streams))
	for _, st := range p.streams {
		gens = append(gens, st)
	}
	p.mu.Unlock()
	for _, st := range gens {
		g := st.gen.Load()
		if g == nil {
			continue
		}
		s := g.Stats()
		total.OTsSent += s.OTsSent
		total.OTsReceived += s.OTsReceived
		total.WordsSent += s.WordsSent
		total.WordsRecv += s.WordsRecv
		total.Rounds += s.Rounds
	}
	return total
}

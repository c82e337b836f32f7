package ot

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
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
	// WeightMasks makes the weight-mask correlations (KindWeightTriple,
	// KindWeightVectorTriple); nil means VectorOLE (vector OLE on
	// correlated OTs). A Lattice makes them by RLWE encryption of the
	// model owner's masks (package beaver/he, he.go). Every other kind runs
	// on OT whatever the generator. Both parties must use the same
	// generator with the same parameters: BindSession fails on both sides
	// with ErrModeMismatch otherwise. Give each provider its own.
	WeightMasks WeightMaskGenerator
	// SilentOT makes the session's OTs with Ferret silent OT
	// (ferret_pool.go): about 0.44 bits of extension a COT where party 0
	// holds Δ and 5.2 where party 1 does (ferretPoolConfigs), plus one bit
	// an OT of derandomisation, against SoftSpokenOT's 32 bits an OT, for
	// more CPU (the LPN encoding) and up to two 168 MB iteration buffers
	// a party (bench/TWOHOSTS.md steps 21 and 25). Both parties must agree:
	// the setup fails with ErrModeMismatch otherwise.
	SilentOT bool
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
// shape. WeightTriple and WeightVectorTriple requests run the provider's
// WeightMaskGenerator with that fixed mask: VectorOLE's generators, or
// Lattice's run of package beaver/he's protocol on the stream's generator
// (he.go: party 0 uploads each encrypted mask and projection once per
// session on the session stream, party 1 keeps them in a cache all streams
// share, and per item sends one message of outputs, which party 0 checks
// before it returns its share). Every other kind runs the Generator
// registered for it (Register); Provider.generate looks the kind up in a
// table of both, made at NewProvider.
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
	// masks makes the weight-mask kinds; gens is the Generator of every
	// kind the provider serves (the registered ones and masks.Generate).
	masks WeightMaskGenerator
	gens  map[beaver.Kind]Generator
	// silent: the session's OTs come from silent-OT pools
	// (ProviderOptions.SilentOT).
	silent bool

	pos beaver.Counters // the stream positions (Position, Seek)

	bindMu sync.Mutex // serializes BindSession
	mu     sync.Mutex // guards sess, bindErr, streams
	sess   *Session
	// bindErr is the failure of an earlier Setup: the base-OT stream is
	// then out of step, so the provider stays unusable.
	bindErr error
	// checkErr is the first correlation check that failed
	// (beaver.ErrCorrelationCheck): the provider binds no session after it.
	checkErr atomic.Pointer[error]
	streams  map[uint32]*provStream

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
	p := &Provider{party: party, base: opts.StreamBase, maskSeed: opts.MaskSeed, masks: opts.WeightMasks,
		silent: opts.SilentOT, streams: map[uint32]*provStream{}}
	if p.base == 0 {
		p.base = DefaultStreamBase
	}
	if p.base == math.MaxUint32 || p.base <= silentMaxStream {
		return nil, fmt.Errorf("ot: new provider: stream base %d leaves no generator stream (or no silent-OT streams base−1 … base−%d below it)", p.base, silentMaxStream)
	}
	if party == 0 && p.maskSeed == (share.Seed{}) {
		s, err := share.NewSeed()
		if err != nil {
			return nil, fmt.Errorf("ot: new provider: mask seed: %w", err)
		}
		p.maskSeed = s
	}
	p.mask = p.weightMask
	if p.masks == nil {
		p.masks = VectorOLE{}
	}
	p.gens = make(map[beaver.Kind]Generator, len(generators)+2)
	for k, g := range generators {
		p.gens[k] = g
	}
	for _, k := range beaver.Kinds() {
		if c, _ := beaver.Lookup(k); c.Mask != nil {
			p.gens[k] = p.masks.Generate
		}
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

// SendWords counts the message before it leaves (and takes it back if it
// fails): a Lattice's uploads are sent by a goroutine of their own, and
// the receiver's item may end before that goroutine returns from the send,
// so a count taken after an item includes everything its peer received.
func (c *countConn) SendWords(ctx context.Context, w []uint64) error {
	n := 8 * int64(len(w))
	c.p.bytesSent.Add(n)
	err := c.Conn.SendWords(ctx, w)
	if err != nil {
		c.p.bytesSent.Add(-n)
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
// id and with ErrModeMismatch when it runs another WeightMaskGenerator or
// other parameters of it or disagrees on SilentOT, then the generator's own setup
// on the same stream (a Lattice's: party 0 makes a fresh key pair, its
// public seed derived from id, and sends its public key, one more message:
// he.Sizes.PublicKey rounded up to words, 221,224 bytes with
// he.DefaultParams), then, with ProviderOptions.SilentOT, the silent OTs'
// bootstrap (ferret_pool.go: 3 rounds on stream StreamBase−1, one for each
// chain, 335,936 bytes from party 0, which receives the base COTs of party
// 1's two chains, and 170,016 from party 1; the Ferret iterations then run
// on StreamBase−1, StreamBase−2 and StreamBase−4 as the generators need
// COTs). Binding again to the same id is a no-op; another id is
// an error, and so is any bind after a failed Setup (the base-OT stream is
// out of step) or after a failed check of the peer's part in an item (the
// error wraps beaver.ErrCorrelationCheck).
func (p *Provider) BindSession(ctx context.Context, id beaver.SessionID) error {
	p.bindMu.Lock()
	defer p.bindMu.Unlock()
	p.mu.Lock()
	sess, bindErr := p.sess, p.bindErr
	p.mu.Unlock()
	switch {
	case p.checkErr.Load() != nil:
		return fmt.Errorf("ot: party %d: bind session %s: a correlation check failed: %w", p.party, short(id), *p.checkErr.Load())
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
	rounds := int64(3)
	s, err := setupExt(ctx, c, p.party, id, p.masks.Fingerprint(), spokenK, p.silent)
	if err == nil {
		var r int64
		r, err = p.masks.Setup(ctx, c, p.party, id)
		rounds += r
	}
	if err == nil && p.silent {
		err = s.startSilent(ctx, func(off uint32) Conn { return p.open(p.base - off) })
		rounds += int64(ferretPoolConfigs[0].chainCount() + ferretPoolConfigs[1].chainCount())
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
	sess, err := p.bound(ctx, r.String())
	if err != nil {
		return beaver.Material{}, err
	}
	st, err := p.stream(sess, r.Stream)
	if err != nil {
		return beaver.Material{}, fmt.Errorf("ot: %v: %w", r, err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if r.Counter, err = p.pos.Take(r.Stream, 1); err != nil {
		return beaver.Material{}, fmt.Errorf("ot: %v: %w", r.Kind, err)
	}
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

// generate runs the Generator of r's kind (gens: a registered one, or the
// WeightMaskGenerator's) and lays the result out as beaver.Material. A
// failed correlation check ends the provider's binds.
func (p *Provider) generate(ctx context.Context, g *Gen, sid beaver.SessionID, r beaver.Request) (beaver.Material, error) {
	gen, ok := p.gens[r.Kind]
	if !ok {
		return beaver.Material{}, fmt.Errorf("kind %v has no OT generator (ot.Register): the OT provider does not serve it", r.Kind)
	}
	ps, err := gen(ctx, g, p.item(sid, r))
	if err != nil {
		if errors.Is(err, beaver.ErrCorrelationCheck) {
			p.checkErr.CompareAndSwap(nil, &err)
		}
		return beaver.Material{}, err
	}
	return beaver.Material{Kind: r.Kind, Parts: ps}, nil
}

// item is what a generator makes for r in session sid.
func (p *Provider) item(sid beaver.SessionID, r beaver.Request) Item {
	it := Item{Request: r, Party: p.party, Session: sid, WeightMask: func(int, int) []uint64 { return nil }}
	if p.party == 0 {
		it.WeightMask = func(k, n int) []uint64 { return p.mask(sid, r.WeightID, k, n) }
	}
	return it
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
	sess, err := p.bound(ctx, fmt.Sprintf("weight mask %d", id))
	if err != nil {
		return nil, err
	}
	return p.mask(sess.ID(), id, k, n), nil
}

// bound returns the session the provider is bound to, for a call about
// what, or why the call cannot go on: its context ended, or no session is
// bound yet.
func (p *Provider) bound(ctx context.Context, what string) (*Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ot: %s: %w", what, err)
	}
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess == nil {
		return nil, fmt.Errorf("ot: %s: no session bound: call BindSession with the id both parties agreed on before drawing material", what)
	}
	return sess, nil
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
func (p *Provider) Position(stream uint32) uint64 { return p.pos.Position(stream) }

// Seek implements beaver.Provider: it moves stream's counter to pos
// (forward only, as for the dealer; the material never depends on it).
func (p *Provider) Seek(stream uint32, pos uint64) error { return p.pos.Seek(stream, pos) }

// WeightMasks returns the provider's WeightMaskGenerator (VectorOLE unless
// ProviderOptions.WeightMasks set another), e.g. to read a Lattice's
// Stats.
func (p *Provider) WeightMasks() WeightMaskGenerator { return p.masks }

// Describe implements beaver.Describer: the way of the WeightMaskGenerator
// ("ot" for VectorOLE, "he" for a Lattice) and, for a Lattice, the digest
// of its HE parameters and protocol (the rest of its Fingerprint), which
// BindSession's setup would also compare.
func (p *Provider) Describe() beaver.Description {
	fp := p.masks.Fingerprint()
	d := beaver.Description{Source: wayName(fp[0])}
	if rest := [31]byte(fp[1:]); rest != [31]byte{} {
		d.Params = hex.EncodeToString(rest[:])
	}
	return d
}

// ReleaseWeights implements beaver.WeightReleaser: the WeightMaskGenerator
// drops what it holds for the weight ids in [lo, hi) (a Lattice's party 1
// its encrypted weights; VectorOLE holds nothing).
func (p *Provider) ReleaseWeights(lo, hi uint64) { p.masks.Release(lo, hi) }

// Stats implements beaver.Provider with the OT traffic: the payload bytes
// this party sent and received on the base-OT and generator streams, and
// the items served.
func (p *Provider) Stats() beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: p.bytesRecv.Load(), BytesSent: p.bytesSent.Load(), Items: p.items.Load()}
}

// SilentStats returns the session's silent-OT counters so far (zero before
// BindSession).
func (p *Provider) SilentStats() SilentStats {
	p.mu.Lock()
	sess := p.sess
	p.mu.Unlock()
	if sess == nil || sess.silent == nil {
		return SilentStats{}
	}
	st, _ := sess.silent.snapshot()
	return st
}

// OTStats returns the OT work so far (the silent OTs' iterations
// included, their words as extension words): the base OTs' words and rounds plus
// every generator's (see Stats; a Lattice's uploads and requests on the
// session stream are in Stats only, and in its HEStats). It waits for
// calls in flight.
func (p *Provider) OTStats() Stats {
	p.mu.Lock()
	total := p.setup
	if p.sess != nil && p.sess.silent != nil {
		st, rounds := p.sess.silent.snapshot()
		total.WordsSent += st.WordsSent
		total.WordsRecv += st.WordsRecv
		total.ExtensionWords += st.WordsSent
		total.Rounds += rounds
	}
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
		total.ExtensionWords += s.ExtensionWords
		total.Rounds += s.Rounds
	}
	return total
}

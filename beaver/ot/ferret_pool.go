package ot

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Silent-OT pools: where a provider's generators take their correlated OTs
// once the session is bound (Session.startSilent). Each direction of the
// session (the party holding Δ as sender, the other as receiver) has one
// Ferret instance (ferret.go) on a transport stream of its own, and its
// COTs are numbered in one sequence over the session's life: iteration i's
// usable COTs (ferretConfig.usable, rounded down to a multiple of 128)
// follow iteration i−1's.
//
// The receiver names the COTs. A generator's call that needs n COTs as
// receiver takes the next n of its pool (running the next iteration with
// the peer when the current one is spent) and sends their first index j0
// with its derandomisation bits e = c ⊕ x, its chosen bits c against the
// pool's random ones x (or no bits, when random choices will do: the pool's
// are used). The sender takes the same range, refuses one that overlaps a
// range taken before or that reaches past the iterations the receiver has
// begun, and turns its rows into q ⊕ e·Δ. Both sides copy the rows out at
// once, so an iteration's buffer goes back as soon as all its COTs are
// taken; the receiver keeps one buffer. The sender keeps the iterations
// with COTs not yet taken (poolMaxUntaken bounds them): when the next
// iteration needs a buffer and none is spent, the oldest iteration's
// untaken blocks move to a compact copy and its buffer is reused, so the
// sender holds two buffers, not one an iteration, while a lagging call
// keeps a few ranges of an old one.
//
// Why there is no deadlock: a receiver's take waits only for its own
// iteration, whose peer side is the sender's serve goroutine, which waits
// for nothing but the receiver's messages; a sender's take waits only for
// an iteration the receiver has already begun, which the serve goroutine
// finishes on its own. No take waits for another generator's call.
//
// Security: the COTs are Ferret's (Δ the session's, the same as the
// generators' SoftSpokenOT), each used once: the receiver never names an
// index twice, and the sender refuses a second use of any block of 128, so
// an active receiver cannot get two corrections under one row (which would
// reveal the difference of two correlations) nor two derandomisations of
// one choice bit. e is x ⊕ c with x uniform and secret: uniform. The hash
// tweaks of pool COTs carry poolTweak, so they never meet the tweaks of a
// generator's SoftSpokenOT indices.

// poolTweak marks a pool COT's index in the hash tweak.
const poolTweak = uint64(1) << 63

// poolMaxUntaken bounds the COTs a sender keeps made but not yet taken: a
// receiver that begins another iteration beyond it is refused (it would
// hold the sender's memory, 16 bytes a COT, with ranges it never names).
// Four main iterations: an honest receiver's calls in flight take a few
// engine chunks of at most about 2 M COTs each.
const poolMaxUntaken = 4 * 10_485_760

// poolSpares is the spent iteration buffers a sender keeps for the next
// iterations (a fresh 168 MB buffer costs its zeroing and page faults: 5%
// of the data owner's CPU at sst2's defaults).
const poolSpares = 1

// poolCompactMax is the largest share of an iteration's COTs still untaken
// for which the sender copies them out to reuse its buffer (compact); an
// iteration with more untaken keeps its buffer, and the next iteration
// gets a fresh one. At sst2's defaults the oldest iteration has 0–20% of
// its COTs untaken when the next one is made.
const poolCompactMax = 2 // one half

// poolMaxCOTs bounds the COTs one take may ask for (the engine's chunks
// and the largest random-OT call stay far below).
const poolMaxCOTs = 1 << 26

// ErrSilentRange is wrapped by a sender's refusal of silent OTs the peer
// named as receiver (a range it named before, one not made, unaligned, or
// an iteration begun beyond what the sender keeps): a detected deviation,
// so it wraps beaver.ErrCorrelationCheck (the provider then binds no
// session after it).
var ErrSilentRange = fmt.Errorf("the peer named silent OTs it may not use: %w", beaver.ErrCorrelationCheck)

// poolAligned returns the usable COTs of iteration i of cfg, rounded down to
// a multiple of 128.
func poolAligned(cfg ferretConfig, i uint64) uint64 { return uint64(cfg.usable(i)) &^ 127 }

// poolConn is a ferretConn on a generator stream. The receive is of exactly
// maxWords words (every Ferret message has the exact size its parameters
// give, which the callers check again); began, when set, runs before the
// first receive of each iteration is returned.
type poolConn struct {
	c     Conn
	began func() error
	first bool     // the next receive is an iteration's first
	early []uint64 // an iteration's first message, received before the iteration ran (awaitBegin)
	stats *poolStats
}

type poolStats struct {
	mu                   sync.Mutex
	wordsSent, wordsRecv int64
	rounds               int64
	received, sent       int64 // COTs taken as receiver, as sender
	iterations           int64 // of both halves
}

func (s *poolStats) took(n int, sender bool) {
	s.mu.Lock()
	if sender {
		s.sent += int64(n)
	} else {
		s.received += int64(n)
	}
	s.mu.Unlock()
}

func (s *poolStats) iterated() {
	s.mu.Lock()
	s.iterations++
	s.mu.Unlock()
}

// SilentStats counts a session's silent OTs (ferret_pool.go) on one
// party's side: the COTs its generators took as receiver and as sender,
// the Ferret iterations of both directions it ran, and the words it sent
// and received in them (the generators' own words, the ranges and e, are
// in their Stats).
type SilentStats struct {
	Received, Sent       int64
	Iterations           int64
	WordsSent, WordsRecv int64
}

// SilentSteadyBytes returns what a COT costs party in the steady state of
// its session's silent-OT directions (ferretPoolConfigs: each iteration
// bootstrapping itself): the bytes party sends as the receiver of a COT
// in the direction in which the peer holds Δ, and as the sender of one in
// the direction in which it holds Δ. The main set's receiver and sender
// send 2,112 and 552,992 bytes an iteration of 10,016,992 COTs; the small
// set about twelve times as much a COT.
func SilentSteadyBytes(party int) (receiver, sender float64) {
	r, s := ferretPoolConfigs[1-party&1].main, ferretPoolConfigs[party&1].main
	return 8 * float64(spcotRoundWords(r)+ferretCheckUpWords) / float64(r.outputs()),
		8 * float64(spcotReplyWords(s)+ferretCheckDownWords) / float64(s.outputs())
}

func (s *poolStats) add(sent, recv int) {
	s.mu.Lock()
	s.wordsSent += int64(sent)
	s.wordsRecv += int64(recv)
	s.rounds++
	s.mu.Unlock()
}

func (p *poolConn) send(ctx context.Context, msg []uint64) error {
	if err := p.c.SendWords(ctx, msg); err != nil {
		return err
	}
	p.stats.add(len(msg), 0)
	return nil
}

func (p *poolConn) recv(ctx context.Context, maxWords int) ([]uint64, error) {
	if msg := p.early; msg != nil {
		p.early = nil
		if len(msg) != maxWords {
			return nil, fmt.Errorf("internal: silent OT: an iteration's first message of %d words, want %d", len(msg), maxWords)
		}
		return msg, nil
	}
	msg := make([]uint64, maxWords)
	if err := p.c.RecvWords(ctx, msg); err != nil {
		return nil, err
	}
	p.stats.add(0, maxWords)
	if p.first && p.began != nil {
		p.first = false
		if err := p.began(); err != nil {
			return nil, err
		}
	}
	return msg, nil
}

// awaitBegin receives the next iteration's first message (maxWords words)
// ahead of the iteration, which then reads it as its first receive: the
// sender picks the iteration's buffer once the receiver has begun it.
func (p *poolConn) awaitBegin(ctx context.Context, maxWords int) error {
	p.first = true
	msg, err := p.recv(ctx, maxWords)
	if err != nil {
		return err
	}
	p.early = msg
	return nil
}

// poolIter is one iteration's usable COTs on the sender's side.
type poolIter struct {
	lo, hi uint64   // the COTs' indices, [lo, hi)
	q      []Block  // their rows, or (compacted) the untaken blocks' rows
	buf    []Block  // the whole buffer q lies in (the instance's output); nil once compacted
	at     []int32  // compacted: block b's rows are q[128·at[b]:], −1 when taken
	taken  []uint64 // one bit per block of 128 COTs
	left   int      // blocks not yet taken
}

// block returns the rows of the iteration's block b (not taken).
func (it *poolIter) block(b uint64) []Block {
	if it.at != nil {
		b = uint64(it.at[b])
	}
	return it.q[128*b : 128*b+128]
}

// compact copies the untaken blocks' rows out of the iteration's buffer,
// which it returns for reuse.
func (it *poolIter) compact() []Block {
	nb := int((it.hi - it.lo) / 128)
	at := make([]int32, nb)
	rows := make([]Block, 0, 128*it.left)
	for b := range nb {
		if it.taken[b/64]>>(b%64)&1 != 0 {
			at[b] = -1
			continue
		}
		at[b] = int32(len(rows) / 128)
		rows = append(rows, it.q[128*b:128*b+128]...)
	}
	buf := it.buf
	it.q, it.at, it.buf = rows, at, nil
	return buf
}

// poolSender is the half of a direction in which this party holds Δ.
type poolSender struct {
	inst  *ferretSender
	conn  *poolConn
	delta Block

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) whenever made or err changes
	iters   []*poolIter   // iterations with COTs not yet taken, oldest first
	began   uint64        // iterations the receiver has begun
	started uint64        // end index of the COTs of begun iterations
	made    uint64        // end index of the COTs of finished iterations
	spares  [][]Block     // spent iterations' buffers, for the next ones (at most poolSpares)
	err     error
}

func newPoolSender(inst *ferretSender, c Conn, st *poolStats) *poolSender {
	p := &poolSender{inst: inst, delta: inst.delta, changed: make(chan struct{})}
	p.conn = &poolConn{c: c, began: p.begin, stats: st}
	return p
}

// begin records that the receiver began the next iteration (its first
// message arrived), refusing it while poolMaxLive iterations keep COTs.
func (p *poolSender) begin() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	untaken := 0
	for _, it := range p.iters {
		untaken += 128 * it.left
	}
	if untaken+p.inst.cfg.at(p.began).n > poolMaxUntaken {
		return fmt.Errorf("the peer began a silent-OT iteration while %d COTs it has not named are kept: %w", untaken, ErrSilentRange)
	}
	p.started += poolAligned(p.inst.cfg, p.began)
	p.began++
	return nil
}

// serve runs the direction's iterations as the receiver begins them, until
// the stream fails (the connection closes) or an iteration does.
func (p *poolSender) serve(ctx context.Context) {
	for {
		// The buffer is picked once the receiver has begun the iteration,
		// when it has named every COT of the iterations before: the oldest
		// then keeps only the ranges of lagging calls, if any.
		i := p.inst.iter
		err := p.conn.awaitBegin(ctx, spcotRoundWords(p.inst.cur))
		var q []Block
		if err == nil {
			p.pickBuffer()
			q, err = p.inst.extend(ctx, p.conn)
		}
		p.mu.Lock()
		if err != nil {
			p.err = fmt.Errorf("silent OT iteration %d as sender: %w", i, err)
			close(p.changed)
			p.mu.Unlock()
			return
		}
		p.conn.stats.iterated()
		n := poolAligned(p.inst.cfg, i)
		it := &poolIter{lo: p.made, hi: p.made + n, q: q[:n], buf: p.inst.out, left: int(n / 128)}
		it.taken = make([]uint64, share.PackedWords(it.left))
		p.made += n
		if n > 0 {
			p.iters = append(p.iters, it)
		}
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
}

// pickBuffer gives the instance the buffer of its next iteration: a spent
// one, or the oldest iteration's with at most 1/poolCompactMax of its COTs
// untaken, which keeps them in a compact copy; none (a fresh one) when
// neither is there.
func (p *poolSender) pickBuffer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inst.out = nil
	if k := len(p.spares); k > 0 {
		p.inst.out, p.spares = p.spares[k-1], p.spares[:k-1]
		return
	}
	for _, old := range p.iters {
		if old.buf != nil && poolCompactMax*128*old.left <= len(old.q) {
			p.inst.out = old.compact()
			return
		}
	}
}

// take copies the rows of COTs [j0, j0+n) into q, each xored with Δ where
// e (packed, n bits; nil for none) has a 1, after checking that the range
// lies in begun iterations and overlaps no range taken before. It waits
// (bounded by the serve goroutine's work) for the iteration to finish.
func (p *poolSender) take(ctx context.Context, j0 uint64, n int, e []uint64, q []Block) error {
	if n <= 0 || n%128 != 0 || n > poolMaxCOTs || j0%128 != 0 || j0 > 1<<62 {
		return fmt.Errorf("%d COTs from %d: %w", n, j0, ErrSilentRange)
	}
	end := j0 + uint64(n)
	p.mu.Lock()
	for {
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return err
		}
		if end > p.started {
			p.mu.Unlock()
			return fmt.Errorf("COTs %d…%d, past the %d of the iterations the peer began: %w", j0, end-1, p.started, ErrSilentRange)
		}
		if end <= p.made {
			break
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	// Check every block first, then take: a refused range takes nothing.
	for pass := range 2 {
		for j := j0; j < end; j += 128 {
			it := p.iterOf(j)
			if it == nil {
				return fmt.Errorf("COTs %d…%d: %d was taken before: %w", j0, end-1, j, ErrSilentRange)
			}
			b := (j - it.lo) / 128
			if it.taken[b/64]>>(b%64)&1 != 0 {
				return fmt.Errorf("COTs %d…%d: %d was taken before: %w", j0, end-1, j, ErrSilentRange)
			}
			if pass == 1 {
				it.taken[b/64] |= 1 << (b % 64)
				it.left--
				copy(q[j-j0:j-j0+128], it.block(b))
			}
		}
	}
	if e != nil {
		for k := range q[:n] {
			m := -(e[k/64] >> (k % 64) & 1)
			q[k] = Block{q[k].Lo ^ p.delta.Lo&m, q[k].Hi ^ p.delta.Hi&m}
		}
	}
	live := p.iters[:0]
	for _, it := range p.iters {
		if it.left > 0 {
			live = append(live, it)
		} else if it.buf != nil && len(p.spares) < poolSpares {
			p.spares = append(p.spares, it.buf)
		}
	}
	clear(p.iters[len(live):])
	p.iters = live
	return nil
}

// iterOf returns the live iteration holding index j, nil when none does
// (every COT of it was taken).
func (p *poolSender) iterOf(j uint64) *poolIter {
	for _, it := range p.iters {
		if j >= it.lo && j < it.hi {
			return it
		}
	}
	return nil
}

// poolReceiver is the half of a direction in which this party chooses and
// names the COTs.
type poolReceiver struct {
	inst *ferretReceiver
	conn *poolConn

	mu   sync.Mutex
	lo   uint64   // index of the current iteration's first COT
	next uint64   // the next COT to hand out
	t    []Block  // the current iteration's rows (the instance's buffer)
	x    []uint64 // and random choices, packed
	err  error
}

func newPoolReceiver(inst *ferretReceiver, c Conn, st *poolStats) *poolReceiver {
	return &poolReceiver{inst: inst, conn: &poolConn{c: c, stats: st}}
}

// take hands out the next n COTs (n a positive multiple of 128): their rows
// into t and random choices into x (n bits, packed), and returns the first
// one's index. It runs the next iteration with the peer when the current
// one is spent.
func (p *poolReceiver) take(ctx context.Context, n int, t []Block, x []uint64) (uint64, error) {
	if n <= 0 || n%128 != 0 || n > poolMaxCOTs {
		return 0, fmt.Errorf("internal: silent OT take of %d COTs", n)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return 0, p.err
	}
	j0 := p.next
	for k := 0; k < n; {
		hi := p.lo + uint64(len(p.t))
		if p.next == hi {
			i := p.inst.iter
			x, t, err := p.inst.extend(ctx, p.conn)
			if err != nil {
				p.err = fmt.Errorf("silent OT iteration %d as receiver: %w", i, err)
				return 0, p.err
			}
			m := int(poolAligned(p.inst.cfg, i))
			p.lo, p.t, p.x = hi, t[:m], x
			p.conn.stats.iterated()
			continue
		}
		c := min(n-k, int(hi-p.next))
		off := int(p.next - p.lo)
		copy(t[k:k+c], p.t[off:off+c])
		copy(x[k/64:(k+c)/64], p.x[off/64:(off+c)/64])
		p.next += uint64(c)
		k += c
	}
	return j0, nil
}

// silentPools is this party's two halves of the session's silent OTs,
// each one or more independent chains of iterations (ferretConfig.chains):
// send the chains of the direction in which this party holds Δ, recv the
// peer's. A range's first index carries its chain in the bits from
// poolChainShift, so the ranges of different chains (under the same Δ)
// never share a hash tweak.
type silentPools struct {
	send  []*poolSender
	recv  []*poolReceiver
	next  atomic.Uint64 // the receiver's takes go to its chains in turn
	stats poolStats
}

// poolChainShift is the bit of a range's first index from which its chain
// is written: a chain's own indices stay below 2^58.
const poolChainShift = 58

// take takes n COTs as receiver from the next chain in turn and returns
// the first one's index with the chain in it.
func (s *silentPools) take(ctx context.Context, n int, t []Block, x []uint64) (uint64, error) {
	c := (s.next.Add(1) - 1) % uint64(len(s.recv))
	j, err := s.recv[c].take(ctx, n, t, x)
	if err != nil {
		return 0, err
	}
	if j+uint64(n) > 1<<poolChainShift {
		return 0, fmt.Errorf("internal: silent OT chain %d past 2^%d COTs", c, poolChainShift)
	}
	return j | c<<poolChainShift, nil
}

// senderWords returns the words a receiver's take message has for n COTs:
// the first index and, for chosen bits, n/64 words of e.
func poolMsgWords(n int, chosen bool) int {
	if n == 0 {
		return 0
	}
	if chosen {
		return 1 + n/64
	}
	return 1
}

// recvChosen takes n COTs as receiver for the chosen bits choices (n/64
// words) and appends the message (j0, e) to dst; t gets the rows (scratch
// memory: putBlocks), the returned index is the hash tweak of the first.
func (s *silentPools) recvChosen(ctx context.Context, dst, choices []uint64, n int) (msg []uint64, t []Block, j0 uint64, err error) {
	if n == 0 {
		return dst, nil, poolTweak, nil
	}
	t = getBlocks(n)
	x := getWords(n / 64)
	defer putWords(x)
	j, err := s.take(ctx, n, t, x)
	if err != nil {
		putBlocks(t)
		return nil, nil, 0, err
	}
	s.stats.took(n, false)
	msg = append(dst, j)
	for i := range n / 64 {
		msg = append(msg, choices[i]^x[i])
	}
	return msg, t, j | poolTweak, nil
}

// recvRandom takes n COTs as receiver with the pool's random choices
// (returned packed, n/64 words) and appends the message (j0) to dst.
func (s *silentPools) recvRandom(ctx context.Context, dst []uint64, n int) (msg, choices []uint64, t []Block, j0 uint64, err error) {
	if n == 0 {
		return dst, nil, nil, poolTweak, nil
	}
	t = getBlocks(n)
	choices = make([]uint64, n/64)
	j, err := s.take(ctx, n, t, choices)
	if err != nil {
		putBlocks(t)
		return nil, nil, nil, 0, err
	}
	s.stats.took(n, false)
	return append(dst, j), choices, t, j | poolTweak, nil
}

// sendTake takes the n COTs the peer's message msg names (poolMsgWords(n,
// chosen) words) as sender and returns their rows, derandomised by the
// message's e when chosen (scratch memory: putBlocks), and the hash tweak
// of the first.
func (s *silentPools) sendTake(ctx context.Context, msg []uint64, n int, chosen bool) ([]Block, uint64, error) {
	if n == 0 {
		return nil, poolTweak, nil
	}
	if len(msg) != poolMsgWords(n, chosen) {
		return nil, 0, fmt.Errorf("silent OT message of %d words for %d COTs, want %d", len(msg), n, poolMsgWords(n, chosen))
	}
	var e []uint64
	if chosen {
		e = msg[1:]
	}
	c := msg[0] >> poolChainShift
	if c >= uint64(len(s.send)) {
		return nil, 0, fmt.Errorf("COTs from %d: chain %d of %d: %w", msg[0]&(1<<poolChainShift-1), c, len(s.send), ErrSilentRange)
	}
	q := getBlocks(n)
	if err := s.send[c].take(ctx, msg[0]&(1<<poolChainShift-1), n, e, q); err != nil {
		putBlocks(q)
		return nil, 0, err
	}
	s.stats.took(n, true)
	return q, msg[0] | poolTweak, nil
}

// snapshot returns the pools' counters so far.
func (s *silentPools) snapshot() (SilentStats, int64) {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	st := &s.stats
	return SilentStats{Received: st.received, Sent: st.sent, Iterations: st.iterations, WordsSent: st.wordsSent, WordsRecv: st.wordsRecv}, st.rounds
}

// Reserved generator ids of a session's silent OTs, above every beaver
// stream's (the provider refuses stream ids ≥ MaxUint32 − its base): the
// bootstrap's SoftSpokenOT generator, and the hash domains of the Ferret
// instances, silentGenBase + d − 2c for chain c of the direction in which
// party d holds Δ.
const (
	silentBootGen uint32 = math.MaxUint32
	silentGenBase uint32 = math.MaxUint32 - 2
)

// silentStream returns the offset below the provider's stream base of the
// transport stream of chain c of the direction in which party d holds Δ:
// 1 and 2 for the first chains, 3 + 2(c − 1) + d for the others.
func silentStream(d, c int) uint32 {
	if c == 0 {
		return uint32(1 + d)
	}
	return uint32(3 + 2*(c-1) + d)
}

// silentMaxStream is the largest silentStream of ferretMaxChains chains.
const silentMaxStream = 3 + 2*(ferretMaxChains-2) + 1

// silentBootWords returns the words each party sends in startSilentConfig's
// bootstrap when the peer's direction runs cfg: its SoftSpokenOT messages
// as receiver of the peer's base COTs, one for each chain (21,252 words,
// 170,016 bytes, for the first of either of ferretPoolConfigs, which
// carries the extension's trees; 20,740 for a second).
func silentBootWords(cfg ferretConfig) int {
	sp, n := mustSpoken(spokenK), (cfg.baseCOTs()+127)&^127
	return sp.callWords(n, true) + (cfg.chainCount()-1)*sp.callWords(n, false)
}

// startSilent starts the session's silent-OT pools with ferretPoolConfigs:
// see startSilentConfig.
func (s *Session) startSilent(ctx context.Context, open func(off uint32) Conn) error {
	return s.startSilentConfig(ctx, open, ferretPoolConfigs)
}

// startSilentConfig starts the session's silent-OT pools: the direction in
// which party d holds Δ runs cfgs[d], its chain c on the transport stream
// open(silentStream(d, c)). It draws each chain's base COTs
// (cfgs[d].baseCOTs(), 41,158 for ferretPoolConfigs) with a SoftSpokenOT
// generator on stream 1 (one call and round for each chain, direction 0's
// first, silentBootWords each way), makes the Ferret instances, and starts
// this party's sender halves serving on their streams in goroutines, each
// ending when its stream fails (the connection closes) or an iteration
// does. Generators made after it draw their OTs from the pools. Both
// parties call it once, after Setup, before making generators.
func (s *Session) startSilentConfig(ctx context.Context, open func(off uint32) Conn, cfgs [2]ferretConfig) error {
	if s.silent != nil {
		return fmt.Errorf("ot: silent OT: already started")
	}
	for d, cfg := range cfgs {
		if err := cfg.check(); err != nil {
			return fmt.Errorf("ot: silent OT: party %d's direction: %w", d, err)
		}
	}
	g, err := s.NewGen(open(silentStream(0, 0)), silentBootGen)
	if err != nil {
		return fmt.Errorf("ot: silent OT: %w", err)
	}
	var base [2][]DeltaOT
	for d, cfg := range cfgs {
		for c := range cfg.chainCount() {
			b, err := g.DeltaOTs(ctx, cfg.baseCOTs(), d)
			if err != nil {
				return fmt.Errorf("ot: silent OT: base COTs of party %d's direction, chain %d: %w", d, c, err)
			}
			base[d] = append(base[d], b)
		}
	}
	keys := func(d, c int) ferretKeys {
		tag := []byte{byte(d)}
		if c > 0 {
			tag = append(tag, 'k', byte(c))
		}
		h := sha256.Sum256(append(s.ferretKey[:], tag...))
		k := sha256.Sum256(append(append(s.ferretKey[:], tag...), 'c'))
		return ferretKeys{prg: newFixedAES([16]byte(h[:16])), hash: newFixedAES([16]byte(h[16:])),
			gen: silentGenBase + uint32(d) - 2*uint32(c), code: share.Seed(k[:share.SeedSize])}
	}
	sp := &silentPools{}
	me, peer := s.party, 1-s.party
	for c := range cfgs[me].chainCount() {
		secret, err := share.NewSeed()
		if err != nil {
			return fmt.Errorf("ot: silent OT: %w", err)
		}
		snd, err := newFerretSender(cfgs[me], keys(me, c), base[me][c], secret)
		if err != nil {
			return fmt.Errorf("ot: silent OT: %w", err)
		}
		sp.send = append(sp.send, newPoolSender(snd, open(silentStream(me, c)), &sp.stats))
	}
	for c := range cfgs[peer].chainCount() {
		secret, err := share.NewSeed()
		if err != nil {
			return fmt.Errorf("ot: silent OT: %w", err)
		}
		rcv, err := newFerretReceiver(cfgs[peer], keys(peer, c), base[peer][c], secret)
		if err != nil {
			return fmt.Errorf("ot: silent OT: %w", err)
		}
		sp.recv = append(sp.recv, newPoolReceiver(rcv, open(silentStream(peer, c)), &sp.stats))
	}
	s.silent = sp
	for _, snd := range sp.send {
		go snd.serve(context.WithoutCancel(ctx))
	}
	return nil
}

package ot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Conn is the two-party message channel the generators run on: one ordered
// stream of word messages. *transport.Stream implements it. Every call must
// return when ctx ends; a receive must fail unless the peer's message has
// exactly len(dst) (or len(recv)) words.
type Conn interface {
	// Exchange sends send and receives the peer's message into recv,
	// concurrently (one round).
	Exchange(ctx context.Context, send, recv []uint64) error
	// SendWords sends one message.
	SendWords(ctx context.Context, w []uint64) error
	// RecvWords receives one message of exactly len(dst) words.
	RecvWords(ctx context.Context, dst []uint64) error
}

// Session holds the base OTs of one two-party session, in both directions:
// as extension sender, this party's secret Δ and the 128 seeds k_i^{Δ_i} it
// chose; as extension receiver, both seeds of each of the peer's 128 base
// OTs. Generators (one per stream, see NewGen) grow their SoftSpokenOT
// trees from it (softspoken.go). A Session is safe for concurrent use.
type Session struct {
	party     int
	sid       beaver.SessionID
	pi        *fixedAES // the correlation-robust hash's π
	prg       *fixedAES // the extension's PRG π (softspoken.go)
	ext       *spoken
	delta     Block
	sendSeeds [baseCount][seedLen]byte
	recvSeeds [baseCount][2][seedLen]byte

	// silent is the session's silent-OT pools (nil unless started, see
	// startSilent: a provider's sessions), which every generator made after
	// draws its OTs from; ferretKey keys their public material.
	silent    *silentPools
	ferretKey [32]byte

	mu   sync.Mutex
	gens map[uint32]bool
}

// Party returns 0 (model owner) or 1 (data owner).
func (s *Session) Party() int { return s.party }

// ID returns the session id the session was set up for.
func (s *Session) ID() beaver.SessionID { return s.sid }

// ErrSessionMismatch is returned by Setup when the peer presents another
// session id.
var ErrSessionMismatch = errors.New("ot: the peer set up another session id")

// ErrModeMismatch is returned by the provider's setup when the peer runs
// another WeightMaskGenerator (ProviderOptions.WeightMasks) or other
// parameters of it (a Lattice's HE parameters), or another OT extension
// (IKNP, before SoftSpokenOT; SoftSpokenOT with another k, or without the
// consistency check).
var ErrModeMismatch = errors.New("ot: the peer runs another provider mode")

const (
	setupNonceLen = 32
	// setupConfigLen is the size of the provider configuration block of the
	// first setup message (setupConfig): the WeightMaskGenerator's way
	// (byte 0), the OT extension (byte 1: spoken.id), and 30 bytes of a
	// SHA-256 digest of both, which covers the generator's parameters (for
	// a Lattice the fingerprint of its HE parameters and protocol).
	setupConfigLen = 32
	msgAWords      = (len(beaver.SessionID{}) + setupConfigLen + setupNonceLen + baseMsgALen) / 8
	msgBWords      = baseMsgBLen / 8
	msgEWords      = baseMsgELen / 8
)

// Setup runs the base OTs of a session with the peer over c: each party is
// the base-OT sender for the direction in which it will be the OT-extension
// receiver, and the base-OT receiver (with its random Δ as the choice bits)
// for the other. Three exchanges (rounds) of 4,160, 4,096 and 11,264 bytes
// per party. sid is the session id both parties agreed (selection draws it
// from a joint coin toss; the zero id is refused, as by a networked dealer);
// the first message carries it, so parties that disagree fail with
// ErrSessionMismatch instead of producing garbage; it also carries the
// provider's WeightMaskGenerator (VectorOLE's for Setup; see
// ProviderOptions.WeightMasks) and the OT extension (SoftSpokenOT, k = 4,
// with the consistency check),
// so parties that run different generators or extensions fail with
// ErrModeMismatch. The hash and PRG keys mix the id with a fresh nonce of
// each party, so even a repeated id never repeats a key. The base-OT
// secrets (Δ, seeds) are fresh on every Setup.
func Setup(ctx context.Context, c Conn, party int, sid beaver.SessionID) (*Session, error) {
	return setup(ctx, c, party, sid, VectorOLE{}.Fingerprint())
}

// setup is Setup for the weight-mask generator of fingerprint fp, with the
// extension SoftSpokenOT at k = spokenK.
func setup(ctx context.Context, c Conn, party int, sid beaver.SessionID, fp [32]byte) (*Session, error) {
	return setupK(ctx, c, party, sid, fp, spokenK)
}

// setupConfig is the configuration block of the first setup message, which
// the peer must present identically: fp's way, the extension's id, and a
// digest of fp and the extension.
func setupConfig(fp [32]byte, ext *spoken) (cfg [setupConfigLen]byte) {
	return setupConfigID(fp, ext.id())
}

// setupConfigID is setupConfig for the extension's configuration byte id.
func setupConfigID(fp [32]byte, id byte) (cfg [setupConfigLen]byte) {
	h := sha256.New()
	h.Write([]byte("selectformer/beaver/ot/setup-config"))
	h.Write(fp[:])
	h.Write([]byte{id})
	cfg[0], cfg[1] = fp[0], id
	copy(cfg[2:], h.Sum(nil))
	return cfg
}

// setupK is setup with SoftSpokenOT's k.
func setupK(ctx context.Context, c Conn, party int, sid beaver.SessionID, fp [32]byte, k int) (*Session, error) {
	return setupExt(ctx, c, party, sid, fp, k, false)
}

// setupExt is setupK, announcing in the configuration whether the session
// will start silent-OT pools (silent: a provider's; startSilent), so that
// a peer that would not fails with ErrModeMismatch.
func setupExt(ctx context.Context, c Conn, party int, sid beaver.SessionID, fp [32]byte, k int, silent bool) (*Session, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("ot: setup: party %d, want 0 or 1", party)
	}
	if sid.IsZero() {
		return nil, fmt.Errorf("ot: setup: the zero session id is reserved")
	}
	ext, err := newSpoken(k)
	if err != nil {
		return nil, err
	}
	id := ext.id()
	if silent {
		id |= silentFlag
	}
	cfg := setupConfigID(fp, id)
	s := &Session{party: party, sid: sid, ext: ext, gens: make(map[uint32]bool)}
	var db [16]byte
	if _, err := rand.Read(db[:]); err != nil {
		return nil, fmt.Errorf("ot: setup: random Δ: %w", err)
	}
	s.delta = Block{binary.LittleEndian.Uint64(db[:8]), binary.LittleEndian.Uint64(db[8:])}

	// Round 1: nonce ‖ A (as base sender).
	bs, msgA, err := newBaseSender()
	if err != nil {
		return nil, fmt.Errorf("ot: setup: %w", err)
	}
	var nonce [setupNonceLen]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("ot: setup: nonce: %w", err)
	}
	peer1 := make([]uint64, msgAWords)
	first := append(append(append(sid[:len(sid):len(sid)], cfg[:]...), nonce[:]...), msgA...)
	if err := c.Exchange(ctx, bytesToWords(first), peer1); err != nil {
		return nil, fmt.Errorf("ot: setup: round 1 (base OT points A): %w", err)
	}
	p1 := wordsToBytes(peer1)
	if beaver.SessionID(p1[:len(sid)]) != sid {
		return nil, fmt.Errorf("ot: setup: session %s: %w", sid, ErrSessionMismatch)
	}
	p1 = p1[len(sid):]
	if peerCfg := [setupConfigLen]byte(p1[:setupConfigLen]); peerCfg != cfg {
		switch {
		case peerCfg[0] != cfg[0]:
			return nil, fmt.Errorf("ot: setup: the peer runs linear mode %v, this party %v: %w", wayName(peerCfg[0]), wayName(cfg[0]), ErrModeMismatch)
		case peerCfg[1] != cfg[1]:
			return nil, fmt.Errorf("ot: setup: the peer runs OT extension %s, this party %s: %w", extensionName(peerCfg[1]), extensionName(cfg[1]), ErrModeMismatch)
		}
		return nil, fmt.Errorf("ot: setup: linear mode %v with other HE parameters than this party's (configuration %x…, this party %x…): %w", wayName(cfg[0]), peerCfg[2:10], cfg[2:10], ErrModeMismatch)
	}
	p1 = p1[setupConfigLen:]
	peerNonce, peerA := p1[:setupNonceLen], p1[setupNonceLen:]

	// Round 2: B (as base receiver of the peer's OTs, choosing Δ).
	br, msgB, err := newBaseReceiver(peerA, s.delta)
	if err != nil {
		return nil, fmt.Errorf("ot: setup: %w", err)
	}
	peer2 := make([]uint64, msgBWords)
	if err := c.Exchange(ctx, bytesToWords(msgB), peer2); err != nil {
		return nil, fmt.Errorf("ot: setup: round 2 (base OT points B): %w", err)
	}

	// Round 3: E (as base sender).
	msgE, err := bs.respond(wordsToBytes(peer2))
	if err != nil {
		return nil, fmt.Errorf("ot: setup: %w", err)
	}
	peer3 := make([]uint64, msgEWords)
	if err := c.Exchange(ctx, bytesToWords(msgE), peer3); err != nil {
		return nil, fmt.Errorf("ot: setup: round 3 (sealed seeds): %w", err)
	}
	if s.sendSeeds, err = br.finish(wordsToBytes(peer3)); err != nil {
		return nil, fmt.Errorf("ot: setup: %w", err)
	}
	s.recvSeeds = bs.seeds

	h := sha256.New()
	h.Write([]byte("selectformer/beaver/ot/v1/hash-key"))
	h.Write(sid[:])
	if party == 0 {
		h.Write(nonce[:])
		h.Write(peerNonce)
	} else {
		h.Write(peerNonce)
		h.Write(nonce[:])
	}
	key := h.Sum(nil)
	s.pi = newFixedAES([16]byte(key[:16]))
	s.prg = newFixedAES([16]byte(key[16:]))
	s.ferretKey = sha256.Sum256(append([]byte("selectformer/beaver/ot/v1/ferret-key"), key...))
	return s, nil
}

// bytesToWords packs b (a multiple of 8 bytes) little-endian into words.
func bytesToWords(b []byte) []uint64 {
	w := make([]uint64, len(b)/8)
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

// wordsToBytes is the inverse of bytesToWords.
func wordsToBytes(w []uint64) []byte {
	b := make([]byte, 0, 8*len(w))
	for _, x := range w {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

// Gen makes correlated randomness with the peer on one stream. Both parties
// create the generator with the same id and make the same calls in the same
// order; each call returns this party's part of fresh correlations. Calls on
// one Gen are serialized. After a failed call (a peer error, a cancelled
// context) the two parties' generators are out of step, so every later call
// fails too; start a new generator (a new id) instead.
type Gen struct {
	party int
	id    uint32
	c     Conn
	h     *hasher
	prg   *share.PRG
	// draw returns this party's secret random words (g.prg.Words; a view
	// test replaces it to fix a party's secrets).
	draw func(n int) []uint64
	snd  extSender
	rcv  extReceiver
	// pool is the session's silent OTs, nil for SoftSpokenOT (extension.go).
	pool *silentPools

	mu    sync.Mutex
	err   error
	stats Stats
}

// Stats counts a generator's work: OTs in each role (those its calls asked
// for, without the consistency check's extra ones) and the words this
// party sent and received (payload only; the transport adds framing).
// ExtensionWords are the part of WordsSent that is OT extension: the
// SoftSpokenOT matrix (and, in a generator's first call, its trees) with
// the consistency check that this party sent as receiver. The rest of
// what a generator sends (corrections) does not depend on how the OTs are
// made; bench/TWOHOSTS.md step 18 splits the bytes by it.
type Stats struct {
	OTsSent, OTsReceived int64 // OTs as sender, as receiver
	WordsSent, WordsRecv int64
	ExtensionWords       int64
	Rounds               int64
}

// ErrGenUsed is returned by NewGen for an id already used in the session:
// two generators with one id would reuse OT indices under the same Δ.
var ErrGenUsed = errors.New("ot: generator id already used in this session")

// ErrGenBroken is returned by every call on a generator after a failed one:
// the two parties' generators are out of step (the error also wraps the
// earlier failure).
var ErrGenBroken = errors.New("generator unusable after an earlier failure")

// NewGen returns the generator with id on c (for example a dedicated
// transport stream). Each id may be used once per session.
func (s *Session) NewGen(c Conn, id uint32) (*Gen, error) {
	s.mu.Lock()
	if s.gens[id] {
		s.mu.Unlock()
		return nil, fmt.Errorf("ot: generator %d: %w", id, ErrGenUsed)
	}
	s.gens[id] = true
	s.mu.Unlock()
	seed, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("ot: generator %d: %w", id, err)
	}
	g := &Gen{party: s.party, id: id, c: c, h: newHasher(s.pi, id), prg: share.NewPRG(seed, "beaver/ot/local")}
	g.draw = g.prg.Words
	g.snd = extSender{delta: s.delta, shape: s.ext, pi: s.prg, gen: id, seeds: &s.sendSeeds}
	g.rcv = extReceiver{shape: s.ext, pi: s.prg, gen: id, seeds: &s.recvSeeds, secret: g.prg.Words}
	g.pool = s.silent
	return g, nil
}

// Party returns 0 or 1.
func (g *Gen) Party() int { return g.party }

// Stats returns the generator's counters so far.
func (g *Gen) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}

// begin locks the generator and refuses to run after an earlier failure.
func (g *Gen) begin(ctx context.Context, what string) error {
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return fmt.Errorf("ot: %s: generator %d: %w: %w", what, g.id, ErrGenBroken, g.err)
	}
	if err := ctx.Err(); err != nil {
		g.mu.Unlock()
		return fmt.Errorf("ot: %s: %w", what, err)
	}
	return nil
}

// end records err (if any) as fatal and unlocks.
func (g *Gen) end(what string, err error) error {
	if err != nil {
		err = fmt.Errorf("ot: %s: %w", what, err)
		g.err = err
	}
	g.mu.Unlock()
	return err
}

// exchange sends send and receives recvLen words: an Exchange when both are
// non-empty, a lone send or receive when one is, nothing when both are
// empty. Both parties call it with mirrored lengths. The words received
// are scratch memory: the caller may hand them back (share.PutWords) once
// done with them; send may be handed back when it returns.
func (g *Gen) exchange(ctx context.Context, send []uint64, recvLen int) ([]uint64, error) {
	recv := getWords(recvLen) // every word received before it is read
	var err error
	switch {
	case len(send) > 0 && recvLen > 0:
		err = g.c.Exchange(ctx, send, recv)
	case len(send) > 0:
		err = g.c.SendWords(ctx, send)
	case recvLen > 0:
		err = g.c.RecvWords(ctx, recv)
	default:
		return recv, nil
	}
	if err != nil {
		return nil, err
	}
	g.stats.WordsSent += int64(len(send))
	g.stats.WordsRecv += int64(recvLen)
	g.stats.Rounds++
	return recv, nil
}

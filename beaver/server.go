package beaver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Networked dealer. A Server holds the seeds of the dealer and serves each
// party over its own transport.Conn (TLS-authenticated when made with
// transport.Dial/Listen); the caller says which role the connection is bound
// to (the listener it came in on, which pins that role's key):
//
//   - On the control stream (id 0) the party sends a 6-byte hello ("SFDL",
//     version 3, party; party 0 adds 2 to its byte to draw dealer words of
//     its own, ConnectOptions.DealerWords). A hello claiming another role than the
//     connection's, or a connection whose key is not the role's pinned key
//     (ServerOptions.Fingerprints), is refused: the party receives an error
//     status (one byte 1 followed by an error text naming both roles), the
//     refusal is logged, and the connection ends without a byte of
//     material. Otherwise it receives the status byte 0.
//   - When the party knows the session id (see SessionID) it sends a
//     44-byte session message ("SFSN", id, the session budget it announces
//     as a little-endian uint64: ConnectOptions.Budget, 0 for none). The
//     dealer waits until the other role has presented an id too, refuses
//     both if the ids differ, and otherwise replies with the status byte 0
//     and the party's 32-byte session seed (never the dealer's own seed).
//     The session's budget is the smaller of the two announcements (the
//     dealer's ServerOptions.SessionBudget where neither announces one, and
//     at most that). Party 0 is then done (it expands all its material of
//     the built-in kinds locally) unless it asked for dealer words in its
//     hello: then it is served like party 1.
//   - Party 1 announces each of its provider streams on the control stream
//     with an 8-byte open message (provider stream, transport stream ≥ 1,
//     little-endian uint32s) and then, on that transport stream, sends one
//     40-byte request per item (see Request.AppendBinary) and receives a
//     status message (one byte 0, or 1 followed by an error text) and, on
//     success, the item's dealer words (Request.CorrectionWords).
//
// The server checks every request (sizes, no counter reused on a stream of
// the session, one shape per weight id, the request's stream matches the
// transport stream's) and answers a bad request with an error status
// rather than dying. It bounds what a party can make it do: each request's
// parts and multiply-adds (MaxRequestWords, MaxRequestMACs, checked before
// anything is allocated), the session's total work (its budget, counted in
// Request.DealerWork units), the streams of a connection and of a session
// (MaxStreams), the items in progress per role and key
// (MaxConcurrentRequests), the connections per role and key
// (MaxConnsPerKey, the hello and session waits included) and the live
// sessions (MaxSessions, SessionRetention). With a StateFile, the
// high-water marks of every session's streams survive a restart, so a
// restarted dealer refuses counters it served before.

const (
	helloMagic     = "SFDL"
	helloVersion   = 4
	sessionMagic   = "SFSN"
	controlID      = 0
	statusOK       = 0
	statusError    = 1
	maxStatusText  = 4096
	sessionMsgSize = len(sessionMagic) + len(SessionID{}) + 8
)

// The largest message each side accepts on the dealer connection, checked by
// the receive on the size the sender announces, before anything is
// allocated (transport.Stream.RecvBytes).
const (
	// helloMsgSize is a party's hello: magic, version, party.
	helloMsgSize = len(helloMagic) + 2
	// openMsgSize is a data stream's opening: provider stream, transport
	// stream.
	openMsgSize = 8
	// maxStatusMsg is a status reply without payload: OK, or a refusal and
	// its text.
	maxStatusMsg = 1 + maxStatusText
	// maxSeedReplyMsg is the reply to a session id: OK and the session
	// seed, or a refusal and its text.
	maxSeedReplyMsg = 1 + max(share.SeedSize, maxStatusText)
)

// The receive limits of a connection the dealer serves (Server.ConnOptions).
// A party sends the dealer only small messages: its hello (6 bytes), its
// session message (44), stream openings (8) and requests (40), each frame
// charged 128 bytes more against its stream's window.
const (
	// DealerStreamWindow is the receive window of every stream of a
	// dealer's connection: 64 KiB holds 390 requests, more than a batch
	// of a selection draws in one pipelined sequence (so a batch still
	// costs one round trip to the dealer), where the transport's default
	// (16 MiB) let a party park 16 MiB on every stream it never announced.
	DealerStreamWindow = 64 << 10
	// dealerMaxFrame bounds a frame the dealer accepts (what it reads of a
	// frame header before the window is checked).
	dealerMaxFrame = 4 << 10
)

// The defaults of ServerOptions' limits.
const (
	// DefaultHandshakeTimeout bounds the wait for a party's hello.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxRequestWords bounds the words of any part of one request:
	// 2^25 words (256 MiB), above the largest part of selection's default
	// batch of 64 at sequence length 128 (a 64·128 × 3072 FFN product,
	// 2^24.6 words).
	DefaultMaxRequestWords = 1 << 25
	// DefaultMaxRequestMACs bounds the multiply-adds of one matrix request:
	// 2^36 (tens of seconds of one core), above that same FFN product
	// (8192·768·3072 ≈ 2^34.6).
	DefaultMaxRequestMACs = 1 << 36
	// DefaultMaxStreams bounds the streams of a connection and of a
	// session: selection uses 1 + Params.Workers (at most 65).
	DefaultMaxStreams = 256
	// DefaultMaxConcurrentRequests bounds the items a party (a role and
	// key, over all its connections) has in progress (computed or being
	// sent) at once.
	DefaultMaxConcurrentRequests = 8
	// DefaultMaxConnsPerKey bounds the connections of one role and key
	// at once: enough for a party's reconnection while its old connection
	// is being torn down.
	DefaultMaxConnsPerKey = 4
	// DefaultSessionBudget is a session's budget of dealer work
	// (Request.DealerWork units) when neither party announces one: 2^50,
	// about 10^15 words and multiply-adds, generous enough for the largest
	// benchmarked selection (qqp-bert). Parties that know their
	// computation announce its work instead (ConnectOptions.Budget).
	DefaultSessionBudget = 1 << 50
	// DefaultMaxSessions bounds the sessions a dealer keeps.
	DefaultMaxSessions = 1024
	// DefaultSessionRetention is how long a dealer keeps a session that
	// nobody joins (a resume after that is refused).
	DefaultSessionRetention = 30 * 24 * time.Hour
)

// ServerOptions configure a Server. The zero value selects the defaults; a
// negative limit is an error.
type ServerOptions struct {
	// HandshakeTimeout bounds the wait for a party's hello (default
	// DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// SessionTimeout bounds the wait for a party's session id and for the
	// other party to present the same id (default DefaultSessionTimeout).
	SessionTimeout time.Duration
	// IdleTimeout, if positive, ends a party's connection after that long
	// without any request; by default only the Serve context ends it.
	IdleTimeout time.Duration
	// Fingerprints, where not empty, are the pinned key fingerprints of
	// the model owner (0) and the data owner (1): Serve refuses a
	// connection for a role whose peer key is not that role's.
	Fingerprints [2]string
	// StateFile, if set, is where the dealer keeps each session's keys and
	// high-water marks (mode 0600, replaced atomically; see the beaver
	// package's state file format). It is read at start, so a restarted
	// dealer refuses every counter it served before. Keep it beside the
	// seeds: it belongs to them.
	StateFile string
	// Logger receives refusals and session events (default slog.Default()).
	Logger *slog.Logger

	// MaxRequestWords bounds the words of every part of one request
	// (Request.MaxPartWords; default DefaultMaxRequestWords, at most
	// MaxItemWords) and MaxRequestMACs its multiply-adds (Request.MACs;
	// default DefaultMaxRequestMACs): a larger request is refused before
	// anything is allocated for it.
	MaxRequestWords int
	MaxRequestMACs  uint64
	// MaxStreams bounds the streams party 1 may open on one connection
	// (more ends the connection) and use in one session (a request on one
	// more is refused); default DefaultMaxStreams.
	MaxStreams int
	// MaxConcurrentRequests bounds the items in progress at once (being
	// computed or sent) over all the connections of one role and key
	// (default DefaultMaxConcurrentRequests): with MaxRequestWords it
	// bounds the memory a party makes the dealer hold, about
	// 6 × MaxRequestWords words per item (12 GiB at the defaults, for
	// items of the largest size).
	MaxConcurrentRequests int
	// MaxConnsPerKey bounds the connections served at once per role and
	// key, waiting for a hello or a session included (default
	// DefaultMaxConnsPerKey); one more is refused, told why. A party
	// sharded over K worker pairs with a dealer per pair holds 1 at each
	// (its worker's) and 2 at the one its coordinator shares (pair 0's):
	// the default leaves room for reconnections of replaced pods. With
	// one dealer serving every pair it holds K+1 there (its coordinator
	// and K workers, each with its own connection): set at least K+1,
	// more to leave room for a replaced worker's reconnection.
	MaxConnsPerKey int
	// SessionBudget is the budget of dealer work (Request.DealerWork
	// units) of a session whose parties announce none, and the most they
	// may announce (default DefaultSessionBudget). A request beyond what
	// is left of its session's budget is refused.
	SessionBudget uint64
	// MaxSessions bounds the sessions the dealer keeps (default
	// DefaultMaxSessions, at most 65536): a new session beyond it retires
	// the least recently joined session that no connection serves.
	MaxSessions int
	// SessionRetention retires a session nobody joined for that long
	// (default DefaultSessionRetention). A retired session's record is
	// dropped from the state file but its id is refused for good.
	SessionRetention time.Duration
}

// Server is the networked dealer. It is safe for concurrent use: Serve may
// run for both parties (and for a reconnecting party) at once.
type Server struct {
	core *dealerCore
	opt  ServerOptions
	log  *slog.Logger

	connMu sync.Mutex
	conns  map[connKey]*keyConns // the connections served per role and key
}

// keyConns is what the connections of one role and key share.
type keyConns struct {
	n int // connections being served
	// sem bounds the items in progress over all of them.
	sem chan struct{}
}

// connKey identifies a party at the dealer: its role and key fingerprint.
type connKey struct {
	role int
	key  string
}

// NewServer returns a dealer with fresh random seeds.
func NewServer(opt ServerOptions) (*Server, error) {
	s0, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new server: %w", err)
	}
	s1, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new server: %w", err)
	}
	return NewServerWithSeeds(s0, s1, opt)
}

// NewServerWithSeeds returns a dealer with the given seeds: for a session id
// it serves exactly the material of NewDealerWithSeeds(seed0, seed1) for
// that id. With opt.StateFile it loads (or creates) the state file; a
// malformed one, or one written for other seeds, is an error wrapping
// ErrBadStateFile.
func NewServerWithSeeds(seed0, seed1 share.Seed, opt ServerOptions) (*Server, error) {
	if opt.MaxRequestWords < 0 || opt.MaxRequestWords > MaxItemWords || opt.MaxStreams < 0 || opt.MaxStreams > maxStreamsPerSession ||
		opt.MaxConcurrentRequests < 0 || opt.MaxConnsPerKey < 0 || opt.MaxSessions < 0 || opt.MaxSessions > maxStateSessions || opt.SessionRetention < 0 {
		return nil, fmt.Errorf("beaver: new server: a limit out of range (MaxRequestWords ≤ %d, MaxStreams ≤ %d, MaxSessions ≤ %d, none negative)",
			MaxItemWords, maxStreamsPerSession, maxStateSessions)
	}
	if opt.HandshakeTimeout <= 0 {
		opt.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if opt.SessionTimeout <= 0 {
		opt.SessionTimeout = DefaultSessionTimeout
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&opt.MaxRequestWords, DefaultMaxRequestWords)
	def(&opt.MaxStreams, DefaultMaxStreams)
	def(&opt.MaxConcurrentRequests, DefaultMaxConcurrentRequests)
	def(&opt.MaxConnsPerKey, DefaultMaxConnsPerKey)
	def(&opt.MaxSessions, DefaultMaxSessions)
	if opt.MaxRequestMACs == 0 {
		opt.MaxRequestMACs = DefaultMaxRequestMACs
	}
	if opt.SessionBudget == 0 {
		opt.SessionBudget = DefaultSessionBudget
	}
	if opt.SessionRetention == 0 {
		opt.SessionRetention = DefaultSessionRetention
	}
	s := &Server{core: newDealerCore(seed0, seed1), opt: opt, log: opt.Logger, conns: map[connKey]*keyConns{}}
	s.core.lim = coreLimits{
		maxWords:    opt.MaxRequestWords,
		maxMACs:     opt.MaxRequestMACs,
		maxStreams:  opt.MaxStreams,
		budget:      opt.SessionBudget,
		maxSessions: opt.MaxSessions,
		retention:   opt.SessionRetention,
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opt.StateFile != "" {
		if err := s.core.persistTo(opt.StateFile); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ConnOptions returns base with the receive limits of a connection this
// dealer serves, for the transport.Listen of its listeners (base keeps
// its link profile and log): a window of DealerStreamWindow per stream,
// frames of at most 4 KiB, and at most MaxStreams + 1 streams opened by the
// party (its control stream and the MaxStreams it may announce, whose
// first frames may arrive before the dealer has read their openings).
// Unread frames are then bounded per connection by ConnBufferBound, read
// or not, announced or not (TestDealerUnannouncedStreamsBounded in
// examples/internal/peer): with the defaults 40 MiB, and 161 MiB per party
// key (MaxConnsPerKey connections), where the transport's defaults allowed
// about 2 GiB per connection.
func (s *Server) ConnOptions(base transport.Options) transport.Options {
	base.StreamWindow = DealerStreamWindow
	base.MaxFrame = dealerMaxFrame
	base.MaxStreams = s.opt.MaxStreams + 1
	return base
}

// ConnBufferBound is the most bytes of frames a party can make the dealer
// hold on one connection made with ConnOptions (transport.Options.MaxStreams:
// each stream queues at most about 1.25 × its window): the MaxStreams + 1
// streams the party may open and the MaxStreams + 1 the dealer opens
// itself (its control stream and those the party announces), 1.25 ×
// DealerStreamWindow each.
func (s *Server) ConnBufferBound() int64 {
	return 2 * int64(s.opt.MaxStreams+1) * DealerStreamWindow * 5 / 4
}

// Stats returns the items served and the bytes of correction words sent.
func (s *Server) Stats() DealerStats {
	return DealerStats{BytesRecv: 8 * s.core.words.Load(), Items: s.core.items.Load()}
}

// SessionWork returns the dealer work (Request.DealerWork units) session
// id has drawn so far and its budget (0 while no party has joined it);
// ok is false for a session the dealer does not know.
func (s *Server) SessionWork(id SessionID) (spent, budget uint64, ok bool) {
	d := s.core
	d.mu.Lock()
	defer d.mu.Unlock()
	rec := d.state.sessions[id]
	if cs := d.sessions[id]; cs != nil {
		rec = cs.rec
	}
	if rec == nil {
		return 0, 0, false
	}
	return rec.spent, rec.budget, true
}

// Serve serves the party of role (0 or 1: the role bound to the listener
// conn came in on) until ctx ends, the connection fails, or (party 0) the
// session seed is delivered. It returns nil after a party-0 handshake and
// the reason it stopped otherwise; a protocol violation is an error (the
// caller should then close conn). Errors after which the party received no
// material wrap ErrRefused; a hello for another role is a *RoleError.
func (s *Server) Serve(ctx context.Context, conn *transport.Conn, role int) error {
	if role != 0 && role != 1 {
		return fmt.Errorf("beaver: server: serve role %d, want 0 or 1", role)
	}
	key := conn.PeerFingerprint()
	log := s.log.With("role", roleName(role), "addr", conn.RemoteAddr().String(), "key", key)
	ctl := conn.Stream(controlID)
	refuse := func(err error) error { return s.refuse(ctx, ctl, log, err) }
	if want := s.opt.Fingerprints[role]; want != "" && key != want {
		return refuse(fmt.Errorf("beaver: dealer: key %s is not the %s's pinned key %s", key, roleName(role), want))
	}
	kc, release, err := s.admit(connKey{role, key})
	if err != nil {
		return refuse(err)
	}
	defer release()
	words, err := s.hello(ctx, ctl, role, key, refuse)
	if err != nil {
		return err
	}
	sess, err := s.openSession(ctx, conn, ctl, role, key, refuse)
	if err != nil {
		return err
	}
	defer s.core.leave(sess)
	log.Info("dealer: session opened", "session", sess.id.short())
	if role == 0 && !words {
		return nil
	}
	return s.serveStreams(ctx, conn, ctl, sess, role, kc.sem)
}

// refuse tells the party on the control stream ctl why it is refused (an
// error status with the text, cut to maxStatusText bytes, sent within the
// handshake timeout), logs it, and returns err, wrapped in ErrRefused if it
// is not already.
func (s *Server) refuse(ctx context.Context, ctl *transport.Stream, log *slog.Logger, err error) error {
	if !errors.Is(err, ErrRefused) {
		err = refused(err)
	}
	log.Warn("dealer: refused", "err", err)
	msg := append([]byte{statusError}, err.Error()...)
	hctx, cancel := context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	_ = ctl.SendBytes(hctx, msg[:min(len(msg), 1+maxStatusText)])
	cancel()
	return err
}

// admit counts one more connection of the party ck, if it holds fewer than
// MaxConnsPerKey, and returns what its connections share and the release
// that uncounts it; otherwise it returns an error (to refuse with).
func (s *Server) admit(ck connKey) (kc *keyConns, release func(), err error) {
	s.connMu.Lock()
	kc = s.conns[ck]
	if kc == nil {
		kc = &keyConns{sem: make(chan struct{}, s.opt.MaxConcurrentRequests)}
		s.conns[ck] = kc
	}
	n := kc.n
	if n < s.opt.MaxConnsPerKey {
		kc.n++
	}
	s.connMu.Unlock()
	if n >= s.opt.MaxConnsPerKey {
		return nil, nil, fmt.Errorf("beaver: dealer: the %s already has %d connections, the most it may hold at once "+
			"(a party sharded over K worker pairs holds 2 at a dealer per pair, its worker's and, at pair 0's, its coordinator's, "+
			"but K+1 at one dealer serving every pair: start that dealer with -max-conns K+1 or more, ServerOptions.MaxConnsPerKey in the library)", roleName(ck.role), n)
	}
	return kc, func() {
		s.connMu.Lock()
		if kc.n--; kc.n == 0 {
			delete(s.conns, ck)
		}
		s.connMu.Unlock()
	}, nil
}

// hello receives the party's hello on ctl, checks that it claims role, and
// answers it with the status OK, each within the handshake timeout; words
// reports whether the party asks for dealer words (party 1 always does). A
// hello that cannot be decoded or claims another role (a *RoleError) is
// refused with refuse.
func (s *Server) hello(ctx context.Context, ctl *transport.Stream, role int, key string, refuse func(error) error) (words bool, err error) {
	hctx, cancel := context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	hello, err := ctl.RecvBytes(hctx, helloMsgSize)
	cancel()
	if err != nil {
		return false, refused(fmt.Errorf("beaver: server: hello: %w", err))
	}
	party, words, err := decodeHello(hello)
	if err != nil {
		return false, refuse(fmt.Errorf("beaver: server: %w", err))
	}
	if party != role {
		return false, refuse(&RoleError{Claimed: party, Bound: role, Key: key})
	}
	hctx, cancel = context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	err = ctl.SendBytes(hctx, []byte{statusOK})
	cancel()
	if err != nil {
		return false, refused(fmt.Errorf("beaver: server: hello reply to the %s: %w", roleName(role), err))
	}
	return words || role == 1, nil
}

// openSession receives the session id and budget of the party of role
// (within the session timeout), joins it to that session, and sends it its
// session seed (within the handshake timeout). A malformed message or a join
// the dealer does not allow is refused with refuse. Once it returns a session
// the caller must leave it (dealerCore.leave), also after an error sending the
// seed, which it returns with the session.
func (s *Server) openSession(ctx context.Context, conn *transport.Conn, ctl *transport.Stream, role int, key string, refuse func(error) error) (*coreSession, error) {
	sctx, cancel := context.WithTimeout(ctx, s.opt.SessionTimeout)
	msg, err := ctl.RecvBytes(sctx, sessionMsgSize)
	cancel()
	if err != nil {
		return nil, refused(fmt.Errorf("beaver: server: session id of the %s: %w", roleName(role), err))
	}
	id, budget, err := decodeSession(msg)
	if err != nil {
		return nil, refuse(fmt.Errorf("beaver: server: %w", err))
	}
	sess, err := s.core.join(ctx, conn.Done(), id, role, key, budget, s.opt.SessionTimeout)
	if err != nil {
		return nil, refuse(err)
	}
	seed := sess.seeds[role]
	hctx, cancel := context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	err = ctl.SendBytes(hctx, append([]byte{statusOK}, seed[:]...))
	cancel()
	if err != nil {
		s.core.leave(sess)
		return nil, fmt.Errorf("beaver: server: send session seed to the %s: %w", roleName(role), err)
	}
	return sess, nil
}

// serveStreams serves the party of role (party 1, or a party 0 that asked
// for dealer words) in session sess: it opens each provider stream
// the party announces on ctl (each transport stream once, at most MaxStreams)
// and serves it in its own goroutine (serveStream), sem bounding the items in
// progress, until ctx ends, the control stream fails, a message is malformed,
// or the party stays idle for IdleTimeout. It waits for the stream goroutines
// before it returns why it stopped.
func (s *Server) serveStreams(ctx context.Context, conn *transport.Conn, ctl *transport.Stream, sess *coreSession, role int, sem chan struct{}) error {
	// The stream goroutines end with ctx: stop runs before the wait.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	touch := s.idleWatchdog(ctx, &wg, stop, role)
	opened := map[uint32]bool{controlID: true}
	for {
		msg, err := ctl.RecvBytes(ctx, openMsgSize)
		if err != nil {
			if c := context.Cause(ctx); c != nil {
				err = c
			}
			return fmt.Errorf("beaver: server: control stream: %w", err)
		}
		touch()
		pstream, tid, err := decodeOpen(msg)
		if err != nil {
			return fmt.Errorf("beaver: server: %w", err)
		}
		if opened[tid] {
			return fmt.Errorf("beaver: server: transport stream %d opened twice", tid)
		}
		if len(opened) > s.opt.MaxStreams {
			return fmt.Errorf("beaver: server: more than %d streams opened on one connection", s.opt.MaxStreams)
		}
		opened[tid] = true
		st := conn.Stream(tid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveStream(ctx, sess, role, st, pstream, sem, touch)
		}()
	}
}

// idleWatchdog returns touch, which marks the party of role active, and, with an
// IdleTimeout set, starts (in wg) a goroutine that stops ctx with an error
// once the party has been idle for longer than IdleTimeout (checked every
// quarter of it) and ends with ctx.
func (s *Server) idleWatchdog(ctx context.Context, wg *sync.WaitGroup, stop context.CancelCauseFunc, role int) (touch func()) {
	var mu sync.Mutex
	last := time.Now()
	touch = func() {
		mu.Lock()
		last = time.Now()
		mu.Unlock()
	}
	if s.opt.IdleTimeout > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(s.opt.IdleTimeout / 4)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					mu.Lock()
					idle := time.Since(last)
					mu.Unlock()
					if idle > s.opt.IdleTimeout {
						stop(fmt.Errorf("beaver: server: party %d idle for %v", role, idle.Round(time.Millisecond)))
						return
					}
				}
			}
		}()
	}
	return touch
}

// serveStream answers the requests of one provider stream until ctx ends or
// the stream fails; each item holds a slot of sem from its decoding to the
// end of its reply.
func (s *Server) serveStream(ctx context.Context, sess *coreSession, role int, st *transport.Stream, pstream uint32, sem chan struct{}, touch func()) {
	for {
		b, err := st.RecvBytes(ctx, requestSize)
		if err != nil {
			return
		}
		touch()
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		ok := s.serveOne(ctx, sess, role, st, pstream, b)
		<-sem
		if !ok {
			return
		}
	}
}

// serveOne answers one request b of the party of role; false means the
// stream failed.
func (s *Server) serveOne(ctx context.Context, sess *coreSession, role int, st *transport.Stream, pstream uint32, b []byte) bool {
	var corr []uint64
	r, err := DecodeRequest(b)
	if err == nil && r.Stream != pstream {
		err = fmt.Errorf("beaver: request for stream %d on the transport stream of provider stream %d", r.Stream, pstream)
	}
	if err == nil {
		corr, err = s.core.serve(sess, role, r)
	}
	if err != nil {
		msg := append([]byte{statusError}, err.Error()...)
		return st.SendBytes(ctx, msg[:min(len(msg), maxStatusMsg)]) == nil
	}
	return st.SendBytes(ctx, []byte{statusOK}) == nil && st.SendWords(ctx, corr) == nil
}

// helloWords is added to party 0's hello byte to draw dealer words.
const helloWords = 2

func encodeHello(party int, words bool) []byte {
	b := byte(party)
	if words && party == 0 {
		b += helloWords
	}
	return append([]byte(helloMagic), helloVersion, b)
}

// decodeHello returns the party of a hello and whether party 0 asks for
// dealer words.
func decodeHello(b []byte) (party int, words bool, err error) {
	if len(b) != len(helloMagic)+2 || string(b[:4]) != helloMagic {
		return 0, false, fmt.Errorf("malformed hello (%d bytes)", len(b))
	}
	if b[4] != helloVersion {
		return 0, false, fmt.Errorf("hello version %d, want %d", b[4], helloVersion)
	}
	if b[5] == helloWords {
		return 0, true, nil
	}
	if b[5] > 1 {
		return 0, false, fmt.Errorf("hello from party %d, want 0 or 1", b[5])
	}
	return int(b[5]), false, nil
}

func encodeSession(id SessionID, budget uint64) []byte {
	b := append([]byte(sessionMagic), id[:]...)
	return binary.LittleEndian.AppendUint64(b, budget)
}

func decodeSession(b []byte) (SessionID, uint64, error) {
	var id SessionID
	if len(b) != sessionMsgSize || string(b[:len(sessionMagic)]) != sessionMagic {
		return id, 0, fmt.Errorf("malformed session message (%d bytes)", len(b))
	}
	n := copy(id[:], b[len(sessionMagic):])
	return id, binary.LittleEndian.Uint64(b[len(sessionMagic)+n:]), nil
}

// decodeStatus parses a dealer reply: status 0 followed by exactly payload
// bytes (returned), or status 1 followed by an error text (returned as an
// error).
func decodeStatus(b []byte, payload int) ([]byte, error) {
	switch {
	case len(b) == 0:
		return nil, errors.New("empty dealer reply")
	case b[0] == statusError:
		text := b[1:min(len(b), 1+maxStatusText)]
		return nil, fmt.Errorf("dealer refused: %s", strings.ToValidUTF8(string(text), "?"))
	case b[0] != statusOK:
		return nil, fmt.Errorf("malformed dealer reply (status %d)", b[0])
	case len(b) != 1+payload:
		return nil, fmt.Errorf("malformed dealer reply (%d bytes, want %d)", len(b), 1+payload)
	}
	return b[1:], nil
}

func decodeOpen(b []byte) (pstream, tid uint32, err error) {
	if len(b) != openMsgSize {
		return 0, 0, fmt.Errorf("malformed open message (%d bytes, want %d)", len(b), openMsgSize)
	}
	pstream = binary.LittleEndian.Uint32(b)
	tid = binary.LittleEndian.Uint32(b[4:])
	if tid == controlID {
		return 0, 0, errors.New("open message names the control stream")
	}
	return pstream, tid, nil
}

// Client is a party's Provider backed by a networked dealer (Server); draw
// typed material through Typed{client}. It hands out no material before
// BindSession. Party 0's client expands everything locally
// after the session handshake (unless it connected with
// ConnectOptions.DealerWords); party 1's fetches its dealer words over the
// connection, one transport stream per provider stream.
type Client struct {
	*seededProvider
	conn   *transport.Conn
	ctl    *transport.Stream
	budget uint64
	words  bool // the party draws dealer words
	// shapes is the budget set by SetSessionBudget (0: none).
	shapes atomic.Uint64
}

// SessionBudgeter is implemented by the providers that announce a session
// budget to a dealer when they bind a session (*Client) and by the wrappers
// that pass it on to the provider they wrap (*Marked).
// Selection's model owner calls it before BindSession with the budget the
// selection's public shapes need (selection.DealerBudget).
type SessionBudgeter interface {
	// AnnouncesBudget reports whether SetSessionBudget reaches a dealer
	// (for a wrapper: whether the provider it wraps announces budgets), so
	// that a caller computes a budget only when it counts.
	AnnouncesBudget() bool
	// SetSessionBudget sets the budget of dealer work (Request.DealerWork
	// units) computed from the computation's shapes, announced at the next
	// BindSession.
	SetSessionBudget(work uint64)
}

var (
	_ SessionBudgeter = (*Client)(nil)
	_ SessionBudgeter = (*Marked)(nil)
)

// SetSessionBudget implements SessionBudgeter: the client announces the
// smaller of work and ConnectOptions.Budget when it binds its session (0
// stands for none, either way; the dealer serves the smaller of the two
// parties' announcements). Called after BindSession it changes nothing
// for the bound session (a dealer never raises a session's budget).
func (c *Client) SetSessionBudget(work uint64) { c.shapes.Store(work) }

// AnnouncesBudget implements SessionBudgeter: a client announces its
// budget when it binds its session.
func (c *Client) AnnouncesBudget() bool { return true }

// announcedBudget is the budget the client announces at BindSession: the
// smaller nonzero one of ConnectOptions.Budget and SetSessionBudget's, 0
// when neither is set.
func (c *Client) announcedBudget() uint64 {
	b, w := c.budget, c.shapes.Load()
	if b == 0 || w != 0 && w < b {
		return w
	}
	return b
}

// ConnectOptions configure a Client (ConnectWith). The zero value selects
// the defaults.
type ConnectOptions struct {
	// Budget is the session budget this party announces to the dealer at
	// BindSession: the most dealer work (Request.DealerWork units) the
	// session may draw, over all its connections. The dealer serves the
	// smaller of the two parties' announcements (at most its own
	// ServerOptions.SessionBudget, which it also uses when neither
	// announces one: 0). Both parties of an honest computation know its
	// shapes, so each can announce what it needs (Work of a rehearsal's
	// requests, with room for resumes): then a data owner cannot make the
	// dealer work more than the model owner allows.
	Budget uint64
	// DealerWords, for party 0, keeps the connection open after the
	// session handshake to draw dealer words of its own: needed only for a
	// kind whose dealer words go to party 0 (Correlation.DealtTo; no
	// built-in kind). Party 1 always draws dealer words.
	DealerWords bool
}

// Connect is ConnectWith with the default options (no announced budget).
func Connect(ctx context.Context, conn *transport.Conn, party int) (*Client, error) {
	return ConnectWith(ctx, conn, party, ConnectOptions{})
}

// ConnectWith performs the role handshake with a Server over conn as party
// (0 or 1) and returns the party's Provider, to be bound to the
// computation's session with BindSession before use. A dealer that refuses
// the role (the connection is bound to the other role) is an error naming
// both. The connection stays owned by the caller (close it when done).
func ConnectWith(ctx context.Context, conn *transport.Conn, party int, opt ConnectOptions) (*Client, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("beaver: connect as party %d, want 0 or 1", party)
	}
	ctl := conn.Stream(controlID)
	if err := ctl.SendBytes(ctx, encodeHello(party, opt.DealerWords)); err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: %w", err)
	}
	b, err := ctl.RecvBytes(ctx, maxStatusMsg)
	if err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: receive reply: %w", err)
	}
	if _, err := decodeStatus(b, 0); err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer as the %s: %w", roleName(party), err)
	}
	c := &Client{conn: conn, ctl: ctl, budget: opt.Budget, words: party == 1 || opt.DealerWords}
	c.seededProvider = newSeededProvider(party, c.bindSession, nil)
	return c, nil
}

// bindSession presents id to the dealer and returns the session seed.
func (c *Client) bindSession(ctx context.Context, id SessionID) (share.Seed, corrector, error) {
	var seed share.Seed
	if err := c.ctl.SendBytes(ctx, encodeSession(id, c.announcedBudget())); err != nil {
		return seed, nil, fmt.Errorf("send session id: %w", err)
	}
	b, err := c.ctl.RecvBytes(ctx, maxSeedReplyMsg)
	if err != nil {
		return seed, nil, fmt.Errorf("receive session seed: %w", err)
	}
	p, err := decodeStatus(b, share.SeedSize)
	if err != nil {
		return seed, nil, err
	}
	copy(seed[:], p)
	if !c.words {
		return seed, nil, nil
	}
	return seed, &netCorrector{party: c.party, conn: c.conn, ctl: c.ctl, streams: make(map[uint32]*clientStream), next: 1}, nil
}

// netCorrector fetches a party's dealer words from a networked dealer.
type netCorrector struct {
	party int
	conn  *transport.Conn
	ctl   *transport.Stream

	mu      sync.Mutex // guards streams, next and sends on ctl
	streams map[uint32]*clientStream
	next    uint32
}

type clientStream struct {
	mu sync.Mutex
	st *transport.Stream
	// broken, once set, fails every later request: a sequence that failed
	// part-way may have left replies in flight (under mu).
	broken error
}

// stream returns the transport stream of provider stream ps, announcing it to
// the server on first use.
func (n *netCorrector) stream(ctx context.Context, ps uint32) (*clientStream, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cs, ok := n.streams[ps]; ok {
		return cs, nil
	}
	tid := n.next
	msg := binary.LittleEndian.AppendUint32(nil, ps)
	msg = binary.LittleEndian.AppendUint32(msg, tid)
	if err := n.ctl.SendBytes(ctx, msg); err != nil {
		return nil, fmt.Errorf("open dealer stream: %w", err)
	}
	n.next++
	cs := &clientStream{st: n.conn.Stream(tid)}
	n.streams[ps] = cs
	return cs, nil
}

func (n *netCorrector) correct(ctx context.Context, r Request) ([]uint64, int64, int64, error) {
	cs, err := n.stream(ctx, r.Stream)
	if err != nil {
		return nil, 0, 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.broken != nil {
		return nil, 0, 0, cs.broken
	}
	before := cs.st.Stats()
	cost := func() (int64, int64) {
		d := cs.st.Stats().Sub(before)
		return d.BytesSent, d.BytesRecv
	}
	req, err := r.AppendBinary(make([]byte, 0, requestSize))
	if err != nil {
		return nil, 0, 0, err
	}
	if err := cs.st.SendBytes(ctx, req); err != nil {
		s, rc := cost()
		return nil, s, rc, fmt.Errorf("send request: %w", err)
	}
	corr, err := cs.reply(ctx, r, n.party)
	s, rc := cost()
	return corr, s, rc, err
}

// correctSeq implements seqCorrector: it sends every request of rs (one
// provider stream, counters assigned in order) from a goroutine while it
// reads the replies in order, so the sequence costs one round trip to the
// dealer rather than one per request.
func (n *netCorrector) correctSeq(ctx context.Context, rs []Request, deliver func(i int, corr []uint64) error) (int64, int64, error) {
	if len(rs) == 0 {
		return 0, 0, nil
	}
	cs, err := n.stream(ctx, rs[0].Stream)
	if err != nil {
		return 0, 0, err
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.broken != nil {
		return 0, 0, cs.broken
	}
	before := cs.st.Stats()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := make(chan error, 1)
	go func() {
		buf := make([]byte, 0, requestSize)
		for _, r := range rs {
			b, err := r.AppendBinary(buf[:0])
			if err == nil {
				err = cs.st.SendBytes(ctx, b)
			}
			if err != nil {
				sent <- fmt.Errorf("send request %v: %w", r, err)
				return
			}
		}
		sent <- nil
	}()
	for i, r := range rs {
		var corr []uint64
		if corr, err = cs.reply(ctx, r, n.party); err == nil {
			err = deliver(i, corr)
		}
		if err != nil {
			break
		}
	}
	if err != nil {
		cancel() // stop the sender
	}
	if serr := <-sent; err == nil {
		err = serr
	}
	if err != nil {
		cs.broken = fmt.Errorf("dealer stream of provider stream %d is out of step after a failed sequence: %w", rs[0].Stream, err)
	}
	d := cs.st.Stats().Sub(before)
	return d.BytesSent, d.BytesRecv, err
}

// reply receives the dealer's reply to party's request r: its status, then
// its dealer words.
func (cs *clientStream) reply(ctx context.Context, r Request, party int) ([]uint64, error) {
	status, err := cs.st.RecvBytes(ctx, maxStatusMsg)
	if err != nil {
		return nil, fmt.Errorf("receive status: %w", err)
	}
	if len(status) == 0 || status[0] != statusOK {
		if len(status) > 0 && status[0] == statusError {
			return nil, fmt.Errorf("dealer refused: %s", status[1:])
		}
		return nil, fmt.Errorf("malformed dealer status (%d bytes)", len(status))
	}
	corr := make([]uint64, r.CorrectionWords(party))
	if err := cs.st.RecvWords(ctx, corr); err != nil {
		return nil, fmt.Errorf("receive correction: %w", err)
	}
	return corr, nil
}

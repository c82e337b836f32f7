package dealer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
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
	// (beaver.Request.DealerWork units) when neither party announces one: 2^50,
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
	// (beaver.Request.MaxPartWords; default DefaultMaxRequestWords, at most
	// MaxItemWords) and MaxRequestMACs its multiply-adds (beaver.Request.MACs;
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
	// SessionBudget is the budget of dealer work (beaver.Request.DealerWork
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
// it serves exactly the material of NewWithSeeds(seed0, seed1) for
// that id. With opt.StateFile it loads (or creates) the state file; a
// malformed one, or one written for other seeds, is an error wrapping
// ErrBadStateFile.
func NewServerWithSeeds(seed0, seed1 share.Seed, opt ServerOptions) (*Server, error) {
	if opt.MaxRequestWords < 0 || opt.MaxRequestWords > beaver.MaxItemWords || opt.MaxStreams < 0 || opt.MaxStreams > beaver.MaxSessionStreams ||
		opt.MaxConcurrentRequests < 0 || opt.MaxConnsPerKey < 0 || opt.MaxSessions < 0 || opt.MaxSessions > maxStateSessions || opt.SessionRetention < 0 {
		return nil, fmt.Errorf("beaver: new server: a limit out of range (MaxRequestWords ≤ %d, MaxStreams ≤ %d, MaxSessions ≤ %d, none negative)",
			beaver.MaxItemWords, beaver.MaxSessionStreams, maxStateSessions)
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
func (s *Server) Stats() beaver.DealerStats {
	return beaver.DealerStats{BytesRecv: 8 * s.core.words.Load(), Items: s.core.items.Load()}
}

// SessionWork returns the dealer work (beaver.Request.DealerWork units) session
// id has drawn so far and its budget (0 while no party has joined it);
// ok is false for a session the dealer does not know.
func (s *Server) SessionWork(id beaver.SessionID) (spent, budget uint64, ok bool) {
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
	log.Info("dealer: session opened", "session", sess.id.Short())
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
		b, err := st.RecvBytes(ctx, beaver.RequestSize)
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
	r, err := beaver.DecodeRequest(b)
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

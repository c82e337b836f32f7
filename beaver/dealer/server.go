package dealer

import (
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

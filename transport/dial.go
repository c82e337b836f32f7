package transport

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/selectformer/selectformer/internal/prio"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func tlsConfig(id *Identity, pin string, server bool) *tls.Config {
	cfg := &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{id.tls},
		VerifyConnection: verifyPin(pin),
		// Full-size records from the start: this is bulk traffic.
		DynamicRecordSizingDisabled: true,
	}
	if server {
		cfg.ClientAuth = tls.RequireAnyClientCert
	} else {
		// There is no CA: the peer is authenticated by the pinned key in
		// VerifyConnection, which TLS runs even with InsecureSkipVerify
		// (and TLS 1.3 always checks the peer's CertificateVerify signature).
		cfg.InsecureSkipVerify = true
	}
	return cfg
}

func checkArgs(id *Identity, pin string, opt Options) (string, Options, error) {
	if id == nil {
		return "", opt, errors.New("transport: nil identity")
	}
	fp, err := ParseFingerprint(pin)
	if err != nil {
		return "", opt, err
	}
	o, err := opt.normalize()
	return fp, o, err
}

// Dial connects to addr over TCP, authenticates with id and accepts only a
// peer whose key has fingerprint peerFingerprint (see Identity.Fingerprint).
// ctx bounds the connection set-up only.
func Dial(ctx context.Context, addr string, id *Identity, peerFingerprint string, opt Options) (*Conn, error) {
	fp, o, err := checkArgs(id, peerFingerprint, opt)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	c, err := handshake(ctx, raw, tlsConfig(id, fp, false), o, false)
	if err != nil {
		if strings.Contains(err.Error(), "bad certificate") {
			return nil, fmt.Errorf("transport: connecting to %s: %w (fingerprint %s; does it pin that one?): %w",
				addr, ErrKeyRejected, id.Fingerprint(), err)
		}
		return nil, fmt.Errorf("transport: connecting to %s: %w", addr, err)
	}
	c.peerFP = fp
	return c, nil
}

// ErrKeyRejected is wrapped by the error of a Dial whose peer refused this
// side's key in the TLS handshake (it pins another one). With a
// *PinError (the peer's key is not the pinned one) it is the failure a
// retry cannot mend, and that nobody but the peer, or whoever answers in
// its place, can cause.
var ErrKeyRejected = errors.New("the peer rejected our key")

// ErrHandshakeTimeout is wrapped by the error of a handshake (TLS and
// connection preface) that did not finish within Options.HandshakeTimeout.
var ErrHandshakeTimeout = errors.New("transport: handshake timed out")

// handshake runs TLS and the preface on raw, within o.HandshakeTimeout or
// until ctx ends if that is sooner; it closes raw on error.
func handshake(ctx context.Context, raw net.Conn, cfg *tls.Config, o Options, server bool) (*Conn, error) {
	hctx, cancel := context.WithTimeoutCause(ctx, o.HandshakeTimeout, ErrHandshakeTimeout)
	defer cancel()
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	nc := raw
	if o.Link != nil {
		nc = Emulate(raw, *o.Link)
	}
	var tc *tls.Conn
	if server {
		tc = tls.Server(nc, cfg)
	} else {
		tc = tls.Client(nc, cfg)
	}
	if err := tlsHandshake(hctx, nc, tc); err != nil {
		_ = nc.Close()
		return nil, handshakeTimeout(hctx, o, fmt.Errorf("TLS handshake: %w", err))
	}
	c, err := newConn(hctx, tc, o)
	if err != nil {
		return nil, handshakeTimeout(hctx, o, err)
	}
	return c, nil
}

// tlsHandshake runs tc's handshake over nc until ctx ends. Unlike
// tls.Conn.HandshakeContext, which returns ctx's error whenever ctx has ended
// by the time the handshake returns, it keeps the handshake's own error when
// the handshake failed by itself (a wrong key, say) and ctx ended just after:
// a listener whose Accept returns once the right peer is in must still log
// why a stranger was rejected a moment before.
func tlsHandshake(ctx context.Context, nc net.Conn, tc *tls.Conn) error {
	stop := interruptOnCancel(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	err := tc.Handshake()
	interrupted := stop()
	_ = nc.SetDeadline(time.Time{})
	if endedByCtx(ctx, err, interrupted) {
		return ctx.Err()
	}
	return err
}

// endedByCtx reports whether err, from I/O on a socket whose deadline was
// set from ctx's (and interrupted when ctx ended: interrupted), is ctx's
// ending rather than the I/O's own failure; only a deadline error can be.
// The socket may reach ctx's deadline a moment before ctx's own timer
// fires: then it waits for ctx to end, so that the caller sees ctx's error
// and its cause. Any other error is the I/O's own, even if ctx ended
// meanwhile.
func endedByCtx(ctx context.Context, err error, interrupted bool) bool {
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	dl, ok := ctx.Deadline()
	if !interrupted && ctx.Err() == nil && (!ok || time.Now().Before(dl)) {
		return false
	}
	<-ctx.Done()
	return true
}

// handshakeTimeout wraps err with ErrHandshakeTimeout when the handshake
// deadline, not the caller's context, ended the handshake: hctx's cause
// records which ended first, so a caller whose context ends after the
// handshake timed out (Accept returning once the real peer is in) does not
// turn the timeout into an abandoned handshake.
func handshakeTimeout(hctx context.Context, o Options, err error) error {
	if !errors.Is(context.Cause(hctx), ErrHandshakeTimeout) {
		return err
	}
	return fmt.Errorf("%w (limit %v): %w", ErrHandshakeTimeout, o.HandshakeTimeout, err)
}

// Listener accepts authenticated connections.
type Listener struct {
	ln  *net.TCPListener
	id  *Identity
	opt Options
	mu  sync.Mutex // serializes Accept

	bmu     sync.Mutex
	backlog []net.Conn // accepted as an Accept returned; authenticated by the next one
	ready   []*Conn    // authenticated after their Accept returned with another; taken by the next one
	cur     *acceptor  // the Accept in progress, if any
	closed  bool

	// life ends when the listener closes: it bounds the handshakes that
	// outlive the Accept that started them (kill ends it).
	life context.Context
	kill context.CancelFunc

	// The sockets being authenticated, over every Accept (a handshake
	// outlives an Accept that returned with another connection).
	pmu       sync.Mutex
	pending   []*pendingConn // in arrival order
	perSource map[string]int // pending sockets per source IP
}

// Listen listens on a TCP address ("host:port"; port 0 picks one).
func Listen(addr string, id *Identity, opt Options) (*Listener, error) {
	if id == nil {
		return nil, errors.New("transport: nil identity")
	}
	o, err := opt.normalize()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	life, kill := context.WithCancel(context.Background())
	return &Listener{ln: ln.(*net.TCPListener), id: id, opt: o, life: life, kill: kill, perSource: map[string]int{}}, nil
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening; established connections are not affected. A
// pending Accept returns an error.
func (l *Listener) Close() error {
	err := l.ln.Close()
	l.kill()
	l.bmu.Lock()
	l.closed = true
	for _, c := range l.backlog {
		_ = c.Close()
	}
	for _, c := range l.ready {
		_ = c.Close()
	}
	l.backlog, l.ready = nil, nil
	l.bmu.Unlock()
	return err
}

// keepReady hands c, authenticated after the Accept that started its
// handshake had returned with another connection, to the Accept in
// progress if it is pinned to c's peer, or keeps it for the next such
// Accept (or closes it if the listener is closed). At most
// Options.MaxPendingHandshakes wait: one more closes the oldest, logged.
func (l *Listener) keepReady(c *Conn) {
	l.bmu.Lock()
	if l.closed {
		l.bmu.Unlock()
		_ = c.Close()
		return
	}
	if a := l.cur; a != nil && a.fp == c.peerFP {
		// Accept closes a.done as it returns, without l.bmu.
		select {
		case a.won <- c:
			l.bmu.Unlock()
			return
		case <-a.done:
		}
	}
	var drop *Conn
	if len(l.ready) >= l.opt.MaxPendingHandshakes {
		drop, l.ready = l.ready[0], l.ready[1:]
	}
	l.ready = append(l.ready, c)
	l.bmu.Unlock()
	if drop != nil {
		l.opt.Log.Warn("transport: dropped an authenticated connection no Accept took", "listen", l.Addr().String(),
			"from", drop.RemoteAddr().String(), "waiting", l.opt.MaxPendingHandshakes)
		_ = drop.Close()
	}
}

// takeReady returns the oldest live connection kept by keepReady whose
// peer is a's (closing those of a's peer that died while they waited), or
// else makes a the Accept in progress and returns nil.
func (l *Listener) takeReady(a *acceptor) *Conn {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	var dead []*Conn
	defer func() {
		for _, c := range dead {
			_ = c.Close()
		}
	}()
	for i := 0; i < len(l.ready); i++ {
		c := l.ready[i]
		if c.peerFP != a.fp {
			continue
		}
		l.ready = append(l.ready[:i], l.ready[i+1:]...)
		i--
		select {
		case <-c.Done():
			dead = append(dead, c) // the peer hung up while it waited
			continue
		default:
		}
		return c
	}
	l.cur = a
	return nil
}

// stash keeps a connection accepted while an Accept was returning for the
// next Accept (or closes it if the listener is closed).
func (l *Listener) stash(c net.Conn) {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	if l.closed {
		_ = c.Close()
		return
	}
	l.backlog = append(l.backlog, c)
}

func (l *Listener) takeBacklog() []net.Conn {
	l.bmu.Lock()
	defer l.bmu.Unlock()
	b := l.backlog
	l.backlog = nil
	return b
}

// Accept waits until a peer whose key has fingerprint peerFingerprint has
// connected and authenticated, and returns that connection; it returns an
// error only when ctx ends or the listener fails (is closed).
//
// Accept never stops taking sockets from the kernel, and authenticates them
// concurrently, so that sockets which connect and stay silent (or go slow)
// cannot keep the pinned peer out:
//
//   - a socket must send its whole first TLS record (the ClientHello) within
//     Options.FirstByteTimeout of being accepted, and finish the handshake
//     within Options.HandshakeTimeout after that;
//   - at most Options.MaxPendingHandshakes sockets are authenticated at once,
//     at most Options.MaxPendingPerSource of them from one IP address; a new
//     socket beyond either bound evicts a pending socket of its own source
//     (for the per-source bound) or of the source with the most pending
//     sockets: the oldest that has been silent for 200 ms (no whole
//     ClientHello record: a byte or a partial hello counts as silent), or
//     else the oldest. A flood of silent, one-byte or partial sockets thus
//     only ever evicts its own kind; the pinned peer's socket, silent only
//     while its ClientHello is on the way, is never evicted for being the
//     youngest, and only a source with more sockets pending than the peer's
//     loses one first (TestAcceptOneByteFloodDoesNotEvictPeer).
//
// A connection that fails (a wrong key, bytes that are not TLS or not this
// protocol, a timeout, an eviction) is closed, logged at warn level on
// Options.Log, and Accept keeps waiting; the error returned when ctx ends
// says how many were rejected and wraps the last reason (a *PinError, for a
// wrong key). Handshakes still in progress when Accept returns with a
// connection go on (within their own time limits): one that succeeds is
// kept for the next Accept pinned to the same peer, so that connections
// the peer opens at once (a sharded party's coordinator and workers) are
// all served, one per Accept; one that fails is logged. Handshakes still
// in progress when Accept returns because ctx ended or the listener
// failed are abandoned and their sockets closed. Concurrent Accepts are
// serialized.
func (l *Listener) Accept(ctx context.Context, peerFingerprint string) (*Conn, error) {
	fp, err := ParseFingerprint(peerFingerprint)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("transport: accept: %w", err)
	}
	// The accept loop ends with this Accept; the handshakes end with the
	// caller's ctx (until a connection is handed over) or the listener.
	actx, cancel := context.WithCancel(ctx)
	hctx, hcancel := context.WithCancel(l.life)
	detach := context.AfterFunc(ctx, hcancel)
	a := &acceptor{l: l, cfg: tlsConfig(l.id, fp, true), fp: fp, hctx: hctx,
		won: make(chan *Conn), done: make(chan struct{}), fatal: make(chan error, 1)}
	if c := l.takeReady(a); c != nil {
		detach()
		hcancel()
		cancel()
		return c, nil
	}
	defer func() {
		l.bmu.Lock()
		l.cur = nil
		l.bmu.Unlock()
	}()
	a.wg.Add(1)
	go a.loop(actx)
	var c *Conn
	select {
	case c = <-a.won:
	case err = <-a.fatal:
	case <-ctx.Done():
	}
	// Stop the accept loop (cancel first: it checks actx after every
	// accept); with a connection, the handshakes in progress go on and
	// keep what they authenticate for the next Accept, otherwise they are
	// abandoned.
	cancel()
	if !detach() || c == nil {
		hcancel()
	}
	close(a.done)
	_ = l.ln.SetDeadline(aLongTimeAgo)
	a.wg.Wait()
	_ = l.ln.SetDeadline(time.Time{})
	// The handshakes that go on end within their own time limits (or
	// with the listener); hctx, a child of the listener's life, is
	// released when the last one has, not kept until the listener closes.
	go func() {
		a.hs.Wait()
		hcancel()
	}()
	if c != nil {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("transport: accept: %w", err)
	}
	if n, addr, last := a.rejects(); n > 0 {
		return nil, fmt.Errorf("transport: accept: %w; rejected %d connection(s), the last from %s: %w", ctx.Err(), n, addr, last)
	}
	return nil, fmt.Errorf("transport: accept: %w", ctx.Err())
}

// errEvicted is the reason of a pending handshake closed to make room for
// a newer socket.
var errEvicted = errors.New("transport: evicted: too many pending handshakes")

// acceptor is the state of one Listener.Accept.
type acceptor struct {
	l     *Listener
	cfg   *tls.Config
	fp    string
	hctx  context.Context // the handshakes' (see Accept)
	won   chan *Conn      // the first authenticated connection
	done  chan struct{}   // closed as Accept returns
	fatal chan error      // the listener failed
	wg    sync.WaitGroup  // the accept loop
	hs    sync.WaitGroup  // the handshakes it started

	mu       sync.Mutex
	rejected int
	lastAddr string
	lastErr  error
}

// pendingConn is a socket being authenticated.
type pendingConn struct {
	raw     net.Conn
	source  string      // the remote IP
	at      time.Time   // when it was admitted
	spoke   atomic.Bool // its whole first TLS record (the ClientHello) arrived
	evicted bool        // under Listener.pmu
}

// loop takes every socket the kernel has, authenticating each in its own
// goroutine, until ctx ends.
func (a *acceptor) loop(ctx context.Context) {
	defer a.wg.Done()
	pending := a.l.takeBacklog()
	for i, raw := range pending {
		if ctx.Err() != nil {
			for _, r := range pending[i:] {
				a.l.stash(r)
			}
			return
		}
		a.authenticate(raw)
	}
	var backoff time.Duration
	for {
		if ctx.Err() != nil {
			return
		}
		raw, err := a.l.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, net.ErrClosed) {
				a.fatal <- err
				return
			}
			// A transient failure (out of file descriptors, say): retry
			// with a growing pause, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			a.l.opt.Log.Warn("transport: accept failed; retrying", "listen", a.l.Addr().String(), "err", err, "pause", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		if ctx.Err() != nil {
			// Accept is returning: keep the socket for the next one.
			a.l.stash(raw)
			return
		}
		a.authenticate(raw)
	}
}

// admit registers raw as pending, evicting an older pending socket if raw
// would exceed Options.MaxPendingHandshakes or Options.MaxPendingPerSource.
func (l *Listener) admit(raw net.Conn) *pendingConn {
	now := time.Now()
	p := &pendingConn{raw: raw, source: sourceIP(raw.RemoteAddr()), at: now}
	l.pmu.Lock()
	var victim *pendingConn
	switch {
	case l.perSource[p.source] >= l.opt.MaxPendingPerSource:
		victim = l.victim(p.source, now)
	case len(l.pending) >= l.opt.MaxPendingHandshakes:
		victim = l.victim("", now)
	}
	if victim != nil {
		victim.evicted = true
		l.dropLocked(victim)
	}
	l.pending = append(l.pending, p)
	l.perSource[p.source]++
	l.pmu.Unlock()
	if victim != nil {
		_ = victim.raw.Close() // its handshake fails and is logged as evicted
	}
	return p
}

// helloGrace is how long a new socket may stay without a whole ClientHello
// record before it counts as silent for eviction (at most half
// Options.FirstByteTimeout): a real peer's ClientHello follows its TCP
// handshake at once, so it is in well before this unless a segment is lost.
const helloGrace = 200 * time.Millisecond

// victim returns the pending socket to close for a new one: of source, or
// of the source with the most pending sockets when source is ""; of those,
// the oldest that has been silent (no whole ClientHello record) for
// helloGrace, or else the oldest. A flood of silent or one-byte sockets
// therefore only ever evicts its own kind, and a socket is never evicted
// because it is the youngest: the pinned peer's socket, silent for the
// moment its ClientHello takes to arrive, is the last of its source to go,
// and its source is the last to be chosen unless it has the most sockets
// pending. l.pmu must be held.
func (l *Listener) victim(source string, now time.Time) *pendingConn {
	grace := min(helloGrace, l.opt.FirstByteTimeout/2)
	var best *pendingConn
	var bestCount int
	var bestSilent bool
	for _, p := range l.pending { // in arrival order: the first of equals is the oldest
		if source != "" && p.source != source {
			continue
		}
		count := l.perSource[p.source]
		silent := !p.spoke.Load() && now.Sub(p.at) >= grace
		switch {
		case best == nil, count > bestCount, count == bestCount && silent && !bestSilent:
			best, bestCount, bestSilent = p, count, silent
		}
	}
	return best
}

// dropLocked removes p from the pending set (if it is still there); l.pmu
// must be held.
func (l *Listener) dropLocked(p *pendingConn) {
	for i, q := range l.pending {
		if q == p {
			l.pending = append(l.pending[:i], l.pending[i+1:]...)
			if l.perSource[p.source]--; l.perSource[p.source] <= 0 {
				delete(l.perSource, p.source)
			}
			return
		}
	}
}

// sourceIP is the IP address of addr (addr as a string if it has no port).
func sourceIP(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	s := addr.String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// authenticate runs the handshake of raw in a goroutine (under a.hctx:
// it may outlive Accept), and hands the connection to Accept, or to the
// next Accept once this one has returned, or logs why it was rejected.
func (a *acceptor) authenticate(raw net.Conn) {
	ctx := a.hctx
	p := a.l.admit(raw)
	a.hs.Add(1)
	go func() {
		defer a.hs.Done()
		addr := raw.RemoteAddr().String()
		c, err := a.handshake(ctx, p)
		a.l.pmu.Lock()
		evicted := p.evicted // else it can no longer be evicted:
		a.l.dropLocked(p)
		a.l.pmu.Unlock()
		if err == nil && evicted {
			// Evicted as its handshake ended: its socket is closed.
			_ = c.Close()
			c, err = nil, errors.New("socket closed")
		}
		if err != nil {
			if evicted {
				err = fmt.Errorf("%w: %w", errEvicted, err)
			} else if abandoned(ctx, err) {
				return // Accept is returning and cut this handshake short
			}
			a.mu.Lock()
			a.rejected++
			a.lastAddr, a.lastErr = addr, err
			a.mu.Unlock()
			a.l.opt.Log.Warn("transport: rejected connection", "listen", a.l.Addr().String(), "from", addr,
				"reason", rejectReason(err), "err", err)
			return
		}
		c.peerFP = a.fp
		select {
		case a.won <- c:
		case <-a.done:
			a.l.keepReady(c) // for the next Accept (closed with the listener)
		}
	}()
}

// handshake waits up to Options.FirstByteTimeout (from p's admission) for
// p's first TLS record, then runs the server handshake on it.
func (a *acceptor) handshake(ctx context.Context, p *pendingConn) (*Conn, error) {
	raw := p.raw
	o := a.l.opt
	stop := interruptOnCancel(ctx, func() { _ = raw.SetReadDeadline(aLongTimeAgo) })
	_ = raw.SetReadDeadline(p.at.Add(o.FirstByteTimeout))
	first, hello, err := readFirstRecord(raw)
	interrupted := stop()
	if err != nil {
		_ = raw.Close()
		var ne net.Error
		switch {
		case interrupted:
			return nil, fmt.Errorf("waiting for the ClientHello: %w", ctx.Err())
		case errors.As(err, &ne) && ne.Timeout():
			return nil, fmt.Errorf("%w (no whole ClientHello within %v, Options.FirstByteTimeout)", ErrHandshakeTimeout, o.FirstByteTimeout)
		}
		return nil, fmt.Errorf("waiting for the ClientHello: %w", err)
	}
	if hello {
		p.spoke.Store(true)
	}
	_ = raw.SetReadDeadline(time.Time{})
	if tc, ok := raw.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return handshake(ctx, &prefixConn{Conn: raw, prefix: first}, a.cfg, o, true)
}

// The first TLS record of a real peer: a handshake record (content type
// 22, major version 3) of at most 2^14 bytes (RFC 8446 §5.1) whose body
// starts a ClientHello (handshake type 1).
const (
	recordHeaderSize   = 5
	recordHandshake    = 0x16
	maxPlaintextRecord = 1 << 14
	handshakeHello     = 1
)

// readFirstRecord reads the first TLS record of a new socket: its header
// and, if that is the header of a handshake record of at most 2^14 bytes,
// its body; hello reports whether it read a whole record that starts a
// ClientHello. Bytes that cannot begin such a record are returned as soon
// as they are seen, for the TLS handshake to refuse them ("not TLS").
func readFirstRecord(r io.Reader) (b []byte, hello bool, err error) {
	b = make([]byte, recordHeaderSize)
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return nil, false, err
	}
	if b[0] != recordHandshake {
		return b[:1], false, nil
	}
	if _, err := io.ReadFull(r, b[1:]); err != nil {
		return nil, false, err
	}
	n := int(binary.BigEndian.Uint16(b[3:]))
	if b[1] != 3 || n == 0 || n > maxPlaintextRecord {
		return b, false, nil
	}
	b = append(b, make([]byte, n)...)
	if _, err := io.ReadFull(r, b[recordHeaderSize:]); err != nil {
		return nil, false, err
	}
	return b, b[recordHeaderSize] == handshakeHello, nil
}

// prefixConn is a net.Conn whose first reads return prefix.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(b, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (a *acceptor) rejects() (int, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rejected, a.lastAddr, a.lastErr
}

// abandoned reports whether a failed server handshake failed because Accept
// is returning (its ctx ended and the error is that ending), rather than
// on its own: a handshake that failed on its own is a reject to log even
// when Accept returned meanwhile (the rejected socket may close before the
// log line is written). A handshake that ran out of its own time limit
// (ErrHandshakeTimeout, which wraps the limit's DeadlineExceeded) failed
// on its own.
func abandoned(ctx context.Context, err error) bool {
	return ctx.Err() != nil && !errors.Is(err, ErrHandshakeTimeout) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// rejectReason names the kind of a failed server handshake for the log.
func rejectReason(err error) string {
	var pe *PinError
	var rh tls.RecordHeaderError
	switch {
	case errors.Is(err, errEvicted):
		return "evicted"
	case errors.As(err, &pe):
		return "wrong key"
	case errors.Is(err, ErrHandshakeTimeout):
		return "handshake timeout"
	case errors.As(err, &rh):
		return "not TLS"
	case errors.Is(err, ErrProtocol):
		return "not a selectformer peer"
	case strings.Contains(err.Error(), "remote error: tls: bad certificate"):
		return "the peer rejected our key"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "closed during the handshake"
	default:
		return "handshake failed"
	}
}

// Pipe returns two Conns connected in memory (no TLS, no sockets), with the
// same API and accounting as network ones; Options.Link, if set, shapes
// both directions. Invalid options are replaced by the defaults.
func Pipe(opt Options) (*Conn, *Conn) {
	o, err := opt.normalize()
	if err != nil {
		o, _ = Options{Link: opt.Link}.normalize()
		if o.Link != nil && o.Link.validate() != nil {
			o.Link = nil
		}
	}
	na, nb := net.Pipe()
	if o.Link != nil {
		na, nb = Emulate(na, *o.Link), Emulate(nb, *o.Link)
	}
	var a, b *Conn
	var ea, eb error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		b, eb = newConn(context.Background(), nb, o)
	}()
	a, ea = newConn(context.Background(), na, o)
	wg.Wait()
	if ea != nil || eb != nil {
		// Cannot happen with net.Pipe; return connections that report it.
		err := errors.Join(ea, eb)
		return failedConn(err), failedConn(err)
	}
	return a, b
}

func failedConn(err error) *Conn {
	c := &Conn{streams: make(map[uint32]*Stream), dead: make(chan struct{}), readDone: make(chan struct{}), wtok: prio.NewGate(1), nc: nopConn{}, raw: nopConn{}}
	close(c.readDone) // no reader
	c.opt, _ = Options{}.normalize()
	c.fail(fmt.Errorf("transport: pipe: %w", err))
	return c
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
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
			return nil, fmt.Errorf("transport: connecting to %s: the peer rejected our key (fingerprint %s; does it pin that one?): %w",
				addr, id.Fingerprint(), err)
		}
		return nil, fmt.Errorf("transport: connecting to %s: %w", addr, err)
	}
	c.peerFP = fp
	return c, nil
}

// handshake runs TLS and the preface on raw; it closes raw on error.
func handshake(ctx context.Context, raw net.Conn, cfg *tls.Config, o Options, server bool) (*Conn, error) {
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
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return newConn(ctx, tc, o)
}

// Listener accepts authenticated connections.
type Listener struct {
	ln  *net.TCPListener
	id  *Identity
	opt Options
	mu  sync.Mutex
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
	return &Listener{ln: ln.(*net.TCPListener), id: id, opt: o}, nil
}

// Addr is the listening address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Close stops listening; established connections are not affected.
func (l *Listener) Close() error { return l.ln.Close() }

// Accept waits for a connection and authenticates it, accepting only a peer
// whose key has fingerprint peerFingerprint. A connection that fails the
// handshake (a wrong key, say) is closed and its error returned; call Accept
// again to keep serving. Concurrent Accepts are serialized.
func (l *Listener) Accept(ctx context.Context, peerFingerprint string) (*Conn, error) {
	fp, err := ParseFingerprint(peerFingerprint)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	dl, _ := ctx.Deadline()
	_ = l.ln.SetDeadline(dl)
	stop := interruptOnCancel(ctx, func() { _ = l.ln.SetDeadline(aLongTimeAgo) })
	raw, err := l.ln.Accept()
	stop()
	_ = l.ln.SetDeadline(time.Time{})
	l.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("transport: accept: %w", ctx.Err())
		}
		if !dl.IsZero() && !time.Now().Before(dl) {
			// The listener deadline fired just before the context's.
			return nil, fmt.Errorf("transport: accept: %w", context.DeadlineExceeded)
		}
		return nil, fmt.Errorf("transport: accept: %w", err)
	}
	c, err := handshake(ctx, raw, tlsConfig(l.id, fp, true), l.opt, true)
	if err != nil {
		return nil, fmt.Errorf("transport: accepting %s: %w", raw.RemoteAddr(), err)
	}
	c.peerFP = fp
	return c, nil
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
	c := &Conn{streams: make(map[uint32]*Stream), dead: make(chan struct{}), wtok: make(chan struct{}, 1), nc: nopConn{}, raw: nopConn{}}
	c.opt, _ = Options{}.normalize()
	c.fail(fmt.Errorf("transport: pipe: %w", err))
	return c
}

type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

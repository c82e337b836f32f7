package dealer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// Serve serves the party of role (0 or 1: the role bound to the listener
// conn came in on) until ctx ends or the connection fails, and returns the
// reason it stopped; a protocol violation is an error (the caller should
// then close conn). Errors after which the party received no
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
	if err := s.hello(ctx, ctl, role, key, refuse); err != nil {
		return err
	}
	sess, err := s.openSession(ctx, conn, ctl, role, key, refuse)
	if err != nil {
		return err
	}
	defer s.core.leave(sess)
	log.Info("dealer: session opened", "session", sess.id.Short())
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
// answers it with the status OK, each within the handshake timeout. A
// hello that cannot be decoded or claims another role (a *RoleError) is
// refused with refuse.
func (s *Server) hello(ctx context.Context, ctl *transport.Stream, role int, key string, refuse func(error) error) error {
	hctx, cancel := context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	hello, err := ctl.RecvBytes(hctx, helloMsgSize)
	cancel()
	if err != nil {
		return refused(fmt.Errorf("beaver: server: hello: %w", err))
	}
	party, err := decodeHello(hello)
	if err != nil {
		return refuse(fmt.Errorf("beaver: server: %w", err))
	}
	if party != role {
		return refuse(&RoleError{Claimed: party, Bound: role, Key: key})
	}
	hctx, cancel = context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	err = ctl.SendBytes(hctx, []byte{statusOK})
	cancel()
	if err != nil {
		return refused(fmt.Errorf("beaver: server: hello reply to the %s: %w", roleName(role), err))
	}
	return nil
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

// serveStreams serves the party of role in session sess: it opens each provider stream
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

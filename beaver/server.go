package beaver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Networked dealer. A Server holds the seeds of one two-party computation and
// serves each party over its own transport.Conn (TLS-authenticated when made
// with transport.Dial/Listen):
//
//   - On the control stream (id 0) the party sends a 6-byte hello ("SFDL",
//     version 1, party) and receives its 32-byte seed. Party 0 is then done:
//     it expands all its material locally and never talks to the dealer again.
//   - Party 1 announces each of its provider streams on the control stream
//     with an 8-byte open message (provider stream, transport stream ≥ 1,
//     little-endian uint32s) and then, on that transport stream, sends one
//     40-byte request per item (see Request.AppendBinary) and receives a
//     status message (one byte 0, or 1 followed by an error text) and, on
//     success, the item's correction words (Request.CorrectionWords).
//
// The server checks every request (sizes, no counter reused on a stream, one
// shape per weight id, the request's stream matches the transport stream's),
// serves any number of streams concurrently, and answers a bad request with
// an error status rather than dying.

const (
	helloMagic   = "SFDL"
	helloVersion = 1
	controlID    = 0
	statusOK     = 0
	statusError  = 1
)

// ServerOptions configure a Server. The zero value selects the defaults.
type ServerOptions struct {
	// HandshakeTimeout bounds the wait for a party's hello (default 30 s).
	HandshakeTimeout time.Duration
	// IdleTimeout, if positive, ends a party's connection after that long
	// without any request; by default only the Serve context ends it.
	IdleTimeout time.Duration
}

// Server is the networked dealer. It is safe for concurrent use: Serve may
// run for both parties (and for a reconnecting party) at once.
type Server struct {
	core *dealerCore
	opt  ServerOptions
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
	return NewServerWithSeeds(s0, s1, opt), nil
}

// NewServerWithSeeds returns a dealer with the given seeds: it serves exactly
// the material of NewDealerWithSeeds(seed0, seed1).
func NewServerWithSeeds(seed0, seed1 share.Seed, opt ServerOptions) *Server {
	if opt.HandshakeTimeout <= 0 {
		opt.HandshakeTimeout = 30 * time.Second
	}
	return &Server{core: newDealerCore(seed0, seed1), opt: opt}
}

// Stats returns the items served and the bytes of correction words sent.
func (s *Server) Stats() DealerStats {
	return DealerStats{BytesRecv: 8 * s.core.words.Load(), Items: s.core.items.Load()}
}

// Serve serves one party on conn until ctx ends, the connection fails, or
// (party 0) the seed is delivered. It returns nil after a party-0 handshake
// and the reason it stopped otherwise; a protocol violation is an error (the
// caller should then close conn).
func (s *Server) Serve(ctx context.Context, conn *transport.Conn) error {
	ctl := conn.Stream(controlID)
	hctx, cancel := context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	hello, err := ctl.RecvBytes(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("beaver: server: hello: %w", err)
	}
	party, err := decodeHello(hello)
	if err != nil {
		return fmt.Errorf("beaver: server: %w", err)
	}
	hctx, cancel = context.WithTimeout(ctx, s.opt.HandshakeTimeout)
	err = ctl.SendBytes(hctx, s.core.seeds[party][:])
	cancel()
	if err != nil {
		return fmt.Errorf("beaver: server: send seed to party %d: %w", party, err)
	}
	if party == 0 {
		return nil
	}

	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	last := time.Now()
	touch := func() {
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
						stop(fmt.Errorf("beaver: server: party 1 idle for %v", idle.Round(time.Millisecond)))
						return
					}
				}
			}
		}()
	}
	opened := map[uint32]bool{controlID: true}
	for {
		msg, err := ctl.RecvBytes(ctx)
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
		opened[tid] = true
		st := conn.Stream(tid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveStream(ctx, st, pstream, touch)
		}()
	}
}

// serveStream answers the requests of one provider stream until ctx ends or
// the stream fails.
func (s *Server) serveStream(ctx context.Context, st *transport.Stream, pstream uint32, touch func()) {
	for {
		b, err := st.RecvBytes(ctx)
		if err != nil {
			return
		}
		touch()
		var corr []uint64
		r, err := DecodeRequest(b)
		if err == nil && r.Stream != pstream {
			err = fmt.Errorf("beaver: request for stream %d on the transport stream of provider stream %d", r.Stream, pstream)
		}
		if err == nil {
			corr, err = s.core.serve(r)
		}
		if err != nil {
			msg := append([]byte{statusError}, err.Error()...)
			if st.SendBytes(ctx, msg) != nil {
				return
			}
			continue
		}
		if st.SendBytes(ctx, []byte{statusOK}) != nil || st.SendWords(ctx, corr) != nil {
			return
		}
	}
}

func encodeHello(party int) []byte {
	return append([]byte(helloMagic), helloVersion, byte(party))
}

func decodeHello(b []byte) (int, error) {
	if len(b) != len(helloMagic)+2 || string(b[:4]) != helloMagic {
		return 0, fmt.Errorf("malformed hello (%d bytes)", len(b))
	}
	if b[4] != helloVersion {
		return 0, fmt.Errorf("hello version %d, want %d", b[4], helloVersion)
	}
	if b[5] > 1 {
		return 0, fmt.Errorf("hello from party %d, want 0 or 1", b[5])
	}
	return int(b[5]), nil
}

func decodeOpen(b []byte) (pstream, tid uint32, err error) {
	if len(b) != 8 {
		return 0, 0, fmt.Errorf("malformed open message (%d bytes, want 8)", len(b))
	}
	pstream = binary.LittleEndian.Uint32(b)
	tid = binary.LittleEndian.Uint32(b[4:])
	if tid == controlID {
		return 0, 0, errors.New("open message names the control stream")
	}
	return pstream, tid, nil
}

// Client is a party's Provider backed by a networked dealer (Server): it
// implements every Provider method. Party 0's client expands everything
// locally after the handshake; party 1's fetches correction words over the
// connection, one transport stream per provider stream.
type Client struct {
	*seededProvider
	net *netCorrector
}

// Connect performs the handshake with a Server over conn as party (0 or 1)
// and returns the party's Provider. The connection stays owned by the caller
// (close it when done).
func Connect(ctx context.Context, conn *transport.Conn, party int) (*Client, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("beaver: connect as party %d, want 0 or 1", party)
	}
	ctl := conn.Stream(controlID)
	if err := ctl.SendBytes(ctx, encodeHello(party)); err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: %w", err)
	}
	b, err := ctl.RecvBytes(ctx)
	if err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: receive seed: %w", err)
	}
	if len(b) != share.SeedSize {
		return nil, fmt.Errorf("beaver: connect to dealer: seed of %d bytes, want %d", len(b), share.SeedSize)
	}
	var seed share.Seed
	copy(seed[:], b)
	c := &Client{}
	if party == 1 {
		c.net = &netCorrector{conn: conn, ctl: ctl, streams: make(map[uint32]*clientStream), next: 1}
		c.seededProvider = newSeededProvider(1, seed, c.net)
	} else {
		c.seededProvider = newSeededProvider(0, seed, nil)
	}
	return c, nil
}

type netCorrector struct {
	conn *transport.Conn
	ctl  *transport.Stream

	mu      sync.Mutex // guards streams, next and sends on ctl
	streams map[uint32]*clientStream
	next    uint32
}

type clientStream struct {
	mu sync.Mutex
	st *transport.Stream
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
	status, err := cs.st.RecvBytes(ctx)
	if err != nil {
		s, rc := cost()
		return nil, s, rc, fmt.Errorf("receive status: %w", err)
	}
	if len(status) == 0 || status[0] != statusOK {
		s, rc := cost()
		if len(status) > 0 && status[0] == statusError {
			return nil, s, rc, fmt.Errorf("dealer refused: %s", status[1:])
		}
		return nil, s, rc, fmt.Errorf("malformed dealer status (%d bytes)", len(status))
	}
	corr := make([]uint64, r.CorrectionWords())
	err = cs.st.RecvWords(ctx, corr)
	s, rc := cost()
	if err != nil {
		return nil, s, rc, fmt.Errorf("receive correction: %w", err)
	}
	return corr, s, rc, nil
}

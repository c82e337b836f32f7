package dealer

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Client is a party's beaver.Provider backed by a networked dealer
// (Server); draw typed material through beaver.Typed{Provider: client}. It
// hands out no material before BindSession. Each party's client expands
// its local parts from its session seed and fetches its dealer words (those
// of the kinds dealt to it, beaver.Correlation.DealtTo: both parties draw
// some) over the connection, one transport stream per provider stream.
type Client struct {
	*seededProvider
	conn   *transport.Conn
	ctl    *transport.Stream
	budget uint64
	// shapes is the budget set by SetSessionBudget (0: none).
	shapes atomic.Uint64
}

var (
	_ beaver.Sequencer       = (*Client)(nil)
	_ beaver.SessionBudgeter = (*Client)(nil)
)

// SetSessionBudget implements beaver.SessionBudgeter: the client announces the
// smaller of work and ConnectOptions.Budget when it binds its session (0
// stands for none, either way; the dealer serves the smaller of the two
// parties' announcements). Called after BindSession it changes nothing
// for the bound session (a dealer never raises a session's budget).
func (c *Client) SetSessionBudget(work uint64) { c.shapes.Store(work) }

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
	// BindSession: the most dealer work (beaver.Request.DealerWork units) the
	// session may draw, over all its connections. The dealer serves the
	// smaller of the two parties' announcements (at most its own
	// ServerOptions.SessionBudget, which it also uses when neither
	// announces one: 0). Both parties of an honest computation know its
	// shapes, so each can announce what it needs (Work of a rehearsal's
	// requests, with room for resumes): then a data owner cannot make the
	// dealer work more than the model owner allows.
	Budget uint64
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
	if err := ctl.SendBytes(ctx, encodeHello(party)); err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: %w", err)
	}
	b, err := ctl.RecvBytes(ctx, maxStatusMsg)
	if err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer: receive reply: %w", err)
	}
	if _, err := decodeStatus(b, 0); err != nil {
		return nil, fmt.Errorf("beaver: connect to dealer as the %s: %w", roleName(party), err)
	}
	c := &Client{conn: conn, ctl: ctl, budget: opt.Budget}
	c.seededProvider = newSeededProvider(party, c.bindSession, nil)
	return c, nil
}

// bindSession presents id to the dealer and returns the session seed.
func (c *Client) bindSession(ctx context.Context, id beaver.SessionID) (share.Seed, corrector, error) {
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

func (n *netCorrector) correct(ctx context.Context, r beaver.Request) ([]uint64, int64, int64, error) {
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
	req, err := r.AppendBinary(make([]byte, 0, beaver.RequestSize))
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
func (n *netCorrector) correctSeq(ctx context.Context, rs []beaver.Request, deliver func(i int, corr []uint64) error) (int64, int64, error) {
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
		buf := make([]byte, 0, beaver.RequestSize)
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
func (cs *clientStream) reply(ctx context.Context, r beaver.Request, party int) ([]uint64, error) {
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

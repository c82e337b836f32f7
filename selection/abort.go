package selection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/selectformer/selectformer/transport"
)

// StreamAbort carries at most one message per party: the abort a party sends
// when its run fails, with the reason, just before it closes the
// connection. Nothing is sent on it in a run that succeeds, so it costs
// nothing there.
const StreamAbort uint32 = 3

// Bounds of the abort exchange.
const (
	// maxAbortReason bounds the reason text sent to the peer (bytes).
	maxAbortReason = 2048
	// maxAbortMessage bounds an abort message read from the peer (the
	// receive refuses a larger one before allocating it).
	maxAbortMessage = 8 << 10
	// abortSendTimeout bounds the sending of an abort to a peer that no
	// longer reads.
	abortSendTimeout = 5 * time.Second
	// abortLinger is how long a failing party waits, after sending its abort,
	// for the peer to read it and hang up before it closes the connection
	// itself (closing with unread data could reset the connection before the
	// abort is delivered).
	abortLinger = 2 * time.Second
)

// PeerAbortError is a party's error when its peer ended the session and
// said why: the peer's run failed (bad input, a setting rejected before the
// session revealed anything, a refused restart, a cancellation ...).
type PeerAbortError struct {
	// Party is the peer that ended the session (0 model owner, 1 data owner).
	Party int
	// Reason is the peer's error text.
	Reason string
}

func (e *PeerAbortError) Error() string {
	return fmt.Sprintf("selection: the %s ended the session: %s", roleName(e.Party), e.Reason)
}

func roleName(party int) string {
	if party == 0 {
		return "model owner"
	}
	return "data owner"
}

// abortMsg is the message on StreamAbort (JSON).
type abortMsg struct {
	// Party is the sender.
	Party int `json:"party"`
	// Reason is the sender's error text.
	Reason string `json:"reason"`
	// Mismatch, when the sender's handshake found a mismatch, names the field
	// and both values as the sender saw them.
	Mismatch *MismatchError `json:"mismatch,omitempty"`
}

// DecodeAbort parses a peer's abort message (StreamAbort).
func DecodeAbort(b []byte) (party int, reason string, mismatch *MismatchError, err error) {
	if len(b) > maxAbortMessage {
		return 0, "", nil, fmt.Errorf("selection: abort message of %d bytes", len(b))
	}
	var m abortMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, "", nil, fmt.Errorf("selection: abort message: %w", err)
	}
	if m.Party != 0 && m.Party != 1 {
		return 0, "", nil, fmt.Errorf("selection: abort message from party %d", m.Party)
	}
	if len(m.Reason) > maxAbortReason || !utf8.ValidString(m.Reason) {
		return 0, "", nil, fmt.Errorf("selection: abort message: reason of %d bytes", len(m.Reason))
	}
	if m.Mismatch != nil && (m.Mismatch.Field == "" || len(m.Mismatch.Field)+len(m.Mismatch.Local)+len(m.Mismatch.Peer)+len(m.Mismatch.Hint) > maxAbortReason) {
		return 0, "", nil, fmt.Errorf("selection: abort message: bad mismatch")
	}
	return m.Party, m.Reason, m.Mismatch, nil
}

// encodeAbort builds this party's abort message for err.
func encodeAbort(party int, err error) []byte {
	reason := err.Error()
	if len(reason) > maxAbortReason {
		reason = reason[:maxAbortReason-len("…")]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
		reason += "…"
	}
	m := abortMsg{Party: party, Reason: reason}
	var me *MismatchError
	if errors.As(err, &me) {
		m.Mismatch = me
	}
	b, _ := json.Marshal(m)
	return b
}

// abortWatch watches StreamAbort for the peer's abort and cancels the run
// when it arrives.
type abortWatch struct {
	conn   *transport.Conn
	party  int
	cancel context.CancelFunc // the run's context
	stopRx context.CancelFunc // ends the reader
	done   chan struct{}      // closed when the reader has returned

	mu   sync.Mutex
	peer *PeerAbortError
	mm   *MismatchError // the peer's mismatch, seen from this side
}

// watchAbort starts the reader; cancel is called when the peer aborts.
func watchAbort(conn *transport.Conn, party int, cancel context.CancelFunc) *abortWatch {
	rx, stop := context.WithCancel(context.Background())
	a := &abortWatch{conn: conn, party: party, cancel: cancel, stopRx: stop, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		// The stream drains what the peer sent before the connection died, so
		// an abort followed by the peer's close is always read.
		b, err := conn.Stream(StreamAbort).RecvBytes(rx, maxAbortMessage)
		if err != nil {
			return
		}
		p, reason, mm, err := DecodeAbort(b)
		if err != nil {
			reason = fmt.Sprintf("unreadable abort message (%v)", err)
			p, mm = 1-party, nil
		}
		if p == party {
			reason = fmt.Sprintf("abort message claims to come from party %d: %s", p, reason)
		}
		a.mu.Lock()
		a.peer = &PeerAbortError{Party: 1 - party, Reason: reason}
		if mm != nil {
			a.mm = &MismatchError{Field: mm.Field, Local: mm.Peer, Peer: mm.Local, Hint: mm.Hint}
		}
		a.mu.Unlock()
		cancel()
	}()
	return a
}

// peerErr returns the peer's abort as an error (nil if none arrived).
func (a *abortWatch) peerErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mm != nil {
		return a.mm
	}
	if a.peer != nil {
		return a.peer
	}
	return nil
}

// stop ends the reader (after a successful run).
func (a *abortWatch) stop() {
	a.stopRx()
	<-a.done
}

// fail ends a failed run: if the peer aborted, its reason is the error (a
// local handshake mismatch is kept); if the connection died, the reader is
// given the chance to read an abort the peer sent before it went;
// otherwise this party's own failure is sent to the peer. In every case the
// connection is closed, so that a peer never waits on it.
func (a *abortWatch) fail(err error) error {
	defer a.conn.Close()
	var me *MismatchError
	local := errors.As(err, &me)
	select {
	case <-a.conn.Done():
		// The reader drains the queued frames and returns.
		<-a.done
	default:
	}
	if perr := a.peerErr(); perr != nil && !local {
		a.stopRx()
		<-a.done
		return perr
	}
	if a.conn.Err() != nil {
		a.stopRx()
		<-a.done
		if perr := a.peerErr(); perr != nil && !local {
			return perr
		}
		return err
	}
	if a.peerErr() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), abortSendTimeout)
		serr := a.conn.Stream(StreamAbort).SendBytes(ctx, encodeAbort(a.party, err))
		cancel()
		if serr == nil {
			// Let the peer read the abort and hang up first.
			t := time.NewTimer(abortLinger)
			select {
			case <-a.conn.Done():
			case <-a.done:
			case <-t.C:
			}
			t.Stop()
		}
	}
	a.stopRx()
	<-a.done
	return err
}

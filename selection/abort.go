package selection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/marks"
	"github.com/selectformer/selectformer/internal/strictjson"
	"github.com/selectformer/selectformer/transport"
)

// StreamAbort carries at most one message per party: the abort a party sends
// when its run fails, with a public reason code (AbortCode), just before it
// closes the connection. Nothing is sent on it in a run that succeeds, so it
// costs nothing there.
const StreamAbort uint32 = 3

// Bounds of the abort exchange.
const (
	// maxAbortMessage bounds an abort message read from the peer (bytes):
	// the message is a party, a code and at most a field name from a closed
	// list, some 60 bytes.
	maxAbortMessage = 256
	// abortSendTimeout bounds the sending of an abort to a peer that no
	// longer reads.
	abortSendTimeout = 5 * time.Second
	// abortLinger is how long a failing party waits, after sending its abort,
	// for the peer to read it and hang up before it closes the connection
	// itself (closing with unread data could reset the connection before the
	// abort is delivered).
	abortLinger = 2 * time.Second
)

// AbortCode is the reason a party gives its peer when its run fails: one of
// a closed set, each with a fixed public wording (String). The error itself
// may name files, settings, candidate numbers, pool values or weights; it
// stays with the failing party (its Run's error and its log), and only the
// code crosses the wire, so an abort tells the peer no more than which class
// of failure ended the session.
type AbortCode uint16

// The abort codes. A code the receiver does not know is reported as
// "unknown abort code N".
const (
	// AbortInternal: a failure of no public class (an evaluation, an I/O or
	// a dealer error, a value out of the fixed-point range ...).
	AbortInternal AbortCode = 1
	// AbortCancelled: the party's context ended (cancelled or past its
	// deadline).
	AbortCancelled AbortCode = 2
	// AbortInput: the party's own inputs or settings were refused by the
	// checks Run makes before it says anything to the peer (parameters,
	// weights, pool, proxy generation settings, Label function), or its
	// labelling or proxy generation failed.
	AbortInput AbortCode = 3
	// AbortMismatch: the handshake found a mismatch of public parameters;
	// the message names the field (one of the MismatchError fields).
	AbortMismatch AbortCode = 4
	// AbortState: a checkpoint file (state, batch or saved proxy) is
	// unreadable, malformed or could not be written (a *StateError, or a
	// failed write).
	AbortState AbortCode = 5
	// AbortStateParams: the party's checkpoint belongs to a selection with
	// other parameters.
	AbortStateParams AbortCode = 6
	// AbortBootstrapRevealed: the data owner already sent the bootstrap
	// sample of this session and sends no other (ErrBootstrapRevealed).
	AbortBootstrapRevealed AbortCode = 7
	// AbortProtocol: a message from the peer broke the protocol (it does not
	// decode, or fails a check: a coin toss opening, the architectures, the
	// bootstrap's shape).
	AbortProtocol AbortCode = 8
	// AbortLimit: a message from the peer exceeded a size bound.
	AbortLimit AbortCode = 9
	// AbortResume: the party refused to resume at the epoch the peer
	// announced (an *EpochError), or at positions its persistent
	// high-water marks say it drew before (marks.ErrReuse): either would
	// reuse correlated randomness (a forged or rolled-back checkpoint).
	AbortResume AbortCode = 10
	// AbortCorrelation: a check of the peer's part in making correlated
	// randomness failed (beaver.ErrCorrelationCheck: with -provider he, the
	// data owner's outputs did not match what it committed to; with
	// -provider ot or he, the OT extension's consistency check of the
	// peer's corrections, ot.ErrExtensionCheck). The party holds nothing
	// derived from the failed item, and its provider binds no session
	// after it (a Lattice's key is discarded).
	AbortCorrelation AbortCode = 11
	// AbortOpening: a bootstrap point the data owner sent does not open
	// its commitment to its pool (its candidate, salt or Merkle path do
	// not lead to the root it announced), or its input is not the one the
	// opened candidate gives. The model owner labels nothing.
	AbortOpening AbortCode = 12
)

// abortWording is the public wording of each code.
var abortWording = map[AbortCode]string{
	AbortInternal:          "its run failed (the details are in its log)",
	AbortCancelled:         "its run was cancelled or ran out of time",
	AbortInput:             "it refused its own inputs or settings, or could not label the bootstrap or generate its proxies (the details are in its log)",
	AbortMismatch:          "handshake mismatch",
	AbortState:             "its checkpoint could not be read or written (the details are in its log)",
	AbortStateParams:       "its checkpoint belongs to a selection with other parameters (use another state directory, or the parameters it was written with)",
	AbortBootstrapRevealed: ErrBootstrapRevealed.Error() + " (restore the model owner's state directory, or start a new session with a fresh data-owner state directory)",
	AbortProtocol:          "a message it received broke the protocol",
	AbortLimit:             "a message it received exceeded a size bound",
	AbortResume:            "it refused to resume: the announced epoch or a restored checkpoint would reuse correlated randomness (restore both parties' latest state, or start a new session)",
	AbortCorrelation:       "a message it received failed the check of the correlated randomness: it was altered (the session's key is discarded; nothing derived from it was used)",
	AbortOpening:           "a bootstrap point does not match the data owner's commitment to its pool (nothing was labelled)",
}

// String returns the code's public wording ("unknown abort code N" for a
// code outside the set).
func (c AbortCode) String() string {
	if s, ok := abortWording[c]; ok {
		return s
	}
	return fmt.Sprintf("unknown abort code %d", uint16(c))
}

// MismatchFields are the handshake fields a MismatchError (and an
// AbortMismatch message) may name: public parameters, announced by both
// parties in the clear.
var MismatchFields = []string{"version", "party", "fixed_point.frac_bits", "fixed_point.int_bits", "provider", "provider_params",
	"pool_size", "budget", "bootstrap", "schedule", "batch_size", "workers", "appraisal", "seq", "embedding_hash", "view_hash", "shards",
	"shard_session", "phase", "shard", "candidates", "arch", "pool_root"}

// ErrConnectionLost is wrapped by the error of a run whose connection to
// the peer died before the run failed, with no abort from the peer: the
// peer crashed or was killed, or the link dropped. Nobody told the other
// side why; restarting both parties with their state directories resumes
// the selection.
var ErrConnectionLost = errors.New("selection: the connection to the peer was lost")

// PeerAbortError is a party's error when its peer ended the session and
// said why: the peer's run failed (bad input, a setting rejected before the
// session revealed anything, a refused restart, a cancellation ...). The
// reason is the code's public wording: the peer's own error stays in its
// log.
type PeerAbortError struct {
	// Party is the peer that ended the session (0 model owner, 1 data owner).
	Party int
	// Code is the peer's reason code.
	Code AbortCode
	// Field, for AbortMismatch, is the mismatched handshake field (one of
	// MismatchFields), or "".
	Field string
	// Reason is the code's public wording (with Field), or what was wrong
	// with an unreadable abort message.
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

// abortReason is the public wording of code (with field).
func abortReason(code AbortCode, field string) string {
	if code == AbortMismatch && field != "" {
		return fmt.Sprintf("handshake: %s mismatch", field)
	}
	return code.String()
}

// abortMsg is the message on StreamAbort (JSON): nothing but public
// constants.
type abortMsg struct {
	// Party is the sender.
	Party int `json:"party"`
	// Code is the sender's reason.
	Code AbortCode `json:"code"`
	// Field, with AbortMismatch, names the mismatched handshake field.
	Field string `json:"field,omitempty"`
}

// DecodeAbort parses a peer's abort message (StreamAbort): at most 256
// bytes, a party of 0 or 1, a code (one outside the known set is kept and
// reported as "unknown abort code N") and, with AbortMismatch only, a field
// of MismatchFields. It returns the abort as the receiver reports it.
func DecodeAbort(b []byte) (*PeerAbortError, error) {
	if len(b) > maxAbortMessage {
		return nil, fmt.Errorf("selection: abort message of %d bytes (at most %d)", len(b), maxAbortMessage)
	}
	var m abortMsg
	if err := strictjson.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("selection: abort message: %w", err)
	}
	if m.Party != 0 && m.Party != 1 {
		return nil, fmt.Errorf("selection: abort message from party %d", m.Party)
	}
	if m.Code == 0 {
		return nil, fmt.Errorf("selection: abort message without a code")
	}
	if m.Field != "" && (m.Code != AbortMismatch || !slices.Contains(MismatchFields, m.Field)) {
		return nil, fmt.Errorf("selection: abort message: code %d with a field that is not a handshake field", uint16(m.Code))
	}
	return &PeerAbortError{Party: m.Party, Code: m.Code, Field: m.Field, Reason: abortReason(m.Code, m.Field)}, nil
}

// codedError gives an error its abort code (see classifyAbort).
type codedError struct {
	code AbortCode
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode gives err the abort code code (nil stays nil).
func withCode(code AbortCode, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// WithAbortCode gives err the abort code code (nil stays nil): a run that
// fails with it, or with an error wrapping it, tells the peer code. A
// ShardRunner marks so, for instance, a worker's answer that broke the
// internal protocol (AbortProtocol).
func WithAbortCode(code AbortCode, err error) error { return withCode(code, err) }

// AbortCodeOf returns the abort code a run that fails with err tells its
// peer (AbortInternal for an error of no public class).
func AbortCodeOf(err error) AbortCode {
	code, _ := classifyAbort(err)
	return code
}

// classifyAbort returns the abort code of a failed run's error (and the
// mismatched field of a handshake mismatch). Anything not of a public
// class is AbortInternal.
func classifyAbort(err error) (AbortCode, string) {
	var (
		me *MismatchError
		se *StateError
		ce *codedError
		ee *EpochError
	)
	switch {
	case errors.As(err, &me):
		if slices.Contains(MismatchFields, me.Field) {
			return AbortMismatch, me.Field
		}
		return AbortMismatch, ""
	case errors.Is(err, ErrBootstrapRevealed):
		return AbortBootstrapRevealed, ""
	case errors.Is(err, errOtherParams):
		return AbortStateParams, ""
	case errors.As(err, &ee), errors.Is(err, marks.ErrReuse):
		return AbortResume, ""
	case errors.Is(err, beaver.ErrCorrelationCheck):
		return AbortCorrelation, ""
	case errors.As(err, &se):
		return AbortState, ""
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return AbortCancelled, ""
	case errors.As(err, &ce):
		return ce.code, ""
	}
	return AbortInternal, ""
}

// encodeAbort builds this party's abort message for err: its code (and a
// mismatch's field), never its text.
func encodeAbort(party int, err error) []byte {
	code, field := classifyAbort(err)
	b, _ := json.Marshal(abortMsg{Party: party, Code: code, Field: field})
	return b
}

// abortWatch watches StreamAbort for the peer's abort and cancels the run
// when it arrives.
type abortWatch struct {
	conn   *transport.Conn
	party  int
	log    *slog.Logger
	cancel context.CancelFunc // the run's context
	stopRx context.CancelFunc // ends the reader
	done   chan struct{}      // closed when the reader has returned

	mu   sync.Mutex
	peer *PeerAbortError
	mm   *MismatchError // the peer's mismatch, seen from this side
}

// watchAbort starts the reader; cancel is called when the peer aborts.
// onMsg, if set (tests), sees the peer's abort message as received.
func watchAbort(conn *transport.Conn, party int, log *slog.Logger, cancel context.CancelFunc, onMsg func([]byte)) *abortWatch {
	rx, stop := context.WithCancel(context.Background())
	a := &abortWatch{conn: conn, party: party, log: log, cancel: cancel, stopRx: stop, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		// The stream drains what the peer sent before the connection died, so
		// an abort followed by the peer's close is always read.
		b, err := conn.Stream(StreamAbort).RecvBytes(rx, maxAbortMessage)
		if err != nil {
			return
		}
		if onMsg != nil {
			onMsg(b)
		}
		pa, err := DecodeAbort(b)
		if err != nil {
			// What was wrong is bounded: DecodeAbort's errors name sizes and
			// codes, and quote at most a few bytes of a JSON syntax error.
			a.log.Warn("selection: unreadable abort message from the peer", "party", party, "bytes", len(b), "err", err)
			pa = &PeerAbortError{Party: 1 - party, Reason: "unreadable abort message"}
		}
		if pa.Party == party {
			pa = &PeerAbortError{Party: 1 - party, Code: pa.Code, Field: pa.Field,
				Reason: fmt.Sprintf("abort message claims to come from party %d: %s", party, pa.Reason)}
		}
		a.mu.Lock()
		a.peer = pa
		if pa.Code == AbortMismatch && pa.Field != "" {
			// The peer's values are not on the wire (both hellos are, in the
			// clear: this side reports its own comparison when it has one).
			a.mm = &MismatchError{Field: pa.Field, Local: "(not compared here)", Peer: "(differs, says the peer's abort)"}
			if pa.Field == "embedding_hash" {
				a.mm.Hint = EmbeddingHint
			}
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
// otherwise this party's failure is logged in full and its public reason
// code sent to the peer. In every case the connection is closed, so that a
// peer never waits on it.
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
		// No abort can reach the peer; the details go to the debug log.
		if local {
			return err
		}
		a.log.Warn("selection: run failed: the connection to the peer was lost, so it is not told", "party", a.party, "conn", a.conn.Err())
		a.log.Debug("selection: run failed", "party", a.party, "err", err)
		return fmt.Errorf("%w: %w", ErrConnectionLost, err)
	}
	if a.peerErr() == nil {
		msg := encodeAbort(a.party, err)
		code, field := classifyAbort(err)
		if code == AbortCancelled {
			// Stopped on purpose (an interrupt): no failure to warn of,
			// the chain of cancelled calls is for debugging only.
			a.log.Info("selection: run cancelled; telling the peer", "party", a.party, "code", uint16(code))
			a.log.Debug("selection: run cancelled", "party", a.party, "err", err)
		} else {
			a.log.Warn("selection: run failed; the peer is told the public reason only", "party", a.party,
				"code", uint16(code), "reason", abortReason(code, field), "err", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), abortSendTimeout)
		serr := a.conn.Stream(StreamAbort).SendBytes(ctx, msg)
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

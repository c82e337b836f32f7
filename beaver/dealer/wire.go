package dealer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Networked dealer. A Server holds the seeds of the dealer and serves each
// party over its own transport.Conn (TLS-authenticated when made with
// transport.Dial/Listen); the caller says which role the connection is bound
// to (the listener it came in on, which pins that role's key):
//
//   - On the control stream (id 0) the party sends a 6-byte hello ("SFDL",
//     version 5, party: 0 or 1; version 5 deals the words of some built-in
//     kinds to party 0, beaver.Correlation.DealtTo, so a version-4 party
//     would lay its material out otherwise). A hello claiming another role than the
//     connection's, or a connection whose key is not the role's pinned key
//     (ServerOptions.Fingerprints), is refused: the party receives an error
//     status (one byte 1 followed by an error text naming both roles), the
//     refusal is logged, and the connection ends without a byte of
//     material. Otherwise it receives the status byte 0.
//   - When the party knows the session id (see beaver.SessionID) it sends a
//     44-byte session message ("SFSN", id, the session budget it announces
//     as a little-endian uint64: ConnectOptions.Budget, 0 for none). The
//     dealer waits until the other role has presented an id too, refuses
//     both if the ids differ, and otherwise replies with the status byte 0
//     and the party's 32-byte session seed (never the dealer's own seed).
//     The session's budget is the smaller of the two announcements (the
//     dealer's ServerOptions.SessionBudget where neither announces one, and
//     at most that).
//   - Each party (both draw dealer words: those of the kinds dealt to it)
//     announces each of its provider streams on the control stream
//     with an 8-byte open message (provider stream, transport stream ≥ 1,
//     little-endian uint32s) and then, on that transport stream, sends one
//     40-byte request per item (see beaver.Request.AppendBinary) and receives a
//     status message (one byte 0, or 1 followed by an error text) and, on
//     success, the item's dealer words (beaver.Request.CorrectionWords).
//
// The server checks every request (sizes, no counter reused on a stream of
// the session, one shape per weight id, the request's stream matches the
// transport stream's) and answers a bad request with an error status
// rather than dying. It bounds what a party can make it do: each request's
// parts and multiply-adds (MaxRequestWords, MaxRequestMACs, checked before
// anything is allocated), the session's total work (its budget, counted in
// beaver.Request.DealerWork units), the streams of a connection and of a session
// (MaxStreams), the items in progress per role and key
// (MaxConcurrentRequests), the connections per role and key
// (MaxConnsPerKey, the hello and session waits included) and the live
// sessions (MaxSessions, SessionRetention). With a StateFile, the
// high-water marks of every session's streams survive a restart, so a
// restarted dealer refuses counters it served before.

const (
	helloMagic     = "SFDL"
	helloVersion   = 5
	sessionMagic   = "SFSN"
	controlID      = 0
	statusOK       = 0
	statusError    = 1
	maxStatusText  = 4096
	sessionMsgSize = len(sessionMagic) + len(beaver.SessionID{}) + 8
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

func encodeHello(party int) []byte {
	return append([]byte(helloMagic), helloVersion, byte(party))
}

// decodeHello returns the party of a hello.
func decodeHello(b []byte) (party int, err error) {
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

func encodeSession(id beaver.SessionID, budget uint64) []byte {
	b := append([]byte(sessionMagic), id[:]...)
	return binary.LittleEndian.AppendUint64(b, budget)
}

func decodeSession(b []byte) (beaver.SessionID, uint64, error) {
	var id beaver.SessionID
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

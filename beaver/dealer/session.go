package dealer

import (
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Sessions. A dealer's seeds serve any number of computations; what keeps
// them apart is the session id. Every stream key (and every weight mask) of
// a party is derived from the party's session seed,
//
//	HKDF-SHA256(secret = dealer seed of the party, salt = session id,
//	            info = "selectformer/beaver/session/v1/party=P"),
//
// which the dealer computes and hands out (the networked dealer never sends
// its own seeds). Two sessions with different ids therefore share no word of
// material, whatever their counters, and a dealer restarted with the same
// seeds cannot repeat an earlier session's material unless both parties
// present that session's id again — which they do only to resume it, at
// counters above everything served before (see ServerOptions.StateFile).
//
// The id is agreed by the two parties, each contributing fresh randomness
// (selection derives it from the joint coin toss, so neither party alone can
// force an old id), and each party presents it to the dealer itself: the
// dealer serves a session only once both roles have presented the same id.

// sessionSeed derives party's seed of session id from the dealer's seed of
// that party.
func sessionSeed(seed share.Seed, id beaver.SessionID, party int) share.Seed {
	var out share.Seed
	k, err := hkdf.Key(sha256.New, seed[:], id[:], fmt.Sprintf("selectformer/beaver/session/v1/party=%d", party), len(out))
	if err != nil { // only possible for absurd output lengths
		panic("beaver: hkdf: " + err.Error())
	}
	copy(out[:], k)
	return out
}

// DefaultSessionTimeout bounds how long a dealer waits for a party's session
// id and for the other party to present the same id.
const DefaultSessionTimeout = 15 * time.Minute

// ErrRefused marks an error of a party's handshake with the dealer after
// which the party received no material: a malformed or refused hello (wrong
// role), a refused session (ids that differ, a session bound to other keys)
// or a timeout. Serve's errors wrap it when the party got nothing.
var ErrRefused = errors.New("refused before any material was served")

// RoleError is the dealer's refusal of a hello that claims another role than
// the one bound to the connection (by its listener and pinned key).
type RoleError struct {
	// Claimed is the party the hello claimed, Bound the party of the
	// connection's listener and key.
	Claimed, Bound int
	// Key is the fingerprint of the connection's key ("" over a Pipe).
	Key string
}

// Error names both roles.
func (e *RoleError) Error() string {
	key := ""
	if e.Key != "" {
		key = " and key " + e.Key
	}
	return fmt.Sprintf("beaver: dealer: hello claims the %s, but this connection is bound to the %s by its listener%s; refused",
		roleName(e.Claimed), roleName(e.Bound), key)
}

// Is makes a RoleError match ErrRefused.
func (e *RoleError) Is(target error) bool { return target == ErrRefused }

// roleName names party p for messages.
func roleName(p int) string {
	switch p {
	case 0:
		return "model owner (party 0)"
	case 1:
		return "data owner (party 1)"
	}
	return fmt.Sprintf("party %d", p)
}

// refused wraps err so that it matches ErrRefused.
func refused(err error) error { return &refusedError{err} }

type refusedError struct{ err error }

func (e *refusedError) Error() string        { return e.err.Error() }
func (e *refusedError) Unwrap() error        { return e.err }
func (e *refusedError) Is(target error) bool { return target == ErrRefused }

package beaver

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// SessionID identifies one two-party computation at the dealer. The zero id
// is reserved for the in-process dealer's default session (see
// Dealer.Provider); a networked dealer refuses it.
type SessionID [32]byte

// String returns the id as 64 hex digits.
func (id SessionID) String() string { return hex.EncodeToString(id[:]) }

// Short returns the first 16 hex digits, for messages.
func (id SessionID) Short() string { return hex.EncodeToString(id[:8]) }

// IsZero reports whether id is the reserved zero id.
func (id SessionID) IsZero() bool { return id == SessionID{} }

// NewSessionID returns a uniformly random session id, for a caller that has
// no jointly drawn one (a benchmark driving both parties, a test). Two
// parties that distrust each other should derive the id from randomness both
// contribute, as selection does.
func NewSessionID() (SessionID, error) {
	var id SessionID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("beaver: new session id: %w", err)
	}
	return id, nil
}

// ParseSessionID parses 64 hex digits.
func ParseSessionID(s string) (SessionID, error) {
	var id SessionID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("beaver: session id %q: want %d hex digits", s, 2*len(id))
	}
	copy(id[:], b)
	return id, nil
}

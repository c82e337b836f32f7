package dealer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/internal/strictjson"
	"github.com/selectformer/selectformer/share"
)

// The dealer's state file (ServerOptions.StateFile) keeps, per session, the
// keys of the two parties it was served to, per stream a high-water mark
// (every counter served on that stream lies below it), the session's budget
// and the work charged against it, and when the session was last joined. A
// dealer restarted from its seeds and this file refuses every counter below
// the mark. Marks are reserved ahead in chunks of reserveChunk counters
// (rounded up to a multiple of it, so a mark never crosses a boundary that
// a resumed run jumps to, such as selection's epochs), so the file is
// rewritten once per new session, new stream and reserveChunk items, not
// once per item; a crash burns at most the rest of a chunk. Concurrent
// requests that need a new mark share one write (group commit: a request
// waits, outside the dealer's lock, for the first write that includes its
// mark), and the work charged (spent) and the last-joined times travel with
// whatever write comes next (a crash forgets at most the work charged since
// the last write).
//
// Sessions are retired (ServerOptions.SessionRetention, MaxSessions): a
// retired session's record is replaced by an 8-byte tag of its id
// (retiredTag) in the set "retired", so the file stays bounded while the
// dealer still refuses the id for good — a retired id that came back would
// otherwise be served again from its counters 0. The tags are bounded by
// maxRetired: a dealer whose set is full refuses new sessions until it is
// given fresh seeds (and a fresh state file).
//
// Format (JSON, mode 0600, replaced atomically; version 1 files, without
// last, budget, spent and retired, are read too):
//
//	{"version": 2, "seeds": "<hex SHA-256 tag of the dealer's seeds>",
//	 "sessions": [{"id": "<64 hex>", "keys": ["<p0 fingerprint>", "<p1>"],
//	               "marks": {"<stream>": <mark>, ...}, "last": <unix s>,
//	               "budget": <work>, "spent": <work>}, ...],
//	 "retired": "<base64 of the sorted 8-byte tags of retired ids>"}

const (
	stateVersion = 2
	// oldStateVersion is the version without budgets and retired ids,
	// still read.
	oldStateVersion = 1
	// reserveChunk is the granularity of persisted high-water marks.
	reserveChunk = 1 << 16
	// maxStateFile bounds the state file read back.
	maxStateFile = 256 << 20
	// maxKeyLen bounds a stored key fingerprint.
	maxKeyLen = 128
	// maxStateSessions bounds the live sessions of a state file read back
	// (ServerOptions.MaxSessions is at most this).
	maxStateSessions = 1 << 16
	// maxRetired bounds the retired session tags a dealer keeps: 8 MiB.
	maxRetired = 1 << 20
)

// ErrBadStateFile marks a dealer state file that cannot be used: malformed,
// truncated, too large or written for other seeds.
var ErrBadStateFile = errors.New("bad dealer state file")

// dealerState is the decoded state file.
type dealerState struct {
	seeds    [32]byte
	sessions map[beaver.SessionID]*persisted
	retired  map[retiredTag]struct{}
}

// persisted is what the state file keeps of one session.
type persisted struct {
	keys  [2]string
	marks map[uint32]uint64
	// last is when the session was last joined (Unix seconds; 0 in a
	// version 1 file: the time it was loaded).
	last int64
	// budget is the session's budget of dealer work (0 until the first
	// join sets it) and spent the work charged against it.
	budget, spent uint64
}

// retiredTag is what the state file keeps of a retired session: the first
// 8 bytes of a SHA-256 of its id. The same id always gives the same tag, so
// a retired id is always refused; a fresh random id is refused by a tag
// collision with probability (retired ids) / 2^64.
type retiredTag [8]byte

// tagOf returns the retired tag of id.
func tagOf(id beaver.SessionID) retiredTag {
	h := sha256.Sum256(append([]byte("selectformer/beaver/retired/v1"), id[:]...))
	var t retiredTag
	copy(t[:], h[:])
	return t
}

type stateJSON struct {
	Version  int           `json:"version"`
	Seeds    string        `json:"seeds"`
	Sessions []sessionJSON `json:"sessions"`
	Retired  string        `json:"retired,omitempty"`
}

type sessionJSON struct {
	ID     string            `json:"id"`
	Keys   [2]string         `json:"keys"`
	Marks  map[uint32]uint64 `json:"marks"`
	Last   int64             `json:"last,omitempty"`
	Budget uint64            `json:"budget,omitempty"`
	Spent  uint64            `json:"spent,omitempty"`
}

// seedsTag identifies a pair of dealer seeds without revealing them.
func seedsTag(s0, s1 share.Seed) [32]byte {
	h := sha256.New()
	h.Write([]byte("selectformer/beaver/dealer-state/seeds/v1"))
	h.Write(s0[:])
	h.Write(s1[:])
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// validKey reports whether k may be stored as a key fingerprint: empty (a
// connection without a key, as a Pipe) or up to maxKeyLen lower-case hex
// digits.
func validKey(k string) bool {
	if len(k) > maxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeDealerState parses and validates a state file. It never panics;
// every error wraps ErrBadStateFile.
func decodeDealerState(b []byte) (*dealerState, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadStateFile, fmt.Sprintf(format, args...))
	}
	if len(b) > maxStateFile {
		return nil, bad("%d bytes, at most %d", len(b), maxStateFile)
	}
	var j stateJSON
	if err := strictjson.Unmarshal(b, &j); err != nil {
		return nil, bad("%v", err)
	}
	if j.Version != stateVersion && j.Version != oldStateVersion {
		return nil, bad("version %d, want %d", j.Version, stateVersion)
	}
	if len(j.Sessions) > maxStateSessions {
		return nil, bad("%d sessions, at most %d", len(j.Sessions), maxStateSessions)
	}
	st := &dealerState{sessions: make(map[beaver.SessionID]*persisted, len(j.Sessions)), retired: map[retiredTag]struct{}{}}
	sb, err := hex.DecodeString(j.Seeds)
	if err != nil || len(sb) != len(st.seeds) {
		return nil, bad("seeds tag %q", j.Seeds)
	}
	copy(st.seeds[:], sb)
	for i, s := range j.Sessions {
		id, err := beaver.ParseSessionID(s.ID)
		if err != nil || id.IsZero() {
			return nil, bad("session %d: id %q", i, s.ID)
		}
		if _, dup := st.sessions[id]; dup {
			return nil, bad("session %s listed twice", id.Short())
		}
		for r, k := range s.Keys {
			if !validKey(k) {
				return nil, bad("session %s: key of party %d %q", id.Short(), r, k)
			}
		}
		if len(s.Marks) > beaver.MaxSessionStreams {
			return nil, bad("session %s: %d streams, at most %d", id.Short(), len(s.Marks), beaver.MaxSessionStreams)
		}
		marks := s.Marks
		if marks == nil {
			marks = map[uint32]uint64{}
		}
		if s.Last < 0 {
			return nil, bad("session %s: last joined at %d", id.Short(), s.Last)
		}
		st.sessions[id] = &persisted{keys: s.Keys, marks: marks, last: s.Last, budget: s.Budget, spent: s.Spent}
	}
	if j.Version == oldStateVersion && j.Retired != "" {
		return nil, bad("retired ids in a version %d file", j.Version)
	}
	if len(j.Retired) > base64.StdEncoding.EncodedLen(8*maxRetired) {
		return nil, bad("more than %d retired ids", maxRetired)
	}
	tags, err := base64.StdEncoding.DecodeString(j.Retired)
	if err != nil || len(tags)%8 != 0 {
		return nil, bad("retired ids: not base64 of 8-byte tags")
	}
	for i := 0; i < len(tags); i += 8 {
		if i > 0 && bytes.Compare(tags[i-8:i], tags[i:i+8]) >= 0 {
			return nil, bad("retired ids not in ascending order")
		}
		st.retired[retiredTag(tags[i:i+8])] = struct{}{}
	}
	for id := range st.sessions {
		if _, ok := st.retired[tagOf(id)]; ok {
			return nil, bad("session %s is both live and retired", id.Short())
		}
	}
	return st, nil
}

// encode returns the state file's bytes (sessions in id order).
func (st *dealerState) encode() ([]byte, error) {
	j := stateJSON{Version: stateVersion, Seeds: hex.EncodeToString(st.seeds[:]), Sessions: make([]sessionJSON, 0, len(st.sessions))}
	ids := make([]beaver.SessionID, 0, len(st.sessions))
	for id := range st.sessions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b beaver.SessionID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		p := st.sessions[id]
		marks := p.marks
		if marks == nil {
			marks = map[uint32]uint64{}
		}
		j.Sessions = append(j.Sessions, sessionJSON{ID: id.String(), Keys: p.keys, Marks: marks, Last: p.last, Budget: p.budget, Spent: p.spent})
	}
	if len(st.retired) > 0 {
		tags := make([]retiredTag, 0, len(st.retired))
		for t := range st.retired {
			tags = append(tags, t)
		}
		slices.SortFunc(tags, func(a, b retiredTag) int { return bytes.Compare(a[:], b[:]) })
		raw := make([]byte, 0, 8*len(tags))
		for _, t := range tags {
			raw = append(raw, t[:]...)
		}
		j.Retired = base64.StdEncoding.EncodeToString(raw)
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("beaver: encode dealer state: %w", err)
	}
	return append(b, '\n'), nil
}

// loadDealerState reads the state file at path for the seeds tagged tag; a
// missing file gives an empty state.
func loadDealerState(path string, tag [32]byte) (*dealerState, error) {
	b, err := atomicfile.ReadLimited(path, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return &dealerState{seeds: tag, sessions: map[beaver.SessionID]*persisted{}, retired: map[retiredTag]struct{}{}}, nil
	}
	if errors.Is(err, atomicfile.ErrTooLarge) {
		return nil, fmt.Errorf("beaver: dealer state %s: %w: %w", path, ErrBadStateFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("beaver: dealer state %s: %w", path, err)
	}
	st, err := decodeDealerState(b)
	if err != nil {
		return nil, fmt.Errorf("beaver: dealer state %s: %w", path, err)
	}
	if st.seeds != tag {
		return nil, fmt.Errorf("beaver: dealer state %s: %w: written for other seeds", path, ErrBadStateFile)
	}
	return st, nil
}

// save writes st to path atomically, mode 0600.
func (st *dealerState) save(path string) error {
	b, err := st.encode()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("beaver: save dealer state: %w", err)
	}
	return nil
}

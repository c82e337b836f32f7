package beaver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sync"

	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/internal/strictjson"
)

// Marked is the party-side counterpart of the dealer's state file: a
// Provider wrapper that keeps, per session, a persistent high-water mark of
// the positions the party has drawn — per stream, every counter drawn lies
// below the stream's mark, and every weight id whose mask was handed out
// lies below the weight mark — and never draws below a mark it loaded,
// whatever the caller (or a peer steering the caller) asks for.
//
// A party whose provider expands its material locally from its session
// seed (party 0's masks and triples, party 1's masks; see Dealer and
// Client) is the only one who could notice that it expands a position
// twice: the dealer never sees party 0's counters. A resumed computation
// seeks every stream past the material it used (Provider.Seek); Marked
// makes that promise hold across restarts of the process, from its file
// alone:
//
//   - Material and MaterialSeq refuse an item whose counter (the wrapped
//     provider's Position) lies below the stream's loaded mark or below a
//     counter this Marked already drew; the mark is raised on disk before
//     the wrapped provider draws the item.
//   - Seek refuses a position below the stream's loaded mark (once bound).
//   - A weight mask (WeightMask) is handed out at most once per weight
//     id, and never for an id below the loaded weight mark: the model owner
//     reveals F = W − B once per id (protocol.Session.ShareWeight), and the
//     same B under two reveals would leak the difference of the two
//     matrices.
//
// Marks are reserved ahead in chunks of 2^ChunkBits positions (rounded up to
// a multiple, as the dealer does), so the file is rewritten once per new
// stream and chunk, not once per item; a crash burns at most the rest of a
// chunk. Every refusal wraps ErrReuse. Marked must be bound (BindSession)
// to a non-zero session before it hands out material. It takes the
// positions from the wrapped provider's Position, so it should wrap the
// provider that draws on demand (a Dealer's, a Client, an ot.Provider), not
// a wrapper that serves material drawn ahead of the positions its caller
// sees (protocol.Prefetch.Wrap): draw the material ahead from Marked
// instead.
//
// File format (JSON, mode 0600, replaced atomically; path "" keeps the
// marks in memory only):
//
//	{"version": 1, "party": P,
//	 "sessions": [{"id": "<64 hex>", "marks": {"<stream>": <mark>, ...},
//	               "weights": <mark>}, ...]}
type Marked struct {
	p     Provider
	path  string
	chunk uint64

	bindMu sync.Mutex // serializes BindSession
	mu     sync.Mutex // guards file, sess, locks
	file   *markFile
	sess   *markedSession
	locks  map[uint32]*sync.Mutex // one per stream: a check and its draw are one step
}

// markedSession is the bound session's marks.
type markedSession struct {
	id  SessionID
	rec *markRecord // persisted marks (shared with the file)
	// floor and wfloor are the marks loaded at bind: everything below may
	// have been drawn by an earlier process.
	floor  map[uint32]uint64
	wfloor uint64
	// next is, per stream, one past the last counter drawn through this
	// Marked; wids are the weight ids whose masks it handed out.
	next map[uint32]uint64
	wids map[uint64]bool
}

// markRecord is what the file keeps of one session.
type markRecord struct {
	marks   map[uint32]uint64
	weights uint64
}

// markFile is the decoded mark file.
type markFile struct {
	party    int
	sessions map[SessionID]*markRecord
}

// MarkedOptions configures NewMarked.
type MarkedOptions struct {
	// ChunkBits sets the granularity of the persisted marks: 2^ChunkBits
	// positions (counters of a stream, weight ids). Zero means 16, as the
	// dealer's; at most 63. A caller whose resumed runs jump to aligned
	// positions (selection's epochs, 2^40 apart) passes that alignment, so
	// that the file is written once per stream and run.
	ChunkBits uint
}

const (
	markVersion = 1
	// maxMarkFile bounds the mark file read back.
	maxMarkFile = 64 << 20
	// maxMarkSessions bounds the sessions one mark file holds.
	maxMarkSessions = 1 << 16
	// maxWeightIDs bounds the weight masks one Marked hands out.
	maxWeightIDs = 1 << 20
)

// ErrReuse is wrapped by Marked's refusals: the item asked for lies at a
// position this party may already have drawn in the session, so drawing it
// would reuse correlated randomness.
var ErrReuse = errors.New("would reuse correlated randomness")

// ErrBadMarkFile marks a mark file (see Marked) that cannot be used:
// malformed, truncated, too large or written for the other party.
var ErrBadMarkFile = errors.New("bad high-water mark file")

var (
	_ Provider  = (*Marked)(nil)
	_ Sequencer = (*Marked)(nil)
)

// NewMarked wraps p with the high-water marks kept in the file at path
// (created on the first reservation; "" keeps them in memory only). A file
// that cannot be read or decoded, or that belongs to the other party, is an
// error wrapping ErrBadMarkFile.
func NewMarked(p Provider, path string, opt MarkedOptions) (*Marked, error) {
	if p == nil {
		return nil, fmt.Errorf("beaver: marked provider: nil provider")
	}
	bits := opt.ChunkBits
	if bits == 0 {
		bits = 16
	}
	if bits > 63 {
		return nil, fmt.Errorf("beaver: marked provider: chunk of 2^%d positions (at most 2^63)", bits)
	}
	m := &Marked{p: p, path: path, chunk: 1 << bits, locks: map[uint32]*sync.Mutex{},
		file: &markFile{party: p.Party(), sessions: map[SessionID]*markRecord{}}}
	if path != "" {
		f, err := loadMarkFile(path)
		if err != nil {
			return nil, err
		}
		if f != nil {
			if f.party != p.Party() {
				return nil, fmt.Errorf("beaver: marks %s: %w: written for party %d, the provider is party %d", path, ErrBadMarkFile, f.party, p.Party())
			}
			m.file = f
		}
	}
	return m, nil
}

// Party implements Provider.
func (m *Marked) Party() int { return m.p.Party() }

// Session implements Provider.
func (m *Marked) Session() (SessionID, bool) { return m.p.Session() }

// Position implements Provider.
func (m *Marked) Position(stream uint32) uint64 { return m.p.Position(stream) }

// Stats implements Provider.
func (m *Marked) Stats() DealerStats { return m.p.Stats() }

// SetSessionBudget implements SessionBudgeter: it passes work on to the
// wrapped provider when that announces budgets (see Client.SetSessionBudget).
func (m *Marked) SetSessionBudget(work uint64) {
	if b, ok := m.p.(SessionBudgeter); ok {
		b.SetSessionBudget(work)
	}
}

// AnnouncesBudget implements SessionBudgeter: whether the wrapped
// provider announces budgets.
func (m *Marked) AnnouncesBudget() bool {
	b, ok := m.p.(SessionBudgeter)
	return ok && b.AnnouncesBudget()
}

// ReleaseWeights implements WeightReleaser: it passes the call on to the
// wrapped provider when that holds weights.
func (m *Marked) ReleaseWeights(lo, hi uint64) {
	if w, ok := m.p.(WeightReleaser); ok {
		w.ReleaseWeights(lo, hi)
	}
}

// BindSession implements Provider: it binds the wrapped provider to id and
// loads the session's marks. The zero id (an in-process dealer's default
// session) is refused: its material is not meant to outlive the process.
func (m *Marked) BindSession(ctx context.Context, id SessionID) error {
	if id.IsZero() {
		return fmt.Errorf("beaver: marked provider: bind session: the zero session id is reserved")
	}
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	m.mu.Lock()
	if m.sess != nil {
		defer m.mu.Unlock()
		if m.sess.id != id {
			return fmt.Errorf("beaver: marked provider: bind session %s…: already bound to session %s…", id.short(), m.sess.id.short())
		}
		return nil
	}
	m.mu.Unlock()
	if err := m.p.BindSession(ctx, id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.file.sessions[id]
	if rec == nil {
		if len(m.file.sessions) >= maxMarkSessions {
			return fmt.Errorf("beaver: marked provider: bind session %s…: the mark file holds %d sessions already", id.short(), len(m.file.sessions))
		}
		rec = &markRecord{marks: map[uint32]uint64{}}
	}
	s := &markedSession{id: id, rec: rec, floor: make(map[uint32]uint64, len(rec.marks)), wfloor: rec.weights,
		next: map[uint32]uint64{}, wids: map[uint64]bool{}}
	for st, mk := range rec.marks {
		s.floor[st] = mk
	}
	m.sess = s
	return nil
}

// lock returns stream's lock, held, and the bound session (nil if none).
func (m *Marked) lock(stream uint32) (*sync.Mutex, *markedSession, error) {
	m.mu.Lock()
	l := m.locks[stream]
	if l == nil {
		if len(m.locks) >= maxStreamsPerSession {
			m.mu.Unlock()
			return nil, nil, fmt.Errorf("beaver: marked provider: more than %d streams", maxStreamsPerSession)
		}
		l = &sync.Mutex{}
		m.locks[stream] = l
	}
	s := m.sess
	m.mu.Unlock()
	l.Lock()
	return l, s, nil
}

// reserveIn returns the mark that covers position c: c+1 rounded up to a
// multiple of chunk (saturating).
func reserveIn(c, chunk uint64) uint64 {
	if c >= math.MaxUint64-chunk {
		return math.MaxUint64
	}
	return (c + chunk) &^ (chunk - 1)
}

// checkCounter refuses drawing counter c of stream in s. The stream's lock
// is held.
func (m *Marked) checkCounter(s *markedSession, stream uint32, c uint64) error {
	if f := s.floor[stream]; c < f {
		return fmt.Errorf("beaver: party %d: session %s… stream %d counter %d lies below the persisted high-water mark %d: %w",
			m.p.Party(), s.id.short(), stream, c, f, ErrReuse)
	}
	m.mu.Lock()
	next := s.next[stream]
	m.mu.Unlock()
	if c < next {
		return fmt.Errorf("beaver: party %d: session %s… stream %d counter %d was drawn already (drawn up to %d): %w",
			m.p.Party(), s.id.short(), stream, c, next, ErrReuse)
	}
	return nil
}

// use records that stream's counters [from, to] are drawn: it raises the
// persisted mark (written to disk) before the caller draws them. The
// stream's lock is held.
func (m *Marked) use(s *markedSession, stream uint32, from, to uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := s.rec.marks[stream]
	if !had && len(s.rec.marks) >= maxStreamsPerSession {
		return fmt.Errorf("beaver: party %d: session %s…: more than %d streams", m.p.Party(), s.id.short(), maxStreamsPerSession)
	}
	if to >= old || !had {
		s.rec.marks[stream] = max(old, reserveIn(to, m.chunk))
		if err := m.saveLocked(s); err != nil {
			if had {
				s.rec.marks[stream] = old
			} else {
				delete(s.rec.marks, stream)
			}
			return err
		}
	}
	s.next[stream] = max(s.next[stream], to+1)
	return nil
}

// saveLocked records s's session in the file and writes it; m.mu is held.
func (m *Marked) saveLocked(s *markedSession) error {
	m.file.sessions[s.id] = s.rec
	if m.path == "" {
		return nil
	}
	b, err := m.file.encode()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(m.path, b, 0o600); err != nil {
		return fmt.Errorf("beaver: save marks: %w", err)
	}
	return nil
}

// bound returns the bound session or an error naming what was asked.
func (m *Marked) bound(what any) (*markedSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess == nil {
		return nil, fmt.Errorf("beaver: marked provider: %v: no session bound: call BindSession before drawing material", what)
	}
	return m.sess, nil
}

// Material implements Provider: it checks the item's position against the
// marks (see Marked), raises the mark on disk, then draws it from the
// wrapped provider.
func (m *Marked) Material(ctx context.Context, r Request) (Material, error) {
	if err := r.Validate(); err != nil {
		return Material{}, err
	}
	if _, err := m.bound(r); err != nil {
		return Material{}, err
	}
	l, s, err := m.lock(r.Stream)
	if err != nil {
		return Material{}, err
	}
	defer l.Unlock()
	c := m.p.Position(r.Stream)
	if err := m.checkCounter(s, r.Stream, c); err != nil {
		return Material{}, fmt.Errorf("%w (%v)", err, r.Kind)
	}
	if err := m.use(s, r.Stream, c, c); err != nil {
		return Material{}, fmt.Errorf("beaver: %v: %w", r, err)
	}
	return m.p.Material(ctx, r)
}

// MaterialSeq implements Sequencer: as len(rs) Material calls, with one
// check and one reservation for the whole sequence, drawn from the wrapped
// provider with DrawSequence.
func (m *Marked) MaterialSeq(ctx context.Context, rs []Request, deliver func(i int, mat Material) error) error {
	if err := checkSequence(rs); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	st := rs[0].Stream
	if _, err := m.bound(fmt.Sprintf("sequence of %d items on stream %d", len(rs), st)); err != nil {
		return err
	}
	l, s, err := m.lock(st)
	if err != nil {
		return err
	}
	defer l.Unlock()
	c := m.p.Position(st)
	if uint64(len(rs)) > math.MaxUint64-c {
		return fmt.Errorf("beaver: sequence of %d items: counter space of stream %d exhausted", len(rs), st)
	}
	if err := m.checkCounter(s, st, c); err != nil {
		return err
	}
	if err := m.use(s, st, c, c+uint64(len(rs))-1); err != nil {
		return fmt.Errorf("beaver: sequence of %d items on stream %d: %w", len(rs), st, err)
	}
	return DrawSequence(ctx, m.p, rs, deliver)
}

// WeightMask implements Provider: it hands out the mask of weight id once
// (see Marked).
func (m *Marked) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if err := checkWeightMask(id, k, n); err != nil {
		return nil, err
	}
	s, err := m.bound(fmt.Sprintf("weight mask %d", id))
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	switch {
	case id < s.wfloor:
		m.mu.Unlock()
		return nil, fmt.Errorf("beaver: party %d: session %s… weight mask %d lies below the persisted weight mark %d (its mask may have been revealed under another matrix): %w",
			m.p.Party(), s.id.short(), id, s.wfloor, ErrReuse)
	case s.wids[id]:
		m.mu.Unlock()
		return nil, fmt.Errorf("beaver: party %d: session %s… weight mask %d was handed out already (a weight id is shared once): %w",
			m.p.Party(), s.id.short(), id, ErrReuse)
	case len(s.wids) >= maxWeightIDs:
		m.mu.Unlock()
		return nil, fmt.Errorf("beaver: party %d: more than %d weight masks", m.p.Party(), maxWeightIDs)
	}
	if id >= s.rec.weights {
		old := s.rec.weights
		s.rec.weights = reserveIn(id, m.chunk)
		if err := m.saveLocked(s); err != nil {
			s.rec.weights = old
			m.mu.Unlock()
			return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
		}
	}
	s.wids[id] = true
	m.mu.Unlock()
	return m.p.WeightMask(ctx, id, k, n)
}

// Seek implements Provider: once bound, a position below the stream's
// persisted mark, or below a counter this Marked drew, is refused (an error
// wrapping ErrReuse); before binding, the marks are checked when material
// is drawn.
func (m *Marked) Seek(stream uint32, pos uint64) error {
	l, s, err := m.lock(stream)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if s != nil {
		if err := m.checkCounter(s, stream, pos); err != nil {
			return fmt.Errorf("beaver: seek: %w", err)
		}
	}
	return m.p.Seek(stream, pos)
}

type markJSON struct {
	Version  int               `json:"version"`
	Party    int               `json:"party"`
	Sessions []markSessionJSON `json:"sessions"`
}

type markSessionJSON struct {
	ID      string            `json:"id"`
	Marks   map[uint32]uint64 `json:"marks"`
	Weights uint64            `json:"weights"`
}

// decodeMarkFile parses and validates a mark file. It never panics; every
// error wraps ErrBadMarkFile.
func decodeMarkFile(b []byte) (*markFile, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadMarkFile, fmt.Sprintf(format, args...))
	}
	if len(b) > maxMarkFile {
		return nil, bad("%d bytes, at most %d", len(b), maxMarkFile)
	}
	var j markJSON
	if err := strictjson.Unmarshal(b, &j); err != nil {
		return nil, bad("%v", err)
	}
	if j.Version != markVersion {
		return nil, bad("version %d, want %d", j.Version, markVersion)
	}
	if j.Party != 0 && j.Party != 1 {
		return nil, bad("party %d", j.Party)
	}
	if len(j.Sessions) > maxMarkSessions {
		return nil, bad("%d sessions, at most %d", len(j.Sessions), maxMarkSessions)
	}
	f := &markFile{party: j.Party, sessions: make(map[SessionID]*markRecord, len(j.Sessions))}
	for i, s := range j.Sessions {
		id, err := ParseSessionID(s.ID)
		if err != nil || id.IsZero() {
			return nil, bad("session %d: id %q", i, s.ID)
		}
		if _, dup := f.sessions[id]; dup {
			return nil, bad("session %s listed twice", id.short())
		}
		if len(s.Marks) > maxStreamsPerSession {
			return nil, bad("session %s: %d streams, at most %d", id.short(), len(s.Marks), maxStreamsPerSession)
		}
		marks := s.Marks
		if marks == nil {
			marks = map[uint32]uint64{}
		}
		f.sessions[id] = &markRecord{marks: marks, weights: s.Weights}
	}
	return f, nil
}

// encode returns the file's bytes (sessions in id order).
func (f *markFile) encode() ([]byte, error) {
	j := markJSON{Version: markVersion, Party: f.party, Sessions: make([]markSessionJSON, 0, len(f.sessions))}
	ids := make([]SessionID, 0, len(f.sessions))
	for id := range f.sessions {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b SessionID) int { return bytes.Compare(a[:], b[:]) })
	for _, id := range ids {
		r := f.sessions[id]
		j.Sessions = append(j.Sessions, markSessionJSON{ID: id.String(), Marks: r.marks, Weights: r.weights})
	}
	b, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("beaver: encode marks: %w", err)
	}
	return append(b, '\n'), nil
}

// loadMarkFile reads the mark file at path; nil when it does not exist.
func loadMarkFile(path string) (*markFile, error) {
	b, err := atomicfile.ReadLimited(path, maxMarkFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if errors.Is(err, atomicfile.ErrTooLarge) {
		return nil, fmt.Errorf("beaver: marks %s: %w: %w", path, ErrBadMarkFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("beaver: marks %s: %w", path, err)
	}
	f, err := decodeMarkFile(b)
	if err != nil {
		return nil, fmt.Errorf("beaver: marks %s: %w", path, err)
	}
	return f, nil
}

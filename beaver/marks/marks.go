// Package marks keeps a party's persistent high-water marks of the
// correlated randomness it drew (Provider, a wrapper of any
// beaver.Provider), so that no position is drawn twice in a session across
// restarts of the party, whatever the peer or the party's own state files
// say.
package marks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
)

// Provider is a beaver.Provider wrapper that keeps, per session, a
// persistent high-water mark of the positions its party has drawn — per
// stream, every counter drawn lies below the stream's mark, and every
// weight id whose mask was handed out lies below the weight mark — and
// never draws below a mark it loaded, whatever the caller (or a peer
// steering the caller) asks for. It is the party-side counterpart of the
// dealer's state file (beaver/dealer).
//
// A party whose provider expands its material locally from its session
// seed (its masks, and all its material of the kinds dealt to the other
// party; see beaver/dealer) is the only one who could notice that it
// expands a position twice: the dealer never sees its counters of those
// kinds. A resumed computation seeks every
// stream past the material it used (beaver.Provider.Seek); Provider makes
// that promise hold across restarts of the process, from its file alone:
//
//   - Material and MaterialSeq refuse an item whose counter (the wrapped
//     provider's Position) lies below the stream's loaded mark or below a
//     counter this Provider already drew; the mark is raised on disk before
//     the wrapped provider draws the item.
//   - Seek refuses a position below the stream's loaded mark (once bound).
//   - A weight mask (WeightMask) is handed out at most once per weight
//     id, and never for an id below the loaded weight mark: the model owner
//     reveals F = W − B once per id (protocol.Session.ShareWeight), and the
//     same B under two reveals would leak the difference of the two
//     matrices.
//
// Marks are reserved ahead in chunks of 2^ChunkBits positions
// (beaver.ReserveMark, as the dealer does), so the file is rewritten once
// per new stream and chunk, not once per item; a crash burns at most the
// rest of a chunk. Every refusal wraps ErrReuse. A Provider must be bound
// (BindSession) to a non-zero session before it hands out material. It
// takes the positions from the wrapped provider's Position, so it should
// wrap the provider that draws on demand (a dealer's, an ot.Provider), not
// a wrapper that serves material drawn ahead of the positions its caller
// sees (protocol.Prefetch.Wrap): draw the material ahead from the Provider
// instead. Everything else (Party, Session, Position, Stats, and optional
// behaviour through Unwrap and beaver.As) is the wrapped provider's.
//
// File format (JSON, mode 0600, replaced atomically; path "" keeps the
// marks in memory only):
//
//	{"version": 1, "party": P,
//	 "sessions": [{"id": "<64 hex>", "marks": {"<stream>": <mark>, ...},
//	               "weights": <mark>}, ...]}
type Provider struct {
	beaver.Provider
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
	id  beaver.SessionID
	rec *markRecord // persisted marks (shared with the file)
	// floor and wfloor are the marks loaded at bind: everything below may
	// have been drawn by an earlier process.
	floor  map[uint32]uint64
	wfloor uint64
	// drawn is, per stream, one past the last counter drawn through this
	// Provider; wids are the weight ids whose masks it handed out.
	drawn beaver.Counters
	wids  map[uint64]bool
}

// markRecord is what the file keeps of one session.
type markRecord struct {
	marks   map[uint32]uint64
	weights uint64
}

// markFile is the decoded mark file.
type markFile struct {
	party    int
	sessions map[beaver.SessionID]*markRecord
}

// Options configures New.
type Options struct {
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
	// maxWeightIDs bounds the weight masks one Provider hands out.
	maxWeightIDs = 1 << 20
)

// ErrReuse is wrapped by Provider's refusals: the item asked for lies at a
// position this party may already have drawn in the session, so drawing it
// would reuse correlated randomness.
var ErrReuse = errors.New("would reuse correlated randomness")

// ErrBadFile marks a mark file (see Provider) that cannot be used:
// malformed, truncated, too large or written for the other party.
var ErrBadFile = errors.New("bad high-water mark file")

var (
	_ beaver.Provider  = (*Provider)(nil)
	_ beaver.Sequencer = (*Provider)(nil)
)

// New wraps p with the high-water marks kept in the file at path
// (created on the first reservation; "" keeps them in memory only). A file
// that cannot be read or decoded, or that belongs to the other party, is an
// error wrapping ErrBadFile.
func New(p beaver.Provider, path string, opt Options) (*Provider, error) {
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
	m := &Provider{Provider: p, path: path, chunk: 1 << bits, locks: map[uint32]*sync.Mutex{},
		file: &markFile{party: p.Party(), sessions: map[beaver.SessionID]*markRecord{}}}
	if path != "" {
		f, err := loadMarkFile(path)
		if err != nil {
			return nil, err
		}
		if f != nil {
			if f.party != p.Party() {
				return nil, fmt.Errorf("beaver: marks %s: %w: written for party %d, the provider is party %d", path, ErrBadFile, f.party, p.Party())
			}
			m.file = f
		}
	}
	return m, nil
}

// Unwrap returns the wrapped provider (beaver.As looks through it for
// optional behaviour: weight release, session budgets, statistics).
func (m *Provider) Unwrap() beaver.Provider { return m.Provider }

// BindSession implements Provider: it binds the wrapped provider to id and
// loads the session's marks. The zero id (an in-process dealer's default
// session) is refused: its material is not meant to outlive the process.
func (m *Provider) BindSession(ctx context.Context, id beaver.SessionID) error {
	if id.IsZero() {
		return fmt.Errorf("beaver: marked provider: bind session: the zero session id is reserved")
	}
	m.bindMu.Lock()
	defer m.bindMu.Unlock()
	m.mu.Lock()
	if m.sess != nil {
		defer m.mu.Unlock()
		if m.sess.id != id {
			return fmt.Errorf("beaver: marked provider: bind session %s…: already bound to session %s…", id.Short(), m.sess.id.Short())
		}
		return nil
	}
	m.mu.Unlock()
	if err := m.Provider.BindSession(ctx, id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.file.sessions[id]
	if rec == nil {
		if len(m.file.sessions) >= maxMarkSessions {
			return fmt.Errorf("beaver: marked provider: bind session %s…: the mark file holds %d sessions already", id.Short(), len(m.file.sessions))
		}
		rec = &markRecord{marks: map[uint32]uint64{}}
	}
	s := &markedSession{id: id, rec: rec, floor: make(map[uint32]uint64, len(rec.marks)), wfloor: rec.weights,
		wids: map[uint64]bool{}}
	for st, mk := range rec.marks {
		s.floor[st] = mk
	}
	m.sess = s
	return nil
}

// lock returns stream's lock, held, and the bound session (nil if none).
func (m *Provider) lock(stream uint32) (*sync.Mutex, *markedSession, error) {
	m.mu.Lock()
	l := m.locks[stream]
	if l == nil {
		if len(m.locks) >= beaver.MaxSessionStreams {
			m.mu.Unlock()
			return nil, nil, fmt.Errorf("beaver: marked provider: more than %d streams", beaver.MaxSessionStreams)
		}
		l = &sync.Mutex{}
		m.locks[stream] = l
	}
	s := m.sess
	m.mu.Unlock()
	l.Lock()
	return l, s, nil
}

// checkCounter refuses drawing counter c of stream in s. The stream's lock
// is held.
func (m *Provider) checkCounter(s *markedSession, stream uint32, c uint64) error {
	if f := s.floor[stream]; c < f {
		return fmt.Errorf("beaver: party %d: session %s… stream %d counter %d lies below the persisted high-water mark %d: %w",
			m.Party(), s.id.Short(), stream, c, f, ErrReuse)
	}
	if next := s.drawn.Position(stream); c < next {
		return fmt.Errorf("beaver: party %d: session %s… stream %d counter %d was drawn already (drawn up to %d): %w",
			m.Party(), s.id.Short(), stream, c, next, ErrReuse)
	}
	return nil
}

// use records that stream's counters [from, to] are drawn: it raises the
// persisted mark (written to disk) before the caller draws them. The
// stream's lock is held.
func (m *Provider) use(s *markedSession, stream uint32, from, to uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := s.rec.marks[stream]
	if !had && len(s.rec.marks) >= beaver.MaxSessionStreams {
		return fmt.Errorf("beaver: party %d: session %s…: more than %d streams", m.Party(), s.id.Short(), beaver.MaxSessionStreams)
	}
	if to >= old || !had {
		s.rec.marks[stream] = max(old, beaver.ReserveMark(to, m.chunk))
		if err := m.saveLocked(s); err != nil {
			if had {
				s.rec.marks[stream] = old
			} else {
				delete(s.rec.marks, stream)
			}
			return err
		}
	}
	if to == math.MaxUint64 { // the wrapped provider refuses the item: nothing past it
		return nil
	}
	// checkCounter made from ≥ the stream's drawn position: this moves it
	// forward.
	return s.drawn.Seek(stream, to+1)
}

// saveLocked records s's session in the file and writes it; m.mu is held.
func (m *Provider) saveLocked(s *markedSession) error {
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
func (m *Provider) bound(what any) (*markedSession, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sess == nil {
		return nil, fmt.Errorf("beaver: marked provider: %v: no session bound: call BindSession before drawing material", what)
	}
	return m.sess, nil
}

// Material implements Provider: it checks the item's position against the
// marks (see Provider), raises the mark on disk, then draws it from the
// wrapped provider.
func (m *Provider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if err := r.Validate(); err != nil {
		return beaver.Material{}, err
	}
	if _, err := m.bound(r); err != nil {
		return beaver.Material{}, err
	}
	l, s, err := m.lock(r.Stream)
	if err != nil {
		return beaver.Material{}, err
	}
	defer l.Unlock()
	c := m.Provider.Position(r.Stream)
	if err := m.checkCounter(s, r.Stream, c); err != nil {
		return beaver.Material{}, fmt.Errorf("%w (%v)", err, r.Kind)
	}
	if err := m.use(s, r.Stream, c, c); err != nil {
		return beaver.Material{}, fmt.Errorf("beaver: %v: %w", r, err)
	}
	return m.Provider.Material(ctx, r)
}

// MaterialSeq implements Sequencer: as len(rs) Material calls, with one
// check and one reservation for the whole sequence, drawn from the wrapped
// provider with DrawSequence.
func (m *Provider) MaterialSeq(ctx context.Context, rs []beaver.Request, deliver func(i int, mat beaver.Material) error) error {
	if err := beaver.CheckSequence(rs); err != nil {
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
	c := m.Provider.Position(st)
	if uint64(len(rs)) > math.MaxUint64-c {
		return fmt.Errorf("beaver: sequence of %d items: counter space of stream %d exhausted", len(rs), st)
	}
	if err := m.checkCounter(s, st, c); err != nil {
		return err
	}
	if err := m.use(s, st, c, c+uint64(len(rs))-1); err != nil {
		return fmt.Errorf("beaver: sequence of %d items on stream %d: %w", len(rs), st, err)
	}
	return beaver.DrawSequence(ctx, m.Provider, rs, deliver)
}

// WeightMask implements Provider: it hands out the mask of weight id once
// (see Provider).
func (m *Provider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if err := beaver.CheckWeightMask(id, k, n); err != nil {
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
			m.Party(), s.id.Short(), id, s.wfloor, ErrReuse)
	case s.wids[id]:
		m.mu.Unlock()
		return nil, fmt.Errorf("beaver: party %d: session %s… weight mask %d was handed out already (a weight id is shared once): %w",
			m.Party(), s.id.Short(), id, ErrReuse)
	case len(s.wids) >= maxWeightIDs:
		m.mu.Unlock()
		return nil, fmt.Errorf("beaver: party %d: more than %d weight masks", m.Party(), maxWeightIDs)
	}
	if id >= s.rec.weights {
		old := s.rec.weights
		s.rec.weights = beaver.ReserveMark(id, m.chunk)
		if err := m.saveLocked(s); err != nil {
			s.rec.weights = old
			m.mu.Unlock()
			return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
		}
	}
	s.wids[id] = true
	m.mu.Unlock()
	return m.Provider.WeightMask(ctx, id, k, n)
}

// Seek implements Provider: once bound, a position below the stream's
// persisted mark, or below a counter this Provider drew, is refused (an error
// wrapping ErrReuse); before binding, the marks are checked when material
// is drawn.
func (m *Provider) Seek(stream uint32, pos uint64) error {
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
	return m.Provider.Seek(stream, pos)
}

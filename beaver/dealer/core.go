package dealer

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/share"
)

// dealerCore computes the dealer's correction words from the two seeds and
// checks every request: valid sizes, counters never reused on a stream of a
// session (nor, with a state file, across restarts), one shape per weight
// id, and (networked) the limits of coreLimits: request sizes, streams per
// session, the session's budget of work, live sessions. It pairs the two
// parties of each session (join) and keys each session's material by its
// id.
type dealerCore struct {
	seeds     [2]share.Seed
	statePath string // "" keeps the high-water marks in memory only
	lim       coreLimits
	now       func() time.Time

	// wmu serializes the state file's writes (see persist).
	wmu sync.Mutex

	mu       sync.Mutex
	state    *dealerState // persisted view: session keys and marks
	sessions map[beaver.SessionID]*coreSession
	// waiting holds each party's presentations of a session id that wait for
	// the other party's presentation of the same id: one dealer serves many
	// sessions at once (a sharded selection's worker pairs), so presentations
	// pair by id, not by arrival. At most one per (id, party): a newer one
	// supersedes it (a party's reconnection). Bounded by the connections the
	// server admits.
	waiting map[waitKey]*joiner
	// gen counts the changes to state that must be durable before they are
	// relied on (a new session, a raised mark); savedGen is the gen of the
	// last write.
	gen, savedGen uint64

	items, words atomic.Int64
	// writes counts the state file's writes.
	writes atomic.Int64
}

// coreLimits are a networked dealer's bounds (ServerOptions); the zero value,
// the in-process dealer's, bounds nothing beyond beaver.Request.Validate and the
// fixed beaver.MaxSessionStreams.
type coreLimits struct {
	maxWords   int    // words of any part of one request (0: MaxItemWords)
	maxMACs    uint64 // multiply-adds of one request (0: any)
	maxStreams int    // streams of one session (0: beaver.MaxSessionStreams)
	// budget is a session's budget of work when the parties announce none,
	// and the most they may announce (0: unlimited).
	budget      uint64
	maxSessions int           // live sessions kept (0: any)
	retention   time.Duration // a session not joined for this long is retired (0: never)
}

// coreSession is the dealer's state of one session.
type coreSession struct {
	id    beaver.SessionID
	seeds [2]share.Seed // the parties' session seeds
	keys  [2]*keyCache
	rec   *persisted // keys of the pairing, high-water marks, budget (shared with state)

	// next is each party's next unused counter of each stream (≥ the
	// mark after a restart); only the party a kind deals its words to asks
	// for an item of it.
	next    [2]map[uint32]uint64
	weights map[uint64][2]int // k, n of each weight id seen
	// markGen is the gen at which each stream's mark was last raised:
	// counters below the mark may be served once savedGen reaches it.
	markGen map[uint32]uint64
	// active counts the joins of the session whose connections are still
	// served (see leave); an active session is never retired.
	active int
}

func newDealerCore(seed0, seed1 share.Seed) *dealerCore {
	return &dealerCore{
		seeds:    [2]share.Seed{seed0, seed1},
		now:      time.Now,
		state:    &dealerState{seeds: seedsTag(seed0, seed1), sessions: map[beaver.SessionID]*persisted{}, retired: map[retiredTag]struct{}{}},
		sessions: make(map[beaver.SessionID]*coreSession),
		waiting:  make(map[waitKey]*joiner),
	}
}

// persistTo loads the state file at path (if it exists), retires the
// sessions past their retention, writes it back and keeps every later
// change there.
func (d *dealerCore) persistTo(path string) error {
	st, err := loadDealerState(path, d.state.seeds)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now().Unix()
	for _, rec := range st.sessions {
		if rec.last == 0 { // a version 1 file: age from now
			rec.last = now
		}
	}
	d.state, d.statePath = st, path
	d.pruneLocked()
	if err := d.state.save(path); err != nil {
		return err
	}
	d.writes.Add(1)
	d.savedGen = d.gen
	return nil
}

// persist returns once the state file holds every change up to gen g
// (group commit): the first caller writes the whole state outside d.mu,
// and the callers that queued behind it find their change written or
// write all the changes made meanwhile in one go. Without a state file it
// does nothing, and so does a g of 0 (nothing to wait for): a request whose
// mark is written never queues behind another's write.
func (d *dealerCore) persist(g uint64) error {
	if d.statePath == "" || g == 0 {
		return nil
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	d.mu.Lock()
	if d.savedGen >= g {
		d.mu.Unlock()
		return nil
	}
	gen := d.gen
	b, err := d.state.encode()
	d.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(d.statePath, b, 0o600); err != nil {
		return fmt.Errorf("beaver: save dealer state: %w", err)
	}
	d.writes.Add(1)
	d.mu.Lock()
	d.savedGen = max(d.savedGen, gen)
	d.mu.Unlock()
	return nil
}

// sessionLocked returns the session id, creating it (from the persisted
// record, if any) on first use; created reports whether it has no record
// yet. d.mu must be held.
func (d *dealerCore) sessionLocked(id beaver.SessionID) (s *coreSession, created bool) {
	if s := d.sessions[id]; s != nil {
		return s, false
	}
	rec := d.state.sessions[id]
	if rec == nil {
		rec, created = &persisted{marks: map[uint32]uint64{}}, true
	}
	s = &coreSession{id: id, rec: rec, weights: make(map[uint64][2]int), markGen: make(map[uint32]uint64)}
	for p := range 2 {
		s.seeds[p] = sessionSeed(d.seeds[p], id, p)
		s.keys[p] = newKeyCache(s.seeds[p], p)
		s.next[p] = make(map[uint32]uint64, len(rec.marks))
		// After a restart, everything below a persisted mark may have
		// been served (the marks cover both parties' counters).
		for stream, m := range rec.marks {
			s.next[p][stream] = m
		}
	}
	d.sessions[id] = s
	return s, created
}

// defaultSession returns the in-process dealer's default session (the zero
// id, never persisted and never offered by a networked dealer).
func (d *dealerCore) defaultSession() *coreSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, _ := d.sessionLocked(beaver.SessionID{})
	return s
}

// pairingError checks that session id may be served to role's key.
func (d *dealerCore) pairingErrorLocked(id beaver.SessionID, role int, key string) error {
	rec := d.state.sessions[id]
	if rec == nil || rec.keys[role] == key {
		return nil
	}
	show := func(k string) string {
		if k == "" {
			return "(none)"
		}
		return k
	}
	return refused(fmt.Errorf("beaver: dealer: session %s… was served to the %s with key %s, now presented with key %s",
		id.Short(), roleName(role), show(rec.keys[role]), show(key)))
}

// retiredErrorLocked refuses a retired session id.
func (d *dealerCore) retiredErrorLocked(id beaver.SessionID) error {
	if _, ok := d.state.retired[tagOf(id)]; ok {
		return refused(fmt.Errorf("beaver: dealer: session %s… is retired (unused for longer than the dealer keeps sessions, or evicted by newer ones) and is never served again", id.Short()))
	}
	return nil
}

// retireLocked drops session id's record and keeps its tag, so that the id
// is refused from now on. d.mu must be held; the change is written with
// the next write.
func (d *dealerCore) retireLocked(id beaver.SessionID) {
	delete(d.state.sessions, id)
	delete(d.sessions, id)
	d.state.retired[tagOf(id)] = struct{}{}
}

// inactiveLocked reports whether no connection serves session id.
func (d *dealerCore) inactiveLocked(id beaver.SessionID) bool {
	s := d.sessions[id]
	return s == nil || s.active == 0
}

// pruneLocked retires every inactive session not joined for longer than the
// retention, while the retired set has room. d.mu must be held.
func (d *dealerCore) pruneLocked() {
	if d.lim.retention <= 0 {
		return
	}
	cut := d.now().Add(-d.lim.retention).Unix()
	for id, rec := range d.state.sessions {
		if rec.last < cut && d.inactiveLocked(id) && len(d.state.retired) < maxRetired {
			d.retireLocked(id)
		}
	}
}

// makeRoomLocked retires the least recently joined inactive sessions until
// one more session is within the limit; it refuses when every live session
// is active or the retired set is full. d.mu must be held.
func (d *dealerCore) makeRoomLocked() error {
	for d.lim.maxSessions > 0 && len(d.state.sessions) >= d.lim.maxSessions {
		if len(d.state.retired) >= maxRetired {
			return refused(fmt.Errorf("beaver: dealer: %d sessions retired, the most one state file keeps: start the dealer with fresh seeds", maxRetired))
		}
		var (
			oldest beaver.SessionID
			found  bool
			last   int64
		)
		for id, rec := range d.state.sessions {
			if d.inactiveLocked(id) && (!found || rec.last < last) {
				oldest, last, found = id, rec.last, true
			}
		}
		if !found {
			return refused(fmt.Errorf("beaver: dealer: all %d sessions are in use; no new session", len(d.state.sessions)))
		}
		d.retireLocked(oldest)
	}
	return nil
}

// checkLimits refuses a request beyond the dealer's size limits, before
// anything is allocated for it.
func (d *dealerCore) checkLimits(r beaver.Request) error {
	if d.lim.maxWords > 0 && r.MaxPartWords() > d.lim.maxWords {
		return fmt.Errorf("beaver: dealer: %v: a part of %d words exceeds the dealer's limit of %d words per part", r, r.MaxPartWords(), d.lim.maxWords)
	}
	if d.lim.maxMACs > 0 && r.MACs() > d.lim.maxMACs {
		return fmt.Errorf("beaver: dealer: %v: %d multiply-adds exceed the dealer's limit of %d per request", r, r.MACs(), d.lim.maxMACs)
	}
	return nil
}

// serve checks r, asked by party, against session s and returns party's
// dealer words. Each party's counters are checked on their own: a kind
// whose dealer words go to both parties is asked for by both.
func (d *dealerCore) serve(s *coreSession, party int, r beaver.Request) ([]uint64, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if !r.DealtTo(party) {
		return nil, fmt.Errorf("beaver: dealer: %v: the %s gets no dealer words of kind %v", r, roleName(party), r.Kind)
	}
	c, _ := beaver.Lookup(r.Kind) // known: r is valid
	if r.Counter == math.MaxUint64 {
		return nil, fmt.Errorf("beaver: dealer: %v: counter space of stream %d exhausted", r, r.Stream)
	}
	if err := d.checkLimits(r); err != nil {
		return nil, err
	}
	work := r.DealerWork()
	maxStreams := beaver.MaxSessionStreams
	if d.lim.maxStreams > 0 {
		maxStreams = d.lim.maxStreams
	}
	d.mu.Lock()
	next, seen := s.next[party][r.Stream]
	if r.Counter < next {
		d.mu.Unlock()
		if m := s.rec.marks[r.Stream]; r.Counter < m && d.statePath != "" {
			return nil, fmt.Errorf("beaver: dealer: %v reuses a counter: session %s… stream %d was served up to %d (persisted high-water mark %d)", r, s.id.Short(), r.Stream, next, m)
		}
		return nil, fmt.Errorf("beaver: dealer: %v reuses a counter (stream %d is at %d)", r, r.Stream, next)
	}
	if !seen && len(s.next[party]) >= maxStreams {
		d.mu.Unlock()
		return nil, fmt.Errorf("beaver: dealer: %v: more than %d streams in one session", r, maxStreams)
	}
	if b := s.rec.budget; b != 0 && (s.rec.spent > b || work > b-s.rec.spent) {
		spent := s.rec.spent
		d.mu.Unlock()
		return nil, fmt.Errorf("beaver: dealer: %v: session budget exhausted: %d of %d work units spent, the request needs %d", r, spent, b, work)
	}
	if c.Mask != nil {
		k, n := c.Mask(r)
		shape := [2]int{k, n}
		if old, ok := s.weights[r.WeightID]; ok && old != shape {
			d.mu.Unlock()
			return nil, fmt.Errorf("beaver: dealer: %v: weight %d was %d×%d, now %d×%d", r, r.WeightID, old[0], old[1], shape[0], shape[1])
		} else if !ok {
			if len(s.weights) >= maxCachedKeys {
				d.mu.Unlock()
				return nil, fmt.Errorf("beaver: dealer: %v: more than %d weight ids", r, maxCachedKeys)
			}
			s.weights[r.WeightID] = shape
		}
	}
	// The mark covering r.Counter must be written before r is served; a
	// request that raises it, and those that fall under it meanwhile, wait
	// for one write together (persist).
	var need uint64
	if d.statePath != "" {
		if r.Counter >= s.rec.marks[r.Stream] {
			s.rec.marks[r.Stream] = beaver.ReserveMark(r.Counter, reserveChunk)
			d.gen++
			s.markGen[r.Stream] = d.gen
		}
		if g := s.markGen[r.Stream]; g > d.savedGen {
			need = g
		}
	}
	s.next[party][r.Stream] = r.Counter + 1
	s.rec.spent += work
	d.mu.Unlock()
	if err := d.persist(need); err != nil {
		return nil, fmt.Errorf("beaver: dealer: %v: %w", r, err)
	}

	// Both parties' local parts and the weight mask are scratch: only the
	// dealer words leave this function, so their buffers are recycled.
	buf0, buf1 := share.GetWords(localTotal(r, 0)), share.GetWords(localTotal(r, 1))
	defer share.PutWords(buf0)
	defer share.PutWords(buf1)
	x := beaver.Expansion{Local: [2][][]uint64{expandLocalInto(buf0, s.keys[0], r), expandLocalInto(buf1, s.keys[1], r)}}
	if c.Mask != nil {
		k, n := c.Mask(r)
		x.Mask = weightMaskInto(share.GetWords(k*n), s.seeds[0], r.WeightID, k, n)
		defer share.PutWords(x.Mask)
	}
	out, err := deal(r, x)
	if err != nil {
		return nil, err
	}
	d.items.Add(1)
	d.words.Add(int64(len(out[party])))
	return out[party], nil
}

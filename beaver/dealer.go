package beaver

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/share"
)

// dealerCore computes the dealer's correction words from the two seeds and
// checks every request: valid sizes, counters never reused on a stream of a
// session (nor, with a state file, across restarts), one shape per weight
// id. It pairs the two parties of each session (join) and keys each
// session's material by its id.
type dealerCore struct {
	seeds     [2]share.Seed
	statePath string // "" keeps the high-water marks in memory only

	mu       sync.Mutex
	state    *dealerState // persisted view: session keys and marks
	sessions map[SessionID]*coreSession
	waiting  [2]*joiner // a party that presented a session id and waits for the other

	items, words atomic.Int64
}

// coreSession is the dealer's state of one session.
type coreSession struct {
	id    SessionID
	seeds [2]share.Seed // the parties' session seeds
	keys  [2]*keyCache
	rec   *persisted // keys of the pairing and high-water marks (shared with state)

	next    map[uint32]uint64 // next unused counter of each stream (≥ the mark after a restart)
	weights map[uint64][2]int // k, n of each weight id seen
}

// joiner is a party waiting in join for the other party's id.
type joiner struct {
	id   SessionID
	key  string
	done chan joinResult
}

type joinResult struct {
	s   *coreSession
	err error
}

func newDealerCore(seed0, seed1 share.Seed) *dealerCore {
	return &dealerCore{
		seeds:    [2]share.Seed{seed0, seed1},
		state:    &dealerState{seeds: seedsTag(seed0, seed1), sessions: map[SessionID]*persisted{}},
		sessions: make(map[SessionID]*coreSession),
	}
}

// persistTo loads the state file at path (if it exists) and keeps every
// later change there.
func (d *dealerCore) persistTo(path string) error {
	st, err := loadDealerState(path, d.state.seeds)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.state, d.statePath = st, path
	return d.saveLocked()
}

func (d *dealerCore) saveLocked() error {
	if d.statePath == "" {
		return nil
	}
	return d.state.save(d.statePath)
}

// sessionLocked returns the session id, creating it (from the persisted
// record, if any) on first use; created reports whether it has no record
// yet. d.mu must be held.
func (d *dealerCore) sessionLocked(id SessionID) (s *coreSession, created bool) {
	if s := d.sessions[id]; s != nil {
		return s, false
	}
	rec := d.state.sessions[id]
	if rec == nil {
		rec, created = &persisted{marks: map[uint32]uint64{}}, true
	}
	s = &coreSession{id: id, rec: rec, next: make(map[uint32]uint64, len(rec.marks)), weights: make(map[uint64][2]int)}
	for p := range 2 {
		s.seeds[p] = sessionSeed(d.seeds[p], id, p)
		s.keys[p] = newKeyCache(s.seeds[p], p)
	}
	// After a restart, everything below a persisted mark may have been
	// served.
	for stream, m := range rec.marks {
		s.next[stream] = m
	}
	d.sessions[id] = s
	return s, created
}

// defaultSession returns the in-process dealer's default session (the zero
// id, never persisted and never offered by a networked dealer).
func (d *dealerCore) defaultSession() *coreSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, _ := d.sessionLocked(SessionID{})
	return s
}

// pairingError checks that session id may be served to role's key.
func (d *dealerCore) pairingErrorLocked(id SessionID, role int, key string) error {
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
		id.short(), roleName(role), show(rec.keys[role]), show(key)))
}

// join pairs role's presentation of session id (with the role's key
// fingerprint) with the other role's: it waits until the other role
// presents an id (or ctx ends, gone is closed, or timeout passes), and
// refuses when the two ids differ, when the id is the reserved zero id or
// when the session was served to other keys. Both parties get the session.
func (d *dealerCore) join(ctx context.Context, gone <-chan struct{}, id SessionID, role int, key string, timeout time.Duration) (*coreSession, error) {
	if id.IsZero() {
		return nil, refused(fmt.Errorf("beaver: dealer: the %s presented the zero session id", roleName(role)))
	}
	d.mu.Lock()
	if err := d.pairingErrorLocked(id, role, key); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if other := d.waiting[1-role]; other != nil {
		d.waiting[1-role] = nil
		if other.id != id {
			ids := [2]SessionID{}
			ids[role], ids[1-role] = id, other.id
			err := refused(fmt.Errorf("beaver: dealer: session mismatch: the %s presented session %s…, the %s session %s…; refused",
				roleName(0), ids[0].short(), roleName(1), ids[1].short()))
			other.done <- joinResult{err: err}
			d.mu.Unlock()
			return nil, err
		}
		keys := [2]string{}
		keys[role], keys[1-role] = key, other.key
		s, err := d.openLocked(id, keys)
		other.done <- joinResult{s, err}
		d.mu.Unlock()
		return s, err
	}
	if old := d.waiting[role]; old != nil {
		old.done <- joinResult{err: refused(fmt.Errorf("beaver: dealer: superseded by a newer connection of the %s", roleName(role)))}
	}
	w := &joiner{id: id, key: key, done: make(chan joinResult, 1)}
	d.waiting[role] = w
	d.mu.Unlock()

	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var why error
	select {
	case r := <-w.done:
		return r.s, r.err
	case <-ctx.Done():
		why = ctx.Err()
	case <-gone:
		why = fmt.Errorf("connection closed")
	case <-t.C:
		why = refused(fmt.Errorf("beaver: dealer: the %s did not present a session within %v", roleName(1-role), timeout))
	}
	d.mu.Lock()
	if d.waiting[role] == w {
		d.waiting[role] = nil
	}
	d.mu.Unlock()
	return nil, fmt.Errorf("beaver: dealer: waiting for the %s to present session %s…: %w", roleName(1-role), id.short(), why)
}

// openLocked returns session id for the pairing keys, recording (and
// persisting) a new session's keys. d.mu must be held.
func (d *dealerCore) openLocked(id SessionID, keys [2]string) (*coreSession, error) {
	for r := range 2 {
		if err := d.pairingErrorLocked(id, r, keys[r]); err != nil {
			return nil, err
		}
	}
	s, created := d.sessionLocked(id)
	if created {
		s.rec.keys = keys
		d.state.sessions[id] = s.rec
		if err := d.saveLocked(); err != nil {
			delete(d.state.sessions, id)
			delete(d.sessions, id)
			return nil, fmt.Errorf("beaver: dealer: open session %s…: %w", id.short(), err)
		}
	}
	return s, nil
}

// reserve returns the persisted mark that covers counter c: c+1 rounded up
// to a multiple of reserveChunk (saturating).
func reserve(c uint64) uint64 {
	if c >= math.MaxUint64-reserveChunk {
		return math.MaxUint64
	}
	return (c + reserveChunk) &^ (reserveChunk - 1)
}

// serve checks r against session s and returns party 1's correction words.
func (d *dealerCore) serve(s *coreSession, r Request) ([]uint64, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Kind == KindWeightMask {
		return nil, errWeightMaskRequest(r)
	}
	if r.Counter == math.MaxUint64 {
		return nil, fmt.Errorf("beaver: dealer: %v: counter space of stream %d exhausted", r, r.Stream)
	}
	d.mu.Lock()
	next, seen := s.next[r.Stream]
	if r.Counter < next {
		d.mu.Unlock()
		if m := s.rec.marks[r.Stream]; r.Counter < m && d.statePath != "" {
			return nil, fmt.Errorf("beaver: dealer: %v reuses a counter: session %s… stream %d was served up to %d (persisted high-water mark %d)", r, s.id.short(), r.Stream, next, m)
		}
		return nil, fmt.Errorf("beaver: dealer: %v reuses a counter (stream %d is at %d)", r, r.Stream, next)
	}
	if !seen && len(s.next) >= maxStreamsPerSession {
		d.mu.Unlock()
		return nil, fmt.Errorf("beaver: dealer: %v: more than %d streams in one session", r, maxStreamsPerSession)
	}
	if r.Kind == KindWeightTriple || r.Kind == KindWeightVectorTriple {
		k := r.K
		if r.Kind == KindWeightVectorTriple {
			k = 1
		}
		shape := [2]int{k, r.N}
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
	if d.statePath != "" && r.Counter >= s.rec.marks[r.Stream] {
		old, had := s.rec.marks[r.Stream]
		s.rec.marks[r.Stream] = reserve(r.Counter)
		if err := d.saveLocked(); err != nil {
			if had {
				s.rec.marks[r.Stream] = old
			} else {
				delete(s.rec.marks, r.Stream)
			}
			d.mu.Unlock()
			return nil, fmt.Errorf("beaver: dealer: %v: %w", r, err)
		}
	}
	s.next[r.Stream] = r.Counter + 1
	d.mu.Unlock()

	// Both parties' local parts and the weight mask are scratch: only the
	// correction leaves this function, so their buffers are recycled.
	buf0, buf1 := share.GetWords(localTotal(r, 0)), share.GetWords(localTotal(r, 1))
	defer share.PutWords(buf0)
	defer share.PutWords(buf1)
	p0 := expandLocalInto(buf0, s.keys[0], r)
	p1 := expandLocalInto(buf1, s.keys[1], r)
	var mask []uint64
	switch r.Kind {
	case KindWeightTriple:
		mask = weightMaskInto(share.GetWords(r.K*r.N), s.seeds[0], r.WeightID, r.K, r.N)
	case KindWeightVectorTriple:
		mask = weightMaskInto(share.GetWords(r.N), s.seeds[0], r.WeightID, 1, r.N)
	}
	defer share.PutWords(mask)
	out, err := correction(r, p0, p1, mask)
	if err != nil {
		return nil, err
	}
	d.items.Add(1)
	d.words.Add(int64(len(out)))
	return out, nil
}

// Dealer is the in-process dealer: it holds both parties' seeds and hands each
// party a Provider. Party 0's provider expands all its material locally;
// party 1's provider expands its masks locally and takes only the correction
// words from the dealer, by a function call instead of a network message (its
// DealerStats count the bytes those words would have cost on a wire). Used by
// tests, the quickstart and benchmarks where all parties share a process.
//
// Material is keyed by session like the networked dealer's: a provider bound
// with BindSession (as selection does, with the id both parties drew) gets
// that session's material once the other party's provider has presented the
// same id; a provider used without binding gets the dealer's default session
// (the zero id), shared by all such providers of this Dealer. Within a
// session the dealer refuses any counter of party 1 already served.
type Dealer struct {
	core     *dealerCore
	insecure bool
}

// NewDealer returns an in-process dealer with fresh random seeds.
func NewDealer() (*Dealer, error) {
	s0, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	s1, err := share.NewSeed()
	if err != nil {
		return nil, fmt.Errorf("beaver: new dealer: %w", err)
	}
	return NewDealerWithSeeds(s0, s1), nil
}

// NewDealerWithSeeds returns an in-process dealer with the given seeds (seed0
// for party 0, seed1 for party 1): reproducible material for tests, the same
// as a networked Server with the same seeds for the same session id.
func NewDealerWithSeeds(seed0, seed1 share.Seed) *Dealer {
	return &Dealer{core: newDealerCore(seed0, seed1)}
}

// NewInsecureModelOwnerDealer returns a dealer run by the model owner itself,
// INSECURE and for benchmarking only: it mirrors CrypTen's "trusted first
// party" mode, in which party 0 makes all correlated randomness, so party 0
// knows party 1's masks and could unmask everything party 1 sends. Its cost
// profile is that of NewDealer; never use it with real data.
func NewInsecureModelOwnerDealer(seed share.Seed) *Dealer {
	return &Dealer{core: newDealerCore(seed.Derive("insecure-p0-dealer/0"), seed.Derive("insecure-p0-dealer/1")), insecure: true}
}

// Insecure reports whether the dealer is the insecure model-owner dealer.
func (d *Dealer) Insecure() bool { return d.insecure }

// Provider returns a new Provider for party (0 or 1). Each call returns a
// fresh provider whose streams start at counter 0; a party should use one.
func (d *Dealer) Provider(party int) (Provider, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("beaver: provider for party %d, want 0 or 1", party)
	}
	core := d.core
	src := func(s *coreSession) corrector {
		if party == 1 {
			return inProcess{core, s}
		}
		return nil
	}
	bind := func(ctx context.Context, id SessionID) (share.Seed, corrector, error) {
		s, err := core.join(ctx, nil, id, party, "", DefaultSessionTimeout)
		if err != nil {
			return share.Seed{}, nil, err
		}
		return s.seeds[party], src(s), nil
	}
	auto := func() (SessionID, share.Seed, corrector) {
		s := core.defaultSession()
		return s.id, s.seeds[party], src(s)
	}
	return newSeededProvider(party, bind, auto), nil
}

// Stats returns the items the dealer served and the bytes of correction words
// they amount to.
func (d *Dealer) Stats() DealerStats {
	return DealerStats{BytesRecv: 8 * d.core.words.Load(), Items: d.core.items.Load()}
}

// inProcess hands party 1 the dealer's corrections of session s by a
// function call.
type inProcess struct {
	d *dealerCore
	s *coreSession
}

func (c inProcess) correct(ctx context.Context, r Request) ([]uint64, int64, int64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, 0, err
	}
	out, err := c.d.serve(c.s, r)
	if err != nil {
		return nil, 0, 0, err
	}
	return out, requestSize, 8 * int64(len(out)), nil
}

package dealer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/selectformer/selectformer/beaver"
)

// How a dealer pairs the two parties of a session: each presents the
// session id (join), the presentations pair by id (a dealer serves many
// sessions at once), and the session's budget is the smaller of the two
// announcements.

// waitKey is a presentation's session id and party.
type waitKey struct {
	id   beaver.SessionID
	role int
}

// maxSeenIDs bounds the other party's ids a waiting presentation records.
const maxSeenIDs = 4

// joiner is a party waiting in join for the other party's id.
type joiner struct {
	id     beaver.SessionID
	key    string
	budget uint64
	done   chan joinResult
	// seen are ids the other party presented while this one waited (at most
	// maxSeenIDs; d.mu guards it): what a timeout reports when the parties
	// do not agree on the session.
	seen []beaver.SessionID
}

// note records id among the other party's ids j saw. d.mu must be held.
func (j *joiner) note(id beaver.SessionID) {
	if len(j.seen) < maxSeenIDs && !slices.Contains(j.seen, id) {
		j.seen = append(j.seen, id)
	}
}

type joinResult struct {
	s   *coreSession
	err error
}

// sessionBudget returns the budget of a session whose parties announced a
// (0: none): the smaller announcement, at most the dealer's limit.
func (d *dealerCore) sessionBudget(a [2]uint64) uint64 {
	b := d.lim.budget
	for _, x := range a {
		if x != 0 && (b == 0 || x < b) {
			b = x
		}
	}
	return b
}

// join pairs role's presentation of session id (with the role's key
// fingerprint and the session budget it announces, 0 for none) with the
// other role's presentation of the same id: it waits until the other role
// presents it (or ctx ends, gone is closed, or timeout passes; then, if the
// other role presented only other ids meanwhile, the refusal says "session
// mismatch" and names them), and refuses when the id is the reserved zero
// id, when the session was served to other keys or was retired, or when no
// new session may be kept. Both parties get
// the session, whose budget is the smaller announcement (see
// sessionBudget; a later join may lower it, never raise it); each must call
// leave when its connection ends.
func (d *dealerCore) join(ctx context.Context, gone <-chan struct{}, id beaver.SessionID, role int, key string, budget uint64, timeout time.Duration) (*coreSession, error) {
	if id.IsZero() {
		return nil, refused(fmt.Errorf("beaver: dealer: the %s presented the zero session id", roleName(role)))
	}
	d.mu.Lock()
	if err := d.retiredErrorLocked(id); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if err := d.pairingErrorLocked(id, role, key); err != nil {
		d.mu.Unlock()
		return nil, err
	}
	if other := d.waiting[waitKey{id, 1 - role}]; other != nil {
		delete(d.waiting, waitKey{id, 1 - role})
		keys, budgets := [2]string{}, [2]uint64{}
		keys[role], keys[1-role] = key, other.key
		budgets[role], budgets[1-role] = budget, other.budget
		s, gen, err := d.openLocked(id, keys, budgets)
		d.mu.Unlock()
		if err == nil {
			// The session's record is durable before either party gets
			// its seed (party 0's seed is all its material).
			if err = d.persist(gen); err != nil {
				d.leave(s)
				d.leave(s)
				s, err = nil, fmt.Errorf("beaver: dealer: open session %s…: %w", id.Short(), err)
			}
		}
		other.done <- joinResult{s, err}
		return s, err
	}
	wk := waitKey{id, role}
	if old := d.waiting[wk]; old != nil {
		old.done <- joinResult{err: refused(fmt.Errorf("beaver: dealer: superseded by a newer connection of the %s presenting session %s…", roleName(role), id.Short()))}
	}
	w := &joiner{id: id, key: key, budget: budget, done: make(chan joinResult, 1)}
	for k, o := range d.waiting {
		if k.role == 1-role {
			w.note(k.id)
			o.note(id)
		}
	}
	d.waiting[wk] = w
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
	seen := slices.Clone(w.seen)
	if d.waiting[wk] == w {
		delete(d.waiting, wk)
		d.mu.Unlock()
	} else {
		// The other party paired with w meanwhile (or a newer connection
		// superseded it): take the result (and give the session back).
		// Its ids matched, so a timeout is not a mismatch.
		d.mu.Unlock()
		if r := <-w.done; r.s != nil {
			d.leave(r.s)
		}
		seen = nil
	}
	if len(seen) > 0 {
		// The other party was there, with other sessions: most likely the
		// parties do not agree on this one (a dealer serving several
		// sessions cannot tell at once, since a sharded selection's pairs
		// present theirs in any order).
		short := make([]string, len(seen))
		for i, o := range seen {
			short[i] = o.Short() + "…"
		}
		return nil, refused(fmt.Errorf("beaver: dealer: session mismatch: the %s presented session %s…, the %s only %s while it waited (%v): do the parties agree on the session?",
			roleName(role), id.Short(), roleName(1-role), strings.Join(short, ", "), why))
	}
	return nil, fmt.Errorf("beaver: dealer: waiting for the %s to present session %s…: %w", roleName(1-role), id.Short(), why)
}

// openLocked returns session id for the pairing keys and the budgets both
// parties announced, recording a new session's keys, and the gen to
// persist before the session is used. Both joins count as active. d.mu
// must be held.
func (d *dealerCore) openLocked(id beaver.SessionID, keys [2]string, budgets [2]uint64) (*coreSession, uint64, error) {
	for r := range 2 {
		if err := d.pairingErrorLocked(id, r, keys[r]); err != nil {
			return nil, 0, err
		}
	}
	d.pruneLocked()
	if err := d.retiredErrorLocked(id); err != nil {
		return nil, 0, err
	}
	if d.state.sessions[id] == nil {
		if err := d.makeRoomLocked(); err != nil {
			return nil, 0, err
		}
	}
	s, created := d.sessionLocked(id)
	if created {
		s.rec.keys = keys
		d.state.sessions[id] = s.rec
		d.gen++
	}
	if b := d.sessionBudget(budgets); s.rec.budget == 0 || b != 0 && b < s.rec.budget {
		s.rec.budget = b
	}
	s.rec.last = d.now().Unix()
	s.active += 2
	return s, d.gen, nil
}

// leave ends one join of session s (its connection is done) and writes the
// state, so that the work it charged is kept.
func (d *dealerCore) leave(s *coreSession) {
	d.mu.Lock()
	s.active--
	d.gen++
	g := d.gen
	d.mu.Unlock()
	_ = d.persist(g) // best effort: the next write keeps it otherwise
}

package protocol

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/prio"
)

// ComputeGate bounds how many sessions of a party compute at once and
// serves them by priority: a session that entered the gate (Session.Enter)
// holds one of its slots while it computes and gives it back while it
// waits for its peer, and a freed slot goes to the waiting session with the
// lowest priority number. With the same priorities on the sessions'
// streams (the link serves their waiting frames lowest number first), the
// batches in flight stop moving in step: when every batch shares the
// processor and the link fairly, all of them compute at once (the link
// idles) and then all of them send at once (the processor idles), so the
// delay is the sum of the compute, bandwidth and latency bounds rather than
// their maximum. Served by priority, the oldest batch runs as if alone and
// the younger ones fill the gaps it leaves.
//
// A session holds its slot from Enter to Leave except while it waits for
// its peer or for correlated randomness that is not at hand: code run
// between them must not wait for another session of the same gate (or for
// anything such a session must do first), or the gate can run out of slots
// with every holder waiting (call Leave before such a wait). Drawing
// material is such a wait unless the provider has it at hand
// (MaterialReady): a dealer-free provider makes each item with the peer on
// the item's stream, so the peer's half of the item may wait for a slot of
// the peer's gate, whose holders may wait for material whose halves this
// party's waiting sessions would draw; on d5bf317 that cycle stopped
// mpcbench's dealer-free selections (issue 38;
// TestComputeGateReleasedWhileDrawing, and bench's
// TestSelectDealerFreeNoHang for the whole pipeline).
//
// A ComputeGate is safe for concurrent use.
type ComputeGate struct {
	g     *prio.Gate
	slots int
}

// NewComputeGate returns a gate of slots slots (at least 1); a party's
// scheduler uses one slot per core.
func NewComputeGate(slots int) *ComputeGate {
	slots = max(slots, 1)
	return &ComputeGate{g: prio.NewGate(slots), slots: slots}
}

// Slots returns the number of sessions that may compute at once.
func (g *ComputeGate) Slots() int { return g.slots }

// Enter makes the session compute under g at priority p (lower numbers
// first): it waits for a slot of g, holds it while it computes, gives it
// back during each exchange with its peer and takes one again after; its
// stream's frames get priority p on the connection. Leave ends it. A
// rehearsal ignores both.
func (s *Session) Enter(ctx context.Context, g *ComputeGate, p int64) error {
	if s.dry {
		return nil
	}
	switch {
	case g == nil:
		return fmt.Errorf("protocol: session on stream %d entered a nil compute gate", s.stream.ID())
	case s.gate != nil:
		return fmt.Errorf("protocol: session on stream %d entered a compute gate twice", s.stream.ID())
	}
	s.stream.SetPriority(p)
	if err := g.g.Acquire(ctx, p, nil); err != nil {
		return fmt.Errorf("protocol: wait for a compute slot: %w", err)
	}
	s.gate, s.prio, s.held = g, p, true
	return nil
}

// Leave gives back the slot Enter took (if it holds one) and resets the
// stream's priority to 0.
func (s *Session) Leave() {
	if s.dry {
		return
	}
	if s.gate != nil && s.held {
		s.gate.g.Release()
	}
	s.gate, s.held = nil, false
	s.stream.SetPriority(0)
}

// waitStart gives the compute slot back before a wait for the peer.
func (s *Session) waitStart() {
	if s.gate != nil && s.held {
		s.gate.g.Release()
		s.held = false
	}
}

// waitEnd takes a compute slot again after a wait for the peer; err is the
// wait's own error, returned first.
func (s *Session) waitEnd(ctx context.Context, err error) error {
	if s.gate == nil || s.held {
		return err
	}
	if aerr := s.gate.g.Acquire(ctx, s.prio, nil); aerr != nil {
		if err == nil {
			err = fmt.Errorf("protocol: wait for a compute slot: %w", aerr)
		}
		return err
	}
	s.held = true
	return err
}

// MaterialReady is implemented by providers that know whether a request's
// material is at hand (drawn ahead: Prefetch.Wrap's provider, the batch
// lanes' provider of package selection/lanes). A session in a compute gate
// keeps its slot while it takes material at hand, and gives the slot back
// while it waits for any other (draws): the providers that do not
// implement it are waited for, as the peer is.
type MaterialReady interface {
	// Ready reports whether Material(ctx, r) would return at once.
	Ready(r beaver.Request) bool
}

// draws is a session's provider as its protocols draw from it: its
// Material gives the session's compute slot back while it waits for
// material that is not at hand (see ComputeGate).
type draws struct {
	beaver.Provider
	s *Session
}

// Unwrap implements beaver.Wrapper.
func (d *draws) Unwrap() beaver.Provider { return d.Provider }

// Material implements beaver.Provider.
func (d *draws) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	s := d.s
	if s.gate == nil || !s.held {
		return d.Provider.Material(ctx, r)
	}
	if mr, ok := d.Provider.(MaterialReady); ok && mr.Ready(r) {
		return d.Provider.Material(ctx, r)
	}
	s.waitStart()
	m, err := d.Provider.Material(ctx, r)
	if err = s.waitEnd(ctx, err); err != nil {
		return beaver.Material{}, err
	}
	return m, nil
}

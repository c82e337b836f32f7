package beaver

import (
	"context"
	"fmt"
)

// Sequencer is implemented by providers that draw a known sequence of items
// faster at once than one Material call at a time. A networked dealer's
// client (Client) sends every request of the sequence before it reads the
// first reply, so the sequence costs one round trip to the dealer rather
// than one per item; that is what takes the dealer off a computation's
// critical path when its requests are known ahead (see DrawSequence).
type Sequencer interface {
	// MaterialSeq draws the items rs, all of one stream, in order: the
	// same items, at the same counters, as len(rs) Material calls would
	// draw. It hands each item to deliver as soon as it is complete, in
	// order, and stops at the first error (its own or deliver's), which it
	// returns; the counters of the whole sequence are used up either way.
	MaterialSeq(ctx context.Context, rs []Request, deliver func(i int, m Material) error) error
}

// DrawSequence draws rs, all of one stream, from p in order and hands each
// item to deliver: through p's MaterialSeq when p is a Sequencer, otherwise
// by one Material call per item. It stops at the first error and returns it.
func DrawSequence(ctx context.Context, p Provider, rs []Request, deliver func(i int, m Material) error) error {
	if err := CheckSequence(rs); err != nil {
		return err
	}
	if sq, ok := p.(Sequencer); ok {
		return sq.MaterialSeq(ctx, rs, deliver)
	}
	for i, r := range rs {
		m, err := p.Material(ctx, r)
		if err != nil {
			return err
		}
		if err := deliver(i, m); err != nil {
			return err
		}
	}
	return nil
}

// CheckSequence checks that rs are valid requests of one stream with zero
// counters: what a Sequencer checks before it draws a sequence.
func CheckSequence(rs []Request) error {
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("beaver: sequence item %d: %w", i, err)
		}
		switch {
		case r.Counter != 0:
			return fmt.Errorf("beaver: sequence item %d: %v: the provider assigns counters; the request's must be zero", i, r)
		case r.Stream != rs[0].Stream:
			return fmt.Errorf("beaver: sequence item %d: stream %d, the sequence's is %d", i, r.Stream, rs[0].Stream)
		}
	}
	return nil
}

package beaver

import (
	"context"
	"fmt"
	"math"
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

// seqCorrector is a corrector that pipelines a sequence of requests.
type seqCorrector interface {
	corrector
	// correctSeq returns the corrections of rs (one stream, counters
	// assigned, in counter order) to deliver in order, and the dealer
	// traffic the sequence cost.
	correctSeq(ctx context.Context, rs []Request, deliver func(i int, corr []uint64) error) (sent, recv int64, err error)
}

// DrawSequence draws rs, all of one stream, from p in order and hands each
// item to deliver: through p's MaterialSeq when p is a Sequencer, otherwise
// by one Material call per item. It stops at the first error and returns it.
func DrawSequence(ctx context.Context, p Provider, rs []Request, deliver func(i int, m Material) error) error {
	if err := checkSequence(rs); err != nil {
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

// checkSequence checks that rs are valid requests of one stream with zero
// counters.
func checkSequence(rs []Request) error {
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

var _ Sequencer = (*seededProvider)(nil)

// MaterialSeq implements Sequencer. Party 0 expands every item locally;
// party 1 pipelines the sequence's corrections when its dealer is networked.
func (p *seededProvider) MaterialSeq(ctx context.Context, rs []Request, deliver func(i int, m Material) error) error {
	if err := checkSequence(rs); err != nil {
		return err
	}
	if len(rs) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("beaver: sequence: %w", err)
	}
	s, err := p.session()
	if err != nil {
		return fmt.Errorf("beaver: sequence: %w", err)
	}
	st := rs[0].Stream
	p.mu.Lock()
	base := p.pos[st]
	if uint64(len(rs)) > math.MaxUint64-base {
		p.mu.Unlock()
		return fmt.Errorf("beaver: sequence of %d items: counter space of stream %d exhausted", len(rs), st)
	}
	p.pos[st] = base + uint64(len(rs))
	p.mu.Unlock()
	seq := make([]Request, len(rs))
	for i, r := range rs {
		r.Counter = base + uint64(i)
		seq[i] = r
	}
	item := func(i int, corr []uint64) error {
		r := seq[i]
		if want := r.CorrectionWords(p.party); len(corr) != want {
			return fmt.Errorf("beaver: %v: dealer sent %d words, want %d", r, len(corr), want)
		}
		p.items.Add(1)
		return deliver(i, assemble(p.party, r, expandLocal(s.keys, r), corr))
	}
	if sc, ok := s.src.(seqCorrector); ok && dealtToAll(seq, p.party) {
		sent, recv, err := sc.correctSeq(ctx, seq, item)
		p.bytesSent.Add(sent)
		p.bytesRecv.Add(recv)
		if err != nil {
			return fmt.Errorf("beaver: sequence of %d items on stream %d: %w", len(seq), st, err)
		}
		return nil
	}
	for i, r := range seq {
		corr, err := p.correction(ctx, s, r)
		if err != nil {
			return err
		}
		if err := item(i, corr); err != nil {
			return err
		}
	}
	return nil
}

// dealtToAll reports whether every request of rs gives party dealer words.
func dealtToAll(rs []Request, party int) bool {
	for _, r := range rs {
		if !r.dealtTo(party) {
			return false
		}
	}
	return true
}

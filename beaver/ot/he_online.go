package ot

import (
	"context"
	"errors"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// A Lattice's weight triples made inside the computation
// (beaver.WeightProducer): the same item as Generate's (he.go), with party
// 1's mask A chosen by the caller, its share R from a fresh random seed, and
// party 1's message carried by the caller (protocol.Session, in the
// computation's own message) instead of the stream's generator. Party 0's
// view is the item's as Generate runs it: party 1's outputs, checked the
// same way (the check does not depend on A), so what either party learns is
// unchanged; the item's name for the check's hashes is the caller's
// (Stream, Counter), which protocol keeps apart from the provider's own
// counters.

var _ beaver.WeightProducer = (*Provider)(nil)

// onlineDomain is the domain of party 1's draws for an item made inside
// the computation (R and the check masks, from a fresh seed per item).
const onlineDomain = "selectformer/beaver/ot/he/online/v1"

// ProducesWeights implements beaver.WeightProducer: the provider makes
// weight triples inside the computation when its weight masks are a
// Lattice's (VectorOLE's vector OLE runs on the stream's generator only).
func (p *Provider) ProducesWeights() bool {
	_, ok := p.masks.(*Lattice)
	return ok
}

// WeightProduct implements beaver.WeightProducer: it plans the item r
// (KindWeightTriple; Stream and Counter are the caller's) in the bound
// session; party 0 registers the item's encryptions for upload on the
// session stream before it returns (the invariant of he.go: party 1's wait
// for them ends once party 0's half has started).
func (p *Provider) WeightProduct(ctx context.Context, r beaver.Request) (beaver.WeightProduct, error) {
	h, ok := p.masks.(*Lattice)
	if !ok {
		return nil, fmt.Errorf("ot: %v: the provider's weight masks are not a Lattice's: it makes no weight triple inside the computation", r)
	}
	if r.Kind != beaver.KindWeightTriple {
		return nil, fmt.Errorf("ot: %v: only weight triples are made inside the computation", r)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	sess, err := p.bound(ctx, r.String())
	if err != nil {
		return nil, err
	}
	it, err := h.item(r)
	if err != nil {
		return nil, fmt.Errorf("ot: party %d: %v: %w", p.party, r, err)
	}
	w := &onlineWeight{p: p, h: h, sid: sess.ID(), it: it}
	if p.party == 0 {
		if err := h.err(); err != nil {
			return nil, fmt.Errorf("ot: party 0: %v: the HE key was discarded after a failed check: %w", r, err)
		}
		h.need(w.sid, it, p.item(w.sid, r).WeightMask)
	}
	return w, nil
}

// onlineWeight is one party's half of a weight triple made inside the
// computation.
type onlineWeight struct {
	p   *Provider
	h   *Lattice
	sid beaver.SessionID
	it  *heItem
}

// Words implements beaver.WeightProduct: party 1's message is the item's,
// the tag, the outputs and the commitment (he.OutputSizes of the public
// plan).
func (w *onlineWeight) Words() int { return w.it.words() }

// Watch implements beaver.WeightProduct: party 0's wait for party 1's
// message ends with the upload service too.
func (w *onlineWeight) Watch(ctx context.Context) (context.Context, func()) {
	if w.p.party != 0 {
		return ctx, func() {}
	}
	return w.h.watch(ctx)
}

// Await implements beaver.WeightProduct: party 1 asks for the item's
// encryptions it neither holds nor asked for and waits for them.
func (w *onlineWeight) Await(ctx context.Context) error {
	if w.p.party != 1 {
		return fmt.Errorf("ot: %v: party %d awaits no encryption", w.it.r, w.p.party)
	}
	if _, err := w.h.await(ctx, w.sid, w.it); err != nil {
		return fmt.Errorf("ot: party 1: %v: %w", w.it.r, err)
	}
	return nil
}

// Outputs implements beaver.WeightProduct: party 1's message for its mask
// a (m×k) and its share R of a·B, R and the check masks drawn from a fresh
// random seed.
func (w *onlineWeight) Outputs(ctx context.Context, a []uint64) ([]uint64, []uint64, error) {
	it := w.it
	if w.p.party != 1 {
		return nil, nil, fmt.Errorf("ot: %v: party %d makes no outputs", it.r, w.p.party)
	}
	if len(a) != it.m*it.k {
		return nil, nil, fmt.Errorf("ot: %v: mask of %d words, want %d×%d", it.r, len(a), it.m, it.k)
	}
	draw := w.h.draw
	if draw == nil {
		seed, err := share.NewSeed()
		if err != nil {
			return nil, nil, fmt.Errorf("ot: %v: %w", it.r, err)
		}
		draw = share.NewPRG(seed, onlineDomain).Words
	}
	R := draw(it.m * it.n)
	msg, err := w.h.outputs(ctx, w.sid, it, a, R, draw)
	if err != nil {
		return nil, nil, fmt.Errorf("ot: party 1: %v: %w", it.r, err)
	}
	w.done()
	return msg, R, nil
}

// Accept implements beaver.WeightProduct: party 0 decrypts and checks party
// 1's message; a failed check discards the HE key and ends the provider's
// binds, as in Generate.
func (w *onlineWeight) Accept(msg []uint64) ([]uint64, error) {
	if w.p.party != 0 {
		return nil, fmt.Errorf("ot: %v: party %d accepts no outputs", w.it.r, w.p.party)
	}
	C0, err := w.h.accept(w.sid, w.it, msg)
	if err != nil {
		if errors.Is(err, beaver.ErrCorrelationCheck) {
			w.p.checkErr.CompareAndSwap(nil, &err)
		}
		return nil, fmt.Errorf("ot: party 0: %v: %w", w.it.r, err)
	}
	w.done()
	return C0, nil
}

// done counts the item as served (the provider's and the Lattice's
// counters, as Material and Generate count theirs).
func (w *onlineWeight) done() {
	w.p.items.Add(1)
	w.h.mu.Lock()
	w.h.stats.Items++
	w.h.mu.Unlock()
}

package ot

import (
	"context"
	"errors"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// TestHEPairs: a pairable item is made with its partner, the next item of
// the same key on the same stream: one message of two items' outputs, then
// no message at all for the partner; every correlation C0 + C1 = A·B holds,
// the pair shares its passes, and the partner is the stream's own (the
// same key on another stream, or another shape, is made afresh). A tall
// item is not paired.
func TestHEPairs(t *testing.T) {
	p0, p1, _ := heProviders(t)
	ctx := testCtx(t)
	mask := func(id uint64, k, n int) []uint64 {
		w, err := p0.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 5, M: 4, K: 6, N: 8}
	other := r
	other.Stream = 1
	shorter := r
	shorter.M = 3
	tall := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 6, M: maxPairWords / 2, K: 1, N: 2}
	it, err := p1.lat().item(r)
	if err != nil {
		t.Fatal(err)
	}
	itTall, err := p1.lat().item(tall)
	if err != nil {
		t.Fatal(err)
	}
	if !p1.lat().pairable(it) || p1.lat().pairable(itTall) {
		t.Fatal("the short item must pair and the tall one not")
	}
	one := int64(8 * it.words())
	asks := int64(8 * heRequestWords * len(it.terms)) // the first item asks for the plan's encryptions
	for i, c := range []struct {
		r        beaver.Request
		sent     int64 // party 1's bytes for the item (uploads aside)
		partners int64
	}{
		{r, asks + 2*one, 0}, // made with its partner
		{other, 2 * one, 0},  // another stream: its own pair
		{shorter, -1, 0},     // another shape: its own pair
		{r, 0, 1},            // the partner: no message
		{r, 2 * one, 1},      // made afresh, with a new partner
		{r, 0, 2},            // and that partner
		{tall, -1, 2},        // not paired
		{tall, -1, 2},        // nor the next
		{other, 0, 3},        // the other stream's partner
	} {
		before := p1.Stats().BytesSent
		m0, m1 := drawPair(t, ctx, p0, p1, c.r)
		checkMaterial(t, c.r, m0, m1, mask)
		sent := p1.Stats().BytesSent - before
		if c.sent >= 0 && sent != c.sent {
			t.Errorf("draw %d (%v): party 1 sent %d bytes, want %d", i, c.r, sent, c.sent)
		}
		if c.sent < 0 && sent == 0 {
			t.Errorf("draw %d (%v): served without a message", i, c.r)
		}
		for p, pr := range []*Provider{p0, p1} {
			if got := pr.lat().Stats().Partners; got != c.partners {
				t.Errorf("draw %d: party %d served %d partners, want %d", i, p, got, c.partners)
			}
		}
	}
	// Pairs share a pass: 4 pairs of one output each (r twice, other,
	// shorter) and two tall items of their own.
	st := p1.lat().Stats()
	wantProducts := int64(8*len(it.out) + 2*len(itTall.out))
	if st.Products != wantProducts || st.Passes != wantProducts-int64(4*len(it.out)) {
		t.Errorf("party 1: %d products in %d passes, want %d in %d", st.Products, st.Passes, wantProducts, wantProducts-int64(4*len(it.out)))
	}
}

// TestHEPairEviction: a stream keeps its partners within
// maxStreamPartnerWords, evicting the oldest at both parties alike, so an
// evicted key's next item is made afresh by both (no party waits for a
// message its peer does not send) and every correlation holds.
func TestHEPairEviction(t *testing.T) {
	p0, p1, _ := heProviders(t)
	ctx := testCtx(t)
	mask := func(id uint64, k, n int) []uint64 {
		w, err := p0.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// Five keys of maxPairWords words each (m·(k+n)), four of which fit
	// maxStreamPartnerWords: the fifth evicts the first.
	req := func(id uint64) beaver.Request {
		return beaver.Request{Kind: beaver.KindWeightTriple, WeightID: id, M: maxPairWords / 64, K: 62, N: 2}
	}
	if 4*maxPairWords > maxStreamPartnerWords || 5*maxPairWords <= maxStreamPartnerWords {
		t.Fatal("the bounds changed: resize the keys")
	}
	for id := uint64(1); id <= 5; id++ {
		if !p1.lat().pairable(mustItem(t, p1, req(id))) {
			t.Fatal("the items must pair")
		}
		m0, m1 := drawPair(t, ctx, p0, p1, req(id))
		checkMaterial(t, req(id), m0, m1, mask)
	}
	for p, pr := range []*Provider{p0, p1} {
		if st := pr.lat().Stats(); st.PartnersEvicted != 1 || len(pr.lat().partners) != 4 {
			t.Fatalf("party %d: %d evicted, %d kept; want 1 and 4", p, st.PartnersEvicted, len(pr.lat().partners))
		}
	}
	before := p1.Stats().BytesSent
	m0, m1 := drawPair(t, ctx, p0, p1, req(1)) // evicted: made afresh by both
	checkMaterial(t, req(1), m0, m1, mask)
	if p1.Stats().BytesSent == before {
		t.Error("an evicted key's item was served without a message")
	}
	m0, m1 = drawPair(t, ctx, p0, p1, req(2)) // kept: its partner
	checkMaterial(t, req(2), m0, m1, mask)
}

// TestHEPairSecondChecked: party 0 checks the pair's second item as its
// own: an alteration there fails the item with beaver.ErrCorrelationCheck
// and keeps no partner.
func TestHEPairSecondChecked(t *testing.T) {
	o := withLattice(t, LatticeOptions{})
	tc := &tamper{}
	p0, p1 := tamperPair(t, o, tc)
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 4, M: 4, K: 8, N: 12}
	it := mustItem(t, p0, r)
	tc.outWords = 2 * it.words()
	tc.out = func(w []uint64) { w[it.words()+5] ^= 1 << 20 } // inside the second item's first output
	ctx := testCtx(t)
	errs := make(chan error, 1)
	go func() {
		_, err := p1.Material(ctx, r)
		errs <- err
	}()
	m0, err := p0.Material(ctx, r)
	if err1 := <-errs; err1 != nil {
		t.Fatalf("the data owner's side failed: %v", err1)
	}
	if !tc.done {
		t.Fatal("nothing was altered")
	}
	if !errors.Is(err, beaver.ErrCorrelationCheck) || m0.Parts != nil {
		t.Fatalf("party 0: %v (parts %v), want a failed check and no parts", err, m0.Parts != nil)
	}
	if n := len(p0.lat().partners); n != 0 {
		t.Errorf("party 0 kept %d partners of a pair that failed its check", n)
	}
	if _, err := p0.Material(context.Background(), r); !errors.Is(err, beaver.ErrCorrelationCheck) {
		t.Errorf("after the failed check: %v, want the key discarded", err)
	}
}

func mustItem(t *testing.T, p *Provider, r beaver.Request) *heItem {
	t.Helper()
	it, err := p.lat().item(r)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

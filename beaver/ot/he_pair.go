package ot

import (
	"github.com/selectformer/selectformer/beaver"
)

// Items made in pairs (issue 38, bench/TWOHOSTS.md step 28).
//
// Party 1's pass over an encrypted matrix regenerates every weight
// ciphertext's seeded c1 half and streams its c0 from memory, per pass and
// not per row, which at sst2's defaults is a third of its HE work. The
// products of the lanes' batches on one matrix hardly ever wait together
// over a WAN (step 12 merges only those that do), but a stream asks for the
// same item shape once a batch, and a weight-mask item is preprocessing: A
// and R are party 1's fresh randomness, B party 0's mask, none depends on
// the batch. So a pairable item is made together with its partner, the
// next item of the same key on the same stream: party 1 draws both items'
// A and R, computes both products in one pass (he.Scheme.MulMaskedSums) and
// sends both messages at once; party 0 checks each as its own item (the
// partner's hashes bound to the item and a partner marker, heItemBytes)
// and both keep the partner's parts, which the next request of that key on
// that stream takes without any message. The decision is a function of the
// stream's sequence of items and the public plan, the same at both parties
// (as every item's sizes already are), and a stream's items still wait
// only on that stream's earlier items (the no-hang invariant, he.go).
//
// What it costs: both parties hold one partner per key and stream (at most
// maxPairWords words of party 1's A and R, maxStreamPartnerWords a
// stream); a stream's last partner of a phase is made and never used (one
// batch's products per lane and phase: 0.3–1.2% of the HE work at sst2's
// defaults).

// maxPairWords bounds m·(k+n), party 1's words of a partner kept (A and R):
// 2 MiB, a few MB per lane at sst2's defaults. Taller products (12,304
// rows of an MLP's inputs) are not paired: their weights are few and their
// rows many, so the pass's regeneration is a small part of their work.
const maxPairWords = 1 << 18

// pairKey is the identity of items that may pair: the stream and
// everything that shapes the item but its counter.
type pairKey struct {
	stream  uint32
	kind    beaver.Kind
	id      uint64
	m, k, n int
	ring    uint
}

func keyOfPair(it *heItem) pairKey {
	return pairKey{stream: it.r.Stream, kind: it.r.Kind, id: it.r.WeightID, m: it.m, k: it.k, n: it.n, ring: it.r.RingBits}
}

// pairable reports whether it is made in pairs: its A and R are at most
// maxPairWords, and each of its outputs' accumulators fit one pass twice
// (he.Scheme.PassFits), so that the pair shares its passes.
func (h *Lattice) pairable(it *heItem) bool {
	if it.m*(it.k+it.n) > maxPairWords {
		return false
	}
	for _, o := range it.plan.Outputs {
		if !h.sc.PassFits(o.Layout, o.Width, o.Rows, o.Rows) {
			return false
		}
	}
	return true
}

// partner returns the item made with it: the same plan, its identity marked
// (heItemBytes).
func (it *heItem) partner() *heItem {
	p := *it
	p.second = true
	return &p
}

// maxStreamPartnerWords bounds the partners a stream keeps (party 1's
// words of A and R, maxPairWords each at most): 8 MiB. Keeping one evicts
// the stream's oldest until the rest fit. The eviction is a function of the
// stream's sequence of items alone, the same at both parties, and so is
// everything else that decides whether an item is served by a partner:
// ReleaseWeights, which the two parties call at moments of their own, does
// not drop partners (a party that dropped one its peer kept would wait for
// a message the peer never sends). A phase's partners thus go as the next
// phase's items arrive on the stream.
const maxStreamPartnerWords = 1 << 20

// partner is a pair's second item kept: its parts, its size in party 1's
// words (m·(k+n), at both parties) and when it was kept.
type partner struct {
	parts [][]uint64
	words int
	seq   uint64
}

// takePartner removes and returns the partner kept for it's key, nil if
// none.
func (h *Lattice) takePartner(it *heItem) [][]uint64 {
	k := keyOfPair(it)
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.partners[k]
	if !ok {
		return nil
	}
	delete(h.partners, k)
	h.stats.Partners++
	return p.parts
}

// keepPartner keeps ps, the parts of it's partner, for the next item of
// its key, after evicting the stream's oldest partners beyond
// maxStreamPartnerWords.
func (h *Lattice) keepPartner(it *heItem, ps [][]uint64) {
	k := keyOfPair(it)
	words := it.m * (it.k + it.n)
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		held, oldest, found := 0, pairKey{}, false
		for o, p := range h.partners {
			if o.stream != k.stream {
				continue
			}
			held += p.words
			if !found || p.seq < h.partners[oldest].seq {
				oldest, found = o, true
			}
		}
		if !found || held+words <= maxStreamPartnerWords {
			break
		}
		delete(h.partners, oldest)
		h.stats.PartnersEvicted++
	}
	h.partnerSeq++
	h.partners[k] = &partner{parts: ps, words: words, seq: h.partnerSeq}
}

package bench

import (
	"context"
	"slices"
	"sync"

	"github.com/selectformer/selectformer/beaver"
)

// KindUse is how much of one correlation kind a computation drew: the
// count behind "count before you build" (bench/TWOHOSTS.md).
type KindUse struct {
	// Kind names the correlation kind (beaver.Kind.String).
	Kind string `json:"kind"`
	// Items is the number of requests of the kind.
	Items int64 `json:"items"`
	// N is the sum of the requests' N: elements of an elementwise kind (for
	// the bit-packed AND kinds, 64-gate words), the output columns of a
	// matrix kind.
	N int64 `json:"n"`
	// MACs is the multiply-adds the dealer makes for the kind (matrix kinds;
	// beaver.Request.MACs).
	MACs uint64 `json:"macs"`
	// DealerWords is the dealer words each party receives
	// (beaver.Request.CorrectionWords).
	DealerWords [2]int64 `json:"dealer_words"`
	// PartWords is the words of material each party holds
	// (beaver.Request.PartWords), dealer words included.
	PartWords [2]int64 `json:"part_words"`
}

// kindCounter counts the requests drawn through the provider it wraps, per
// kind, from one party's side (weight masks are no requests: they pass).
type kindCounter struct {
	beaver.Provider
	mu  sync.Mutex
	use map[beaver.Kind]*KindUse
}

// Unwrap implements beaver.Wrapper.
func (k *kindCounter) Unwrap() beaver.Provider { return k.Provider }

func newKindCounter(p beaver.Provider) *kindCounter {
	return &kindCounter{Provider: p, use: make(map[beaver.Kind]*KindUse)}
}

// Material implements beaver.Provider, counting r.
func (c *kindCounter) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	c.mu.Lock()
	u := c.use[r.Kind]
	if u == nil {
		u = &KindUse{Kind: r.Kind.String()}
		c.use[r.Kind] = u
	}
	u.Items++
	u.N += int64(r.N)
	u.MACs += r.MACs()
	for p := range 2 {
		u.DealerWords[p] += int64(r.CorrectionWords(p))
		for _, w := range r.PartWords(p) {
			u.PartWords[p] += int64(w)
		}
	}
	c.mu.Unlock()
	return c.Provider.Material(ctx, r)
}

// kindUses returns what the counter counted, ordered by kind name.
func (c *kindCounter) kindUses() []KindUse {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]KindUse, 0, len(c.use))
	for _, u := range c.use {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b KindUse) int {
		switch {
		case a.Kind < b.Kind:
			return -1
		case a.Kind > b.Kind:
			return 1
		}
		return 0
	})
	return out
}

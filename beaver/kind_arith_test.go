package beaver_test

import (
	"context"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/testharness/beavertest"
)

// TestVerifyCatchesZeroedShare: the relation checks of the elementwise
// arithmetic kinds (what every provider's material is tested against)
// catch one party's share of any one part zeroed: the dealer words of a
// dealt part that hand over the relation itself (the other party's share
// zero, which TestDealtWordsPadded keeps out of the dealer), a dropped mask
// A or B, a lost product. A square-and-product quadruple is a square pair
// and a triple on one A: each of its two relations is checked.
func TestVerifyCatchesZeroedShare(t *testing.T) {
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{9})
			for _, r := range []beaver.Request{
				{Kind: beaver.KindTriple, N: 40},
				{Kind: beaver.KindSquare, N: 40},
				{Kind: beaver.KindSquareProduct, N: 40},
			} {
				c, _ := beaver.Lookup(r.Kind)
				ms, err := beavertest.DrawBoth(context.Background(), ps, r)
				if err != nil {
					t.Fatalf("%v: %v", r, err)
				}
				m := [2][][]uint64{ms[0].Parts, ms[1].Parts}
				if err := c.Verify(r, nil, m[0], m[1]); err != nil {
					t.Fatalf("%v: untouched material: %v", r, err)
				}
				for p := range 2 {
					for i := range m[p] {
						kept := m[p][i]
						m[p][i] = make([]uint64, len(kept))
						if err := c.Verify(r, nil, m[0], m[1]); err == nil {
							t.Errorf("%v: party %d's share of part %d zeroed: Verify holds", r, p, i)
						}
						m[p][i] = kept
					}
				}
			}
		})
	}
}

// Package beavertest holds the fixtures the tests of correlated randomness
// share (beaver's, beaver/dealer's, beaver/marks', beaver/ot's): fixed
// dealer seeds, a fixed mix of every built-in kind, binding and drawing
// from both parties' providers with each party's material checked against
// its kind's layout, and the words two draws share.
package beavertest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Seeds returns two fixed dealer seeds derived from b: reproducible
// material for a test.
func Seeds(b byte) (share.Seed, share.Seed) {
	var s share.Seed
	s[0] = b
	return s.Derive("beaver-test/0"), s.Derive("beaver-test/1")
}

// Mix is a fixed mix of every built-in kind (sizes whose words are all
// uniform: BitPair, RowBitTriple and Wrap sizes are multiples of 64, so no word is a
// masked tail, and Wrap's f = 62 leaves 62 random bits in each share of its
// product, where f = 16 would leave 16 and words would repeat by chance).
var Mix = []beaver.Request{
	{Kind: beaver.KindTriple, Stream: 2, N: 200},
	{Kind: beaver.KindSquare, Stream: 2, N: 100},
	{Kind: beaver.KindSquareProduct, Stream: 2, N: 100},
	{Kind: beaver.KindMatTriple, Stream: 3, Batch: 2, M: 8, K: 16, N: 8},
	{Kind: beaver.KindWeightTriple, Stream: 3, WeightID: 1, M: 16, K: 32, N: 16},
	{Kind: beaver.KindWeightVectorTriple, Stream: 4, WeightID: 2, M: 16, N: 32},
	{Kind: beaver.KindAND, Stream: 4, N: 128},
	{Kind: beaver.KindCrossAND, Stream: 5, N: 128},
	{Kind: beaver.KindWrap, Stream: 5, N: 128, FracBits: 62},
	{Kind: beaver.KindBitPair, Stream: 6, N: 256},
	{Kind: beaver.KindRowBitTriple, Stream: 6, M: 128, N: 8},
}

// BindBoth binds both providers to id at once (a dealer, or the peer, waits
// for the other party's presentation), failing t on an error.
func BindBoth(t testing.TB, ps [2]beaver.Provider, id beaver.SessionID) {
	t.Helper()
	var errs [2]error
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); errs[p] = ps[p].BindSession(context.Background(), id) }()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("party %d: bind: %v", p, err)
		}
	}
}

// DrawEach draws r from party 0's provider, then from party 1's (a party
// that fails stops the draw: the other draws nothing), and checks each
// party's material against the layout of r (beaver.Material.Check).
func DrawEach(ctx context.Context, ps [2]beaver.Provider, r beaver.Request) ([2]beaver.Material, error) {
	var out [2]beaver.Material
	for p := range 2 {
		m, err := ps[p].Material(ctx, r)
		if err == nil {
			err = m.Check(r, p)
		}
		if err != nil {
			return out, fmt.Errorf("party %d: %w", p, err)
		}
		out[p] = m
	}
	return out, nil
}

// DrawBoth draws r from both providers at once (a dealer-free provider
// makes it jointly with the peer) and checks each party's material against
// the layout of r.
func DrawBoth(ctx context.Context, ps [2]beaver.Provider, r beaver.Request) ([2]beaver.Material, error) {
	var out [2]beaver.Material
	var errs [2]error
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[p], errs[p] = ps[p].Material(ctx, r)
		}()
	}
	wg.Wait()
	for p := range 2 {
		err := errs[p]
		if err == nil {
			err = out[p].Check(r, p)
		}
		if err != nil {
			return out, fmt.Errorf("party %d: %w", p, err)
		}
	}
	return out, nil
}

// Words returns every word of m's parts, in order.
func Words(m beaver.Material) []uint64 {
	var out []uint64
	for _, p := range m.Parts {
		out = append(out, p...)
	}
	return out
}

// Shared returns the words of b that also occur in a.
func Shared(a, b []uint64) []uint64 {
	set := make(map[uint64]bool, len(a))
	for _, w := range a {
		set[w] = true
	}
	var out []uint64
	for _, w := range b {
		if set[w] {
			out = append(out, w)
		}
	}
	return out
}

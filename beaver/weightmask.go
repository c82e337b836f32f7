package beaver

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// The weight mask: the model owner's reusable mask B of one weight matrix W,
// a per-weight-matrix correlation rather than a stream kind. It is keyed by
// the weight id (and shape) alone, expanded by party 0 from its session
// seed and never requested from the dealer, who expands it itself to make
// the weight kinds' dealer words (Correlation.Mask); the model owner
// reveals W − B once per id and reuses it for every product with W.

// WeightMask returns, to party 0, the mask B (k×n) of the weight matrix
// weightID: the same B for every call with that id, so the model owner
// reveals W − B once and reuses it. Party 1 gets an error. It checks the
// shape before asking the provider and the length of what comes back.
func (t Typed) WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error) {
	if err := checkWeightMask(weightID, k, n); err != nil {
		return nil, err
	}
	b, err := t.Provider.WeightMask(ctx, weightID, k, n)
	if err != nil {
		return nil, err
	}
	if len(b) != k*n {
		return nil, fmt.Errorf("beaver: weight mask %d %d×%d: provider %T returned %d words, want %d", weightID, k, n, t.Provider, len(b), k*n)
	}
	return b, nil
}

// checkWeightMask checks the shape of weight mask id: k, n non-negative and
// k·n at most MaxItemWords.
func checkWeightMask(id uint64, k, n int) error {
	if _, err := share.BoundedProduct(MaxItemWords, k, n); err != nil {
		return fmt.Errorf("beaver: bad weight mask w%d %d×%d: %w", id, k, n, err)
	}
	return nil
}

// WeightMask implements Provider: party 0's mask of weight id, expanded from
// its session seed.
func (p *seededProvider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	if err := checkWeightMask(id, k, n); err != nil {
		return nil, err
	}
	if p.party != 0 {
		return nil, fmt.Errorf("beaver: weight mask %d asked by party %d: only the model owner (party 0) holds weight masks", id, p.party)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
	}
	s, err := p.session()
	if err != nil {
		return nil, fmt.Errorf("beaver: weight mask %d: %w", id, err)
	}
	return weightMask(s.keys.seed, id, k, n), nil
}

// weightMask expands the model owner's mask of weight id (k×n) from seed0.
func weightMask(seed0 share.Seed, id uint64, k, n int) []uint64 {
	return weightMaskInto(make([]uint64, k*n), seed0, id, k, n)
}

// weightMaskInto expands the mask of weight id (k×n) into dst (k·n words,
// whatever they held) and returns it.
func weightMaskInto(dst []uint64, seed0 share.Seed, id uint64, k, n int) []uint64 {
	b := blockFor(seed0, fmt.Sprintf("beaver/party=0/weightmask/id=%d/k=%d/n=%d", id, k, n))
	fillCTR(dst, b, 0)
	return dst
}

// WeightReleaser is implemented by the providers that hold state per weight
// id for the rest of a session (the dealer-free provider with lattice
// encryption keeps each encrypted weight it received, several GB for a
// selection phase's proxy) and by the wrappers that pass the call on to the
// provider they wrap (*Marked). Selection calls it when a phase's forward is
// done: that phase's weight ids are never drawn again.
type WeightReleaser interface {
	// ReleaseWeights drops what the provider holds for the weight ids in
	// [lo, hi). A later request for a released id is the provider's to
	// refuse or serve afresh.
	ReleaseWeights(lo, hi uint64)
}

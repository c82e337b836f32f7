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
	if err := CheckWeightMask(weightID, k, n); err != nil {
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

// CheckWeightMask checks the shape of weight mask id: k, n non-negative and
// k·n at most MaxItemWords.
func CheckWeightMask(id uint64, k, n int) error {
	if _, err := share.BoundedProduct(MaxItemWords, k, n); err != nil {
		return fmt.Errorf("beaver: bad weight mask w%d %d×%d: %w", id, k, n, err)
	}
	return nil
}

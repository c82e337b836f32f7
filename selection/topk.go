package selection

import (
	"context"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/selection/topk"
	"github.com/selectformer/selectformer/share"
)

// SelectStats counts the work of one TopK call (topk.Stats).
type SelectStats = topk.Stats

// TopK selects the k largest of the shared values vals and returns their
// positions in ascending order; keys break ties (the smaller key ranks
// higher; nil means keys[i] = i) and rng drives the samples (both parties
// pass PRGs with the same seed and domain). It is topk.TopK, whose package
// documentation gives the steps, their cost and what they reveal (the
// outcome of every comparison, a function of the values' ranks only).
func TopK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG) ([]int, SelectStats, error) {
	return topk.TopK(ctx, s, vals, keys, k, rng)
}

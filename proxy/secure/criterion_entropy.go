package secure

import (
	"context"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The prediction entropy's exact version over MPC (mlp.DefaultCriterion):
// protocol.Session.Entropy, CrypTen-style softmax and logarithm.
func init() {
	if err := RegisterExactScore(mlp.DefaultCriterion, func(ctx context.Context, s *protocol.Session, logits *share.Tensor) (*share.Tensor, error) {
		return s.Entropy(ctx, logits)
	}); err != nil {
		panic(err)
	}
}

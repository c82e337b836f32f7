package secure

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// ExactScore computes a selection criterion's exact score over MPC: from the
// shared logits [B, C] to the shared scores [B]. It is what the secure forward
// runs when the score is kept exact (Arch.Ablation.ExactEntropy: the Oracle,
// FromModel); otherwise the final MLP approximates the score and no exact
// version is needed.
type ExactScore func(ctx context.Context, s *protocol.Session, logits *share.Tensor) (*share.Tensor, error)

var exactScores = struct {
	sync.RWMutex
	m map[string]ExactScore
}{m: map[string]ExactScore{}}

// RegisterExactScore registers the exact secure score of the criterion name
// (a plaintext criterion registered with mlp.RegisterCriterion; the empty name
// is mlp.DefaultCriterion). It refuses a nil function, an unknown criterion
// and a second registration of the same name. A criterion's secure version
// is one file of this package that calls it from an init function
// (criterion_entropy.go is the model).
func RegisterExactScore(name string, f ExactScore) error {
	if f == nil {
		return fmt.Errorf("secure: criterion %q: nil exact score", name)
	}
	c, err := mlp.LookupCriterion(name)
	if err != nil {
		return fmt.Errorf("secure: %w", err)
	}
	exactScores.Lock()
	defer exactScores.Unlock()
	if _, dup := exactScores.m[c.Name]; dup {
		return fmt.Errorf("secure: exact score of criterion %q registered twice", c.Name)
	}
	exactScores.m[c.Name] = f
	return nil
}

// exactScore returns the exact secure score of the criterion name (empty:
// mlp.DefaultCriterion), or an error that says none is registered.
func exactScore(name string) (ExactScore, error) {
	if name == "" {
		name = mlp.DefaultCriterion
	}
	exactScores.RLock()
	f, ok := exactScores.m[name]
	exactScores.RUnlock()
	if !ok {
		exactScores.RLock()
		names := make([]string, 0, len(exactScores.m))
		for n := range exactScores.m {
			names = append(names, n)
		}
		exactScores.RUnlock()
		slices.Sort(names)
		return nil, fmt.Errorf("secure: criterion %q has no exact version over MPC (secure.RegisterExactScore; registered: %v), so it cannot be kept exact (the Oracle, Ablation.ExactEntropy)", name, names)
	}
	return f, nil
}

// checkCriterionName bounds a criterion name of an architecture (a peer's
// input): at most 64 printable bytes without spaces.
func checkCriterionName(name string) error {
	if len(name) > 64 {
		return fmt.Errorf("secure: criterion name of %d bytes", len(name))
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("secure: criterion name %q has a space or control character", name)
		}
	}
	return nil
}

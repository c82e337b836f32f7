package secure

import (
	"context"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// plainOnlyCriterion is a criterion with a plaintext definition and no exact
// version over MPC: a proxy may approximate it with its final MLP, but it
// cannot be kept exact (the Oracle).
const plainOnlyCriterion = "t-plain-only"

func init() {
	mlp.MustRegisterCriterion(mlp.Criterion{
		Name:  plainOnlyCriterion,
		Score: func(x []float64) float64 { return 0 },
		Range: func(int) (float64, float64) { return 0, 1 },
	})
}

// TestOracleCriterionWithoutSecureScore checks that the Oracle of a criterion
// without an exact secure score fails saying so, while the entropy's and an
// MLP-scored architecture of that criterion are accepted.
func TestOracleCriterionWithoutSecureScore(t *testing.T) {
	m, err := model.New(model.Config{Family: model.ViT, Hidden: 8, Heads: 2, Layers: 1, Intermediate: 8, LayerNormEps: 1e-12,
		HiddenAct: "gelu", ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(3)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	seq := m.Config.NumPatches() + 1
	_, err = FromModelCriterion(m, seq, plainOnlyCriterion)
	if err == nil || !strings.Contains(err.Error(), `criterion "t-plain-only" has no exact version over MPC`) {
		t.Fatalf("oracle of a criterion without a secure score: %v", err)
	}
	for _, c := range []string{"", mlp.DefaultCriterion} {
		n, err := FromModelCriterion(m, seq, c)
		if err != nil || n.Arch.Criterion != "" {
			t.Errorf("oracle of criterion %q: %v, architecture criterion %q (want empty)", c, err, n.Arch.Criterion)
		}
	}
	a, err := OracleArch(m, seq)
	if err != nil {
		t.Fatal(err)
	}
	a.Criterion = plainOnlyCriterion
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "no exact version over MPC") {
		t.Errorf("exact architecture of a criterion without a secure score: %v", err)
	}
	a.Ablation.ExactEntropy, a.MLPHidden = false, 4
	if err := a.Validate(); err != nil {
		t.Errorf("architecture with a final MLP for the criterion: %v", err)
	}
	a.Criterion = "bad name"
	if err := a.Validate(); err == nil {
		t.Error("a criterion name with a space validates")
	}
}

// TestRegisterExactScoreRefusals checks that a secure score is refused
// without a function, for an unknown criterion, and twice.
func TestRegisterExactScoreRefusals(t *testing.T) {
	f := func(context.Context, *protocol.Session, *share.Tensor) (*share.Tensor, error) { return nil, nil }
	for _, c := range []struct {
		name string
		f    ExactScore
		want string
	}{
		{plainOnlyCriterion, nil, "nil exact score"},
		{"no-such", f, "unknown selection criterion"},
		{mlp.DefaultCriterion, f, "twice"},
	} {
		if err := RegisterExactScore(c.name, c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RegisterExactScore(%q): %v, want %q", c.name, err, c.want)
		}
	}
}

package selection

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// TestGeneratedArchsCriterion checks that the architectures the model owner
// announces carry the proxies' selection criterion as secure.ArchOfProxy
// does (empty for the entropy), and that keeping a criterion without an
// exact secure score exact is refused before anything is sent.
func TestGeneratedArchsCriterion(t *testing.T) {
	c := model.Config{Family: model.ViT, Hidden: 8, Heads: 2, Layers: 2, Intermediate: 8, LayerNormEps: 1e-12,
		HiddenAct: "gelu", ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(3)}
	seq := c.NumPatches() + 1
	for _, crit := range []string{"", mlp.DefaultCriterion, "t-other"} {
		cfg := proxy.Config{Phases: []proxy.Shape{{Layers: 1, Heads: 1, MLPHidden: 4}}, Criterion: crit}
		archs, err := generatedArchs(c, cfg, seq)
		if err != nil {
			t.Fatalf("criterion %q: %v", crit, err)
		}
		want := crit
		if crit == mlp.DefaultCriterion {
			want = ""
		}
		if archs[0].Criterion != want {
			t.Errorf("criterion %q: architecture criterion %q, want %q", crit, archs[0].Criterion, want)
		}
	}
	cfg := proxy.Config{Phases: []proxy.Shape{{Layers: 1, Heads: 1, MLPHidden: 4}}, Ablation: proxy.NoApprox, Criterion: "t-other"}
	if _, err := generatedArchs(c, cfg, seq); err == nil || !strings.Contains(err.Error(), "no exact version over MPC") {
		t.Errorf("exact score of a criterion without a secure one: %v", err)
	}
}

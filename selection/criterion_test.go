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

// TestGeneratedArchsDefaults: the architectures a model owner with the zero
// generation settings announces before generating are those the library's
// default generation makes (the last phase's attention softmax exact,
// entropy MLPs of proxy.DefaultEntropyHidden units calibrated to √H), and
// those of proxy.Config{Plain: true} the paper's.
func TestGeneratedArchsDefaults(t *testing.T) {
	c := model.Config{Family: model.ViT, Hidden: 8, Heads: 2, Layers: 2, Intermediate: 8, LayerNormEps: 1e-12,
		HiddenAct: "gelu", ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(3)}
	target := &model.Model{Config: c}
	p := Params{PoolSize: 100, Budget: 30, Bootstrap: 10, Schedule: []Phase{
		{Proxy: proxy.Shape{Layers: 1, Heads: 1, MLPHidden: 4}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 2, MLPHidden: 8}}}}
	for _, tc := range []struct {
		name   string
		gen    proxy.Config
		exact  []bool
		hidden int
		sqrt   bool
	}{
		{"default", proxy.Config{}, []bool{false, true}, proxy.DefaultEntropyHidden, true},
		{"plain", proxy.Config{Plain: true}, []bool{false, false}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &ModelOwner{Params: p, Target: target, Generate: tc.gen}
			archs, err := generatedArchs(c, m.generateConfig(p), c.NumPatches()+1)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range archs {
				if a.Ablation.ExactAttnSoftmax != tc.exact[i] || a.EntropyHidden != tc.hidden || a.SqrtEntropy != tc.sqrt {
					t.Errorf("phase %d: %+v, want exact softmax %v, entropy hidden %d, √H %v", i+1, a, tc.exact[i], tc.hidden, tc.sqrt)
				}
			}
		})
	}
}

package proxy

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// The toy selection criterion of this file, and all there is to adding one in
// plaintext: the margin 1 − (p₁ − p₂) between the two most probable classes of
// softmax(logits), in [0, 1] (1: a tie, 0: certain), √-calibratable.
const marginCriterion = "margin"

func init() {
	mlp.MustRegisterCriterion(mlp.Criterion{
		Name:  marginCriterion,
		Score: margin,
		Range: func(int) (float64, float64) { return 0, 1 },
		Sqrt:  true,
	})
}

// margin returns 1 − (p₁ − p₂) of softmax(x).
func margin(x []float64) float64 {
	p := make([]float64, len(x))
	nn.SoftmaxRows(x, p, len(x))
	slices.Sort(p)
	if len(p) < 2 {
		return 0
	}
	return 1 - (p[len(p)-1] - p[len(p)-2])
}

// TestCriterionMargin generates a proxy for the toy criterion end to end in
// plaintext: the final MLP is trained toward the margin (ex vivo, in vivo),
// the proxy records its criterion through Save and Load, and the plaintext
// forward scores candidates by the margin (with the MLP, and exactly when the
// score is kept exact).
func TestCriterionMargin(t *testing.T) {
	f := getFixture(t)
	cfg := testConfig(Shape{Layers: 1, Heads: 4, MLPHidden: 8})
	cfg.Points = 20_000
	cfg.Criterion = marginCriterion
	res, err := Generate(context.Background(), f.target, f.boot, f.bootLabels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Proxies[0]
	if p.Criterion != marginCriterion || p.Entropy == nil {
		t.Fatalf("proxy criterion %q, final MLP %v", p.Criterion, p.Entropy)
	}
	lg, h, err := p.Forward(f.held)
	if err != nil {
		t.Fatal(err)
	}
	errMargin, errEntropy := 0.0, 0.0
	ent := nn.Entropy(lg)
	want := make([]float64, len(h))
	c := lg.Cols()
	for i := range h {
		want[i] = margin(lg.Data[i*c : (i+1)*c])
		errMargin += math.Abs(h[i]-want[i]) / float64(len(h))
		errEntropy += math.Abs(h[i]-ent[i]) / float64(len(h))
	}
	rho, err := Spearman(h, want)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("final MLP against the margin of the proxy's logits: Spearman %.3f, mean abs error %.4f (%.4f against the entropy)", rho, errMargin, errEntropy)
	if rho < 0.5 || !(errMargin < errEntropy/2) {
		t.Errorf("final MLP: Spearman %.3f with the margin (want ≥ 0.5), error %.4f against it, %.4f against the entropy (want < half)", rho, errMargin, errEntropy)
	}

	q := saveLoad(t, p, res.Reports)
	if q.Criterion != marginCriterion {
		t.Errorf("loaded criterion %q, want %q", q.Criterion, marginCriterion)
	}
	sample, _ := f.held.Select([]int{0, 1, 2, 3})
	_, h1, _ := p.Forward(sample)
	_, h2, err := q.Forward(sample)
	if err != nil || !slices.Equal(h1, h2) {
		t.Errorf("loaded proxy scores %v (%v), saved %v", h2, err, h1)
	}

	// The score kept exact: the plaintext forward is the margin itself.
	q.Entropy = nil
	lg, h, err = q.Forward(f.held)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h {
		if w := margin(lg.Data[i*c : (i+1)*c]); h[i] != w {
			t.Fatalf("exact score %d: %v, want the margin %v", i, h[i], w)
		}
	}
}

// TestCriterionManifest checks that a proxy saved before criteria existed
// loads with the entropy, that a saved criterion is read back, and that an
// unknown one is refused.
func TestCriterionManifest(t *testing.T) {
	const head = `{"format":"selectformer-proxy/1","kind":"selectformer","config":{"model_type":"vit","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"image_size":4,"patch_size":2,"num_channels":1},"phase":{"layers":1,"heads":1,"hidden":2},"heads_kept":[[0]],"mlps":[{"name":"a","module":"softmax_entropy","kind":"softmax_entropy","in":2,"hidden":2,"out":1}]`
	for _, c := range []struct{ field, want, err string }{
		{"", mlp.DefaultCriterion, ""},
		{`,"criterion":"margin"`, marginCriterion, ""},
		{`,"criterion":"margin","sqrt_entropy":true`, marginCriterion, ""},
		{`,"criterion":"no-such"`, "", "unknown selection criterion"},
	} {
		man, cfg, err := DecodeManifest([]byte(head + c.field + "}"))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.field, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.field, err)
		}
		p, err := fromManifest(man, cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.field, err)
		}
		if p.Criterion != c.want {
			t.Errorf("%s: criterion %q, want %q", c.field, p.Criterion, c.want)
		}
	}
	target, err := model.New(model.Config{Family: model.ViT, Hidden: 8, Heads: 2, Layers: 2, Intermediate: 8, LayerNormEps: 1e-12,
		HiddenAct: "gelu", ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(2)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ crit, err string }{{"", ""}, {marginCriterion, ""}, {"no-such", "unknown selection criterion"}} {
		cfg := Config{Phases: []Shape{{Layers: 1, Heads: 1, MLPHidden: 4}}, Seed: 1, Criterion: c.crit}
		err := cfg.Validate(target, 10)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Config.Validate with criterion %q: %v, want %q", c.crit, err, c.err)
		}
	}
}

package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// tinyText returns a tiny BERT target and a padded bootstrap set of random tokens.
func tinyText(t *testing.T) (*model.Model, model.Input, []int) {
	t.Helper()
	cfg := model.Config{Family: model.BERT, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32, VocabSize: 50, MaxPositions: 16,
		TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu", Labels: model.DefaultLabels(2)}
	m, err := model.New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := nn.NewRNG(6)
	const n, T = 64, 8
	in := model.Input{IDs: make([][]int, n), Mask: make([][]int, n)}
	labels := make([]int, n)
	for i := range in.IDs {
		valid := 3 + rng.IntN(T-2)
		in.IDs[i], in.Mask[i] = make([]int, T), make([]int, T)
		for j := 0; j < T; j++ {
			if j < valid {
				in.IDs[i][j], in.Mask[i][j] = 1+rng.IntN(49), 1
			}
		}
		labels[i] = in.IDs[i][1] % 2
	}
	return m, in, labels
}

// TestPaddingInvariance: with MLP softmaxes, what stands at padded positions
// cannot change a proxy's entropy (masked keys get probability 0 via the MLP's
// fill-and-zero rule), for every ablation.
func TestPaddingInvariance(t *testing.T) {
	target, boot, labels := tinyText(t)
	for _, ab := range []struct {
		name string
		a    Ablation
	}{{"full", Ablation{}}, {"NoAttnSM", NoAttnSM}, {"NoAttnLN", NoAttnLN}, {"NoApprox", NoApprox}} {
		t.Run(ab.name, func(t *testing.T) {
			cfg := Config{Phases: []Shape{{Layers: 2, Heads: 1, MLPHidden: 4}}, Plain: true, Ablation: ab.a, Tune: TrainConfig{Epochs: 1, BatchSize: 16, LR: 1e-3},
				InVivo: TrainConfig{Epochs: 1, BatchSize: 16, LR: 1e-3}, Points: 3000, Seed: 1, Logger: quiet()}
			res, err := Generate(context.Background(), target, boot, labels, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := res.Proxies[0]
			_, isMLP := p.Model.Blocks[0].Attn.Softmax.(*mlp.MLP)
			_, lnMLP := p.Model.Blocks[0].LN1.InvSqrt.(*mlp.MLP)
			if isMLP == ab.a.ExactAttnSoftmax || lnMLP == ab.a.ExactLayerNorm || (p.Entropy == nil) != ab.a.ExactEntropy {
				t.Fatalf("modules: softmax MLP %v, layernorm MLP %v, entropy MLP %v for %+v", isMLP, lnMLP, p.Entropy != nil, ab.a)
			}
			if m := p.AttnMLP[0]; m != nil && (m.In() != 8 || len(m.Fill) != 8) {
				t.Errorf("softmax MLP width %d", m.In())
			}
			a, _ := boot.Select([]int{0, 1, 2, 3})
			b := model.Input{IDs: make([][]int, 4), Mask: a.Mask}
			for i, row := range a.IDs {
				b.IDs[i] = append([]int(nil), row...)
				for j := range row {
					if a.Mask[i][j] == 0 {
						b.IDs[i][j] = 7 + j // different padding content
					}
				}
			}
			_, ha, err := p.Forward(a)
			if err != nil {
				t.Fatal(err)
			}
			_, hb, err := p.Forward(b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ha {
				if d := ha[i] - hb[i]; d > 1e-12 || d < -1e-12 {
					t.Errorf("sample %d: entropy %v with pad content A, %v with B", i, ha[i], hb[i])
				}
			}
			// Save/load keeps the ablation.
			q := saveLoad(t, p, res.Reports)
			_, hq, err := q.Forward(a)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ha {
				if ha[i] != hq[i] {
					t.Errorf("loaded: entropy %v, saved %v", hq[i], ha[i])
				}
			}
		})
	}
}

func TestBaseline(t *testing.T) {
	f := getFixture(t)
	boot, _ := f.boot.Select(dataset.Indices(200))
	before, err := Baseline(context.Background(), f.target, boot, 0, TrainConfig{Epochs: 1, BatchSize: 16, LR: 1e-12}, 1, quiet())
	if err != nil {
		t.Fatal(err)
	}
	p, err := Baseline(context.Background(), f.target, boot, 0, TrainConfig{Epochs: 3, BatchSize: 16, LR: 2e-3}, 1, quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Model.Blocks[0].Attn.Softmax.(*TwoQuad); !ok || p.Model.Blocks[0].FFN == nil {
		t.Fatalf("baseline softmax %T, ffn %v", p.Model.Blocks[0].Attn.Softmax, p.Model.Blocks[0].FFN)
	}
	if _, ok := p.Model.Blocks[0].FFN.Act.(*QuadGeLU); !ok {
		t.Fatalf("baseline activation %T", p.Model.Blocks[0].FFN.Act)
	}
	// Distillation brings the student's predictions closer to the teacher's.
	gap := func(q *Proxy) float64 {
		lq, _, err := q.Forward(boot)
		if err != nil {
			t.Fatal(err)
		}
		lt, err := model.Predict(f.target, boot, 64)
		if err != nil {
			t.Fatal(err)
		}
		ps, pt := nn.New(lq.Shape...), nn.New(lt.Shape...)
		nn.SoftmaxRows(lq.Data, ps.Data, lq.Cols())
		nn.SoftmaxRows(lt.Data, pt.Data, lt.Cols())
		s := 0.0
		for i := range ps.Data {
			s += (ps.Data[i] - pt.Data[i]) * (ps.Data[i] - pt.Data[i])
		}
		return s
	}
	g0, g1 := gap(before), gap(p)
	t.Logf("squared gap to the teacher's probabilities: %.4g before distillation, %.4g after", g0, g1)
	if !(g1 < g0) {
		t.Errorf("distillation did not reduce the gap: %g → %g", g0, g1)
	}
	dir := t.TempDir()
	if err := p.Save(dir, nil); err != nil {
		t.Fatal(err)
	}
	q, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, h1, _ := p.Forward(boot)
	_, h2, err := q.Forward(boot)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h1 {
		if h1[i] != h2[i] {
			t.Fatalf("loaded baseline entropy %d: %v vs %v", i, h2[i], h1[i])
		}
	}
	// A corrupted manifest is rejected with an error.
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"format":"selectformer-proxy/1","kind":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load accepted a bad manifest")
	}
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"format":"selectformer-proxy/1","kind":"selectformer","config":{"model_type":"vit","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"image_size":4,"patch_size":2,"num_channels":1},"phase":{"layers":1,"heads":1,"hidden":2},"heads_kept":[[0]],"mlps":[{"name":"a","module":"softmax_entropy","kind":"softmax_entropy","in":2,"hidden":2,"out":1}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":"selectformer-proxy/1","kind":"mpcformer","two_quad_c":5}`))
	f.Add([]byte(`{"format":"selectformer-proxy/1","kind":"selectformer","config":{"model_type":"vit","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"image_size":4,"patch_size":2,"num_channels":1},"phase":{"layers":1,"heads":1,"hidden":2},"heads_kept":[[0]],"sqrt_entropy":true,"mlps":[{"name":"a","module":"softmax_entropy","kind":"softmax_entropy","in":2,"hidden":2,"out":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		man, cfg, err := DecodeManifest(b)
		if err != nil {
			return
		}
		if man.Shape.Layers != cfg.Layers || len(man.HeadsKept) != cfg.Layers {
			t.Fatalf("accepted inconsistent manifest %+v", man)
		}
		if man.SqrtEntropy && !slices.ContainsFunc(man.MLPs, func(s MLPSpec) bool { return s.Module == "softmax_entropy" }) {
			t.Fatalf("accepted √H scores without an entropy MLP: %+v", man)
		}
		if cfg.Layers <= 4 && cfg.Hidden <= 64 && cfg.Intermediate <= 256 && cfg.NumPatches() <= 64 && cfg.VocabSize <= 1000 && cfg.MaxPositions <= 512 {
			_, _ = fromManifest(man, cfg) // must not panic
		}
	})
}

// TestDecodeManifestSqrtEntropy checks that a manifest may only claim √H
// scores when it has an entropy MLP to produce them.
func TestDecodeManifestSqrtEntropy(t *testing.T) {
	const head = `{"format":"selectformer-proxy/1","kind":"selectformer","config":{"model_type":"vit","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"image_size":4,"patch_size":2,"num_channels":1},"phase":{"layers":1,"heads":1,"hidden":2},"heads_kept":[[0]],`
	const entropyMLP = `{"name":"a","module":"softmax_entropy","kind":"softmax_entropy","in":2,"hidden":2,"out":1}`
	const lnMLP = `{"name":"b","module":"final_layernorm","kind":"invsqrt","in":1,"hidden":2,"out":1}`
	for _, c := range []struct {
		name string
		sqrt bool
		mlps string
		ok   bool
	}{
		{"√H with an entropy MLP", true, entropyMLP, true},
		{"√H without an entropy MLP", true, lnMLP, false},
		{"H without an entropy MLP", false, lnMLP, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := fmt.Sprintf(`%s"sqrt_entropy":%v,"mlps":[%s]}`, head, c.sqrt, c.mlps)
			man, _, err := DecodeManifest([]byte(b))
			if (err == nil) != c.ok {
				t.Fatalf("error %v, want ok %v", err, c.ok)
			}
			if err == nil && man.SqrtEntropy != c.sqrt {
				t.Errorf("sqrt_entropy %v, want %v", man.SqrtEntropy, c.sqrt)
			}
		})
	}
}

// TestManifestShapeKeys checks that Shape.MLPHidden keeps the JSON key
// "hidden" it had as Shape.Hidden: a proxy.json saved before the rename
// loads with its MLP width, and a new one writes the same keys.
func TestManifestShapeKeys(t *testing.T) {
	const old = `{"format":"selectformer-proxy/1","kind":"selectformer","config":{"model_type":"vit","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,"intermediate_size":8,"image_size":4,"patch_size":2,"num_channels":1},"phase":{"layers":1,"heads":1,"hidden":2},"heads_kept":[[0]],"mlps":[{"name":"a","module":"softmax_entropy","kind":"softmax_entropy","in":2,"hidden":2,"out":1}]}`
	man, _, err := DecodeManifest([]byte(old))
	if err != nil {
		t.Fatalf("a manifest with the pre-rename keys: %v", err)
	}
	if want := (Shape{Layers: 1, Heads: 1, MLPHidden: 2}); man.Shape != want {
		t.Fatalf("decoded shape %+v, want %+v", man.Shape, want)
	}
	b, err := json.Marshal(Shape{Layers: 3, Heads: 2, MLPHidden: 16})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"layers":3,"heads":2,"hidden":16}`; got != want {
		t.Fatalf("Shape encodes as %s, want %s", got, want)
	}
}

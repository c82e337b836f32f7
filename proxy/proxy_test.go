package proxy

import (
	"context"
	"io"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// fixture is a tiny ViT target trained once per test binary on MNIST digits, with
// a bootstrap set and a held-out set.
type fixture struct {
	target              *model.Model
	boot, held          model.Input
	bootLabels, heldLab []int
	targetH             []float64
}

var (
	fixOnce sync.Once
	fix     *fixture
	fixErr  error
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func getFixture(t *testing.T) *fixture {
	t.Helper()
	fixOnce.Do(func() {
		set, err := dataset.MNIST()
		if err != nil {
			fixErr = err
			return
		}
		perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(7))
		sub := func(idx []int) (model.Input, []int) {
			s, err := set.Subset(idx)
			if err != nil {
				fixErr = err
			}
			return model.NormalizeImages(s.Images, 1), s.Labels
		}
		train, trainY := sub(perm[:1500])
		f := &fixture{}
		f.boot, f.bootLabels = sub(perm[1500:1900])
		f.held, f.heldLab = sub(perm[1900:2500])
		cfg := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64, LayerNormEps: 1e-12, HiddenAct: "gelu",
			ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}
		m, err := model.New(cfg, 1)
		if err != nil {
			fixErr = err
			return
		}
		if _, err := model.Train(m, train, trainY, model.TrainConfig{Epochs: 3, BatchSize: 32, LR: 3e-3, WarmupFrac: 0.05, ClipNorm: 1, Seed: 2}); err != nil {
			fixErr = err
			return
		}
		mt, err := model.Evaluate(m, f.held, f.heldLab, 200)
		if err != nil {
			fixErr = err
			return
		}
		f.target, f.targetH = m, mt.Entropy
		fix = f
	})
	if fixErr != nil {
		t.Fatal(fixErr)
	}
	return fix
}

func testConfig(phases ...Shape) Config {
	return Config{Phases: phases, Plain: true, Tune: TrainConfig{Epochs: 2, BatchSize: 32, LR: 1e-3},
		InVivo: TrainConfig{Epochs: 4, BatchSize: 16, LR: 5e-4}, Points: 50_000,
		MLP: mlp.TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2}, Seed: 3, Logger: quiet()}
}

func TestGenerateViTMNIST(t *testing.T) {
	f := getFixture(t)
	start := time.Now()
	var progressed, generated int
	var last Progress
	cfg := testConfig(Shape{Layers: 1, Heads: 4, MLPHidden: 8}, Shape{Layers: 2, Heads: 4, MLPHidden: 16})
	cfg.Progress = func(p Progress) {
		progressed++
		if p.Stage == StageGenerated {
			generated++
		}
		last = p
	}
	res, err := Generate(context.Background(), f.target, f.boot, f.bootLabels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	t.Logf("Generate: %v, %d progress calls", wall.Round(time.Millisecond), progressed)
	if progressed == 0 {
		t.Error("no progress reported")
	}
	// The last report is the whole generation's time, once.
	if generated != 1 || last.Stage != StageGenerated || last.Done != 1 || last.Total != 1 || !(last.Elapsed > 0 && last.Elapsed <= wall) {
		t.Errorf("last progress %+v (%d reports of %q), want %q once with 0 < Elapsed ≤ %v", last, generated, StageGenerated, StageGenerated, wall)
	}
	if len(res.Proxies) != 2 || len(res.HeadScores) != 2 {
		t.Fatalf("%d proxies, %d head-score layers", len(res.Proxies), len(res.HeadScores))
	}
	for name, r := range res.Reports {
		t.Logf("%s: %v", name, r)
		if err := r.Ranges.Check(mlp.FixedPointBound); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for i, p := range res.Proxies {
		// Structure: pruned, FFN-free, every nonlinear module an MLP.
		for li, b := range p.Model.Blocks {
			if b.FFN != nil || b.Attn.Heads != p.Shape.Heads || len(p.HeadsKept[li]) != p.Shape.Heads {
				t.Errorf("proxy %d layer %d: ffn %v, %d heads", i, li, b.FFN != nil, b.Attn.Heads)
			}
			if _, ok := b.Attn.Softmax.(*mlp.MLP); !ok {
				t.Errorf("proxy %d layer %d: softmax is %T", i, li, b.Attn.Softmax)
			}
			if _, ok := b.LN1.InvSqrt.(*mlp.MLP); !ok {
				t.Errorf("proxy %d layer %d: invsqrt is %T", i, li, b.LN1.InvSqrt)
			}
		}
		if p.Entropy == nil || p.Entropy.Hidden() != p.Shape.MLPHidden {
			t.Errorf("proxy %d: entropy MLP %v", i, p.Entropy)
		}
		h, err := p.Entropies(f.held, 200)
		if err != nil {
			t.Fatal(err)
		}
		rho, err := Spearman(h, f.targetH)
		if err != nil {
			t.Fatal(err)
		}
		lg, _, err := p.Forward(f.held)
		if err != nil {
			t.Fatal(err)
		}
		rhoExact, _ := Spearman(nn.Entropy(lg), f.targetH)
		t.Logf("proxy %d: Spearman of the exact entropy of its logits %.3f", i, rhoExact)
		t.Logf("proxy %d %+v: Spearman with the target's entropies on %d held-out digits = %.3f", i, p.Shape, len(h), rho)
		if rho < 0.5 {
			t.Errorf("proxy %d: Spearman %.3f < 0.5", i, rho)
		}
	}

	// Save/load round trip: identical entropies.
	p := res.Proxies[1]
	q := saveLoad(t, p, res.Reports)
	sample, _ := f.held.Select([]int{0, 1, 2, 3, 4})
	_, h1, err := p.Forward(sample)
	if err != nil {
		t.Fatal(err)
	}
	_, h2, err := q.Forward(sample)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h1 {
		if h1[i] != h2[i] {
			t.Fatalf("loaded proxy entropy %d: %v, saved %v", i, h2[i], h1[i])
		}
	}
	if len(q.MLPs()) != len(p.MLPs()) || len(p.MLPs()) != 2*2+2 {
		t.Errorf("MLPs: loaded %d, saved %d", len(q.MLPs()), len(p.MLPs()))
	}
}

func TestSpearman(t *testing.T) {
	for _, c := range []struct {
		name string
		x, y []float64
		want float64
	}{
		{"identical order", []float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{"reversed", []float64{1, 2, 3, 4}, []float64{4, 3, 2, 1}, -1},
		{"monotone nonlinear", []float64{1, 2, 3, 4, 5}, []float64{1, 8, 27, 64, 125}, 1},
		// Ties: ranks x (1.5,1.5,3,4), y (1,2,3,4) → Pearson = 0.9486833.
		{"ties", []float64{1, 1, 2, 3}, []float64{1, 2, 3, 4}, 0.9486832980505138},
	} {
		got, err := Spearman(c.x, c.y)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range [][2][]float64{{{1}, {1}}, {{1, 2}, {1}}, {{1, 1}, {1, 2}}, {{1, math.NaN()}, {1, 2}}} {
		if _, err := Spearman(bad[0], bad[1]); err == nil {
			t.Errorf("Spearman(%v, %v): no error", bad[0], bad[1])
		}
	}
}

// saveLoad saves p to a temporary directory and loads it back.
func saveLoad(t *testing.T, p *Proxy, reports map[string]mlp.Report) *Proxy {
	t.Helper()
	dir := t.TempDir()
	if err := p.Save(dir, reports); err != nil {
		t.Fatal(err)
	}
	q, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

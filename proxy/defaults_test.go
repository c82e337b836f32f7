package proxy

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
)

func TestDefaultPoints(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, MinDefaultPoints}, {1, MinDefaultPoints}, {40, MinDefaultPoints}, {100, 50_000},
		{1000, 500_000}, {10_240, mlp.DefaultPoints}, {1 << 40, mlp.DefaultPoints},
	} {
		if got := DefaultPoints(c.n); got != c.want {
			t.Errorf("DefaultPoints(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	small := &model.Model{Config: model.Config{Hidden: 32}}
	wide := &model.Model{Config: model.Config{Hidden: 768}}
	cases := []struct {
		name   string
		in     Config
		target *model.Model
		n      int
		want   Config
	}{
		// The quickstart's bootstrap of 100 on the demo ViT: the settings the
		// examples used to spell out.
		{"zero, quickstart", Config{Seed: 1}, small, 100, Config{Seed: 1, Tune: TrainConfig{4, 16, 1e-3, 0}, InVivo: TrainConfig{8, 16, 5e-4, 0},
			Points: 50_000, MLP: mlp.TrainConfig{Epochs: 2, BatchSize: 128, LR: 1e-2}}},
		{"zero, tiny bootstrap", Config{}, small, 5, Config{Tune: TrainConfig{4, 5, 1e-3, 0}, InVivo: TrainConfig{8, 5, 5e-4, 0},
			Points: MinDefaultPoints, MLP: mlp.TrainConfig{Epochs: 2, BatchSize: 128, LR: 1e-2}}},
		{"zero, BERT-base width", Config{}, wide, 2000, Config{Tune: TrainConfig{4, 16, 5e-5, 0}, InVivo: TrainConfig{8, 16, 2.5e-5, 0},
			Points: 1_000_000, MLP: mlp.TrainConfig{Epochs: 2, BatchSize: 128, LR: 1e-2}}},
		{"set fields kept, zero ones filled", Config{Tune: TrainConfig{Epochs: 1}, InVivo: TrainConfig{LR: 0.1, WeightDecay: 0.01}, Points: 7, MLP: mlp.TrainConfig{Epochs: 5}},
			small, 100, Config{Tune: TrainConfig{1, 16, 1e-3, 0}, InVivo: TrainConfig{8, 16, 0.1, 0.01}, Points: 7, MLP: mlp.TrainConfig{Epochs: 5, BatchSize: 128, LR: 1e-2}}},
		{"negative kept for Validate", Config{Tune: TrainConfig{Epochs: -1}, Points: -3}, nil, 100, Config{Tune: TrainConfig{-1, 16, 1e-3, 0}, InVivo: TrainConfig{8, 16, 5e-4, 0},
			Points: -3, MLP: mlp.TrainConfig{Epochs: 2, BatchSize: 128, LR: 1e-2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := c.in.WithDefaults(c.target, c.n)
			if got.Tune != c.want.Tune || got.InVivo != c.want.InVivo || got.Points != c.want.Points || got.Seed != c.want.Seed ||
				got.MLP.Epochs != c.want.MLP.Epochs || got.MLP.BatchSize != c.want.MLP.BatchSize || got.MLP.LR != c.want.MLP.LR {
				t.Fatalf("got %+v %+v %d %+v, want %+v %+v %d %+v", got.Tune, got.InVivo, got.Points, got.MLP, c.want.Tune, c.want.InVivo, c.want.Points, c.want.MLP)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	target, err := model.New(model.Config{Family: model.ViT, Hidden: 8, Heads: 2, Layers: 2, Intermediate: 8, LayerNormEps: 1e-12,
		HiddenAct: "gelu", ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(2)}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ok := Config{Phases: []Shape{{Layers: 1, Heads: 1, MLPHidden: 4}, {Layers: 2, Heads: 2, MLPHidden: 8}}, Seed: 1}
	if err := ok.Validate(target, 10); err != nil {
		t.Fatalf("zero settings: %v", err)
	}
	cases := []struct {
		name string
		mod  func(c *Config)
		n    int
		want string
	}{
		{"no phases", func(c *Config) { c.Phases = nil }, 10, "no phases"},
		{"phase too deep", func(c *Config) { c.Phases[1].Layers = 3 }, 10, "does not fit"},
		{"phase too wide", func(c *Config) { c.Phases[0].Heads = 3 }, 10, "does not fit"},
		{"negative epochs", func(c *Config) { c.Tune.Epochs = -1 }, 10, "tune"},
		{"negative batch", func(c *Config) { c.InVivo.BatchSize = -2 }, 10, "in vivo"},
		{"NaN learning rate", func(c *Config) { c.Tune.LR = math.NaN() }, 10, "learning rate NaN"},
		{"infinite learning rate", func(c *Config) { c.InVivo.LR = math.Inf(1) }, 10, "learning rate +Inf"},
		{"negative weight decay", func(c *Config) { c.Tune.WeightDecay = -1 }, 10, "weight decay"},
		{"negative points", func(c *Config) { c.Points = -5 }, 10, "points"},
		{"too many points", func(c *Config) { c.Points = MaxPoints + 1 }, 10, "points"},
		{"NaN MLP rate", func(c *Config) { c.MLP.LR = math.NaN() }, 10, "mlp"},
		{"negative reservoir", func(c *Config) { c.Reservoir = -1 }, 10, "reservoir"},
		{"NaN entropy weight", func(c *Config) { c.EntropyWeight = math.NaN() }, 10, "entropy weight"},
		{"one phase ablation for two phases", func(c *Config) { c.PhaseAblations = []Ablation{NoAttnSM} }, 10, "1 phase ablations for 2 phases"},
		{"negative entropy width", func(c *Config) { c.EntropyHidden = -1 }, 10, "entropy MLP hidden width"},
		{"entropy width too large", func(c *Config) { c.EntropyHidden = 1<<16 + 1 }, 10, "entropy MLP hidden width"},
		{"empty bootstrap", func(c *Config) {}, 0, "bootstrap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := ok
			cfg.Phases = append([]Shape(nil), ok.Phases...)
			c.mod(&cfg)
			err := cfg.Validate(target, c.n)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate: %v, want an error containing %q", err, c.want)
			}
			// Generate rejects the same settings before any work.
			if c.n > 0 {
				boot := model.Input{Pixels: make([][]float64, c.n)}
				for i := range boot.Pixels {
					boot.Pixels[i] = make([]float64, 16)
				}
				if _, err := Generate(context.Background(), target, boot, make([]int, c.n), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Generate: %v", err)
				}
			}
		})
	}
	if err := ok.Validate(nil, 10); err == nil {
		t.Fatal("nil target accepted")
	}
}

// TestGenerateZeroConfig: Config{Seed: 1} (the README's snippet) generates
// proxies with the defaults, in seconds for the quickstart's bootstrap of
// 100 images on a small ViT.
func TestGenerateZeroConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("trains proxies")
	}
	f := getFixture(t)
	boot, err := f.boot.Select(seq(100))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cfg := Config{Phases: []Shape{{Layers: 1, Heads: 4, MLPHidden: 8}, {Layers: 2, Heads: 4, MLPHidden: 16}}, Seed: 1, Logger: quiet()}
	res, err := Generate(context.Background(), f.target, boot, f.bootLabels[:100], cfg)
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("Generate with zero settings, bootstrap of 100: %v", el.Round(time.Millisecond))
	if len(res.Proxies) != 2 {
		t.Fatalf("%d proxies", len(res.Proxies))
	}
	for i, p := range res.Proxies {
		ent, err := p.Entropies(f.held, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ent {
			if math.IsNaN(e) || e < -0.1 || e > math.Log(10)+0.5 {
				t.Fatalf("proxy %d: entropy %v", i, e)
			}
		}
	}
	if el > 60*time.Second {
		t.Errorf("zero-setting generation took %v for a bootstrap of 100", el)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestSaveFileModes: a saved proxy (its manifest and weights) is the model
// owner's secret: files 0600, directory 0700, whatever the umask.
func TestSaveFileModes(t *testing.T) {
	f := getFixture(t)
	cfg := testConfig(Shape{Layers: 1, Heads: 2, MLPHidden: 4})
	cfg.Points, cfg.Tune.Epochs, cfg.InVivo.Epochs, cfg.MLP.Epochs = 2000, 1, 1, 1
	boot, _ := f.boot.Select(seq(32))
	res, err := Generate(context.Background(), f.target, boot, f.bootLabels[:32], cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "phase-0")
	if err := res.Proxies[0].Save(dir, res.Reports); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, filepath.Join(dir, ManifestFile), 0o600)
	checkMode(t, filepath.Join(dir, WeightsFile), 0o600)
	mdir := filepath.Join(t.TempDir(), "model")
	if err := f.target.Save(mdir, "F32"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, mdir, 0o700)
	checkMode(t, filepath.Join(mdir, model.WeightsFile), 0o600)
	checkMode(t, filepath.Join(mdir, model.ConfigFile), 0o600)
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s: mode %o, want %o", path, got, want)
	}
}

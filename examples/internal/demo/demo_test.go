package demo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

func TestSplitsDisjointAndSkewed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"balanced-small", Config{Seed: 5, Public: 500, TestPerClass: 10, Pool: 100, RareFrac: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			pub, test, pool, err := Splits(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if pub.Len() != cfg.Public || test.Len() != NumClasses*cfg.TestPerClass || pool.Len() != cfg.Pool {
				t.Fatalf("sizes %d/%d/%d, want %d/%d/%d", pub.Len(), test.Len(), pool.Len(), cfg.Public, NumClasses*cfg.TestPerClass, cfg.Pool)
			}
			// Disjoint: no image slice is shared between splits (Subset shares pixel slices).
			seen := map[*float64]string{}
			for name, s := range map[string][][]float64{"public": pub.Images, "test": test.Images, "pool": pool.Images} {
				for _, im := range s {
					if prev, ok := seen[&im[0]]; ok {
						t.Fatalf("image in both %s and %s", prev, name)
					}
					seen[&im[0]] = name
				}
			}
			mix, err := ClassMix(pool.Labels, idxs(pool.Len()))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RareFrac < 0.5 && mix[0] <= 3*mix[NumClasses-1] {
				t.Fatalf("pool mix %v is not long-tailed", mix)
			}
			// Deterministic.
			_, _, pool2, err := Splits(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pool.Labels, pool2.Labels) {
				t.Fatal("splits differ for the same seed")
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{Public: 10}, {Pool: 1}, {RareFrac: 2}, {Pool: 4000}, {Epochs: -1}} {
		if _, _, _, err := Splits(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

func TestPrepareAndFiles(t *testing.T) {
	start := time.Now()
	d, err := Prepare(Config{Layers: 1, Pool: 60, Epochs: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("prepared in %v, checkpoint accuracy %.3f", time.Since(start).Round(time.Millisecond), d.CheckpointAccuracy)
	if d.CheckpointAccuracy < 0.5 {
		t.Fatalf("checkpoint accuracy %.3f: pretraining failed", d.CheckpointAccuracy)
	}
	dir := t.TempDir()
	f, err := d.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ReadFile(f.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind() != pool.KindImages || p.Len() != 60 || slices.ContainsFunc(p.Images.Labels, func(l int) bool { return l != 0 }) {
		t.Fatalf("pool file: %s, %d items", p.Kind(), p.Len())
	}
	labels, err := pool.ReadLabels(f.Labels, model.DefaultLabels(NumClasses))
	if err != nil || !slices.Equal(labels, d.Pool.Labels) {
		t.Fatalf("labels %v, %v", labels, err)
	}
	m, err := model.Load(f.Checkpoint, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := model.Evaluate(m, model.NormalizeImages(d.Test.Images, 1), d.Test.Labels, 256)
	if err != nil || mt.Accuracy != d.CheckpointAccuracy {
		t.Fatalf("reloaded checkpoint accuracy %v (%v), want %v", mt.Accuracy, err, d.CheckpointAccuracy)
	}
	bad := filepath.Join(dir, "bad.gz")
	if err := os.WriteFile(bad, []byte("not a pool"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.ReadFile(bad); err == nil {
		t.Fatal("malformed pool accepted")
	}
}

// TestPrepareText: the text demo's files are a text pool without labels, a
// label file by class name that the public reader maps back to the pool's
// classes, and a checkpoint directory with a vocab.txt that reloads to the
// same model and tokenizes the pool within its vocabulary.
func TestPrepareText(t *testing.T) {
	start := time.Now()
	d, err := PrepareText(TextConfig{})
	if err != nil {
		t.Fatal(err)
	}
	prepared := time.Since(start)
	f, err := d.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ReadFile(f.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind() != pool.KindTexts || p.Len() != 60 || p.Texts.Labelled() || !slices.Equal(p.Texts.Texts, d.Pool.Texts) {
		t.Fatalf("pool file: %s of %d, labelled %v", p.Kind(), p.Len(), p.Texts.Labelled())
	}
	m, err := model.Load(f.Checkpoint, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	labels, err := pool.ReadLabels(f.Labels, m.Config.Labels)
	if err != nil || !slices.Equal(labels, d.Pool.Labels) {
		t.Fatalf("labels %v, %v; want %v", labels, err, d.Pool.Labels)
	}
	vocab, err := wordpiece.LoadVocab(filepath.Join(f.Checkpoint, "vocab.txt"))
	if err != nil || vocab.Size() != m.Config.VocabSize {
		t.Fatalf("vocab.txt: %v tokens (%v), checkpoint %d", vocab.Size(), err, m.Config.VocabSize)
	}
	in, err := p.Input(m.Config, wordpiece.NewTokenizer(vocab, true), d.Config.Seq)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := model.Evaluate(m, in, d.Pool.Labels, 64)
	if err != nil {
		t.Fatal(err)
	}
	want, err := model.Evaluate(d.Checkpoint, in, d.Pool.Labels, 64)
	if err != nil || !slices.Equal(mt.Entropy, want.Entropy) {
		t.Fatalf("reloaded checkpoint's entropies differ (%v)", err)
	}
	counts := make([]int, 2)
	for _, l := range d.Pool.Labels {
		counts[l]++
	}
	t.Logf("prepared in %v: vocab %d, pool accuracy %.3f (majority %.3f)", prepared.Round(time.Millisecond), vocab.Size(), mt.Accuracy,
		float64(max(counts[0], counts[1]))/float64(p.Len()))
}

func TestRandomSubset(t *testing.T) {
	a, err := RandomSubset(100, 10, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RandomSubset(100, 10, 3)
	if len(a) != 10 || !slices.Equal(a, b) || !slices.IsSorted(a) || len(slices.Compact(slices.Clone(a))) != 10 {
		t.Fatalf("RandomSubset = %v / %v", a, b)
	}
	if _, err := RandomSubset(5, 6, 1); err == nil {
		t.Fatal("k > n accepted")
	}
}

func ExampleSplits() {
	_, _, pool, err := Splits(Config{Pool: 300})
	if err != nil {
		fmt.Println(err)
		return
	}
	mix, _ := ClassMix(pool.Labels, idxs(pool.Len()))
	fmt.Println(pool.Len(), mix[0] > mix[9])
	// Output: 300 true
}

func idxs(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

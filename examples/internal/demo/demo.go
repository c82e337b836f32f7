// Package demo prepares the data and models of the selectformer quickstart and
// of the example binaries' tests from the bundled MNIST subset (5,000 digits),
// with no download (PrepareText makes the text counterpart, a tiny BERT and a
// pool of mails, from the bundled SpamAssassin subset):
//
//   - a "public pretraining" split, on which a tiny ViT is trained: the public
//     checkpoint. Its frozen patch embeddings are what the data owner evaluates
//     locally, and it is the model owner's target model;
//   - the model owner's balanced test set (to judge the selection);
//   - the data owner's pool: the remaining digits made long-tailed (class 0
//     common, class 9 rare) with dataset.ImbalancedPool, then cut to the pool
//     size. Its labels are kept only so the demo can show the class mix of the
//     selected set and act as the labelling oracle of the bootstrap set.
//
// All three are disjoint and deterministic for a seed.
package demo

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// NumClasses is the number of MNIST classes.
const NumClasses = 10

// Config sizes the demo. The zero value of a field selects its default.
type Config struct {
	// Seed fixes every split and the training (default 1).
	Seed uint64
	// Public is the size of the public pretraining split (default 1500).
	Public int
	// TestPerClass is the model owner's test set size per class (default 50).
	TestPerClass int
	// Pool is the number of candidates in the data owner's pool (default 400).
	Pool int
	// RareFrac is the fraction of the last class kept by the long-tail skew
	// (default 0.1; 1 keeps the pool balanced).
	RareFrac float64
	// Epochs of pretraining (default 12).
	Epochs int
	// Layers of the tiny ViT (default 2; hidden 32, 4 heads, 7×7 patches).
	Layers int
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

// orDefault sets *v to d where it is zero (a configuration field left to
// its default).
func orDefault(v *int, d int) {
	if *v == 0 {
		*v = d
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.Seed == 0 {
		c.Seed = 1
	}
	orDefault(&c.Public, 1500)
	orDefault(&c.TestPerClass, 50)
	orDefault(&c.Pool, 400)
	orDefault(&c.Epochs, 12)
	orDefault(&c.Layers, 2)
	if c.RareFrac == 0 {
		c.RareFrac = 0.1
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case c.Public < 100:
		return c, fmt.Errorf("demo: public split %d < 100", c.Public)
	case c.TestPerClass < 1:
		return c, fmt.Errorf("demo: test per class %d < 1", c.TestPerClass)
	case c.Pool < 2:
		return c, fmt.Errorf("demo: pool %d < 2", c.Pool)
	case c.RareFrac <= 0 || c.RareFrac > 1:
		return c, fmt.Errorf("demo: rare fraction %g outside (0, 1]", c.RareFrac)
	case c.Epochs < 1 || c.Layers < 1:
		return c, fmt.Errorf("demo: epochs %d and layers %d must be positive", c.Epochs, c.Layers)
	}
	return c, nil
}

// Demo holds the prepared splits and the public checkpoint.
type Demo struct {
	// Config is the configuration used, defaults filled in.
	Config Config
	// Public, Test and Pool are the disjoint splits. Pool's order is the pool
	// order: candidate i of the selection is Pool.Images[i].
	Public, Test, Pool *dataset.ImageSet
	// Checkpoint is the tiny ViT pretrained on Public.
	Checkpoint *model.Model
	// CheckpointAccuracy is its accuracy on Test.
	CheckpointAccuracy float64
}

// ViTConfig is the tiny ViT of the demo with the given number of layers.
func ViTConfig(layers int) model.Config {
	return model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: layers, Intermediate: 64,
		LayerNormEps: 1e-12, HiddenAct: "gelu", ImageSize: 28, PatchSize: 7, NumChannels: 1,
		Labels: model.DefaultLabels(NumClasses)}
}

// Splits returns the demo's disjoint splits of the bundled MNIST subset
// without training anything.
func Splits(cfg Config) (public, test, pool *dataset.ImageSet, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, nil, nil, err
	}
	all, err := dataset.MNIST()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: %w", err)
	}
	rng := dataset.NewRand(cfg.Seed)
	pubIdx, rest, err := dataset.SplitPublic(dataset.Indices(all.Len()), cfg.Public, rng)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: public split: %w", err)
	}
	testIdx, err := dataset.BalancedSample(all.Labels, rest, NumClasses, cfg.TestPerClass, rng)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: test split: %w", err)
	}
	inTest := make(map[int]bool, len(testIdx))
	for _, i := range testIdx {
		inTest[i] = true
	}
	rest = slices.DeleteFunc(rest, func(i int) bool { return inTest[i] })
	keep, err := dataset.LongTailKeep(NumClasses, cfg.RareFrac)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: %w", err)
	}
	skewed, err := dataset.ImbalancedPool(all.Labels, rest, keep, rng)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: pool: %w", err)
	}
	if cfg.Pool > len(skewed) {
		return nil, nil, nil, fmt.Errorf("demo: pool of %d wanted, only %d digits left", cfg.Pool, len(skewed))
	}
	poolIdx, err := dataset.Bootstrap(skewed, cfg.Pool, rng)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: pool: %w", err)
	}
	if public, err = all.Subset(pubIdx); err == nil {
		if test, err = all.Subset(testIdx); err == nil {
			pool, err = all.Subset(poolIdx)
		}
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("demo: %w", err)
	}
	return public, test, pool, nil
}

// Prepare makes the splits and pretrains the public checkpoint (a few
// seconds on 2 cores with the defaults).
func Prepare(cfg Config) (*Demo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Demo{Config: cfg}
	if d.Public, d.Test, d.Pool, err = Splits(cfg); err != nil {
		return nil, err
	}
	m, err := model.New(ViTConfig(cfg.Layers), cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	st, err := model.Train(m, model.NormalizeImages(d.Public.Images, 1), d.Public.Labels, model.TrainConfig{
		Epochs: cfg.Epochs, BatchSize: 32, LR: 5e-3, WarmupFrac: 0.1, ClipNorm: 1, Seed: cfg.Seed + 1})
	if err != nil {
		return nil, fmt.Errorf("demo: pretraining: %w", err)
	}
	m.SetTraining(false)
	mt, err := model.Evaluate(m, model.NormalizeImages(d.Test.Images, 1), d.Test.Labels, 256)
	if err != nil {
		return nil, fmt.Errorf("demo: evaluating checkpoint: %w", err)
	}
	d.Checkpoint, d.CheckpointAccuracy = m, mt.Accuracy
	cfg.Logger.Info("public checkpoint pretrained", "digits", d.Public.Len(), "steps", st.Steps, "test_accuracy", mt.Accuracy)
	return d, nil
}

// PoolInput returns the pool as model input (normalised pixels), in pool order.
func (d *Demo) PoolInput() model.Input { return model.NormalizeImages(d.Pool.Images, 1) }

// Files names what WriteFiles writes.
type Files struct {
	// Pool is the data owner's pool file (package selection/pool): images
	// with labels all 0, or texts without labels: the data owner's pool is
	// unlabeled.
	Pool string
	// Labels is the labelling oracle of the model owner: one line per pool
	// candidate with its true class (see pool.ReadLabels).
	Labels string
	// Checkpoint is the public checkpoint's model directory (model.Save).
	Checkpoint string
}

// WriteFiles writes the pool, the labelling oracle and the checkpoint under
// dir, for the peer binaries.
func (d *Demo) WriteFiles(dir string) (Files, error) {
	f := Files{Pool: filepath.Join(dir, "pool.sfimg.gz"), Labels: filepath.Join(dir, "labels.txt"), Checkpoint: filepath.Join(dir, "checkpoint")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, fmt.Errorf("demo: %w", err)
	}
	unlabeled := *d.Pool
	unlabeled.Labels = make([]int, d.Pool.Len())
	if err := WritePool(f.Pool, &unlabeled); err != nil {
		return f, err
	}
	var b strings.Builder
	for _, l := range d.Pool.Labels {
		fmt.Fprintln(&b, l)
	}
	if err := os.WriteFile(f.Labels, []byte(b.String()), 0o644); err != nil {
		return f, fmt.Errorf("demo: writing labels: %w", err)
	}
	if err := d.Checkpoint.Save(f.Checkpoint, safetensors.F64); err != nil {
		return f, fmt.Errorf("demo: saving checkpoint: %w", err)
	}
	return f, nil
}

// WritePool writes an image set as an image pool file (pool.EncodeImages;
// its labels are written too, a pool's should be 0s).
func WritePool(path string, s *dataset.ImageSet) error {
	return writeFile(path, func(w io.Writer) error { return dataset.EncodeImages(w, s) })
}

// ClassMix counts the classes of labels[idx] (NumClasses bins).
func ClassMix(labels, idx []int) ([]int, error) {
	return dataset.ClassCounts(labels, idx, NumClasses)
}

// RandomSubset draws k distinct positions of [0, n) uniformly (the "random
// selection" baseline), deterministic for seed, in ascending order.
func RandomSubset(n, k int, seed uint64) ([]int, error) {
	idx, err := dataset.Bootstrap(dataset.Indices(n), k, dataset.NewRand(seed))
	if err != nil {
		return nil, fmt.Errorf("demo: random subset: %w", err)
	}
	slices.Sort(idx)
	return idx, nil
}

// FormatMix renders class counts as "0:12 1:9 ...".
func FormatMix(counts []int) string {
	parts := make([]string, len(counts))
	for c, n := range counts {
		parts[c] = fmt.Sprintf("%d:%d", c, n)
	}
	return strings.Join(parts, " ")
}

package demo

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/examples/pretrained"
	"github.com/selectformer/selectformer/nn/mlm"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// WordNetConfig sizes the pretrained-text demo: the model owner's target is
// the committed pretrained BERT (package pretrained) fine-tuned on Public
// labelled WordNet definitions of the bundled subset, the data owner's pool
// Pool other definitions. The zero value of a field selects its default.
type WordNetConfig struct {
	// Seed fixes the split and the fine-tuning (default 1).
	Seed uint64
	// Public is the number of labelled definitions the target is
	// fine-tuned on (default 500).
	Public int
	// Pool is the number of definitions in the data owner's pool (default
	// 300).
	Pool int
	// Seq is the tokens a text (default 32).
	Seq int
	// Epochs of fine-tuning (default 40: with its embeddings frozen the
	// encoder needs about twice the epochs that fit every weight).
	Epochs int
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

func (c WordNetConfig) withDefaults() (WordNetConfig, error) {
	if c.Seed == 0 {
		c.Seed = 1
	}
	orDefault(&c.Public, 500)
	orDefault(&c.Pool, 300)
	orDefault(&c.Seq, 32)
	orDefault(&c.Epochs, 40)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case c.Public < 10 || c.Pool < 2 || c.Public+c.Pool > 3000:
		return c, fmt.Errorf("demo: %d public and %d pool definitions: want at least 10 and 2, at most 3000 together", c.Public, c.Pool)
	case c.Seq < 4:
		return c, fmt.Errorf("demo: sequence length %d < 4", c.Seq)
	case c.Epochs < 1:
		return c, fmt.Errorf("demo: epochs %d < 1", c.Epochs)
	}
	return c, nil
}

// WordNetDemo holds the pretrained-text demo's splits and models.
type WordNetDemo struct {
	// Config is the configuration used, defaults filled in.
	Config WordNetConfig
	// Public (the model owner's labelled definitions) and Pool (the data
	// owner's, in pool order) are disjoint; ClassNames are the ten
	// supersenses without their "noun." prefix.
	Public, Pool *dataset.TextSet
	// Tokenizer is the pretrained checkpoint's.
	Tokenizer *wordpiece.Tokenizer
	// Target is the pretrained checkpoint fine-tuned on Public, its
	// embeddings frozen (so that they stay the public checkpoint's).
	Target *model.Model
}

// PrepareWordNet splits the bundled WordNet subset's ten supersenses and
// fine-tunes the pretrained checkpoint on the public part.
func PrepareWordNet(cfg WordNetConfig) (*WordNetDemo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	all, err := dataset.WordNetSubset()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	set, err := dataset.Supersenses(all, dataset.WordNetSubsetClasses)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if cfg.Public+cfg.Pool > set.Len() {
		return nil, fmt.Errorf("demo: %d public and %d pool definitions of the %d in the subset", cfg.Public, cfg.Pool, set.Len())
	}
	perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(cfg.Seed))
	d := &WordNetDemo{Config: cfg}
	if d.Public, err = set.Subset(perm[:cfg.Public]); err == nil {
		d.Pool, err = set.Subset(perm[cfg.Public : cfg.Public+cfg.Pool])
	}
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	if d.Target, d.Tokenizer, err = pretrained.Load(set.ClassNames, cfg.Seed); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	in, err := model.EncodeTexts(d.Tokenizer, d.Public.Texts, cfg.Seq)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	st, err := model.Train(d.Target, in, d.Public.Labels, model.TrainConfig{Epochs: cfg.Epochs, BatchSize: 16, LR: 3e-3,
		WeightDecay: 0.01, WarmupFrac: 0.1, ClipNorm: 1, Seed: cfg.Seed + 1, FreezeEmbeddings: true})
	if err != nil {
		return nil, fmt.Errorf("demo: fine-tuning: %w", err)
	}
	d.Target.SetTraining(false)
	cfg.Logger.Info("pretrained target fine-tuned", "checkpoint", pretrained.Name, "definitions", d.Public.Len(), "steps", st.Steps)
	return d, nil
}

// WordNetFiles are the pretrained-text demo's files.
type WordNetFiles struct {
	// Texts is the data owner's CSV of texts (columns id, text), the
	// input of mkpool texts; pool index i is its data row i.
	Texts string
	// Answers is what a person labelling the demo's definitions would
	// answer: line i+1 is the class name of pool index i.
	Answers string
	// Labeller is a shell script for the model owner's -label-cmd: it
	// writes the class names of the requested points from Answers.
	Labeller string
	// Public is the model owner's own definitions, unlabelled, as a text
	// pool file (modelowner -public).
	Public string
	// Pretrained is the public checkpoint's directory (the data owner's
	// -embedding), Target the model owner's fine-tuned target (-model),
	// with the tokenizer.
	Pretrained, Target string
}

// WriteFiles writes the demo's files under dir.
func (d *WordNetDemo) WriteFiles(dir string) (WordNetFiles, error) {
	f := WordNetFiles{Texts: filepath.Join(dir, "texts.csv"), Answers: filepath.Join(dir, "answers.txt"),
		Labeller: filepath.Join(dir, "label.sh"), Public: filepath.Join(dir, "public.jsonl.gz"),
		Pretrained: filepath.Join(dir, pretrained.Name), Target: filepath.Join(dir, "target")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, fmt.Errorf("demo: %w", err)
	}
	if err := WriteTextsCSV(f.Texts, d.Pool.Texts); err != nil {
		return f, err
	}
	if _, _, err := WriteLabeller(dir, className(d.Pool)); err != nil {
		return f, err
	}
	if err := writeFile(f.Public, func(w io.Writer) error { return pool.EncodeTexts(w, &pool.Texts{Texts: d.Public.Texts}) }); err != nil {
		return f, err
	}
	if err := pretrained.WriteDir(f.Pretrained); err != nil {
		return f, fmt.Errorf("demo: %w", err)
	}
	if err := d.Target.Save(f.Target, safetensors.F32); err != nil {
		return f, fmt.Errorf("demo: saving the target: %w", err)
	}
	if err := d.Tokenizer.SaveTokenizerJSON(filepath.Join(f.Target, mlm.TokenizerFile)); err != nil {
		return f, fmt.Errorf("demo: %w", err)
	}
	return f, nil
}

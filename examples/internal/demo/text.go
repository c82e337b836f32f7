package demo

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// TextConfig sizes the text demo: a tiny BERT pretrained on part of the
// bundled SpamAssassin subset, and a pool of other mails. The zero value of
// a field selects its default.
type TextConfig struct {
	// Seed fixes the split, the vocabulary's corpus and the training
	// (default 1).
	Seed uint64
	// Public is the number of mails the checkpoint is trained on (default 400).
	Public int
	// Pool is the number of mails in the data owner's pool (default 60).
	Pool int
	// VocabSize bounds the WordPiece vocabulary built from the public mails
	// (default 400).
	VocabSize int
	// Seq is the tokens per mail in training; the checkpoint's
	// max_position_embeddings is twice it (default 16).
	Seq int
	// Epochs of training (default 2).
	Epochs int
	// Logger receives progress (default: discard).
	Logger *slog.Logger
}

func (c TextConfig) withDefaults() (TextConfig, error) {
	if c.Seed == 0 {
		c.Seed = 1
	}
	orDefault(&c.Public, 400)
	orDefault(&c.Pool, 60)
	orDefault(&c.VocabSize, 400)
	orDefault(&c.Seq, 16)
	orDefault(&c.Epochs, 2)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case c.Public < 10 || c.Pool < 2 || c.Public+c.Pool > 1600:
		return c, fmt.Errorf("demo: %d public and %d pool mails: want at least 10 and 2, at most 1600 together", c.Public, c.Pool)
	case c.VocabSize < 10:
		return c, fmt.Errorf("demo: vocabulary size %d < 10", c.VocabSize)
	case c.Seq < 4:
		return c, fmt.Errorf("demo: sequence length %d < 4", c.Seq)
	case c.Epochs < 1:
		return c, fmt.Errorf("demo: epochs %d < 1", c.Epochs)
	}
	return c, nil
}

// TextDemo holds the text demo's splits, vocabulary and checkpoint.
type TextDemo struct {
	// Config is the configuration used, defaults filled in.
	Config TextConfig
	// Public and Pool are disjoint sets of mails (ClassNames ham, spam).
	// Pool's order is the pool order.
	Public, Pool *dataset.TextSet
	// Vocab is the WordPiece vocabulary built from the public mails.
	Vocab *wordpiece.Vocab
	// Checkpoint is the tiny BERT trained on Public.
	Checkpoint *model.Model
}

// BERTConfig is the text demo's tiny BERT for a vocabulary of vocab tokens
// and texts of at most maxPositions tokens.
func BERTConfig(vocab, maxPositions int, classes []string) model.Config {
	return model.Config{Family: model.BERT, Hidden: 16, Heads: 4, Layers: 2, Intermediate: 32,
		VocabSize: vocab, MaxPositions: maxPositions, TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu",
		Labels: classes}
}

// PrepareText splits the bundled SpamAssassin subset, builds the vocabulary
// and trains the tiny BERT (about a second on 2 cores with the defaults).
func PrepareText(cfg TextConfig) (*TextDemo, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	all, err := dataset.SpamAssassin()
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	perm := dataset.Shuffled(dataset.Indices(all.Len()), dataset.NewRand(cfg.Seed))
	d := &TextDemo{Config: cfg}
	if d.Public, err = all.Subset(perm[:cfg.Public]); err == nil {
		d.Pool, err = all.Subset(perm[cfg.Public : cfg.Public+cfg.Pool])
	}
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	// Seq tokens cover the first words of a mail: the vocabulary and the
	// training see its first 16·Seq bytes (the pool keeps whole mails).
	heads := make([]string, d.Public.Len())
	for i, t := range d.Public.Texts {
		heads[i] = head(t, 16*cfg.Seq)
	}
	if d.Vocab, err = wordpiece.BuildVocab(heads, cfg.VocabSize); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	in, err := model.EncodeTexts(wordpiece.NewTokenizer(d.Vocab, true), heads, cfg.Seq)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	m, err := model.New(BERTConfig(d.Vocab.Size(), 2*cfg.Seq, all.ClassNames), cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	st, err := model.Train(m, in, d.Public.Labels, model.TrainConfig{
		Epochs: cfg.Epochs, BatchSize: 16, LR: 3e-3, WarmupFrac: 0.1, ClipNorm: 1, Seed: cfg.Seed + 1})
	if err != nil {
		return nil, fmt.Errorf("demo: training: %w", err)
	}
	m.SetTraining(false)
	d.Checkpoint = m
	cfg.Logger.Info("text checkpoint trained", "mails", d.Public.Len(), "vocab", d.Vocab.Size(), "steps", st.Steps)
	return d, nil
}

// WriteFiles writes, under dir, the pool as an unlabeled text pool
// (pool.jsonl.gz), the labelling oracle with class names (labels.txt: ham or
// spam per line) and the checkpoint's model directory with its vocab.txt.
func (d *TextDemo) WriteFiles(dir string) (Files, error) {
	f := Files{Pool: filepath.Join(dir, "pool.jsonl.gz"), Labels: filepath.Join(dir, "labels.txt"), Checkpoint: filepath.Join(dir, "checkpoint")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return f, fmt.Errorf("demo: %w", err)
	}
	if err := writeFile(f.Pool, func(w io.Writer) error { return pool.EncodeTexts(w, &pool.Texts{Texts: d.Pool.Texts}) }); err != nil {
		return f, err
	}
	var b strings.Builder
	for _, l := range d.Pool.Labels {
		fmt.Fprintln(&b, d.Pool.ClassNames[l])
	}
	if err := os.WriteFile(f.Labels, []byte(b.String()), 0o644); err != nil {
		return f, fmt.Errorf("demo: writing labels: %w", err)
	}
	if err := d.Checkpoint.Save(f.Checkpoint, safetensors.F64); err != nil {
		return f, fmt.Errorf("demo: saving checkpoint: %w", err)
	}
	if err := d.Vocab.SaveVocab(filepath.Join(f.Checkpoint, "vocab.txt")); err != nil {
		return f, fmt.Errorf("demo: saving vocabulary: %w", err)
	}
	return f, nil
}

// head returns s cut to at most n bytes at a rune boundary.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	err = write(out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("demo: writing %s: %w", path, err)
	}
	return nil
}

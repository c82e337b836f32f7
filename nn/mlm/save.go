package mlm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// File names a pretrained checkpoint directory holds besides
// model.WeightsFile and model.ConfigFile.
const (
	TokenizerFile = "tokenizer.json"
	VocabFile     = "vocab.txt"
)

// Architecture returns the Hugging Face class of a family's
// masked-language model (BertForMaskedLM, DistilBertForMaskedLM).
func Architecture(f model.Family) string {
	if f == model.DistilBERT {
		return "DistilBertForMaskedLM"
	}
	return "BertForMaskedLM"
}

// Tensors returns the tensors of a masked-language-model checkpoint of m
// and hd, of dtype dt: the embeddings and encoder layers under their
// Hugging Face names, then the head's transform and output bias. The
// classification head (pooler or pre-classifier, classifier) is not
// written, nor the decoder weight, which is the word embedding table
// (tied): Hugging Face's from_pretrained ties it again, and model.Load
// with NewHead reads such a checkpoint as a classifier to fine-tune.
func Tensors(m *model.Model, hd *Head, dt safetensors.DType) ([]safetensors.Tensor, error) {
	skip := map[*nn.Param]bool{}
	for _, p := range m.HeadParams() {
		skip[p] = true
	}
	var out []safetensors.Tensor
	for _, p := range append(m.Params(), hd.Params()...) {
		if skip[p] {
			continue
		}
		t, err := safetensors.FromFloat64s(p.Name, dt, p.Value.Shape, p.Value.Data)
		if err != nil {
			return nil, fmt.Errorf("mlm: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// Save writes a Hugging Face masked-language-model checkpoint of m, hd and
// tok into dir (created if needed): config.json (architectures
// BertForMaskedLM or DistilBertForMaskedLM), model.safetensors (Tensors,
// dtype dt), tokenizer.json and vocab.txt. A pretrained checkpoint is
// public: the files are readable by everyone.
func Save(dir string, m *model.Model, hd *Head, tok *wordpiece.Tokenizer, dt safetensors.DType) error {
	if err := m.Config.CheckVocab(tok.Vocab()); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	cfg := m.Config
	cfg.Architectures = []string{Architecture(cfg.Family)}
	cfgPath := filepath.Join(dir, model.ConfigFile)
	if err := model.WriteConfig(cfgPath, &cfg); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	ts, err := Tensors(m, hd, dt)
	if err != nil {
		return err
	}
	wPath := filepath.Join(dir, model.WeightsFile)
	if err := safetensors.WriteFile(wPath, ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	if err := tok.SaveTokenizerJSON(filepath.Join(dir, TokenizerFile)); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	if err := tok.Vocab().SaveVocab(filepath.Join(dir, VocabFile)); err != nil {
		return fmt.Errorf("mlm: save: %w", err)
	}
	for _, p := range []string{cfgPath, wPath} {
		if err := os.Chmod(p, 0o644); err != nil {
			return fmt.Errorf("mlm: save: %w", err)
		}
	}
	return nil
}

// Load reads a checkpoint directory written by Save (or any Hugging Face
// BertForMaskedLM or DistilBertForMaskedLM directory with tokenizer.json
// or vocab.txt) as a classifier of the given classes (nil: the
// checkpoint's) to fine-tune: the encoder's weights from the checkpoint,
// the classification head new (seeded), the masked-language-model head
// skipped; and its tokenizer, checked against the checkpoint
// (model.Config.CheckVocab).
func Load(dir string, classes []string, seed uint64) (*model.Model, *wordpiece.Tokenizer, error) {
	m, tok, err := LoadFS(os.DirFS(dir), classes, seed)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (checkpoint %s)", err, dir)
	}
	return m, tok, nil
}

// maxCheckpointBytes bounds the files LoadFS reads.
const maxCheckpointBytes = 1 << 30

// LoadFS is Load on the files of a file system (an embedded checkpoint).
func LoadFS(fsys fs.FS, classes []string, seed uint64) (*model.Model, *wordpiece.Tokenizer, error) {
	read := func(name string, max int64) ([]byte, error) {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, max+1))
		if err == nil && int64(len(b)) > max {
			err = fmt.Errorf("%s is larger than %d bytes", name, max)
		}
		return b, err
	}
	b, err := read(model.ConfigFile, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("mlm: %w", err)
	}
	cfg, err := model.ParseConfig(b)
	if err != nil {
		return nil, nil, fmt.Errorf("mlm: %w", err)
	}
	if len(classes) > 0 {
		cfg.Labels = append([]string(nil), classes...)
	}
	// A classifier now: saved, it is a BertForSequenceClassification.
	cfg.Architectures = nil
	m, err := model.New(*cfg, seed)
	if err != nil {
		return nil, nil, fmt.Errorf("mlm: %w", err)
	}
	if b, err = read(model.WeightsFile, maxCheckpointBytes); err != nil {
		return nil, nil, fmt.Errorf("mlm: %w", err)
	}
	f, err := safetensors.Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("mlm: %s: %w", model.WeightsFile, err)
	}
	if err := m.LoadWeights(f, model.LoadOptions{NewHead: true, Seed: seed}); err != nil {
		return nil, nil, fmt.Errorf("mlm: %s: %w", model.WeightsFile, err)
	}
	var tok *wordpiece.Tokenizer
	if b, err = read(TokenizerFile, wordpiece.MaxTokenizerJSONBytes); err == nil {
		tok, err = wordpiece.ReadTokenizerJSON(bytes.NewReader(b))
	} else if errors.Is(err, fs.ErrNotExist) {
		var v *wordpiece.Vocab
		if b, err = read(VocabFile, wordpiece.MaxTokenizerJSONBytes); err == nil {
			if v, err = wordpiece.ReadVocab(bytes.NewReader(b)); err == nil {
				tok = wordpiece.NewTokenizer(v, true)
			}
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("mlm: the checkpoint's tokenizer (%s or %s): %w", TokenizerFile, VocabFile, err)
	}
	if err := cfg.CheckVocab(tok.Vocab()); err != nil {
		return nil, nil, fmt.Errorf("mlm: %w", err)
	}
	return m, tok, nil
}

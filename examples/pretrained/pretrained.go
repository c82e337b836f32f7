// Package pretrained holds the project's small pretrained text transformer,
// gcide-bert-mini: a BERT encoder (2 layers, hidden 64) pretrained by
// masked language modelling on the GNU Collaborative International
// Dictionary of English (Debian package dict-gcide) with the project's own
// engine, its WordPiece vocabulary built from the same text. It is a
// Hugging Face BertForMaskedLM directory (config.json, model.safetensors in
// F16, tokenizer.json, vocab.txt; README.md is its model card with the
// recipe and loss curve), committed under Dir and embedded here, so that
// tests, the quickstart and bench/quality read it from any directory.
// `go run ./bench/cmd/pretrain -out DIR` (with dict-gcide installed)
// makes it again, byte for byte.
//
// It is the public checkpoint of a text selection: the data owner embeds
// its pool with it (dataowner -embedding examples/pretrained/gcide-bert-mini),
// and the model owner's target is it fine-tuned on the model owner's task
// with the embeddings frozen (Load gives it a new classification head).
package pretrained

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/nn/mlm"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// Name is the checkpoint's name.
const Name = "gcide-bert-mini"

// Dir is the checkpoint's directory relative to the module root: what the
// peer binaries' -embedding takes when run from there.
const Dir = "examples/pretrained/" + Name

//go:embed gcide-bert-mini/config.json gcide-bert-mini/model.safetensors gcide-bert-mini/tokenizer.json gcide-bert-mini/vocab.txt
var files embed.FS

// FS returns the checkpoint's files (config.json, model.safetensors,
// tokenizer.json, vocab.txt).
func FS() fs.FS {
	sub, err := fs.Sub(files, Name)
	if err != nil {
		panic(err) // the embedded directory exists: a build without it does not compile
	}
	return sub
}

// Load returns the checkpoint as a classifier of classes to fine-tune (its
// encoder, a new classification head initialised from seed) and its
// tokenizer (mlm.LoadFS).
func Load(classes []string, seed uint64) (*model.Model, *wordpiece.Tokenizer, error) {
	m, tok, err := mlm.LoadFS(FS(), classes, seed)
	if err != nil {
		return nil, nil, fmt.Errorf("pretrained %s: %w", Name, err)
	}
	return m, tok, nil
}

// WriteDir writes the checkpoint's files into dir (created if needed,
// files of the same names replaced): a model directory for the peer
// binaries' -embedding.
func WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pretrained %s: %w", Name, err)
	}
	entries, err := fs.ReadDir(FS(), ".")
	if err != nil {
		return fmt.Errorf("pretrained %s: %w", Name, err)
	}
	for _, e := range entries {
		b, err := fs.ReadFile(FS(), e.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("pretrained %s: %w", Name, err)
		}
	}
	return nil
}

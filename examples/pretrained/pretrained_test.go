package pretrained

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// TestCheckpoint checks the committed checkpoint against its model card's
// recipe (curve.json): a BertForMaskedLM of the recipe's shape in F16, a
// few MB, whose tokenizer.json and vocab.txt are the same vocabulary, read
// as a classifier to fine-tune by Load and by model.Load with NewHead (the
// data owner's -embedding) with the same embeddings, and refused as a
// classifier without NewHead (it has none).
func TestCheckpoint(t *testing.T) {
	var card struct {
		Recipe struct {
			Vocab, Hidden, Layers, Heads, Intermediate, Seq int
			DType                                           string
		}
		Curve []struct {
			Step     int     `json:"step"`
			EvalLoss float64 `json:"eval_loss"`
		}
	}
	b, err := os.ReadFile(filepath.Join(Name, "curve.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatal(err)
	}
	r := card.Recipe
	m, tok, err := Load([]string{"a", "b", "c"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	file, err := model.ReadConfig(filepath.Join(Name, model.ConfigFile))
	if err != nil || !slices.Equal(file.Architectures, []string{"BertForMaskedLM"}) || len(c.Architectures) != 0 {
		t.Fatalf("architectures %v in config.json (%v), %v read as a classifier", file.Architectures, err, c.Architectures)
	}
	if c.Family != model.BERT || c.Hidden != r.Hidden || c.Layers != r.Layers ||
		c.Heads != r.Heads || c.Intermediate != r.Intermediate || c.MaxPositions != r.Seq || c.VocabSize != r.Vocab || tok.Vocab().Size() != r.Vocab {
		t.Fatalf("config %+v, vocabulary %d; the recipe %+v", c, tok.Vocab().Size(), r)
	}
	if n := len(card.Curve); n < 2 || !(card.Curve[n-1].EvalLoss < card.Curve[0].EvalLoss-2) {
		t.Fatalf("loss curve %+v: the held-out loss did not fall by 2 nats", card.Curve)
	}
	st, err := os.Stat(filepath.Join(Name, model.WeightsFile))
	if err != nil || st.Size() > 4<<20 {
		t.Fatalf("model.safetensors: %v, %d bytes (a few MB wanted)", err, st.Size())
	}
	f, err := safetensors.ReadFile(filepath.Join(Name, model.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range f.Tensors {
		if string(ts.DType) != strings.ToUpper(r.DType) {
			t.Fatalf("tensor %s is %s, the recipe says %s", ts.Name, ts.DType, r.DType)
		}
	}
	v, err := wordpiece.LoadVocab(filepath.Join(Name, "vocab.txt"))
	if err != nil || !slices.Equal(v.Tokens(), tok.Vocab().Tokens()) || !tok.LowerCase() {
		t.Fatalf("vocab.txt differs from tokenizer.json (%v), or the tokenizer is cased", err)
	}
	emb, err := model.Load(Name, model.LoadOptions{NewHead: true})
	if err != nil {
		t.Fatal(err)
	}
	h0, _ := model.EmbeddingHash(m)
	h1, _ := model.EmbeddingHash(emb)
	if h0 != h1 {
		t.Fatal("Load and model.Load read other embeddings")
	}
	if _, err := model.Load(Name, model.LoadOptions{}); err == nil || !strings.Contains(err.Error(), "missing tensor bert.pooler.dense.weight") {
		t.Fatalf("read as a classifier without NewHead: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "copy")
	if err := WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(dir, model.LoadOptions{NewHead: true}); err != nil {
		t.Fatalf("the written copy: %v", err)
	}
	// Written again over a damaged copy (an export run twice into one
	// directory), it replaces the files.
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteDir(dir); err != nil {
		t.Fatalf("written again: %v", err)
	}
	if _, err := model.Load(dir, model.LoadOptions{NewHead: true}); err != nil {
		t.Fatalf("the copy written again: %v", err)
	}
}

package party

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// checkpoints writes a tiny BERT with vocab.txt, the same BERT without it,
// and a tiny ViT; it returns their directories, the vocabulary's path and
// the loaded models.
func checkpoints(t *testing.T) (bert, bare, vit, vocabPath string, models map[string]*model.Model) {
	t.Helper()
	dir := t.TempDir()
	tokens := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "Hello"}
	v, err := wordpiece.NewVocab(tokens)
	if err != nil {
		t.Fatal(err)
	}
	models = map[string]*model.Model{}
	for name, cfg := range map[string]model.Config{
		"bert": {Family: model.BERT, Hidden: 8, Heads: 2, Layers: 1, Intermediate: 16, VocabSize: len(tokens), MaxPositions: 12,
			TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu", Labels: []string{"ham", "spam"}},
		// A BERT-base-sized embedding table for the tiny vocabulary.
		"wide": {Family: model.BERT, Hidden: 8, Heads: 2, Layers: 1, Intermediate: 16, VocabSize: 30522, MaxPositions: 12,
			TypeVocabSize: 2, LayerNormEps: 1e-12, HiddenAct: "gelu", Labels: []string{"ham", "spam"}},
		"vit": {Family: model.ViT, Hidden: 8, Heads: 2, Layers: 1, Intermediate: 16, LayerNormEps: 1e-12, HiddenAct: "gelu",
			ImageSize: 4, PatchSize: 2, NumChannels: 1, Labels: model.DefaultLabels(2)},
	} {
		m, err := model.New(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Save(filepath.Join(dir, name), safetensors.F32); err != nil {
			t.Fatal(err)
		}
		if models[name], err = model.Load(filepath.Join(dir, name), model.LoadOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bert, vit, bare = filepath.Join(dir, "bert"), filepath.Join(dir, "vit"), filepath.Join(dir, "bare")
	if err := os.CopyFS(bare, os.DirFS(bert)); err != nil {
		t.Fatal(err)
	}
	// hf holds the BERT with a Hugging Face tokenizer.json and no vocab.txt.
	hf := filepath.Join(dir, "hf")
	if err := os.CopyFS(hf, os.DirFS(bare)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hf, TokenizerFile), tokenizerJSON(t, tokens, true), 0o644); err != nil {
		t.Fatal(err)
	}
	models["hf"] = models["bert"]
	vocabPath = filepath.Join(dir, "elsewhere.txt")
	for _, p := range []string{filepath.Join(bert, VocabFile), filepath.Join(dir, "wide", VocabFile), vocabPath} {
		if err := v.SaveVocab(p); err != nil {
			t.Fatal(err)
		}
	}
	return bert, bare, vit, vocabPath, models
}

// tokenizerJSON returns a Hugging Face tokenizer.json of a BERT WordPiece
// tokenizer over tokens.
func tokenizerJSON(t *testing.T, tokens []string, lower bool) []byte {
	t.Helper()
	vocab := map[string]int{}
	for i, tok := range tokens {
		vocab[tok] = i
	}
	b, err := json.Marshal(map[string]any{
		"version":       "1.0",
		"normalizer":    map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": lower},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"model":         map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePool(t *testing.T, dir, name string, write func(*bytes.Buffer) error) string {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPoolInput(t *testing.T) {
	bert, bare, vit, vocabPath, models := checkpoints(t)
	hf, wide := filepath.Join(filepath.Dir(bert), "hf"), filepath.Join(filepath.Dir(bert), "wide")
	dir := t.TempDir()
	texts := writePool(t, dir, "texts.jsonl", func(b *bytes.Buffer) error {
		_, err := b.WriteString(`{"format":"selectformer-texts/1"}` + "\n" + `{"text":"hello world"}` + "\n" + `{"text":"World, hello!"}` + "\n")
		return err
	})
	images := writePool(t, dir, "images.gz", func(b *bytes.Buffer) error {
		return pool.EncodeImages(b, &pool.Images{Width: 4, Height: 4, Pixels: [][]float64{make([]float64, 16), make([]float64, 16), make([]float64, 16)}})
	})
	garbage := writePool(t, dir, "garbage", func(b *bytes.Buffer) error { _, err := b.WriteString("id,text\n"); return err })
	for _, tc := range []struct {
		name, pool, dir, vocab string
		seq                    int
		kind                   pool.Kind
		ids                    []int // first candidate's token ids (texts)
		code                   int
		err                    string
	}{
		{"texts, vocab.txt in the checkpoint", texts, bert, "", 0, pool.KindTexts, []int{2, 5, 6, 3, 0, 0, 0, 0, 0, 0, 0, 0}, 0, ""},
		{"texts, -seq", texts, bert, "", 4, pool.KindTexts, []int{2, 5, 6, 3}, 0, ""},
		{"texts, -vocab", texts, bare, vocabPath, 3, pool.KindTexts, []int{2, 5, 3}, 0, ""},
		{"texts, no vocabulary", texts, bare, "", 0, "", nil, peer.ExitInput, "neither vocab.txt nor tokenizer.json; copy the one published with the checkpoint"},
		{"texts, tokenizer.json in the checkpoint", texts, hf, "", 4, pool.KindTexts, []int{2, 5, 6, 3}, 0, ""},
		{"texts, -vocab tokenizer.json", texts, bare, filepath.Join(hf, TokenizerFile), 4, pool.KindTexts, []int{2, 5, 6, 3}, 0, ""},
		{"texts, made-up vocab.txt for a 30522-row table", texts, wide, "", 0, "", nil, peer.ExitInput, "vocab.txt does not fit checkpoint"},
		{"texts, made-up -vocab for a 30522-row table", texts, wide, vocabPath, 0, "", nil, peer.ExitInput, "the vocabulary has 8 tokens, the checkpoint's word embeddings 30522 rows"},
		{"texts, missing -vocab file", texts, bert, vocabPath + ".x", 0, "", nil, peer.ExitInput, "vocab"},
		{"texts, -seq too long", texts, bert, "", 13, "", nil, peer.ExitInput, "outside [2, 12]"},
		{"texts, negative -seq", texts, bert, "", -1, "", nil, peer.ExitUsage, "-seq"},
		{"texts on a ViT", texts, vit, "", 0, "", nil, peer.ExitInput, "needs a bert or distilbert checkpoint"},
		{"images", images, vit, "", 0, pool.KindImages, nil, 0, ""},
		{"images with -seq", images, vit, "", 8, "", nil, peer.ExitUsage, "apply to text pools"},
		{"images on a BERT", images, bert, "", 0, "", nil, peer.ExitInput, "needs a vit checkpoint"},
		{"garbage", garbage, bert, "", 0, "", nil, peer.ExitInput, "read pool"},
		{"missing", garbage + ".x", bert, "", 0, "", nil, peer.ExitInput, "read pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, kind, err := PoolInput(tc.pool, tc.dir, models[filepath.Base(strings.Replace(tc.dir, "bare", "bert", 1))], tc.vocab, tc.seq)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || peer.Code(err) != tc.code {
					t.Fatalf("error %v (code %d), want code %d with %q", err, peer.Code(err), tc.code, tc.err)
				}
				return
			}
			if err != nil || kind != tc.kind || in.Len() != 3-boolInt(kind == pool.KindTexts) {
				t.Fatalf("PoolInput = %s of %d, %v", kind, in.Len(), err)
			}
			if tc.ids != nil && !slices.Equal(in.IDs[0], tc.ids) {
				t.Fatalf("ids %v, want %v", in.IDs[0], tc.ids)
			}
		})
	}
}

// TestPublicInput: the model owner's -public file is read like a pool
// (either format, bounded, checked against the target) and refused with an
// input or usage error that names the flag; more than MaxPublic inputs are
// refused before any of them is converted.
func TestPublicInput(t *testing.T) {
	bert, _, vit, vocabPath, models := checkpoints(t)
	dir := t.TempDir()
	texts := writePool(t, dir, "texts.jsonl", func(b *bytes.Buffer) error {
		_, err := b.WriteString(`{"format":"selectformer-texts/1"}` + "\n" + `{"text":"hello world"}` + "\n" + `{"text":"World, hello!"}` + "\n")
		return err
	})
	images := writePool(t, dir, "images.gz", func(b *bytes.Buffer) error {
		return pool.EncodeImages(b, &pool.Images{Width: 4, Height: 4, Pixels: [][]float64{make([]float64, 16), make([]float64, 16), make([]float64, 16)}})
	})
	small := writePool(t, dir, "small.gz", func(b *bytes.Buffer) error {
		return pool.EncodeImages(b, &pool.Images{Width: 2, Height: 2, Pixels: [][]float64{make([]float64, 4)}})
	})
	tooMany := writePool(t, dir, "many.gz", func(b *bytes.Buffer) error {
		px := make([][]float64, MaxPublic+1)
		for i := range px {
			px[i] = []float64{0}
		}
		return pool.EncodeImages(b, &pool.Images{Width: 1, Height: 1, Pixels: px})
	})
	garbage := writePool(t, dir, "garbage", func(b *bytes.Buffer) error { _, err := b.WriteString("id,text\n"); return err })
	for _, tc := range []struct {
		name, file, dir, vocab string
		seq                    int
		n                      int
		ids                    []int // first input's token ids (texts)
		code                   int
		err                    string
	}{
		{"images for a ViT", images, vit, "", 0, 3, nil, 0, ""},
		{"texts for a BERT, the model directory's vocab.txt", texts, bert, "", 0, 2, []int{2, 5, 6, 3, 0, 0, 0, 0, 0, 0, 0, 0}, 0, ""},
		{"texts, -public-seq and -vocab", texts, bert, vocabPath, 4, 2, []int{2, 5, 6, 3}, 0, ""},
		{"images for a BERT", images, bert, "", 0, 0, nil, peer.ExitInput, "-public " + images + " with the target"},
		{"texts for a ViT", texts, vit, "", 0, 0, nil, peer.ExitInput, "needs a bert or distilbert checkpoint"},
		{"images of another size", small, vit, "", 0, 0, nil, peer.ExitInput, "do not fit the checkpoint's image size"},
		{"-public-seq with images", images, vit, "", 8, 0, nil, peer.ExitUsage, "-public-seq applies to text inputs"},
		{"negative -public-seq", texts, bert, "", -1, 0, nil, peer.ExitUsage, "-public-seq must not be negative"},
		{"-public-seq too long", texts, bert, "", 13, 0, nil, peer.ExitInput, "outside [2, 12]"},
		{"more than MaxPublic", tooMany, vit, "", 0, 0, nil, peer.ExitInput, "at most 100000 are taken"},
		{"garbage", garbage, vit, "", 0, 0, nil, peer.ExitInput, "read pool: unknown format"},
		{"missing", garbage + ".x", vit, "", 0, 0, nil, peer.ExitInput, "-public: read pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := PublicInput(tc.file, tc.dir, models[filepath.Base(tc.dir)], tc.vocab, tc.seq)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || peer.Code(err) != tc.code {
					t.Fatalf("error %v (code %d), want code %d with %q", err, peer.Code(err), tc.code, tc.err)
				}
				return
			}
			if err != nil || in.Len() != tc.n {
				t.Fatalf("PublicInput = %d inputs, %v; want %d", in.Len(), err, tc.n)
			}
			if tc.ids != nil && !slices.Equal(in.IDs[0], tc.ids) {
				t.Fatalf("ids %v, want %v", in.IDs[0], tc.ids)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestTokenizerCase: tokenizer_config.json's do_lower_case decides
// lower-casing (default on); a malformed one is an error.
func TestTokenizerCase(t *testing.T) {
	bert, _, _, _, _ := checkpoints(t)
	for _, tc := range []struct {
		name, config string
		want         []string
		err          string
	}{
		{"no config", "", []string{"hello"}, ""},
		{"uncased", `{"do_lower_case": true, "model_max_length": 512}`, []string{"hello"}, ""},
		{"cased", `{"do_lower_case": false}`, []string{"Hello"}, ""},
		{"no key", `{"model_max_length": 512}`, []string{"hello"}, ""},
		{"malformed", `{"do_lower_case": "yes"}`, nil, "tokenizer config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath := filepath.Join(bert, TokenizerConfigFile)
			_ = os.Remove(cfgPath)
			if tc.config != "" {
				if err := os.WriteFile(cfgPath, []byte(tc.config), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := Tokenizer(bert, "")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Tokenize("Hello"); !slices.Equal(got, tc.want) {
				t.Fatalf("Tokenize(Hello) = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFindTokenizer: a checkpoint directory's vocab.txt comes first, then
// its tokenizer.json, whose own normalizer decides lower-casing.
func TestFindTokenizer(t *testing.T) {
	bert, _, _, _, _ := checkpoints(t)
	hf := filepath.Join(filepath.Dir(bert), "hf")
	tokens := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "Hello"}
	if err := os.WriteFile(filepath.Join(hf, TokenizerFile), tokenizerJSON(t, tokens, false), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hf, TokenizerConfigFile), []byte(`{"do_lower_case": true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, vocab, from string
		want                   []string
	}{
		{"tokenizer.json, cased", hf, "", filepath.Join(hf, TokenizerFile), []string{"Hello"}},
		{"vocab.txt first", bert, "", filepath.Join(bert, VocabFile), []string{"hello"}},
		{"-vocab tokenizer.json", bert, filepath.Join(hf, TokenizerFile), filepath.Join(hf, TokenizerFile), []string{"Hello"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.dir == bert {
				_ = os.WriteFile(filepath.Join(bert, TokenizerFile), tokenizerJSON(t, tokens, false), 0o644)
			}
			tok, from, err := FindTokenizer(tc.dir, tc.vocab)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Tokenize("Hello"); from != tc.from || !slices.Equal(got, tc.want) {
				t.Fatalf("from %s: Tokenize(Hello) = %v; want %s, %v", from, got, tc.from, tc.want)
			}
		})
	}
}

package examples_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// writeTokenizerJSON writes a Hugging Face tokenizer.json of an uncased
// BERT WordPiece tokenizer over tokens.
func writeTokenizerJSON(t *testing.T, path string, tokens []string) {
	t.Helper()
	vocab := map[string]int{}
	for i, tok := range tokens {
		vocab[tok] = i
	}
	b, err := json.Marshal(map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"normalizer":    map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"model":         map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100, "vocab": vocab},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDataOwnerOwnDataErrors (issue 30): a data owner's own-data mistakes
// stop before any connection (the peers here do not exist) with the input
// exit code and a message that says what to do. Before issue 30 the made-up
// vocabulary was accepted (the run went on to fail connecting, exit 3), the
// JSON lines without a header said only `json: unknown field "text"`, and a
// checkpoint with tokenizer.json but no vocab.txt stopped (exit 4).
func TestDataOwnerOwnDataErrors(t *testing.T) {
	f, tf := getTextFixture(t)
	dir := t.TempDir()
	madeUp := filepath.Join(dir, "vocab.txt")
	tokens := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	for i := len(tokens); i < 80; i++ {
		tokens = append(tokens, fmt.Sprintf("word%d", i))
	}
	if err := os.WriteFile(madeUp, []byte(strings.Join(tokens, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hf := filepath.Join(dir, "checkpoint")
	if err := os.CopyFS(hf, os.DirFS(tf.files.Checkpoint)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(hf, "vocab.txt")); err != nil {
		t.Fatal(err)
	}
	v, err := wordpiece.LoadVocab(filepath.Join(tf.files.Checkpoint, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	writeTokenizerJSON(t, filepath.Join(hf, "tokenizer.json"), v.Tokens())
	noHeader := filepath.Join(dir, "texts.jsonl")
	if err := os.WriteFile(noHeader, []byte(`{"text":"hello"}`+"\n"+`{"text":"world"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	do := func(extra ...string) []string {
		return append([]string{"-cert", f.path("do.crt"), "-key", f.path("do.key"), "-connect", "127.0.0.1:1",
			"-peer-fingerprint", f.fp["mo"], "-dealer", "127.0.0.1:1", "-dealer-fingerprint", f.fp["dealer"],
			"-pool", tf.files.Pool, "-embedding", tf.files.Checkpoint, "-budget", "16", "-bootstrap", "8", "-connect-timeout", "2s"}, extra...)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"made-up vocabulary", do("-vocab", madeUp), peer.ExitInput, "the vocabulary has 80 tokens, the checkpoint's word embeddings"},
		{"texts without header", do("-pool", noHeader), peer.ExitInput, `add it as line 1, or build the pool from a CSV, TSV or plain-text file with "mkpool texts"`},
		// Past the input checks, the run stops at the connection (exit 3).
		{"tokenizer.json only", do("-embedding", hf), peer.ExitPeer, "127.0.0.1:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.start(t, "dataowner", tc.args...).expect(t, tc.code, tc.stderr)
		})
	}
}

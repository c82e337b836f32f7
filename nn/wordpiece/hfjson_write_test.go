package wordpiece

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteTokenizerJSON writes tokenizers (uncased and cased, a built
// vocabulary with unusual tokens) as tokenizer.json and reads them back:
// the same vocabulary in id order, case handling and longest word, so the
// same encodings; the file is valid JSON with Hugging Face's keys.
func TestWriteTokenizerJSON(t *testing.T) {
	corpus := []string{"The quick brown fox jumps over the lazy dog.", "Ünïcode \"quotes\" and back\\slashes, tabs\tand <tags>", "fox-like foxes"}
	built, err := BuildVocab(corpus, 80)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		tok   *Tokenizer
		texts []string
	}{
		{"built uncased", NewTokenizer(built, true), corpus},
		{"built cased", NewTokenizer(built, false), corpus},
		{"bert test vocab", NewTokenizer(mustVocab(t, bertTestVocab), true), []string{"Hello, unaffable world!", "running runs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tok.maxChars = 17
			var buf bytes.Buffer
			if err := tc.tok.WriteTokenizerJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			for _, k := range []string{"version", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"} {
				if _, ok := m[k]; !ok {
					t.Errorf("no key %q", k)
				}
			}
			got, err := ReadTokenizerJSON(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.Vocab().Tokens(), tc.tok.Vocab().Tokens()) || got.LowerCase() != tc.tok.LowerCase() || got.maxChars != 17 {
				t.Fatalf("read back: %d tokens, lower %v, max chars %d; want %d, %v, 17", got.Vocab().Size(), got.LowerCase(), got.maxChars, tc.tok.Vocab().Size(), tc.tok.LowerCase())
			}
			for _, s := range tc.texts {
				if a, b := got.Encode(s, 24), tc.tok.Encode(s, 24); !slices.Equal(a.IDs, b.IDs) {
					t.Errorf("%q: %v read back, %v written", s, a.IDs, b.IDs)
				}
			}
			path := filepath.Join(t.TempDir(), "tokenizer.json")
			if err := tc.tok.SaveTokenizerJSON(path); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, func() []byte { var w bytes.Buffer; _ = tc.tok.WriteTokenizerJSON(&w); return w.Bytes() }()) {
				t.Fatalf("SaveTokenizerJSON wrote other bytes (%v)", err)
			}
		})
	}
}

package wordpiece

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// hfJSON writes a tokenizer.json as the Hugging Face tokenizers library
// does for a BERT checkpoint, over tokens (id = position), with edit applied
// to the decoded object before it is encoded.
func hfJSON(t testing.TB, tokens []string, edit func(m map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for i, tok := range tokens {
		vocab[tok] = i
	}
	m := map[string]any{
		"version":    "1.0",
		"truncation": nil,
		"padding":    nil,
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer":    map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": nil, "lowercase": true},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": "[CLS]", "type_id": 0}}}},
		"decoder": map[string]any{"type": "WordPiece", "prefix": "##", "cleanup": true},
		"model": map[string]any{"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
			"max_input_chars_per_word": 100, "vocab": vocab},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The tokenizer read from a tokenizer.json file tokenizes and encodes as the
// one read from the same tokens' vocab.txt.
func TestLoadTokenizerJSON(t *testing.T) {
	tokens := append([]string{"[PAD]"}, bertTestVocab[:len(bertTestVocab)-1]...)
	dir := t.TempDir()
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, hfJSON(t, tokens, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadTokenizerJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	want := NewTokenizer(mustVocab(t, tokens), true)
	if !reflect.DeepEqual(got.Vocab().Tokens(), tokens) || !got.LowerCase() || got.Vocab().ContinuationPrefix() != "##" {
		t.Fatalf("vocab %q, lower %v, prefix %q", got.Vocab().Tokens(), got.LowerCase(), got.Vocab().ContinuationPrefix())
	}
	for _, text := range []string{"UNwant\u00E9d,running", "wanted unwanted", "xyz runn", ""} {
		if g, w := got.Encode(text, 8), want.Encode(text, 8); !reflect.DeepEqual(g, w) {
			t.Errorf("Encode(%q) = %v, want %v (vocab.txt)", text, g, w)
		}
	}
}

// The model's settings are honoured: lowercase off (cased checkpoints),
// another continuation prefix and unknown token, a shorter word limit, and
// a null normalizer.
func TestTokenizerJSONSettings(t *testing.T) {
	base := []string{"[PAD]", "<unk>", "[CLS]", "[SEP]", "Un", "un", "@@want", "@@ed", "wa"}
	for _, tc := range []struct {
		name  string
		edit  func(m map[string]any)
		text  string
		want  []string
		lower bool
	}{
		{"lowercase", func(m map[string]any) {}, "UNwanted", []string{"un", "@@want", "@@ed"}, true},
		{"cased", func(m map[string]any) { m["normalizer"].(map[string]any)["lowercase"] = false }, "Unwanted", []string{"Un", "@@want", "@@ed"}, false},
		{"no-normalizer", func(m map[string]any) { m["normalizer"] = nil }, "UNwanted", []string{"<unk>"}, false},
		{"max-chars", func(m map[string]any) { m["model"].(map[string]any)["max_input_chars_per_word"] = 4 }, "unwanted wa", []string{"<unk>", "wa"}, true},
		{"strip-accents-default", func(m map[string]any) { m["normalizer"].(map[string]any)["strip_accents"] = true }, "ÚNwanted", []string{"un", "@@want", "@@ed"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := hfJSON(t, base, func(m map[string]any) {
				mm := m["model"].(map[string]any)
				mm["unk_token"], mm["continuing_subword_prefix"] = "<unk>", "@@"
				tc.edit(m)
			})
			tok, err := ReadTokenizerJSON(strings.NewReader(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Tokenize(tc.text); !reflect.DeepEqual(got, tc.want) || tok.LowerCase() != tc.lower {
				t.Errorf("Tokenize(%q) = %q (lower %v), want %q (lower %v)", tc.text, got, tok.LowerCase(), tc.want, tc.lower)
			}
			if id := tok.IDs([]string{"<unk>", "nothing"}); !reflect.DeepEqual(id, []int{1, 1}) {
				t.Errorf("unknown ids %v, want [1 1]", id)
			}
		})
	}
}

func TestTokenizerJSONErrors(t *testing.T) {
	tokens := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a"}
	set := func(path string, v any) func(m map[string]any) {
		return func(m map[string]any) {
			keys := strings.Split(path, ".")
			for _, k := range keys[:len(keys)-1] {
				m = m[k].(map[string]any)
			}
			m[keys[len(keys)-1]] = v
		}
	}
	for _, tc := range []struct {
		name string
		file string
		want string
	}{
		{"not-json", "{", "tokenizer.json: unexpected end"},
		{"no-model", `{"normalizer":null}`, `no "model"`},
		{"bpe", string(hfJSON(t, tokens, set("model.type", "BPE"))), `model.type "BPE" is not "WordPiece"`},
		{"vocab-missing", string(hfJSON(t, tokens, set("model.vocab", nil))), "model.vocab: missing"},
		{"vocab-array", string(hfJSON(t, tokens, set("model.vocab", []string{"a"}))), "not a JSON object"},
		{"vocab-gap", string(hfJSON(t, tokens, set("model.vocab", map[string]int{"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 4}))), "no token has id 3"},
		{"vocab-dup-id", string(hfJSON(t, tokens, set("model.vocab", map[string]int{"[PAD]": 0, "[UNK]": 1, "[CLS]": 1}))), "id 1 is both"},
		{"vocab-negative", string(hfJSON(t, tokens, set("model.vocab", map[string]int{"[PAD]": -1}))), "id -1 outside"},
		{"vocab-huge-id", string(hfJSON(t, tokens, set("model.vocab", map[string]int{"[PAD]": 4000000}))), "beyond the vocabulary"},
		{"vocab-float-id", `{"model":{"type":"WordPiece","vocab":{"a":1.5}}}`, `token "a"`},
		{"vocab-empty", string(hfJSON(t, tokens, set("model.vocab", map[string]int{}))), "model.vocab: empty"},
		{"no-cls", string(hfJSON(t, []string{"[PAD]", "[UNK]", "[SEP]"}, nil)), "special token [CLS] missing"},
		{"unk-elsewhere", string(hfJSON(t, tokens, set("model.unk_token", "<unk>"))), "special token <unk> missing"},
		{"unk-empty", string(hfJSON(t, tokens, set("model.unk_token", ""))), "unk_token is empty"},
		{"prefix-empty", string(hfJSON(t, tokens, set("model.continuing_subword_prefix", ""))), "continuing_subword_prefix is empty"},
		{"max-chars", string(hfJSON(t, tokens, set("model.max_input_chars_per_word", 0))), "max_input_chars_per_word 0"},
		{"normalizer", string(hfJSON(t, tokens, set("normalizer", map[string]any{"type": "Sequence"}))), `normalizer.type "Sequence" is not supported`},
		{"clean-text", string(hfJSON(t, tokens, set("normalizer.clean_text", false))), "clean_text=false"},
		{"chinese", string(hfJSON(t, tokens, set("normalizer.handle_chinese_chars", false))), "handle_chinese_chars=false"},
		{"strip-accents", string(hfJSON(t, tokens, set("normalizer.strip_accents", false))), "strip_accents=false with lowercase=true"},
		{"pre-tokenizer", string(hfJSON(t, tokens, set("pre_tokenizer", map[string]any{"type": "Whitespace"}))), `pre_tokenizer.type "Whitespace"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTokenizerJSON(strings.NewReader(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A file past the limit is refused on its size, before it is read.
func TestLoadTokenizerJSONTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxTokenizerJSONBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := LoadTokenizerJSON(path); !errors.Is(err, atomicfile.ErrTooLarge) {
		t.Fatalf("error %v, want ErrTooLarge", err)
	}
	if _, err := ReadTokenizerJSON(strings.NewReader(strings.Repeat(" ", MaxTokenizerJSONBytes+1))); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("error %v, want larger than", err)
	}
}

// FuzzReadTokenizerJSON: any input gives a tokenizer or an error, never a
// panic, and a tokenizer that is returned encodes text with ids in range.
func FuzzReadTokenizerJSON(f *testing.F) {
	f.Add(hfJSON(f, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##b"}, nil))
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{"[PAD]":0,"[UNK]":1,"[CLS]":2,"[SEP]":3}},"normalizer":null}`))
	f.Add([]byte(`{"model":{"type":"WordPiece","unk_token":"x","continuing_subword_prefix":"","vocab":{"x":3}}}`))
	f.Add([]byte(`{"model":{"type":"WordPiece","vocab":{"[PAD]":0,"[PAD]":1}}}`))
	f.Add(hfJSON(f, []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##" + strings.Repeat("a", 200)}, func(m map[string]any) {
		m["model"].(map[string]any)["max_input_chars_per_word"] = 1_000_000_000
	}))
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ReadTokenizerJSON(strings.NewReader(string(b)))
		if err != nil {
			return
		}
		n := tok.Vocab().Size()
		for _, id := range tok.Encode("Héllo, wörld ab 文字", 12).IDs {
			if id < 0 || id >= n {
				t.Fatalf("id %d outside a vocabulary of %d", id, n)
			}
		}
	})
}

// naivePieces is greedy longest-match-first WordPiece as BERT writes it:
// every end of the word, longest first, at every start (a word longer than
// maxChars is unknown). It is the reference the tokenizer must agree with.
func naivePieces(v *Vocab, maxChars int, word string) []string {
	if len([]rune(word)) > maxChars {
		return []string{v.tokens[v.unk]}
	}
	var out []string
	r := []rune(word)
	for start := 0; start < len(r); {
		end := len(r)
		for ; end > start; end-- {
			piece := string(r[start:end])
			if start > 0 {
				piece = v.prefix + piece
			}
			if _, ok := v.ids[piece]; ok {
				out = append(out, piece)
				break
			}
		}
		if end == start {
			return []string{v.tokens[v.unk]}
		}
		start = end
	}
	return out
}

// TestTokenizeLinear (issue 36, item 5): a tokenizer.json may set
// max_input_chars_per_word to 10^9, and the greedy longest match tried every
// end of a word at every start: one 16,000-character word took 6.0 s
// (1.3·10^8 vocabulary lookups). The value is clamped to
// MaxInputCharsPerWord (100), and the longest match at a start is sought
// among pieces no longer than the vocabulary's longest token: a text costs
// at most min(longest token, 100) lookups per character, here counted, and
// the pieces are BERT's (naivePieces).
func TestTokenizeLinear(t *testing.T) {
	base := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "##a", "b", "##b"}
	hostile := append(append([]string(nil), base...), "##"+strings.Repeat("a", 99)+"b", strings.Repeat("a", 16000)+"b")
	words100 := strings.Repeat(strings.Repeat("a", 100)+" ", 160) // 16,000 characters of 100-character words
	for _, tc := range []struct {
		name   string
		tokens []string
		text   string
		pieces int // the number of pieces
		perChr int // the most lookups per character of text
	}{
		{"16000-char word", base, strings.Repeat("a", 16000), 1, 0},
		{"16000 chars in words of 100", base, words100, 16000, 5}, // "[PAD]": the longest token, 5 characters
		{"16000-char word, hostile vocab", hostile, strings.Repeat("a", 16000), 1, 0},
		{"16000 chars in words of 100, hostile vocab", hostile, words100, 16000, MaxInputCharsPerWord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := hfJSON(t, tc.tokens, func(m map[string]any) {
				m["model"].(map[string]any)["max_input_chars_per_word"] = 1_000_000_000
			})
			tok, err := ReadTokenizerJSON(bytes.NewReader(file))
			if err != nil {
				t.Fatal(err)
			}
			if tok.maxChars != MaxInputCharsPerWord {
				t.Fatalf("max_input_chars_per_word 10^9 became %d, want it clamped to %d", tok.maxChars, MaxInputCharsPerWord)
			}
			lookups := 0
			tok.onLookup = func() { lookups++ }
			got := tok.Tokenize(tc.text)
			t.Logf("%d characters, %d pieces, %d lookups", len(tc.text), len(got), lookups)
			if len(got) != tc.pieces {
				t.Fatalf("%d pieces, want %d", len(got), tc.pieces)
			}
			if lookups > tc.perChr*len(tc.text) {
				t.Fatalf("%d vocabulary lookups for %d characters, want at most %d per character", lookups, len(tc.text), tc.perChr)
			}
			var want []string
			ref := map[string][]string{} // the words repeat
			for _, w := range BasicTokenize(tc.text, true) {
				p, ok := ref[w]
				if !ok {
					p = naivePieces(tok.vocab, tok.maxChars, w)
					ref[w] = p
				}
				want = append(want, p...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pieces differ from BERT's greedy longest match")
			}
		})
	}
}

package wordpiece

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// WriteTokenizerJSON writes t as a Hugging Face tokenizer.json of a BERT
// WordPiece tokenizer, the form the tokenizers library writes next to a
// BERT checkpoint and ReadTokenizerJSON reads back to an equal tokenizer:
// the special tokens as added_tokens, a BertNormalizer (lowercase and
// strip_accents as t lower-cases), a BertPreTokenizer, BERT's [CLS] $A [SEP]
// (and pair) template, a WordPiece decoder, and the WordPiece model with its
// unknown token, continuation prefix, longest word and the vocabulary in id
// order.
func (t *Tokenizer) WriteTokenizerJSON(w io.Writer) error {
	v := t.vocab
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var specials []added
	for _, id := range []int{v.pad, v.unk, v.cls, v.sep, v.mask} {
		if id >= 0 {
			specials = append(specials, added{ID: id, Content: v.tokens[id], Special: true})
		}
	}
	type piece struct {
		Special  map[string]any `json:"SpecialToken,omitempty"`
		Sequence map[string]any `json:"Sequence,omitempty"`
	}
	seq := func(id string, typ int) piece { return piece{Sequence: map[string]any{"id": id, "type_id": typ}} }
	special := func(tok string, typ int) piece { return piece{Special: map[string]any{"id": tok, "type_id": typ}} }
	cls, sep := v.tokens[v.cls], v.tokens[v.sep]
	head := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": specials,
		"normalizer": map[string]any{"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
			"strip_accents": nil, "lowercase": t.lowerCase},
		"pre_tokenizer": map[string]any{"type": "BertPreTokenizer"},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single": []piece{special(cls, 0), seq("A", 0), special(sep, 0)},
			"pair":   []piece{special(cls, 0), seq("A", 0), special(sep, 0), seq("B", 1), special(sep, 1)},
			"special_tokens": map[string]any{
				cls: map[string]any{"id": cls, "ids": []int{v.cls}, "tokens": []string{cls}},
				sep: map[string]any{"id": sep, "ids": []int{v.sep}, "tokens": []string{sep}},
			}},
		"decoder": map[string]any{"type": "WordPiece", "prefix": v.prefix, "cleanup": true},
	}
	bw := bufio.NewWriter(w)
	b, err := json.Marshal(head)
	if err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	// The object without its closing brace, then the model, whose vocab
	// must keep id order (a Go map would not).
	bw.Write(b[:len(b)-1])
	model, err := json.Marshal(map[string]any{"type": "WordPiece", "unk_token": v.tokens[v.unk],
		"continuing_subword_prefix": v.prefix, "max_input_chars_per_word": t.maxChars})
	if err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	fmt.Fprintf(bw, `,"model":%s,"vocab":{`, model[:len(model)-1])
	for id, tok := range v.tokens {
		k, err := json.Marshal(tok)
		if err != nil {
			return fmt.Errorf("tokenizer.json: token %d: %w", id, err)
		}
		if id > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, "%s:%d", k, id)
	}
	bw.WriteString("}}}\n")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	return nil
}

// SaveTokenizerJSON writes t to path as a tokenizer.json (see
// WriteTokenizerJSON), atomically, readable by everyone (0644: a
// tokenizer is public).
func (t *Tokenizer) SaveTokenizerJSON(path string) error {
	if err := atomicfile.WriteFunc(path, 0o644, t.WriteTokenizerJSON); err != nil {
		return fmt.Errorf("tokenizer.json: %w", err)
	}
	return nil
}

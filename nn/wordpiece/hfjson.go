package wordpiece

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// Limits on a Hugging Face tokenizer.json. bert-base-uncased's is 0.7 MB,
// the multilingual BERT's 2.9 MB.
const (
	// MaxTokenizerJSONBytes bounds the file.
	MaxTokenizerJSONBytes = 64 << 20
	// MaxVocabTokens bounds the vocabulary of a tokenizer.json.
	MaxVocabTokens = 1 << 22
)

// hfTokenizer is the part of a tokenizer.json that a BERT WordPiece
// tokenizer is defined by; other keys (added_tokens, post_processor,
// decoder, padding, truncation) are ignored: the [CLS]/[SEP]/[PAD] framing
// is BERT's.
type hfTokenizer struct {
	Normalizer   *hfNormalizer `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	Model *struct {
		Type                    string          `json:"type"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    *int            `json:"max_input_chars_per_word"`
		Vocab                   json.RawMessage `json:"vocab"`
	} `json:"model"`
}

// hfNormalizer is a BertNormalizer; a missing flag takes the Hugging Face
// default (true; strip_accents follows lowercase).
type hfNormalizer struct {
	Type               string `json:"type"`
	CleanText          *bool  `json:"clean_text"`
	HandleChineseChars *bool  `json:"handle_chinese_chars"`
	StripAccents       *bool  `json:"strip_accents"`
	Lowercase          *bool  `json:"lowercase"`
}

// ReadTokenizerJSON reads a Hugging Face tokenizer.json (as the tokenizers
// library writes it next to a BERT checkpoint) of a WordPiece model and
// returns its tokenizer:
//
//   - model.type must be "WordPiece"; model.vocab maps each token to its id,
//     the ids 0..n-1 each once; model.unk_token (default "[UNK]"),
//     model.continuing_subword_prefix (default "##") and
//     model.max_input_chars_per_word (default 100; a larger value is
//     clamped to MaxInputCharsPerWord, 100) are honoured;
//   - normalizer must be a BertNormalizer (its lowercase flag, default true,
//     selects the uncased behaviour; clean_text and handle_chinese_chars
//     must not be false and strip_accents must be null or equal lowercase,
//     as BasicTokenize implements them) or null (cased; BasicTokenize's text
//     cleaning and spacing of CJK characters still apply);
//   - pre_tokenizer must be a BertPreTokenizer (or null).
//
// The vocabulary needs [PAD], [CLS] and [SEP] and the unknown token (see
// NewVocab). At most MaxTokenizerJSONBytes are read; anything else that
// does not fit is an error saying which key.
func ReadTokenizerJSON(r io.Reader) (*Tokenizer, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxTokenizerJSONBytes+1))
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if len(b) > MaxTokenizerJSONBytes {
		return nil, fmt.Errorf("tokenizer.json: larger than %d bytes", MaxTokenizerJSONBytes)
	}
	return parseTokenizerJSON(b)
}

// LoadTokenizerJSON reads the tokenizer.json file at path (see
// ReadTokenizerJSON); its size is checked before it is read.
func LoadTokenizerJSON(path string) (*Tokenizer, error) {
	b, err := atomicfile.ReadLimited(path, MaxTokenizerJSONBytes)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t, err := parseTokenizerJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func parseTokenizerJSON(b []byte) (*Tokenizer, error) {
	var h hfTokenizer
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	m := h.Model
	if m == nil {
		return nil, errors.New("tokenizer.json: no \"model\"")
	}
	if m.Type != "WordPiece" {
		return nil, fmt.Errorf("tokenizer.json: model.type %q is not \"WordPiece\": not the tokenizer of a BERT-style checkpoint", m.Type)
	}
	var opt VocabOptions
	if m.UnkToken != nil {
		if *m.UnkToken == "" {
			return nil, errors.New("tokenizer.json: model.unk_token is empty")
		}
		opt.UnkToken = *m.UnkToken
	}
	if m.ContinuingSubwordPrefix != nil {
		if *m.ContinuingSubwordPrefix == "" {
			return nil, errors.New("tokenizer.json: model.continuing_subword_prefix is empty")
		}
		opt.ContinuationPrefix = *m.ContinuingSubwordPrefix
	}
	maxChars := MaxInputCharsPerWord
	if m.MaxInputCharsPerWord != nil {
		if *m.MaxInputCharsPerWord < 1 {
			return nil, fmt.Errorf("tokenizer.json: model.max_input_chars_per_word %d is not positive", *m.MaxInputCharsPerWord)
		}
		maxChars = min(*m.MaxInputCharsPerWord, MaxInputCharsPerWord)
	}
	tokens, err := vocabTokens(m.Vocab)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: model.vocab: %w", err)
	}
	lower, err := h.lowerCase()
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if p := h.PreTokenizer; p != nil && p.Type != "BertPreTokenizer" {
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer.type %q is not supported (BertPreTokenizer only)", p.Type)
	}
	v, err := NewVocabWith(tokens, opt)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: model.%w", err)
	}
	t := NewTokenizer(v, lower)
	t.maxChars = maxChars
	return t, nil
}

// lowerCase returns the normalizer's lowercase flag after checking that
// BasicTokenize implements the rest of it.
func (h *hfTokenizer) lowerCase() (bool, error) {
	n := h.Normalizer
	if n == nil {
		return false, nil
	}
	if n.Type != "BertNormalizer" {
		return false, fmt.Errorf("normalizer.type %q is not supported (BertNormalizer only)", n.Type)
	}
	lower := n.Lowercase == nil || *n.Lowercase
	switch {
	case n.CleanText != nil && !*n.CleanText:
		return false, errors.New("normalizer.clean_text=false is not supported")
	case n.HandleChineseChars != nil && !*n.HandleChineseChars:
		return false, errors.New("normalizer.handle_chinese_chars=false is not supported")
	case n.StripAccents != nil && *n.StripAccents != lower:
		return false, fmt.Errorf("normalizer.strip_accents=%v with lowercase=%v is not supported (accents are stripped exactly when lower-casing)", *n.StripAccents, lower)
	}
	return lower, nil
}

// vocabTokens decodes a token→id JSON object into the tokens in id order,
// checking that the ids are 0..n-1, each once.
func vocabTokens(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, errors.New("missing")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not a JSON object of token → id")
	}
	// Ids are checked as they come, so the result never grows past the
	// number of entries actually present.
	var tokens []string
	seen := 0
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		tok, _ := kt.(string)
		var id int
		if err := dec.Decode(&id); err != nil {
			return nil, fmt.Errorf("token %q: %w", tok, err)
		}
		if seen++; seen > MaxVocabTokens {
			return nil, fmt.Errorf("more than %d tokens", MaxVocabTokens)
		}
		if id < 0 || id >= MaxVocabTokens {
			return nil, fmt.Errorf("token %q has id %d outside [0, %d)", tok, id, MaxVocabTokens)
		}
		if id >= len(tokens) {
			// An entry takes at least 4 bytes ("":0), so no larger id can be
			// filled by the entries the object has room for.
			if id > len(raw)/4 {
				return nil, fmt.Errorf("token %q has id %d, beyond the vocabulary", tok, id)
			}
			tokens = append(tokens, make([]string, id+1-len(tokens))...)
		}
		if tokens[id] != "" {
			return nil, fmt.Errorf("id %d is both %q and %q", id, tokens[id], tok)
		}
		if tok == "" {
			return nil, fmt.Errorf("id %d is the empty token", id)
		}
		tokens[id] = tok
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, errors.New("empty")
	}
	for id, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("no token has id %d (the ids must be 0..%d, each once)", id, len(tokens)-1)
		}
	}
	return tokens, nil
}

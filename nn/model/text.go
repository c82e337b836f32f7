package model

import (
	"encoding/json"
	"fmt"

	"github.com/selectformer/selectformer/nn/wordpiece"
)

// EncodeTexts tokenizes texts as [CLS] text [SEP], truncated and padded to maxLen
// tokens, into a text-model input with attention masks and token-type ids.
func EncodeTexts(tok *wordpiece.Tokenizer, texts []string, maxLen int) (Input, error) {
	if tok == nil || maxLen < 2 {
		return Input{}, fmt.Errorf("encode texts: need a tokenizer and maxLen ≥ 2 (have %d)", maxLen)
	}
	in := Input{IDs: make([][]int, len(texts)), TypeIDs: make([][]int, len(texts)), Mask: make([][]int, len(texts))}
	for i, s := range texts {
		e := tok.Encode(s, maxLen)
		in.IDs[i], in.TypeIDs[i], in.Mask[i] = e.IDs, e.TypeIDs, e.AttentionMask
	}
	return in, nil
}

// CheckVocab checks that v is the vocabulary of a text checkpoint with this
// configuration, so that a wrong vocab.txt or tokenizer.json is refused
// instead of giving token ids that mean nothing to the model:
//
//   - v has at most VocabSize tokens (the rows of the word embedding table,
//     config.json's vocab_size) and at least VocabSize minus VocabSlack of
//     them: a table may be a little larger than the vocabulary (vocab_size
//     rounded up, or a few added tokens), not several times;
//   - v has the special tokens [PAD], [UNK], [CLS], [SEP] and [MASK];
//   - pad_token_id (0 when config.json does not name one, as in Hugging
//     Face) is the id of [PAD], and each of unk_token_id, cls_token_id,
//     sep_token_id and mask_token_id that config.json names is the id of
//     its token.
func (c *Config) CheckVocab(v *wordpiece.Vocab) error {
	n, rows := v.Size(), c.VocabSize
	hint := "use the vocab.txt or tokenizer.json that came with the checkpoint (the files of its Hugging Face model page)"
	switch {
	case n > rows:
		return fmt.Errorf("the vocabulary has %d tokens, more than the %d rows of the checkpoint's word embeddings (config.json vocab_size): not this checkpoint's vocabulary; %s", n, rows, hint)
	case rows-n > VocabSlack(rows):
		return fmt.Errorf("the vocabulary has %d tokens, the checkpoint's word embeddings %d rows (config.json vocab_size): not this checkpoint's vocabulary (at most %d rows may go without a token); %s", n, rows, VocabSlack(rows), hint)
	}
	if v.MaskID() < 0 {
		return fmt.Errorf("the vocabulary has no %s token, which every BERT vocabulary has: not this checkpoint's vocabulary; %s", wordpiece.MaskToken, hint)
	}
	unk, _ := v.Token(v.UnkID())
	ids := []struct {
		key, token string
		id         int
		want       int
		named      bool
	}{
		{"pad_token_id", wordpiece.PadToken, c.PadTokenID, v.PadID(), true},
		{"unk_token_id", unk, 0, v.UnkID(), false},
		{"cls_token_id", wordpiece.ClsToken, 0, v.ClsID(), false},
		{"sep_token_id", wordpiece.SepToken, 0, v.SepID(), false},
		{"mask_token_id", wordpiece.MaskToken, 0, v.MaskID(), false},
	}
	for _, s := range ids {
		if !s.named {
			raw, ok := c.raw[s.key]
			if !ok || string(raw) == "null" {
				continue
			}
			if err := json.Unmarshal(raw, &s.id); err != nil {
				return fmt.Errorf("config.json %s: %w", s.key, err)
			}
		}
		if s.id != s.want {
			got, ok := v.Token(s.id)
			if !ok {
				got = "no token"
			}
			return fmt.Errorf("the checkpoint's %s is %d, which is %s in the vocabulary, not %s (id %d): not this checkpoint's vocabulary; %s", s.key, s.id, got, s.token, s.want, hint)
		}
	}
	return nil
}

// VocabSlack returns how many rows of a word embedding table of rows rows
// CheckVocab lets go without a vocabulary token: 1% of them, at least 8.
func VocabSlack(rows int) int { return max(rows/100, 8) }

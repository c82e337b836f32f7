package model

import (
	"fmt"

	"github.com/selectformer/selectformer/proxy/wordpiece"
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

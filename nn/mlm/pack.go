package mlm

import (
	"fmt"

	"github.com/selectformer/selectformer/nn/wordpiece"
)

// Pack tokenizes docs and packs them into sequences of exactly seqLen
// token ids for pretraining, with no padding but in the last: the
// documents' tokens in order, each document followed by [SEP], are cut
// into windows of seqLen − 2 tokens, each framed as [CLS] window [SEP] (a
// window may begin or end inside a document, as RoBERTa packs its
// corpus); the last window is padded with [PAD]. Empty documents are
// skipped.
func Pack(tok *wordpiece.Tokenizer, docs []string, seqLen int) ([][]int, error) {
	if tok == nil || seqLen < 3 {
		return nil, fmt.Errorf("mlm: pack: need a tokenizer and a sequence length ≥ 3 (have %d)", seqLen)
	}
	v := tok.Vocab()
	var out [][]int
	cur := []int{v.ClsID()}
	flush := func() {
		if cur[len(cur)-1] != v.SepID() {
			cur = append(cur, v.SepID())
		}
		for len(cur) < seqLen {
			cur = append(cur, v.PadID())
		}
		out = append(out, cur)
		cur = append(make([]int, 0, seqLen), v.ClsID())
	}
	for _, d := range docs {
		ids := tok.IDs(tok.Tokenize(d))
		if len(ids) == 0 {
			continue
		}
		for _, id := range append(ids, v.SepID()) {
			cur = append(cur, id)
			if len(cur) == seqLen-1 {
				flush()
			}
		}
	}
	if len(cur) > 1 {
		flush()
	}
	return out, nil
}

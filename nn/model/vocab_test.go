package model

import (
	"strconv"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/wordpiece"
)

// TestCheckVocab: a vocabulary is checked against the embedding table's rows
// and the special token ids of config.json.
func TestCheckVocab(t *testing.T) {
	base := []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
	words := func(n int) []string {
		out := append([]string(nil), base...)
		for i := len(base); i < n; i++ {
			out = append(out, "w"+strconv.Itoa(i))
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		config string // config.json after model_type
		tokens []string
		want   string // "" for accepted
	}{
		{"exact", `"vocab_size":30522,"pad_token_id":0`, words(30522), ""},
		{"rounded-up table", `"vocab_size":30528`, words(30522), ""},
		{"tiny table slack", `"vocab_size":20`, words(12), ""},
		{"made-up 80 tokens", `"vocab_size":30522,"pad_token_id":0`, words(80), "the vocabulary has 80 tokens, the checkpoint's word embeddings 30522 rows"},
		{"too many", `"vocab_size":100`, words(101), "101 tokens, more than the 100 rows"},
		{"table 2% larger", `"vocab_size":1000`, words(980), "at most 10 rows may go without a token"},
		{"no mask", `"vocab_size":20`, append(words(19)[:4], words(20)[5:]...), "no [MASK] token"},
		{"pad id", `"vocab_size":20,"pad_token_id":3`, words(20), "pad_token_id is 3, which is [SEP] in the vocabulary, not [PAD] (id 0)"},
		{"pad id beyond", `"vocab_size":20,"pad_token_id":19`, words(12), "pad_token_id is 19, which is no token in the vocabulary"},
		{"cls id", `"vocab_size":20,"cls_token_id":2,"sep_token_id":1`, words(20), "sep_token_id is 1, which is [UNK]"},
		{"all ids", `"vocab_size":20,"pad_token_id":0,"unk_token_id":1,"cls_token_id":2,"sep_token_id":3,"mask_token_id":4`, words(20), ""},
		{"null id", `"vocab_size":20,"mask_token_id":null`, words(20), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(`{"model_type":"bert","hidden_size":8,"num_attention_heads":2,"num_hidden_layers":1,` +
				`"intermediate_size":16,"max_position_embeddings":8,"id2label":{"0":"a","1":"b"},` + tc.config + `}`))
			if err != nil {
				t.Fatal(err)
			}
			v, err := wordpiece.NewVocab(tc.tokens)
			if err != nil {
				t.Fatal(err)
			}
			err = cfg.CheckVocab(v)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), "vocab.txt or tokenizer.json that came with the checkpoint"):
				t.Fatalf("error %v does not say what to do", err)
			}
		})
	}
}

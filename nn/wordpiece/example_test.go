package wordpiece_test

import (
	"fmt"
	"strings"

	"github.com/selectformer/selectformer/nn/wordpiece"
)

func Example() {
	v, err := wordpiece.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "runn", "##ing", "!"})
	if err != nil {
		panic(err)
	}
	tok := wordpiece.NewTokenizer(v, true)
	fmt.Println(tok.Tokenize("Unaffable running!"))
	e := tok.Encode("Unaffable running!", 10)
	fmt.Println(e.IDs)
	fmt.Println(e.AttentionMask)
	// Output:
	// [un ##aff ##able runn ##ing !]
	// [2 4 5 6 7 8 9 3 0 0]
	// [1 1 1 1 1 1 1 1 0 0]
}

func ExampleBuildVocab() {
	corpus := []string{"the cat sat", "the cat ran", "a cat napped"}
	v, err := wordpiece.BuildVocab(corpus, 40)
	if err != nil {
		panic(err)
	}
	tok := wordpiece.NewTokenizer(v, true)
	fmt.Println(v.Tokens()[:5])
	// Frequent words are whole tokens, rarer ones split into pieces, and
	// characters never seen ("." here) are unknown.
	fmt.Println(tok.Tokenize("The cat napped. A rat sat"))
	// Output:
	// [[PAD] [UNK] [CLS] [SEP] [MASK]]
	// [the cat n ##a ##p ##p ##e ##d [UNK] a r ##at s ##at]
}

// A Hugging Face tokenizer.json of a BERT checkpoint (cut down to a few
// tokens): its WordPiece vocabulary and its normalizer's lower-casing.
func ExampleReadTokenizerJSON() {
	file := `{
  "version": "1.0",
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 100,
    "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "un": 5, "##aff": 6, "##able": 7, "!": 8}}
}`
	tok, err := wordpiece.ReadTokenizerJSON(strings.NewReader(file))
	if err != nil {
		panic(err)
	}
	fmt.Println(tok.Vocab().Size(), tok.LowerCase())
	fmt.Println(tok.Tokenize("Unaffable!"))
	fmt.Println(tok.Encode("Unaffable!", 8).IDs)
	// Output:
	// 9 true
	// [un ##aff ##able !]
	// [2 5 6 7 8 3 0 0]
}

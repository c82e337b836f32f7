package wordpiece_test

import (
	"fmt"

	"github.com/selectformer/selectformer/proxy/wordpiece"
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

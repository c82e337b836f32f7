package wordpiece

import (
	"reflect"
	"slices"
	"testing"
)

func TestBuildVocabSmall(t *testing.T) {
	corpus := []string{"low lower lowest", "low low newer newest", "Wider wide, widest!"}
	v, err := BuildVocab(corpus, 1000)
	if err != nil {
		t.Fatal(err)
	}
	toks := v.Tokens()
	if !reflect.DeepEqual(toks[:5], []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
		t.Errorf("specials = %q", toks[:5])
	}
	for _, c := range []string{"l", "n", "w", ",", "!", "##o", "##w", "##e", "##r", "##s", "##t", "##i", "##d"} {
		if _, ok := v.ID(c); !ok {
			t.Errorf("character token %q missing", c)
		}
	}
	// "low" occurs 4 times: merged into a single token.
	if _, ok := v.ID("low"); !ok {
		t.Errorf("frequent word 'low' not a token: %q", toks)
	}
	// No merge of a pair seen only once (e.g. "ne" + ... appears twice, "wider" once).
	if _, ok := v.ID("wider"); ok {
		t.Error("merged a pair that occurs once")
	}
	tok := NewTokenizer(v, true)
	for _, text := range corpus {
		for _, p := range tok.Tokenize(text) {
			if p == UnkToken {
				t.Errorf("corpus text %q has an unknown piece: %q", text, tok.Tokenize(text))
			}
		}
	}
	again, _ := BuildVocab(corpus, 1000)
	if !reflect.DeepEqual(again.Tokens(), toks) {
		t.Error("BuildVocab is not deterministic")
	}
}

func TestBuildVocabSizes(t *testing.T) {
	corpus := []string{"abc abd abe", "xyz"}
	tests := []struct {
		size, want int
	}{
		{5, 5},   // specials only
		{7, 7},   // most frequent characters only
		{100, 0}, // everything: specials, 8 character tokens, merges until no pair repeats
	}
	for _, tc := range tests {
		v, err := BuildVocab(corpus, tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if tc.want > 0 && v.Size() != tc.want {
			t.Errorf("size %d: got %d tokens", tc.size, v.Size())
		}
		if v.Size() > tc.size {
			t.Errorf("size %d exceeded: %d", tc.size, v.Size())
		}
	}
	v, _ := BuildVocab(corpus, 7)
	// "a" (3 times) and "##b" (3 times) are the most frequent characters.
	if got := v.Tokens()[5:]; !reflect.DeepEqual(got, []string{"##b", "a"}) {
		t.Errorf("top characters = %q", got)
	}
	v, _ = BuildVocab(corpus, 100)
	// Merges: "a"+"##b" (3) -> "ab"; then nothing else occurs twice.
	if got := v.Tokens()[5:]; !slices.Contains(got, "ab") || len(got) != 9 {
		t.Errorf("tokens after specials = %q", got)
	}
	if _, err := BuildVocab(corpus, 4); err == nil {
		t.Error("BuildVocab accepted size 4")
	}
	if v, err := BuildVocab(nil, 10); err != nil || v.Size() != 5 {
		t.Errorf("empty corpus: %v, %v", v, err)
	}
}

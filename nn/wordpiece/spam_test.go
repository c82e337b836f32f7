package wordpiece_test

// Tests on the bundled SpamAssassin subset. They are an external test package
// because examples/dataset reads its bundled files with package selection/pool,
// which imports this package.

import (
	"testing"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

func TestBuildVocabSpamAssassin(t *testing.T) {
	ds, err := dataset.SpamAssassin()
	if err != nil {
		t.Fatal(err)
	}
	corpus := ds.Texts[:300]
	v, err := wordpiece.BuildVocab(corpus, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if v.Size() != 2000 {
		t.Fatalf("vocabulary of %d tokens, want 2000", v.Size())
	}
	for _, w := range []string{"the", "subject", "you", "http"} {
		if _, ok := v.ID(w); !ok {
			t.Errorf("common word %q is not a single token", w)
		}
	}
	tok := wordpiece.NewTokenizer(v, true)
	words, pieces, unk, long := 0, 0, 0, 0
	for _, text := range corpus {
		for _, w := range wordpiece.BasicTokenize(text, true) {
			words++
			if len([]rune(w)) > wordpiece.MaxInputCharsPerWord {
				long++
			}
		}
		for _, p := range tok.Tokenize(text) {
			pieces++
			if p == wordpiece.UnkToken {
				unk++
			}
		}
	}
	if unk != long {
		t.Errorf("%d unknown pieces on the training corpus, want %d (the words over %d characters)", unk, long, wordpiece.MaxInputCharsPerWord)
	}
	if ratio := float64(pieces) / float64(words); ratio > 1.6 {
		t.Errorf("%.2f pieces per word, want a compact vocabulary", ratio)
	}
}

func BenchmarkBuildVocab(b *testing.B) {
	ds, err := dataset.SpamAssassin()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := wordpiece.BuildVocab(ds.Texts, 8000); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	ds, err := dataset.SpamAssassin()
	if err != nil {
		b.Fatal(err)
	}
	v, err := wordpiece.BuildVocab(ds.Texts[:400], 4000)
	if err != nil {
		b.Fatal(err)
	}
	tok := wordpiece.NewTokenizer(v, true)
	n := 0
	for _, t := range ds.Texts {
		n += len(t)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, t := range ds.Texts {
			tok.Encode(t, 128)
		}
	}
}

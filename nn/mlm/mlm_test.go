package mlm

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// corpus is a tiny English text of a few repeated sentence shapes, enough
// for a model to learn which words follow which.
var corpus = []string{
	"the cat sat on the mat and the dog sat on the rug",
	"a bird sang in the tree while the cat slept on the mat",
	"the dog ran to the park and the bird flew to the tree",
	"a cat and a dog and a bird lived in the house by the park",
	"the bird sat in the tree and the dog slept on the rug",
	"the cat ran to the house and the dog ran to the park",
}

func tinyModel(t *testing.T, fam model.Family, tok *wordpiece.Tokenizer, seq int) (*model.Model, *Head) {
	t.Helper()
	cfg := model.Config{Family: fam, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32, LayerNormEps: 1e-12, HiddenAct: "gelu",
		VocabSize: tok.Vocab().Size(), MaxPositions: seq, TypeVocabSize: 2, PadTokenID: tok.Vocab().PadID(), Labels: model.DefaultLabels(2)}
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	hd, err := NewHead(m, nn.NewRNG(2))
	if err != nil {
		t.Fatal(err)
	}
	return m, hd
}

func tinyTokenizer(t *testing.T) *wordpiece.Tokenizer {
	t.Helper()
	v, err := wordpiece.BuildVocab(corpus, 60)
	if err != nil {
		t.Fatal(err)
	}
	return wordpiece.NewTokenizer(v, true)
}

// TestHeadGradients checks the head's and the encoder's analytic gradients
// (the tied word table's included) against finite differences.
func TestHeadGradients(t *testing.T) {
	tok := tinyTokenizer(t)
	for _, fam := range []model.Family{model.BERT, model.DistilBERT} {
		t.Run(string(fam), func(t *testing.T) {
			m, hd := tinyModel(t, fam, tok, 16)
			seqs, err := Pack(tok, corpus[:3], 16)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Mask(seqs, tok.Vocab(), 0.3, nn.NewRNG(3))
			if err != nil {
				t.Fatal(err)
			}
			params := append(m.Params(), hd.Params()...)
			params = slices.DeleteFunc(params, func(p *nn.Param) bool { return slices.Contains(m.HeadParams(), p) })
			loss := func() (float64, error) { l, _, err := Loss(m, hd, b); return l, err }
			backward := func() error { _, err := step(m, hd, b); return err }
			r, err := nn.GradCheck(loss, backward, params, 1e-5, 6)
			if err != nil {
				t.Fatal(err)
			}
			if r.MaxRelErr > 1e-5 {
				t.Fatalf("gradient check: relative error %.3g at %s (%d entries)", r.MaxRelErr, r.Worst, r.Checked)
			}
		})
	}
}

// TestMask checks BERT's corruption: only ordinary tokens are predicted,
// at about the rate, 80% of them replaced by [MASK], 10% by another
// token, 10% kept; padding is masked out of attention.
func TestMask(t *testing.T) {
	tok := tinyTokenizer(t)
	v := tok.Vocab()
	seqs, err := Pack(tok, slices.Repeat(corpus, 40), 24)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Mask(seqs, v, 0.15, nn.NewRNG(5))
	if err != nil {
		t.Fatal(err)
	}
	tokens, masked, random, kept := 0, 0, 0, 0
	for i, s := range seqs {
		for j, id := range s {
			if b.Input.Mask[i][j] != map[bool]int{true: 0, false: 1}[id == v.PadID()] {
				t.Fatalf("attention mask %d at a token %d", b.Input.Mask[i][j], id)
			}
			if id > 4 {
				tokens++
			}
		}
	}
	for k, p := range b.Positions {
		i, j := p/24, p%24
		if seqs[i][j] != b.Targets[k] || seqs[i][j] <= 4 {
			t.Fatalf("position %d: target %d, original %d (a special token?)", p, b.Targets[k], seqs[i][j])
		}
		switch got := b.Input.IDs[i][j]; {
		case got == v.MaskID():
			masked++
		case got == seqs[i][j]:
			kept++
		default:
			random++
		}
	}
	n := len(b.Positions)
	if rate := float64(n) / float64(tokens); math.Abs(rate-0.15) > 0.03 {
		t.Errorf("predicted %d of %d tokens (%.3f), want about 0.15", n, tokens, rate)
	}
	if f := float64(masked) / float64(n); math.Abs(f-0.8) > 0.06 {
		t.Errorf("%d of %d predicted tokens are [MASK] (%.2f), want about 0.8", masked, n, f)
	}
	if random == 0 || kept == 0 {
		t.Errorf("random %d, kept %d: want both", random, kept)
	}
	if _, err := Mask([][]int{{v.ClsID(), v.SepID(), v.PadID()}}, v, 0.15, nn.NewRNG(1)); err == nil {
		t.Error("a batch without ordinary tokens was masked")
	}
	if _, err := Mask([][]int{{v.ClsID(), v.Size()}}, v, 0.15, nn.NewRNG(1)); err == nil {
		t.Error("a token id outside the vocabulary was accepted")
	}
}

// TestPack checks the packing: every sequence of the length, framed by
// [CLS] … [SEP], the documents' tokens in order.
func TestPack(t *testing.T) {
	tok := tinyTokenizer(t)
	v := tok.Vocab()
	long := strings.Repeat("the cat sat on the mat ", 8)
	docs := append([]string{"", long}, corpus...)
	seqs, err := Pack(tok, docs, 20)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []int
	for _, d := range docs {
		want = append(want, tok.IDs(tok.Tokenize(d))...)
	}
	for _, s := range seqs {
		if len(s) != 20 || s[0] != v.ClsID() {
			t.Fatalf("sequence %v: want 20 ids from [CLS]", s)
		}
		for _, id := range s[1:] {
			if id != v.SepID() && id != v.PadID() {
				got = append(got, id)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("packed tokens differ from the documents':\n%v\n%v", got, want)
	}
	if _, err := Pack(tok, docs, 2); err == nil {
		t.Error("a sequence length of 2 was accepted")
	}
}

// TestTrainLearns pretrains a tiny model on a text whose every word is
// fixed by its neighbours (the number words in order, from every start):
// the held-out loss falls below half its start and the masked words are
// predicted at least twice as often as by guessing one of the twelve, and
// the curve has a point every EvalEvery steps.
func TestTrainLearns(t *testing.T) {
	words := strings.Fields("one two three four five six seven eight nine ten eleven twelve")
	var docs []string
	for i := range 60 {
		k := i % len(words)
		docs = append(docs, strings.Join(append(slices.Clone(words[k:]), words[:k]...), " "))
	}
	v, err := wordpiece.BuildVocab(docs, 70)
	if err != nil {
		t.Fatal(err)
	}
	tok := wordpiece.NewTokenizer(v, true)
	m, hd := tinyModel(t, model.BERT, tok, 16)
	seqs, err := Pack(tok, docs, 16)
	if err != nil {
		t.Fatal(err)
	}
	st, err := Train(m, hd, tok.Vocab(), seqs, seqs[:24], Config{Steps: 400, BatchSize: 16, LR: 5e-3, WarmupFrac: 0.1, Seed: 1, EvalEvery: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Curve) != 5 || st.Curve[4].Step != 400 {
		t.Fatalf("curve %+v: want points at steps 0, 100, 200, 300, 400", st.Curve)
	}
	first, last := st.Curve[0].EvalLoss, st.Curve[4]
	t.Logf("held-out loss %.3f → %.3f, accuracy %.2f", first, last.EvalLoss, last.EvalAccuracy)
	if !(last.EvalLoss < 0.5*first) || last.EvalAccuracy < 2.0/12 {
		t.Fatalf("held-out loss %.3f → %.3f, accuracy %.2f: the model did not learn", first, last.EvalLoss, last.EvalAccuracy)
	}
}

// TestSaveLoad writes a pretrained checkpoint and reads it back: as a
// classifier to fine-tune (Load: the encoder's weights as saved, rounded
// to F16, a new head), through model.Load with NewHead, and its
// tokenizer.json equal to the tokenizer.
func TestSaveLoad(t *testing.T) {
	tok := tinyTokenizer(t)
	m, hd := tinyModel(t, model.BERT, tok, 16)
	dir := t.TempDir()
	if err := Save(dir, m, hd, tok, safetensors.F16); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.ReadFile(filepath.Join(dir, model.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, ts := range f.Tensors {
		names[ts.Name] = true
	}
	for _, want := range []string{"cls.predictions.bias", "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight", "bert.embeddings.word_embeddings.weight"} {
		if !names[want] {
			t.Errorf("checkpoint lacks %s", want)
		}
	}
	for _, no := range []string{"bert.pooler.dense.weight", "classifier.weight", "cls.predictions.decoder.weight"} {
		if names[no] {
			t.Errorf("checkpoint has %s", no)
		}
	}
	cfg, err := model.ReadConfig(filepath.Join(dir, model.ConfigFile))
	if err != nil || !slices.Equal(cfg.Architectures, []string{"BertForMaskedLM"}) {
		t.Fatalf("config %+v, %v", cfg, err)
	}
	got, gtok, err := Load(dir, []string{"a", "b", "c"}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.NumLabels() != 3 || len(got.Config.Architectures) != 0 {
		t.Fatalf("%d labels, architectures %v: want 3, none (a classifier's, when saved)", got.Config.NumLabels(), got.Config.Architectures)
	}
	for i, p := range got.EmbeddingParams() {
		want := m.EmbeddingParams()[i].Value.Data
		for j, v := range p.Value.Data {
			if r := safetensors.F16ToFloat64(safetensors.Float64ToF16(want[j])); v != r {
				t.Fatalf("%s[%d] = %v, want %v (the saved value in F16)", p.Name, j, v, r)
			}
		}
	}
	if _, err := model.Load(dir, model.LoadOptions{NewHead: true}); err != nil {
		t.Fatalf("model.Load with NewHead: %v", err)
	}
	if _, err := model.Load(dir, model.LoadOptions{}); err == nil {
		t.Fatal("model.Load without NewHead read a checkpoint that has no classifier")
	}
	if !slices.Equal(gtok.Vocab().Tokens(), tok.Vocab().Tokens()) || gtok.LowerCase() != tok.LowerCase() {
		t.Fatal("the tokenizer read back differs")
	}
	var buf bytes.Buffer
	if err := tok.WriteTokenizerJSON(&buf); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, TokenizerFile))
	if err != nil || !bytes.Equal(b, buf.Bytes()) {
		t.Fatalf("tokenizer.json differs from WriteTokenizerJSON's (%v)", err)
	}
}

package model_test

// An external test package: examples/dataset reads its bundled files with
// package selection/pool, which imports this package.

import (
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

// TestDistilBERTLearnsSpam trains a one-layer DistilBERT-family model, with a
// WordPiece vocabulary built from the training texts, on the bundled SpamAssassin
// subset and requires it to beat the majority-class baseline on held-out mail.
// Two epochs reach 0.94 against the baseline's 0.53 (four reached 0.945).
func TestDistilBERTLearnsSpam(t *testing.T) {
	set, err := dataset.SpamAssassin()
	if err != nil {
		t.Fatal(err)
	}
	perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(3))
	nTest := set.Len() / 4
	test, err := set.Subset(perm[:nTest])
	if err != nil {
		t.Fatal(err)
	}
	train, err := set.Subset(perm[nTest:])
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	vocab, err := wordpiece.BuildVocab(train.Texts, 2000)
	if err != nil {
		t.Fatal(err)
	}
	tok := wordpiece.NewTokenizer(vocab, true)
	const maxLen = 64
	trainIn, err := model.EncodeTexts(tok, train.Texts, maxLen)
	if err != nil {
		t.Fatal(err)
	}
	testIn, err := model.EncodeTexts(tok, test.Texts, maxLen)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{Family: model.DistilBERT, Hidden: 32, Heads: 2, Layers: 1, Intermediate: 64, LayerNormEps: 1e-12, HiddenAct: "gelu",
		VocabSize: vocab.Size(), MaxPositions: maxLen, PadTokenID: vocab.PadID(), HiddenDropout: 0.1, Labels: set.ClassNames}
	m, err := model.New(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	st, err := model.Train(m, trainIn, train.Labels, model.TrainConfig{Epochs: 2, BatchSize: 16, LR: 2e-3, WeightDecay: 0.01, WarmupFrac: 0.1, ClipNorm: 1, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := model.Evaluate(m, testIn, test.Labels, 128)
	if err != nil {
		t.Fatal(err)
	}
	counts, err := dataset.ClassCounts(test.Labels, dataset.Indices(test.Len()), len(set.ClassNames))
	if err != nil {
		t.Fatal(err)
	}
	majority := float64(max(counts[0], counts[1])) / float64(test.Len())
	t.Logf("DistilBERT on %d mails (vocab %d) in %v: losses %.3f, test accuracy %.4f (majority %.4f), per class %.3f",
		train.Len(), vocab.Size(), time.Since(start).Round(time.Millisecond), st.EpochLoss, mt.Accuracy, majority, mt.PerClassAccuracy)
	if mt.Accuracy <= majority {
		t.Fatalf("test accuracy %.4f does not beat the majority baseline %.4f", mt.Accuracy, majority)
	}
	if len(mt.Entropy) != test.Len() {
		t.Fatalf("%d entropies for %d samples", len(mt.Entropy), test.Len())
	}
}

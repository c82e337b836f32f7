package model_test

// An external test package: examples/dataset reads its bundled files with
// package selection/pool, which imports this package.

import (
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/model"
)

// TestViTLearnsMNIST trains a 2-layer ViT (7×7 patches, width 32) on 4,000 digits
// of the bundled subset and tests it on the other 1,000.
func TestViTLearnsMNIST(t *testing.T) {
	set, err := dataset.MNIST()
	if err != nil {
		t.Fatal(err)
	}
	if set.Width != 28 || set.Height != 28 {
		t.Fatalf("MNIST images are %dx%d", set.Width, set.Height)
	}
	perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(1))
	nTest := set.Len() / 5
	test, err := set.Subset(perm[:nTest])
	if err != nil {
		t.Fatal(err)
	}
	train, err := set.Subset(perm[nTest:])
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64, LayerNormEps: 1e-12, HiddenAct: "gelu", HiddenDropout: 0.1,
		ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}}
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, err := model.Train(m, model.NormalizeImages(train.Images, 1), train.Labels,
		model.TrainConfig{Epochs: 12, BatchSize: 32, LR: 5e-3, WeightDecay: 0.01, WarmupFrac: 0.1, ClipNorm: 1, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	mt, err := model.Evaluate(m, model.NormalizeImages(test.Images, 1), test.Labels, 256)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ViT on %d MNIST digits: %d steps in %v, losses %.3f, test accuracy %.4f, per class %.3f", train.Len(), st.Steps,
		time.Since(start).Round(time.Millisecond), st.EpochLoss, mt.Accuracy, mt.PerClassAccuracy)
	if mt.Accuracy <= 0.90 {
		t.Fatalf("test accuracy %.4f, want > 0.90", mt.Accuracy)
	}
}

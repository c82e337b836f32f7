package sessiontest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/share"
)

// The fixtures of the tests that run whole selections (selection's and
// selection/shard's), so that a sharded run is compared with an unsharded
// one on the same inputs.

// ShareValues is the body of the tests' substitute secure forward: the
// data owner shares value(phase, i) of each candidate i of idx (encoded
// with fp) as its input, the model owner learning nothing; with square it
// returns shares of their squares (protocol.Session.SquareFixed, which
// draws square and wrap pairs).
func ShareValues(ctx context.Context, s *protocol.Session, fp share.FixedPoint, phase int, idx []int, value func(phase, idx int) float64, square bool) (*share.Tensor, error) {
	var x *share.Tensor
	var err error
	if s.Party() == 0 {
		x, err = s.ShareInput(1, nil, len(idx))
	} else {
		xs := make([]float64, len(idx))
		for j, i := range idx {
			xs[j] = value(phase, i)
		}
		enc, err := fp.EncodeTensor(xs, len(xs))
		if err != nil {
			return nil, err
		}
		x, err = s.ShareInput(1, enc)
	}
	if err != nil || !square {
		return x, err
	}
	return s.SquareFixed(ctx, x)
}

// RandomWords hands add the parts of m (drawn for q) whose words are
// uniformly random, so that two draws share none of them but by drawing
// the same material: the tail word of packed bits (a bit pair's, a wrap
// pair's u or v: its high bits cleared)
// and the wrap pairs' shares of u·v·2^(64−f) (f random bits a word) are
// left out.
func RandomWords(q beaver.Request, m beaver.Material, add func([]uint64)) {
	for i, p := range m.Parts {
		// Packed bits (a bit pair's XOR shares, a wrap pair's u or v):
		// the tail word holds only N mod 64 random bits.
		packed := m.Kind == beaver.KindBitPair && i == 0 || m.Kind == beaver.KindWrap && i < 2
		if packed && q.N%64 != 0 && len(p) > 0 {
			p = p[:len(p)-1]
		}
		if m.Kind == beaver.KindWrap && i == 2 {
			continue
		}
		add(p)
	}
}

// Common counts the words of b that are also in a.
func Common(a, b []uint64) int {
	set := make(map[uint64]bool, len(a))
	for _, w := range a {
		set[w] = true
	}
	n := 0
	for _, w := range b {
		if set[w] {
			n++
		}
	}
	return n
}

// NearTieSwaps counts the indices of a not in b, plus b's surplus: how far
// two selections differ (the fixed-point near-ties of two secure runs).
func NearTieSwaps(a, b []int) int {
	n := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			n++
		}
	}
	return n + max(0, len(b)-len(a))
}

// ShareWeights shares a vector of the model owner's under the weight base
// wb: what the tests' substitute forward adds to a phase's preparation so
// that a run draws weight masks (the items whose reuse reveals weights) as
// well as triples, square and wrap pairs.
func ShareWeights(ctx context.Context, s *protocol.Session, wb uint64) error {
	var g *share.Tensor
	if s.Party() == 0 {
		g, _ = share.FromData([]uint64{1, 2, 3, 4}, 4)
	}
	_, err := s.ShareVector(ctx, wb, g, 4)
	return err
}

// Labels is the model owner's labelling of the bootstrap sample by the
// pool's true labels (labels[i] of candidate i).
func Labels(labels []int) func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
	return func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
		if in.Len() != len(idx) {
			return nil, fmt.Errorf("%d inputs for %d indices", in.Len(), len(idx))
		}
		out := make([]int, len(idx))
		for j, i := range idx {
			out[j] = labels[i]
		}
		return out, nil
	}
}

// TinyViT is the secure tests' target and pool: an untrained tiny ViT
// (its entropies all near ln 10, many near-ties) and the first n MNIST
// images of the bundled subset, normalized, with their labels.
func TinyViT(t testing.TB, n int) (pool model.Input, labels []int, target *model.Model) {
	t.Helper()
	set, err := dataset.MNIST()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := set.Subset(dataset.Indices(n))
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{Family: model.ViT, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32, LayerNormEps: 1e-12, HiddenAct: "gelu",
		ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}
	target, err = model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return model.NormalizeImages(sub.Images, 1), sub.Labels, target
}

// PlainGeneration is the secure tests' proxy generation: the paper's plain
// generation, one short epoch each (these tests are about the pipeline,
// checkpoints and the plaintext agreement of all-MLP proxies, whose
// scores two runs reproduce within a few ulps; the default's exact
// softmax in the last phase moves them by up to 0.001 nats).
func PlainGeneration(log *slog.Logger) proxy.Config {
	return proxy.Config{Plain: true, Tune: proxy.TrainConfig{Epochs: 1, BatchSize: 8, LR: 1e-3}, InVivo: proxy.TrainConfig{Epochs: 1, BatchSize: 8, LR: 5e-4},
		Points: 2000, MLP: mlp.TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 1}, Seed: 3, Logger: log}
}

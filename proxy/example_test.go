package proxy_test

import (
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// Spearman compares proxy entropies with the target's (ties get average ranks).
func ExampleSpearman() {
	target := []float64{0.1, 0.9, 0.4, 2.0, 1.2}
	proxyH := []float64{0.2, 0.7, 0.7, 1.5, 1.1}
	rho, err := proxy.Spearman(proxyH, target)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.3f\n", rho)
	// Output: 0.975
}

// The schedule of a three-phase selection and the Table 3 ablations.
func ExampleConfig() {
	cfg := proxy.Config{
		Phases:   []proxy.Shape{{Layers: 1, Heads: 4, MLPHidden: 2}, {Layers: 2, Heads: 8, MLPHidden: 8}, {Layers: 3, Heads: 12, MLPHidden: 16}},
		Ablation: proxy.NoAttnSM, // keep the attention softmax exact
		Tune:     proxy.TrainConfig{Epochs: 2, BatchSize: 32, LR: 2e-5},
		InVivo:   proxy.TrainConfig{Epochs: 3, BatchSize: 32, LR: 1e-4},
	}
	fmt.Println(len(cfg.Phases), cfg.Ablation == proxy.NoAttnSM, proxy.NoApprox.ExactEntropy)
	// Output: 3 true true
}

// A two-phase schedule whose first phase emulates every module (it sees
// every candidate) and whose last keeps the attention softmax exact (it sees
// few), with entropy MLPs wider than the other MLPs. Validate checks the
// settings against the target before anything costly runs.
func ExampleConfig_phaseAblations() {
	target, err := model.New(model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64,
		LayerNormEps: 1e-12, HiddenAct: "gelu", ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := proxy.Config{
		Phases:         []proxy.Shape{{Layers: 1, Heads: 4, MLPHidden: 8}, {Layers: 2, Heads: 4, MLPHidden: 16}},
		PhaseAblations: []proxy.Ablation{{}, proxy.NoAttnSM},
		EntropyHidden:  128,
	}
	fmt.Println(cfg.Validate(target, 150))
	cfg.PhaseAblations = cfg.PhaseAblations[1:]
	fmt.Println(cfg.Validate(target, 150))
	// Output:
	// <nil>
	// proxy: 1 phase ablations for 2 phases
}

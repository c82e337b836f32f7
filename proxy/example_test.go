package proxy_test

import (
	"fmt"

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
		Phases:   []proxy.Shape{{Layers: 1, Heads: 4, Hidden: 2}, {Layers: 2, Heads: 8, Hidden: 8}, {Layers: 3, Heads: 12, Hidden: 16}},
		Ablation: proxy.NoAttnSM, // keep the attention softmax exact
		Tune:     proxy.TrainConfig{Epochs: 2, BatchSize: 32, LR: 2e-5},
		InVivo:   proxy.TrainConfig{Epochs: 3, BatchSize: 32, LR: 1e-4},
	}
	fmt.Println(len(cfg.Phases), cfg.Ablation == proxy.NoAttnSM, proxy.NoApprox.ExactEntropy)
	// Output: 3 true true
}

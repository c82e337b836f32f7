package mlp_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
)

// Fit an MLP to LayerNorm's reciprocal square root for variances observed around
// 1 and read its fixed-point-ready weights.
func Example() {
	obs, _ := mlp.NewObserver(mlp.InvSqrt, 1, 256, 1)
	rng := nn.NewRNG(1)
	for i := 0; i < 1000; i++ {
		_ = obs.Observe([]float64{max(1+0.2*rng.NormFloat64(), 0.3)})
	}
	ds, err := mlp.NewDataset(obs, 20_000, false, 1e-12, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	m, rep, err := mlp.Train(context.Background(), ds, 8, "ln", mlp.TrainConfig{LR: 1e-2, Seed: 3})
	if err != nil {
		fmt.Println(err)
		return
	}
	w1, _, _, _ := m.Weights()
	fmt.Println(len(w1), rep.RealMeanAbs < 0.05, rep.Ranges.Check(mlp.FixedPointBound) == nil)
	// Output: 8 true true
}

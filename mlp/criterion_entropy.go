package mlp

import (
	"math"

	"github.com/selectformer/selectformer/nn"
)

// The prediction entropy, the default selection criterion (DefaultCriterion):
// H = −Σ p log p of softmax(logits) in nats, in [0, ln C]; a √H calibration
// applies. Its exact version over MPC is protocol.Session.Entropy, registered
// in proxy/secure/criterion_entropy.go.
func init() {
	MustRegisterCriterion(Criterion{
		Name:   DefaultCriterion,
		Score:  entropy,
		Scores: nn.Entropy,
		Range:  func(classes int) (float64, float64) { return 0, math.Log(float64(max(classes, 1))) },
		Sqrt:   true,
	})
}

// entropy returns −Σ p log p of softmax(x) in nats.
func entropy(x []float64) float64 {
	lse := nn.LogSumExp(x)
	h := 0.0
	for _, v := range x {
		p := math.Exp(v - lse)
		h -= p * (v - lse)
	}
	return h
}

package mlp

import (
	"context"
	"testing"
)

// BenchmarkExVivo5M trains a d=16 MLP ex vivo on the paper's 5.12 million
// synthesised points (one epoch) for each module kind: the attention softmax of a
// 128-token sequence, LayerNorm's reciprocal square root and the entropy over 10
// logits. Run with: go test ./mlp -run XXX -bench ExVivo5M -benchtime 1x
func BenchmarkExVivo5M(b *testing.B) {
	for _, c := range []struct {
		name string
		ds   Dataset
	}{
		{"attn_softmax-128", Dataset{Kind: AttnSoftmax, Gauss: gaussian(128, 0, 1), N: DefaultPoints, Seed: 1}},
		{"invsqrt", Dataset{Kind: InvSqrt, Gauss: gaussian(1, 1, 0.3), N: DefaultPoints, Seed: 2, Eps: 1e-12, Floor: 0.05}},
		{"softmax_entropy-10", Dataset{Kind: SoftmaxEntropy, Gauss: gaussian(10, 0, 2), N: DefaultPoints, Seed: 3}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, rep, err := Train(context.Background(), &c.ds, 16, "bench", TrainConfig{BatchSize: 512})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(rep.SynthMeanAbs, "mean-abs-err")
				b.ReportMetric(rep.ConstMeanAbs, "const-abs-err")
			}
		})
	}
}

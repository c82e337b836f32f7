package nn_test

import (
	"fmt"
	"math"

	"github.com/selectformer/selectformer/nn"
)

// A single post-LN encoder block trained for a few steps with AdamW, then
// gradient-checked.
func Example() {
	rng := nn.NewRNG(1)
	block, err := nn.NewBlock(nn.BlockConfig{Dim: 8, Heads: 2, Intermediate: 16, Eps: 1e-12, Act: "gelu"},
		nn.BlockNames{Query: "q", Key: "k", Value: "v", Output: "o", LN1: "ln1", LN2: "ln2", FFNIn: "in", FFNOut: "out"}, rng)
	if err != nil {
		fmt.Println(err)
		return
	}
	x := nn.New(2, 3, 8) // batch 2, 3 tokens, width 8
	nn.InitNormal(x, 1, rng)
	target := x.Clone()
	opt := &nn.AdamW{LR: 1e-2, WarmupSteps: 5, TotalSteps: 50, ClipNorm: 1}
	var first, last float64
	for step := 0; step < 50; step++ {
		nn.ZeroGrad(block.Params())
		y, err := block.Forward(x, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		dy := nn.New(y.Shape...)
		loss := 0.0
		for i := range y.Data { // squared error to the (normalised) input
			d := y.Data[i] - target.Data[i]
			loss += d * d
			dy.Data[i] = 2 * d
		}
		if _, err := block.Backward(dy); err != nil {
			fmt.Println(err)
			return
		}
		if _, err := opt.Step(block.Params()); err != nil {
			fmt.Println(err)
			return
		}
		if step == 0 {
			first = loss
		}
		last = loss
	}
	fmt.Println("loss decreased:", last < first)
	fmt.Println("parameters:", len(block.Params()), "first:", block.Params()[0].Name)
	// Output:
	// loss decreased: true
	// parameters: 16 first: q.weight
}

// Replacing the attention softmax by another module and recording its inputs, as
// approximator training does.
func ExampleRecorder() {
	attn, err := nn.NewMultiHeadAttention("q", "k", "v", "o", 4, 2, nn.NewRNG(3))
	if err != nil {
		fmt.Println(err)
		return
	}
	var rows int
	attn.Softmax = &nn.Recorder{Inner: attn.Softmax, OnForward: func(in, out *nn.Tensor) { rows += in.Rows() }}
	x := nn.New(1, 5, 4)
	if _, err := attn.Forward(x); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("softmax rows recorded:", rows) // 1 sample × 2 heads × 5 queries
	// Output: softmax rows recorded: 10
}

// LogSumExp normalises logits stably: log softmax(x)_j = x_j − LogSumExp(x),
// even where exp(x_j) overflows.
func ExampleLogSumExp() {
	logits := []float64{1000, 1000}
	lse := nn.LogSumExp(logits)
	fmt.Printf("%.4f %.4f\n", lse-1000, math.Exp(logits[0]-lse))
	// Output: 0.6931 0.5000
}

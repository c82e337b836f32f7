package nn

import (
	"math"
	"testing"
)

const gradTol = 1e-6

func randTensor(seed uint64, shape ...int) *Tensor {
	t := New(shape...)
	InitNormal(t, 1, NewRNG(seed))
	return t
}

// masked adapts a Block (or attention) with a fixed key mask to Module.
type masked struct {
	b    *Block
	mask *Tensor
}

func (m *masked) Forward(x *Tensor) (*Tensor, error)   { return m.b.Forward(x, m.mask) }
func (m *masked) Backward(dy *Tensor) (*Tensor, error) { return m.b.Backward(dy) }
func (m *masked) Params() []*Param                     { return m.b.Params() }

// reseeded re-seeds a dropout before each forward so the loss is deterministic.
type reseeded struct{ d *Dropout }

func (r *reseeded) Forward(x *Tensor) (*Tensor, error) {
	r.d.Rng = NewRNG(7)
	return r.d.Forward(x)
}
func (r *reseeded) Backward(dy *Tensor) (*Tensor, error) { return r.d.Backward(dy) }
func (r *reseeded) Params() []*Param                     { return nil }

func testBlock(t *testing.T, preLN bool, act string) *Block {
	t.Helper()
	names := BlockNames{Query: "q", Key: "k", Value: "v", Output: "o", LN1: "ln1", LN2: "ln2", FFNIn: "fi", FFNOut: "fo"}
	b, err := NewBlock(BlockConfig{Dim: 8, Heads: 2, Intermediate: 12, Eps: 1e-12, Act: act, PreLN: preLN}, names, NewRNG(3))
	if err != nil {
		t.Fatal(err)
	}
	// Larger weights than the 0.02 initialisation make the check meaningful.
	for _, p := range b.Params() {
		InitNormal(p.Value, 0.5, NewRNG(uint64(len(p.Name))+11))
	}
	return b
}

func TestGradients(t *testing.T) {
	rng := NewRNG(1)
	attn, err := NewMultiHeadAttention("q", "k", "v", "o", 8, 2, rng)
	if err != nil {
		t.Fatal(err)
	}
	mask, _ := FromSlice([]float64{1, 1, 1, 0, 1, 1, 1, 1}, 2, 4)
	ln := NewLayerNorm("ln", 6, 1e-5)
	InitNormal(ln.Gamma.Value, 1, rng)
	InitNormal(ln.Beta.Value, 1, rng)
	noFFN := testBlock(t, false, "gelu")
	noFFN.FFN = nil
	noFFNPre := testBlock(t, true, "relu")
	noFFNPre.FFN = nil
	pos := randTensor(5, 3, 5)
	for i := range pos.Data {
		pos.Data[i] = math.Abs(pos.Data[i]) + 0.1
	}
	tests := []struct {
		name string
		m    Module
		x    *Tensor
	}{
		{"linear", NewLinear("lin", 5, 3, true, rng), randTensor(2, 2, 3, 5)},
		{"linear-nobias", NewLinear("lin", 5, 3, false, rng), randTensor(2, 4, 5)},
		{"layernorm", ln, randTensor(3, 2, 3, 6)},
		{"gelu", &GeLU{}, randTensor(4, 3, 7)},
		{"relu", &ReLU{}, randTensor(4, 3, 7)},
		{"tanh", &Tanh{}, randTensor(4, 3, 7)},
		{"softmax", &Softmax{}, randTensor(4, 3, 7)},
		{"invsqrt", &InvSqrt{Eps: 1e-5}, pos},
		{"dropout", &reseeded{&Dropout{P: 0.3, Training: true}}, randTensor(6, 4, 5)},
		{"attention", attn, randTensor(7, 2, 4, 8)},
		{"sequential", &Sequential{Layers: []Module{NewLinear("a", 4, 6, true, rng), &GeLU{}, NewLinear("b", 6, 4, true, rng)}}, randTensor(8, 3, 4)},
		{"residual", &Residual{Inner: NewLinear("r", 4, 4, true, rng)}, randTensor(9, 3, 4)},
		{"block-postln", &masked{testBlock(t, false, "gelu"), mask}, randTensor(10, 2, 4, 8)},
		{"block-preln", &masked{testBlock(t, true, "gelu"), mask}, randTensor(11, 2, 4, 8)},
		{"block-relu-nomask", &masked{testBlock(t, false, "relu"), nil}, randTensor(12, 2, 4, 8)},
		{"block-postln-noffn", &masked{noFFN, mask}, randTensor(13, 2, 4, 8)},
		{"block-preln-noffn", &masked{noFFNPre, mask}, randTensor(14, 2, 4, 8)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := CheckModule(tc.m, tc.x, 42, 1e-5, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxRelErr > gradTol || res.Checked == 0 {
				t.Fatalf("max relative error %.3g at %s (%d entries)", res.MaxRelErr, res.Worst, res.Checked)
			}
			t.Logf("%d entries, max relative error %.2g (%s)", res.Checked, res.MaxRelErr, res.Worst)
		})
	}
}

func TestGradientsAttentionMaskSetsAttend(t *testing.T) {
	// Masked keys must not influence the outputs.
	attn, err := NewMultiHeadAttention("q", "k", "v", "o", 4, 2, NewRNG(2))
	if err != nil {
		t.Fatal(err)
	}
	mask, _ := FromSlice([]float64{1, 1, 0}, 1, 3)
	if err := attn.SetMask(mask); err != nil {
		t.Fatal(err)
	}
	x := randTensor(3, 1, 3, 4)
	y1, err := attn.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 4; j++ {
		x.Data[8+j] += 5
	}
	y2, err := attn.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ { // outputs of the two unmasked positions
		if math.Abs(y1.Data[i]-y2.Data[i]) > 1e-12 {
			t.Fatalf("output %d changed with a masked key: %g vs %g", i, y1.Data[i], y2.Data[i])
		}
	}
}

func TestEmbeddingAndCrossEntropyGradients(t *testing.T) {
	e := NewEmbedding("emb", 5, 3, NewRNG(1))
	ids := []int{0, 3, 3, 4}
	r := randTensor(2, 2, 2, 3)
	lossEmb := func() (float64, error) {
		y, err := e.Forward(ids, 2, 2)
		if err != nil {
			return 0, err
		}
		s := 0.0
		for i, v := range y.Data {
			s += v * r.Data[i]
		}
		return s, nil
	}
	logits := &Param{Name: "logits", Value: randTensor(3, 4, 3), Grad: New(4, 3)}
	labels := []int{2, 0, 1, 1}
	tests := []struct {
		name     string
		loss     func() (float64, error)
		backward func() error
		params   []*Param
	}{
		{"embedding", lossEmb, func() error {
			if _, err := e.Forward(ids, 2, 2); err != nil {
				return err
			}
			return e.Backward(r)
		}, e.Params()},
		{"cross-entropy", func() (float64, error) {
			l, _, err := CrossEntropy(logits.Value, labels)
			return l, err
		}, func() error {
			_, g, err := CrossEntropy(logits.Value, labels)
			if err != nil {
				return err
			}
			return AddInPlace(logits.Grad, g)
		}, []*Param{logits}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := GradCheck(tc.loss, tc.backward, tc.params, 1e-5, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxRelErr > gradTol {
				t.Fatalf("max relative error %.3g at %s", res.MaxRelErr, res.Worst)
			}
		})
	}
}

func TestBadInputs(t *testing.T) {
	rng := NewRNG(1)
	lin := NewLinear("l", 3, 2, true, rng)
	emb := NewEmbedding("e", 4, 2, rng)
	attn, _ := NewMultiHeadAttention("q", "k", "v", "o", 4, 2, rng)
	tests := []struct {
		name string
		run  func() error
	}{
		{"linear width", func() error { _, err := lin.Forward(New(2, 4)); return err }},
		{"linear backward first", func() error { _, err := NewLinear("x", 2, 2, true, rng).Backward(New(1, 2)); return err }},
		{"embedding id", func() error { _, err := emb.Forward([]int{0, 4}, 2); return err }},
		{"embedding negative id", func() error { _, err := emb.Forward([]int{-1}, 1); return err }},
		{"embedding shape", func() error { _, err := emb.Forward([]int{0, 1}, 3); return err }},
		{"attention rank", func() error { _, err := attn.Forward(New(2, 4)); return err }},
		{"attention mask", func() error {
			m, _ := FromSlice([]float64{1, 1, 1}, 1, 3)
			if err := attn.SetMask(m); err != nil {
				return err
			}
			defer attn.SetMask(nil)
			_, err := attn.Forward(New(1, 2, 4))
			return err
		}},
		{"heads", func() error { _, err := NewMultiHeadAttention("q", "k", "v", "o", 5, 2, rng); return err }},
		{"label", func() error { _, _, err := CrossEntropy(New(2, 3), []int{0, 3}); return err }},
		{"label count", func() error { _, _, err := CrossEntropy(New(2, 3), []int{0}); return err }},
		{"activation", func() error { _, err := NewActivation("swish"); return err }},
		{"fromslice", func() error { _, err := FromSlice(make([]float64, 5), 2, 3); return err }},
		{"matmul", func() error { _, err := MatMul(New(2, 3), New(2, 3), false, false); return err }},
		{"dropout p", func() error { _, err := (&Dropout{P: 1, Training: true, Rng: rng}).Forward(New(2)); return err }},
		{"dropout rng", func() error { _, err := (&Dropout{P: 0.5, Training: true}).Forward(New(2)); return err }},
		{"prune all", func() error { return attn.PruneHeads(nil) }},
		{"prune range", func() error { return attn.PruneHeads([]int{2}) }},
		{"prune repeat", func() error { return attn.PruneHeads([]int{0, 0}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil {
				t.Fatal("expected an error")
			}
		})
	}
}

func TestMatMulAndLinearMatchNaive(t *testing.T) {
	a, b := randTensor(1, 3, 4), randTensor(2, 5, 4)
	c, err := MatMul(a, b, false, true)
	if err != nil {
		t.Fatal(err)
	}
	lin := &Linear{W: &Param{Name: "w", Value: b, Grad: New(5, 4)}}
	y, err := lin.Forward(a)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 5; j++ {
			s := 0.0
			for k := 0; k < 4; k++ {
				s += a.Data[i*4+k] * b.Data[j*4+k]
			}
			if math.Abs(c.Data[i*5+j]-s) > 1e-12 || math.Abs(y.Data[i*5+j]-s) > 1e-12 {
				t.Fatalf("(%d,%d): matmul %g linear %g naive %g", i, j, c.Data[i*5+j], y.Data[i*5+j], s)
			}
		}
	}
}

func TestPruneHeadsMatchesZeroedHeads(t *testing.T) {
	// Pruning head 1 equals zeroing its columns of O in the full model.
	full, err := NewMultiHeadAttention("q", "k", "v", "o", 6, 3, NewRNG(4))
	if err != nil {
		t.Fatal(err)
	}
	pruned, _ := NewMultiHeadAttention("q", "k", "v", "o", 6, 3, NewRNG(4))
	if err := pruned.PruneHeads([]int{0, 2}); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 6; r++ {
		for c := 2; c < 4; c++ {
			full.O.W.Value.Data[r*6+c] = 0
		}
	}
	x := randTensor(5, 2, 3, 6)
	a, err := full.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pruned.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	if pruned.Heads != 2 || pruned.Q.Out() != 4 || pruned.O.In() != 4 {
		t.Fatalf("pruned shapes: heads %d q %d o-in %d", pruned.Heads, pruned.Q.Out(), pruned.O.In())
	}
	for i := range a.Data {
		if math.Abs(a.Data[i]-b.Data[i]) > 1e-12 {
			t.Fatalf("output %d: %g vs %g", i, a.Data[i], b.Data[i])
		}
	}
}

func TestRecorderAndPluggableModules(t *testing.T) {
	b := testBlock(t, false, "gelu")
	var softIn, lnIn int
	b.Attn.Softmax = &Recorder{Inner: b.Attn.Softmax, OnForward: func(in, out *Tensor) {
		softIn += in.Len()
		for off := 0; off < out.Len(); off += out.Cols() {
			s := 0.0
			for _, v := range out.Data[off : off+out.Cols()] {
				s += v
			}
			if math.Abs(s-1) > 1e-9 {
				t.Errorf("softmax row sums to %g", s)
			}
		}
	}}
	b.LN1.InvSqrt = &Recorder{Inner: b.LN1.InvSqrt, OnForward: func(in, out *Tensor) { lnIn += in.Len() }}
	if _, err := b.Forward(randTensor(1, 2, 5, 8), nil); err != nil {
		t.Fatal(err)
	}
	if softIn != 2*2*5*5 || lnIn != 2*5 {
		t.Fatalf("recorded %d softmax inputs and %d variances, want 100 and 10", softIn, lnIn)
	}
}

func TestAdamWScheduleAndConvergence(t *testing.T) {
	o := &AdamW{LR: 1, WarmupSteps: 2, TotalSteps: 6}
	want := []float64{0.5, 1, 0.75, 0.5, 0.25, 0}
	for i, w := range want {
		if got := o.RateAt(i + 1); math.Abs(got-w) > 1e-12 {
			t.Fatalf("rate at step %d = %g, want %g", i+1, got, w)
		}
	}
	// Fit a linear regression y = 2x0 - x1 + 0.5.
	lin := NewLinear("fit", 2, 1, true, NewRNG(9))
	x := randTensor(3, 32, 2)
	target := make([]float64, 32)
	for i := range target {
		target[i] = 2*x.Data[2*i] - x.Data[2*i+1] + 0.5
	}
	opt := &AdamW{LR: 0.05, WarmupSteps: 10, TotalSteps: 600, ClipNorm: 1, WeightDecay: 0.0}
	var mse float64
	for step := 0; step < 600; step++ {
		ZeroGrad(lin.Params())
		y, _ := lin.Forward(x)
		g := New(32, 1)
		mse = 0
		for i := range target {
			d := y.Data[i] - target[i]
			mse += d * d / 32
			g.Data[i] = 2 * d / 32
		}
		if _, err := lin.Backward(g); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(lin.Params()); err != nil {
			t.Fatal(err)
		}
	}
	if mse > 1e-4 {
		t.Fatalf("regression did not converge: mse %g, weights %v bias %v", mse, lin.W.Value.Data, lin.B.Value.Data)
	}
	// Clipping: the update uses the clipped gradient and reports the raw norm.
	p := NewParam("p", 2)
	p.EnsureGrad().Data[0], p.Grad.Data[1] = 30, 40
	norm, err := (&AdamW{LR: 0.1, ClipNorm: 5}).Step([]*Param{p})
	if err != nil || norm != 50 || math.Abs(p.Grad.Norm()-5) > 1e-5 {
		t.Fatalf("clip: norm %g, clipped %g, err %v", norm, p.Grad.Norm(), err)
	}
	// Frozen parameters do not move.
	f := NewParam("f", 1)
	f.Frozen = true
	f.EnsureGrad().Data[0] = 1
	if _, err := (&AdamW{LR: 1}).Step([]*Param{f}); err != nil || f.Value.Data[0] != 0 {
		t.Fatalf("frozen parameter moved to %g (err %v)", f.Value.Data[0], err)
	}
}

func TestEntropyAndDeterminism(t *testing.T) {
	logits, _ := FromSlice([]float64{0, 0, 0, 0, 100, 0}, 2, 3)
	h := Entropy(logits)
	if math.Abs(h[0]-math.Log(3)) > 1e-12 || h[1] > 1e-30 {
		t.Fatalf("entropy %v", h)
	}
	if got := Argmax(logits); got[1] != 1 {
		t.Fatalf("argmax %v", got)
	}
	run := func() []float64 {
		b := testBlock(t, true, "gelu")
		b.Drop1.P, b.Drop2.P, b.Attn.ProbDropout.P = 0.2, 0.2, 0.1
		rng := NewRNG(77)
		b.Drop1.Rng, b.Drop2.Rng, b.Attn.ProbDropout.Rng = rng, rng, rng
		b.SetTraining(true)
		y, err := b.Forward(randTensor(1, 2, 3, 8), nil)
		if err != nil {
			t.Fatal(err)
		}
		return y.Data
	}
	a, c := run(), run()
	for i := range a {
		if a[i] != c[i] {
			t.Fatal("training forward is not deterministic under a seed")
		}
	}
}

func TestGradientsAreAllocatedLazily(t *testing.T) {
	lin := NewLinear("l", 3, 2, true, NewRNG(1))
	if lin.W.Grad != nil || lin.B.Grad != nil {
		t.Fatal("gradients allocated before any backward pass")
	}
	ZeroGrad(lin.Params())
	if n := GlobalGradNorm(lin.Params()); n != 0 {
		t.Fatalf("norm without gradients %g", n)
	}
	if _, err := (&AdamW{LR: 1}).Step(lin.Params()); err != nil {
		t.Fatal(err)
	}
	x := randTensor(1, 4, 3)
	if _, err := lin.Forward(x); err != nil {
		t.Fatal(err)
	}
	if lin.W.Grad != nil {
		t.Fatal("forward allocated gradients")
	}
	if _, err := lin.Backward(randTensor(2, 4, 2)); err != nil {
		t.Fatal(err)
	}
	if lin.W.Grad == nil || lin.W.Grad.Norm() == 0 {
		t.Fatal("backward left no gradient")
	}
}

package mlp

import (
	"context"
	"math"
	"testing"

	"github.com/selectformer/selectformer/proxy/nn"
)

func gaussian(in int, mu, sd float64) Gaussian {
	g := Gaussian{Mean: make([]float64, in), Std: make([]float64, in)}
	for j := range g.Mean {
		g.Mean[j], g.Std[j] = mu, sd
	}
	return g
}

// TestFit trains the three kinds on documented input distributions and checks
// the stated errors (mean absolute error on held-out synthesised rows; the
// constant predictor's error is the "learnt nothing" reference).
func TestFit(t *testing.T) {
	for _, c := range []struct {
		name       string
		ds         Dataset
		d          int
		maxMeanErr float64 // stated bound on the mean absolute error
		maxConstFr float64 // mean error must be ≤ this fraction of the constant predictor's
	}{
		// Attention scores N(0,1) over 128 keys: probabilities average 1/128 ≈ 0.0078.
		{"softmax-128 d16", Dataset{Kind: AttnSoftmax, Gauss: gaussian(128, 0, 1), N: 60_000, Seed: 1}, 16, 0.0060, 0.97},
		// Variances N(1, 0.3²) floored at 0.05: 1/sqrt in [0.7, 4.5].
		{"invsqrt d16", Dataset{Kind: InvSqrt, Gauss: gaussian(1, 1, 0.3), N: 60_000, Seed: 2, Eps: 1e-12, Floor: 0.05}, 16, 0.02, 0.15},
		// Ten logits N(0, 2²): entropies in [0, ln 10].
		{"entropy-10 d16", Dataset{Kind: SoftmaxEntropy, Gauss: gaussian(10, 0, 2), N: 60_000, Seed: 3}, 16, 0.25, 0.8},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, rep, err := Train(context.Background(), &c.ds, c.d, "m", TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
			if rep.SynthMeanAbs > c.maxMeanErr || rep.SynthMeanAbs > c.maxConstFr*rep.ConstMeanAbs {
				t.Errorf("mean error %.4g (constant predictor %.4g), want ≤ %g and ≤ %g× constant", rep.SynthMeanAbs, rep.ConstMeanAbs, c.maxMeanErr, c.maxConstFr)
			}
			if err := rep.Ranges.Check(FixedPointBound); err != nil {
				t.Error(err)
			}
			if m.Hidden() != c.d || m.In() != c.ds.In() {
				t.Errorf("shape %d→%d→%d", m.In(), m.Hidden(), m.Out())
			}
		})
	}
}

// TestFoldedWeights checks that Weights reproduce Forward on raw inputs.
func TestFoldedWeights(t *testing.T) {
	ds := &Dataset{Kind: SoftmaxEntropy, Gauss: Gaussian{Mean: []float64{1, -2, 0.5}, Std: []float64{0.5, 2, 3}}, N: 5000, Seed: 9}
	m, _, err := Train(context.Background(), ds, 8, "m", TrainConfig{Test: 100})
	if err != nil {
		t.Fatal(err)
	}
	w1, b1, w2, b2 := m.Weights()
	x := []float64{0.3, -4, 2}
	xt, _ := nn.FromSlice(append([]float64(nil), x...), 1, 3)
	y, err := m.Forward(xt)
	if err != nil {
		t.Fatal(err)
	}
	want := b2[0]
	for i := 0; i < 8; i++ {
		h := b1[i]
		for j := 0; j < 3; j++ {
			h += w1[i*3+j] * x[j]
		}
		want += w2[i] * max(h, 0)
	}
	if math.Abs(y.Data[0]-want) > 1e-12 {
		t.Fatalf("forward %v, weights give %v", y.Data[0], want)
	}
	if err := m.SetWeights(w1, b1, w2, b2[:0]); err == nil {
		t.Error("SetWeights accepted a short b2")
	}
}

// TestPadding: padded (−Inf) entries get output 0 and gradient 0, the other
// outputs do not depend on what stood in the padded positions, and the exact
// target is the softmax over the unpadded entries.
func TestPadding(t *testing.T) {
	rng := nn.NewRNG(1)
	m, err := New(AttnSoftmax, "sm", 4, 8, 0, rng)
	if err != nil {
		t.Fatal(err)
	}
	copy(m.Fill, []float64{-3, -3, -3, -3})
	ninf := math.Inf(-1)
	x, _ := nn.FromSlice([]float64{0.5, -1, ninf, ninf, 2, 0, 1, ninf}, 2, 4)
	y, err := m.Forward(x)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 3, 7} {
		if y.Data[i] != 0 {
			t.Errorf("padded output %d = %v", i, y.Data[i])
		}
	}
	dy := nn.New(2, 4)
	for i := range dy.Data {
		dy.Data[i] = 1
	}
	dx, err := m.Backward(dy)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 3, 7} {
		if dx.Data[i] != 0 {
			t.Errorf("padded gradient %d = %v", i, dx.Data[i])
		}
	}
	// Same as feeding the fill values explicitly (then masking).
	x2, _ := nn.FromSlice([]float64{0.5, -1, -3, -3, 2, 0, 1, -3}, 2, 4)
	y2, _ := m.Forward(x2)
	for _, i := range []int{0, 1, 4, 5, 6} {
		if y.Data[i] != y2.Data[i] {
			t.Errorf("output %d: %v with padding, %v with explicit fill", i, y.Data[i], y2.Data[i])
		}
	}
	exact := make([]float64, 8)
	if err := Exact(AttnSoftmax, x.Data, 4, 0, exact); err != nil {
		t.Fatal(err)
	}
	e := math.Exp(1.5)
	if math.Abs(exact[0]-e/(e+1)) > 1e-15 || exact[2] != 0 || math.Abs(exact[4]+exact[5]+exact[6]-1) > 1e-15 {
		t.Errorf("exact masked softmax %v", exact)
	}
}

func TestObserverAndDataset(t *testing.T) {
	o, err := NewObserver(AttnSoftmax, 3, 10, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := nn.NewRNG(2)
	rows := make([]float64, 0, 3000)
	for i := 0; i < 1000; i++ {
		third := -1e9 // padded key in a quarter of the rows
		if i%4 != 0 {
			third = 4 + rng.NormFloat64()
		}
		rows = append(rows, 1+2*rng.NormFloat64(), -1+0.5*rng.NormFloat64(), third)
	}
	if err := o.Observe(rows); err != nil {
		t.Fatal(err)
	}
	g, err := o.Gaussian(false)
	if err != nil {
		t.Fatal(err)
	}
	for j, want := range [][2]float64{{1, 2}, {-1, 0.5}, {4, 1}} {
		if math.Abs(g.Mean[j]-want[0]) > 0.2 || math.Abs(g.Std[j]-want[1]) > 0.15 {
			t.Errorf("feature %d: N(%.3f, %.3f²), want N(%g, %g²)", j, g.Mean[j], g.Std[j], want[0], want[1])
		}
	}
	if o.Rows() != 1000 || o.PaddedRows() != 250 || len(o.Sample()) != 30 {
		t.Errorf("rows %d, padded %d, sample %d", o.Rows(), o.PaddedRows(), len(o.Sample()))
	}
	ds, err := NewDataset(o, 5000, false, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic regardless of how rows are read.
	a, ay := make([]float64, 3*2000), make([]float64, 3*2000)
	b, by := make([]float64, 3*2000), make([]float64, 3*2000)
	if err := ds.Rows(ds.Seed, 1000, 2000, a, ay); err != nil {
		t.Fatal(err)
	}
	if err := ds.Rows(ds.Seed, 1000, 700, b[:2100], by[:2100]); err != nil {
		t.Fatal(err)
	}
	if err := ds.Rows(ds.Seed, 1700, 1300, b[2100:], by[2100:]); err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsInf(a[i], -1) && math.IsInf(b[i], -1)) {
			t.Fatalf("row value %d differs: %v vs %v", i, a[i], b[i])
		}
	}
	if err := o.Observe([]float64{1, 2}); err == nil {
		t.Error("Observe accepted a partial row")
	}
	if _, err := NewObserver(InvSqrt, 2, 1, 1); err == nil {
		t.Error("NewObserver accepted an InvSqrt of width 2")
	}
}

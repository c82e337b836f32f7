package mlp

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/nn"
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
	if err := m.setWeights(w1, b1, w2, b2[:0]); err == nil {
		t.Error("setWeights accepted a short b2")
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
	if o.Rows() != 1000 || o.paddedRows() != 250 || len(o.Sample()) != 30 {
		t.Errorf("rows %d, padded %d, sample %d", o.Rows(), o.paddedRows(), len(o.Sample()))
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

// bimodalVariances returns LayerNorm variances from two clusters, around 0.01
// and around 1 (blank and inked image patches): the Gaussian fit N(0.5, 0.5²)
// rarely draws near 0.01, where 1/√v is steepest.
func bimodalVariances(n int, seed uint64) []float64 {
	rng := nn.NewRNG(seed)
	x := make([]float64, n)
	for i := range x {
		c := 0.01
		if i%2 == 1 {
			c = 1
		}
		x[i] = c * (1 + 0.1*rng.NormFloat64())
	}
	return x
}

// TestRealFrac checks the validation of Dataset.RealFrac, that RealFrac = 1
// draws every row from the observed ones, and that mixing observed rows in
// lowers the error on real inputs where the Gaussian fit misrepresents them.
func TestRealFrac(t *testing.T) {
	const w = 1
	o, err := NewObserver(InvSqrt, w, 1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Observe(bimodalVariances(4000, 2)); err != nil {
		t.Fatal(err)
	}
	base, err := NewDataset(o, 30_000, false, 1e-12, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(d *Dataset)
		ok   bool
	}{
		{"zero", func(d *Dataset) {}, true},
		{"half", func(d *Dataset) { d.RealFrac = 0.5 }, true},
		{"negative", func(d *Dataset) { d.RealFrac = -0.1 }, false},
		{"above one", func(d *Dataset) { d.RealFrac = 1.5 }, false},
		{"NaN", func(d *Dataset) { d.RealFrac = math.NaN() }, false},
		{"no real rows", func(d *Dataset) { d.RealFrac, d.Real = 0.5, nil }, false},
		{"NaN in a real row", func(d *Dataset) { d.RealFrac, d.Real = 0.5, []float64{0.3, math.NaN()} }, false},
		{"padding in an invsqrt row", func(d *Dataset) { d.RealFrac, d.Real = 0.5, []float64{0.3, math.Inf(-1)} }, false},
		{"negative variance", func(d *Dataset) { d.RealFrac, d.Real = 0.5, []float64{0.3, -0.1} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := *base
			c.edit(&d)
			if err := d.Validate(); (err == nil) != c.ok {
				t.Errorf("Validate: %v, want ok %v", err, c.ok)
			}
		})
	}

	all := *base
	all.RealFrac = 1
	x, y := make([]float64, 500*w), make([]float64, 500*w)
	if err := all.Rows(all.Seed, 700, 500, x, y); err != nil {
		t.Fatal(err)
	}
	real := map[[w]float64]bool{}
	for r := 0; r < len(all.Real)/w; r++ {
		real[[w]float64(all.Real[r*w:(r+1)*w])] = true
	}
	for r := 0; r < 500; r++ {
		if !real[[w]float64(x[r*w:(r+1)*w])] {
			t.Fatalf("RealFrac 1: row %d %v is not an observed row", r, x[r*w:(r+1)*w])
		}
	}

	errOn := func(frac float64) float64 {
		d := *base
		d.RealFrac = frac
		_, rep, err := Train(context.Background(), &d, 16, "m", TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2, Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("real fraction %.1f: %v", frac, rep)
		if err := rep.Ranges.Check(FixedPointBound); err != nil {
			t.Error(err)
		}
		return rep.RealMeanAbs
	}
	gauss, mixed := errOn(0), errOn(0.5)
	if !(mixed < 0.5*gauss) {
		t.Errorf("mean error on observed rows: %.4g with half the rows observed, %.4g with none; want under half", mixed, gauss)
	}
}

// TestCentre checks that a centred softmax MLP is invariant to a common shift
// of its row (the centring is folded into W1), keeps the MLP's form (Forward
// equals the exported weights), refuses other kinds, and emulates attention
// rows with a large per-query shift far better than a fit of the raw rows.
func TestCentre(t *testing.T) {
	const w = 8
	rng := nn.NewRNG(5)
	rows := make([]float64, 4000*w)
	for r := 0; r < 4000; r++ {
		shift := 5 * rng.NormFloat64() // q·mean(k): the same for every key of the row
		for j := 0; j < w; j++ {
			rows[r*w+j] = shift + float64(j%3) + rng.NormFloat64()
		}
	}
	o, err := NewObserver(AttnSoftmax, w, 2048, 6)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Observe(rows); err != nil {
		t.Fatal(err)
	}
	train := func(centre bool) (*MLP, Report) {
		t.Helper()
		d, err := NewDataset(o, 30_000, false, 0, 7)
		if err != nil {
			t.Fatal(err)
		}
		if centre {
			if d.Gauss, err = o.CentredGaussian(); err != nil {
				t.Fatal(err)
			}
			d.Centre = true
		}
		m, rep, err := Train(context.Background(), d, 16, "m", TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2, Seed: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("centre %v: %v", centre, rep)
		if err := rep.Ranges.Check(FixedPointBound); err != nil {
			t.Error(err)
		}
		return m, rep
	}
	_, rawRep := train(false)
	m, rep := train(true)
	if !(rep.RealMeanAbs < 0.5*rawRep.RealMeanAbs) {
		t.Errorf("mean error on observed rows: centred %.4g, raw %.4g; want under half", rep.RealMeanAbs, rawRep.RealMeanAbs)
	}
	w1, b1, w2, b2 := m.Weights()
	for i := 0; i < 16; i++ {
		s := 0.0
		for j := 0; j < w; j++ {
			s += w1[i*w+j]
		}
		if math.Abs(s) > 1e-9 {
			t.Errorf("row %d of W1 sums to %g, want 0 (centring folded in)", i, s)
		}
	}
	// Forward is the exported weights on the row with its fill values (the
	// padded output 0), and ignores a common shift of an unpadded row.
	x := []float64{0.3, -1, 2, 0.5, 1, math.Inf(-1), -0.5, 0}
	xt, _ := nn.FromSlice(slices.Clone(x), 1, w)
	y, err := m.Forward(xt)
	if err != nil {
		t.Fatal(err)
	}
	for o := 0; o < w; o++ {
		want := b2[o]
		for i := 0; i < 16; i++ {
			h := b1[i]
			for j, v := range x {
				if math.IsInf(v, -1) {
					v = m.Fill[j]
				}
				h += w1[i*w+j] * v
			}
			want += w2[o*16+i] * max(h, 0)
		}
		if math.IsInf(x[o], -1) {
			want = 0
		}
		if math.Abs(y.Data[o]-want) > 1e-9 {
			t.Errorf("output %d: Forward %v, exported weights %v", o, y.Data[o], want)
		}
	}
	full := []float64{0.3, -1, 2, 0.5, 1, 0.2, -0.5, 0}
	shifted := slices.Clone(full)
	for j := range shifted {
		shifted[j] += 7
	}
	fa, _ := nn.FromSlice(full, 1, w)
	fb, _ := nn.FromSlice(shifted, 1, w)
	ra, err := m.Forward(fa)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := m.Forward(fb)
	if err != nil {
		t.Fatal(err)
	}
	for j := range ra.Data {
		if math.Abs(ra.Data[j]-rb.Data[j]) > 1e-9 {
			t.Errorf("output %d moves with a common shift of the row: %v vs %v", j, ra.Data[j], rb.Data[j])
		}
	}
	bad := Dataset{Kind: InvSqrt, Gauss: gaussian(1, 1, 0.1), N: 10, Floor: 0.5, Centre: true}
	if err := bad.Validate(); err == nil {
		t.Error("Validate accepted a centred InvSqrt data set")
	}
}

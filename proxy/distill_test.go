package proxy

import (
	"context"
	"math"
	"testing"

	"github.com/selectformer/selectformer/proxy/nn"
)

func TestWeightedCrossEntropy(t *testing.T) {
	logits := nn.New(3, 4)
	copy(logits.Data, []float64{0.3, -1, 2, 0.5, 1, 1, -0.5, 0, -2, 0.7, 0.1, 1.5})
	y := []int{2, 0, 3}
	for _, c := range []struct {
		name string
		w    []float64
	}{
		{"unweighted", nil},
		{"weighted", []float64{0.5, 1, 2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			loss, dl, err := weightedCrossEntropy(logits.Clone(), y, c.w)
			if err != nil {
				t.Fatal(err)
			}
			// Finite differences of the loss.
			const h = 1e-6
			for i := range logits.Data {
				up, down := logits.Clone(), logits.Clone()
				up.Data[i] += h
				down.Data[i] -= h
				lu, _, _ := weightedCrossEntropy(up, y, c.w)
				ld, _, _ := weightedCrossEntropy(down, y, c.w)
				if num := (lu - ld) / (2 * h); math.Abs(num-dl.Data[i]) > 1e-6 {
					t.Errorf("gradient %d: %g, finite difference %g", i, dl.Data[i], num)
				}
			}
			if c.w == nil {
				ref, _, _ := nn.CrossEntropy(logits.Clone(), y)
				if math.Abs(ref-loss) > 1e-12 {
					t.Errorf("loss %g, nn.CrossEntropy %g", loss, ref)
				}
			}
		})
	}
}

func TestDistillValidateAndWeights(t *testing.T) {
	f := getFixture(t)
	for _, c := range []struct {
		name string
		d    *Distill
		ok   bool
	}{
		{"nil", nil, true},
		{"plain", &Distill{Weight: 0.8, Calibrate: 10}, true},
		{"weight above 1", &Distill{Weight: 1.5}, false},
		{"NaN temperature", &Distill{Weight: 0.5, Temperature: math.NaN()}, false},
		{"negative calibration", &Distill{Weight: 0.5, Calibrate: -1}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.d.validate(f.target); (err == nil) != c.ok {
				t.Errorf("validate = %v, want ok %v", err, c.ok)
			}
		})
	}
	w := (&Distill{BalanceClasses: true}).classWeights([]int{0, 0, 0, 1}, 3)
	// 4 labels over 2 present classes: class 0 → 4/(2·3), class 1 → 4/(2·1), absent → 1.
	if want := []float64{4.0 / 6, 2, 1}; math.Abs(w[0]-want[0]) > 1e-12 || w[1] != want[1] || w[2] != want[2] {
		t.Errorf("class weights %v, want %v", w, want)
	}
	if (&Distill{}).classWeights([]int{0, 1}, 2) != nil {
		t.Error("class weights without BalanceClasses")
	}
}

// TestDistillCalibration generates a proxy with distillation, then checks that
// the entropy MLP's calibration pass makes the MLP rank held-out digits like
// the exact entropy of the proxy's own logits (which it emulates) better than
// after in-vivo tuning alone.
func TestDistillCalibration(t *testing.T) {
	f := getFixture(t)
	cfg := testConfig(Shape{Layers: 2, Heads: 4, Hidden: 8})
	cfg.Points = 20_000
	cfg.Distill = &Distill{Weight: 0.8, BalanceClasses: true}
	res, err := Generate(context.Background(), f.target, f.boot, f.bootLabels, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Proxies[0]
	fidelity := func() float64 {
		t.Helper()
		lg, h, err := p.Forward(f.held)
		if err != nil {
			t.Fatal(err)
		}
		rho, err := Spearman(h, nn.Entropy(lg))
		if err != nil {
			t.Fatal(err)
		}
		return rho
	}
	before := fidelity()
	ts, err := newTeacherSet(res.Backbone, f.boot, f.bootLabels, cfg.Distill)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Distill.Calibrate = 100
	if err := p.calibrateEntropy(context.Background(), ts, cfg, "calibration", quiet()); err != nil {
		t.Fatal(err)
	}
	after := fidelity()
	t.Logf("Spearman of the entropy MLP with the exact entropy of the proxy's logits: %.3f before calibration, %.3f after", before, after)
	if !(after > before) || after < 0.8 {
		t.Errorf("calibration: Spearman %.3f → %.3f, want an increase to ≥ 0.8", before, after)
	}
}

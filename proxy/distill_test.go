package proxy

import (
	"context"
	"math"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
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
		{"√H without calibration", &Distill{Weight: 0.5, SqrtEntropy: true}, false},
		{"√H with calibration", &Distill{Weight: 0.5, SqrtEntropy: true, Calibrate: 10}, true},
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
	cfg := testConfig(Shape{Layers: 2, Heads: 4, MLPHidden: 8})
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
	ts, err := newTeacherSet(res.Backbone, f.boot, f.bootLabels, cfg.Distill, cfg.Seed)
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
	if p.SqrtEntropy {
		t.Fatal("SqrtEntropy set by a calibration to H")
	}

	// Calibrated to √H, the MLP's scores follow √H, not H, and the flag
	// survives Save and Load. On this fixture (400 calibration rows, no
	// mixed inputs) √H ranks worse than H (0.81 against 0.92); on the MNIST
	// bench it ranks better (bench/QUALITY.md), hence the low bar here.
	cfg.Distill.SqrtEntropy = true
	if err := p.calibrateEntropy(context.Background(), ts, cfg, "calibration", quiet()); err != nil {
		t.Fatal(err)
	}
	sqrtRho := fidelity()
	lg, h, err := p.Forward(f.held)
	if err != nil {
		t.Fatal(err)
	}
	errSqrt, errH := 0.0, 0.0
	for i, e := range nn.Entropy(lg) {
		errSqrt += math.Abs(h[i]-math.Sqrt(e)) / float64(len(h))
		errH += math.Abs(h[i]-e) / float64(len(h))
	}
	t.Logf("√H calibration: Spearman %.3f, mean abs error %.4f against √H, %.4f against H", sqrtRho, errSqrt, errH)
	if !p.SqrtEntropy || sqrtRho < 0.7 || !(errSqrt < errH/4) {
		t.Errorf("√H calibration: flag %v, Spearman %.3f (want ≥ 0.7), error %.4f against √H and %.4f against H", p.SqrtEntropy, sqrtRho, errSqrt, errH)
	}
	if q := saveLoad(t, p, nil); !q.SqrtEntropy {
		t.Error("SqrtEntropy lost by Save and Load")
	}
}

// TestMixInputs checks both kinds of mixing and the refusals.
func TestMixInputs(t *testing.T) {
	img := model.Input{Pixels: [][]float64{{0, 0, 0}, {1, 1, 1}, {4, 4, 4}}}
	txt := model.Input{IDs: [][]int{{100, 1, 1, 1, 1}, {200, 2, 2, 2, 0}, {300, 3, 3, 0, 0}},
		Mask: [][]int{{1, 1, 1, 1, 1}, {1, 1, 1, 1, 0}, {1, 1, 1, 0, 0}}}
	for _, c := range []struct {
		name string
		in   model.Input
		n    int
		ok   bool
	}{
		{"images", img, 50, true},
		{"texts", txt, 50, true},
		{"none", img, 0, true},
		{"one sample", model.Input{Pixels: [][]float64{{1}}}, 3, false},
		{"negative count", img, -1, false},
		{"ragged texts", model.Input{IDs: [][]int{{1, 2}, {1, 2, 3}}}, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := MixInputs(c.in, c.n, 9)
			if (err == nil) != c.ok {
				t.Fatalf("error %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if out.Len() != c.n {
				t.Fatalf("%d mixes, want %d", out.Len(), c.n)
			}
			for i := 0; i < c.n; i++ {
				if out.Pixels != nil {
					// A convex combination of two constant images is constant,
					// within the originals' range, and not always an original.
					px := out.Pixels[i]
					for _, v := range px {
						if v != px[0] || v < 0 || v > 4 {
							t.Fatalf("mix %d: %v is not a mix of constant images in [0, 4]", i, px)
						}
					}
					continue
				}
				// Text: sample a with one contiguous span of positions ≥ 1
				// (token and mask alike) from one other sample b.
				ids, mask := out.IDs[i], out.Mask[i]
				a := ids[0]/100 - 1
				if a < 0 || a > 2 || mask[0] != 1 {
					t.Fatalf("mix %d: first token %d", i, ids[0])
				}
				var diff []int
				for j := range ids {
					if ids[j] != txt.IDs[a][j] || mask[j] != txt.Mask[a][j] {
						diff = append(diff, j)
					}
				}
				if len(diff) > 0 && diff[len(diff)-1]-diff[0]+1 != len(diff) {
					t.Fatalf("mix %d: %v differs from sample %d at %v, not one span", i, ids, a, diff)
				}
				from := false
				for b := range txt.IDs {
					ok := b != a
					for _, j := range diff {
						ok = ok && ids[j] == txt.IDs[b][j] && mask[j] == txt.Mask[b][j]
					}
					from = from || ok
				}
				if !from {
					t.Fatalf("mix %d: span %v of %v from no other sample", i, diff, ids)
				}
			}
			mixed := false
			for i := 0; i < c.n && out.Pixels != nil; i++ {
				v := out.Pixels[i][0]
				mixed = mixed || (v != 0 && v != 1 && v != 4)
			}
			if out.Pixels != nil && c.n > 0 && !mixed {
				t.Error("no image was mixed")
			}
		})
	}
}

// TestObservedMLPTraining generates the same proxy with the ex vivo MLPs
// trained on Gaussian-synthesised points only (the paper) and with
// Config.RealMix and Config.CentreSoftmax, and checks that the latter's
// attention softmax and LayerNorm MLPs emulate their modules better on the
// observed inputs (the reports' real-row errors) and that the proxy ranks
// held-out digits like its teacher (M_g) at least as well.
func TestObservedMLPTraining(t *testing.T) {
	f := getFixture(t)
	gen := func(mix float64, centre bool) (*Result, float64) {
		t.Helper()
		cfg := testConfig(Shape{Layers: 2, Heads: 4, MLPHidden: 16})
		cfg.Distill = &Distill{Weight: 0.8, BalanceClasses: true, Calibrate: 50}
		cfg.RealMix, cfg.CentreSoftmax, cfg.Reservoir = mix, centre, 8192
		res, err := Generate(context.Background(), f.target, f.boot, f.bootLabels, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for name, r := range res.Reports {
			if err := r.Ranges.Check(mlp.FixedPointBound); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		h, err := res.Proxies[0].Entropies(f.held, 256)
		if err != nil {
			t.Fatal(err)
		}
		lg, err := model.Predict(res.Backbone, f.held, 256)
		if err != nil {
			t.Fatal(err)
		}
		rho, err := Spearman(h, nn.Entropy(lg))
		if err != nil {
			t.Fatal(err)
		}
		return res, rho
	}
	paper, rhoPaper := gen(0, false)
	ours, rhoOurs := gen(0.5, true)
	t.Logf("Spearman with the teacher on held-out digits: %.3f synthesised only, %.3f with observed rows and centring", rhoPaper, rhoOurs)
	for _, c := range []struct {
		name   string
		factor float64 // the error with observed rows must be below factor × the error without
	}{
		{"proxy.layer.0.attn_softmax.d16", 0.8},
		{"proxy.layer.1.attn_softmax.d16", 0.8},
		{"proxy.layer.0.attn_layernorm.d16", 0.8}, // blank patches: a cluster of tiny variances
		{"proxy.layer.1.attn_layernorm.d16", 1},
	} {
		a, b := paper.Reports[c.name], ours.Reports[c.name]
		t.Logf("%s: real-row mean error %.4g → %.4g", c.name, a.RealMeanAbs, b.RealMeanAbs)
		if !(b.RealMeanAbs < c.factor*a.RealMeanAbs) {
			t.Errorf("%s: mean error on observed inputs %.4g with them in training, %.4g without; want below %g×", c.name, b.RealMeanAbs, a.RealMeanAbs, c.factor)
		}
	}
	if !(rhoOurs > rhoPaper-0.02) || rhoOurs < 0.5 {
		t.Errorf("Spearman with the teacher %.3f (synthesised only %.3f); want ≥ 0.5 and no lower", rhoOurs, rhoPaper)
	}
}

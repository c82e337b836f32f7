package he

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestParamsSecurity: NewScheme (and Validate) refuse parameters below
// 128-bit security by the HE standard's table for their N (a ternary
// secret), an error narrower than the standard's σ or truncated below 6σ,
// and a flood too short for 2^−40 over 2^39 output coefficients (none at
// all included). Each refused set but the first is otherwise usable:
// newScheme, the exactness and size checks alone, accepts it, as
// NewScheme did before it checked security.
func TestParamsSecurity(t *testing.T) {
	old216 := []uint64{0x3fffffffef8001, 0x3fffffffeb8001, 0x3fffffffe7c001, 0x3fffffffe64001}
	cases := []struct {
		name   string
		change func(*Params)
		want   string // in the error; "" = accepted
		usable bool   // newScheme accepts it
	}{
		{"LogN 9, below the table", func(p *Params) { p.LogN = 9 }, "LogN 9", false},
		{"LogN 12 with a 216-bit Q", func(p *Params) { p.LogN, p.Q, p.FloodBits = 12, old216, 77 }, "HE standard", true},
		{"LogN 12 with a 218-bit Q", func(p *Params) { p.LogN, p.FloodBits = 12, 78 }, "HE standard", true},
		{"LogN 13 with a 272-bit Q", func(p *Params) { p.Q = append(p.Q, 0x3fffffffe7c001) }, "HE standard", true},
		{"σ = 0.01", func(p *Params) { p.Sigma = 0.01 }, "σ", true},
		{"σ = 3.0, truncated at 6σ", func(p *Params) { p.Sigma, p.ErrBound = 3, 18 }, "σ", true},
		{"errors truncated at 2σ", func(p *Params) { p.ErrBound = 6.4 }, "σ", true},
		{"errors beyond the sampler's table (|e| ≤ 31)", func(p *Params) { p.Sigma, p.ErrBound = 6, 36 }, "ErrBound", false},
		{"errors truncated at 31.4: the table's largest", func(p *Params) { p.ErrBound = 31.4 }, "", true},
		{"FloodBits 0 (no flood)", func(p *Params) { p.FloodBits = 0 }, "no flood", true},
		{"FloodBits 77", func(p *Params) { p.FloodBits = 77 }, "statistical distance", true},
		{"defaults", func(*Params) {}, "", true},
		{"FloodBits 78, the smallest", func(p *Params) { p.FloodBits = 78 }, "", true},
		{"σ = 8/√(2π), truncated at 6σ", func(p *Params) { p.Sigma, p.ErrBound = minSigma, 6*minSigma }, "", true},
		{"MaxInner 16", func(p *Params) { p.MaxInner = 16 }, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := DefaultParams()
			c.change(&p)
			if _, err := newScheme(p); (err == nil) != c.usable {
				t.Fatalf("newScheme: %v, want usable = %v", err, c.usable)
			}
			_, err := NewScheme(p)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewScheme: %v, want a refusal naming %q", err, c.want)
			}
			if p.Validate() == nil {
				t.Error("Validate accepts it")
			}
			t.Log(err)
		})
	}
}

// TestStatisticalDistance pins the statistical bound of the package
// documentation ("Security"): with DefaultParams each output coefficient
// P0 decrypts is within 2^−80.10 of its simulation, 2^−41.10 over the
// 2^39 coefficients the bound is stated for, and 2^−42.11 over the largest
// workload's selection (2.721·10^11 coefficients); each flood bit halves
// it, and without a flood it is 1.
func TestStatisticalDistance(t *testing.T) {
	s := defaultScheme
	near := func(got, want float64) bool { return math.Abs(got-want) < 0.005 }
	if d := s.DistanceLog(1); !near(d, -80.10) {
		t.Errorf("per coefficient 2^%.3f, want 2^−80.10", d)
	}
	if d := s.DistanceLog(1 << LogSelectionOutputs); d > -StatisticalSecurity || !near(d, -41.10) {
		t.Errorf("over 2^%d coefficients 2^%.3f, want 2^−41.10 ≤ 2^−%d", LogSelectionOutputs, d, StatisticalSecurity)
	}
	if d := s.DistanceLog(272_100_000_000); !near(d, -42.11) {
		t.Errorf("over the exact DistilBERT's selection 2^%.3f, want 2^−42.11", d)
	}
	if s.DistanceLog(0) != s.DistanceLog(1) {
		t.Errorf("DistanceLog(0) = %v, want the per-coefficient bound", s.DistanceLog(0))
	}
	for _, lambda := range []int{0, 78} {
		p := DefaultParams()
		p.FloodBits = lambda
		sl, err := newScheme(p)
		if err != nil {
			t.Fatal(err)
		}
		want := s.DistanceLog(1) + 1
		if lambda == 0 {
			want = 0
		}
		if d := sl.DistanceLog(1); !near(d, want) {
			t.Errorf("λ = %d: 2^%.3f per coefficient, want 2^%.3f", lambda, d, want)
		}
	}
	// Whatever MaxInner·MaxRows, λ bounds the distance per coefficient by
	// 2^−(λ+1): the flood follows the mean noise.
	if d := smallInner.DistanceLog(1); d > -float64(smallInner.p.FloodBits+1) {
		t.Errorf("MaxInner 16: 2^%.3f per coefficient, above 2^−(λ+1)", d)
	}
}

// TestErrSecondMoment: errSecondMoment models the scheme's Gaussian
// sampler (addGaussian): E[e²] of 2^19 samples, at the defaults (σ = 3.2
// truncated at 6σ: the discrete Gaussian's ≈ σ² = 10.24) and truncated at
// 2σ (where the truncation matters), is within four standard errors of
// it, and the samples are symmetric.
func TestErrSecondMoment(t *testing.T) {
	if m := errSecondMoment(3.2, 19.2); math.Abs(m-3.2*3.2) > 1e-4 {
		t.Errorf("E[e²] = %.6f at σ = 3.2, 6σ; want ≈ σ² = %.6f", m, 3.2*3.2)
	}
	for i, bound := range []float64{19.2, 6.4} {
		s := defaultScheme
		g := newGaussian(3.2, uint64(math.Floor(bound+0.5)))
		q := s.p.Q[0]
		var sum, sum2, sum4 float64
		n := 0
		e := s.rq.NewPoly()
		for k := range 64 {
			g.add(prngFor(make([]byte, 16), 9, uint64(64*i+k)), e, s.p.Q, true)
			for _, v := range e.Coeffs[0] {
				x := float64(v)
				if v > q/2 {
					x = -float64(q - v)
				}
				sum += x
				sum2 += x * x
				sum4 += x * x * x * x
				n++
			}
		}
		m2, m4 := sum2/float64(n), sum4/float64(n)
		se := math.Sqrt((m4 - m2*m2) / float64(n))
		want := errSecondMoment(3.2, bound)
		if math.Abs(m2-want) > 4*se {
			t.Errorf("bound %v: sampled E[e²] = %.4f, model %.4f (standard error %.4f)", bound, m2, want, se)
		}
		if mean := sum / float64(n); math.Abs(mean) > 4*math.Sqrt(m2/float64(n)) {
			t.Errorf("bound %v: mean error %.4f, not symmetric", bound, mean)
		}
		t.Logf("bound %v: sampled E[e²] = %.4f, model %.4f ± %.4f", bound, m2, want, se)
	}
}

// TestMeanNoise: meanNoise bounds the noise P0 can compute, and is the
// right model of it: for products with uniform A and no flood, the mean
// |ν| over the output coefficients is below the bound for their K = k·MW
// terms and above 0.6 of it (a sum of many terms is near-Gaussian, whose
// mean size is 0.80 of its standard deviation; factors lifted to
// [0, 2^64) instead of [−2^63, 2^63) would give twice the bound).
func TestMeanNoise(t *testing.T) {
	p := DefaultParams()
	p.FloodBits = 0
	s, err := newScheme(p)
	if err != nil {
		t.Fatal(err)
	}
	const terms = 16 * 8 // noiseView's MW·k
	bound := s.meanNoise(terms)
	var sum float64
	n := 0
	for seed := range uint64(2) {
		A := fill(rand.New(rand.NewPCG(seed, 5)), terms, "random")
		pre, _ := noiseView(t, s, A, 10+seed)
		for _, v := range pre {
			sum += math.Abs(v)
			n++
		}
	}
	mean := sum / float64(n)
	if r := mean / bound; r > 1 || r < 0.6 {
		t.Errorf("mean |ν| = 2^%.3f is %.3f of the bound 2^%.3f, want 0.6..1", math.Log2(mean), r, math.Log2(bound))
	} else {
		t.Logf("mean |ν| = 2^%.3f, %.3f of the bound 2^%.3f", math.Log2(mean), r, math.Log2(bound))
	}
}

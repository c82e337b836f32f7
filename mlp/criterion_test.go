package mlp

import (
	"math"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn"
)

// TestRegisterCriterionRefusals checks that an incomplete, duplicate or
// inconsistent criterion is refused, and that a refused one stays unknown.
func TestRegisterCriterionRefusals(t *testing.T) {
	score := func([]float64) float64 { return 0.5 }
	unit := func(int) (float64, float64) { return 0, 1 }
	for _, c := range []struct {
		name string
		c    Criterion
		want string
	}{
		{"no name", Criterion{Score: score, Range: unit}, "name"},
		{"space in the name", Criterion{Name: "a b", Score: score, Range: unit}, "space"},
		{"no score", Criterion{Name: "t-noscore", Range: unit}, "no Score"},
		{"no range", Criterion{Name: "t-norange", Score: score}, "no Range"},
		{"duplicate", Criterion{Name: DefaultCriterion, Score: score, Range: unit}, "twice"},
		{"score outside its range", Criterion{Name: "t-outside", Score: func([]float64) float64 { return 2 }, Range: unit}, "outside its range"},
		{"NaN score", Criterion{Name: "t-nan", Score: func([]float64) float64 { return math.NaN() }, Range: unit}, "outside its range"},
		{"√ of negative scores", Criterion{Name: "t-neg", Score: score, Range: func(int) (float64, float64) { return -1, 1 }, Sqrt: true}, "√"},
		{"range beyond the fixed-point bound", Criterion{Name: "t-huge", Score: score, Range: func(int) (float64, float64) { return 0, FixedPointBound }}, "range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := RegisterCriterion(c.c)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if c.c.Name != DefaultCriterion && c.c.Name != "" {
				if _, err := LookupCriterion(c.c.Name); err == nil {
					t.Errorf("refused criterion %q is registered", c.c.Name)
				}
			}
		})
	}
	if _, err := LookupCriterion("no-such"); err == nil || !strings.Contains(err.Error(), "unknown selection criterion") {
		t.Errorf("unknown criterion: %v", err)
	}
}

// TestEntropyCriterion checks that the default criterion is the entropy, the
// exact output of the final MLP's kind, with both of its forms.
func TestEntropyCriterion(t *testing.T) {
	c, err := LookupCriterion("")
	if err != nil || c.Name != DefaultCriterion || !c.Sqrt {
		t.Fatalf("default criterion %+v, %v", c, err)
	}
	x := nn.New(3, 4)
	copy(x.Data, []float64{0, 0, 0, 0, 5, -1, 0, 2, 1, 2, 3, 4})
	y := make([]float64, 3)
	if err := Exact(SoftmaxEntropy, x.Data, 4, 0, y); err != nil {
		t.Fatal(err)
	}
	rows := c.ScoreRows(x)
	for i := range y {
		lo, hi := c.Range(4)
		if math.Abs(y[i]-rows[i]) > 1e-12 || y[i] < lo || y[i] > hi+1e-12 {
			t.Errorf("row %d: Exact %v, ScoreRows %v, range [%v, %v]", i, y[i], rows[i], lo, hi)
		}
	}
	if math.Abs(y[0]-math.Log(4)) > 1e-12 {
		t.Errorf("entropy of uniform logits %v, want ln 4", y[0])
	}
}

// TestDatasetCriterion checks that a data set's criterion sets the final
// MLP's exact outputs, and that it applies to that kind only.
func TestDatasetCriterion(t *testing.T) {
	const name = "t-maxlogit-sigmoid"
	if _, err := LookupCriterion(name); err != nil { // registered once per test binary (-count)
		if err := RegisterCriterion(Criterion{Name: name, Score: func(x []float64) float64 { return 1 / (1 + math.Exp(-x[0])) }, Range: func(int) (float64, float64) { return 0, 1 }}); err != nil {
			t.Fatal(err)
		}
	}
	d := &Dataset{Kind: SoftmaxEntropy, Gauss: Gaussian{Mean: []float64{0, 0}, Std: []float64{1, 1}}, N: 8, Seed: 1, Criterion: name}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	x, y := make([]float64, 8*2), make([]float64, 8)
	if err := d.Rows(d.Seed, 0, 8, x, y); err != nil {
		t.Fatal(err)
	}
	for r := range y {
		if w := 1 / (1 + math.Exp(-x[2*r])); y[r] != w {
			t.Fatalf("row %d: exact output %v, want the criterion's %v", r, y[r], w)
		}
	}
	d.Criterion = "no-such"
	if err := d.Validate(); err == nil {
		t.Error("a data set with an unknown criterion validates")
	}
	d = &Dataset{Kind: InvSqrt, Gauss: Gaussian{Mean: []float64{1}, Std: []float64{0.1}}, N: 8, Floor: 0.5, Criterion: name}
	if err := d.Validate(); err == nil {
		t.Error("an InvSqrt data set with a criterion validates")
	}
}

package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestNormals checks the synthetic embeddings' generator: the quantile
// table is symmetric and increasing, a million draws have mean ≈ 0,
// variance ≈ 1 and the normal's share beyond one and two standard
// deviations, and the values are a function of the seed.
func TestNormals(t *testing.T) {
	q := normQuantiles
	for i := range q {
		if i > 0 && q[i] <= q[i-1] {
			t.Fatalf("quantile %d (%g) not above quantile %d (%g)", i, q[i], i-1, q[i-1])
		}
		if d := q[i] + q[len(q)-1-i]; math.Abs(d) > 1e-12 {
			t.Fatalf("quantiles %d and %d not symmetric: sum %g", i, len(q)-1-i, d)
		}
	}
	xs := make([]float64, 1_000_003) // not a multiple of five draws per word
	normals(xs, rand.New(rand.NewPCG(1, 77)))
	var sum, sq float64
	var out1, out2 int
	for _, x := range xs {
		sum += x
		sq += x * x
		if math.Abs(x) > 1 {
			out1++
		}
		if math.Abs(x) > 2 {
			out2++
		}
	}
	n := float64(len(xs))
	mean, vari := sum/n, sq/n-(sum/n)*(sum/n)
	if math.Abs(mean) > 0.005 || math.Abs(vari-1) > 0.01 {
		t.Fatalf("mean %g, variance %g; want 0, 1", mean, vari)
	}
	if p1, p2 := float64(out1)/n, float64(out2)/n; math.Abs(p1-0.3173) > 0.003 || math.Abs(p2-0.0455) > 0.0015 {
		t.Fatalf("P(|x|>1) = %g, P(|x|>2) = %g; want 0.3173, 0.0455", p1, p2)
	}
	again := make([]float64, len(xs))
	normals(again, rand.New(rand.NewPCG(1, 77)))
	if !slices.Equal(xs, again) {
		t.Fatal("the same seed gave different values")
	}
	normals(again, rand.New(rand.NewPCG(2, 77)))
	if slices.Equal(xs[:100], again[:100]) {
		t.Fatal("different seeds gave the same values")
	}
}

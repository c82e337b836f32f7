package proxy

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Ranks returns the fractional ranks (1-based) of x: tied values share the mean
// of the ranks they span.
func Ranks(x []float64) []float64 {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	r := make([]float64, len(x))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && x[idx[j+1]] == x[idx[i]] {
			j++
		}
		avg := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = avg
		}
		i = j + 1
	}
	return r
}

// Spearman returns the Spearman rank correlation of x and y: the Pearson
// correlation (gonum's stat.Correlation) of their fractional ranks, which handles
// ties. gonum has no Spearman of its own.
func Spearman(x, y []float64) (float64, error) {
	if len(x) != len(y) || len(x) < 2 {
		return 0, fmt.Errorf("spearman: %d and %d values (need equal lengths ≥ 2)", len(x), len(y))
	}
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) {
			return 0, fmt.Errorf("spearman: NaN at %d", i)
		}
	}
	rho := stat.Correlation(Ranks(x), Ranks(y), nil)
	if math.IsNaN(rho) {
		return 0, fmt.Errorf("spearman: a constant sequence has no rank correlation")
	}
	return rho, nil
}

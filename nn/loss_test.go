package nn

import (
	"math"
	"testing"
)

// TestLogSumExp checks LogSumExp against the plain log Σ exp where that does
// not overflow, its stability where it would (large logits, shifted rows
// give shifted results), and the empty row.
func TestLogSumExp(t *testing.T) {
	naive := func(row []float64) float64 {
		s := 0.0
		for _, v := range row {
			s += math.Exp(v)
		}
		return math.Log(s)
	}
	for _, c := range []struct {
		name string
		row  []float64
		want float64
	}{
		{"one", []float64{2.5}, 2.5},
		{"two equal", []float64{0, 0}, math.Ln2},
		{"mixed", []float64{-1, 0.5, 3, -7}, naive([]float64{-1, 0.5, 3, -7})},
		{"large", []float64{1000, 1000}, 1000 + math.Ln2},
		{"large spread", []float64{800, 0, -800}, 800},
		{"very negative", []float64{-1000, -1000, -1000, -1000}, -1000 + math.Log(4)},
		{"empty", nil, math.Inf(-1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := LogSumExp(c.row)
			if math.IsInf(c.want, -1) {
				if !math.IsInf(got, -1) {
					t.Fatalf("LogSumExp(%v) = %v, want -Inf", c.row, got)
				}
				return
			}
			if math.Abs(got-c.want) > 1e-12*max(1, math.Abs(c.want)) {
				t.Fatalf("LogSumExp(%v) = %v, want %v", c.row, got, c.want)
			}
		})
	}
}

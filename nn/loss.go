package nn

import (
	"fmt"
	"math"
)

// CrossEntropy returns the mean softmax cross-entropy of logits [N, C] against
// labels (each in [0, C)) and its gradient with respect to the logits.
func CrossEntropy(logits *Tensor, labels []int) (float64, *Tensor, error) {
	n, c := logits.Rows(), logits.Cols()
	if len(logits.Shape) != 2 || n != len(labels) || n == 0 || c == 0 {
		return 0, nil, fmt.Errorf("cross-entropy: logits %v for %d labels", logits.Shape, len(labels))
	}
	p := New(n, c)
	SoftmaxRows(logits.Data, p.Data, c)
	loss := 0.0
	for i, y := range labels {
		if y < 0 || y >= c {
			return 0, nil, fmt.Errorf("cross-entropy: label %d of sample %d outside [0,%d)", y, i, c)
		}
		row := logits.Data[i*c : (i+1)*c]
		loss -= row[y] - LogSumExp(row)
		p.Data[i*c+y]--
	}
	inv := 1 / float64(n)
	for i := range p.Data {
		p.Data[i] *= inv
	}
	return loss * inv, p, nil
}

// LogSumExp returns log Σ_j exp(row[j]), computed stably as
// m + log Σ_j exp(row[j] − m) with m the largest entry (so large logits do
// not overflow); an empty row gives −Inf. It is the normaliser of
// softmax(row): log softmax(row)_j = row[j] − LogSumExp(row).
func LogSumExp(row []float64) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, v)
	}
	s := 0.0
	for _, v := range row {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// Entropy returns the prediction entropy −Σ p log p (nats) of softmax(logits) for
// each row of logits [N, C].
func Entropy(logits *Tensor) []float64 {
	c := logits.Cols()
	out := make([]float64, logits.Rows())
	p := make([]float64, c)
	for i := range out {
		row := logits.Data[i*c : (i+1)*c]
		SoftmaxRows(row, p, c)
		lse := LogSumExp(row)
		h := 0.0
		for j, v := range row {
			h -= p[j] * (v - lse)
		}
		out[i] = h
	}
	return out
}

// Argmax returns the index of the largest entry of each row of t.
func Argmax(t *Tensor) []int {
	c := t.Cols()
	out := make([]int, t.Rows())
	for i := range out {
		best := 0
		for j := 1; j < c; j++ {
			if t.Data[i*c+j] > t.Data[i*c+best] {
				best = j
			}
		}
		out[i] = best
	}
	return out
}

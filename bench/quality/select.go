package quality

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn"
)

// TopK returns the k candidates with the largest scores (scores[i] belongs to
// cands[i]), ties to the smaller pool index as the secure QuickSelect breaks
// them, ascending.
func TopK(scores []float64, cands []int, k int) ([]int, error) {
	if len(scores) != len(cands) || k < 0 || k > len(cands) {
		return nil, fmt.Errorf("top-k: %d scores for %d candidates, k = %d", len(scores), len(cands), k)
	}
	pos := make([]int, len(cands))
	for i := range pos {
		pos[i] = i
	}
	sort.Slice(pos, func(a, b int) bool {
		if scores[pos[a]] != scores[pos[b]] {
			return scores[pos[a]] > scores[pos[b]]
		}
		return cands[pos[a]] < cands[pos[b]]
	})
	out := make([]int, k)
	for i, p := range pos[:k] {
		out[i] = cands[p]
	}
	slices.Sort(out)
	return out, nil
}

// RandomPick draws k of cands uniformly (deterministic for seed), ascending.
func RandomPick(cands []int, k int, seed uint64) ([]int, error) {
	out, err := dataset.Bootstrap(cands, k, dataset.NewRand(seed))
	if err != nil {
		return nil, fmt.Errorf("random pick: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// Candidates returns 0..n−1 without boot, ascending (the secure selection's
// candidates).
func Candidates(n int, boot []int) []int {
	skip := make(map[int]bool, len(boot))
	for _, b := range boot {
		skip[b] = true
	}
	out := make([]int, 0, n)
	for i := range n {
		if !skip[i] {
			out = append(out, i)
		}
	}
	return out
}

// Margin returns 1 − (p₁ − p₂) per row of logits: one minus the gap between
// the two most probable classes (larger = more uncertain).
func Margin(logits *nn.Tensor) []float64 {
	c := logits.Cols()
	out := make([]float64, logits.Rows())
	p := make([]float64, c)
	for i := range out {
		nn.SoftmaxRows(logits.Data[i*c:(i+1)*c], p, c)
		a, b := math.Inf(-1), math.Inf(-1)
		for _, v := range p {
			if v > a {
				a, b = v, a
			} else if v > b {
				b = v
			}
		}
		out[i] = 1 - (a - b)
	}
	return out
}

// Overlap returns |a ∩ b| / |b| for two index sets.
func Overlap(a, b []int) float64 {
	if len(b) == 0 {
		return math.NaN()
	}
	in := make(map[int]bool, len(a))
	for _, i := range a {
		in[i] = true
	}
	n := 0
	for _, i := range b {
		if in[i] {
			n++
		}
	}
	return float64(n) / float64(len(b))
}

// Pick returns vals[idx] (vals indexed by pool index).
func Pick(vals []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for i, j := range idx {
		out[i] = vals[j]
	}
	return out
}

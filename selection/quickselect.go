package selection

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// SelectStats counts the work of one TopK call.
type SelectStats struct {
	// Comparisons is the number of secure comparisons (elements compared with
	// a pivot); expected about 2–3.5·n for n values.
	Comparisons int64 `json:"comparisons"`
	// Steps is the number of partition steps (one CompareReveal each).
	Steps int `json:"steps"`
	// Rounds is the number of communication rounds of the comparisons.
	Rounds int64 `json:"rounds"`
}

// Add returns the sum of two SelectStats.
func (a SelectStats) Add(b SelectStats) SelectStats {
	return SelectStats{Comparisons: a.Comparisons + b.Comparisons, Steps: a.Steps + b.Steps, Rounds: a.Rounds + b.Rounds}
}

// TopK selects the k largest of the shared values vals (a tensor of n
// fixed-point or ring values, this party's share) by QuickSelect and returns
// the positions (0..n−1) of the selected values in ascending order.
//
// keys gives each value a distinct public key (pool indices in a selection)
// that breaks ties: the order is value descending, then key ascending, so of
// two equal values the one with the smaller key ranks higher. keys must be
// distinct; nil means keys[i] = i.
//
// Each partition step picks a pivot uniformly among the remaining candidates
// with rng (both parties must pass PRGs with the same seed and domain, e.g.
// from the joint coin toss) and compares every other remaining candidate with
// it in ONE protocol.CompareReveal call: the only thing revealed is, per
// compared candidate, whether it ranks above the pivot. Values are never
// revealed. The recursion continues into the side holding the k-th boundary,
// so exactly min(k, n) positions are returned.
func TopK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG) ([]int, SelectStats, error) {
	var st SelectStats
	if vals == nil {
		return nil, st, fmt.Errorf("selection: topk: nil values")
	}
	n := len(vals.Data)
	if keys == nil {
		keys = make([]int, n)
		for i := range keys {
			keys[i] = i
		}
	}
	if len(keys) != n {
		return nil, st, fmt.Errorf("selection: topk: %d keys for %d values", len(keys), n)
	}
	if err := checkKeys(keys); err != nil {
		return nil, st, fmt.Errorf("selection: topk: %w", err)
	}
	if k < 0 {
		return nil, st, fmt.Errorf("selection: topk: k = %d", k)
	}
	if rng == nil {
		return nil, st, fmt.Errorf("selection: topk: nil PRG")
	}
	active := make([]int, n)
	for i := range active {
		active[i] = i
	}
	if k >= n {
		return active, st, nil
	}
	var chosen []int
	need := k
	for need > 0 && len(active) > need {
		pi := rng.Intn(len(active))
		piv := active[pi]
		others := make([]int, 0, len(active)-1)
		others = append(others, active[:pi]...)
		others = append(others, active[pi+1:]...)
		m := len(others)
		x, err := share.NewTensor(m)
		if err != nil {
			return nil, st, fmt.Errorf("selection: topk: %w", err)
		}
		y, err := share.NewTensor(m)
		if err != nil {
			return nil, st, fmt.Errorf("selection: topk: %w", err)
		}
		pv := vals.Data[piv]
		// ahead(i) ⇔ v_i > v_p or (v_i = v_p and key_i < key_p).
		// For key_i < key_p: ahead ⇔ ¬(v_i < v_p): compare (v_i, v_p), negate.
		// For key_i > key_p: ahead ⇔ v_p < v_i: compare (v_p, v_i).
		for j, i := range others {
			if keys[i] < keys[piv] {
				x.Data[j], y.Data[j] = vals.Data[i], pv
			} else {
				x.Data[j], y.Data[j] = pv, vals.Data[i]
			}
		}
		r0 := s.Stream().Stats().Rounds
		bits, err := s.CompareReveal(ctx, x, y)
		if err != nil {
			return nil, st, fmt.Errorf("selection: topk: partition step %d: %w", st.Steps+1, err)
		}
		st.Rounds += s.Stream().Stats().Rounds - r0
		st.Steps++
		st.Comparisons += int64(m)
		var above, below []int
		for j, i := range others {
			ahead := bits[j]
			if keys[i] < keys[piv] {
				ahead = !ahead
			}
			if ahead {
				above = append(above, i)
			} else {
				below = append(below, i)
			}
		}
		switch {
		case len(above) >= need:
			active = above
		default:
			chosen = append(chosen, above...)
			chosen = append(chosen, piv)
			need -= len(above) + 1
			active = below
		}
	}
	if need > 0 {
		chosen = append(chosen, active...)
	}
	slices.Sort(chosen)
	return chosen, st, nil
}

// checkKeys reports whether keys are distinct.
func checkKeys(keys []int) error {
	seen := make(map[int]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return fmt.Errorf("selection: duplicate key %d", k)
		}
		seen[k] = true
	}
	return nil
}

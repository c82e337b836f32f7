package topk

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// Stats counts the work of one TopK call.
type Stats struct {
	// Comparisons is the number of secure comparisons (revealed outcomes);
	// about 12–17·n for n values above 800, and 10–42·n on average from 92
	// to 800 values, where a rank step replaces the sample and partition
	// steps (the package documentation explains why).
	Comparisons int64 `json:"comparisons"`
	// Steps is the number of steps (one comparison each: 6 rounds with the
	// bounded comparison, 7 with the 64-bit one; the package documentation, "Range", tells which).
	Steps int `json:"steps"`
	// Rounds is the number of communication rounds of the comparisons.
	Rounds int64 `json:"rounds"`
	// Sorted is the number of values whose order among each other a
	// sample, rank or sort step revealed completely, summed over those
	// steps.
	Sorted int64 `json:"sorted,omitempty"`
	// Pivots is the number of pivots of the partition and rank steps (a
	// rank step's pivots are its whole sample), summed over them: each
	// such step reveals every other active value's bucket among its
	// pivots.
	Pivots int64 `json:"pivots,omitempty"`
}

// Add returns the sum of two Stats.
func (a Stats) Add(b Stats) Stats {
	return Stats{Comparisons: a.Comparisons + b.Comparisons, Steps: a.Steps + b.Steps, Rounds: a.Rounds + b.Rounds,
		Sorted: a.Sorted + b.Sorted, Pivots: a.Pivots + b.Pivots}
}

// TopK selects the k largest of the shared values vals (a tensor of n
// fixed-point values, this party's share, within the range below) and
// returns the positions
// (0..n−1) of the selected values in ascending order; exactly min(k, n) of
// them.
//
// keys gives each value a distinct public key (pool indices in a selection)
// that breaks ties: the order is value descending, then key ascending, so of
// two equal values the one with the smaller key ranks higher. keys must be
// distinct; nil means keys[i] = i. Under this order the n values are
// distinct, and each has a rank 1..n.
//
// The steps, what each costs and what it reveals are in the package
// documentation (Algorithm, Range, What is revealed).
//
// rng drives the samples (both parties must pass PRGs with the same seed and
// domain, e.g. from the joint coin toss).
func TopK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG) ([]int, Stats, error) {
	pos, _, st, err := topK(ctx, s, vals, keys, k, rng, nil)
	return pos, st, err
}

// TopKTiers is TopK that also returns what the revealed outcomes say about
// the order of the selected values: tiers[j] is the tier of the value at
// pos[j], 0 the best. Whenever tiers[a] < tiers[b], the outcomes both
// parties saw place value pos[a] ahead of value pos[b] (directly, or
// through a chain of outcomes: a pivot or a sample member between them);
// values of one tier are not ordered by them. A step that chooses values
// makes each bucket ahead of the boundary a tier and each pivot between
// them another; a sort step, or a sorted sample that settles the rest,
// one tier per value. Both parties compute the same tiers, from public
// outcomes only. selection records them for the audit of a purchase
// (package selection/purchase).
func TopKTiers(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG) (pos, tiers []int, st Stats, err error) {
	return topK(ctx, s, vals, keys, k, rng, nil)
}

// stepTrace sees every step of topK: its kind, the pairs compared and the
// revealed outcomes (ahead[i]: pairs[i][0] ranks ahead of pairs[i][1]).
type stepTrace func(kind stepKind, pairs [][2]int, ahead []bool)

// topK is TopK; trace, if not nil, sees every step (what the step reveals).
func topK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG, trace stepTrace) ([]int, []int, Stats, error) {
	var st Stats
	if vals == nil {
		return nil, nil, st, fmt.Errorf("topk: nil values")
	}
	n := len(vals.Data)
	if keys == nil {
		keys = make([]int, n)
		for i := range keys {
			keys[i] = i
		}
	}
	if len(keys) != n {
		return nil, nil, st, fmt.Errorf("topk: %d keys for %d values", len(keys), n)
	}
	if err := checkKeys(keys); err != nil {
		return nil, nil, st, fmt.Errorf("topk: %w", err)
	}
	if k < 0 {
		return nil, nil, st, fmt.Errorf("topk: k = %d", k)
	}
	if rng == nil {
		return nil, nil, st, fmt.Errorf("topk: nil PRG")
	}
	plan := newSelectPlan(n, k, rng)
	for {
		pairs, done := plan.next()
		if done {
			break
		}
		ahead, err := compareAhead(ctx, s, vals.Data, keys, pairs, &st)
		if err != nil {
			return nil, nil, st, fmt.Errorf("topk: %s step %d (%d comparisons): %w", plan.kind, st.Steps+1, len(pairs), err)
		}
		if trace != nil {
			trace(plan.kind, pairs, ahead)
		}
		switch plan.kind {
		case stepSample, stepSortAll:
			st.Sorted += int64(len(plan.group))
		case stepPartition:
			st.Pivots += int64(len(plan.pivots))
		case stepRank:
			st.Sorted += int64(len(plan.group))
			st.Pivots += int64(len(plan.group))
		}
		if err := plan.apply(ahead); err != nil {
			return nil, nil, st, fmt.Errorf("topk: step %d: %w", st.Steps, err)
		}
	}
	pos, tiers := plan.resultTiers()
	return pos, tiers, st, nil
}

// boundedMaxFracBits is the most fractional bits for which TopK compares
// with protocol.CompareRevealBounded: its bound 2^(31−f) in value is then
// at least 2^14.
const boundedMaxFracBits = 17

// useBounded reports whether TopK compares values of encoding fp with the
// 32-bit comparison (see the package documentation, "Range").
func useBounded(fp share.FixedPoint) bool { return fp.FracBits <= boundedMaxFracBits }

// UsesBounded reports whether TopK's steps compare values of encoding fp
// with protocol.CompareRevealBounded (f ≤ 17 fractional bits) rather than
// protocol.CompareReveal: the comparison whose dealer material a step
// draws (selection's DealerBudget rehearses it).
func UsesBounded(fp share.FixedPoint) bool { return useBounded(fp) }

// OneStep reports whether TopK orders all n values in one sort step (every
// pair within the step budget), whatever k strictly between 0 and n.
func OneStep(n int) bool {
	return n-1 <= 2*stepBudget(n)/n
}

// MaxStepComparisons bounds the comparisons of any one step of TopK over n
// values: the larger of the step budget, the rank-step budget and n (a
// partition step compares every other active value with at least one
// pivot).
func MaxStepComparisons(n int) int {
	return max(stepBudget(n), rankStepBudget, n)
}

// compareAhead runs one step: it tells for every pair (a, b) whether value a
// ranks ahead of value b, in ONE comparison (CompareRevealBounded when the
// session's encoding allows, else CompareReveal), and counts it in st.
func compareAhead(ctx context.Context, s *protocol.Session, v []uint64, keys []int, pairs [][2]int, st *Stats) ([]bool, error) {
	m := len(pairs)
	x, err := share.NewTensor(m)
	if err != nil {
		return nil, err
	}
	y, err := share.NewTensor(m)
	if err != nil {
		return nil, err
	}
	// ahead(a, b) ⇔ v_a > v_b or (v_a = v_b and key_a < key_b).
	// For key_a < key_b: ahead ⇔ ¬(v_a < v_b): compare (v_a, v_b), negate.
	// For key_a > key_b: ahead ⇔ v_b < v_a: compare (v_b, v_a).
	for j, pr := range pairs {
		a, b := pr[0], pr[1]
		if keys[a] < keys[b] {
			x.Data[j], y.Data[j] = v[a], v[b]
		} else {
			x.Data[j], y.Data[j] = v[b], v[a]
		}
	}
	r0 := s.Stream().Stats().Rounds
	// The step's dealer items are drawn ahead, as one sequence.
	var bits []bool
	err = s.Ahead(ctx, func(ctx context.Context, s *protocol.Session) error {
		if useBounded(s.FixedPoint()) {
			bits, err = s.CompareRevealBounded(ctx, x, y)
		} else {
			bits, err = s.CompareReveal(ctx, x, y)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	st.Rounds += s.Stream().Stats().Rounds - r0
	st.Steps++
	st.Comparisons += int64(m)
	for j, pr := range pairs {
		if keys[pr[0]] < keys[pr[1]] {
			bits[j] = !bits[j]
		}
	}
	return bits, nil
}

// checkKeys reports whether keys are distinct.
func checkKeys(keys []int) error {
	seen := make(map[int]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return fmt.Errorf("topk: duplicate key %d", k)
		}
		seen[k] = true
	}
	return nil
}

package selection

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// SelectStats counts the work of one TopK call.
type SelectStats struct {
	// Comparisons is the number of secure comparisons (revealed outcomes);
	// about 12–17·n for n values above 800, and 10–42·n on average from 92
	// to 800 values, where a rank step replaces the sample and partition
	// steps (TopK explains why).
	Comparisons int64 `json:"comparisons"`
	// Steps is the number of steps (one comparison each: 6 rounds with the
	// bounded comparison, 7 with the 64-bit one; TopK tells which).
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

// Add returns the sum of two SelectStats.
func (a SelectStats) Add(b SelectStats) SelectStats {
	return SelectStats{Comparisons: a.Comparisons + b.Comparisons, Steps: a.Steps + b.Steps, Rounds: a.Rounds + b.Rounds,
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
// # Algorithm
//
// TopK is a sample-based multi-pivot QuickSelect whose steps each run ONE
// secure comparison on every pair the step compares: the bounded
// protocol.CompareRevealBounded (6 rounds) or, for encodings with more than
// 17 fractional bits, protocol.CompareReveal (7 rounds); see "Range". With m
// values still active (those whose membership is not yet known) and a
// budget of B = 8·n comparisons per step (at least 4,096, at most 2^22):
//
//   - sort: if all m(m−1)/2 pairs fit in B, compare every pair of the active
//     values; their order settles the selection and TopK ends.
//   - rank: otherwise, if no sorted sample is at hand, draw a uniform random
//     sample S of the active values and compare every pair of S and every
//     other active value with every member of S: S's order and each value's
//     rank among S. The values in better buckets than the boundary's (and
//     the members of S above it) are selected, the worse ones dropped; the
//     bucket between the two members of S adjacent to the boundary stays
//     active. |S| is the smallest sample for which that bucket is too large
//     for a sort step with probability at most 1% (computed exactly from
//     m, the number still needed and B; never from values), provided the
//     step makes at most max(B, 2^15) comparisons: a rank step saves the
//     6 rounds of a separate sample step, 300 ms on the paper WAN, and
//     2^15 comparisons cost about 15 ms of bytes and computation there
//     (the cost model is documented at rankStepBudget).
//   - sample: otherwise (the rank step would exceed its budget), draw a
//     uniform random sample of about 3·√m active values and compare every
//     pair of it: the sample's order.
//   - partition: if a sorted sample is at hand, pick p = min(B/m, sample
//     size) pivots from it (at least one), around the estimated position of
//     the k-th value (the outermost 3 standard deviations away), compare
//     every other active value with every pivot, and keep the bucket
//     between two adjacent pivots that holds the boundary: values in better
//     buckets (and better pivots) are selected, worse ones dropped. The
//     sample members in the kept bucket stay sorted and serve the next
//     partition step.
//
// Inputs of up to 91 values take one sort step. From 92 to about 800 values
// (the quickstart's 500 → 200 and 200 → 60) TopK takes a rank step and a
// sort, 12 rounds, planned for 99% of runs (sometimes the rank step alone,
// when a member of S sits at the boundary; otherwise a second rank step
// or a sample step follows); over 5,000 runs on clear ranks, 99.4% took at
// most 2 steps for 200 values keeping 60 (|S| = 11, about 13·n
// comparisons) and 98.9% for 500 keeping 200 (|S| = 32, about 32·n), where
// the sample, partition and sort steps took 2.7 and 2.9 steps on average
// (22.6·n and 13.5·n comparisons). For 1,000–42,000 values the rank step
// would exceed its budget and TopK
// takes 3 steps (sample, partition, sort), in some runs 4 (a second
// partition): 18–24 rounds where the single-pivot QuickSelect took 10–19
// steps (70–130 rounds at 7 rounds per step), for about 12–17·n
// comparisons instead of 3–4·n (see bench/RESULTS.md, "QuickSelect").
//
// # Range
//
// The values are fixed-point encodings (the entropies of a selection) with
// the session's FixedPoint f fractional bits. With f ≤ 17 (the default is
// 16) every step uses protocol.CompareRevealBounded, the sign circuit on
// 32-bit words (5 rounds and 128 bits per comparison and party instead of 6
// and 270, plus the opening), which is exact while any two values differ by
// less than 2^(31−f) in value: 32768 at f = 16, at least 2^14 for every
// f ≤ 17. Entropies lie in [0, ln C] for C classes, far inside it. Values
// further apart may be compared wrongly, and then the selection is wrong
// (nothing more is revealed: the outcome is still one masked bit). With
// f > 17 the bound would fall below 2^14, and TopK uses the 64-bit
// protocol.CompareReveal (7 rounds), exact for all |values| < 2^62.
//
// # What is revealed
//
// Values are never revealed. Both parties learn the outcome of every
// comparison the steps make, and nothing else (the sign circuit's openings
// are masked; CompareRevealBounded, CompareReveal). Concretely, beyond the
// selected set:
//
//   - rank steps: the complete order of the random sample S and each other
//     active value's rank among S (how many members of S rank above it):
//     a bucket among |S| + 1, finer than a partition step's among its p
//     pivots for the same sample, at most log2(|S|+1) bits per value (3.6
//     bits for 200 values keeping 60, 5 bits for 500 keeping 200);
//   - sample steps: the complete order of each random sample;
//   - partition steps: each active value's bucket among the step's pivots
//     (how many of them rank above it), so the pivots' order is refined by
//     which values fall between them;
//   - the sort step: the complete order of the last active group (at most
//     about √(16·n) values around the k-th: 820 for n = 42,000; 91 for
//     n ≤ 512).
//
// The single-pivot QuickSelect revealed each active value's side of one
// pivot per step; this reveals more order relations per step (counted in
// SelectStats.Sorted and SelectStats.Pivots). Which pairs are compared
// depends only on rng and on the outcomes of earlier steps, and each
// outcome only on the ranks of the two values compared, so everything
// revealed is a function of the ranks (the permutation that sorts the
// values by the order above) and the public coins: two inputs with the same
// ranks give the same outcomes and identically distributed transcripts
// (TestTopKViewDependsOnlyOnRanks).
//
// rng drives the samples (both parties must pass PRGs with the same seed and
// domain, e.g. from the joint coin toss).
func TopK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG) ([]int, SelectStats, error) {
	return topK(ctx, s, vals, keys, k, rng, nil)
}

// stepTrace sees every step of topK: its kind, the pairs compared and the
// revealed outcomes (ahead[i]: pairs[i][0] ranks ahead of pairs[i][1]).
type stepTrace func(kind stepKind, pairs [][2]int, ahead []bool)

// topK is TopK; trace, if not nil, sees every step (what the step reveals).
func topK(ctx context.Context, s *protocol.Session, vals *share.Tensor, keys []int, k int, rng *share.PRG, trace stepTrace) ([]int, SelectStats, error) {
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
	plan := newSelectPlan(n, k, rng)
	for {
		pairs, done := plan.next()
		if done {
			break
		}
		ahead, err := compareAhead(ctx, s, vals.Data, keys, pairs, &st)
		if err != nil {
			return nil, st, fmt.Errorf("selection: topk: %s step %d (%d comparisons): %w", plan.kind, st.Steps+1, len(pairs), err)
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
			return nil, st, fmt.Errorf("selection: topk: step %d: %w", st.Steps, err)
		}
	}
	return plan.result(), st, nil
}

// boundedMaxFracBits is the most fractional bits for which TopK compares
// with protocol.CompareRevealBounded: its bound 2^(31−f) in value is then
// at least 2^14.
const boundedMaxFracBits = 17

// useBounded reports whether TopK compares values of encoding fp with the
// 32-bit comparison (see TopK, "Range").
func useBounded(fp share.FixedPoint) bool { return fp.FracBits <= boundedMaxFracBits }

// compareAhead runs one step: it tells for every pair (a, b) whether value a
// ranks ahead of value b, in ONE comparison (CompareRevealBounded when the
// session's encoding allows, else CompareReveal), and counts it in st.
func compareAhead(ctx context.Context, s *protocol.Session, v []uint64, keys []int, pairs [][2]int, st *SelectStats) ([]bool, error) {
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
			return fmt.Errorf("selection: duplicate key %d", k)
		}
		seen[k] = true
	}
	return nil
}

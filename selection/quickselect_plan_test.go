package selection

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// runPlan runs a selectPlan of the k best of n values whose ranks (0 = best)
// are rank, answering its comparisons in the clear. It returns the result,
// the kinds of the steps and the comparisons of each step.
func runPlan(t testing.TB, rank []int, k int, seed share.Seed) ([]int, []stepKind, []int) {
	t.Helper()
	p := newSelectPlan(len(rank), k, share.NewPRG(seed, "plan"))
	var kinds []stepKind
	var sizes []int
	for {
		pairs, done := p.next()
		if done {
			break
		}
		if len(kinds) > 64 {
			t.Fatalf("n=%d k=%d: no end after %d steps", len(rank), k, len(kinds))
		}
		ahead := make([]bool, len(pairs))
		for i, pr := range pairs {
			if pr[0] == pr[1] {
				t.Fatalf("a value is compared with itself: %v", pr)
			}
			ahead[i] = rank[pr[0]] < rank[pr[1]]
		}
		kinds = append(kinds, p.kind)
		sizes = append(sizes, len(pairs))
		if err := p.apply(ahead); err != nil {
			t.Fatal(err)
		}
	}
	return p.result(), kinds, sizes
}

// wantTop returns the positions of ranks 0..k−1, ascending.
func wantTop(rank []int, k int) []int {
	var out []int
	for i, r := range rank {
		if r < k {
			out = append(out, i)
		}
	}
	return out
}

// TestSelectPlanExact runs the schedule on clear ranks for many sizes, every
// edge k and several seeds: the result is exactly the k best, no step makes
// more comparisons than the budget, and the steps follow the documented
// grammar (sample, then partitions, then a sort or a partition that hits the
// boundary; a sample again only after the sample is used up).
func TestSelectPlanExact(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 10, 91, 92, 93, 150, 400, 1000, 3000} {
		ks := []int{0, 1, 2, n / 3, n / 2, n - 2, n - 1, n, n + 1}
		for _, k := range ks {
			if k < 0 {
				continue
			}
			for seed := range 4 {
				rank := rand.New(rand.NewPCG(uint64(n), uint64(seed))).Perm(n)
				got, kinds, sizes := runPlan(t, rank, k, share.Seed{byte(seed), byte(n)})
				if want := wantTop(rank, min(k, n)); !slices.Equal(got, want) {
					t.Fatalf("n=%d k=%d seed %d: got %v, want %v", n, k, seed, got, want)
				}
				budget := min(max(minStepBudget, stepBudgetFactor*n), maxStepBudget)
				for i, c := range sizes {
					if c > budget {
						t.Errorf("n=%d k=%d: step %d (%v) makes %d comparisons, budget %d", n, k, i, kinds[i], c, budget)
					}
				}
				if k == 0 || k >= n {
					if len(kinds) != 0 {
						t.Errorf("n=%d k=%d: %d steps, want none", n, k, len(kinds))
					}
				} else if n*(n-1)/2 <= budget && !slices.Equal(kinds, []stepKind{stepSortAll}) {
					t.Errorf("n=%d k=%d: steps %v, want one sort", n, k, kinds)
				}
				for i, kind := range kinds {
					if kind == stepSortAll && i != len(kinds)-1 {
						t.Errorf("n=%d k=%d: a sort step before the end: %v", n, k, kinds)
					}
					if kind == stepPartition && (i == 0 || kinds[i-1] == stepSortAll) {
						t.Errorf("n=%d k=%d: a partition without a sorted sample: %v", n, k, kinds)
					}
				}
			}
		}
	}
}

// TestSelectPlanSteps pins the step counts that the documentation and
// bench/RESULTS.md state, on clear ranks: at most 4 steps (28 rounds) for
// 1,000–42,000 values at k = 20% and mean at most 3.5, with at most 20
// comparisons per value. The seeds are fixed, so the test is deterministic.
func TestSelectPlanSteps(t *testing.T) {
	ns := []int{1000, 10000, 42000}
	if testing.Short() {
		ns = ns[:2]
	}
	for _, n := range ns {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			const runs = 6
			steps, cmps := 0, 0
			seqs := map[string]int{}
			for r := range runs {
				rank := rand.New(rand.NewPCG(uint64(r), 77)).Perm(n)
				got, kinds, sizes := runPlan(t, rank, n/5, share.Seed{byte(r), 77})
				if want := wantTop(rank, n/5); !slices.Equal(got, want) {
					t.Fatalf("run %d: wrong selection", r)
				}
				if len(kinds) > 4 {
					t.Errorf("run %d: %d steps %v", r, len(kinds), kinds)
				}
				var names []string
				for _, k := range kinds {
					names = append(names, k.String())
				}
				seqs[strings.Join(names, ",")]++
				steps += len(kinds)
				for _, c := range sizes {
					cmps += c
				}
			}
			mean, perN := float64(steps)/runs, float64(cmps)/runs/float64(n)
			t.Logf("n=%d k=%d: %.2f steps on average, %.1f·n comparisons, %v", n, n/5, mean, perN, seqs)
			if mean > 3.5 || perN > 20 {
				t.Errorf("%.2f steps, %.1f·n comparisons", mean, perN)
			}
		})
	}
}

// TestSelectPlanRejectsInconsistentOutcomes feeds outcomes that no total
// order produces (a corrupted or malicious CompareReveal): apply fails
// instead of selecting garbage or panicking.
func TestSelectPlanRejectsInconsistentOutcomes(t *testing.T) {
	cases := []struct {
		name string
		n, k int
		// steps answered truthfully before the bad one
		good int
		bad  func(pairs [][2]int, rank []int) []bool
	}{
		{"sort: best and worst swapped in one pair", 10, 3, 0, flipExtremes},
		{"sample: best and worst swapped in one pair", 500, 100, 0, flipExtremes},
		{"partition: ahead of a better pivot but behind a worse one", 500, 100, 1, func(p [][2]int, _ []int) []bool {
			a := make([]bool, len(p))
			for i := 0; i < len(a); i += 2 {
				a[i] = true // alternate: not a prefix of pivots
			}
			return a
		}},
		{"too few outcomes", 10, 3, 0, func(p [][2]int, _ []int) []bool { return make([]bool, len(p)-1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rank := rand.New(rand.NewPCG(1, 2)).Perm(c.n)
			p := newSelectPlan(c.n, c.k, share.NewPRG(share.Seed{9}, "plan"))
			for i := 0; ; i++ {
				pairs, done := p.next()
				if done {
					t.Fatal("the plan ended before the bad step")
				}
				if i == c.good {
					if err := p.apply(c.bad(pairs, rank)); err == nil {
						t.Fatalf("%v step: inconsistent outcomes accepted", p.kind)
					} else {
						t.Log(err)
					}
					return
				}
				ahead := make([]bool, len(pairs))
				for j, pr := range pairs {
					ahead[j] = rank[pr[0]] < rank[pr[1]]
				}
				if err := p.apply(ahead); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
	if err := newSelectPlan(5, 2, share.NewPRG(share.Seed{}, "x")).apply(nil); err == nil {
		t.Error("apply without a pending step accepted")
	}
}

// flipExtremes answers every pair truthfully but the one of the group's best
// and worst values: the outcomes contain a cycle (worst > best > middle >
// worst).
func flipExtremes(pairs [][2]int, rank []int) []bool {
	lo, hi := -1, -1
	for _, pr := range pairs {
		for _, a := range pr {
			if lo < 0 || rank[a] < rank[lo] {
				lo = a
			}
			if hi < 0 || rank[a] > rank[hi] {
				hi = a
			}
		}
	}
	ahead := make([]bool, len(pairs))
	for i, pr := range pairs {
		ahead[i] = rank[pr[0]] < rank[pr[1]]
		if (pr[0] == lo && pr[1] == hi) || (pr[0] == hi && pr[1] == lo) {
			ahead[i] = !ahead[i]
		}
	}
	return ahead
}

// TestSelectPlanKnownOrderNeedsNoStep: when the sorted sample is the whole
// active set (a bucket made only of sample members), the plan ends without
// another step instead of proposing a partition with nothing to compare.
func TestSelectPlanKnownOrderNeedsNoStep(t *testing.T) {
	p := newSelectPlan(200, 50, share.NewPRG(share.Seed{1}, "plan"))
	p.sorted = slices.Clone(p.active)
	slices.Reverse(p.sorted) // the known order: position 199 is best
	if pairs, done := p.next(); !done {
		t.Fatalf("a %v step of %d comparisons for a known order", p.kind, len(pairs))
	}
	want := make([]int, 50)
	for i := range want {
		want[i] = 150 + i
	}
	if got := p.result(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

package topk

import (
	"fmt"
	"math"
	"math/bits"
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
// more comparisons than its budget (the step budget; a rank step's own),
// and the steps follow the documented grammar (a rank step, or a sample
// then partitions, then a sort or a step that hits the boundary; a rank or
// sample step again only after the sample is used up).
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
					b := budget
					if kinds[i] == stepRank {
						b = max(budget, rankStepBudget)
					}
					if c > b {
						t.Errorf("n=%d k=%d: step %d (%v) makes %d comparisons, budget %d", n, k, i, kinds[i], c, b)
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
					if kind == stepPartition && (i == 0 || (kinds[i-1] != stepSample && kinds[i-1] != stepPartition)) {
						t.Errorf("n=%d k=%d: a partition without a sorted sample: %v", n, k, kinds)
					}
					if kind == stepRank && i > 0 && kinds[i-1] == stepSample {
						t.Errorf("n=%d k=%d: a rank step while a sorted sample is at hand: %v", n, k, kinds)
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
		// steps answered truthfully before the bad one, of this kind
		good int
		kind stepKind
		bad  func(p *selectPlan, rank []int) []bool
	}{
		{"sort: best and worst swapped in one pair", 10, 3, 0, stepSortAll, func(p *selectPlan, rank []int) []bool {
			return flipExtremes(p.pairs, rank)
		}},
		{"sample: best and worst swapped in one pair", 1000, 200, 0, stepSample, func(p *selectPlan, rank []int) []bool {
			return flipExtremes(p.pairs, rank)
		}},
		{"partition: ahead of a better pivot but behind a worse one", 1000, 200, 1, stepPartition, func(p *selectPlan, _ []int) []bool {
			a := make([]bool, len(p.pairs))
			for i := 0; i < len(a); i += 2 {
				a[i] = true // alternate: not a prefix of pivots
			}
			return a
		}},
		{"rank: the sample's best and worst swapped", 500, 200, 0, stepRank, func(p *selectPlan, rank []int) []bool {
			np := len(p.group) * (len(p.group) - 1) / 2
			a := flipExtremes(p.pairs[:np], rank)
			for _, pr := range p.pairs[np:] {
				a = append(a, rank[pr[0]] < rank[pr[1]])
			}
			return a
		}},
		{"rank: a value ahead of the sample's best but behind its worst", 500, 200, 0, stepRank, func(p *selectPlan, rank []int) []bool {
			best, worst := p.group[0], p.group[0]
			for _, v := range p.group {
				if rank[v] < rank[best] {
					best = v
				}
				if rank[v] > rank[worst] {
					worst = v
				}
			}
			a := make([]bool, len(p.pairs))
			for i, pr := range p.pairs {
				a[i] = rank[pr[0]] < rank[pr[1]]
				if pr[0] == p.others[0] && pr[1] == best {
					a[i] = true
				}
				if pr[0] == p.others[0] && pr[1] == worst {
					a[i] = false
				}
			}
			return a
		}},
		{"too few outcomes", 10, 3, 0, stepSortAll, func(p *selectPlan, _ []int) []bool { return make([]bool, len(p.pairs)-1) }},
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
					if p.kind != c.kind {
						t.Fatalf("the bad step is a %v step, want %v", p.kind, c.kind)
					}
					if err := p.apply(c.bad(p, rank)); err == nil {
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

// TestRankMissExact checks rankMiss, the probability that a rank step
// leaves a band too large to sort, against a count over every sample of
// every size from small pools, for every boundary and band limit; and that
// it falls as the sample grows (rankSampleSize's binary search relies on
// it) at the quickstart's sizes.
func TestRankMissExact(t *testing.T) {
	for m := 3; m <= 11; m++ {
		for need := 1; need < m; need++ {
			for bmax := 2; bmax <= m; bmax++ {
				miss, total := make([]float64, m), make([]float64, m)
				for set := uint(0); set < 1<<m; set++ {
					s := bits.OnesCount(set)
					if s == 0 || s == m {
						continue
					}
					total[s]++
					in := func(r int) bool { return set&(1<<(r-1)) != 0 } // ranks 1..m
					if in(need) || in(need+1) {
						continue
					}
					lo, hi := need, need+1
					for lo > 1 && !in(lo-1) {
						lo--
					}
					for hi < m && !in(hi+1) {
						hi++
					}
					if hi-lo+1 > bmax {
						miss[s]++
					}
				}
				for s := 1; s < m; s++ {
					want := miss[s] / total[s]
					if got := rankMiss(m, need, s, bmax); math.Abs(got-want) > 1e-9 {
						t.Fatalf("m=%d need=%d s=%d bmax=%d: rankMiss %v, counted %v", m, need, s, bmax, got, want)
					}
				}
			}
		}
	}
	for _, c := range []struct{ m, need int }{{500, 200}, {200, 60}, {700, 1}, {700, 699}} {
		prev := 1.0
		for s := 1; s < c.m; s++ {
			got := rankMiss(c.m, c.need, s, 91)
			if got > prev+1e-12 {
				t.Fatalf("m=%d need=%d: rankMiss rises from %v to %v at s=%d", c.m, c.need, prev, got, s)
			}
			prev = got
		}
	}
}

// rankedValues returns n values drawn from n/4 levels (many ties) with
// distinct random keys, and each value's rank under TopK's order (value
// descending, then key ascending; 0 = best).
func rankedValues(n int, seed uint64) (vals []float64, keys, rank []int) {
	rng := rand.New(rand.NewPCG(seed, 13))
	vals = make([]float64, n)
	for i := range vals {
		vals[i] = float64(rng.IntN(max(1, n/4)))
	}
	keys = rng.Perm(4 * n)[:n]
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	slices.SortFunc(pos, func(a, b int) int {
		if vals[a] != vals[b] {
			if vals[a] > vals[b] {
				return -1
			}
			return 1
		}
		return keys[a] - keys[b]
	})
	rank = make([]int, n)
	for r, i := range pos {
		rank[i] = r
	}
	return vals, keys, rank
}

// TestSelectPlanTwoSteps runs the quickstart's two selections (500 → 200,
// 200 → 60) on 100 inputs with ties and 100 seeds each, in the clear: every
// result is exactly the plaintext top k (ties to the smaller key), at
// least 95 of the 100 runs take at most 2 steps (a rank step and a sort;
// rankMissTarget plans 99), none more than 4, and the comparisons stay
// within the rank step's budget plus one sort's.
func TestSelectPlanTwoSteps(t *testing.T) {
	cases := []struct {
		n, k     int
		minTwo   int // runs of 100 that must take at most 2 steps
		maxSteps int
	}{
		{500, 200, 95, 4},
		{200, 60, 95, 4},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d-%d", c.n, c.k), func(t *testing.T) {
			const runs = 100
			two, cmps := 0, 0
			seqs := map[string]int{}
			for r := range runs {
				vals, keys, rank := rankedValues(c.n, uint64(r))
				got, kinds, sizes := runPlan(t, rank, c.k, share.Seed{byte(r), byte(c.n), 13})
				if want := plainTopK(vals, keys, c.k); !slices.Equal(got, want) {
					t.Fatalf("run %d: got %v, want %v", r, got, want)
				}
				if len(kinds) <= 2 {
					two++
				}
				if len(kinds) > c.maxSteps {
					t.Errorf("run %d: %d steps %v", r, len(kinds), kinds)
				}
				var names []string
				for _, k := range kinds {
					names = append(names, k.String())
				}
				seqs[strings.Join(names, ",")]++
				for _, s := range sizes {
					cmps += s
				}
			}
			t.Logf("n=%d k=%d: %d of %d runs in at most 2 steps, %.1f comparisons (%.1f·n) on average, %v",
				c.n, c.k, two, runs, float64(cmps)/runs, float64(cmps)/runs/float64(c.n), seqs)
			if two < c.minTwo {
				t.Errorf("%d of %d runs in at most 2 steps, want at least %d", two, runs, c.minTwo)
			}
		})
	}
}

// TestSelectPlanRankStep checks that a rank step compares exactly what the
// documentation says and the next step exactly the band it leaves: the
// sample S has the documented size, the pairs are every pair of S once and
// every other value with every member of S once, nothing else; two plans
// on the same seed propose the same step (so both parties do); the step
// after compares every pair of exactly the values
// strictly between the two members of S adjacent to the boundary (the
// test finds them from the clear ranks), or there is none when a member of
// S sits at the boundary.
func TestSelectPlanRankStep(t *testing.T) {
	cases := []struct {
		n, k, s int // s: the documented sample size
	}{
		{500, 200, 32},
		{200, 60, 11},
		{150, 30, 7},
		{500, 1, 0}, // the top bucket: s from rankSampleSize, checked below
	}
	for _, c := range cases {
		for seed := range 10 {
			rank := rand.New(rand.NewPCG(uint64(seed), 21)).Perm(c.n)
			p := newSelectPlan(c.n, c.k, share.NewPRG(share.Seed{byte(seed), 21}, "plan"))
			q := newSelectPlan(c.n, c.k, share.NewPRG(share.Seed{byte(seed), 21}, "plan"))
			pairs, done := p.next()
			qpairs, _ := q.next()
			if done || p.kind != stepRank {
				t.Fatalf("n=%d k=%d: first step %v, want a rank step", c.n, c.k, p.kind)
			}
			if !slices.Equal(pairs, qpairs) {
				t.Fatalf("n=%d k=%d: the same seed proposed different first steps", c.n, c.k)
			}
			S := slices.Clone(p.group)
			want := p.rankSampleSize(c.n)
			if c.s != 0 {
				want = c.s
			}
			if len(S) != want || want < 2 {
				t.Fatalf("n=%d k=%d: |S| = %d, want %d", c.n, c.k, len(S), want)
			}
			inS := map[int]bool{}
			for _, v := range S {
				inS[v] = true
			}
			seen := map[[2]int]bool{}
			for _, pr := range pairs {
				a, b := min(pr[0], pr[1]), max(pr[0], pr[1])
				if a == b || seen[[2]int{a, b}] || !(inS[pr[0]] || inS[pr[1]]) {
					t.Fatalf("n=%d k=%d: pair %v is repeated or compares two values outside S", c.n, c.k, pr)
				}
				seen[[2]int{a, b}] = true
			}
			if len(pairs) != rankCost(c.n, len(S)) {
				t.Fatalf("n=%d k=%d: %d pairs, want %d", c.n, c.k, len(pairs), rankCost(c.n, len(S)))
			}
			// The band: ranks strictly between S's members adjacent to the
			// boundary (between ranks k−1 and k, 0 = best).
			lo, hi := -1, c.n
			for _, v := range S {
				if r := rank[v]; r <= c.k && r > lo {
					lo = r
				}
				if r := rank[v]; r >= c.k-1 && r < hi {
					hi = r
				}
			}
			var band []int
			if lo != c.k-1 && lo != c.k && hi != c.k-1 && hi != c.k {
				for i, r := range rank {
					if r > lo && r < hi {
						band = append(band, i)
					}
				}
			}
			ahead := make([]bool, len(pairs))
			for i, pr := range pairs {
				ahead[i] = rank[pr[0]] < rank[pr[1]]
			}
			if err := p.apply(ahead); err != nil {
				t.Fatal(err)
			}
			next, done := p.next()
			if len(band) == 0 {
				if !done {
					t.Fatalf("n=%d k=%d: a member of S is at the boundary, yet a %v step follows", c.n, c.k, p.kind)
				}
				continue
			}
			if done || p.kind != stepSortAll {
				t.Fatalf("n=%d k=%d seed %d: band of %d, then %v (done %v), want its sort", c.n, c.k, seed, len(band), p.kind, done)
			}
			if got := slices.Sorted(slices.Values(p.group)); !slices.Equal(got, band) || len(next) != len(band)*(len(band)-1)/2 {
				t.Fatalf("n=%d k=%d: the sort compares %d values (%d pairs), want the band of %d", c.n, c.k, len(got), len(next), len(band))
			}
		}
	}
}

// TestStepBounds checks the bounds that selection's DealerBudget reads:
// OneStep(n) holds exactly when the plan settles n values in one sort
// step, no step makes more than MaxStepComparisons(n) comparisons, and
// UsesBounded picks the 32-bit comparison up to 17 fractional bits.
func TestStepBounds(t *testing.T) {
	for _, n := range []int{2, 50, 91, 92, 200, 500, 1000, 3000} {
		for _, k := range []int{1, n / 5, n / 2, n - 1} {
			if k <= 0 || k >= n {
				continue
			}
			rng := rand.New(rand.NewPCG(uint64(n), uint64(k)))
			rank := rng.Perm(n)
			_, kinds, sizes := runPlan(t, rank, k, share.Seed{byte(n), byte(k)})
			one := len(kinds) == 1 && kinds[0] == stepSortAll
			if one != OneStep(n) {
				t.Errorf("n=%d k=%d: steps %v, OneStep = %v", n, k, kinds, OneStep(n))
			}
			for i, c := range sizes {
				if c > MaxStepComparisons(n) {
					t.Errorf("n=%d k=%d: step %d (%v) makes %d comparisons > MaxStepComparisons %d", n, k, i+1, kinds[i], c, MaxStepComparisons(n))
				}
			}
		}
	}
	for _, c := range []struct {
		frac uint
		want bool
	}{{8, true}, {16, true}, {17, true}, {18, false}, {24, false}} {
		if got := UsesBounded(share.FixedPoint{FracBits: c.frac}); got != c.want {
			t.Errorf("UsesBounded(f=%d) = %v, want %v", c.frac, got, c.want)
		}
	}
}

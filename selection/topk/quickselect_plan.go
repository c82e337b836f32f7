package topk

import (
	"fmt"
	"math"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// The comparison schedule of TopK, kept apart from the secure comparisons
// so that it can be run and tested on clear values: a selectPlan proposes
// the pairs of one step (next), learns their outcomes (apply) and, when
// done, holds the selected positions. Which pairs a step compares depends
// only on the PRG and on the outcomes of earlier steps, never on values.

// Tuning of the schedule (the package documentation explains it; BenchmarkTopK
// and TestSelectPlanSteps measure it).
const (
	// stepBudgetFactor·n is the most comparisons one step may make for n
	// values (but at least minStepBudget and at most maxStepBudget). A
	// step's 8n comparisons send about 8·16 bytes per value and party
	// (CompareRevealBounded; 8·34 with the 64-bit comparison): 5.4 MB for
	// n = 42,000, 0.05 s at 100 MB/s, against the 0.3 s that the 6 rounds
	// of a step cost on the paper WAN (about 50 ms each).
	stepBudgetFactor = 8
	// minStepBudget settles up to 91 values in one step (every pair).
	minStepBudget = 4096
	// maxStepBudget bounds the memory of one step (about 40 bytes per
	// comparison and party, 170 MB); beyond 2^19 values, partition steps
	// use fewer pivots.
	maxStepBudget = 1 << 22
	// sampleFactor·√m is the size of a random sample of m active values
	// (sorting it costs about 4.5·m comparisons).
	sampleFactor = 3
	// windowSigmas is how many standard deviations of the boundary's
	// position among the sample the outermost pivots lie from its estimate.
	windowSigmas = 3
	// rankStepBudget is the most comparisons of a rank step (but at least
	// the step budget): a rank step replaces a sample step and a partition
	// step by one, so it saves one step's 6 rounds at the price of more
	// comparisons. The cost model, on the paper WAN (50 ms one way, 100
	// MB/s): a step's 6 rounds cost 6·50 ms = 300 ms; a comparison costs
	// about 16 bytes per party (CompareRevealBounded), 0.16 µs at 100
	// MB/s, plus about 0.25 µs of computation for both parties on 2 cores
	// (BenchmarkTopK, n = 42,000, measured with the 64-bit comparison:
	// 0.16 s for 663,000 comparisons), 0.4 µs in all. 2^15 comparisons are
	// then about 15 ms, 1/20 of the step they save, and 0.5 MB per party.
	// A rank step of m values with a sample S costs about m·|S|
	// comparisons, |S| being as small as rankMissTarget allows: 2,134 for
	// the quickstart's 200 values keeping 60 (|S| = 11), 15,472 for its 500
	// keeping 200 (|S| = 32). From about 800 values on it exceeds the
	// budget (1,000 keeping 200 would need |S| = 48, 46,824 comparisons,
	// 3.5× what the sample and partition steps make), and TopK keeps the
	// sample and partition steps, which place their pivots around the
	// boundary and stay cheaper in comparisons and in what they reveal.
	rankStepBudget = 1 << 15
	// rankMissTarget is the largest probability, over the PRG's sample, that
	// the band a rank step leaves is too large to sort in the next step:
	// the rank step's sample is the smallest whose probability of a third
	// step is at most this (rankMiss computes it exactly).
	rankMissTarget = 0.01
)

// stepKind tells what a step of the plan compares.
type stepKind int

const (
	// stepSortAll compares every pair of active values: their complete
	// order; the selection ends with it.
	stepSortAll stepKind = iota + 1
	// stepSample compares every pair of a fresh random sample of the
	// active values: the order of the sample.
	stepSample
	// stepPartition compares every other active value with each of p
	// pivots drawn from the sorted sample: each value's bucket among them.
	stepPartition
	// stepRank compares every pair of a fresh random sample S of the active
	// values and every other active value with every member of S: the
	// order of S and each other value's rank among S (a partition step
	// whose pivots are all of S, merged with the sample step that sorts S).
	stepRank
)

// String names the step kind as the documentation does.
func (k stepKind) String() string {
	switch k {
	case stepSortAll:
		return "sort"
	case stepSample:
		return "sample"
	case stepPartition:
		return "partition"
	case stepRank:
		return "rank"
	}
	return fmt.Sprintf("stepKind(%d)", int(k))
}

// selectPlan is the state of one selection of the need best of n values.
// Positions are 0..n−1; pair (a, b) asks whether a ranks ahead of b.
type selectPlan struct {
	rng    *share.PRG
	budget int
	// rankBudget is the most comparisons of a rank step.
	rankBudget int
	// sampleFactor and sigmas are the tuning constants of the same names.
	sampleFactor, sigmas float64

	active []int // candidates for the remaining need places
	need   int
	chosen []int // positions certainly among the best k
	// tiers holds each chosen position's tier (chosen[i] is in tiers[i]):
	// the outcomes revealed so far place every member of a tier ahead of
	// every member of a later one (see choose).
	tiers  []int
	sorted []int // the sample's members still active, best first
	done   bool

	// The pending step.
	kind   stepKind
	group  []int    // stepSortAll, stepSample, stepRank: the values compared pairwise
	others []int    // stepPartition, stepRank: the values compared with the pivots
	pivots []int    // stepPartition: best first; stepRank: after apply, group best first
	pairs  [][2]int // the comparisons, in the order apply expects
}

// stepBudget is the most comparisons of one step (other than a rank step)
// for n values: stepBudgetFactor·n within [minStepBudget, maxStepBudget].
func stepBudget(n int) int {
	return min(max(minStepBudget, stepBudgetFactor*n), maxStepBudget)
}

// newSelectPlan plans the selection of the k best of n values; n ≥ 0,
// k ≥ 0.
func newSelectPlan(n, k int, rng *share.PRG) *selectPlan {
	budget := stepBudget(n)
	p := &selectPlan{rng: rng, budget: budget, rankBudget: max(budget, rankStepBudget), need: min(k, n),
		sampleFactor: sampleFactor, sigmas: windowSigmas}
	p.active = make([]int, n)
	for i := range p.active {
		p.active[i] = i
	}
	return p
}

// next returns the pairs of the next step, or done = true when the
// selection is complete (result holds it). Every call without an apply in
// between returns the same pairs.
func (p *selectPlan) next() (pairs [][2]int, done bool) {
	if p.pairs != nil {
		return p.pairs, false
	}
	if p.done || p.need == 0 || len(p.active) <= p.need {
		if !p.done && p.need > 0 {
			p.choose(p.active...) // the whole active group: one tier
		}
		p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		return nil, true
	}
	m := len(p.active)
	if len(p.sorted) == m {
		// The order of every active value is known already.
		for _, a := range p.sorted[:p.need] {
			p.choose(a)
		}
		p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		return nil, true
	}
	switch {
	case m-1 <= 2*p.budget/m: // m(m−1)/2 ≤ budget, without overflow
		p.kind, p.group = stepSortAll, p.active
		p.pairs = allPairs(p.group)
	case len(p.sorted) == 0:
		if s := p.rankSampleSize(m); s > 0 {
			p.kind, p.group = stepRank, p.drawSample(s)
			inS := make(map[int]bool, s)
			for _, v := range p.group {
				inS[v] = true
			}
			p.others = p.others[:0]
			for _, a := range p.active {
				if !inS[a] {
					p.others = append(p.others, a)
				}
			}
			p.pairs = make([][2]int, 0, rankCost(m, s))
			for i, a := range p.group {
				for _, b := range p.group[i+1:] {
					p.pairs = append(p.pairs, [2]int{a, b})
				}
			}
			for _, a := range p.others {
				for _, v := range p.group {
					p.pairs = append(p.pairs, [2]int{a, v})
				}
			}
			break
		}
		p.kind, p.group = stepSample, p.drawSample(p.sampleSize(m))
		p.pairs = allPairs(p.group)
	default:
		p.kind = stepPartition
		p.pivots = p.choosePivots()
		isPivot := make(map[int]bool, len(p.pivots))
		for _, v := range p.pivots {
			isPivot[v] = true
		}
		p.others = p.others[:0]
		for _, a := range p.active {
			if !isPivot[a] {
				p.others = append(p.others, a)
			}
		}
		p.pairs = make([][2]int, 0, len(p.others)*len(p.pivots))
		for _, a := range p.others {
			for _, v := range p.pivots {
				p.pairs = append(p.pairs, [2]int{a, v})
			}
		}
	}
	return p.pairs, false
}

// allPairs returns every pair (g[i], g[j]), i < j.
func allPairs(g []int) [][2]int {
	out := make([][2]int, 0, len(g)*(len(g)-1)/2)
	for i, a := range g {
		for _, b := range g[i+1:] {
			out = append(out, [2]int{a, b})
		}
	}
	return out
}

// sampleSize is the size of a fresh sample of m active values: about
// sampleFactor·√m, at least 2, and small enough that sorting it fits the
// step budget.
func (p *selectPlan) sampleSize(m int) int {
	s := int(math.Ceil(p.sampleFactor * math.Sqrt(float64(m))))
	for s > 2 && s-1 > 2*p.budget/s {
		s--
	}
	return min(max(s, 2), m)
}

// drawSample returns a uniform random sample of s of the active values (a
// partial Fisher–Yates shuffle of a copy, driven by the PRG).
func (p *selectPlan) drawSample(s int) []int {
	pool := slices.Clone(p.active)
	for i := 0; i < s; i++ {
		j := i + p.rng.Intn(len(pool)-i)
		pool[i], pool[j] = pool[j], pool[i]
	}
	return pool[:s]
}

// rankCost is the number of comparisons of a rank step with a sample of s
// of m values: s(s−1)/2 pairs in the sample and s for each of the m−s
// others.
func rankCost(m, s int) int { return s*(s-1)/2 + (m-s)*s }

// sortable is the largest group that one sort step may order within the
// step budget: b(b−1)/2 ≤ budget.
func (p *selectPlan) sortable() int {
	b := int(math.Sqrt(2 * float64(p.budget)))
	for b*(b+1)/2 <= p.budget {
		b++
	}
	for b > 1 && b*(b-1)/2 > p.budget {
		b--
	}
	return b
}

// rankSampleSize is the size of the sample of a rank step on the m active
// values: the smallest s for which the band it leaves around the boundary
// is too large to sort (more than sortable values) with probability at
// most rankMissTarget, provided the step's comparisons fit rankBudget; 0
// when no such s fits (the plan takes a sample step instead). It depends
// only on m, need and the budgets, never on values.
func (p *selectPlan) rankSampleSize(m int) int {
	if m < 3 || p.need <= 0 || p.need >= m {
		return 0
	}
	// The largest sample whose step fits the budget (rankCost grows with s
	// for s < m).
	hi := 0
	for lo, top := 1, m-1; lo <= top; {
		mid := (lo + top) / 2
		if rankCost(m, mid) <= p.rankBudget {
			hi, lo = mid, mid+1
		} else {
			top = mid - 1
		}
	}
	bmax := p.sortable()
	if hi == 0 || rankMiss(m, p.need, hi, bmax) > rankMissTarget {
		return 0
	}
	// rankMiss falls as s grows (adding a member to a sample can only
	// split the boundary's bucket): the smallest s that meets the target.
	lo := 1
	for lo < hi {
		mid := (lo + hi) / 2
		if rankMiss(m, p.need, mid, bmax) <= rankMissTarget {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// rankMiss is the probability that a rank step with a uniform random
// sample of s of m values leaves more than bmax values to order: that
// neither the need-th nor the (need+1)-th best value is in the sample and
// the bucket holding both (the values between two adjacent members of the
// sample, or beyond the first or last) has more than bmax values.
// 1 ≤ need < m, 1 ≤ s < m.
//
// With ranks 1..m, a bucket of g values from rank a+1 to a+g that holds
// ranks need and need+1 exists when a and a+g+1 are members (or out of
// range: a = 0, a+g+1 = m+1) and no rank between is: probability
// C(m−g−e, s−e)/C(m, s), e of the two ends in range.
func rankMiss(m, need, s, bmax int) float64 {
	lchoose := func(n, k int) float64 {
		if k < 0 || k > n {
			return math.Inf(-1)
		}
		a, _ := math.Lgamma(float64(n + 1))
		b, _ := math.Lgamma(float64(k + 1))
		c, _ := math.Lgamma(float64(n - k + 1))
		return a - b - c
	}
	all := lchoose(m, s)
	prob := func(g, e int) float64 { return math.Exp(lchoose(m-g-e, s-e) - all) }
	fits := 0.0 // P(neither in the sample, bucket ≤ bmax)
	for g := 2; g <= min(bmax, m); g++ {
		// a: the rank just above the bucket, 0 if none.
		lo, hi := max(0, need+1-g), min(need-1, m-g)
		if lo > hi {
			continue
		}
		if ilo, ihi := max(lo, 1), min(hi, m-g-1); ilo <= ihi {
			fits += float64(ihi-ilo+1) * prob(g, 2)
		}
		if lo == 0 {
			e := 0
			if g <= m-1 {
				e = 1
			}
			fits += prob(g, e)
		}
		if hi == m-g && m-g >= 1 {
			fits += prob(g, 1)
		}
	}
	neither := math.Exp(lchoose(m-2, s) - all)
	return max(0, neither-fits)
}

// choosePivots picks the pivots of a partition step among the sorted
// sample: as many as the step budget allows (each costs one comparison per
// active value), the outermost windowSigmas standard deviations either side
// of the estimated position of the boundary, the others evenly between.
func (p *selectPlan) choosePivots() []int {
	m, s := len(p.active), len(p.sorted)
	np := min(s, max(1, p.budget/m))
	if np == s {
		return slices.Clone(p.sorted)
	}
	// The boundary lies after the need-th best active value; about
	// j = s·need/m sample members rank at or above it.
	q := float64(p.need) / float64(m)
	j := float64(s) * q
	sd := math.Sqrt(float64(s) * q * (1 - q))
	lo := int(math.Floor(j - p.sigmas*sd - 0.5))
	hi := int(math.Ceil(j + p.sigmas*sd - 0.5))
	// Widen to at least np members, then shift into [0, s−1].
	for hi-lo+1 < np {
		lo--
		hi++
	}
	if lo < 0 {
		hi -= lo
		lo = 0
	}
	if hi > s-1 {
		lo -= hi - (s - 1)
		hi = s - 1
	}
	lo = max(lo, 0)
	w := hi - lo + 1
	out := make([]int, np)
	for i := range out {
		idx := lo
		if np > 1 {
			idx = lo + i*(w-1)/(np-1)
		}
		out[i] = p.sorted[idx]
	}
	return out
}

// apply takes the outcomes of the pending step's pairs: ahead[i] tells
// whether pairs[i][0] ranks ahead of pairs[i][1]. Outcomes that no total
// order can produce are an error.
func (p *selectPlan) apply(ahead []bool) error {
	if p.pairs == nil {
		return fmt.Errorf("topk: plan: no pending step")
	}
	if len(ahead) != len(p.pairs) {
		return fmt.Errorf("topk: plan: %d outcomes for %d comparisons", len(ahead), len(p.pairs))
	}
	var err error
	switch p.kind {
	case stepSortAll:
		var order []int
		if order, err = orderGroup(p.group, p.pairs, ahead); err == nil {
			for _, a := range order[:p.need] {
				p.choose(a)
			}
			p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		}
	case stepSample:
		p.sorted, err = orderGroup(p.group, p.pairs, ahead)
	case stepPartition:
		err = p.partition(ahead)
	case stepRank:
		err = p.rank(ahead)
	}
	if err != nil {
		return fmt.Errorf("topk: %s step: %w", p.kind, err)
	}
	p.pairs, p.group, p.pivots = nil, nil, nil
	return nil
}

// rank applies a rank step's outcomes: the sample's order from its pairs,
// then the partition of the others with the whole sorted sample as pivots
// (each value's bucket is its rank among the sample).
func (p *selectPlan) rank(ahead []bool) error {
	s := len(p.group)
	np := s * (s - 1) / 2
	order, err := orderGroup(p.group, p.pairs[:np], ahead[:np])
	if err != nil {
		return err
	}
	place := make(map[int]int, s)
	for i, v := range order {
		place[v] = i
	}
	// Outcome (others[i], group[t]) is at np + i·s + t; partition wants
	// the pivots best first.
	rows := make([]bool, len(p.others)*s)
	for i := range p.others {
		for t, v := range p.group {
			rows[i*s+place[v]] = ahead[np+i*s+t]
		}
	}
	p.pivots, p.sorted = order, nil
	return p.partition(rows)
}

// orderGroup returns g best first from the outcomes of all its pairs: a
// member's place is the number of members ahead of it.
func orderGroup(g []int, pairs [][2]int, ahead []bool) ([]int, error) {
	place := make(map[int]int, len(g))
	for i, pr := range pairs {
		if ahead[i] {
			place[pr[1]]++
		} else {
			place[pr[0]]++
		}
	}
	out := make([]int, len(g))
	filled := make([]bool, len(g))
	for _, a := range g {
		r := place[a]
		if r >= len(g) || filled[r] {
			return nil, fmt.Errorf("comparison outcomes of %d values are not a total order", len(g))
		}
		out[r], filled[r] = a, true
	}
	return out, nil
}

// partition sorts the active values into the buckets between the pivots
// (bucket b: behind b pivots) and keeps the bucket that holds the boundary.
func (p *selectPlan) partition(ahead []bool) error {
	np := len(p.pivots)
	bucketOf := make(map[int]int, len(p.others))
	buckets := make([][]int, np+1)
	for i, a := range p.others {
		row := ahead[i*np : (i+1)*np]
		b := 0
		for b < np && !row[b] {
			b++
		}
		for _, x := range row[b:] {
			if !x {
				return fmt.Errorf("value %d is behind a pivot but ahead of a better one", a)
			}
		}
		buckets[b] = append(buckets[b], a)
		bucketOf[a] = b
	}
	// above holds everything ranked ahead of the current bucket, as
	// groups best first: each bucket, then the pivot behind it.
	var above [][]int
	count := 0
	chooseAbove := func() {
		for _, g := range above {
			p.choose(g...)
		}
	}
	for b, bk := range buckets {
		if count+len(bk) >= p.need {
			// The boundary is inside bucket b (or at its end).
			chooseAbove()
			p.need -= count
			p.active = bk
			// The sample members in bucket b keep their known order.
			var s []int
			for _, a := range p.sorted {
				if bb, ok := bucketOf[a]; ok && bb == b {
					s = append(s, a)
				}
			}
			p.sorted = s
			return nil
		}
		if b == np {
			break
		}
		if len(bk) > 0 {
			above = append(above, bk)
		}
		above = append(above, []int{p.pivots[b]})
		count += len(bk) + 1
		if count == p.need {
			chooseAbove()
			p.done, p.active, p.need, p.sorted = true, nil, 0, nil
			return nil
		}
	}
	return fmt.Errorf("no bucket holds the boundary") // unreachable: need < active
}

// choose adds the positions g to the chosen ones as one tier, behind
// every tier chosen before. A plan chooses values best first: a step
// chooses the buckets ahead of the boundary and the pivots between them,
// each bucket and each pivot a tier of its own (the sorted pivots order
// them), or the members of a sorted group one tier each; whatever it
// leaves active lies behind all of them, so every tier chosen later lies
// behind too. Members of one tier are not ordered by the outcomes.
func (p *selectPlan) choose(g ...int) {
	t := 0
	if len(p.tiers) > 0 {
		t = p.tiers[len(p.tiers)-1] + 1
	}
	for _, a := range g {
		p.chosen = append(p.chosen, a)
		p.tiers = append(p.tiers, t)
	}
}

// result returns the selected positions in ascending order once next has
// reported done.
func (p *selectPlan) result() []int {
	out, _ := p.resultTiers()
	return out
}

// resultTiers returns the selected positions in ascending order and each
// one's tier (see choose): 0 for the first, best tier, numbered densely.
func (p *selectPlan) resultTiers() (pos, tiers []int) {
	idx := make([]int, len(p.chosen))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return p.chosen[a] - p.chosen[b] })
	pos, tiers = make([]int, len(idx)), make([]int, len(idx))
	for j, i := range idx {
		pos[j], tiers[j] = p.chosen[i], p.tiers[i]
	}
	return pos, tiers
}

// PlanTiers runs TopKTiers's schedule on values whose ranks are known in
// the clear (rank[i] is value i's rank, 0 the best; a permutation of
// 0..n−1), answering every comparison from them: it returns the positions
// TopKTiers would select and their tiers, with no secure computation.
// Both come from the ranks and rng alone, as in a selection (the package
// documentation, "What is revealed"), so it shows what a selection reveals
// about the order of what it selects, for analyses such as the detection
// rates of selection/purchase's audit.
func PlanTiers(rank []int, k int, rng *share.PRG) (pos, tiers []int, err error) {
	n := len(rank)
	seen := make([]bool, n)
	for _, r := range rank {
		if r < 0 || r >= n || seen[r] {
			return nil, nil, fmt.Errorf("topk: plan tiers: ranks are not a permutation of 0..%d", n-1)
		}
		seen[r] = true
	}
	if k < 0 || rng == nil {
		return nil, nil, fmt.Errorf("topk: plan tiers: k = %d, PRG %v", k, rng)
	}
	p := newSelectPlan(n, k, rng)
	for {
		pairs, done := p.next()
		if done {
			break
		}
		ahead := make([]bool, len(pairs))
		for i, pr := range pairs {
			ahead[i] = rank[pr[0]] < rank[pr[1]]
		}
		if err := p.apply(ahead); err != nil {
			return nil, nil, err
		}
	}
	pos, tiers = p.resultTiers()
	return pos, tiers, nil
}

package selection

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

// Tuning of the schedule (TopK's documentation explains it; BenchmarkTopK
// and TestSelectPlanSteps measure it).
const (
	// stepBudgetFactor·n is the most comparisons one step may make for n
	// values (but at least minStepBudget and at most maxStepBudget). A
	// step's 8n comparisons send about 8·34 bytes per value and party:
	// 11 MB for n = 42,000, 0.11 s at 100 MB/s, against the 0.7 s that the
	// 7 rounds of a step cost on the paper WAN.
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
	}
	return fmt.Sprintf("stepKind(%d)", int(k))
}

// selectPlan is the state of one selection of the need best of n values.
// Positions are 0..n−1; pair (a, b) asks whether a ranks ahead of b.
type selectPlan struct {
	rng    *share.PRG
	budget int
	// sampleFactor and sigmas are the tuning constants of the same names.
	sampleFactor, sigmas float64

	active []int // candidates for the remaining need places
	need   int
	chosen []int // positions certainly among the best k
	sorted []int // the sample's members still active, best first
	done   bool

	// The pending step.
	kind   stepKind
	group  []int    // stepSortAll, stepSample: the values compared pairwise
	others []int    // stepPartition: the values compared with the pivots
	pivots []int    // stepPartition: best first
	pairs  [][2]int // the comparisons, in the order apply expects
}

// newSelectPlan plans the selection of the k best of n values; n ≥ 0,
// k ≥ 0.
func newSelectPlan(n, k int, rng *share.PRG) *selectPlan {
	p := &selectPlan{rng: rng, budget: min(max(minStepBudget, stepBudgetFactor*n), maxStepBudget), need: min(k, n),
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
			p.chosen = append(p.chosen, p.active...)
		}
		p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		return nil, true
	}
	m := len(p.active)
	if len(p.sorted) == m {
		// The order of every active value is known already.
		p.chosen = append(p.chosen, p.sorted[:p.need]...)
		p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		return nil, true
	}
	switch {
	case m-1 <= 2*p.budget/m: // m(m−1)/2 ≤ budget, without overflow
		p.kind, p.group = stepSortAll, p.active
		p.pairs = allPairs(p.group)
	case len(p.sorted) == 0:
		p.kind, p.group = stepSample, p.drawSample()
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

// drawSample returns a uniform random sample of the active values (a
// partial Fisher–Yates shuffle of a copy, driven by the PRG).
func (p *selectPlan) drawSample() []int {
	s := p.sampleSize(len(p.active))
	pool := slices.Clone(p.active)
	for i := 0; i < s; i++ {
		j := i + p.rng.Intn(len(pool)-i)
		pool[i], pool[j] = pool[j], pool[i]
	}
	return pool[:s]
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
		return fmt.Errorf("selection: plan: no pending step")
	}
	if len(ahead) != len(p.pairs) {
		return fmt.Errorf("selection: plan: %d outcomes for %d comparisons", len(ahead), len(p.pairs))
	}
	var err error
	switch p.kind {
	case stepSortAll:
		var order []int
		if order, err = orderGroup(p.group, p.pairs, ahead); err == nil {
			p.chosen = append(p.chosen, order[:p.need]...)
			p.done, p.active, p.need, p.sorted = true, nil, 0, nil
		}
	case stepSample:
		p.sorted, err = orderGroup(p.group, p.pairs, ahead)
	case stepPartition:
		err = p.partition(ahead)
	}
	if err != nil {
		return fmt.Errorf("selection: %s step: %w", p.kind, err)
	}
	p.pairs, p.group, p.pivots = nil, nil, nil
	return nil
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
	var above []int // everything ranked ahead of the current bucket
	for b, bk := range buckets {
		if len(above)+len(bk) >= p.need {
			// The boundary is inside bucket b (or at its end).
			p.chosen = append(p.chosen, above...)
			p.need -= len(above)
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
		above = append(above, bk...)
		above = append(above, p.pivots[b])
		if len(above) == p.need {
			p.chosen = append(p.chosen, above...)
			p.done, p.active, p.need, p.sorted = true, nil, 0, nil
			return nil
		}
	}
	return fmt.Errorf("no bucket holds the boundary") // unreachable: need < active
}

// result returns the selected positions in ascending order once next has
// reported done.
func (p *selectPlan) result() []int {
	out := slices.Clone(p.chosen)
	slices.Sort(out)
	return out
}

package topk

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestSelectPlanTiersImplied runs the plan on clear ranks and checks the
// tiers of the selected values against the outcomes it revealed: whenever
// tiers[a] < tiers[b], the transitive closure of the revealed outcomes
// ("x ranks ahead of y") places pos[a] ahead of pos[b], so a tier says
// nothing the outcomes do not; PlanTiers gives the same. A phase of at most 91 values (one sort step)
// orders every selected value: all tiers differ.
func TestSelectPlanTiersImplied(t *testing.T) {
	for _, c := range []struct{ n, k int }{{10, 4}, {91, 30}, {92, 40}, {200, 60}, {500, 200}, {1200, 240}} {
		for seed := range 3 {
			t.Run(fmt.Sprintf("n=%d/k=%d/seed=%d", c.n, c.k, seed), func(t *testing.T) {
				rank := rand.New(rand.NewPCG(uint64(c.n), uint64(seed))).Perm(c.n)
				p := newSelectPlan(c.n, c.k, share.NewPRG(share.Seed{byte(seed), 7}, "plan"))
				ahead := make([][]int, c.n) // ahead[x]: the values an outcome placed x directly ahead of
				for steps := 0; ; steps++ {
					pairs, done := p.next()
					if done {
						break
					}
					if steps > 64 {
						t.Fatal("no end")
					}
					out := make([]bool, len(pairs))
					for i, pr := range pairs {
						out[i] = rank[pr[0]] < rank[pr[1]]
						if out[i] {
							ahead[pr[0]] = append(ahead[pr[0]], pr[1])
						} else {
							ahead[pr[1]] = append(ahead[pr[1]], pr[0])
						}
					}
					if err := p.apply(out); err != nil {
						t.Fatal(err)
					}
				}
				pos, tiers := p.resultTiers()
				if want := wantTop(rank, c.k); fmt.Sprint(pos) != fmt.Sprint(want) {
					t.Fatalf("selected %v, want %v", pos, want)
				}
				ppos, ptiers, err := PlanTiers(rank, c.k, share.NewPRG(share.Seed{byte(seed), 7}, "plan"))
				if err != nil || fmt.Sprint(ppos, ptiers) != fmt.Sprint(pos, tiers) {
					t.Fatalf("PlanTiers: %v %v %v, the plan's %v %v", ppos, ptiers, err, pos, tiers)
				}
				distinct := map[int]bool{}
				for a := range pos {
					distinct[tiers[a]] = true
					reach := reachable(ahead, pos[a])
					for b := range pos {
						if tiers[a] < tiers[b] && !reach[pos[b]] {
							t.Fatalf("value %d (tier %d) is not revealed ahead of value %d (tier %d)", pos[a], tiers[a], pos[b], tiers[b])
						}
					}
				}
				if OneStep(c.n) && len(distinct) != c.k {
					t.Errorf("one sort step: %d tiers for %d selected values", len(distinct), c.k)
				}
				t.Logf("%d tiers for %d selected values", len(distinct), c.k)
			})
		}
	}
}

// reachable returns the values the revealed outcomes place behind x
// (directly or through a chain).
func reachable(ahead [][]int, x int) []bool {
	seen := make([]bool, len(ahead))
	stack := []int{x}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, w := range ahead[v] {
			if !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return seen
}

// TestPlanTiersRefuses: ranks that are no permutation, a negative k or no
// PRG are refused.
func TestPlanTiersRefuses(t *testing.T) {
	rng := share.NewPRG(share.Seed{}, "plan")
	for name, c := range map[string]struct {
		rank []int
		k    int
		rng  *share.PRG
	}{
		"repeated rank": {[]int{0, 0, 1}, 1, rng},
		"rank too big":  {[]int{0, 3, 1}, 1, rng},
		"negative k":    {[]int{0, 1}, -1, rng},
		"no PRG":        {[]int{0, 1}, 1, nil},
	} {
		if _, _, err := PlanTiers(c.rank, c.k, c.rng); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

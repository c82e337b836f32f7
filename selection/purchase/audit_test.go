package purchase

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/selection/topk"
	"github.com/selectformer/selectformer/share"
)

// TestCheckOrderBruteForce compares checkOrder's sweep with the count over
// every pair, on random tiers and scores with ties and near-ties.
func TestCheckOrderBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		m := 1 + rng.IntN(40)
		tier, score := make([]int, m), make([]float64, m)
		for k := range m {
			tier[k] = rng.IntN(1 + m/3)
			score[k] = float64(rng.IntN(12)) / 4
		}
		tol := float64(rng.IntN(3)) / 4
		ks := rng.Perm(m)
		got := map[int][3]float64{}
		checkOrder(ks, tier, score, tol, func(k, outcomes, contradicted int, excess float64) {
			got[k] = [3]float64{float64(outcomes), float64(contradicted), excess}
		})
		for k := range m {
			var want [3]float64
			for j := range m {
				switch {
				case tier[j] == tier[k]:
				case tier[j] < tier[k]: // j revealed ahead of k
					want[0]++
					if d := score[k] - score[j] - tol; d > 0 {
						want[1]++
						want[2] = max(want[2], d)
					}
				default: // j revealed behind k
					want[0]++
					if d := score[j] - score[k] - tol; d > 0 {
						want[1]++
						want[2] = max(want[2], d)
					}
				}
			}
			if got[k] != want {
				t.Fatalf("trial %d, candidate %d: got %v, want %v (tiers %v scores %v tol %v)", trial, k, got[k], want, tier, score, tol)
			}
		}
	}
}

// indexItems are items that name their own index (8 bytes): a Score
// function reads the index and looks its score up.
func indexItems(idx []int) [][]byte {
	out := make([][]byte, len(idx))
	for k, i := range idx {
		out[k] = binary.LittleEndian.AppendUint64(nil, uint64(i))
	}
	return out
}

func scoreTable(s []float64) func(int, [][]byte) ([]float64, error) {
	return func(_ int, items [][]byte) ([]float64, error) {
		out := make([]float64, len(items))
		for j, b := range items {
			out[j] = s[binary.LittleEndian.Uint64(b)]
		}
		return out, nil
	}
}

// audit runs the auditor on the verified candidates indices (all of them).
func audit(t testing.TB, a *Audit, indices []int) *Report {
	t.Helper()
	au, err := newAuditor(a, indices)
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range indexItems(indices) {
		if err := au.add(k, b); err != nil {
			t.Fatal(err)
		}
	}
	rep := &Report{Items: make([]Item, len(indices))}
	if err := au.finish(rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// liftTrial is one selection of k of n candidates whose secure scores are
// their plaintext scores (random, in [0, 1)) plus noise within ±eps, where
// the data owner lifted the candidates lifted by +10 (shifting its shares
// of their scores); the order revealed is TopKTiers's (PlanTiers). It
// returns the purchased candidates, their tiers and the plaintext scores.
func liftTrial(rng *rand.Rand, n, k int, lifted []int, eps float64, seed uint64) (pos, tiers []int, plain []float64) {
	plain = make([]float64, n)
	secure := make([]float64, n)
	for i := range n {
		plain[i] = rng.Float64()
		secure[i] = plain[i] + eps*(2*rng.Float64()-1)
	}
	for _, i := range lifted {
		secure[i] += 10
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if secure[a] > secure[b] {
			return -1
		}
		if secure[a] < secure[b] {
			return 1
		}
		return a - b
	})
	rank := make([]int, n)
	for r, i := range order {
		rank[i] = r
	}
	var s share.Seed
	binary.LittleEndian.PutUint64(s[:], seed)
	pos, tiers, err := topk.PlanTiers(rank, k, share.NewPRG(s, "pivots"))
	if err != nil {
		panic(err)
	}
	return pos, tiers, plain
}

// TestAuditHonestNeverFlagged: secure scores within ±ε of the plaintext
// ones and a tolerance of 2ε flag nothing, over 300 selections of each
// shape (one sort step; a rank step and a sort; sample, partition and
// sort), even with ε as large as the scores' spread.
func TestAuditHonestNeverFlagged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ n, k int }{{56, 20}, {200, 60}, {1200, 240}} {
		for _, eps := range []float64{0.001, 0.05, 0.5} {
			for trial := range 100 {
				pos, tiers, plain := liftTrial(rng, c.n, c.k, nil, eps, uint64(trial))
				rep := audit(t, &Audit{Phases: []PhaseOrder{{pos, tiers}}, Score: scoreTable(plain), Tolerance: []float64{2 * eps}}, pos)
				if rep.Flagged != 0 {
					t.Fatalf("n=%d k=%d ε=%g trial %d: an honest selection has %d flagged candidates", c.n, c.k, eps, trial, rep.Flagged)
				}
			}
		}
	}
}

// TestAuditDetectsLiftedItems measures how often the audit flags a data
// owner that lifts t candidates, drawn at random, above all others by
// shifting its shares of their scores (so that they are bought whatever
// they are worth), against the rates README.md ("The purchase") states.
// With a phase that orders all its survivors (one sort step: at most 91
// candidates) a lifted candidate escapes only if its own score is above
// every honest purchased candidate's, probability 1/(n − t + 1), and all t
// escape with probability 1/C(n, t); the test checks the measured rates
// within 4 standard deviations. With coarser tiers (the rank and partition
// steps of larger phases) it checks the measured rates against the
// README's lower bounds.
func TestAuditDetectsLiftedItems(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		n, k, t int
		// escape is the probability that a lifted candidate escapes, and
		// exact whether it is exact (else an upper bound the README states).
		escape float64
		exact  bool
		trials int
	}{
		{56, 20, 1, 1.0 / 56, true, 2000},
		{56, 20, 3, 1.0 / 54, true, 2000},
		{200, 60, 1, 0.10, false, 400},
		{200, 60, 3, 0.10, false, 400},
		{500, 200, 3, 0.04, false, 300},
	} {
		trials := c.trials
		t.Run(fmt.Sprintf("n=%d/k=%d/t=%d", c.n, c.k, c.t), func(t *testing.T) {
			escaped, allEscaped, outcomes := 0, 0, 0
			for trial := range trials {
				lifted := rng.Perm(c.n)[:c.t]
				pos, tiers, plain := liftTrial(rng, c.n, c.k, lifted, 0, uint64(trial))
				rep := audit(t, &Audit{Phases: []PhaseOrder{{pos, tiers}}, Score: scoreTable(plain), Tolerance: []float64{1e-9}}, pos)
				all := true
				for _, i := range lifted {
					k, ok := slices.BinarySearch(pos, i)
					if !ok {
						t.Fatalf("lifted candidate %d not bought", i)
					}
					outcomes += rep.Items[k].Audit.Outcomes
					if rep.Items[k].Audit.Flagged() {
						all = false
					} else {
						escaped++
					}
				}
				if all {
					allEscaped++
				}
			}
			rate := float64(escaped) / float64(trials*c.t)
			t.Logf("a lifted candidate escaped %.4f of the time (checked against %.1f outcomes on average); all %d escaped in %d of %d selections",
				rate, float64(outcomes)/float64(trials*c.t), c.t, allEscaped, trials)
			if c.exact {
				sd := math.Sqrt(c.escape * (1 - c.escape) / float64(trials*c.t))
				if math.Abs(rate-c.escape) > 4*sd+1e-3 {
					t.Errorf("escape rate %.4f, want %.4f ± %.4f", rate, c.escape, 4*sd)
				}
				if all := 1 / binomial(c.n, c.t); float64(allEscaped) > float64(trials)*all+4*math.Sqrt(float64(trials)*all)+1 {
					t.Errorf("all escaped %d times, want about %.2f", allEscaped, float64(trials)*all)
				}
			} else if rate > c.escape {
				t.Errorf("escape rate %.4f above the stated %.4f", rate, c.escape)
			}
		})
	}
}

func binomial(n, k int) float64 {
	r := 1.0
	for i := range k {
		r = r * float64(n-i) / float64(i+1)
	}
	return r
}

package purchase

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// PhaseOrder is what one phase of a selection revealed about the order of
// its survivors (selection records it; both parties hold it): Tiers[j] is
// the tier of Survivors[j] (ascending pool indices), 0 the best, as
// selection/topk's TopKTiers defines it: the phase's comparison outcomes
// place every survivor of a tier ahead of every survivor of a later tier.
type PhaseOrder struct {
	Survivors []int `json:"survivors"`
	Tiers     []int `json:"tiers"`
}

// Audit recomputes the scores of delivered candidates in the clear and
// checks them against what each phase revealed of their order.
//
// For phase p, Score(p, items) returns the plaintext scores of the items
// (canonical bytes) under phase p's proxy: ProxyScorer's, or any function
// that computes in the clear what the secure forward computed. Two
// candidates a, b of the phase's survivors in tiers t_a < t_b were
// revealed with score_a ≥ score_b in the secure computation; the audit
// counts the outcome as contradicted when the recomputed scores say
// s_b − s_a > Tolerance[p]. A secure score differs from the plaintext one
// by at most the forward's documented error ε (proxy/secure's ScoreError:
// its truncations round either way), so honest outcomes give
// s_b − s_a ≤ 2ε: Tolerance should be at least 2ε (ProxyTolerance), and
// near-ties within it are not evidence.
type Audit struct {
	// Phases holds the order each phase revealed.
	Phases []PhaseOrder
	// Score recomputes a phase's scores.
	Score func(phase int, items [][]byte) ([]float64, error)
	// Tolerance is each phase's allowance (see Audit).
	Tolerance []float64
}

// ItemAudit is the audit of one delivered candidate.
type ItemAudit struct {
	// Outcomes counts the revealed order relations it was checked in:
	// per phase, the other audited candidates of another tier.
	Outcomes int `json:"outcomes"`
	// Contradicted counts those the recomputed scores contradict by more
	// than the tolerance; Excess is the largest such contradiction beyond
	// the tolerance (in score units), Phase the first phase where one
	// occurred (0-based; -1 if none).
	Contradicted int     `json:"contradicted"`
	Excess       float64 `json:"excess,omitempty"`
	Phase        int     `json:"phase"`
	// Suspect marks it as one of the fewest candidates whose scores
	// explain every contradicted outcome (see Report.Suspects).
	Suspect bool `json:"suspect,omitempty"`
	// Scores holds its recomputed score per phase (NaN where it was no
	// survivor).
	Scores []float64 `json:"scores"`
	// Err says why it could not be scored ("" if it was).
	Err string `json:"error,omitempty"`
}

// Flagged reports whether the audit flags the candidate.
func (a *ItemAudit) Flagged() bool { return a.Contradicted > 0 || a.Err != "" }

// Batch bounds of the audit's scoring: items are scored in batches of at
// most auditBatch items and auditBatchBytes bytes.
const (
	auditBatch      = 64
	auditBatchBytes = 16 << 20
)

// auditor collects verified items, scores them in batches and, at the end,
// checks the revealed orders.
type auditor struct {
	a       *Audit
	indices []int       // the purchased candidates
	tier    [][]int     // tier[p][k]: purchased candidate k's tier in phase p, -1 if none
	scores  [][]float64 // scores[p][k]
	errs    []string    // errs[k]: why candidate k could not be scored
	audited []bool
	batch   []int // positions k of the pending batch
	items   [][]byte
	bytes   int
}

func newAuditor(a *Audit, indices []int) (*auditor, error) {
	if a.Score == nil {
		return nil, fmt.Errorf("purchase: audit: no Score function")
	}
	if len(a.Tolerance) != len(a.Phases) {
		return nil, fmt.Errorf("purchase: audit: %d tolerances for %d phases", len(a.Tolerance), len(a.Phases))
	}
	au := &auditor{a: a, indices: indices, errs: make([]string, len(indices)), audited: make([]bool, len(indices))}
	for p, ph := range a.Phases {
		if t := a.Tolerance[p]; !(t >= 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("purchase: audit: phase %d tolerance %v", p+1, t)
		}
		if !sortedDistinct(ph.Survivors) || len(ph.Tiers) != len(ph.Survivors) {
			return nil, fmt.Errorf("purchase: audit: phase %d: %d survivors (ascending, distinct?) with %d tiers", p+1, len(ph.Survivors), len(ph.Tiers))
		}
		tier := make([]int, len(indices))
		sc := make([]float64, len(indices))
		for k, i := range indices {
			tier[k], sc[k] = -1, math.NaN()
			if j, ok := slices.BinarySearch(ph.Survivors, i); ok {
				if ph.Tiers[j] < 0 {
					return nil, fmt.Errorf("purchase: audit: phase %d: tier %d", p+1, ph.Tiers[j])
				}
				tier[k] = ph.Tiers[j]
			}
		}
		au.tier = append(au.tier, tier)
		au.scores = append(au.scores, sc)
	}
	return au, nil
}

// inAudit reports whether purchased candidate k survived any phase.
func (au *auditor) inAudit(k int) bool {
	for _, t := range au.tier {
		if t[k] >= 0 {
			return true
		}
	}
	return false
}

// add takes verified candidate k's item (copied), scoring a full batch.
func (au *auditor) add(k int, item []byte) error {
	if !au.inAudit(k) {
		return nil
	}
	au.audited[k] = true
	au.batch = append(au.batch, k)
	au.items = append(au.items, append([]byte(nil), item...))
	au.bytes += len(item)
	if len(au.batch) >= auditBatch || au.bytes >= auditBatchBytes {
		return au.flush()
	}
	return nil
}

// flush scores the pending batch for every phase whose survivors hold
// some of it. A batch that fails is scored item by item, so that only the
// items that cannot be scored are marked.
func (au *auditor) flush() error {
	for p := range au.tier {
		var ks []int
		var items [][]byte
		for j, k := range au.batch {
			if au.tier[p][k] >= 0 && au.errs[k] == "" {
				ks, items = append(ks, k), append(items, au.items[j])
			}
		}
		if len(ks) == 0 {
			continue
		}
		s, err := au.score(p, items)
		if err != nil {
			for j, k := range ks {
				one, err := au.score(p, items[j:j+1])
				if err != nil {
					au.errs[k] = err.Error()
					continue
				}
				au.scores[p][k] = one[0]
			}
			continue
		}
		for j, k := range ks {
			au.scores[p][k] = s[j]
		}
	}
	au.batch, au.items, au.bytes = au.batch[:0], au.items[:0], 0
	return nil
}

// score calls Score and checks what it returns.
func (au *auditor) score(p int, items [][]byte) ([]float64, error) {
	s, err := au.a.Score(p, items)
	if err != nil {
		return nil, fmt.Errorf("phase %d: %w", p+1, err)
	}
	if len(s) != len(items) {
		return nil, fmt.Errorf("phase %d: %d scores for %d items", p+1, len(s), len(items))
	}
	for _, v := range s {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("phase %d: a score of %v", p+1, v)
		}
	}
	return s, nil
}

// finish scores the last batch and checks every phase's order, filling the
// report's audits.
func (au *auditor) finish(rep *Report) error {
	if err := au.flush(); err != nil {
		return err
	}
	res := make([]*ItemAudit, len(au.indices))
	for k := range res {
		if !au.audited[k] {
			continue
		}
		sc := make([]float64, len(au.tier))
		for p := range sc {
			sc[p] = au.scores[p][k]
		}
		res[k] = &ItemAudit{Phase: -1, Scores: sc, Err: au.errs[k]}
	}
	for p := range au.tier {
		var ks []int
		for k, ia := range res {
			if ia != nil && ia.Err == "" && au.tier[p][k] >= 0 {
				ks = append(ks, k)
			}
		}
		checkOrder(ks, au.tier[p], au.scores[p], au.a.Tolerance[p], func(k, outcomes, contradicted int, excess float64) {
			ia := res[k]
			ia.Outcomes += outcomes
			if contradicted > 0 {
				ia.Contradicted += contradicted
				ia.Excess = max(ia.Excess, excess)
				if ia.Phase < 0 {
					ia.Phase = p
				}
			}
		})
	}
	rep.SuspectsFound = au.suspects(res)
	for k, ia := range res {
		if ia == nil {
			continue
		}
		rep.Items[k].Audit = ia
		rep.Audited++
		if ia.Flagged() {
			rep.Flagged++
		}
		if ia.Suspect {
			rep.Suspects++
		}
	}
	return nil
}

// maxSuspectItems bounds the audited candidates of a phase for which the
// audit looks for suspects (the search goes over pairs).
const maxSuspectItems = 1 << 13

// suspects marks a small set of candidates that explains every
// contradicted outcome: every contradicted pair holds one of them (a
// vertex cover of the contradictions, chosen greedily, the candidate in
// the most contradictions first). An outcome contradicts the scores of
// both its candidates; a candidate whose score was shifted, or that was
// evaluated on other data, contradicts every candidate it moved past, so
// it stands out. It reports false (and marks none) when a phase has more
// than maxSuspectItems audited candidates.
func (au *auditor) suspects(res []*ItemAudit) bool {
	adj := map[int]map[int]int{}
	for p := range au.tier {
		var ks []int
		for k, ia := range res {
			if ia != nil && ia.Err == "" && au.tier[p][k] >= 0 {
				ks = append(ks, k)
			}
		}
		if len(ks) > maxSuspectItems {
			return false
		}
		tier, score, tol := au.tier[p], au.scores[p], au.a.Tolerance[p]
		slices.SortFunc(ks, func(a, b int) int { return cmpFloat(score[a], score[b]) })
		for x, a := range ks {
			// Candidates scoring above a by more than tol, revealed behind it.
			for _, b := range ks[x+1:] {
				if score[b]-score[a] > tol && tier[b] > tier[a] {
					for _, e := range [][2]int{{a, b}, {b, a}} {
						if adj[e[0]] == nil {
							adj[e[0]] = map[int]int{}
						}
						adj[e[0]][e[1]]++
					}
				}
			}
		}
	}
	degree := func(k int) int {
		d := 0
		for _, w := range adj[k] {
			d += w
		}
		return d
	}
	for len(adj) > 0 {
		best, bd := -1, 0
		for k := range adj {
			if d := degree(k); d > bd || d == bd && k < best {
				best, bd = k, d
			}
		}
		res[best].Suspect = true
		for j := range adj[best] {
			delete(adj[j], best)
			if len(adj[j]) == 0 {
				delete(adj, j)
			}
		}
		delete(adj, best)
	}
	return true
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkOrder checks one phase's revealed order among the candidates ks
// (positions into tier and score): for each, it reports the relations it
// is in (the candidates of other tiers), how many of them the scores
// contradict by more than tol (a candidate of a better tier scoring below
// its own by more than tol, or one of a worse tier scoring above it by
// more than tol) and the largest excess over tol. O(m log m) for m
// candidates: a sweep over the tiers with a Fenwick tree of score ranks.
func checkOrder(ks []int, tier []int, score []float64, tol float64, report func(k, outcomes, contradicted int, excess float64)) {
	m := len(ks)
	if m == 0 {
		return
	}
	// The candidates by tier, and the sorted scores for the ranks.
	byTier := slices.Clone(ks)
	slices.SortStableFunc(byTier, func(a, b int) int { return tier[a] - tier[b] })
	sorted := make([]float64, m)
	for j, k := range ks {
		sorted[j] = score[k]
	}
	slices.Sort(sorted)
	contra := make(map[int]int, m)
	excess := make(map[int]float64, m)
	// groups: [lo, hi) ranges of byTier with one tier.
	var groups [][2]int
	for lo := 0; lo < m; {
		hi := lo + 1
		for hi < m && tier[byTier[hi]] == tier[byTier[lo]] {
			hi++
		}
		groups = append(groups, [2]int{lo, hi})
		lo = hi
	}
	// Better tiers first: count the candidates ahead of k whose score is
	// below score_k − tol.
	fw := newFenwick(m)
	lowest := math.Inf(1)
	for _, g := range groups {
		for _, k := range byTier[g[0]:g[1]] {
			c := fw.count(sort.SearchFloat64s(sorted, score[k]-tol)) // strictly below
			if c > 0 {
				contra[k] += c
				excess[k] = max(excess[k], score[k]-tol-lowest)
			}
		}
		for _, k := range byTier[g[0]:g[1]] {
			fw.add(sort.SearchFloat64s(sorted, score[k]))
			lowest = min(lowest, score[k])
		}
	}
	// Worse tiers first: count the candidates behind k whose score is
	// above score_k + tol.
	fw = newFenwick(m)
	highest, behind := math.Inf(-1), 0
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		for _, k := range byTier[g[0]:g[1]] {
			// Scores ≤ score_k + tol among those behind; the rest exceed it.
			upTo := sort.Search(m, func(j int) bool { return sorted[j] > score[k]+tol })
			if c := behind - fw.count(upTo); c > 0 {
				contra[k] += c
				excess[k] = max(excess[k], highest-score[k]-tol)
			}
		}
		for _, k := range byTier[g[0]:g[1]] {
			fw.add(sort.SearchFloat64s(sorted, score[k]))
			highest = max(highest, score[k])
			behind++
		}
	}
	for _, g := range groups {
		for _, k := range byTier[g[0]:g[1]] {
			report(k, m-(g[1]-g[0]), contra[k], excess[k])
		}
	}
}

// fenwick counts inserted ranks below a bound.
type fenwick []int

func newFenwick(n int) fenwick { return make(fenwick, n+1) }

// add inserts rank r (0-based).
func (f fenwick) add(r int) {
	for i := r + 1; i < len(f); i += i & -i {
		f[i]++
	}
}

// count returns how many inserted ranks are below r.
func (f fenwick) count(r int) int {
	s := 0
	for i := min(r, len(f)-1); i > 0; i -= i & -i {
		s += f[i]
	}
	return s
}

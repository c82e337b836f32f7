package dataset

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// NewRand returns a deterministic PCG-backed generator for seed, the form of
// randomness every helper of this package takes.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
}

// Indices returns [0, 1, ..., n-1].
func Indices(n int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// Shuffled returns a shuffled copy of idx. The Fisher–Yates shuffle draws
// from rng.Uint64 only, so its output for a seed does not depend on the
// implementation of rand.Shuffle.
func Shuffled(idx []int, rng *rand.Rand) []int {
	out := slices.Clone(idx)
	for i := len(out) - 1; i > 0; i-- {
		j := int(boundedUint64(rng, uint64(i+1)))
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// boundedUint64 returns a uniform value in [0, n) by rejection sampling.
func boundedUint64(rng *rand.Rand, n uint64) uint64 {
	limit := math.MaxUint64 - math.MaxUint64%n // multiples of n below limit are uniform
	for {
		if v := rng.Uint64(); v < limit {
			return v % n
		}
	}
}

// ClassCounts returns how many of idx carry each label in [0, numClasses).
func ClassCounts(labels, idx []int, numClasses int) ([]int, error) {
	counts := make([]int, numClasses)
	for _, i := range idx {
		c, err := labelAt(labels, i, numClasses)
		if err != nil {
			return nil, err
		}
		counts[c]++
	}
	return counts, nil
}

// ByClass groups idx by label, keeping the order of idx within each class.
func ByClass(labels, idx []int, numClasses int) ([][]int, error) {
	groups := make([][]int, numClasses)
	for _, i := range idx {
		c, err := labelAt(labels, i, numClasses)
		if err != nil {
			return nil, err
		}
		groups[c] = append(groups[c], i)
	}
	return groups, nil
}

func labelAt(labels []int, i, numClasses int) (int, error) {
	if i < 0 || i >= len(labels) {
		return 0, fmt.Errorf("index %d out of range [0, %d)", i, len(labels))
	}
	c := labels[i]
	if c < 0 || c >= numClasses {
		return 0, fmt.Errorf("index %d has label %d outside [0, %d)", i, c, numClasses)
	}
	return c, nil
}

// Bootstrap draws n distinct indices uniformly at random from idx (the
// paper's S_boot, bought without selection). The result is in random order.
func Bootstrap(idx []int, n int, rng *rand.Rand) ([]int, error) {
	if n < 0 || n > len(idx) {
		return nil, fmt.Errorf("bootstrap: sample of %d from %d indices", n, len(idx))
	}
	return Shuffled(idx, rng)[:n], nil
}

// SplitPublic splits idx at random into a "public pretraining" part of
// nPublic indices and the disjoint rest, each in the original order of idx.
func SplitPublic(idx []int, nPublic int, rng *rand.Rand) (public, rest []int, err error) {
	if nPublic < 0 || nPublic > len(idx) {
		return nil, nil, fmt.Errorf("split public: %d of %d indices", nPublic, len(idx))
	}
	perm := Shuffled(Indices(len(idx)), rng)
	inPublic := make([]bool, len(idx))
	for _, p := range perm[:nPublic] {
		inPublic[p] = true
	}
	public = make([]int, 0, nPublic)
	rest = make([]int, 0, len(idx)-nPublic)
	for k, i := range idx {
		if inPublic[k] {
			public = append(public, i)
		} else {
			rest = append(rest, i)
		}
	}
	return public, rest, nil
}

// BalancedSample draws perClass indices of every class in [0, numClasses)
// from idx at random (a balanced test or validation set). The result is
// shuffled. It fails if some class has fewer than perClass members.
func BalancedSample(labels, idx []int, numClasses, perClass int, rng *rand.Rand) ([]int, error) {
	if perClass < 0 {
		return nil, fmt.Errorf("balanced sample: negative size %d per class", perClass)
	}
	groups, err := ByClass(labels, idx, numClasses)
	if err != nil {
		return nil, fmt.Errorf("balanced sample: %w", err)
	}
	out := make([]int, 0, perClass*numClasses)
	for c, g := range groups {
		if len(g) < perClass {
			return nil, fmt.Errorf("balanced sample: class %d has %d members, need %d", c, len(g), perClass)
		}
		out = append(out, Shuffled(g, rng)[:perClass]...)
	}
	return Shuffled(out, rng), nil
}

// ImbalancedPool removes members of each class at random so that a fraction
// keep[c] (rounded to nearest) of class c remains, building the paper's
// skewed unlabeled pool. The result keeps the order of idx.
func ImbalancedPool(labels, idx []int, keep []float64, rng *rand.Rand) ([]int, error) {
	groups, err := ByClass(labels, idx, len(keep))
	if err != nil {
		return nil, fmt.Errorf("imbalanced pool: %w", err)
	}
	kept := make(map[int]bool)
	for c, g := range groups {
		f := keep[c]
		if !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("imbalanced pool: keep fraction %v of class %d outside [0, 1]", f, c)
		}
		n := int(math.Round(f * float64(len(g))))
		for _, i := range Shuffled(g, rng)[:n] {
			kept[i] = true
		}
	}
	out := make([]int, 0, len(kept))
	for _, i := range idx {
		if kept[i] {
			out = append(out, i)
			delete(kept, i) // a repeated index is kept once
		}
	}
	return out, nil
}

// LongTailKeep returns keep fractions for ImbalancedPool that decay
// geometrically from 1 for class 0 to minFrac for the last class:
// keep[c] = minFrac^(c/(numClasses-1)), the usual "long-tailed" skew.
func LongTailKeep(numClasses int, minFrac float64) ([]float64, error) {
	if numClasses < 1 {
		return nil, fmt.Errorf("long-tail keep: %d classes", numClasses)
	}
	if !(minFrac > 0 && minFrac <= 1) {
		return nil, fmt.Errorf("long-tail keep: minimum fraction %v outside (0, 1]", minFrac)
	}
	keep := make([]float64, numClasses)
	for c := range keep {
		if numClasses == 1 {
			keep[c] = 1
			continue
		}
		keep[c] = math.Pow(minFrac, float64(c)/float64(numClasses-1))
	}
	return keep, nil
}

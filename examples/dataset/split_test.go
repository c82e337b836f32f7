package dataset

import (
	"math"
	"reflect"
	"slices"
	"testing"
)

// labelsOf returns labels with counts[c] members of class c, interleaved.
func labelsOf(counts []int) []int {
	var labels []int
	left := slices.Clone(counts)
	for more := true; more; {
		more = false
		for c := range left {
			if left[c] > 0 {
				labels = append(labels, c)
				left[c]--
				more = true
			}
		}
	}
	return labels
}

func disjoint(t *testing.T, a, b []int) {
	t.Helper()
	in := map[int]bool{}
	for _, i := range a {
		in[i] = true
	}
	for _, i := range b {
		if in[i] {
			t.Fatalf("index %d in both parts", i)
		}
	}
}

func distinct(t *testing.T, idx []int) {
	t.Helper()
	s := slices.Clone(idx)
	slices.Sort(s)
	if len(slices.Compact(s)) != len(idx) {
		t.Fatalf("repeated indices in %v", idx)
	}
}

func TestShuffledIsPermutationAndDeterministic(t *testing.T) {
	idx := Indices(50)
	a := Shuffled(idx, NewRand(7))
	b := Shuffled(idx, NewRand(7))
	c := Shuffled(idx, NewRand(8))
	if !reflect.DeepEqual(a, b) {
		t.Error("same seed, different shuffles")
	}
	if reflect.DeepEqual(a, c) || reflect.DeepEqual(a, idx) {
		t.Error("shuffle did not depend on the seed")
	}
	s := slices.Clone(a)
	slices.Sort(s)
	if !reflect.DeepEqual(s, idx) {
		t.Errorf("not a permutation: %v", a)
	}
	if !reflect.DeepEqual(idx, Indices(50)) {
		t.Error("Shuffled modified its input")
	}
}

// TestShuffledUniform checks that every position is roughly equally likely.
func TestShuffledUniform(t *testing.T) {
	rng := NewRand(3)
	const n, trials = 5, 20000
	var pos [n][n]int
	for k := 0; k < trials; k++ {
		for p, v := range Shuffled(Indices(n), rng) {
			pos[v][p]++
		}
	}
	for v := range pos {
		for p, c := range pos[v] {
			if math.Abs(float64(c)-trials/n) > 5*math.Sqrt(trials/n) {
				t.Errorf("value %d at position %d %d times, want about %d", v, p, c, trials/n)
			}
		}
	}
}

func TestBootstrapAndSplitPublic(t *testing.T) {
	idx := Indices(100)[10:]
	boot, err := Bootstrap(idx, 30, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	distinct(t, boot)
	if len(boot) != 30 {
		t.Fatalf("bootstrap of %d", len(boot))
	}
	for _, i := range boot {
		if i < 10 || i >= 100 {
			t.Fatalf("bootstrap index %d not from idx", i)
		}
	}
	pub, rest, err := SplitPublic(idx, 25, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(pub) != 25 || len(rest) != 65 {
		t.Fatalf("split %d/%d", len(pub), len(rest))
	}
	disjoint(t, pub, rest)
	all := append(slices.Clone(pub), rest...)
	slices.Sort(all)
	if !reflect.DeepEqual(all, idx) {
		t.Error("split parts do not cover idx")
	}
	if !slices.IsSorted(pub) || !slices.IsSorted(rest) {
		t.Error("split parts lost the order of idx")
	}
	pub2, _, _ := SplitPublic(idx, 25, NewRand(1))
	if !reflect.DeepEqual(pub, pub2) {
		t.Error("SplitPublic not deterministic")
	}
	for _, n := range []int{-1, 91} {
		if _, err := Bootstrap(idx, n, NewRand(1)); err == nil {
			t.Errorf("Bootstrap(%d) succeeded", n)
		}
		if _, _, err := SplitPublic(idx, n, NewRand(1)); err == nil {
			t.Errorf("SplitPublic(%d) succeeded", n)
		}
	}
}

func TestBalancedSample(t *testing.T) {
	labels := labelsOf([]int{50, 20, 35})
	idx := Indices(len(labels))
	got, err := BalancedSample(labels, idx, 3, 20, NewRand(2))
	if err != nil {
		t.Fatal(err)
	}
	distinct(t, got)
	if c, _ := ClassCounts(labels, got, 3); !reflect.DeepEqual(c, []int{20, 20, 20}) {
		t.Errorf("counts %v", c)
	}
	if _, err := BalancedSample(labels, idx, 3, 21, NewRand(2)); err == nil {
		t.Error("sampled 21 from a class of 20")
	}
	if _, err := BalancedSample(labels, idx, 2, 1, NewRand(2)); err == nil {
		t.Error("accepted a label outside numClasses")
	}
	if _, err := BalancedSample(labels, []int{len(labels)}, 3, 1, NewRand(2)); err == nil {
		t.Error("accepted an out-of-range index")
	}
}

func TestImbalancedPool(t *testing.T) {
	labels := labelsOf([]int{100, 100, 100, 100})
	idx := Indices(len(labels))
	tests := []struct {
		keep []float64
		want []int
	}{
		{[]float64{1, 0.5, 0.1, 0}, []int{100, 50, 10, 0}},
		{[]float64{0.333, 0.666, 1, 0.25}, []int{33, 67, 100, 25}},
	}
	for _, tc := range tests {
		pool, err := ImbalancedPool(labels, idx, tc.keep, NewRand(5))
		if err != nil {
			t.Fatal(err)
		}
		distinct(t, pool)
		if !slices.IsSorted(pool) {
			t.Error("pool lost the order of idx")
		}
		if c, _ := ClassCounts(labels, pool, 4); !reflect.DeepEqual(c, tc.want) {
			t.Errorf("keep %v: counts %v, want %v", tc.keep, c, tc.want)
		}
	}
	// Pool, test set and public split built together are disjoint.
	public, rest, _ := SplitPublic(idx, 40, NewRand(9))
	test, _ := BalancedSample(labels, rest, 4, 10, NewRand(9))
	inTest := map[int]bool{}
	for _, i := range test {
		inTest[i] = true
	}
	var remaining []int
	for _, i := range rest {
		if !inTest[i] {
			remaining = append(remaining, i)
		}
	}
	keep, _ := LongTailKeep(4, 0.1)
	pool, err := ImbalancedPool(labels, remaining, keep, NewRand(9))
	if err != nil {
		t.Fatal(err)
	}
	disjoint(t, pool, test)
	disjoint(t, pool, public)
	disjoint(t, test, public)
	if _, err := ImbalancedPool(labels, idx, []float64{1, 1, 1, 1.5}, NewRand(1)); err == nil {
		t.Error("accepted a keep fraction above 1")
	}
	if _, err := ImbalancedPool(labels, idx, []float64{1, 1}, NewRand(1)); err == nil {
		t.Error("accepted labels beyond len(keep)")
	}
}

func TestLongTailKeep(t *testing.T) {
	keep, err := LongTailKeep(3, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0.1, 0.01}
	for i := range want {
		if math.Abs(keep[i]-want[i]) > 1e-12 {
			t.Errorf("keep = %v, want %v", keep, want)
		}
	}
	if k, _ := LongTailKeep(1, 0.5); !reflect.DeepEqual(k, []float64{1}) {
		t.Errorf("one class: %v", k)
	}
	for _, bad := range []struct {
		n int
		f float64
	}{{0, 0.5}, {3, 0}, {3, 1.5}, {3, math.NaN()}} {
		if _, err := LongTailKeep(bad.n, bad.f); err == nil {
			t.Errorf("LongTailKeep(%d, %v) succeeded", bad.n, bad.f)
		}
	}
}

func TestSubsetMethods(t *testing.T) {
	s := &ImageSet{Width: 1, Height: 1, Images: [][]float64{{0}, {1}}, Labels: []int{3, 4}}
	sub, err := s.Subset([]int{1, 1, 0})
	if err != nil || !reflect.DeepEqual(sub.Labels, []int{4, 4, 3}) {
		t.Errorf("image subset %v, %v", sub, err)
	}
	if _, err := s.Subset([]int{2}); err == nil {
		t.Error("image subset accepted index 2")
	}
	ts := &TextSet{Texts: []string{"a", "b"}, Labels: []int{0, 1}, ClassNames: []string{"x", "y"}}
	tsub, err := ts.Subset([]int{1})
	if err != nil || !reflect.DeepEqual(tsub.Texts, []string{"b"}) {
		t.Errorf("text subset %v, %v", tsub, err)
	}
	if _, err := ts.Subset([]int{-1}); err == nil {
		t.Error("text subset accepted index -1")
	}
}

package topk

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// TestTopKExact runs the secure TopK on random inputs with and without ties,
// for sizes that take one sort step (n ≤ 91), the rank–sort path (up to
// about 650 values) and the sample–partition–sort path, every edge k (0, 1,
// n−1, n, beyond n) and three inputs each: both parties return exactly the
// plaintext top-k (ties to the smaller key), the same statistics, 6 rounds
// per step (the bounded comparison), and no step makes more comparisons than its budget.
func TestTopKExact(t *testing.T) {
	cases := []struct {
		name    string
		n       int
		ks      []int
		levels  int // values drawn from this many distinct levels (ties)
		reverse bool
	}{
		{"distinct", 300, []int{60, 150}, 0, false},
		{"many ties", 300, []int{90}, 5, false},
		{"all equal", 100, []int{17, 99}, 1, false},
		{"one step", 91, []int{1, 45}, 3, false},
		{"edges, small", 64, []int{0, 1, 63, 64, 65}, 0, false},
		{"edges, large", 1200, []int{0, 1, 240, 1199, 1200, 5000}, 0, false},
		{"edges, ties", 700, []int{1, 699}, 4, false},
		{"reverse keys", 257, []int{100}, 7, true},
		{"one value", 1, []int{0, 1, 2}, 0, false},
	}
	for ci, c := range cases {
		for _, k := range c.ks {
			for in := range 3 {
				t.Run(fmt.Sprintf("%s/k=%d/input%d", c.name, k, in), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(ci), uint64(in)))
					fp := share.DefaultFixedPoint
					vals := make([]float64, c.n)
					keys := make([]int, c.n)
					for i := range vals {
						if c.levels > 0 {
							vals[i] = float64(rng.IntN(c.levels)) * 0.25
						} else {
							vals[i] = rng.Float64()*20 - 10
						}
						vals[i] = quantize(fp, vals[i])
						keys[i] = 3 * i
						if c.reverse {
							keys[i] = 10000 - 3*i
						}
					}
					want := plainTopK(vals, keys, k)
					budget := max(minStepBudget, stepBudgetFactor*c.n)
					got, stats, _ := secureTopK(t, vals, keys, k, share.Seed{7, byte(ci), byte(in)}, func(kind stepKind, pairs [][2]int, _ []bool) {
						b := budget
						if kind == stepRank {
							b = max(budget, rankStepBudget)
						}
						if len(pairs) > b {
							t.Errorf("a %v step of %d comparisons, budget %d", kind, len(pairs), b)
						}
					})
					if !slices.Equal(got[0], got[1]) {
						t.Fatalf("parties disagree: %v vs %v", got[0], got[1])
					}
					if !slices.Equal(got[0], want) {
						t.Fatalf("got %v, want %v", got[0], want)
					}
					if stats[0] != stats[1] {
						t.Fatalf("stats differ: %+v %+v", stats[0], stats[1])
					}
					st := stats[0]
					if k > 0 && k < c.n && st.Steps > 4 {
						t.Errorf("%d steps", st.Steps)
					}
				})
			}
		}
	}
}

// secureTopK shares vals (the data owner's input) and runs topK on both
// parties at the default encoding; it checks that the run costs exactly 6
// rounds per step and that party 0 sent exactly the bytes of the steps'
// CompareRevealBoundeds (129 words per 64 comparisons, 6 messages of a
// 10-byte header each). trace, if not nil, sees party 0's steps. It returns
// both parties' results and statistics, and the bytes party 0 sent.
func secureTopK(t *testing.T, vals []float64, keys []int, k int, seed share.Seed, trace stepTrace) ([2][]int, [2]Stats, int64) {
	t.Helper()
	return secureTopKFP(t, share.DefaultFixedPoint, vals, keys, k, seed, trace)
}

// secureTopKFP is secureTopK on sessions of encoding fp: with more than 17
// fractional bits it checks the 64-bit comparison's 7 rounds per step and
// 271 words per 64 comparisons in 7 messages instead.
func secureTopKFP(t *testing.T, fp share.FixedPoint, vals []float64, keys []int, k int, seed share.Seed, trace stepTrace) ([2][]int, [2]Stats, int64) {
	t.Helper()
	n := len(vals)
	rounds, cost := int64(6), compareRevealBoundedBytes
	if fp.FracBits > 17 {
		rounds, cost = 7, compareRevealBytes
	}
	enc, err := fp.EncodeTensor(vals, n)
	if err != nil {
		t.Fatal(err)
	}
	var got [2][]int
	var stats [2]Stats
	var wantBytes, sent int64
	sessionPairFP(t, fp, func(ctx context.Context, s *protocol.Session) error {
		x, err := shareFromDataOwner(s, enc, n)
		if err != nil {
			return err
		}
		var tr stepTrace
		if s.Party() == 0 {
			tr = func(kind stepKind, pairs [][2]int, ahead []bool) {
				wantBytes += cost(len(pairs))
				if trace != nil {
					trace(kind, pairs, ahead)
				}
			}
		}
		c0 := s.Stream().Stats()
		got[s.Party()], _, stats[s.Party()], err = topK(ctx, s, x, keys, k, share.NewPRG(seed, "pivots"), tr)
		d := s.Stream().Stats().Sub(c0)
		if err == nil && (d.Rounds != rounds*int64(stats[s.Party()].Steps) || d.Rounds != stats[s.Party()].Rounds) {
			t.Errorf("party %d: %d rounds (%d counted) for %d steps", s.Party(), d.Rounds, stats[s.Party()].Rounds, stats[s.Party()].Steps)
		}
		if s.Party() == 0 {
			sent = d.BytesSent
			if err == nil && d.BytesSent != wantBytes {
				t.Errorf("party 0 sent %d bytes, the steps' comparisons cost %d", d.BytesSent, wantBytes)
			}
		}
		return err
	})
	return got, stats, sent
}

// compareRevealBytes is what one party sends for one CompareReveal of m
// comparisons (m ≤ 2^16, so every message fits a frame): the sign circuit's
// 270·W words in 6 messages and the opening's W, W = ⌈m/64⌉.
func compareRevealBytes(m int) int64 {
	w := int64(m+63) / 64
	return 8*271*w + 7*10
}

// compareRevealBoundedBytes is what one party sends for one
// CompareRevealBounded of m comparisons (m ≤ 2^16): the 32-bit sign
// circuit's 128·W words in 5 messages and the opening's W.
func compareRevealBoundedBytes(m int) int64 {
	w := int64(m+63) / 64
	return 8*129*w + 6*10
}

// TestTopKCostFixedSeed pins the exact cost of TopK for fixed inputs and
// seeds. For 64 values it is one sort step: 64·63/2 = 2016 comparisons, 6
// rounds, and the CompareRevealBounded's 129·32 words. For 1,000 values keeping
// 200 it is sample (95 values: 4465 comparisons), partition (8 pivots: 992·8
// = 7936) and sort of the last 77 values (2926): 15,327 comparisons, 18
// rounds (the single-pivot QuickSelect took 7 steps, 49 rounds and 191
// comparisons for the 64 values, 9 steps, 63 rounds and 1,716 comparisons
// for the 1,000). For the quickstart's 500 keeping 200 it is a rank step
// (a sample S of 32: 32·31/2 + 468·32 = 15,472 comparisons) and the sort of
// the 31 values of the band (465): 15,937 comparisons, 12 rounds (the
// sample, partition and sort steps took 3 steps and 6,220 comparisons on
// this input and seed). Party 0's bytes are pinned as well; with the 64-bit
// comparison (7 rounds, 271 words per 64 comparisons) they were
// 8·271·32 + 70, 8·271·240 + 210 and 8·271·250 + 140.
func TestTopKCostFixedSeed(t *testing.T) {
	cases := []struct {
		name  string
		n, k  int
		want  Stats
		kinds []stepKind
		bytes int64
	}{
		{"one sort", 64, 20, Stats{Comparisons: 2016, Steps: 1, Rounds: 6, Sorted: 64}, []stepKind{stepSortAll}, 8*129*32 + 60},
		{"sample, partition, sort", 1000, 200, Stats{Comparisons: 15327, Steps: 3, Rounds: 18, Sorted: 95 + 77, Pivots: 8},
			[]stepKind{stepSample, stepPartition, stepSortAll}, 8*129*(70+124+46) + 3*60},
		{"rank, sort", 500, 200, Stats{Comparisons: 15937, Steps: 2, Rounds: 12, Sorted: 32 + 31, Pivots: 32},
			[]stepKind{stepRank, stepSortAll}, 8*129*(242+8) + 2*60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(c.n)))
			vals := make([]float64, c.n)
			for i := range vals {
				vals[i] = quantize(share.DefaultFixedPoint, rng.NormFloat64())
			}
			var kinds []stepKind
			var sizes []int
			got, stats, bytes := secureTopK(t, vals, nil, c.k, share.Seed{42}, func(kind stepKind, pairs [][2]int, _ []bool) {
				kinds, sizes = append(kinds, kind), append(sizes, len(pairs))
			})
			if !slices.Equal(got[0], plainTopK(vals, seqKeys(c.n), c.k)) {
				t.Fatal("wrong selection")
			}
			t.Logf("%+v, steps %v of %v comparisons", stats[0], kinds, sizes)
			if bytes != c.bytes {
				t.Errorf("party 0 sent %d bytes, want %d", bytes, c.bytes)
			}
			if stats[0] != c.want || !slices.Equal(kinds, c.kinds) {
				t.Errorf("got %+v, steps %v; want %+v, steps %v", stats[0], kinds, c.want, c.kinds)
			}
			// The comparisons follow from the step sizes: the groups sorted
			// (Sorted), the pivots, and a rank step's sample (its Pivots:
			// these cases have one rank step at most, the first).
			var byKind, sorted int64
			n := int64(c.n)
			for i, kind := range kinds {
				switch kind {
				case stepSample:
					s := int64(sampleSizeFor(c.n))
					byKind += s * (s - 1) / 2
					sorted += s
				case stepPartition:
					byKind += int64(sizes[i])
				case stepRank:
					s := stats[0].Pivots
					byKind += s*(s-1)/2 + (n-s)*s
					sorted += s
				case stepSortAll:
					m := stats[0].Sorted - sorted
					byKind += m * (m - 1) / 2
				}
			}
			if byKind != stats[0].Comparisons {
				t.Errorf("the steps' sizes add up to %d comparisons, counted %d", byKind, stats[0].Comparisons)
			}
		})
	}
}

// sampleSizeFor is the documented first sample size, ⌈3·√n⌉.
func sampleSizeFor(n int) int { return int(math.Ceil(3 * math.Sqrt(float64(n)))) }

func seqKeys(n int) []int {
	k := make([]int, n)
	for i := range k {
		k[i] = i
	}
	return k
}

func TestTopKErrors(t *testing.T) {
	x, _ := share.NewTensor(3)
	prg := share.NewPRG(share.Seed{}, "x")
	cases := []struct {
		name string
		vals *share.Tensor
		keys []int
		k    int
		prg  *share.PRG
	}{
		{"nil values", nil, nil, 1, prg},
		{"key count", x, []int{1, 2}, 1, prg},
		{"duplicate keys", x, []int{1, 1, 2}, 1, prg},
		{"negative k", x, nil, -1, prg},
		{"nil prg", x, nil, 1, nil},
	}
	for _, c := range cases {
		if _, _, err := TopK(context.Background(), nil, c.vals, c.keys, c.k, c.prg); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestTopKComparisonWidth checks that TopK picks the comparison from the
// session's encoding: the bounded 32-bit one (6 rounds per step, 129 words
// per 64 comparisons) up to 17 fractional bits, where its bound 2^(31−f) is
// at least 2^14 in value, and the 64-bit one (7 rounds, 271 words) beyond;
// secureTopKFP asserts the rounds and bytes, and the selection is exact
// either way, for values spread over ±8000 (inside the bound at f ≤ 17).
func TestTopKComparisonWidth(t *testing.T) {
	cases := []struct {
		f, intBits uint
		bounded    bool
	}{
		{16, 15, true},
		{17, 14, true},
		{18, 14, false},
		{24, 14, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("f=%d", c.f), func(t *testing.T) {
			fp, err := share.NewFixedPoint(c.f, c.intBits)
			if err != nil {
				t.Fatal(err)
			}
			if useBounded(fp) != c.bounded {
				t.Fatalf("useBounded(%+v) = %v, want %v", fp, !c.bounded, c.bounded)
			}
			rng := rand.New(rand.NewPCG(7, uint64(c.f)))
			const n, k = 150, 40
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = quantize(fp, rng.Float64()*16000-8000)
			}
			vals[3], vals[4] = quantize(fp, 8000-1), quantize(fp, -8000) // 16,000 apart
			got, stats, _ := secureTopKFP(t, fp, vals, nil, k, share.Seed{9}, nil)
			if want := plainTopK(vals, seqKeys(n), k); !slices.Equal(got[0], want) || !slices.Equal(got[1], want) {
				t.Fatalf("selected %v / %v, want %v", got[0], got[1], want)
			}
			perStep := int64(7)
			if c.bounded {
				perStep = 6
			}
			if stats[0].Steps == 0 || stats[0].Rounds != perStep*int64(stats[0].Steps) {
				t.Errorf("%+v: want %d rounds per step", stats[0], perStep)
			}
		})
	}
}

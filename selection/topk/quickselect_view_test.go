package topk

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// viewChiSquareLimit bounds the two-sample chi-square statistic of two byte
// histograms (255 degrees of freedom) with a false-alarm probability below
// 1e-9, so the test cannot flake although every run draws fresh randomness.
const viewChiSquareLimit = 420

// topKView is what one party sees in one secure TopK: every word message
// it receives and what the steps reveal.
type topKView struct {
	msgs  [2][][]uint64 // per party, the messages received
	steps []string      // party 0's steps: kind, pairs and outcomes
	kinds []stepKind    // party 0's steps' kinds
	sel   []int
}

// viewTopK runs TopK on vals (the data owner's input, default keys) with
// fresh dealer and input-sharing randomness and the public coin seed; with
// leak, the data owner also sends its clear values to the model owner
// afterwards (a broken protocol: the negative control).
func viewTopK(t *testing.T, vals []float64, k int, seed share.Seed, leak bool) topKView {
	t.Helper()
	n := len(vals)
	enc, err := share.DefaultFixedPoint.EncodeTensor(vals, n)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var v topKView
	_, err = twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(5), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		x, err := shareFromDataOwner(s, enc, n)
		if err != nil {
			return struct{}{}, err
		}
		s.SetReceiveTap(func(w []uint64) {
			mu.Lock()
			v.msgs[p.ID] = append(v.msgs[p.ID], slices.Clone(w))
			mu.Unlock()
		})
		var tr stepTrace
		if p.ID == 0 {
			tr = func(kind stepKind, pairs [][2]int, ahead []bool) {
				v.steps = append(v.steps, fmtStep(kind, pairs, ahead))
				v.kinds = append(v.kinds, kind)
			}
		}
		sel, _, _, err := topK(ctx, s, x, nil, k, share.NewPRG(seed, "pivots"), tr)
		if err != nil {
			return struct{}{}, err
		}
		if p.ID == 0 {
			v.sel = sel
		}
		if leak {
			if p.ID == 1 {
				err = s.SendWords(ctx, enc.Data)
			} else {
				err = s.RecvWords(ctx, make([]uint64, n))
			}
		}
		return struct{}{}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// fmtStep renders one step's comparisons and outcomes.
func fmtStep(kind stepKind, pairs [][2]int, ahead []bool) string {
	b := []byte(kind.String())
	for i, pr := range pairs {
		b = binary.AppendUvarint(b, uint64(pr[0]))
		b = binary.AppendUvarint(b, uint64(pr[1]))
		if ahead[i] {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return string(b)
}

// byteHist adds the bytes of msgs to h.
func byteHist(h *[256]float64, msgs [][]uint64) {
	var b [8]byte
	for _, m := range msgs {
		for _, w := range m {
			binary.LittleEndian.PutUint64(b[:], w)
			for _, x := range b {
				h[x]++
			}
		}
	}
}

// twoSampleChiSquare is the chi-square statistic of the hypothesis that two
// histograms of equal totals come from the same distribution.
func twoSampleChiSquare(a, b *[256]float64) float64 {
	chi := 0.0
	for i := range a {
		if s := a[i] + b[i]; s > 0 {
			d := a[i] - b[i]
			chi += d * d / s
		}
	}
	return chi
}

// sameRanks returns values with exactly the ranks of vals under TopK's order
// (value descending, then position ascending), all distinct, negative and
// none equal to a value of vals (which the test draws non-negative).
func sameRanks(vals []float64) []float64 {
	pos := make([]int, len(vals))
	for i := range pos {
		pos[i] = i
	}
	sort.SliceStable(pos, func(a, b int) bool { return vals[pos[a]] > vals[pos[b]] })
	out := make([]float64, len(vals))
	for r, i := range pos {
		out[i] = -1 - 0.5*float64(r) - 0.125 // off vals' grid of quarters
	}
	return out
}

// TestTopKViewDependsOnlyOnRanks checks that what TopK reveals is a function
// of the ranks only, on each path of the plan: a rank step and a sort (150
// values), and a sample, a partition and a sort (1,000 values). Input A has
// many ties; input B has the same ranks with entirely different, distinct
// values; input C has other ranks. With the same public coins:
//
//   - A and B give identical steps: the same pairs compared, the same
//     outcomes, the same selection (the revealed information is the same),
//     while C's differ (so this comparison has power);
//   - over runs with fresh dealer and sharing randomness, each party's
//     received messages have the same lengths in the same order under A and
//     B, and their bytes the same distribution (a two-sample chi-square
//     test on every byte received, 1–4 MB per input): the transcripts are
//     identically distributed. The same test flags a run in which the data
//     owner also sends its clear values (the negative control).
func TestTopKViewDependsOnlyOnRanks(t *testing.T) {
	cases := []struct {
		name  string
		n, k  int
		kinds []stepKind // the path the test needs
		runs  int        // transcripts per input (halved with -short)
	}{
		{"rank, sort", 150, 30, []stepKind{stepRank, stepSortAll}, 16},
		{"sample, partition, sort", 1000, 200, []stepKind{stepSample, stepPartition, stepSortAll}, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			viewDependsOnlyOnRanks(t, c.n, c.k, c.kinds, c.runs)
		})
	}
}

// viewDependsOnlyOnRanks is TestTopKViewDependsOnlyOnRanks for n values
// keeping k, whose steps must be kinds, over runs transcripts per input.
func viewDependsOnlyOnRanks(t *testing.T, n, k int, kinds []stepKind, runs int) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := make([]float64, n)
	for i := range a {
		a[i] = float64(rng.IntN(12)) * 0.25 // ties
	}
	b := sameRanks(a)
	c := slices.Clone(a)
	rng.Shuffle(n, func(i, j int) { c[i], c[j] = c[j], c[i] })
	coins := share.Seed{12}

	if testing.Short() {
		runs = max(2, runs/2)
	}
	var hist [2][2][256]float64  // [input A/B][party]
	var leakHist [2][256]float64 // the control: party 0's view
	var stepsA, stepsB []string
	for r := range runs {
		va := viewTopK(t, a, k, coins, false)
		vb := viewTopK(t, b, k, coins, false)
		if r == 0 {
			stepsA, stepsB = va.steps, vb.steps
			if !slices.Equal(va.kinds, kinds) {
				t.Fatalf("steps %v: the test needs %v", va.kinds, kinds)
			}
			if !slices.Equal(va.sel, plainTopK(a, seqKeys(n), k)) || !slices.Equal(vb.sel, va.sel) {
				t.Fatalf("selections: A %v, B %v", va.sel, vb.sel)
			}
		}
		if !slices.Equal(va.steps, stepsA) || !slices.Equal(vb.steps, stepsB) {
			t.Fatalf("run %d: the revealed steps changed with the dealer's randomness", r)
		}
		for p := range 2 {
			if la, lb := msgLens(va.msgs[p]), msgLens(vb.msgs[p]); !slices.Equal(la, lb) {
				t.Fatalf("run %d: party %d received messages of lengths %v under A, %v under B", r, p, la, lb)
			}
			byteHist(&hist[0][p], va.msgs[p])
			byteHist(&hist[1][p], vb.msgs[p])
		}
		la := viewTopK(t, a, k, coins, true)
		lb := viewTopK(t, b, k, coins, true)
		byteHist(&leakHist[0], la.msgs[0])
		byteHist(&leakHist[1], lb.msgs[0])
	}
	if !slices.Equal(stepsA, stepsB) {
		t.Errorf("inputs with the same ranks revealed different comparisons or outcomes")
	}
	if vc := viewTopK(t, c, k, coins, false); slices.Equal(vc.steps, stepsA) {
		t.Errorf("inputs with different ranks revealed the same outcomes: the comparison has no power")
	}
	for p := range 2 {
		chi := twoSampleChiSquare(&hist[0][p], &hist[1][p])
		total := 0.0
		for _, h := range hist[0][p] {
			total += h
		}
		t.Logf("party %d: %.0f bytes received per input over %d runs; two-sample chi-square A vs B %.1f", p, total, runs, chi)
		if chi > viewChiSquareLimit {
			t.Errorf("party %d's transcripts under A and B differ in distribution: chi-square %.1f > %d", p, chi, viewChiSquareLimit)
		}
	}
	leak := twoSampleChiSquare(&leakHist[0], &leakHist[1])
	t.Logf("party 0, control where the data owner also sends its clear values: chi-square %.1f", leak)
	if leak <= viewChiSquareLimit {
		t.Errorf("the control that leaks the values went undetected (chi-square %.1f)", leak)
	}
}

func msgLens(msgs [][]uint64) []int {
	out := make([]int, len(msgs))
	for i, m := range msgs {
		out[i] = len(m)
	}
	return out
}

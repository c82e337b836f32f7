package sessiontest

import (
	"context"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// TestPlainTopK: the k largest, ties to the smaller key, ascending.
func TestPlainTopK(t *testing.T) {
	for _, tc := range []struct {
		vals []float64
		keys []int
		k    int
		want []int
	}{
		{[]float64{3, 1, 2}, []int{0, 1, 2}, 2, []int{0, 2}},
		{[]float64{1, 1, 1}, []int{5, 3, 4}, 1, []int{1}},
		{[]float64{1, 2}, []int{0, 1}, 5, []int{0, 1}},
		{nil, nil, 1, []int{}},
	} {
		if got := PlainTopK(tc.vals, tc.keys, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("PlainTopK(%v, %v, %d) = %v, want %v", tc.vals, tc.keys, tc.k, got, tc.want)
		}
	}
}

// TestNearTies: a selection that differs from its reference only by
// candidates within tol of the boundary passes, however many; one that
// keeps or drops a candidate farther from it fails, however few.
func TestNearTies(t *testing.T) {
	cand := []int{10, 11, 12, 13, 14, 15}
	score := []float64{0.50, 0.305, 0.90, 0.30, 0.10, 0.299}
	want := []int{10, 11, 12} // the plaintext top 3; boundary 0.305
	for _, tc := range []struct {
		name string
		got  []int
		diff int
		ok   bool
	}{
		{"same", []int{10, 11, 12}, 0, true},
		{"near-tie swapped", []int{10, 12, 13}, 2, true},
		{"two near-ties for one", []int{10, 12, 15}, 2, true},
		{"far candidate kept", []int{10, 11, 14}, 2, false},
		{"far candidate dropped", []int{11, 12, 13}, 2, false},
		{"not a candidate", []int{10, 11, 99}, 1, false},
	} {
		n, err := NearTies(cand, score, want, tc.got, 0.01)
		if n != tc.diff || (err == nil) != tc.ok {
			t.Errorf("%s: %d differ (%v); want %d, ok %v", tc.name, n, err, tc.diff, tc.ok)
		}
	}
	if _, err := NearTies(cand, score[1:], want, want, 0.01); err == nil {
		t.Error("scores of another length accepted")
	}
}

// TestPhaseNearTies: phase by phase, a near-tie swap passes and lets the
// next phase's candidates differ, where each run is held to the plaintext
// top-k of its own candidates; a far swap in either situation fails.
func TestPhaseNearTies(t *testing.T) {
	score := map[int]float64{0: 0.9, 1: 0.5, 2: 0.505, 3: 0.1, 4: 0.7, 5: 0.2}
	scores := func(phase int, cand []int) ([]float64, error) {
		out := make([]float64, len(cand))
		for j, c := range cand {
			out[j] = score[c] + float64(phase)*float64(c)/100
		}
		return out, nil
	}
	cand := []int{0, 1, 2, 3, 4, 5}
	ref := [][]int{{0, 2, 4}, {0, 4}}
	for _, tc := range []struct {
		name  string
		got   [][]int
		swaps []int
		ok    bool
	}{
		{"same", [][]int{{0, 2, 4}, {0, 4}}, []int{0, 0}, true},
		{"near-tie then the top of its own", [][]int{{0, 1, 4}, {0, 4}}, []int{2, 0}, true},
		{"far swap", [][]int{{0, 2, 5}, {0, 5}}, nil, false},
		{"near-tie then a far choice", [][]int{{0, 1, 4}, {0, 1}}, nil, false},
	} {
		swaps, err := PhaseNearTies(cand, ref, tc.got, scores, 0.01)
		if (err == nil) != tc.ok || tc.ok && !slices.Equal(swaps, tc.swaps) {
			t.Errorf("%s: swaps %v (%v); want %v, ok %v", tc.name, swaps, err, tc.swaps, tc.ok)
		}
	}
}

// TestPairShares: the data owner's values shared on a pair open to
// themselves.
func TestPairShares(t *testing.T) {
	fp := share.DefaultFixedPoint
	enc, err := fp.EncodeTensor([]float64{1.5, -2}, 2)
	if err != nil {
		t.Fatal(err)
	}
	PairFP(t, fp, func(ctx context.Context, s *protocol.Session) error {
		x, err := ShareFromDataOwner(s, enc, 2)
		if err != nil {
			return err
		}
		got, err := s.Reveal(ctx, x)
		if err != nil {
			return err
		}
		if !slices.Equal(got.Data, enc.Data) {
			t.Errorf("party %d opened %v, want %v", s.Party(), got.Data, enc.Data)
		}
		return nil
	})
}

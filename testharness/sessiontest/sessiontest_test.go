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

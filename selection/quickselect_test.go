package selection

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

func TestTopKExact(t *testing.T) {
	cases := []struct {
		name    string
		n, k    int
		levels  int // values drawn from this many distinct levels (ties)
		reverse bool
	}{
		{"distinct", 300, 60, 0, false},
		{"many ties", 300, 90, 5, false},
		{"all equal", 100, 17, 1, false},
		{"k=1", 200, 1, 0, false},
		{"k=n-1", 64, 63, 0, false},
		{"k=n", 50, 50, 0, false},
		{"k>n", 10, 20, 0, false},
		{"k=0", 40, 0, 0, false},
		{"reverse keys", 257, 100, 7, true},
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 9))
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
			enc, err := fp.EncodeTensor(vals, c.n)
			if err != nil {
				t.Fatal(err)
			}
			want := plainTopK(vals, keys, c.k)
			var got [2][]int
			var stats [2]SelectStats
			sessionPair(t, func(ctx context.Context, s *protocol.Session) error {
				var x *share.Tensor
				var err error
				if s.Party() == 1 {
					x, err = s.ShareInput(1, enc)
				} else {
					x, err = s.ShareInput(1, nil, c.n)
				}
				if err != nil {
					return err
				}
				r0 := s.Stream().Stats()
				got[s.Party()], stats[s.Party()], err = TopK(ctx, s, x, keys, c.k, share.NewPRG(share.Seed{7, byte(ci)}, "pivots"))
				d := s.Stream().Stats().Sub(r0)
				// Only CompareReveal runs: 7 rounds per partition step.
				if err == nil && d.Rounds != int64(7*stats[s.Party()].Steps) {
					t.Errorf("party %d: %d rounds for %d steps", s.Party(), d.Rounds, stats[s.Party()].Steps)
				}
				return err
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
			if c.k > 0 && c.k < c.n && stats[0].Comparisons > int64(6*c.n) {
				t.Errorf("%d comparisons for n = %d", stats[0].Comparisons, c.n)
			}
			t.Logf("n=%d k=%d: %d comparisons (%.2f·n), %d steps, %d rounds", c.n, c.k, stats[0].Comparisons,
				float64(stats[0].Comparisons)/float64(c.n), stats[0].Steps, stats[0].Rounds)
		})
	}
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

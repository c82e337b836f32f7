package topk

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/selectformer/selectformer/internal/twoparty"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// sessionPairFP runs f on two protocol sessions of encoding fp.
func sessionPairFP(t *testing.T, fp share.FixedPoint, f func(ctx context.Context, s *protocol.Session) error) {
	t.Helper()
	_, err := twoparty.Run(context.Background(), twoparty.Config{Seeds: [2]share.Seed{{1}, {2}}}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(5), p.Provider, fp)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, f(ctx, s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// shareFromDataOwner secret-shares the data owner's n encoded values enc
// (party 1 holds them; party 0 passes nil) as the data owner does in a
// selection.
func shareFromDataOwner(s *protocol.Session, enc *share.Tensor, n int) (*share.Tensor, error) {
	if s.Party() == 1 {
		return s.ShareInput(1, enc)
	}
	return s.ShareInput(1, nil, n)
}

// plainTopK is the reference: positions of the k largest values, ties to
// the smaller key, ascending.
func plainTopK(vals []float64, keys []int, k int) []int {
	pos := make([]int, len(vals))
	for i := range pos {
		pos[i] = i
	}
	sort.Slice(pos, func(a, b int) bool {
		if vals[pos[a]] != vals[pos[b]] {
			return vals[pos[a]] > vals[pos[b]]
		}
		return keys[pos[a]] < keys[pos[b]]
	})
	out := append([]int(nil), pos[:min(k, len(pos))]...)
	slices.Sort(out)
	return out
}

// quantize rounds v to the nearest value that fp encodes.
func quantize(fp share.FixedPoint, v float64) float64 {
	w, _ := fp.Encode(v)
	return fp.Decode(w)
}

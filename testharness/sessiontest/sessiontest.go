// Package sessiontest holds the test helpers that the tests of selection,
// selection/topk and selection/shard share: a pair of protocol sessions
// over the in-process two-party runner, the data owner's sharing of its
// values, the plaintext reference of the top-k, and the fixtures of whole
// selections (the substitute forward's body, the weights it shares, the
// words of correlated randomness two runs must not share, the tiny ViT on
// MNIST of the secure tests and its proxy generation).
package sessiontest

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// PairFP runs f on two protocol sessions of encoding fp (stream 5 of an
// in-process pair with a dealer of fixed seeds), failing t on any error.
func PairFP(t testing.TB, fp share.FixedPoint, f func(ctx context.Context, s *protocol.Session) error) {
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

// ShareFromDataOwner secret-shares the data owner's n encoded values enc
// (party 1 holds them; party 0's enc is ignored) as the data owner does in
// a selection.
func ShareFromDataOwner(s *protocol.Session, enc *share.Tensor, n int) (*share.Tensor, error) {
	if s.Party() == 1 {
		return s.ShareInput(1, enc)
	}
	return s.ShareInput(1, nil, n)
}

// PlainTopK is the reference top-k: the positions of the k largest values,
// ties to the smaller key, in ascending order.
func PlainTopK(vals []float64, keys []int, k int) []int {
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

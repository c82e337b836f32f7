package protocol_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// bothParties runs f as party 0 and party 1 on two sessions over an
// in-memory connection with an in-process dealer (testharness/twoparty; between
// hosts, each party opens its session on a transport.Dial connection with a
// dealer.Connect provider), and returns party 0's result.
func bothParties[T any](f func(ctx context.Context, s *protocol.Session) T) T {
	r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (T, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			var zero T
			return zero, err
		}
		return f(ctx, s), nil
	})
	if err != nil {
		panic(err)
	}
	return r.Out[0]
}

// The data owner's values go through a ReLU; only the result is opened.
func ExampleSession_ReLU() {
	fp := share.DefaultFixedPoint
	vals := []float64{-1.5, 0, 2.25, -0.001, 7}
	out := bothParties(func(ctx context.Context, s *protocol.Session) []float64 {
		var x *share.Tensor
		if s.Party() == 1 {
			clear, _ := fp.EncodeTensor(vals, len(vals))
			x, _ = s.ShareInput(1, clear)
		} else {
			x, _ = s.ShareInput(1, nil, len(vals))
		}
		before := s.Stream().Stats()
		y, err := s.ReLU(ctx, x) // 7 rounds: sign circuit (6) + multiplexer (1)
		if err != nil {
			panic(err)
		}
		rounds := s.Stream().Stats().Sub(before).Rounds
		open, err := s.Reveal(ctx, y)
		if err != nil {
			panic(err)
		}
		return append(fp.DecodeTensor(open), float64(rounds))
	})
	fmt.Println("relu:", out[:len(vals)], "rounds:", out[len(vals)])
	// Output: relu: [0 0 2.25 0 7] rounds: 7
}

// QuickSelect's step: compare shared values with a shared pivot and reveal
// only the comparison bits.
func ExampleSession_CompareReveal() {
	fp := share.DefaultFixedPoint
	vals := []float64{0.7, 0.1, 0.5, 0.9}
	bits := bothParties(func(ctx context.Context, s *protocol.Session) []bool {
		var x, pivot *share.Tensor
		if s.Party() == 1 {
			clear, _ := fp.EncodeTensor(vals, len(vals))
			x, _ = s.ShareInput(1, clear)
			pv, _ := fp.EncodeTensor([]float64{0.5, 0.5, 0.5, 0.5}, 4)
			pivot, _ = s.ShareInput(1, pv)
		} else {
			x, _ = s.ShareInput(1, nil, len(vals))
			pivot, _ = s.ShareInput(1, nil, 4)
		}
		less, err := s.CompareReveal(ctx, x, pivot)
		if err != nil {
			panic(err)
		}
		return less
	})
	fmt.Println(bits)
	// Output: [false true false false]
}

// Softmax along the last dimension, as in an attention layer.
func ExampleSession_Softmax() {
	fp := share.DefaultFixedPoint
	logits := []float64{1, 2, 3, 0, 0, 0}
	out := bothParties(func(ctx context.Context, s *protocol.Session) []float64 {
		var x *share.Tensor
		if s.Party() == 0 {
			clear, _ := fp.EncodeTensor(logits, 2, 3)
			x, _ = s.ShareInput(0, clear)
		} else {
			x, _ = s.ShareInput(0, nil, 2, 3)
		}
		p, err := s.Softmax(ctx, x)
		if err != nil {
			panic(err)
		}
		open, err := s.Reveal(ctx, p)
		if err != nil {
			panic(err)
		}
		return fp.DecodeTensor(open)
	})
	for _, v := range out {
		fmt.Printf("%.1f ", v)
	}
	fmt.Println()
	// Output: 0.1 0.2 0.7 0.3 0.3 0.3
}

// Ahead draws an operation's dealer items before it needs them: a
// rehearsal learns them, then they are drawn as one sequence while the
// operation runs. Results, rounds and bytes are those of the operation run
// directly.
func ExampleSession_Ahead() {
	fp := share.DefaultFixedPoint
	vals := []float64{-2, 3.5, 0.25}
	out := bothParties(func(ctx context.Context, s *protocol.Session) []float64 {
		var x *share.Tensor
		if s.Party() == 1 {
			clear, _ := fp.EncodeTensor(vals, len(vals))
			x, _ = s.ShareInput(1, clear)
		} else {
			x, _ = s.ShareInput(1, nil, len(vals))
		}
		var y *share.Tensor
		err := s.Ahead(ctx, func(ctx context.Context, s *protocol.Session) error {
			var err error
			y, err = s.ReLU(ctx, x) // runs twice: rehearsed, then for real
			return err
		})
		if err != nil {
			panic(err)
		}
		open, err := s.Reveal(ctx, y)
		if err != nil {
			panic(err)
		}
		return fp.DecodeTensor(open)
	})
	fmt.Println("relu:", out)
	// Output: relu: [0 3.5 0.25]
}

package protocol_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Two parties multiply a secret of the model owner (party 0) by a secret of
// the data owner (party 1) and open the product.
func Example() {
	out := twoParties([2]float64{1.5, -2.25}, func(ctx context.Context, s *protocol.Session, x, y *share.Tensor) []*share.Tensor {
		z, err := s.MulFixed(ctx, x, y) // 2 rounds: Beaver product, truncation
		if err != nil {
			panic(err)
		}
		return []*share.Tensor{z}
	})
	fmt.Printf("%.4f %.4f\n", out[0][0], out[1][0])
	// Output: -3.3750 -3.3750
}

// The square of a secret x and its product with another secret y, with x's
// opening kept from the square for the product: the two products cost
// msg(1) + msg(1) bytes per party instead of Square and Mul's msg(1) +
// msg(2), as in a LayerNorm's (x−μ)² and (x−μ)·r.
func ExampleSession_SquareKeep() {
	out := twoParties([2]float64{1.5, -2.25}, func(ctx context.Context, s *protocol.Session, x, y *share.Tensor) []*share.Tensor {
		sq, kept, err := s.SquareKeep(ctx, x) // opens x − a
		if err != nil {
			panic(err)
		}
		xy, err := kept.Mul(ctx, s, y) // opens y − b alone
		if err != nil {
			panic(err)
		}
		if _, err := kept.Mul(ctx, s, y); err == nil {
			panic("a kept opening served two products")
		}
		for _, z := range []**share.Tensor{&sq, &xy} {
			if *z, err = s.Trunc(ctx, *z); err != nil {
				panic(err)
			}
		}
		return []*share.Tensor{sq, xy}
	})
	fmt.Printf("x² = %.4f, x·y = %.4f\n", out[0][0], out[0][1])
	// Output: x² = 2.2500, x·y = -3.3750
}

// twoParties runs body as both parties over an in-memory connection with an
// in-process dealer, x being party 0's input and y party 1's, shared, and
// returns the fixed-point values each party opens of body's results.
func twoParties(inputs [2]float64, body func(ctx context.Context, s *protocol.Session, x, y *share.Tensor) []*share.Tensor) [2][]float64 {
	ctx := context.Background()
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	d, err := dealer.New()
	if err != nil {
		panic(err)
	}
	fp := share.DefaultFixedPoint
	var out [2][]float64
	var wg sync.WaitGroup
	for p, conn := range []*transport.Conn{c0, c1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov, _ := d.Provider(p)
			s, err := protocol.NewSession(ctx, p, conn.Stream(1), prov, fp)
			if err != nil {
				panic(err)
			}
			mine, _ := fp.EncodeTensor([]float64{inputs[p]}, 1)
			var x, y *share.Tensor
			if p == 0 {
				x, _ = s.ShareInput(0, mine)
				y, _ = s.ShareInput(1, nil, 1)
			} else {
				x, _ = s.ShareInput(0, nil, 1)
				y, _ = s.ShareInput(1, mine)
			}
			for _, z := range body(ctx, s, x, y) {
				open, err := s.Reveal(ctx, z)
				if err != nil {
					panic(err)
				}
				out[p] = append(out[p], fp.Decode(open.Data[0]))
			}
		}()
	}
	wg.Wait()
	return out
}

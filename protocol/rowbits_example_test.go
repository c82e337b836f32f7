package protocol_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// The model owner's rows of two words are zeroed where the data owner's
// padding mask, which it holds in the clear, says a row is padding: party 0
// sends its masked share, party 1 one bit per row.
func ExampleSession_MulPrivateRowBits() {
	fp := share.DefaultFixedPoint
	rows := []float64{1.5, 2, -3, 4, 0.25, 6} // 3 rows of 2, party 0's
	mask := []uint64{1, 0, 1}                 // party 1's: the middle row is padding
	var sent [2]int64
	out := bothParties(func(ctx context.Context, s *protocol.Session) []float64 {
		var x *share.Tensor
		var bits []uint64
		if s.Party() == 0 {
			clear, _ := fp.EncodeTensor(rows, 3, 2)
			x, _ = s.ShareInput(0, clear)
		} else {
			x, _ = s.ShareInput(0, nil, 3, 2)
			bits = mask
		}
		before := s.Stream().Stats().BytesSent
		z, err := s.MulPrivateRowBits(ctx, x, bits) // 1 round
		if err != nil {
			panic(err)
		}
		sent[s.Party()] = s.Stream().Stats().BytesSent - before
		open, err := s.RevealTo(ctx, 0, z)
		if err != nil || open == nil {
			return nil
		}
		vals := make([]float64, len(open.Data))
		for i, w := range open.Data {
			vals[i] = fp.Decode(w)
		}
		return vals
	})
	fmt.Println(out)
	fmt.Printf("party 0 sent %d bytes, party 1 %d bytes\n", sent[0], sent[1])
	// Output:
	// [1.5 2 0 0 0.25 6]
	// party 0 sent 58 bytes, party 1 18 bytes
}

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

// The model owner's rows of two words are zeroed where the data owner's
// padding mask, which it holds in the clear, says a row is padding: party 0
// sends its masked share, party 1 one bit per row.
func ExampleSession_MulPrivateRowBits() {
	ctx := context.Background()
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	d, err := dealer.New()
	if err != nil {
		panic(err)
	}
	fp := share.DefaultFixedPoint
	rows := []float64{1.5, 2, -3, 4, 0.25, 6} // 3 rows of 2, party 0's
	mask := []uint64{1, 0, 1}                 // party 1's: the middle row is padding
	var out []float64
	var sent [2]int64
	var wg sync.WaitGroup
	for p, conn := range []*transport.Conn{c0, c1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov, _ := d.Provider(p)
			st := conn.Stream(1)
			s, err := protocol.NewSession(ctx, p, st, prov, fp)
			if err != nil {
				panic(err)
			}
			before := st.Stats().BytesSent
			var x *share.Tensor
			var bits []uint64
			if p == 0 {
				mine, _ := fp.EncodeTensor(rows, 3, 2)
				x, _ = s.ShareInput(0, mine)
			} else {
				x, _ = s.ShareInput(0, nil, 3, 2)
				bits = mask
			}
			z, err := s.MulPrivateRowBits(ctx, x, bits) // 1 round
			if err != nil {
				panic(err)
			}
			sent[p] = st.Stats().BytesSent - before
			open, err := s.RevealTo(ctx, 0, z)
			if err != nil {
				panic(err)
			}
			if p == 0 {
				for _, w := range open.Data {
					out = append(out, fp.Decode(w))
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println(out)
	fmt.Printf("party 0 sent %d bytes, party 1 %d bytes\n", sent[0], sent[1])
	// Output:
	// [1.5 2 0 0 0.25 6]
	// party 0 sent 58 bytes, party 1 18 bytes
}

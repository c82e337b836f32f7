package secure_test

import (
	"context"
	"fmt"
	"math"

	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
)

// A model owner's proxy (here random weights of a tiny BERT shape) and a data
// owner's two padded candidates: Prepare shares the weights once, Forward
// returns shares of the entropies, revealed here only to print them.
func Example() {
	arch := secure.Arch{Family: model.BERT, Layers: 1, Heads: 2, HeadDim: 4, Hidden: 8, Seq: 4, Labels: 2, MLPHidden: 4}
	net, err := secure.RandomNet(arch, 1)
	if err != nil {
		panic(err)
	}
	x := make([]float64, 2*4*8)
	for i := range x {
		x[i] = math.Sin(float64(i))
	}
	batch := &secure.Batch{X: x, Mask: [][]int{{1, 1, 1, 0}, {1, 1, 0, 0}}}
	r, err := bench.RunLocal(context.Background(), bench.LocalConfig{}, func(ctx context.Context, s *protocol.Session) ([]float64, error) {
		var (
			nw *secure.Net
			in *secure.Batch
		)
		if s.Party() == 0 {
			nw = net // the model owner's clear weights
		} else {
			in = batch // the data owner's clear candidates
		}
		p, err := secure.Prepare(ctx, s, arch, nw, secure.Options{})
		if err != nil {
			return nil, err
		}
		h, err := p.Forward(ctx, s, 2, in)
		if err != nil {
			return nil, err
		}
		return secure.Reveal(ctx, s, h)
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(r.Out[0]), "entropies; both parties agree:", r.Out[0][0] == r.Out[1][0] && r.Out[0][1] == r.Out[1][1])
	// Output: 2 entropies; both parties agree: true
}

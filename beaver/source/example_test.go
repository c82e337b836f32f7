package source_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// A binary parses its -provider flag once, at the edge, into a Source; from
// then on it opens the source and never looks at the name again.
func Example() {
	src, ok := source.ByName("ot") // the value of -provider
	if !ok {
		fmt.Println("-provider: want", source.Choices())
		return
	}
	fmt.Println(src.Name, "is dealer-free:", src.DealerFree)
	// Both parties in one process: each opens the source on its end of the
	// pipe (between hosts, source.Env dials the peer and the dealer).
	r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (uint64, error) {
		op, err := src.Open(ctx, source.InProcess(p.ID, p.Conn, p.Provider))
		if err != nil {
			return 0, err
		}
		defer op.Closer.Close()
		if err := op.Provider.BindSession(ctx, beaver.SessionID{7}); err != nil {
			return 0, err
		}
		t, err := beaver.Typed{Provider: op.Provider}.Triples(ctx, 1, 1)
		return t.C[0], err
	})
	fmt.Println("triple made:", err == nil && r.Out[0]+r.Out[1] != 0)
	// Output:
	// ot is dealer-free: true
	// triple made: true
}

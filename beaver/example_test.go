package beaver_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
)

// An in-process dealer hands each party its half of every correlation; the
// halves of a triple reconstruct to c = a·b.
func Example() {
	ctx := context.Background()
	d, err := beaver.NewDealer()
	if err != nil {
		panic(err)
	}
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	t0, _ := p0.Triples(ctx, 7, 3) // stream 7, 3 triples
	t1, _ := p1.Triples(ctx, 7, 3)
	ok := true
	for i := range 3 {
		a, b, c := t0.A[i]+t1.A[i], t0.B[i]+t1.B[i], t0.C[i]+t1.C[i]
		ok = ok && c == a*b
	}
	fmt.Println("c = a·b:", ok)
	fmt.Println("next item on stream 7:", p0.Position(7))
	fmt.Println("party 0 dealer bytes:", p0.Stats().BytesRecv, "party 1:", p1.Stats().BytesRecv)
	// Output:
	// c = a·b: true
	// next item on stream 7: 1
	// party 0 dealer bytes: 0 party 1: 24
}

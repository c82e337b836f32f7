package beaver_test

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
)

// An in-process dealer hands each party its half of every correlation; the
// halves of a triple reconstruct to c = a·b. Typed draws typed material from
// a Provider.
func Example() {
	ctx := context.Background()
	d, err := dealer.New()
	if err != nil {
		panic(err)
	}
	prov0, _ := d.Provider(0)
	prov1, _ := d.Provider(1)
	p0, p1 := beaver.Typed{Provider: prov0}, beaver.Typed{Provider: prov1}
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

// A provider wrapper embeds the Provider it wraps, overrides Material, the
// one request method, and says what it wraps with Unwrap: this one counts
// the items drawn per kind. Typed helpers work on it unchanged, and As
// finds it (or anything it wraps) behind other wrappers.
func ExampleProvider_wrapper() {
	ctx := context.Background()
	d, err := dealer.New()
	if err != nil {
		panic(err)
	}
	prov0, _ := d.Provider(0)
	c := &counting{Provider: prov0, n: map[beaver.Kind]int{}}
	p := beaver.Typed{Provider: c}
	_, _ = p.Triples(ctx, 1, 4)
	_, _ = p.Triples(ctx, 1, 4)
	_, _ = p.WrapPairs(ctx, 2, 4, 16)
	fmt.Println(c.n[beaver.KindTriple], "triple items,", c.n[beaver.KindWrap], "wrap item")
	found, ok := beaver.As[*counting](p) // through Typed, itself a wrapper
	fmt.Println(ok, found == c)
	_, ok = beaver.As[beaver.WeightReleaser](p) // the dealer's provider holds no weights
	fmt.Println(ok)
	// Output:
	// 2 triple items, 1 wrap item
	// true true
	// false
}

// counting counts the requests per kind (not safe for concurrent use).
type counting struct {
	beaver.Provider
	n map[beaver.Kind]int
}

func (c *counting) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	c.n[r.Kind]++
	return c.Provider.Material(ctx, r)
}

// Unwrap implements beaver.Wrapper.
func (c *counting) Unwrap() beaver.Provider { return c.Provider }

// The items a computation will draw are known ahead (protocol.Rehearse
// learns them by rehearsing it, without a dealer); DrawSequence draws them
// at once (from a networked dealer: one round trip for the whole sequence).
func ExampleDrawSequence() {
	ctx := context.Background()
	seq := []beaver.Request{ // what the computation draws on stream 4:
		{Kind: beaver.KindTriple, Stream: 4, N: 8},             // 8 triples,
		{Kind: beaver.KindWrap, Stream: 4, N: 8, FracBits: 16}, // then 8 wrap pairs
	}
	d, err := dealer.New()
	if err != nil {
		panic(err)
	}
	prov, _ := d.Provider(1)
	err = beaver.DrawSequence(ctx, prov, seq, func(i int, m beaver.Material) error {
		fmt.Println(i, m.Kind, len(m.Parts[len(m.Parts)-1]), "words in its last part")
		return nil
	})
	fmt.Println("error:", err, "next item on stream 4:", prov.Position(4))
	// Output:
	// 0 triple 8 words in its last part
	// 1 wrap 8 words in its last part
	// error: <nil> next item on stream 4: 2
}

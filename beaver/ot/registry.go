package ot

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
)

// Generator makes this party's part of one item of its kind with the peer,
// on the stream's generator g: the parts of the kind's beaver.Material, in
// the layout of its beaver.Correlation (Parts gives their lengths). Both
// parties run the Generator of the same item at the same time.
type Generator func(ctx context.Context, g *Gen, it Item) ([][]uint64, error)

// Item is what a Generator makes: the request (counter assigned), this
// party, the session and, for a kind masked by the model owner's weight
// mask, that mask.
type Item struct {
	beaver.Request
	// Party is this party: 0 (model owner) or 1 (data owner).
	Party int
	// Session is the session the provider is bound to.
	Session beaver.SessionID
	// WeightMask returns party 0's mask (k×n) of the request's weight id,
	// the same for every item of that id and shape; nil for party 1.
	WeightMask func(k, n int) []uint64
}

// generators holds the registered generators by kind.
var generators = map[beaver.Kind]Generator{}

// Register adds the OT generator of kind, a kind registered with
// beaver.Register. It must be called from an init function, one call per
// kind in the file of its family (arith.go, matrix.go, binary.go): it
// panics (a programming error) on a nil generator, a kind beaver does not
// know, a kind with a weight mask (beaver.Correlation.Mask: those are the
// Provider's WeightMaskGenerator's) or a kind already registered. A kind
// without a generator is refused by the Provider with an error naming it.
func Register(kind beaver.Kind, g Generator) {
	if g == nil {
		panic(fmt.Sprintf("ot: register %v: nil generator", kind))
	}
	c, ok := beaver.Lookup(kind)
	if !ok {
		panic(fmt.Sprintf("ot: register %v: not a registered beaver kind", kind))
	}
	if c.Mask != nil {
		panic(fmt.Sprintf("ot: register %v: a weight-mask kind is made by the provider's WeightMaskGenerator", kind))
	}
	if _, ok := generators[kind]; ok {
		panic(fmt.Sprintf("ot: register %v: already registered", kind))
	}
	generators[kind] = g
}

// parts returns its arguments as the parts of a Generator's result.
func parts(ps ...[]uint64) [][]uint64 { return ps }

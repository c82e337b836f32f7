package ot

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
)

// WeightMaskGenerator makes a Provider's weight-mask correlations: the
// kinds whose beaver.Correlation has a Mask (KindWeightTriple,
// KindWeightVectorTriple), masked by the model owner's fixed mask of each
// weight id. It is a plug of the Provider (ProviderOptions.WeightMasks):
// the Provider runs everything else (the base OTs, the other kinds'
// generators, the stream positions) and hands it these kinds' items. Two
// implementations: VectorOLE (the default) and Lattice (he.go).
//
// A generator may hold state for the rest of a session (keys, uploaded
// encryptions): give each Provider its own.
type WeightMaskGenerator interface {
	// Fingerprint names the generator and its parameters to the peer:
	// the first setup message carries it, and parties whose fingerprints
	// differ both fail BindSession with ErrModeMismatch. Its first byte
	// is the generator's way (0: VectorOLE, 1: Lattice), the rest a digest
	// of its parameters.
	Fingerprint() [32]byte
	// Setup runs the generator's part of BindSession on c (the base-OT
	// stream), once, after the base OTs, and returns the rounds it took.
	Setup(ctx context.Context, c Conn, party int, sid beaver.SessionID) (rounds int64, err error)
	// Generate makes this party's parts of one weight-mask item with the
	// peer on the item's stream generator g, as a Generator does.
	Generate(ctx context.Context, g *Gen, it Item) ([][]uint64, error)
	// Release drops what the generator holds for the weight ids in
	// [lo, hi) (beaver.WeightReleaser).
	Release(lo, hi uint64)
}

// The ways of making the weight masks: the first byte of a
// WeightMaskGenerator's Fingerprint.
const (
	wayVectorOLE byte = 0
	wayLattice   byte = 1
)

// wayName names a way in errors (by the peer binaries' -provider names).
func wayName(b byte) string {
	switch b {
	case wayVectorOLE:
		return "ot"
	case wayLattice:
		return "he"
	}
	return fmt.Sprintf("linear(%d)", b)
}

// VectorOLE makes the weight-mask correlations by vector OLE on the extension's (SoftSpokenOT)
// correlated OTs whose correlation is the fixed mask B of party 0
// (Gen.WeightTriples, Gen.WeightVectorTriples): Θ(m·k·n) bytes per item,
// a product's worth of traffic, nothing per session. It is the default
// WeightMaskGenerator and holds no state.
type VectorOLE struct{}

var _ WeightMaskGenerator = VectorOLE{}

// Fingerprint implements WeightMaskGenerator: way 0, no parameters.
func (VectorOLE) Fingerprint() [32]byte { return [32]byte{wayVectorOLE} }

// Setup implements WeightMaskGenerator: nothing to set up.
func (VectorOLE) Setup(context.Context, Conn, int, beaver.SessionID) (int64, error) { return 0, nil }

// Generate implements WeightMaskGenerator.
func (VectorOLE) Generate(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
	switch it.Kind {
	case beaver.KindWeightTriple:
		w, err := g.WeightTriples(ctx, it.WeightMask(it.K, it.N), it.M, it.K, it.N)
		return parts(w.A, w.C), err
	case beaver.KindWeightVectorTriple:
		w, err := g.WeightVectorTriples(ctx, it.WeightMask(1, it.N), it.M, it.N)
		return parts(w.A, w.C), err
	}
	return nil, fmt.Errorf("kind %v has no vector-OLE generator", it.Kind)
}

// Release implements WeightMaskGenerator: nothing is held.
func (VectorOLE) Release(lo, hi uint64) {}

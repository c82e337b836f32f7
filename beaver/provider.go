package beaver

import (
	"context"
	"errors"
	"fmt"
)

// ErrCorrelationCheck is wrapped by a provider's error when the peer's
// part in making a correlation failed a check that binds it (the peer
// altered a message it sent, e.g. the dealer-free HE provider's outputs,
// whose check the model owner runs before it uses any of them). The party
// that sees it holds nothing derived from the failed item, must not go on,
// and tells the peer a public reason (selection's AbortCorrelation).
var ErrCorrelationCheck = errors.New("a correlation check failed: the peer's message does not match what it committed to")

// Provider hands this party its part of each correlation. It is a small
// core: one request method per kind of correlation (Material for the
// stream kinds, WeightMask for the weight masks) plus the party, the session binding,
// the stream positions and the dealer traffic. Protocol code draws material
// through the typed helpers of Typed (Typed{p}.Triples(ctx, stream, n) and
// so on), which build the Request and check the shape of what comes back;
// a new provider (prefetching, dealer-free, instrumented) implements only
// these methods (Counters keeps its positions), and a wrapper embeds the
// Provider it wraps, overrides what it changes (usually Material alone;
// see beaver/marks) and implements Unwrap, so that As finds the optional
// behaviour of what it wraps.
//
// All methods are safe for concurrent use on distinct streams and return an
// error rather than panic on bad requests; Material blocks until the
// material is available or ctx ends.
type Provider interface {
	// Party returns 0 (model owner) or 1 (data owner).
	Party() int

	// Material returns this party's part of the item r describes (see
	// Request for the fields of each kind, and Material for the layout of
	// the parts). An item of a stream kind is the next item of r.Stream:
	// the provider assigns the counter (Position), so r.Counter must be
	// zero.
	Material(ctx context.Context, r Request) (Material, error)

	// WeightMask returns, to party 0, its mask B (k×n) of the weight
	// matrix weightID: a per-weight-matrix correlation keyed by the id
	// alone, the same B for every call with that id and shape, made by
	// the model owner itself (never requested from a dealer) and moving
	// no stream position. Party 1 gets an error. Typed.WeightMask checks
	// the shape before and after.
	WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error)

	// BindSession binds the provider to session id before it hands out any
	// material: it presents the id to the dealer, which serves the session
	// once the other party has presented the same id, and keys every stream
	// of this provider by it, so no item is ever served to two computations
	// (see SessionID). Binding again to the same id is a no-op; binding to
	// another id, or after material of another session was handed out, is
	// an error. A provider whose material cannot repeat across computations
	// (one that makes it jointly at run time) still records the id.
	BindSession(ctx context.Context, id SessionID) error
	// Session returns the bound session id, and false while none is bound.
	Session() (SessionID, bool)

	// Position returns the counter of the next item on stream, and Seek sets
	// it: a resumed session seeks every stream past the material it already
	// used, so correlated randomness is never reused (the dealer refuses a
	// counter of party 1 it already served in the session). Seeking
	// backwards is an error.
	Position(stream uint32) uint64
	Seek(stream uint32, pos uint64) error

	// Stats returns the dealer traffic this provider has received so far.
	Stats() DealerStats
}

// Material is one party's part of one item: Parts are the slices of the
// kind's typed result in field order (A, B, C of a Triple; A, A2 of a
// SquarePair; A, A2, B, AB of a SquareProduct; A, C of a WeightTriple; U, V, Z of a WrapPair;
// Packed, Arith, A, AR of a BitPair; A, R, C of a RowBitTriple), with the lengths Request.PartWords gives (a part a party does not get,
// such as party 0's A of a WeightTriple, is nil).
type Material struct {
	Kind  Kind
	Parts [][]uint64
}

// Check returns an error unless m has the kind and part lengths of party's
// material for r: what Typed checks of every answer, and what a provider
// or a test can check of its own.
func (m Material) Check(r Request, party int) error {
	if m.Kind != r.Kind {
		return fmt.Errorf("beaver: %v: provider returned %v material", r, m.Kind)
	}
	want := r.PartWords(party)
	if len(m.Parts) != len(want) {
		return fmt.Errorf("beaver: %v: provider returned %d parts, want %d", r, len(m.Parts), len(want))
	}
	for i, w := range want {
		if len(m.Parts[i]) != w {
			return fmt.Errorf("beaver: %v: part %d of the material has %d words, want %d", r, i, len(m.Parts[i]), w)
		}
	}
	return nil
}

// Typed draws typed correlations from a Provider: each method builds the
// Request, calls Material and checks the kind and part lengths of the result
// (a provider returning malformed material is an error, never a panic or a
// short slice handed to a protocol). The zero value is unusable; wrap a
// Provider: Typed{p}. Typed is itself a Provider (it embeds p).
type Typed struct {
	Provider
}

// drawAs draws r through t and hands its material to as, the kind's
// conversion into its typed form: what every typed helper of a kind does.
func drawAs[T any](ctx context.Context, t Typed, r Request, as func(Material) T) (T, error) {
	m, err := t.draw(ctx, r)
	if err != nil {
		var zero T
		return zero, err
	}
	return as(m), nil
}

// drawRingAs is drawAs for a kind with a ring width (FieldRingBits): it
// draws r in the ring Z_2^ringBits (r.RingBits = ringBits; 0 or 64 asks for
// Z_2^64) and masks every word of the material to its low ringBits bits, so
// every word is below 2^ringBits whatever the provider returned (a provider
// may ignore the width and hand out material mod 2^64, which reduces to
// material mod 2^ringBits). The one home of the narrow rings' typed helpers
// (MatTriplesRing, SquareProductsRing).
func drawRingAs[T any](ctx context.Context, t Typed, r Request, ringBits uint, as func(Material) T) (T, error) {
	if ringBits == 64 {
		ringBits = 0
	}
	r.RingBits = ringBits
	m, err := t.draw(ctx, r)
	if err != nil {
		var zero T
		return zero, err
	}
	if mask := r.ringMask(); mask != ^uint64(0) {
		for _, part := range m.Parts {
			for i := range part {
				part[i] &= mask
			}
		}
	}
	return as(m), nil
}

// draw asks for r and checks the shape of the answer.
func (t Typed) draw(ctx context.Context, r Request) (Material, error) {
	m, err := t.Material(ctx, r)
	if err != nil {
		return Material{}, err
	}
	if err := m.Check(r, t.Party()); err != nil {
		return Material{}, fmt.Errorf("%w (provider %T)", err, t.Provider)
	}
	return m, nil
}

// DealerStats counts the traffic between a party and the dealer, kept apart
// from the parties' online traffic.
type DealerStats struct {
	BytesRecv int64 // bytes of material received from the dealer
	BytesSent int64 // bytes of requests sent to the dealer
	Items     int64 // correlations served
}

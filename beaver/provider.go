package beaver

import (
	"context"
	"fmt"
)

// Triple is one party's share of elementwise triples c = a·b (or, from
// MatTriples, matrix triples C = A·B, batched).
type Triple struct {
	A, B, C []uint64
}

// WeightTriple is one party's part of a weight-mask correlation for Y = X·W,
// X m×k shared, W k×n in the model owner's clear. The data owner (party 1)
// receives the mask A (m×k, in the clear to it); both receive shares C of
// A·B, where B is the model owner's reusable mask of W (see Typed.WeightMask).
type WeightTriple struct {
	A []uint64 // party 1 only: the mask of X; nil for party 0
	C []uint64 // this party's share of A·B (m×n)
}

// BitTriple is one party's XOR share of bit-packed AND triples: 64 triples per
// word, c = a AND b bitwise.
type BitTriple struct {
	A, B, C []uint64
}

// SquarePair is one party's share of n square pairs: a uniform A and A² (A2),
// for squaring a shared value with one opening instead of two.
type SquarePair struct {
	A, A2 []uint64
}

// TruncPair is one party's share of the material of exact probabilistic
// truncation by 2^f: for a uniformly random ring word r, shares of r, of its
// top bit r>>63 (as the ring word 0 or 1) and of (r mod 2^63) >> f.
type TruncPair struct {
	R, MSB, LowShifted []uint64
}

// BitPair is one party's share of n uniformly random bits r, held both as XOR
// shares packed 64 per word (Packed, ⌈n/64⌉ words; bit i of word j is element
// 64j+i) and as arithmetic shares (Arith, n words each 0 or 1 in sum), plus an
// arithmetic Beaver pair for multiplying by r: a uniform A and shares of A·r
// (AR), used by the one-round multiplexer.
type BitPair struct {
	Packed []uint64
	Arith  []uint64
	A, AR  []uint64
}

// Provider hands this party its part of each correlation. It is a small
// core: one request method per kind of correlation (Material for the
// stream kinds, WeightMask for the weight masks) plus the party, the session binding,
// the stream positions and the dealer traffic. Protocol code draws material
// through the typed helpers of Typed (Typed{p}.Triples(ctx, stream, n) and
// so on), which build the Request and check the shape of what comes back;
// a new provider (prefetching, dealer-free, instrumented) implements only
// these methods, and a wrapper embeds the Provider it wraps and overrides
// what it changes (usually Material alone; see Prefetch).
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
// SquarePair; A, C of a WeightTriple; R, MSB, LowShifted of a TruncPair;
// Packed, Arith, A, AR of a BitPair), with the lengths Request.PartWords gives (a part a party does not get,
// such as party 0's A of a WeightTriple, is nil).
type Material struct {
	Kind  Kind
	Parts [][]uint64
}

// check returns an error unless m has the kind and part lengths of party's
// material for r.
func (m Material) check(r Request, party int) error {
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

func (m Material) triple() Triple { return Triple{A: m.Parts[0], B: m.Parts[1], C: m.Parts[2]} }
func (m Material) bitTriple() BitTriple {
	return BitTriple{A: m.Parts[0], B: m.Parts[1], C: m.Parts[2]}
}
func (m Material) square() SquarePair { return SquarePair{A: m.Parts[0], A2: m.Parts[1]} }
func (m Material) weightTriple() WeightTriple {
	return WeightTriple{A: m.Parts[0], C: m.Parts[1]}
}
func (m Material) truncPair() TruncPair {
	return TruncPair{R: m.Parts[0], MSB: m.Parts[1], LowShifted: m.Parts[2]}
}
func (m Material) bitPair() BitPair {
	return BitPair{Packed: m.Parts[0], Arith: m.Parts[1], A: m.Parts[2], AR: m.Parts[3]}
}

// Typed draws typed correlations from a Provider: each method builds the
// Request, calls Material and checks the kind and part lengths of the result
// (a provider returning malformed material is an error, never a panic or a
// short slice handed to a protocol). The zero value is unusable; wrap a
// Provider: Typed{p}. Typed is itself a Provider (it embeds p).
type Typed struct {
	Provider
}

// draw asks for r and checks the shape of the answer.
func (t Typed) draw(ctx context.Context, r Request) (Material, error) {
	m, err := t.Material(ctx, r)
	if err != nil {
		return Material{}, err
	}
	if err := m.check(r, t.Party()); err != nil {
		return Material{}, fmt.Errorf("%w (provider %T)", err, t.Provider)
	}
	return m, nil
}

// Triples returns shares of n elementwise triples c = a·b.
func (t Typed) Triples(ctx context.Context, stream uint32, n int) (Triple, error) {
	m, err := t.draw(ctx, Request{Kind: KindTriple, Stream: stream, N: n})
	if err != nil {
		return Triple{}, err
	}
	return m.triple(), nil
}

// SquarePairs returns shares of n square pairs (a, a²).
func (t Typed) SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error) {
	m, err := t.draw(ctx, Request{Kind: KindSquare, Stream: stream, N: n})
	if err != nil {
		return SquarePair{}, err
	}
	return m.square(), nil
}

// MatTriples returns shares of batch matrix triples: A is batch×m×k, B is
// batch×k×n and C = A·B batch×m×n, all row-major.
func (t Typed) MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error) {
	mat, err := t.draw(ctx, Request{Kind: KindMatTriple, Stream: stream, Batch: batch, M: m, K: k, N: n})
	if err != nil {
		return Triple{}, err
	}
	return mat.triple(), nil
}

// WeightTriple returns this party's part of a correlation for one product
// X·W with X m×k and W (id weightID) k×n: A (party 1) and shares of A·B.
func (t Typed) WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error) {
	mat, err := t.draw(ctx, Request{Kind: KindWeightTriple, Stream: stream, WeightID: weightID, M: m, K: k, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// WeightVectorTriple returns this party's part of a correlation for one
// elementwise product X ⊙ γ with X m×n and γ a 1×n vector of the model owner
// broadcast over the rows, masked by WeightMask(weightID, 1, n) = b: A (m×n,
// party 1 only) and shares of A ⊙ b (b broadcast over rows).
func (t Typed) WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error) {
	mat, err := t.draw(ctx, Request{Kind: KindWeightVectorTriple, Stream: stream, WeightID: weightID, M: m, N: n})
	if err != nil {
		return WeightTriple{}, err
	}
	return mat.weightTriple(), nil
}

// ANDTriples returns XOR shares of words×64 AND triples, bit-packed.
func (t Typed) ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := t.draw(ctx, Request{Kind: KindAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// CrossANDTriples returns AND triples for multiplying a bit held in the
// clear by party 0 with a bit held in the clear by party 1 at one bit of
// traffic per party: party 0 gets A = u (its B is nil), party 1 gets B = v
// (its A is nil), and both get XOR shares C of u AND v.
func (t Typed) CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error) {
	m, err := t.draw(ctx, Request{Kind: KindCrossAND, Stream: stream, N: words})
	if err != nil {
		return BitTriple{}, err
	}
	return m.bitTriple(), nil
}

// TruncPairs returns n truncation pairs for dividing by 2^fracBits.
func (t Typed) TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error) {
	m, err := t.draw(ctx, Request{Kind: KindTrunc, Stream: stream, N: n, FracBits: fracBits})
	if err != nil {
		return TruncPair{}, err
	}
	return m.truncPair(), nil
}

// BitPairs returns n random shared bits with their multiplication pairs.
func (t Typed) BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error) {
	m, err := t.draw(ctx, Request{Kind: KindBitPair, Stream: stream, N: n})
	if err != nil {
		return BitPair{}, err
	}
	return m.bitPair(), nil
}

// DealerStats counts the traffic between a party and the dealer, kept apart
// from the parties' online traffic.
type DealerStats struct {
	BytesRecv int64 // bytes of material received from the dealer
	BytesSent int64 // bytes of requests sent to the dealer
	Items     int64 // correlations served
}

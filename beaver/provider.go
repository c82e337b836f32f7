package beaver

import "context"

// Triple is one party's share of elementwise triples c = a·b (or, from
// MatTriples, matrix triples C = A·B, batched).
type Triple struct {
	A, B, C []uint64
}

// WeightTriple is one party's part of a weight-mask correlation for Y = X·W,
// X m×k shared, W k×n in the model owner's clear. The data owner (party 1)
// receives the mask A (m×k, in the clear to it); both receive shares C of
// A·B, where B is the model owner's reusable mask of W (see Provider.WeightMask).
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

// Provider hands this party its part of each correlation. All methods block
// until the material is available or ctx ends, are safe for concurrent use on
// distinct streams, and return an error rather than panic on bad sizes.
type Provider interface {
	// Party returns 0 (model owner) or 1 (data owner).
	Party() int

	// Triples returns shares of n elementwise triples c = a·b.
	Triples(ctx context.Context, stream uint32, n int) (Triple, error)

	// SquarePairs returns shares of n square pairs (a, a²).
	SquarePairs(ctx context.Context, stream uint32, n int) (SquarePair, error)

	// MatTriples returns shares of batch matrix triples: A is batch×m×k,
	// B is batch×k×n and C = A·B batch×m×n, all row-major.
	MatTriples(ctx context.Context, stream uint32, batch, m, k, n int) (Triple, error)

	// WeightMask returns, to party 0, the mask B (k×n) of the weight matrix
	// weightID: the same B for every call with that id, so the model owner
	// reveals W − B once and reuses it. Party 1 gets an error.
	WeightMask(ctx context.Context, weightID uint64, k, n int) ([]uint64, error)

	// WeightTriple returns this party's part of a correlation for one product
	// X·W with X m×k and W (id weightID) k×n: A (party 1) and shares of A·B.
	WeightTriple(ctx context.Context, stream uint32, weightID uint64, m, k, n int) (WeightTriple, error)

	// WeightVectorTriple returns this party's part of a correlation for one
	// elementwise product X ⊙ γ with X m×n and γ a 1×n vector of the model
	// owner broadcast over the rows, masked by WeightMask(weightID, 1, n) = b:
	// A (m×n, party 1 only) and shares of A ⊙ b (b broadcast over rows).
	WeightVectorTriple(ctx context.Context, stream uint32, weightID uint64, m, n int) (WeightTriple, error)

	// ANDTriples returns XOR shares of words×64 AND triples, bit-packed.
	ANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error)

	// CrossANDTriples returns AND triples for multiplying a bit held in the
	// clear by party 0 with a bit held in the clear by party 1 at one bit of
	// traffic per party: party 0 gets A = u (its B is nil), party 1 gets B = v
	// (its A is nil), and both get XOR shares C of u AND v.
	CrossANDTriples(ctx context.Context, stream uint32, words int) (BitTriple, error)

	// TruncPairs returns n truncation pairs for dividing by 2^fracBits.
	TruncPairs(ctx context.Context, stream uint32, n int, fracBits uint) (TruncPair, error)

	// BitPairs returns n random shared bits with their multiplication pairs.
	BitPairs(ctx context.Context, stream uint32, n int) (BitPair, error)

	// Position returns the counter of the next item on stream, and Seek sets
	// it: a resumed session seeks every stream past the material it already
	// used, so correlated randomness is never reused (the dealer refuses a
	// counter of party 1 it already served in the session).
	Position(stream uint32) uint64
	Seek(stream uint32, pos uint64) error

	// Stats returns the dealer traffic this provider has received so far.
	Stats() DealerStats
}

// DealerStats counts the traffic between a party and the dealer, kept apart
// from the parties' online traffic.
type DealerStats struct {
	BytesRecv int64 // bytes of material received from the dealer
	BytesSent int64 // bytes of requests sent to the dealer
	Items     int64 // correlations served
}

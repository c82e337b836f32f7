package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// This file holds the protocols built on the sign circuit (binary.go): sign
// bits, bit→arithmetic conversion, comparisons, the multiplexer, ReLU (and
// ReLU fused with the truncation before it) and max/argmax. Costs are per party, for n elements and W = ⌈n/64⌉, in ring
// words sent; on the wire a message of w words costs msg(w) = 8w + 10 bytes
// while 8w ≤ 1 MiB (transport.DefaultMaxFrame), and 8w + 8 + 10·⌈(8w+8)/2^20⌉
// beyond (one 10-byte header per frame, plus the total length in the first).
// The exact byte counts, e.g. MSB's Σ_{k ∈ 156,62,30,14,6,2} msg(k·W), are
// asserted by the tests.
//
//	protocol          rounds   words sent per party
//	MSB               6        270W                      (33.75 B per element)
//	B2A               1        W
//	LTZ, LessThan     7        271W
//	CompareReveal     7        271W
//	CompareRevealBounded  6    129W                      (16.125 B per element; exact for |x − y| < 2^31)
//	MulBit, Select    1        W + n
//	ReLU              7        271W + n
//	TruncReLU         7        271W + 2n                 in 7 messages: msg(n + 156W) first
//	                                                     (TruncBy then ReLU: 8 rounds, 8 messages)
//	TruncReLURing     7        SignCircuitWords(ℓ) + 2W + n words: 227W + n at ℓ = 54
//	                  (fewer below ℓ = 34)                (ring.go; TruncReLURingCost)
//	Max (last dim m)  7·⌈log2 m⌉

// cmpCheck returns an error for a nil tensor or one whose data does not fill
// its shape.
func cmpCheck(op string, x *share.Tensor) error {
	if x == nil {
		return fmt.Errorf("protocol: %s: nil tensor", op)
	}
	n := 1
	for _, d := range x.Shape {
		if d < 0 {
			return fmt.Errorf("protocol: %s: shape %v has a negative dimension", op, x.Shape)
		}
		n *= d
	}
	if n != len(x.Data) {
		return fmt.Errorf("protocol: %s: %d words do not fill shape %v", op, len(x.Data), x.Shape)
	}
	return nil
}

// MSB returns XOR shares of the most significant bit of every element of x,
// i.e. of [x < 0] for x read as a two's-complement int64. It is exact for
// every ring word (no range restriction). Cost: 6 rounds; each party sends
// 270·W words (W = ⌈n/64⌉) in 6 messages of 156W, 62W, 30W, 14W, 6W and 2W
// words, i.e. Σ msg(k·W) bytes: 33.75 bytes per element plus 6 frame headers
// (CrypTen: 8 rounds, 216 bytes sent per party). See the comment on the sign
// circuit in binary.go.
func (s *Session) MSB(ctx context.Context, x *share.Tensor) (*BitTensor, error) {
	if err := cmpCheck("msb", x); err != nil {
		return nil, err
	}
	w, err := s.msbBits(ctx, x.Data)
	if err != nil {
		return nil, fmt.Errorf("protocol: msb %v: %w", x.Shape, err)
	}
	return &BitTensor{Shape: slices.Clone(x.Shape), Words: w}, nil
}

// B2A converts XOR-shared bits to additive shares of the integers 0 and 1
// (ring words 0 or 1, not fixed-point encoded; multiply by FixedPoint().Scale()
// locally for the encoding of 1.0). With random shared bits r from the
// provider's BitPairs, both parties open t = b ⊕ r (packed) and set
// [b] = t + [r] − 2t[r]. Cost: 1 round, ⌈n/64⌉ words per party.
func (s *Session) B2A(ctx context.Context, b *BitTensor) (*share.Tensor, error) {
	if err := b.check("b2a"); err != nil {
		return nil, err
	}
	n := b.Len()
	out := &share.Tensor{Shape: slices.Clone(b.Shape), Data: make([]uint64, n)}
	if n == 0 {
		return out, nil
	}
	bp, err := s.bitPairs(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: b2a %v: %w", b.Shape, err)
	}
	w := len(b.Words)
	send := share.GetWords(w) // scratch: overwritten before use
	defer share.PutWords(send)
	for j := range send {
		send[j] = b.Words[j] ^ bp.Packed[j]
	}
	share.MaskTail(send, n)
	recv := share.GetWords(w) // scratch: overwritten before use
	defer share.PutWords(recv)
	if err := s.Exchange(ctx, send, recv); err != nil {
		return nil, fmt.Errorf("protocol: b2a %v: %w", b.Shape, err)
	}
	for i := range out.Data {
		t := (send[i>>6] ^ recv[i>>6]) >> (uint(i) & 63) & 1
		v := bp.Arith[i] * (1 - 2*t) // [r]·(1 − 2t)
		if s.party == 0 {
			v += t
		}
		out.Data[i] = v
	}
	return out, nil
}

// bitPairs fetches and checks n random shared bits with their pairs.
func (s *Session) bitPairs(ctx context.Context, n int) (bitPairMaterial, error) {
	bp, err := s.prov.BitPairs(ctx, s.StreamID(), n)
	if err != nil {
		return bitPairMaterial{}, fmt.Errorf("bit pairs: %w", err)
	}
	if len(bp.Packed) != share.PackedWords(n) || len(bp.Arith) != n || len(bp.A) != n || len(bp.AR) != n {
		return bitPairMaterial{}, fmt.Errorf("bit pairs: provider returned %d/%d/%d/%d words for %d bits", len(bp.Packed), len(bp.Arith), len(bp.A), len(bp.AR), n)
	}
	return bitPairMaterial{Packed: bp.Packed, Arith: bp.Arith, A: bp.A, AR: bp.AR}, nil
}

// bitPairMaterial mirrors beaver.BitPair (kept local so this file needs only
// the provider interface).
type bitPairMaterial struct {
	Packed, Arith, A, AR []uint64
}

// LTZ returns additive shares of [x < 0] (ring integers 0 or 1) for every
// element of x, read as a two's-complement int64; exact for every ring word.
// For fixed-point x this is [x < 0] for every encodable value. Cost: MSB then
// B2A, 7 rounds, 271·⌈n/64⌉ words per party (33.875 bytes per element).
func (s *Session) LTZ(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	b, err := s.MSB(ctx, x)
	if err != nil {
		return nil, err
	}
	return s.B2A(ctx, b)
}

// LessThanBits returns XOR shares of [x < y] elementwise, computed as the sign
// of x − y: exact whenever x − y does not overflow int64, in particular when
// |x|, |y| < 2^62 (always true for fixed-point values). Cost: as MSB.
func (s *Session) LessThanBits(ctx context.Context, x, y *share.Tensor) (*BitTensor, error) {
	d, err := cmpDiff("less than", x, y)
	if err != nil {
		return nil, err
	}
	return s.MSB(ctx, d)
}

// LessThan returns additive shares of [x < y] (ring integers 0 or 1), valid
// as for LessThanBits. Cost: as LTZ, 7 rounds, 271·⌈n/64⌉ words per party.
func (s *Session) LessThan(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	b, err := s.LessThanBits(ctx, x, y)
	if err != nil {
		return nil, err
	}
	return s.B2A(ctx, b)
}

// CompareReveal reveals to both parties the bits [x < y] elementwise and
// nothing else: the sign circuit's XOR-shared output is opened, which is
// uniformly random apart from the bit itself. Valid as for LessThanBits.
// Cost: 7 rounds, 271·⌈n/64⌉ words per party. This is QuickSelect's
// comparison against a pivot.
func (s *Session) CompareReveal(ctx context.Context, x, y *share.Tensor) ([]bool, error) {
	b, err := s.LessThanBits(ctx, x, y)
	if err != nil {
		return nil, err
	}
	return s.RevealBits(ctx, b)
}

// CompareBound is the bound of CompareRevealBounded: it is exact whenever
// |x − y| < CompareBound, x − y read as an int64 (for fixed-point values with
// f fractional bits, a difference of less than 2^(31−f) in value: 32768 at
// f = 16).
const CompareBound = 1 << 31

// CompareRevealBounded is CompareReveal for operands known to be close: it
// reveals to both parties the bits [x < y] elementwise, and it is exact
// whenever −2^31 ≤ x − y < 2^31 (in particular |x − y| < CompareBound), the
// difference read as an int64 ring value. For fixed-point values with f
// fractional bits that is a difference of less than 2^(31−f) in value
// (32768 at the default f = 16). Outside the bound the bit revealed is bit
// 31 of x − y, which may be wrong; nothing else is revealed either way.
//
// Each party reduces its share of d = x − y mod 2^32 locally, since
// d0 + d1 ≡ d (mod 2^64) implies d0 mod 2^32 + d1 mod 2^32 ≡ d (mod 2^32),
// and the sign circuit runs on 32-bit words (16 leaves, 4 tree levels; see
// binary.go): bit 31 of d mod 2^32 is the sign of d inside the bound. The
// XOR-shared bit is then opened, uniformly random apart from the bit itself,
// as in CompareReveal.
//
// Cost: 6 rounds (5 for the sign circuit, 1 for the opening) instead of
// CompareReveal's 7; each party sends 129·W words, W = ⌈n/64⌉, in 6
// messages of 76W, 30W, 14W, 6W, 2W and W words (16.125 bytes per element
// plus the frame headers, against 33.875). Dealer material, in this order:
// 76W cross-AND words (CrossANDTriples), AND triples of 15W, 7W, 3W and W
// words (ANDTriples, one draw per level), no bit pairs. An empty input costs
// nothing.
func (s *Session) CompareRevealBounded(ctx context.Context, x, y *share.Tensor) ([]bool, error) {
	d, err := cmpDiff("compare bounded", x, y)
	if err != nil {
		return nil, err
	}
	w, err := s.msbBitsWith(ctx, d.Data, 32, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("protocol: compare bounded %v: %w", d.Shape, err)
	}
	return s.RevealBits(ctx, &BitTensor{Shape: d.Shape, Words: w})
}

// cmpDiff returns x − y after checking the shapes.
func cmpDiff(op string, x, y *share.Tensor) (*share.Tensor, error) {
	if err := cmpCheck(op, x); err != nil {
		return nil, err
	}
	if err := cmpCheck(op, y); err != nil {
		return nil, err
	}
	if !slices.Equal(x.Shape, y.Shape) {
		return nil, fmt.Errorf("protocol: %s: shapes %v and %v differ", op, x.Shape, y.Shape)
	}
	d := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, len(x.Data))}
	for i, v := range x.Data {
		d.Data[i] = v - y.Data[i]
	}
	return d, nil
}

// MulBit returns shares of x·b elementwise, b a shared bit (the multiplexer:
// x where b = 1, 0 where b = 0); x may hold any ring words (fixed-point or
// integer) and the product is exact. One round: with random bits r, a mask A
// and shares of A·r from BitPairs, both parties open t = b ⊕ r (packed) and
// e = x − A in the same exchange; then, since b = t + r − 2tr,
//
//	x·b = t·x + (1 − 2t)·x·r   and   x·r = (e + A)·r = e·[r] + [A·r],
//
// so each party's share is t·x_i + (1 − 2t)·(e·r_i + (Ar)_i). Cost: 1 round,
// ⌈n/64⌉ + n words per party in one message.
func (s *Session) MulBit(ctx context.Context, x *share.Tensor, b *BitTensor) (*share.Tensor, error) {
	if err := cmpCheck("mul bit", x); err != nil {
		return nil, err
	}
	if err := b.check("mul bit"); err != nil {
		return nil, err
	}
	if !slices.Equal(x.Shape, b.Shape) {
		return nil, fmt.Errorf("protocol: mul bit: shapes %v and %v differ", x.Shape, b.Shape)
	}
	n := len(x.Data)
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, n)}
	if n == 0 {
		return out, nil
	}
	bp, err := s.bitPairs(ctx, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: mul bit %v: %w", x.Shape, err)
	}
	w := len(b.Words)
	send := share.GetWords(w + n) // scratch: overwritten before use
	defer share.PutWords(send)
	for j := 0; j < w; j++ {
		send[j] = b.Words[j] ^ bp.Packed[j]
	}
	share.MaskTail(send[:w], n)
	for i, v := range x.Data {
		send[w+i] = v - bp.A[i]
	}
	recv := share.GetWords(w + n) // scratch: overwritten before use
	defer share.PutWords(recv)
	if err := s.Exchange(ctx, send, recv); err != nil {
		return nil, fmt.Errorf("protocol: mul bit %v: %w", x.Shape, err)
	}
	for i, xi := range x.Data {
		t := (send[i>>6] ^ recv[i>>6]) >> (uint(i) & 63) & 1
		e := send[w+i] + recv[w+i]
		xr := e*bp.Arith[i] + bp.AR[i]
		out.Data[i] = t*xi + (1-2*t)*xr
	}
	return out, nil
}

// Select returns shares of cond ? a : b elementwise, as b + cond·(a − b):
// one MulBit, 1 round, ⌈n/64⌉ + n words per party.
func (s *Session) Select(ctx context.Context, cond *BitTensor, a, b *share.Tensor) (*share.Tensor, error) {
	d, err := cmpDiff("select", a, b)
	if err != nil {
		return nil, err
	}
	m, err := s.MulBit(ctx, d, cond)
	if err != nil {
		return nil, fmt.Errorf("protocol: select: %w", err)
	}
	for i, v := range b.Data {
		m.Data[i] += v
	}
	return m, nil
}

// ReLU returns shares of max(x, 0) elementwise, as x·(1 − msb(x)): the sign
// circuit, a local NOT and one MulBit. Exact for every ring word read as an
// int64. Cost: 7 rounds; 271·⌈n/64⌉ + n words per party (41.875 bytes per
// element plus 7 frame headers).
func (s *Session) ReLU(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	neg, err := s.MSB(ctx, x)
	if err != nil {
		return nil, fmt.Errorf("protocol: relu: %w", err)
	}
	pos, err := s.NotBits(neg)
	if err != nil {
		return nil, fmt.Errorf("protocol: relu: %w", err)
	}
	out, err := s.MulBit(ctx, x, pos)
	if err != nil {
		return nil, fmt.Errorf("protocol: relu: %w", err)
	}
	return out, nil
}

// TruncReLU returns shares of ReLU(TruncBy(x, f)) elementwise — the
// truncation after a fixed-point product followed by ReLU, as in every
// approximator MLP — in 7 rounds instead of TruncBy's 1 plus ReLU's 7. Valid
// as TruncBy: for |x| < 2^62 (TruncBound) and 1 ≤ f ≤ 62 the result is
// ReLU(y) with y = floor(x/2^f) or floor(x/2^f) + 1, the value TruncBy
// returns on the same dealer material.
//
// The sign is taken on the untruncated x, so the sign circuit does not wait
// for the truncation and the truncation's opening travels in the sign
// circuit's first message (the leaves' cross ANDs). This is exact: for
// x ≥ 0, y ≥ 0; for x < 0, y ≤ 0 (floor(x/2^f) ≤ −1, plus at most 1), so
// y·(1 − msb(x)) = max(y, 0) for every x in range (the only case where the
// signs of x and y differ, x < 0 with y = 0, gives 0 both ways). Then y·(1 − msb(x)) is one MulBit, as in ReLU.
//
// Cost: 7 rounds; each party sends 272·W + n words (W = ⌈n/64⌉) in 7
// messages: msg(157W) (the truncation's W words of bits, then the leaves'),
// msg(62W), msg(30W), msg(14W), msg(6W), msg(2W) and MulBit's msg(n + W) —
// TruncBy then ReLU's words with one frame header fewer (while the merged
// first message fits in one frame). An empty x costs
// nothing (no message, no dealer material).
//
// Dealer material, in this fixed order for every call on n elements: n
// wrap pairs for 2^f (WrapPairs), the leaves' 156W cross-AND words
// (CrossANDTriples), the carry tree's AND triples of 31W, 15W, 7W, 3W and W
// words (ANDTriples, one draw per level), and n bit pairs (BitPairs) — the
// very draws of TruncBy followed by ReLU on the same tensor.
//
// What a party receives: the peer's top-bit masks of the truncation (each
// masked by a uniform bit of a wrap pair) and the sign circuit's and
// multiplexer's masked words, each masked by fresh dealer material: uniform
// whatever x is, exactly as in TruncBy and ReLU.
func (s *Session) TruncReLU(ctx context.Context, x *share.Tensor, f uint) (*share.Tensor, error) {
	return s.TruncReLURing(ctx, x, f, 64)
}

// Max returns shares of the maximum of x along its last dimension; the result
// has x's shape without the last dimension. Inputs must satisfy
// |x_i − x_j| < 2^63 (true for fixed-point values). A tournament tree: each
// of ⌈log2 m⌉ levels (m the last dimension) compares pairs (MSB of the
// difference, 6 rounds) and keeps the larger with one MulBit (1 round), so
// 7·⌈log2 m⌉ rounds.
func (s *Session) Max(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	mx, _, err := s.maxTree(ctx, x, false)
	return mx, err
}

// ArgMax returns shares of the maximum of x along its last dimension (shape
// without the last dimension) and of the one-hot indicator of its position
// (x's shape; ring integers 0 or 1, exactly one 1 per row; on ties the
// lowest index wins). Same rounds as Max, 7·⌈log2 m⌉; each level's MulBit
// also carries the one-hot entries of the compared candidates (at most m
// per row).
func (s *Session) ArgMax(ctx context.Context, x *share.Tensor) (max, onehot *share.Tensor, err error) {
	return s.maxTree(ctx, x, true)
}

// maxTree runs the tournament of Max/ArgMax.
func (s *Session) maxTree(ctx context.Context, x *share.Tensor, arg bool) (*share.Tensor, *share.Tensor, error) {
	if err := cmpCheck("max", x); err != nil {
		return nil, nil, err
	}
	if len(x.Shape) == 0 || x.Shape[len(x.Shape)-1] == 0 {
		return nil, nil, fmt.Errorf("protocol: max of %v: need a non-empty last dimension", x.Shape)
	}
	m := x.Shape[len(x.Shape)-1]
	rows := len(x.Data) / m
	outShape := slices.Clone(x.Shape[:len(x.Shape)-1])

	// cur holds rows × k candidates; span[c] is how many positions candidate c
	// (of every row) covers, starting at start[c].
	k := m
	cur := slices.Clone(x.Data)
	start := make([]int, m)
	span := make([]int, m)
	for c := range start {
		start[c], span[c] = c, 1
	}
	var oh []uint64
	if arg {
		oh = make([]uint64, len(x.Data))
		if s.party == 0 {
			for i := range oh {
				oh[i] = 1
			}
		}
	}
	for level := 1; k > 1; level++ {
		p := k / 2
		// d = a − b for each pair (a = 2i, b = 2i+1); c = [d < 0] = [b wins],
		// so ties keep a, the lower index.
		d := make([]uint64, rows*p)
		for r := 0; r < rows; r++ {
			for i := 0; i < p; i++ {
				d[r*p+i] = cur[r*k+2*i] - cur[r*k+2*i+1]
			}
		}
		c, err := s.msbBits(ctx, d)
		if err != nil {
			return nil, nil, fmt.Errorf("protocol: max %v, level %d: %w", x.Shape, level, err)
		}
		// One multiplexer for c·d and, for argmax, c·(one-hot entries of
		// both candidates of each pair).
		covered := 0
		if arg {
			covered = start[2*p-1] + span[2*p-1] // positions 0..covered−1 belong to pairs
		}
		cnt := rows*p + rows*covered
		vals := make([]uint64, cnt)
		bits := make([]uint64, share.PackedWords(cnt))
		copy(vals, d)
		copy(bits, c)
		share.MaskTail(bits[:len(c)], rows*p)
		if arg {
			for r := 0; r < rows; r++ {
				for i := 0; i < p; i++ {
					bit := c[(r*p+i)>>6] >> (uint(r*p+i) & 63) & 1
					lo := start[2*i]
					hi := start[2*i+1] + span[2*i+1]
					for pos := lo; pos < hi; pos++ {
						j := rows*p + r*covered + pos
						vals[j] = oh[r*m+pos]
						bits[j>>6] |= bit << (uint(j) & 63)
					}
				}
			}
		}
		prod, err := s.MulBit(ctx, &share.Tensor{Shape: []int{cnt}, Data: vals}, &BitTensor{Shape: []int{cnt}, Words: bits})
		if err != nil {
			return nil, nil, fmt.Errorf("protocol: max %v, level %d: %w", x.Shape, level, err)
		}
		nk := (k + 1) / 2
		next := make([]uint64, rows*nk)
		for r := 0; r < rows; r++ {
			for i := 0; i < p; i++ {
				// max = a − c·(a − b)
				next[r*nk+i] = cur[r*k+2*i] - prod.Data[r*p+i]
			}
			if k%2 == 1 {
				next[r*nk+p] = cur[r*k+k-1]
			}
		}
		if arg {
			for r := 0; r < rows; r++ {
				for i := 0; i < p; i++ {
					a, b := 2*i, 2*i+1
					for pos := start[a]; pos < start[a]+span[a]; pos++ {
						oh[r*m+pos] -= prod.Data[rows*p+r*covered+pos] // (1−c)·oh
					}
					for pos := start[b]; pos < start[b]+span[b]; pos++ {
						oh[r*m+pos] = prod.Data[rows*p+r*covered+pos] // c·oh
					}
				}
			}
		}
		nstart := make([]int, nk)
		nspan := make([]int, nk)
		for i := 0; i < p; i++ {
			nstart[i] = start[2*i]
			nspan[i] = span[2*i] + span[2*i+1]
		}
		if k%2 == 1 {
			nstart[p], nspan[p] = start[k-1], span[k-1]
		}
		cur, k, start, span = next, nk, nstart, nspan
	}
	mx := &share.Tensor{Shape: outShape, Data: cur}
	if !arg {
		return mx, nil, nil
	}
	return mx, &share.Tensor{Shape: slices.Clone(x.Shape), Data: oh}, nil
}

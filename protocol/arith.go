package protocol

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Costs below are per call, for a tensor of n elements. "Bytes" is what each
// party sends: 8 bytes per ring word plus the transport's framing of each
// message (10 bytes per frame; see package transport), written
// msg(w) = 8w + 10 for messages up to 1 MiB.

// Add returns this party's share of x + y (local, no communication).
func (s *Session) Add(x, y *share.Tensor) (*share.Tensor, error) {
	out, err := share.Add(x, y)
	if err != nil {
		return nil, fmt.Errorf("protocol: add: %w", err)
	}
	return out, nil
}

// Sub returns this party's share of x − y (local).
func (s *Session) Sub(x, y *share.Tensor) (*share.Tensor, error) {
	out, err := share.Sub(x, y)
	if err != nil {
		return nil, fmt.Errorf("protocol: sub: %w", err)
	}
	return out, nil
}

// Neg returns this party's share of −x (local).
func (s *Session) Neg(x *share.Tensor) *share.Tensor { return share.Neg(x) }

// AddPublic returns this party's share of x + p for a public tensor p of
// ring words with x's shape (party 0 adds p, party 1 copies its share; local).
func (s *Session) AddPublic(x, p *share.Tensor) (*share.Tensor, error) {
	out, err := share.AddPublic(x, p, s.party)
	if err != nil {
		return nil, fmt.Errorf("protocol: add public: %w", err)
	}
	return out, nil
}

// AddPublicScalar returns this party's share of x + c for a public ring word c
// (e.g. a fixed-point constant from FixedPoint.Encode, or 1 for a bit; local).
func (s *Session) AddPublicScalar(x *share.Tensor, c uint64) *share.Tensor {
	out := x.Clone()
	if s.party == 0 {
		for i := range out.Data {
			out.Data[i] += c
		}
	}
	return out
}

// MulPublicInt returns this party's share of c·x for a public integer c
// (local, exact in the ring; no truncation since c carries no fraction).
func (s *Session) MulPublicInt(x *share.Tensor, c int64) *share.Tensor {
	return share.MulScalar(x, uint64(c))
}

// MulPublic returns this party's share of x·p (fixed point) for a public
// fixed-point tensor p whose shape is x's shape or a suffix of it (p is then
// broadcast over the leading dimensions, e.g. a [n] vector over [..., n]):
// the local ring product followed by Trunc.
//
// Cost: 1 round (the truncation), msg(⌈n/64⌉) bytes per party. Error:
// ≤ 1 ulp beyond the rounding of p.
func (s *Session) MulPublic(ctx context.Context, x, p *share.Tensor) (*share.Tensor, error) {
	if p.Rank() > x.Rank() || !slices.Equal(p.Shape, x.Shape[x.Rank()-p.Rank():]) {
		return nil, fmt.Errorf("protocol: mul public %v by %v: public operand must match a suffix of the shape", x.Shape, p.Shape)
	}
	out := x.Clone()
	if pl := p.Len(); pl > 0 {
		for off := 0; off < len(out.Data); off += pl {
			row := out.Data[off : off+pl]
			for i, v := range p.Data {
				row[i] *= v
			}
		}
	}
	res, err := s.Trunc(ctx, out)
	if err != nil {
		return nil, fmt.Errorf("protocol: mul public: %w", err)
	}
	return res, nil
}

// scalarExtraBits returns the extra fractional bits g with which
// MulPublicScalar encodes its constant: the most that keep the product of a
// value v (|v| < 2^IntBits, the output range) encoded with f+g+f bits below
// 2^61, inside Trunc's bound.
func (s *Session) scalarExtraBits() uint {
	f, ib := int(s.fp.FracBits), int(s.fp.IntBits)
	return uint(max(0, 61-ib-2*f))
}

// MulPublicScalar returns this party's share of c·x (fixed point) for a public
// real c. The constant is encoded with f+g fractional bits, g =
// max(0, 61 − IntBits − 2f) (14 for the default encoding), and the product is
// truncated by f+g, so a constant such as 1/768 loses no relative precision to
// its encoding. The output c·x must lie in the encoding's range
// (|c·x| < 2^IntBits); x itself may exceed it (e.g. a sum before a mean).
//
// Cost: 1 round, msg(⌈n/64⌉) bytes per party (the truncation). Error: ≤ 1
// ulp + |x|·2^−(f+g+1).
func (s *Session) MulPublicScalar(ctx context.Context, x *share.Tensor, c float64) (*share.Tensor, error) {
	g := s.scalarExtraBits()
	shift := s.fp.FracBits + g
	cs := math.Ldexp(c, int(shift))
	if math.IsNaN(cs) || math.Abs(cs) >= math.Ldexp(1, 62) {
		return nil, fmt.Errorf("protocol: mul public scalar %g: out of range", c)
	}
	cw := uint64(int64(math.RoundToEven(cs)))
	prod := share.MulScalar(x, cw)
	res, err := s.TruncBy(ctx, prod, shift)
	if err != nil {
		return nil, fmt.Errorf("protocol: mul public scalar %g: %w", c, err)
	}
	return res, nil
}

// Sum returns this party's share of the sum of x along axis, which is
// removed from the shape (local).
func (s *Session) Sum(x *share.Tensor, axis int) (*share.Tensor, error) {
	r := x.Rank()
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return nil, fmt.Errorf("protocol: sum of %v along axis %d", x.Shape, axis)
	}
	outer, inner := 1, 1
	for _, d := range x.Shape[:axis] {
		outer *= d
	}
	for _, d := range x.Shape[axis+1:] {
		inner *= d
	}
	n := x.Shape[axis]
	shape := append(slices.Clone(x.Shape[:axis]), x.Shape[axis+1:]...)
	out, err := share.NewTensor(shape...)
	if err != nil {
		return nil, fmt.Errorf("protocol: sum: %w", err)
	}
	for o := 0; o < outer; o++ {
		dst := out.Data[o*inner : (o+1)*inner]
		for j := 0; j < n; j++ {
			src := x.Data[(o*n+j)*inner : (o*n+j+1)*inner]
			for i, v := range src {
				dst[i] += v
			}
		}
	}
	return out, nil
}

// Mean returns this party's share of the mean of x along axis (removed from
// the shape): Sum, then MulPublicScalar by 1/n.
//
// Cost: 1 round, msg(⌈m/64⌉) bytes per party, m = n/len(axis) the
// elements of the result. Error: ≤ 1 ulp +
// |sum|·2^−(f+g+1) (g as in MulPublicScalar).
func (s *Session) Mean(ctx context.Context, x *share.Tensor, axis int) (*share.Tensor, error) {
	sum, err := s.Sum(x, axis)
	if err != nil {
		return nil, fmt.Errorf("protocol: mean: %w", err)
	}
	if axis < 0 {
		axis += x.Rank()
	}
	n := x.Shape[axis]
	if n == 0 {
		return nil, fmt.Errorf("protocol: mean of %v along empty axis %d", x.Shape, axis)
	}
	return s.MulPublicScalar(ctx, sum, 1/float64(n))
}

// Mul returns this party's share of the elementwise ring product x·y (no
// truncation: for fixed-point operands the result has 2f fractional bits; use
// MulFixed). Beaver triples: both parties open e = x − a and f = y − b in one
// exchange, then z = e·f [party 0] + e·[b] + f·[a] + [c].
//
// Cost: 1 round, msg(2n) = 16n + 10 bytes per party. What a party receives is
// the peer's shares of x − a and y − b, uniform because a and b are.
func (s *Session) Mul(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	if !x.SameShape(y) {
		return nil, fmt.Errorf("protocol: mul of %v and %v: shapes differ", x.Shape, y.Shape)
	}
	n := x.Len()
	t, err := s.prov.Triples(ctx, s.StreamID(), n)
	if err != nil {
		return nil, fmt.Errorf("protocol: mul %v: %w", x.Shape, err)
	}
	send := share.GetWords(2 * n) // scratch: overwritten before use
	defer share.PutWords(send)
	for i := 0; i < n; i++ {
		send[i] = x.Data[i] - t.A[i]
		send[n+i] = y.Data[i] - t.B[i]
	}
	recv := share.GetWords(2 * n) // scratch: overwritten before use
	defer share.PutWords(recv)
	if err := s.Exchange(ctx, send, recv); err != nil {
		return nil, fmt.Errorf("protocol: mul %v: %w", x.Shape, err)
	}
	if err := share.AddVec(send, send, recv); err != nil { // e, then f
		return nil, fmt.Errorf("protocol: mul %v: %w", x.Shape, err)
	}
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, n)}
	s.beaverProduct(out.Data, send[:n], send[n:], t)
	return out, nil
}

// beaverProduct sets out to this party's share of x·y from the opened
// e = x − a and f = y − b and its shares t of a, b and c = a·b:
// e·f [party 0] + e·[b] + f·[a] + [c], since (e + a)(f + b) = ef + eb + fa
// + ab.
func (s *Session) beaverProduct(out, e, f []uint64, t beaver.Triple) {
	p0 := s.party == 0
	for i := range out {
		z := e[i]*t.B[i] + f[i]*t.A[i] + t.C[i]
		if p0 {
			z += e[i] * f[i]
		}
		out[i] = z
	}
}

// MulFixed returns this party's share of the fixed-point product x·y: Mul
// followed by Trunc.
//
// Cost: 2 rounds, msg(2n) + msg(⌈n/64⌉) bytes per party.
// Error: ≤ 1 ulp (when |x·y| stays inside the encoding's range).
func (s *Session) MulFixed(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	z, err := s.Mul(ctx, x, y)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, z)
}

// Square returns this party's share of the elementwise ring square x² with a
// square pair (a, a²): open e = x − a (one exchange), then
// x² = e² [party 0] + 2e·[a] + [a²].
//
// Cost: 1 round, msg(n) = 8n + 10 bytes per party.
func (s *Session) Square(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	n := x.Len()
	sp, err := s.prov.SquarePairs(ctx, s.StreamID(), n)
	if err != nil {
		return nil, fmt.Errorf("protocol: square %v: %w", x.Shape, err)
	}
	e := share.GetWords(n) // scratch: overwritten before use
	defer share.PutWords(e)
	if err := s.openMasked(ctx, e, x.Data, sp.A); err != nil {
		return nil, fmt.Errorf("protocol: square %v: %w", x.Shape, err)
	}
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, n)}
	s.squareFrom(out.Data, e, sp)
	return out, nil
}

// openMasked sets e to the opened x − mask (e, x and mask of one length):
// this party sends its share of x − mask and adds the peer's, one exchange.
func (s *Session) openMasked(ctx context.Context, e, x, mask []uint64) error {
	return s.openMaskedIn(ctx, e, x, mask, 64)
}

// openMaskedIn is openMasked in the ring Z_2^ring (2 ≤ ring ≤ 64; 64 is
// openMasked): e = x − mask mod 2^ring, the shares sent packed at ring bits
// (exchangeRing), every word of e below 2^ring.
func (s *Session) openMaskedIn(ctx context.Context, e, x, mask []uint64, ring uint) error {
	if err := share.SubVec(e, x, mask); err != nil {
		return err
	}
	recv := share.GetWords(len(e)) // scratch: overwritten before use
	defer share.PutWords(recv)
	if err := s.exchangeRing(ctx, e, recv, ring); err != nil {
		return err
	}
	if err := share.AddVec(e, e, recv); err != nil {
		return err
	}
	maskRing(e, ring)
	return nil
}

// squareFrom sets out to this party's share of x² from the opened e = x − a
// and its shares sp of a and a²: e² [party 0] + 2e·[a] + [a²].
func (s *Session) squareFrom(out, e []uint64, sp beaver.SquarePair) {
	p0 := s.party == 0
	for i := range out {
		z := 2*e[i]*sp.A[i] + sp.A2[i]
		if p0 {
			z += e[i] * e[i]
		}
		out[i] = z
	}
}

// SquareKeep returns this party's share of the elementwise ring square x²
// (as Square) and keeps x's opening for one later ring product x·y by the
// returned KeptOpening's Mul, so that x − a travels once for both products.
// It is SquareKeepRing at 64 bits.
//
// Cost: 1 round, msg(n) = 8n + 10 bytes per party, as Square; the later
// KeptOpening.Mul costs 1 round and msg(n) where Mul costs msg(2n): the two
// products take msg(n) + msg(n), 8n bytes per party fewer than Square and Mul
// (msg(n) + msg(2n)).
//
// It draws one square-and-product quadruple per element (a, a², b, a·b;
// beaver.Typed.SquareProducts), opens e = x − a (one exchange) and returns
// x² = e² [party 0] + 2e·[a] + [a²]; the KeptOpening holds e and this
// party's shares of a, b and a·b. The Mul opens only f = y − b and returns
// x·y = e·f [party 0] + e·[b] + f·[a] + [a·b], since (e + a)(f + b) =
// ef + eb + fa + ab.
//
// Why keeping e is secure: what a party receives is the peer's share of
// e = x − a and, at the Mul, of f = y − b. a and b are uniform, independent
// and this item's alone, so e and f are a one-time pad of x and of y:
// uniform and independent of both whatever x and y are, exactly the view of
// one Beaver multiplication x·y (Mul), and the square adds no opening: x² is
// made from the same e and the share of a², which is never opened. Opening
// e once and using it twice reveals nothing a second opening would not
// (the second would be the same e); what must not happen is a second use
// of b (two openings y − b and y' − b give y − y') or of a with another x
// (x − x'): the KeptOpening's Mul runs once, for y of x's shape, and x is
// fixed by the SquareKeep that drew a.
func (s *Session) SquareKeep(ctx context.Context, x *share.Tensor) (*share.Tensor, *KeptOpening, error) {
	return s.squareKeepIn(ctx, x, 64)
}

// squareKeepIn is SquareKeep (ring 64) and SquareKeepRing (2 ≤ ring < 64):
// the one square-and-keep, whose opening is whole words in Z_2^64 and
// packed at ring bits below it, its square and its KeptOpening's product
// reduced mod 2^ring.
func (s *Session) squareKeepIn(ctx context.Context, x *share.Tensor, ring uint) (*share.Tensor, *KeptOpening, error) {
	what := "square keep %v"
	if ring < 64 {
		what += fmt.Sprintf(" mod 2^%d", ring)
	}
	if x == nil {
		return nil, nil, fmt.Errorf("protocol: square keep of nothing")
	}
	n := x.Len()
	q, err := s.prov.SquareProductsRing(ctx, s.StreamID(), ring, n)
	if err != nil {
		return nil, nil, fmt.Errorf("protocol: "+what+": %w", x.Shape, err)
	}
	e := make([]uint64, n) // kept: the KeptOpening's
	if err := s.openMaskedIn(ctx, e, x.Data, q.A, ring); err != nil {
		return nil, nil, fmt.Errorf("protocol: "+what+": %w", x.Shape, err)
	}
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, n)}
	s.squareFrom(out.Data, e, beaver.SquarePair{A: q.A, A2: q.A2})
	maskRing(out.Data, ring)
	k := &KeptOpening{s: s, shape: slices.Clone(x.Shape), n: n, ring: ring, e: e, a: q.A, b: q.B, ab: q.AB}
	return out, k, nil
}

// KeptOpening is what SquareKeep keeps of its opening of x for one later
// product x·y: the opened e = x − a, this party's shares of a, b and a·b,
// x's shape, the ring (64, or SquareKeepRing's) and the session. Its Mul may
// run once; a second call, a y of another shape or another session is an
// error, never a reuse of b.
type KeptOpening struct {
	s        *Session
	shape    []int
	n        int
	ring     uint
	e        []uint64
	a, b, ab []uint64
	used     atomic.Bool
}

// Mul returns this party's share of the elementwise ring product x·y, x the
// tensor SquareKeep squared and y a shared tensor of its shape, on the
// session s that ran SquareKeep (no truncation: for fixed-point operands the
// result has 2f fractional bits, as Mul's). After SquareKeepRing the product
// is taken in its ring: y is read mod 2^ring, f = y − b is opened mod 2^ring
// and sent packed at ring bits, and the result is x·y mod 2^ring, every word
// below 2^ring (for TruncByRing with the same ring).
//
// Cost: 1 round, msg(n) = 8n + 10 bytes per party (f = y − b alone: e was
// opened by SquareKeep), where Mul costs msg(2n); after SquareKeepRing,
// SquareKeepRingCost(n, ring).
//
// It runs once: the material is marked used before f is sent, so a second
// call (or one after a failed exchange, whose f the peer may hold) is an
// error and b is never opened twice (see SquareKeep for why).
func (k *KeptOpening) Mul(ctx context.Context, s *Session, y *share.Tensor) (*share.Tensor, error) {
	if k == nil || s != k.s {
		return nil, fmt.Errorf("protocol: kept opening mul: not the session that kept it")
	}
	if y == nil {
		return nil, fmt.Errorf("protocol: kept opening mul of %v by nothing: shapes differ", k.shape)
	}
	if !slices.Equal(y.Shape, k.shape) || len(y.Data) != k.n {
		return nil, fmt.Errorf("protocol: kept opening mul of %v by %v: shapes differ", k.shape, y.Shape)
	}
	if !k.used.CompareAndSwap(false, true) {
		return nil, fmt.Errorf("protocol: kept opening mul %v: already used (its material serves one product)", k.shape)
	}
	n := k.n
	f := share.GetWords(n) // scratch: overwritten before use
	defer share.PutWords(f)
	if err := s.openMaskedIn(ctx, f, y.Data, k.b, k.ring); err != nil {
		return nil, fmt.Errorf("protocol: kept opening mul %v: %w", k.shape, err)
	}
	out := &share.Tensor{Shape: slices.Clone(k.shape), Data: make([]uint64, n)}
	s.beaverProduct(out.Data, k.e, f, beaver.Triple{A: k.a, B: k.b, C: k.ab})
	maskRing(out.Data, k.ring)
	k.e, k.a, k.b, k.ab = nil, nil, nil, nil
	return out, nil
}

// SquareFixed returns this party's share of the fixed-point square x²:
// Square followed by Trunc.
//
// Cost: 2 rounds, msg(n) + msg(⌈n/64⌉) bytes per party. Error: ≤ 1 ulp.
func (s *Session) SquareFixed(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	z, err := s.Square(ctx, x)
	if err != nil {
		return nil, err
	}
	return s.Trunc(ctx, z)
}

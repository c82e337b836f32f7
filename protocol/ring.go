package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// Products in a narrower ring. A shared×shared product whose value is known
// to lie in [−2^(ℓ−2), 2^(ℓ−2)) can be computed on shares mod 2^ℓ
// (MatMulRing, with matrix triples mod 2^ℓ, whose dealer-free generation
// sends ℓ(ℓ+1)/2 bits of Gilboa corrections per multiply-add instead of
// 2,080: beaver.Request.RingBits; SquareKeepRing and its KeptOpening's Mul,
// with square-and-product quadruples mod 2^ℓ), and the truncation that follows it
// (TruncByRing, TruncReLURing) extends the result back to 64-bit shares in
// its own round: nothing is added to the protocol but the bound.

// minRingBits is the narrowest ring a truncation runs in: it needs
// 1 ≤ f ≤ ℓ − 2.
const minRingBits = 3

// ringMask returns the low ring bits set (2 ≤ ring ≤ 64).
func ringMask(ring uint) uint64 { return ^uint64(0) >> (64 - ring) }

// maskRing reduces every word of x mod 2^ring (nothing at 64).
func maskRing(x []uint64, ring uint) {
	if ring >= 64 {
		return
	}
	m := ringMask(ring)
	for i := range x {
		x[i] &= m
	}
}

// exchangeRing is Exchange of words mod 2^ring (2 ≤ ring ≤ 64; 64 is
// Exchange): send's words are sent packed at ring bits a word
// (share.PackFields keeps the low ring bits, so their high bits are never
// sent), and recv (len(send) words) gets the peer's, each below 2^ring. One
// exchange of msg(⌈len(send)·ring/64⌉) bytes.
func (s *Session) exchangeRing(ctx context.Context, send, recv []uint64, ring uint) error {
	if ring >= 64 {
		return s.Exchange(ctx, send, recv)
	}
	pw := share.FieldWords(len(send), ring)
	packed, peer := share.GetWords(pw), share.GetWords(pw) // scratch: PackFields clears, Exchange fills
	defer share.PutWords(packed)
	defer share.PutWords(peer)
	share.PackFields(packed, send, ring)
	if err := s.Exchange(ctx, packed, peer); err != nil {
		return err
	}
	share.UnpackFields(recv[:len(send)], peer, ring)
	return nil
}

// MatMulRing is MatMul in the ring Z_2^ring (2 ≤ ring ≤ 64; 64 is MatMul):
// this party's share, mod 2^ring (every word below 2^ring), of x·y mod
// 2^ring. x and y are ordinary shares (mod 2^64, or mod 2^ring: only their
// low ring bits are read). It is exact mod 2^ring; the caller states by
// choosing ring that the product's value lies in [−2^(ring−2), 2^(ring−2))
// and passes the result to TruncByRing or TruncReLURing with the same ring,
// which return 64-bit shares.
//
// Protocol: MatMul's with a matrix triple mod 2^ring (Typed.MatTriplesRing)
// and the openings E = X − A and F = Y − B taken mod 2^ring and sent packed
// at ring bits a word (share.PackFields): what the peer receives is its
// share minus a uniform value mod 2^ring, uniform whatever x and y are (the
// high bits, which would carry the sign of a small X, are never sent).
//
// Cost: MatMulRingCost, 1 round and msg(⌈(|x| + |y|)·ring/64⌉) bytes per
// party.
func (s *Session) MatMulRing(ctx context.Context, x, y *share.Tensor, ring uint) (*share.Tensor, error) {
	if ring < 2 || ring > 64 {
		return nil, fmt.Errorf("protocol: matmul in Z_2^%d: need 2 ≤ ℓ ≤ 64", ring)
	}
	return s.matMulIn(ctx, x, y, ring)
}

// matMulIn is MatMul (ring 64) and MatMulRing (2 ≤ ring < 64): the one
// Beaver product, whose openings are whole words in Z_2^64 and packed at
// ring bits below it.
func (s *Session) matMulIn(ctx context.Context, x, y *share.Tensor, ring uint) (*share.Tensor, error) {
	what := "matmul %v·%v"
	if ring < 64 {
		what += fmt.Sprintf(" mod 2^%d", ring)
	}
	batch, m, k, n, shape, err := matmulShape(x, y)
	if err != nil {
		return nil, err
	}
	tm, tb := m, batch
	if y.Rank() == 2 {
		tm, tb = batch*m, 1
	}
	g, err := s.GEMM()
	if err != nil {
		return nil, fmt.Errorf("protocol: "+what+": %w", x.Shape, y.Shape, err)
	}
	t, err := s.prov.MatTriplesRing(ctx, s.StreamID(), ring, tb, tm, k, n)
	if err != nil {
		return nil, fmt.Errorf("protocol: "+what+": %w", x.Shape, y.Shape, err)
	}
	nx, ny := x.Len(), y.Len()
	send := share.GetWords(nx + ny) // scratch: overwritten before use
	defer share.PutWords(send)
	_ = share.SubVec(send[:nx], x.Data, t.A)
	_ = share.SubVec(send[nx:], y.Data, t.B)
	recv := share.GetWords(nx + ny) // scratch: overwritten before use
	defer share.PutWords(recv)
	// The openings, mod 2^ring and packed at ring bits below 64.
	if err := s.exchangeRing(ctx, send[:nx+ny], recv, ring); err != nil {
		return nil, fmt.Errorf("protocol: "+what+": %w", x.Shape, y.Shape, err)
	}
	e, f := recv[:nx], recv[nx:nx+ny]
	_ = share.AddVec(e, e, send[:nx])
	_ = share.AddVec(f, f, send[nx:nx+ny])
	out := &share.Tensor{Shape: shape, Data: make([]uint64, tb*tm*n)}
	tmp := share.GetWords(len(out.Data)) // scratch: overwritten before use
	defer share.PutWords(tmp)
	if err := g.BatchMatMul(out.Data, x.Data, f, tb, tm, k, n); err != nil {
		return nil, fmt.Errorf("protocol: matmul on %s: %w", g.Name(), err)
	}
	if err := g.BatchMatMul(tmp, e, t.B, tb, tm, k, n); err != nil {
		return nil, fmt.Errorf("protocol: matmul on %s: %w", g.Name(), err)
	}
	_ = share.AddVec(out.Data, out.Data, tmp)
	_ = share.AddVec(out.Data, out.Data, t.C)
	maskRing(out.Data, ring)
	return out, nil
}

// MatMulRingCost returns the cost of MatMulRing of x (n_x words) and y
// (n_y) in Z_2^ring for each party: one round and one message of the
// openings packed at ring bits, msg(⌈(n_x + n_y)·ring/64⌉) (MatMul's at 64).
func MatMulRingCost(nx, ny int, ring uint) Cost {
	return Cost{Rounds: 1, Bytes: MessageBytes(share.FieldWords(nx+ny, ring))}
}

// SquareKeepRing is SquareKeep in the ring Z_2^ring (2 ≤ ring ≤ 64; 64 is
// SquareKeep): this party's share, mod 2^ring (every word below 2^ring), of
// x² mod 2^ring, and the KeptOpening whose Mul returns x·y mod 2^ring. x
// (and the Mul's y) are ordinary shares (mod 2^64, or mod 2^ring: only
// their low ring bits are read). Exact mod 2^ring; the caller states by
// choosing ring that x² and x·y lie in [−2^(ring−2), 2^(ring−2)) and
// passes them to TruncByRing with the same ring, which returns 64-bit
// shares in the truncation's own round.
//
// Protocol: SquareKeep's with a square-and-product quadruple mod 2^ring
// (beaver.Typed.SquareProductsRing, whose dealer-free generation sends
// ring(ring+1)/2 bits of Gilboa corrections per cross product instead of
// 2,080) and the openings e = x − a (here) and f = y − b (the Mul) taken
// mod 2^ring and sent packed at ring bits a word: what the peer receives is
// its share minus a uniform value mod 2^ring, uniform whatever x and y are
// (the high bits, which would carry the sign of a small x, are never sent).
//
// Cost: SquareKeepRingCost(n, ring) here and again for the Mul: 1 round and
// msg(⌈n·ring/64⌉) bytes per party each (SquareKeep's msg(n) at 64).
func (s *Session) SquareKeepRing(ctx context.Context, x *share.Tensor, ring uint) (*share.Tensor, *KeptOpening, error) {
	if ring < 2 || ring > 64 {
		return nil, nil, fmt.Errorf("protocol: square keep in Z_2^%d: need 2 ≤ ℓ ≤ 64", ring)
	}
	return s.squareKeepIn(ctx, x, ring)
}

// SquareKeepRingCost returns the cost of SquareKeepRing of n elements in
// Z_2^ring for each party, and the same of its KeptOpening's Mul: one round
// and one message of the n openings packed at ring bits,
// msg(⌈n·ring/64⌉) (SquareKeep's msg(n) at 64).
func SquareKeepRingCost(n int, ring uint) Cost {
	return Cost{Rounds: 1, Bytes: MessageBytes(share.FieldWords(n, ring))}
}

// TruncByRing is TruncBy on shares mod 2^ring (3 ≤ ring ≤ 64; 64 is
// TruncBy): for every x whose value lies in [−2^(ring−2), 2^(ring−2)),
// shared mod 2^ring (only the low ring bits of each share are read, so
// MatMulRing's output and ordinary 64-bit shares both do), it returns this
// party's 64-bit share (mod 2^64) of floor(x/2^f) or floor(x/2^f) + 1, with
// TruncBy's error and rounding, for 1 ≤ f ≤ ring − 2. The extension back to
// Z_2^64 costs nothing beyond the truncation.
//
// Cost: TruncBy's, 1 round and msg(⌈n/64⌉) bytes per party, with n wrap
// pairs for 2^(f + 64 − ring) (64 − ring bits of dealer words more per
// element than TruncBy's). What a party receives is TruncBy's: the peer's
// top bit masked by a uniform bit.
//
// Protocol (TruncBy's on the ring Z_2^ℓ, ℓ = ring), with the wrap pair's
// bits u, v and 64-bit shares of K·u·v, K = 2^(64 − (f + 64 − ℓ)) = 2^(ℓ−f):
//
//  1. x' = x + 2^(ℓ−2) mod 2^ℓ (party 0 adds). As −2^(ℓ−2) ≤ x < 2^(ℓ−2),
//     0 ≤ x' < 2^(ℓ−1) as an integer. Let x'_0, x'_1 be the shares as
//     integers in [0, 2^ℓ) and m_p = x'_p >> (ℓ−1) their top bits.
//  2. The wrap w of the shares' sum (x'_0 + x'_1 = x' + w·2^ℓ) is m_0 OR
//     m_1: with both top bits 0 the sum is below 2^ℓ; with either set it is
//     at least 2^(ℓ−1) > x', so it wrapped (and both set cannot wrap twice:
//     the sum is below 2^(ℓ+1)).
//  3. As in TruncBy: d_p = m_p XOR (u or v) exchanged, and 64-bit shares of
//     K·w = K·m_0 + K·m_1 − K·m_0·m_1 from the wrap pair.
//  4. result = (x'_p >> f) − [K·w] + 1 − 2^(ℓ−2−f) (the constants at
//     party 0), computed mod 2^64.
//
// Proof. x' = x'_0 + x'_1 − w·2^ℓ over the integers, and with c ∈ {0, 1}
// the carry of the low f bits of the two shares,
// floor(x'/2^f) = (x'_0 >> f) + (x'_1 >> f) + c − w·2^(ℓ−f). So step 4
// reconstructs floor(x'/2^f) − c + 1 − 2^(ℓ−2−f) = floor(x/2^f) + 1 − c,
// since floor(x'/2^f) = floor(x/2^f) + 2^(ℓ−2−f) (f ≤ ℓ − 2). Every term is
// an integer of magnitude below 2^63 and the identity holds over the
// integers, so the 64-bit shares reconstruct the signed value exactly: the
// result is a share mod 2^64, not mod 2^ℓ.
func (s *Session) TruncByRing(ctx context.Context, x *share.Tensor, f, ring uint) (*share.Tensor, error) {
	t, err := s.truncPrepare(ctx, "truncate", x, f, ring)
	if err != nil {
		return nil, err
	}
	defer t.release()
	if err := s.Exchange(ctx, t.send, t.recv); err != nil {
		return nil, fmt.Errorf("protocol: truncate %v mod 2^%d: %w", x.Shape, ring, err)
	}
	return t.finish(), nil
}

// TruncReLURing is TruncReLU on shares mod 2^ring (an even ring of 4..64;
// 64 is TruncReLU): ReLU(TruncByRing(x, f, ring)) as 64-bit shares, for x
// in [−2^(ring−2), 2^(ring−2)) shared mod 2^ring and 1 ≤ f ≤ ring − 2. The
// sign is bit ring − 1 of x mod 2^ring (the sign of x inside the bound),
// from the sign circuit on ring bits (SignCircuitWords(ring): fewer cross
// ANDs and, below 34 bits, fewer rounds than on 64).
//
// Cost: TruncReLURingCost; at ring = 54, 7 rounds as TruncReLU, with
// 131W + 50W + 26W + 10W + 6W + 2W words of sign circuit instead of
// 156W + 62W + 30W + 14W + 6W + 2W (W = ⌈n/64⌉). Dealer material: n wrap
// pairs for 2^(f + 64 − ring), the circuit's cross-AND and AND triples for
// ring bits, n bit pairs. What a party receives is TruncReLU's: words
// masked by fresh material, uniform whatever x is.
func (s *Session) TruncReLURing(ctx context.Context, x *share.Tensor, f, ring uint) (*share.Tensor, error) {
	if err := cmpCheck("trunc relu", x); err != nil {
		return nil, err
	}
	if ring < 4 || ring > 64 || ring%2 != 0 {
		return nil, fmt.Errorf("protocol: trunc relu in Z_2^%d: need an even ℓ of 4..64", ring)
	}
	if f < 1 || f > ring-2 {
		return nil, fmt.Errorf("protocol: trunc relu by 2^%d in Z_2^%d: need 1 ≤ f ≤ %d", f, ring, ring-2)
	}
	if len(x.Data) == 0 {
		return &share.Tensor{Shape: slices.Clone(x.Shape), Data: []uint64{}}, nil
	}
	t, err := s.truncPrepare(ctx, "trunc relu", x, f, ring)
	if err != nil {
		return nil, err
	}
	defer t.release()
	neg, err := s.msbBitsWith(ctx, x.Data, int(ring), t.send, t.recv)
	if err != nil {
		return nil, fmt.Errorf("protocol: trunc relu %v mod 2^%d: %w", x.Shape, ring, err)
	}
	y := t.finish()
	pos, err := s.NotBits(&BitTensor{Shape: slices.Clone(x.Shape), Words: neg})
	if err != nil {
		return nil, fmt.Errorf("protocol: trunc relu: %w", err)
	}
	out, err := s.MulBit(ctx, y, pos)
	if err != nil {
		return nil, fmt.Errorf("protocol: trunc relu: %w", err)
	}
	return out, nil
}

// TruncReLURingCost returns the cost of TruncReLURing on n elements in
// Z_2^ring (an even ring of 4..64) for each party: the sign circuit on ring
// bits (SignCircuitWords(ring)), its first message also carrying the
// truncation's W words, then the multiplexer's msg(W + n), W = ⌈n/64⌉;
// nothing for n ≤ 0. At 64 it is TruncReLUCost. It panics for another
// ring (as SignCircuitWords).
func TruncReLURingCost(n int, ring uint) Cost {
	if n <= 0 {
		return Cost{}
	}
	return signCost(n, int(ring), share.PackedWords(n)).Plus(Cost{Rounds: 1, Bytes: MessageBytes(share.PackedWords(n) + n)})
}

package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// TruncBound is the exclusive bound on the magnitude of the (signed) values
// Trunc accepts: |x| < 2^62. Inside it the result is floor(x/2^f) or one more,
// never anything else. Outside it the result is unsupported: the wrap bit
// the protocol derives from its shares' top bits may be wrong, and the
// result is then off by a multiple of 2^(64−f). Fixed-point products of two
// values inside the default encoding (|v| < 2^15, 16 fractional bits) are
// below 2^62.
const TruncBound = 1 << 62

// Trunc returns this party's share of x / 2^f, f = the session's fractional
// bits: the rescaling after a fixed-point product. See TruncBy.
func (s *Session) Trunc(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	return s.TruncBy(ctx, x, s.fp.FracBits)
}

// TruncBy returns this party's share of floor(x / 2^f) or floor(x / 2^f) + 1
// (error ≤ 1 unit in the last place, never a wrap-around error; the second
// with probability about the fraction x/2^f − floor(x/2^f), so the rounding
// is unbiased) for every signed x with |x| < 2^62 (TruncBound), 1 ≤ f ≤ 62.
// A nil x, or one whose data does not fill its shape, is an error (nothing
// sent).
//
// Cost: 1 round, msg(⌈n/64⌉) = 8⌈n/64⌉ + 10 bytes per party (one bit per
// element), and n wrap pairs for 2^f (WrapPairs: f bits of dealer words per
// element, 2 bytes at f = 16). The party receives the peer's top share bit
// of x + 2^62 masked by the peer's uniform bit of the wrap pair: uniform
// whatever x is.
//
// Protocol (the truncation with a known top bit of Cheetah, USENIX Security
// 2022, §4.2), with the wrap pair's bits u (party 0), v (party 1) and shares
// of K·u·v, K = 2^(64−f):
//
//  1. x' = x + 2^62 (party 0 adds). As |x| < 2^62, 0 < x' < 2^63 as an
//     integer. Let x'_0, x'_1 be the two shares as integers in [0, 2^64) and
//     m_p = x'_p >> 63 their top bits.
//  2. The wrap w of the shares' sum (x'_0 + x'_1 = x' + w·2^64) is m_0 OR
//     m_1: with both top bits 0 the sum is below 2^64; with either set it is
//     at least 2^63, and as x' < 2^63 it must have wrapped.
//  3. Party 0 sends d_0 = m_0 XOR u, party 1 d_1 = m_1 XOR v (one exchange,
//     packed). Then m_0·m_1 = m_0·d_1 + (1 − 2d_1)·m_0·v and m_0·v = d_0·v
//     + (1 − 2d_0)·u·v, each term local to one party or a share of K·u·v:
//     shares of K·m_0·m_1, and K·w = K·m_0 + K·m_1 − K·m_0·m_1.
//  4. result = (x'_p >> f) − [K·w] + 1 − 2^(62−f) (the constants at party 0).
//
// Proof. x' = x'_0 + x'_1 − w·2^64 over the integers, and for
// A = a1·2^f + a0, B = b1·2^f + b0 with 0 ≤ a0, b0 < 2^f,
// floor((A+B)/2^f) = a1 + b1 + c with c ∈ {0, 1} the carry of a0 + b0. So
// floor(x'/2^f) = (x'_0 >> f) + (x'_1 >> f) + c − w·2^(64−f), and step 4
// reconstructs floor(x'/2^f) − c + 1 − 2^(62−f) = floor(x/2^f) + 1 − c,
// since floor(x'/2^f) = floor(x/2^f) + 2^(62−f). The carry is 1 with
// probability about 1 − frac(x/2^f) over the uniform shares, hence the
// unbiased rounding. Every step is an identity between integers that the
// ring computes modulo 2^64, so the shares reconstruct it exactly.
//
// Adding 2^f·v to one share changes neither share's low f bits, so
// TruncBy(y + 2^f·v) = TruncBy(y) + v on the same shares (what the secure
// forward's fused bias relies on).
func (s *Session) TruncBy(ctx context.Context, x *share.Tensor, f uint) (*share.Tensor, error) {
	t, err := s.truncPrepare(ctx, "truncate", x, f, 64)
	if err != nil {
		return nil, err
	}
	defer t.release()
	if err := s.Exchange(ctx, t.send, t.recv); err != nil {
		return nil, fmt.Errorf("protocol: truncate %v: %w", x.Shape, err)
	}
	return t.finish(), nil
}

// TruncCost returns the cost of TruncBy on n elements for each party: 1
// round and msg(⌈n/64⌉); nothing for n ≤ 0.
func TruncCost(n int) Cost {
	if n <= 0 {
		return Cost{}
	}
	return Cost{Rounds: 1, Bytes: MessageBytes(share.PackedWords(n))}
}

// truncation is a TruncBy (or TruncByRing, ring < 64) split around its one
// exchange, so that its message can travel in the same message as another
// protocol's first exchange (TruncReLU): truncPrepare draws the wrap pairs and fills send (the packed
// bits d = m XOR u to send), the caller exchanges send for recv (the peer's
// packed bits), and finish computes the shares. release returns the scratch.
type truncation struct {
	party      int
	x          *share.Tensor
	f          uint
	ring       uint // the shares' ring Z_2^ring, 2 < ring ≤ 64
	wp         beaver.WrapPair
	send, recv []uint64
}

// truncPrepare checks x and f, draws len(x.Data) wrap pairs for
// 2^(f + 64 − ring) from the session's provider and fills the packed bits to
// send. x's shares are read mod 2^ring (64: TruncBy; below, TruncByRing).
// op names the protocol in errors.
func (s *Session) truncPrepare(ctx context.Context, op string, x *share.Tensor, f, ring uint) (*truncation, error) {
	if err := cmpCheck(op, x); err != nil {
		return nil, err
	}
	if ring < minRingBits || ring > 64 {
		return nil, fmt.Errorf("protocol: %s in Z_2^%d: need %d ≤ ℓ ≤ 64", op, ring, minRingBits)
	}
	if f < 1 || f > ring-2 {
		return nil, fmt.Errorf("protocol: %s by 2^%d in Z_2^%d: need 1 ≤ f ≤ %d", op, f, ring, ring-2)
	}
	n := len(x.Data)
	w := share.PackedWords(n)
	wp, err := s.prov.WrapPairs(ctx, s.StreamID(), n, f+64-ring)
	if err != nil {
		return nil, fmt.Errorf("protocol: %s %v: %w", op, x.Shape, err)
	}
	mine := wp.U
	if s.party == 1 {
		mine = wp.V
	}
	if len(mine) != w || len(wp.Z) != n {
		return nil, fmt.Errorf("protocol: %s %v: provider returned %d bit words and %d words of wrap pairs, want %d and %d", op, x.Shape, len(mine), len(wp.Z), w, n)
	}
	t := &truncation{party: s.party, x: x, f: f, ring: ring, wp: wp,
		send: share.GetWords(w), // scratch: overwritten before use
		recv: share.GetWords(w), // scratch: overwritten by the exchange
	}
	top := topBits(x.Data, s.party == 0, ring)
	for j := range t.send {
		t.send[j] = top[j] ^ mine[j]
	}
	share.PutWords(top)
	share.MaskTail(t.send, n)
	return t, nil
}

// topBits returns the packed top bits (bit ring − 1) of the shares xs mod
// 2^ring (of x + 2^(ring−2) for party 0: p0 adds 2^(ring−2) first) in
// ⌈len(xs)/64⌉ scratch words (share.PutWords them).
func topBits(xs []uint64, p0 bool, ring uint) []uint64 {
	half := uint64(1) << (ring - 2)
	add := uint64(0)
	if p0 {
		add = half
	}
	out := share.GetWords(share.PackedWords(len(xs)))
	clear(out)
	top := ring - 1
	for i, v := range xs {
		out[i>>6] |= ((v + add) >> top & 1) << (i & 63)
	}
	return out
}

// finish returns this party's shares of the truncation from the bits sent
// and the peer's bits received (steps 3 and 4 of TruncBy, TruncByRing's on
// a narrower ring), as 64-bit shares.
func (t *truncation) finish() *share.Tensor {
	half := uint64(1) << (t.ring - 2)
	ringMask := ^uint64(0) >> (64 - t.ring)
	f := t.f
	k := t.ring - f // K = 2^(ring−f) = 2^(64 − (f + 64 − ring))
	out := &share.Tensor{Shape: slices.Clone(t.x.Shape), Data: make([]uint64, len(t.x.Data))}
	p0 := t.party == 0
	add := uint64(0)
	konst := uint64(0)
	if p0 {
		add = half
		konst = 1 - half>>f
	}
	for i, v := range t.x.Data {
		xp := (v + add) & ringMask
		m := xp >> (t.ring - 1)
		j, b := i>>6, uint(i&63)
		dOwn := t.send[j] >> b & 1
		dPeer := t.recv[j] >> b & 1
		z := t.wp.Z[i]
		var w uint64 // this party's share of K·w
		if p0 {
			// share of K·m0·m1 = K·m0·d1 + (1−2d1)(1−2d0)·Z0
			s := m*dPeer<<k + (1-2*dPeer)*(1-2*dOwn)*z
			w = m<<k - s
		} else {
			// share of K·m0·m1 = (1−2d1)(K·d0·v + (1−2d0)·Z1)
			vb := t.wp.V[j] >> b & 1
			s := (1 - 2*dOwn) * (dPeer*vb<<k + (1-2*dPeer)*z)
			w = m<<k - s
		}
		out.Data[i] = xp>>f - w + konst
	}
	return out
}

// release returns the scratch words; t must not be used afterwards.
func (t *truncation) release() {
	share.PutWords(t.send)
	share.PutWords(t.recv)
	t.send, t.recv = nil, nil
}

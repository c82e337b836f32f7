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
// never anything else. Outside it the result is unsupported: it is off by
// 2^(64−f) with a probability of about (|x| − 2^62)/2^63 over the dealer's
// randomness (about one half near ±2^63). Fixed-point products of two values inside the default
// encoding (|v| < 2^15, 16 fractional bits) are below 2^62.
const TruncBound = 1 << 62

// Trunc returns this party's share of x / 2^f, f = the session's fractional
// bits: the rescaling after a fixed-point product. See TruncBy.
func (s *Session) Trunc(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	return s.TruncBy(ctx, x, s.fp.FracBits)
}

// TruncBy returns this party's share of floor(x / 2^f) or floor(x / 2^f) + 1
// (error ≤ 1 unit in the last place, never a wrap-around error) for every
// signed x with |x| < 2^62 (TruncBound), 1 ≤ f ≤ 62. A nil x, or one whose
// data does not fill its shape, is an error (nothing sent).
//
// Cost: 1 round, msg(n) = 8n + 10 bytes per party (n ≤ 2^17; one frame per
// MiB beyond). The party receives the peer's share of c = x + 2^62 + r with r
// uniform: uniform whatever x is.
//
// Protocol, with a truncation pair: r uniform in Z_2^64, shares of
// msb(r) = r >> 63 and of low(r) = (r mod 2^63) >> f.
//
//  1. x' = x + 2^62 (party 0 adds). As |x| < 2^62, 0 < x' < 2^63 as an
//     integer.
//  2. Both open c = x' + r mod 2^64 (one exchange).
//  3. [e] = msb(c) + [msb(r)] − 2·msb(c)·[msb(r)] (= msb(c) XOR msb(r), linear
//     since msb(c) is public).
//  4. result = ((c mod 2^63) >> f) [party 0] + [e]·2^(63−f) − [low(r)]
//     − 2^(62−f) [party 0].
//
// Proof. Write r = r_h·2^63 + r_l with r_l < 2^63, and s = x' + r_l, an
// integer below 2^63 + 2^63 = 2^64, so no reduction happens in s. Then
// c ≡ s + r_h·2^63 (mod 2^64), so the low 63 bits of c are those of s and
// msb(c) = msb(s) XOR r_h, i.e. msb(s) = e and s = e·2^63 + (c mod 2^63)
// exactly. Hence x' = e·2^63 + (c mod 2^63) − r_l over the integers, and
// since 2^f divides 2^63, floor(x'/2^f) = e·2^(63−f) + floor((c mod 2^63)/2^f)
// − floor(r_l/2^f) − δ with δ ∈ {0, 1} (the borrow of the low f bits: for
// A = a1·2^f + a0 and B = b1·2^f + b0 with 0 ≤ a0, b0 < 2^f, floor((A−B)/2^f)
// is a1 − b1 or a1 − b1 − 1). Finally floor(x'/2^f) = floor(x/2^f) + 2^(62−f),
// so step 4, which computes a1 − b1 − 2^(62−f), yields floor(x/2^f) + δ. Every step is an identity between integers that the ring
// computes modulo 2^64, so the shares reconstruct it exactly.
func (s *Session) TruncBy(ctx context.Context, x *share.Tensor, f uint) (*share.Tensor, error) {
	t, err := s.truncPrepare(ctx, "truncate", x, f)
	if err != nil {
		return nil, err
	}
	defer t.release()
	if err := s.Exchange(ctx, t.send, t.recv); err != nil {
		return nil, fmt.Errorf("protocol: truncate %v: %w", x.Shape, err)
	}
	return t.finish(), nil
}

// truncation is a TruncBy split around its one exchange, so that its opening
// can travel in the same message as another protocol's first exchange
// (TruncReLU): truncPrepare draws the truncation pair and fills send (the
// words c = x + 2^62 + r to open), the caller exchanges send for recv (the
// peer's words), and finish computes the shares. release returns the scratch.
type truncation struct {
	party      int
	x          *share.Tensor
	f          uint
	tp         beaver.TruncPair
	send, recv []uint64
}

// truncPrepare checks x and f, draws len(x.Data) truncation pairs for 2^f
// from the session's provider and fills the words to send. op names the
// protocol in errors.
func (s *Session) truncPrepare(ctx context.Context, op string, x *share.Tensor, f uint) (*truncation, error) {
	if err := cmpCheck(op, x); err != nil {
		return nil, err
	}
	if f < 1 || f > 62 {
		return nil, fmt.Errorf("protocol: %s by 2^%d: need 1 ≤ f ≤ 62", op, f)
	}
	n := len(x.Data)
	tp, err := s.prov.TruncPairs(ctx, s.StreamID(), n, f)
	if err != nil {
		return nil, fmt.Errorf("protocol: %s %v: %w", op, x.Shape, err)
	}
	if len(tp.R) != n || len(tp.MSB) != n || len(tp.LowShifted) != n {
		return nil, fmt.Errorf("protocol: %s %v: provider returned %d/%d/%d truncation words, want %d", op, x.Shape, len(tp.R), len(tp.MSB), len(tp.LowShifted), n)
	}
	const half = uint64(1) << 62
	t := &truncation{party: s.party, x: x, f: f, tp: tp,
		send: share.GetWords(n), // scratch: overwritten before use
		recv: share.GetWords(n), // scratch: overwritten by the exchange
	}
	p0 := s.party == 0
	for i, v := range x.Data {
		t.send[i] = v + tp.R[i]
		if p0 {
			t.send[i] += half
		}
	}
	return t, nil
}

// finish returns this party's shares of the truncation from the words sent
// and the peer's words received (steps 3 and 4 of TruncBy).
func (t *truncation) finish() *share.Tensor {
	const half = uint64(1) << 62
	f := t.f
	out := &share.Tensor{Shape: slices.Clone(t.x.Shape), Data: make([]uint64, len(t.x.Data))}
	hi := uint64(1) << (63 - f)
	off := half >> f
	p0 := t.party == 0
	for i := range out.Data {
		c := t.send[i] + t.recv[i]
		mc := c >> 63
		// [e] = mc [party 0] + (1 − 2mc)·[msb r]
		e := (1 - 2*mc) * t.tp.MSB[i]
		z := -t.tp.LowShifted[i]
		if p0 {
			e += mc
			z += (c<<1)>>(1+f) - off
		}
		out.Data[i] = z + e*hi
	}
	return out
}

// release returns the scratch words; t must not be used afterwards.
func (t *truncation) release() {
	share.PutWords(t.send)
	share.PutWords(t.recv)
	t.send, t.recv = nil, nil
}

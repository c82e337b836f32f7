package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// MulPrivateRowBits returns this party's share of x ⊙ m for a shared x of
// shape [..., width] (rows = |x|/width rows of width words) and m, one bit
// per row that party 1 holds in the clear, broadcast over the row: e.g. a
// batch's padding mask zeroing its padded rows. Party 1 passes bits, rows
// words each 0 or 1; party 0 passes nil. No truncation: m is an integer.
//
// Cost: 1 round; party 0 sends msg(|x|) bytes, party 1 msg(⌈rows/64⌉) (one
// bit per row), where Mul by the broadcast mask sends msg(2·|x|) from each
// (MulPrivateRowBitsCost); one row-bit triple of rows × width
// (beaver.RowBitTriple).
//
// With the triple (party 0: uniform rows A; party 1: uniform bits r; both:
// shares C of r⊙A), in one exchange party 0 sends D = X0 − A and party 1
// e = m ⊕ r (packed). Where e_i = 0, m_i = r_i and m_i·A_i = C0 + C1; where
// e_i = 1, m_i = 1 − r_i and m_i·A_i = A_i − C0 − C1. So party 0 takes
// C0 (e_i = 0) or A_i − C0 (e_i = 1), and party 1 m_i·(X1 + D) ± C1: the
// sum is m⊙(X1 + X0 − A) + m⊙A = m⊙X.
//
// What a party receives: party 0 e = m ⊕ r, uniform bits whatever m (r is
// uniform and party 0 holds nothing that depends on it); party 1 D,
// uniform words whatever X0 (A is uniform and party 1's share C1 of r⊙A
// is padded by party 0's C0).
func (s *Session) MulPrivateRowBits(ctx context.Context, x *share.Tensor, bits []uint64) (*share.Tensor, error) {
	if x == nil || x.Rank() < 1 {
		return nil, fmt.Errorf("protocol: multiply by private row bits: need a tensor of rank ≥ 1, got %v", x)
	}
	width := x.Shape[x.Rank()-1]
	if width <= 0 {
		return nil, fmt.Errorf("protocol: multiply %v by private row bits: empty rows", x.Shape)
	}
	n := x.Len()
	rows := n / width
	switch {
	case s.party == 0 && bits != nil:
		return nil, fmt.Errorf("protocol: multiply %v by private row bits: the bits are party 1's; party 0 passes none", x.Shape)
	case s.party == 1 && len(bits) != rows:
		return nil, fmt.Errorf("protocol: multiply %v by private row bits: %d bits for %d rows", x.Shape, len(bits), rows)
	}
	for i, b := range bits {
		if b > 1 {
			return nil, fmt.Errorf("protocol: multiply %v by private row bits: bit %d is %d, want 0 or 1", x.Shape, i, b)
		}
	}
	t, err := s.prov.RowBitTriples(ctx, s.StreamID(), rows, width)
	if err != nil {
		return nil, fmt.Errorf("protocol: multiply %v by private row bits: %w", x.Shape, err)
	}
	packed := share.PackedWords(rows)
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, n)}
	if s.party == 0 {
		d := share.GetWords(n) // scratch: overwritten before use
		defer share.PutWords(d)
		_ = share.SubVec(d, x.Data, t.A)
		e := make([]uint64, packed)
		if err := s.Exchange(ctx, d, e); err != nil {
			return nil, fmt.Errorf("protocol: multiply %v by private row bits: %w", x.Shape, err)
		}
		copy(out.Data, t.C)
		for i := range rows {
			if e[i/64]>>(i%64)&1 == 1 {
				row := out.Data[i*width : (i+1)*width]
				_ = share.SubVec(row, t.A[i*width:(i+1)*width], row)
			}
		}
		return out, nil
	}
	e := make([]uint64, packed)
	for i, b := range bits {
		e[i/64] |= b << (i % 64)
	}
	for i := range e {
		e[i] ^= t.R[i]
	}
	d := share.GetWords(n) // scratch: overwritten before use
	defer share.PutWords(d)
	if err := s.Exchange(ctx, e, d); err != nil {
		return nil, fmt.Errorf("protocol: multiply %v by private row bits: %w", x.Shape, err)
	}
	for i := range rows {
		lo, hi := i*width, (i+1)*width
		row, c := out.Data[lo:hi], t.C[lo:hi]
		if e[i/64]>>(i%64)&1 == 1 {
			_ = share.SubVec(row, row, c)
		} else {
			copy(row, c)
		}
		if bits[i] == 1 {
			_ = share.AddVec(row, row, x.Data[lo:hi])
			_ = share.AddVec(row, row, d[lo:hi])
		}
	}
	return out, nil
}

package protocol

import (
	"context"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// rowBits returns rows mask bits: "ones", "zeros", or "random" (seeded).
func rowBits(kind string, rows int, seed uint64) []uint64 {
	m := make([]uint64, rows)
	rng := rand.New(rand.NewPCG(seed, 5))
	for i := range m {
		switch kind {
		case "ones":
			m[i] = 1
		case "random":
			m[i] = rng.Uint64() & 1
		}
	}
	return m
}

// TestMulPrivateRowBits checks x ⊙ m for party 1's clear bit per row against
// the plaintext, exactly (an integer mask: no truncation), with 1 round,
// party 0 sending msg(|x|) and party 1 msg(⌈rows/64⌉), as
// MulPrivateRowBitsCost says.
func TestMulPrivateRowBits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		shape []int
		mask  string
	}{
		{"one row", []int{1, 1}, "ones"},
		{"batch of rows", []int{2, 3, 5}, "random"},
		{"a tail of bits", []int{2, 65, 4}, "random"},
		{"all padded", []int{3, 7}, "zeros"},
		{"vector", []int{9}, "ones"},
		{"two words of bits", []int{128, 3}, "random"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := randRing(11, tc.shape...)
			width := tc.shape[len(tc.shape)-1]
			rows := x.Len() / width
			m := rowBits(tc.mask, rows, 3)
			want := x.Clone()
			for i := range want.Data {
				want.Data[i] *= m[i/width]
			}
			xsh := splitTensor(x, 12)
			r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				var b []uint64
				if s.Party() == 1 {
					b = m
				}
				return s.MulPrivateRowBits(ctx, pickShare(s, xsh), b)
			})
			wantCost(t, r, [2]int64{1, 1}, [2]int64{wireBytes(x.Len()), wireBytes(share.PackedWords(rows))})
			c := MulPrivateRowBitsCost(rows, width)
			for p := range 2 {
				if c[p].Rounds != r.Stats[p].Rounds || c[p].Bytes != r.Stats[p].BytesSent {
					t.Errorf("party %d: MulPrivateRowBitsCost %+v, measured %d rounds, %d bytes", p, c[p], r.Stats[p].Rounds, r.Stats[p].BytesSent)
				}
			}
			got := openPair(t, r.Out)
			if !slices.Equal(got.Shape, want.Shape) || !slices.Equal(got.Data, want.Data) {
				t.Fatalf("x ⊙ m = %v, want %v", got.Data, want.Data)
			}
		})
	}
}

// TestMulPrivateRowBitsInputs: malformed operands are refused by the party
// that passes them, before it draws material or sends anything (a
// rehearsal session: no peer).
func TestMulPrivateRowBitsInputs(t *testing.T) {
	x := randRing(1, 2, 3, 4) // 6 rows of 4
	for _, tc := range []struct {
		name  string
		party int
		x     *share.Tensor
		bits  []uint64
		want  string
	}{
		{"nil tensor", 0, nil, nil, "rank ≥ 1"},
		{"scalar", 1, &share.Tensor{Data: []uint64{1}}, []uint64{1}, "rank ≥ 1"},
		{"empty rows", 1, &share.Tensor{Shape: []int{3, 0}}, []uint64{1, 1, 1}, "empty rows"},
		{"party 0 passes bits", 0, x, rowBits("ones", 6, 0), "party 0 passes none"},
		{"too few bits", 1, x, rowBits("ones", 5, 0), "5 bits for 6 rows"},
		{"too many bits", 1, x, rowBits("ones", 7, 0), "7 bits for 6 rows"},
		{"no bits", 1, x, nil, "0 bits for 6 rows"},
		{"not a bit", 1, x, []uint64{1, 0, 2, 1, 1, 1}, "bit 2 is 2"},
		{"a negative bit", 1, x, []uint64{1, 0, 1, 1, 1, ^uint64(0)}, "want 0 or 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewRehearsal(tc.party, 1, share.DefaultFixedPoint)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.MulPrivateRowBits(context.Background(), tc.x, tc.bits)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if reqs := s.src.(*rehearsalProvider).reqs; len(reqs) != 0 {
				t.Fatalf("drew %v before refusing", reqs)
			}
		})
	}
	// A well-formed call goes through, and draws one row-bit triple.
	for p := range 2 {
		s, _ := NewRehearsal(p, 1, share.DefaultFixedPoint)
		var b []uint64
		if p == 1 {
			b = rowBits("random", 6, 1)
		}
		if _, err := s.MulPrivateRowBits(context.Background(), x, b); err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
		if reqs := s.src.(*rehearsalProvider).reqs; len(reqs) != 1 || reqs[0].M != 6 || reqs[0].N != 4 {
			t.Fatalf("party %d drew %v, want one 6×4 row-bit triple", p, reqs)
		}
	}
}

// TestMulPrivateRowBitsViews: party 0's view (e = m ⊕ r) is independent of
// party 1's mask m, and party 1's view (D = X0 − A) of party 0's share X0.
// With the same dealer seeds, the bits party 0 receives for two masks differ
// by exactly the masks' difference (the pad r does not depend on m), and
// the pad is uniform (about half its bits set, its bytes uniform); what
// party 1 receives is uniform bytes whatever X0 and holds none of its
// words.
func TestMulPrivateRowBitsViews(t *testing.T) {
	const rows, width = 64 * 512, 1 // 4,096 bytes of bits: 16 a byte value
	x, _ := share.NewTensor(rows, width)
	run := func(mask []uint64, x0 uint64) pairResult[*share.Tensor] {
		xs := [2]*share.Tensor{x.Clone(), x.Clone()}
		for i := range xs[0].Data {
			xs[0].Data[i] = x0
		}
		return runPairWith(t, pairConfig{Record: true, Seed: 21}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
			var b []uint64
			if s.Party() == 1 {
				b = mask
			}
			return s.MulPrivateRowBits(ctx, pickShare(s, xs), b)
		})
	}
	masks := map[string][]uint64{"zeros": rowBits("zeros", rows, 0), "ones": rowBits("ones", rows, 0), "random": rowBits("random", rows, 9)}
	var pad []uint64
	for name, m := range masks {
		t.Run("party 0 sees m ⊕ r: "+name, func(t *testing.T) {
			r := run(m, 0)
			if len(r.Recv[0]) != 1 || len(r.Recv[0][0]) != rows/64 {
				t.Fatalf("party 0 received %d messages, want one of %d words", len(r.Recv[0]), rows/64)
			}
			e := r.Recv[0][0]
			got := make([]uint64, len(e)) // e ⊕ m: the pad r
			ones := 0
			for i := range e {
				got[i] = e[i]
				for j := range 64 {
					got[i] ^= m[64*i+j] << j
				}
				ones += bits.OnesCount64(got[i])
			}
			if pad == nil {
				pad = got
			} else if !slices.Equal(got, pad) {
				t.Fatal("party 0's bits are not the mask under the same pad: the pad depends on the mask")
			}
			if frac := float64(ones) / rows; frac < 0.48 || frac > 0.52 {
				t.Errorf("pad has %d of %d bits set", ones, rows)
			}
			if chi := chiSquareBytes(r.Recv[0]); chi > chiSquareLimit {
				t.Errorf("party 0: chi-square %.1f of the bits it received", chi)
			}
		})
	}
	for name, v := range map[string]uint64{"zeros": 0, "ones": share.DefaultFixedPoint.Scale()} {
		t.Run("party 1 sees X0 − A: "+name, func(t *testing.T) {
			r := run(masks["random"], v)
			checkViewHidesSecret(t, 1, r.Recv[1], map[uint64]bool{v: true})
			if len(r.Recv[1]) != 1 || len(r.Recv[1][0]) != rows*width {
				t.Fatalf("party 1 received %d messages, want one of %d words", len(r.Recv[1]), rows*width)
			}
		})
	}
}

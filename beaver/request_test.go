package beaver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// TestRequestRingBits: the ring width is accepted for the matrix triples
// and the square-and-product quadruples alone and only in 2..63 (0 for 64),
// travels in the encoding's fourth byte (zero, as before ring widths, when
// unset) and shows in String.
func TestRequestRingBits(t *testing.T) {
	mat := beaver.Request{Kind: beaver.KindMatTriple, Batch: 1, M: 2, K: 3, N: 4}
	tests := []struct {
		name string
		r    beaver.Request
		ok   bool
	}{
		{"unset", mat, true},
		{"2", withRing(mat, 2), true},
		{"54", withRing(mat, 54), true},
		{"63", withRing(mat, 63), true},
		{"1", withRing(mat, 1), false},
		{"64", withRing(mat, 64), false}, // 0 means 64: one encoding each
		{"255", withRing(mat, 255), false},
		{"square product", beaver.Request{Kind: beaver.KindSquareProduct, N: 3}, true},
		{"square product 50", beaver.Request{Kind: beaver.KindSquareProduct, N: 3, RingBits: 50}, true},
		{"square product 2", beaver.Request{Kind: beaver.KindSquareProduct, N: 3, RingBits: 2}, true},
		{"square product 1", beaver.Request{Kind: beaver.KindSquareProduct, N: 3, RingBits: 1}, false},
		{"square product 64", beaver.Request{Kind: beaver.KindSquareProduct, N: 3, RingBits: 64}, false},
		{"triple", beaver.Request{Kind: beaver.KindTriple, N: 3, RingBits: 54}, false},
		{"square", beaver.Request{Kind: beaver.KindSquare, N: 3, RingBits: 50}, false},
		{"weight triple", beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 1, M: 1, K: 2, N: 3, RingBits: 54}, false},
		{"wrap", beaver.Request{Kind: beaver.KindWrap, N: 3, FracBits: 16, RingBits: 40}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate(%v) = %v, want ok %v", tc.r, err, tc.ok)
			}
			b, err := tc.r.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != beaver.RequestSize || b[3] != byte(tc.r.RingBits) {
				t.Fatalf("encoding %x: want %d bytes with the ring width %d in byte 3", b, beaver.RequestSize, tc.r.RingBits)
			}
			got, err := beaver.DecodeRequest(b)
			if (err == nil) != tc.ok {
				t.Fatalf("DecodeRequest = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && got != tc.r {
				t.Fatalf("round trip %v, want %v", got, tc.r)
			}
			if want := fmt.Sprintf(" mod 2^%d ", tc.r.RingBits); tc.r.RingBits != 0 && !strings.Contains(tc.r.String(), want) {
				t.Fatalf("String %q does not name the ring (%q)", tc.r.String(), want)
			}
			if wantRing := map[bool]uint{true: 64, false: tc.r.RingBits}[tc.r.RingBits == 0]; tc.r.Ring() != wantRing {
				t.Fatalf("Ring() = %d, want %d", tc.r.Ring(), wantRing)
			}
		})
	}
}

// ringParts draws the parts of correlation r with draw for both parties at
// once and checks them as r (Verify, mod 2^ℓ) with every word below 2^ℓ
// when r has a ring width.
func ringParts(t *testing.T, r beaver.Request, draw func(party int) ([][]uint64, error)) [2][][]uint64 {
	t.Helper()
	var out [2][][]uint64
	errs := make(chan error, 2)
	for p := range 2 {
		go func() {
			var err error
			out[p], err = draw(p)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("ℓ = %d: %v", r.Ring(), err)
		}
	}
	c, _ := beaver.Lookup(r.Kind)
	if err := c.Verify(r, nil, out[0], out[1]); err != nil {
		t.Fatalf("ℓ = %d: %v", r.Ring(), err)
	}
	if r.RingBits == 0 {
		return out
	}
	for p, parts := range out {
		for i, part := range parts {
			for _, v := range part {
				if v>>r.RingBits != 0 {
					t.Fatalf("ℓ = %d: party %d part %d has the word %#x above 2^ℓ", r.RingBits, p, i, v)
				}
			}
		}
	}
	return out
}

func withRing(r beaver.Request, bits uint) beaver.Request {
	r.RingBits = bits
	return r
}

// TestMatTriplesRingEveryProvider: every provider's MatTriplesRing is a
// triple mod 2^ℓ whose words are all below 2^ℓ (what a provider that
// ignores the width returns is masked by the typed accessor).
func TestMatTriplesRingEveryProvider(t *testing.T) {
	ctx := context.Background()
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{9})
			for _, bits := range []uint{0, 2, 17, 40, 54, 63, 64} {
				r := beaver.Request{Kind: beaver.KindMatTriple, Batch: 2, M: 3, K: 5, N: 2, RingBits: bits}
				if bits == 64 {
					r.RingBits = 0
				}
				ringParts(t, r, func(p int) ([][]uint64, error) {
					tr, err := beaver.Typed{Provider: ps[p]}.MatTriplesRing(ctx, 1, bits, r.Batch, r.M, r.K, r.N)
					return [][]uint64{tr.A, tr.B, tr.C}, err
				})
			}
		})
	}
}

// TestSquareProductsRingEveryProvider: every provider's SquareProductsRing
// is a quadruple mod 2^ℓ (a² and a·b checked mod 2^ℓ) whose words are all
// below 2^ℓ; at 64 (or 0) it is SquareProducts, checked mod 2^64.
func TestSquareProductsRingEveryProvider(t *testing.T) {
	ctx := context.Background()
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{10})
			for _, bits := range []uint{0, 2, 17, 41, 50, 63, 64} {
				r := beaver.Request{Kind: beaver.KindSquareProduct, N: 70, RingBits: bits}
				if bits == 64 {
					r.RingBits = 0
				}
				qs := ringParts(t, r, func(p int) ([][]uint64, error) {
					q, err := beaver.Typed{Provider: ps[p]}.SquareProductsRing(ctx, 1, bits, r.N)
					return [][]uint64{q.A, q.A2, q.B, q.AB}, err
				})
				// Mod 2^ℓ is not mod 2^64: the words' sums are checked
				// at ℓ bits only (a verification at 64 bits fails).
				c, _ := beaver.Lookup(beaver.KindSquareProduct)
				if err := c.Verify(beaver.Request{Kind: beaver.KindSquareProduct, N: r.N}, nil, qs[0], qs[1]); err == nil && r.RingBits >= 17 {
					t.Fatalf("ℓ = %d: the masked quadruple passes as one mod 2^64", bits)
				}
			}
		})
	}
}

package ot

import "math/bits"

// GF(2^128) for the extension's consistency check (kos.go): a Block is the
// polynomial Σ b_i·X^i over GF(2) with bit i of Lo the coefficient of X^i
// and bit i of Hi that of X^(64+i), modulo X^128 + X^7 + X^2 + X + 1 (not
// GHASH's bit-reflected order: carry-less multiplication needs no
// reflection here). Products are accumulated unreduced (gfSum) and reduced
// once per sum.

// gfSum is an unreduced sum of products Σ a_i·b_i, kept as the three parts
// of the schoolbook product of two-word operands: lo = Σ a.Lo·b.Lo, mid =
// Σ (a.Lo·b.Hi ⊕ a.Hi·b.Lo), hi = Σ a.Hi·b.Hi (each 128 bits).
type gfSum struct{ lo, mid, hi Block }

// mulAdd adds Σ a[i]·b[i] (len(a) == len(b)) to s: PCLMULQDQ where the CPU
// has it, else the portable carry-less multiply.
func (s *gfSum) mulAdd(a, b []Block) {
	if len(a) != len(b) {
		panic("ot: gfSum.mulAdd: operands of different lengths")
	}
	if len(a) == 0 {
		return
	}
	if usePCLMUL {
		clmulAccumAsm(s, &a[0], &b[0], len(a))
		return
	}
	s.mulAddGeneric(a, b)
}

// mulAddGeneric is mulAdd in portable Go.
func (s *gfSum) mulAddGeneric(a, b []Block) {
	for i := range a {
		x, y := a[i], b[i]
		l0, l1 := clmul64(x.Lo, y.Lo)
		h0, h1 := clmul64(x.Hi, y.Hi)
		m0, m1 := clmul64(x.Lo^x.Hi, y.Lo^y.Hi) // Karatsuba: mid = m ⊕ l ⊕ h
		s.lo.Lo ^= l0
		s.lo.Hi ^= l1
		s.hi.Lo ^= h0
		s.hi.Hi ^= h1
		s.mid.Lo ^= m0 ^ l0 ^ h0
		s.mid.Hi ^= m1 ^ l1 ^ h1
	}
}

// reduce returns the sum as a field element.
func (s *gfSum) reduce() Block {
	// The 256-bit product is lo ⊕ mid·X^64 ⊕ hi·X^128.
	lo := Block{s.lo.Lo, s.lo.Hi ^ s.mid.Lo}
	hi := Block{s.hi.Lo ^ s.mid.Hi, s.hi.Hi}
	return gfReduce(lo, hi)
}

// gfReduce returns lo ⊕ hi·X^128 modulo X^128 + X^7 + X^2 + X + 1:
// X^128 ≡ p = X^7 + X^2 + X + 1, so hi·X^128 ≡ hi·p, whose bits above 127
// (fewer than 7) fold once more, times p, into the low word.
func gfReduce(lo, hi Block) Block {
	over := hi.Hi>>63 ^ hi.Hi>>62 ^ hi.Hi>>57 // (hi·p) div X^128, below X^7
	r0 := hi.Lo ^ hi.Lo<<1 ^ hi.Lo<<2 ^ hi.Lo<<7
	r1 := hi.Hi ^ (hi.Hi<<1 | hi.Lo>>63) ^ (hi.Hi<<2 | hi.Lo>>62) ^ (hi.Hi<<7 | hi.Lo>>57)
	r0 ^= over ^ over<<1 ^ over<<2 ^ over<<7
	return Block{lo.Lo ^ r0, lo.Hi ^ r1}
}

// gfMul returns a·b in GF(2^128).
func gfMul(a, b Block) Block {
	var s gfSum
	s.mulAddGeneric([]Block{a}, []Block{b})
	return s.reduce()
}

// clmul64 returns the carry-less product of x and y (lo, hi words), in
// constant time: the low half by bmul64, the high half as the low half of
// the bit-reversed operands' product, reversed (BearSSL's ghash_ctmul64).
func clmul64(x, y uint64) (lo, hi uint64) {
	lo = bmul64(x, y)
	hi = bits.Reverse64(bmul64(bits.Reverse64(x), bits.Reverse64(y))) >> 1
	return lo, hi
}

// bmul64 returns the low 64 bits of the carry-less product of x and y with
// integer multiplies of operands with holes: in each product of x's and y's
// bits of residues i and j mod 4, a coefficient sums at most 16 bits, whose
// carries land on bits of other residues (masked off) or above bit 63.
func bmul64(x, y uint64) uint64 {
	const m0, m1, m2, m3 = 0x1111111111111111, 0x2222222222222222, 0x4444444444444444, 0x8888888888888888
	x0, x1, x2, x3 := x&m0, x&m1, x&m2, x&m3
	y0, y1, y2, y3 := y&m0, y&m1, y&m2, y&m3
	z0 := x0*y0 ^ x1*y3 ^ x2*y2 ^ x3*y1
	z1 := x0*y1 ^ x1*y0 ^ x2*y3 ^ x3*y2
	z2 := x0*y2 ^ x1*y1 ^ x2*y0 ^ x3*y3
	z3 := x0*y3 ^ x1*y2 ^ x2*y1 ^ x3*y0
	return z0&m0 | z1&m1 | z2&m2 | z3&m3
}

package he

import (
	"math/bits"
)

// mulMod returns x·y mod q.
func mulMod(x, y, q uint64) uint64 {
	hi, lo := bits.Mul64(x, y)
	return bits.Rem64(hi, lo, q)
}

// shoup is a constant c < q with ⌊c·2^64/q⌋, its Shoup companion: with
// it, mulShoup multiplies by c mod q in three word multiplications and
// one correction, against the five of a Barrett reduction of the product.
type shoup struct{ c, cp uint64 }

// newShoup returns c's Shoup form for q (c < q < 2^63).
func newShoup(c, q uint64) shoup {
	cp, _ := bits.Div64(c, 0, q)
	return shoup{c, cp}
}

// mulShoup returns x·k.c mod q for any word x. The estimate
// ⌊x·k.cp/2^64⌋ is above x·c/q − 2, so x·c − estimate·q (exact mod 2^64)
// lies in [0, 2q) and one subtraction reduces it.
func mulShoup(x uint64, k shoup, q uint64) uint64 {
	est, _ := bits.Mul64(x, k.cp)
	r := x*k.c - est*q
	if r >= q {
		r -= q
	}
	return r
}

// addMod returns x+y mod q for x, y < q.
func addMod(x, y, q uint64) uint64 {
	z := x + y
	if z >= q {
		z -= q
	}
	return z
}

// subMod returns x−y mod q for x, y < q.
func subMod(x, y, q uint64) uint64 {
	if x >= y {
		return x - y
	}
	return x + q - y
}

// liftCentered maps a ring word a ∈ Z_2^64, read as a signed integer in
// [−2^63, 2^63), to Z_q.
func liftCentered(a, q uint64) uint64 {
	if int64(a) >= 0 {
		return a % q
	}
	r := (-a) % q // |a| ≤ 2^63
	if r == 0 {
		return 0
	}
	return q - r
}

// encode returns round(Q·v/2^64) mod q_i.
func (s *Scheme) encode(v uint64, i int) uint64 {
	q, k := s.p.Q[i], &s.shoups[i]
	hi, lo := bits.Mul64(s.qModT, v)
	r := hi + lo>>63 // round(qModT·v/2^64) < 2^64
	return addMod(mulShoup(v, k.dFloor, q), mulShoup(r, k.one, q), q)
}

// words3 returns w[0] + w[1]·2^64 + w[2]·2^128 mod q_i.
func (s *Scheme) words3(w [3]uint64, i int) uint64 {
	q, k := s.p.Q[i], &s.shoups[i]
	v := addMod(mulShoup(w[0], k.one, q), mulShoup(w[1], k.pow64, q), q)
	return addMod(v, mulShoup(w[2], k.pow128, q), q)
}

// residueShoups are a residue's constants of encode and words3 in Shoup
// form.
type residueShoups struct{ one, dFloor, pow64, pow128 shoup }

// u128 is an unsigned 128-bit integer (mod 2^128).
type u128 struct{ lo, hi uint64 }

func (a u128) add(b u128) u128 {
	lo, c := bits.Add64(a.lo, b.lo, 0)
	hi, _ := bits.Add64(a.hi, b.hi, c)
	return u128{lo, hi}
}

func (a u128) sub(b u128) u128 {
	lo, c := bits.Sub64(a.lo, b.lo, 0)
	hi, _ := bits.Sub64(a.hi, b.hi, c)
	return u128{lo, hi}
}

// mul64 returns a·y mod 2^128.
func (a u128) mul64(y uint64) u128 {
	hi, lo := bits.Mul64(a.lo, y)
	return u128{lo, hi + a.hi*y}
}

// shl returns a·2^k mod 2^128, 0 ≤ k < 128.
func (a u128) shl(k int) u128 {
	switch {
	case k == 0:
		return a
	case k >= 64:
		return u128{0, a.lo << (k - 64)}
	default:
		return u128{a.lo << k, a.hi<<k | a.lo>>(64-k)}
	}
}

// shr returns floor(a/2^k), 0 ≤ k < 128.
func (a u128) shr(k int) u128 {
	switch {
	case k == 0:
		return a
	case k >= 64:
		return u128{a.hi >> (k - 64), 0}
	default:
		return u128{a.lo>>k | a.hi<<(64-k), a.hi >> k}
	}
}

// mask returns a mod 2^l, 0 < l ≤ 128.
func (a u128) mask(l int) u128 {
	switch {
	case l >= 128:
		return a
	case l > 64:
		return u128{a.lo, a.hi & (1<<(l-64) - 1)}
	case l == 64:
		return u128{a.lo, 0}
	default:
		return u128{a.lo & (1<<l - 1), 0}
	}
}

// modSwitch returns round(2^l·c/Q) mod 2^l (within 1/2 + 2^-8) for the
// coefficient whose residues are res[i] = c mod q_i.
func (s *Scheme) modSwitch(c *msConst, res []uint64) u128 {
	var acc u128
	var fhi, flo uint64
	for i, q := range s.p.Q {
		y := mulShoup(res[i], c.qHatInv[i], q)
		acc = acc.add(u128{c.intPart[i][0], c.intPart[i][1]}.mul64(y))
		h, l := bits.Mul64(y, c.frac[i])
		var cy uint64
		flo, cy = bits.Add64(flo, l, 0)
		fhi += h + cy
	}
	// round(Σ y_i·frac_i): add 2^63 and keep the high word.
	_, cy := bits.Add64(flo, 1<<63, 0)
	acc = acc.add(u128{fhi + cy, 0})
	return acc.mask(c.l)
}

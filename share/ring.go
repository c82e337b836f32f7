package share

import "fmt"

// checkLen returns an error unless every slice has length n.
func checkLen(op string, n int, xs ...[]uint64) error {
	for i, x := range xs {
		if len(x) != n {
			return fmt.Errorf("share.%s: operand %d has %d words, want %d", op, i, len(x), n)
		}
	}
	return nil
}

// AddVec sets dst[i] = a[i] + b[i] (mod 2^64). dst may alias a or b.
func AddVec(dst, a, b []uint64) error {
	if err := checkLen("AddVec", len(dst), a, b); err != nil {
		return err
	}
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
	return nil
}

// SubVec sets dst[i] = a[i] − b[i] (mod 2^64). dst may alias a or b.
func SubVec(dst, a, b []uint64) error {
	if err := checkLen("SubVec", len(dst), a, b); err != nil {
		return err
	}
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v - b[i]
	}
	return nil
}

// NegVec sets dst[i] = −a[i] (mod 2^64). dst may alias a.
func NegVec(dst, a []uint64) error {
	if err := checkLen("NegVec", len(dst), a); err != nil {
		return err
	}
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = -v
	}
	return nil
}

// MulScalarVec sets dst[i] = c·a[i] (mod 2^64) for a public integer c
// (negative integers are their two's-complement ring words). dst may alias a.
func MulScalarVec(dst, a []uint64, c uint64) error {
	if err := checkLen("MulScalarVec", len(dst), a); err != nil {
		return err
	}
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v * c
	}
	return nil
}

// MulVec sets dst[i] = a[i]·b[i] (mod 2^64), the local elementwise product of
// two ring vectors (of public values, or of a share by a public vector).
// dst may alias a or b.
func MulVec(dst, a, b []uint64) error {
	if err := checkLen("MulVec", len(dst), a, b); err != nil {
		return err
	}
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v * b[i]
	}
	return nil
}

// AddPublicVec adds the public vector p to the share s held by party: party 0
// adds it, party 1 leaves its share unchanged, so the shared value grows by p
// exactly once. dst may alias s.
func AddPublicVec(dst, s, p []uint64, party int) error {
	if party != 0 && party != 1 {
		return fmt.Errorf("share.AddPublicVec: party %d, want 0 or 1", party)
	}
	if party == 1 {
		if err := checkLen("AddPublicVec", len(dst), s, p); err != nil {
			return err
		}
		copy(dst, s)
		return nil
	}
	return AddVec(dst, s, p)
}

// SumVec returns Σ a[i] (mod 2^64).
func SumVec(a []uint64) uint64 {
	var s uint64
	for _, v := range a {
		s += v
	}
	return s
}

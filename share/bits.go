package share

import "fmt"

// The bit helpers of packed bit vectors (64 bits per word: bit i of word j is
// element 64j + i) that the binary protocols and the correlation generators
// share, and the bounded size product of correlation requests.

// PackedWords returns ⌈n/64⌉, the words that hold n packed bits.
func PackedWords(n int) int { return (n + 63) >> 6 }

// MaskTail zeroes the bits of packed past the first n (those of its last
// word at and above n mod 64), so that nothing but the n elements' bits is
// ever sent or used. packed holds PackedWords(n) words; a multiple of 64, or
// an empty packed, leaves it as it is.
func MaskTail(packed []uint64, n int) {
	if r := uint(n) & 63; r != 0 && len(packed) > 0 {
		packed[len(packed)-1] &= 1<<r - 1
	}
}

// FieldWords returns ⌈n·bits/64⌉, the words that hold n fields of bits bits
// each (1 ≤ bits ≤ 64) packed end to end (PackFields).
func FieldWords(n int, bits uint) int { return int((uint64(n)*uint64(bits) + 63) >> 6) }

// PackFields packs the low bits bits of each value of vals end to end into
// dst, least significant first: field i occupies bits i·bits … i·bits+bits−1
// of the bit string whose bit k is bit k mod 64 of dst[k/64]. dst holds
// FieldWords(len(vals), bits) words; the bits past the last field are zero.
// 1 ≤ bits ≤ 64.
func PackFields(dst, vals []uint64, bits uint) {
	clear(dst)
	m := ^uint64(0) >> (64 - bits)
	pos := uint(0)
	for _, v := range vals {
		v &= m
		w, o := pos>>6, pos&63
		dst[w] |= v << o
		if o+bits > 64 {
			dst[w+1] |= v >> (64 - o)
		}
		pos += bits
	}
}

// UnpackFields is the inverse of PackFields: it fills dst with the
// len(dst) fields of bits bits packed in src (FieldWords(len(dst), bits)
// words).
func UnpackFields(dst, src []uint64, bits uint) {
	m := ^uint64(0) >> (64 - bits)
	pos := uint(0)
	for i := range dst {
		w, o := pos>>6, pos&63
		v := src[w] >> o
		if o+bits > 64 {
			v |= src[w+1] << (64 - o)
		}
		dst[i] = v & m
		pos += bits
	}
}

// Transpose64 transposes the 64×64 bit matrix a in place: afterwards bit c
// of a[r] is what bit r of a[c] was. It is the recursive block swap of
// Hacker's Delight §7-3: six passes that exchange the off-diagonal 32×32,
// 16×16, …, 1×1 blocks, 32 word pairs per pass (no per-bit work).
func Transpose64(a *[64]uint64) {
	m := uint64(0x00000000FFFFFFFF)
	for j := 32; j != 0; j >>= 1 {
		for k := 0; k < 64; k = (k + j + 1) &^ j {
			t := (a[k]>>uint(j) ^ a[k+j]) & m
			a[k] ^= t << uint(j)
			a[k+j] ^= t
		}
		m ^= m << uint(j>>1)
	}
}

// BoundedProduct returns the product of dims, or an error when a dim is
// negative or above limit or the product exceeds limit (checked before each
// multiplication, so it never overflows; limit ≥ 0). The product of no
// dims is 1. The error names the sizes, not the caller: wrap it.
func BoundedProduct(limit int, dims ...int) (int, error) {
	p := 1
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative size %d", d)
		}
		if d > limit {
			return 0, fmt.Errorf("size %d exceeds the limit of %d", d, limit)
		}
		if d != 0 && p > limit/d {
			return 0, fmt.Errorf("sizes %v: product exceeds the limit of %d", dims, limit)
		}
		p *= d
	}
	return p, nil
}

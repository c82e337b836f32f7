package share

import (
	"math/bits"
	"sync"
)

// Scratch word buffers. The protocols allocate and drop large word slices at
// every step (masked operands, received shares, the dealer's expansions);
// in steady state the same sizes recur batch after batch, so GetWords and
// PutWords recycle them through size-classed free lists (one sync.Pool per
// class) instead of asking the Go heap (which zeroes every large allocation
// and, after the scavenger has returned pages to the OS, faults them in
// again). ("Pool" in this module means the data owner's candidate pool; the
// recycled buffers are called scratch words.)
//
// Classes: below minScratchWords words no recycling; above, sizes are
// rounded up to a multiple of 2^(k−3) for 2^(k−1) < n ≤ 2^k, so a buffer
// wastes at most a quarter of its words.

// minScratchWords is the smallest buffer GetWords takes from a free list.
const minScratchWords = 1 << 10

// scratchClasses[class] holds *[]uint64 of capacity exactly classSize(class).
var scratchClasses [64 * 4]sync.Pool

// wordClass returns the class of a buffer of at least n words (n >
// minScratchWords/2) and its capacity.
func wordClass(n int) (class, size int) {
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n ≤ 2^k
	step := 1 << (k - 3)
	m := (n + step - 1) / step // 5..8
	return 4*k + m - 5, m * step
}

// GetWords returns a slice of n words for scratch use. Its contents are
// unspecified (an earlier user's words): the caller must overwrite every word
// it reads. Return it with PutWords when done, or simply drop it.
func GetWords(n int) []uint64 {
	if n < minScratchWords {
		return make([]uint64, n)
	}
	c, size := wordClass(n)
	if p, ok := scratchClasses[c].Get().(*[]uint64); ok {
		return (*p)[:n]
	}
	return make([]uint64, n, size)
}

// GetZeroedWords returns n zero words from the same free lists: a
// recycled buffer is cleared, a fresh one comes zeroed from the Go heap
// (which skips the clearing where its pages are fresh from the OS) and is
// not cleared twice. Return it with PutWords when done, or simply drop it.
func GetZeroedWords(n int) []uint64 {
	if n < minScratchWords {
		return make([]uint64, n)
	}
	c, size := wordClass(n)
	if p, ok := scratchClasses[c].Get().(*[]uint64); ok {
		w := (*p)[:n]
		clear(w)
		return w
	}
	return make([]uint64, n, size)
}

// PutWords hands w, obtained from GetWords or GetZeroedWords, back for reuse. The caller must
// not touch w, or any slice sharing its memory, afterwards. Slices whose
// capacity is not a class size (small ones, or slices not from GetWords)
// are left to the garbage collector; never pass a sub-slice of a buffer
// whose rest is still in use.
func PutWords(w []uint64) {
	c := cap(w)
	if c < minScratchWords {
		return
	}
	class, size := wordClass(c)
	if size != c {
		return
	}
	w = w[:0]
	scratchClasses[class].Put(&w)
}

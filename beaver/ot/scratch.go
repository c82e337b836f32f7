package ot

import (
	"unsafe"

	"github.com/selectformer/selectformer/share"
)

// The extension's per-call buffers (the rows t_j and q_j, 16 bytes an OT;
// the messages and corrections; the hashes) are as large as a call's
// chunk, up to 11 MB at sst2's defaults, and the same sizes recur call
// after call. Fresh, they cost a party more than their use: the Go heap
// zeroes every large allocation and, once the scavenger has returned the
// pages to the OS, faults them in again (issue 38: about 40 CPU-s of a data
// owner's 540 at sst2's defaults went to zeroing and faulting the
// extension's buffers, transpose128's copy into fresh rows alone 21 s). So
// they come from share's scratch words and go back there where their
// lifetime ends inside this package (runCOT, rotBits); buffers handed to a
// caller (DeltaOT) are simply dropped to the collector.

// getBlocks returns n blocks of scratch memory. Their contents are
// unspecified: the caller overwrites every block it reads.
func getBlocks(n int) []Block {
	if n == 0 {
		return nil
	}
	w := share.GetWords(2 * n)
	return unsafe.Slice((*Block)(unsafe.Pointer(unsafe.SliceData(w))), cap(w)/2)[:n]
}

// putBlocks hands back b, obtained from getBlocks (any length, its full
// capacity); the caller must not touch it, or any slice of it, afterwards.
func putBlocks(b []Block) {
	if cap(b) == 0 {
		return
	}
	putWords(unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), 2*cap(b)))
}

// getWords returns n words of scratch memory (share.GetWords: contents
// unspecified).
func getWords(n int) []uint64 { return share.GetWords(n) }

// putWords hands back w, obtained from getWords or getBlocks; with
// poisonScratch set it first overwrites all of w's capacity, so that a use
// after the hand-back reads garbage and fails the tests that set it.
func putWords(w []uint64) {
	if poisonScratch {
		w = w[:cap(w)]
		for i := range w {
			w[i] = 0xA5A5A5A5A5A5A5A5 ^ uint64(i)
		}
	}
	share.PutWords(w)
}

// poisonScratch is set by tests only (TestScratchHandBack).
var poisonScratch = false

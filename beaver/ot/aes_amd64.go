//go:build !purego

package ot

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// encryptBlocksAESNI encrypts n 16-byte blocks from src into dst with
// AES-NI, eight at a time, under the expanded key rk. Implemented in
// aes_amd64.s.
//
//go:noescape
func encryptBlocksAESNI(rk *[176]byte, dst, src *Block, n int)

// encryptBlocksVAES512 is encryptBlocksAESNI with 512-bit VAES, 32 blocks
// at a time (n a positive multiple of 32). Implemented in aes_amd64.s.
//
//go:noescape
func encryptBlocksVAES512(rk *[176]byte, dst, src *Block, n int)

// useAESNI selects the assembly path.
var useAESNI = cpu.X86.HasAES && cpu.X86.HasSSE41

// useVAES512 selects, within it, 512-bit VAES for whole groups of 32
// blocks (AVX-512 F with VAES; x/sys/cpu checks that the OS saves the ZMM
// state).
var useVAES512 = useAESNI && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VAES

// encryptBlocksAsm encrypts n > 0 blocks from src into dst under rk: the
// whole groups of 32 by encryptBlocksVAES512 where the CPU has it (four
// blocks a register: BenchmarkAESBlocks 37 GB/s against AES-NI's 8.4 on
// the AMD EPYC Zen 5), the rest by encryptBlocksAESNI.
func encryptBlocksAsm(rk *[176]byte, dst, src *Block, n int) {
	if useVAES512 && n >= 32 {
		m := n &^ 31
		encryptBlocksVAES512(rk, dst, src, m)
		if m == n {
			return
		}
		dst = (*Block)(unsafe.Add(unsafe.Pointer(dst), 16*m))
		src = (*Block)(unsafe.Add(unsafe.Pointer(src), 16*m))
		n -= m
	}
	encryptBlocksAESNI(rk, dst, src, n)
}

// hashRowsVAES512 is hasher.hashPass for w = 1 or 2 in 512-bit VAES, n a
// positive multiple of 32 rows, the tweak's high word hi (gen‖0).
// Implemented in aes_amd64.s.
//
//go:noescape
func hashRowsVAES512(rk *[176]byte, out *uint64, rows *Block, n int, off *Block, j0, hi uint64, w int)

// hashWideVAES512 is the second pass of hasher.hashPass for widths that
// are multiples of 8 words, in 512-bit VAES: m (a positive multiple of 8)
// groups of four hash blocks of one row, group g from its row's first pass
// ys[g] and first tweak tweaks[g]. Implemented in aes_amd64.s.
//
//go:noescape
func hashWideVAES512(rk *[176]byte, out *uint64, ys, tweaks *Block, m int)

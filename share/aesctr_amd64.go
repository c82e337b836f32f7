//go:build !purego

package share

import "golang.org/x/sys/cpu"

// ctrPath is the key-stream implementation AESCTR runs (ctrPaths lists
// those this CPU can run; a variable so tests can run each).
var ctrPath = ctrPaths()[len(ctrPaths())-1]

// ctrPaths lists the key-stream implementations this CPU can run, slowest
// first: crypto/aes; 256-bit VAES where the CPU has VAES (CPUID leaf 7,
// ECX bit 9, which x/sys/cpu reports only with AVX-512) and AVX2 with the
// OS saving the YMM state; 512-bit VAES and the AVX-512 byte shuffle with
// the OS saving the ZMM state (x/sys/cpu checks that for the AVX-512
// flags). GODEBUG=cpu.avx512f=off (or cpu.avx2=off) masks the wider paths.
func ctrPaths() []int {
	paths := []int{ctrStd}
	if cpu.X86.HasAVX2 && hasVAES() {
		paths = append(paths, ctrVAES2)
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VAES {
		paths = append(paths, ctrVAES4)
	}
	return paths
}

// hasVAES reports CPUID's VAES flag (leaf 7, sub-leaf 0, ECX bit 9).
func hasVAES() bool {
	if maxLeaf, _, _, _ := cpuid(0, 0); maxLeaf < 7 {
		return false
	}
	_, _, ecx, _ := cpuid(7, 0)
	return ecx&(1<<9) != 0
}

// ctrVAES256 is ctrVAES with 256-bit VAES and AVX2, for AES-128 (rounds
// = 10) and AES-256 (rounds = 14), from the doubled round keys rk2
// (AESKey.rk2). Implemented in aesctr_amd64.s.
//
//go:noescape
func ctrVAES256(rk2 *[480]byte, rounds int, dst *byte, groups int, hi, lo uint64)

// ctrVAES writes groups·64 bytes of AES-CTR key stream under the round
// keys rk (AES-128, rounds = 10, or AES-256, rounds = 14) into dst, from
// the counter block hi‖lo (big-endian), which must not wrap its low word
// within the call. Implemented in aesctr_amd64.s.
//
//go:noescape
func ctrVAES(rk *[240]byte, rounds int, dst *byte, groups int, hi, lo uint64)

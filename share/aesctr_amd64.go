//go:build !purego

package share

import "golang.org/x/sys/cpu"

// useVAES selects the VAES key stream (AESCTR): 512-bit AESENC and the
// AVX-512 byte shuffle, with the OS saving the ZMM state (x/sys/cpu checks
// that for the AVX-512 flags). A variable so tests can run both paths.
var useVAES = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VAES && littleEndian

// ctrVAES writes groups·64 bytes of AES-128-CTR key stream under the round
// keys rk into dst, from the counter block hi‖lo (big-endian), which must
// not wrap its low word within the call. Implemented in aesctr_amd64.s.
//
//go:noescape
func ctrVAES(rk *[176]byte, dst *byte, groups int, hi, lo uint64)

//go:build !purego

package ot

import "golang.org/x/sys/cpu"

// encryptBlocksAsm encrypts n 16-byte blocks from src into dst with AES-NI,
// eight at a time, under the expanded key rk. Implemented in aes_amd64.s.
//
//go:noescape
func encryptBlocksAsm(rk *[176]byte, dst, src *Block, n int)

// useAESNI selects the assembly path.
var useAESNI = cpu.X86.HasAES && cpu.X86.HasSSE41

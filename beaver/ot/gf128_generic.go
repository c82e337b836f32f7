//go:build !amd64 || purego

package ot

// usePCLMUL is false where there is no assembly implementation.
const usePCLMUL = false

func clmulAccumAsm(s *gfSum, a, b *Block, n int) {
	panic("ot: clmulAccumAsm without assembly")
}

//go:build !purego

package ot

import "golang.org/x/sys/cpu"

// clmulAccumAsm adds Σ a[i]·b[i] over n blocks to s, unreduced, with
// PCLMULQDQ (three products per pair by Karatsuba, as mulAddGeneric).
// Implemented in gf128_amd64.s.
//
//go:noescape
func clmulAccumAsm(s *gfSum, a, b *Block, n int)

// usePCLMUL selects the assembly path of gfSum.mulAdd.
var usePCLMUL = cpu.X86.HasPCLMULQDQ

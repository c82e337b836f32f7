//go:build !purego

package ot

import "golang.org/x/sys/cpu"

//go:generate go run ./testdata/gen_transpose.go

// transpose128GFNI is transpose128 in AVX-512: each group of eight
// columns' bytes is permuted (VPERMI2B) so that every 8×8 bit block sits
// in one quadword, the blocks are transposed by GF2P8AFFINEQB (the block
// as the affine matrix, applied to the unit bytes), the quadwords of each
// half are moved to their output groups by two 8×8 quadword transposes,
// and a last byte permutation lays out the rows. rows and cols hold 128
// blocks each. Implemented in transpose_amd64.s, which testdata/gen_transpose.go
// writes.
//
//go:noescape
func transpose128GFNI(rows *Block, cols *Block)

// useTransposeGFNI selects transpose128GFNI (AVX-512 F, BW and VBMI, and
// GFNI; x/sys/cpu checks that the OS saves the ZMM state).
var useTransposeGFNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512GFNI

// transpose128Asm runs transpose128GFNI on whole arrays.
func transpose128Asm(rows *[128]Block, cols *[baseCount]Block) {
	transpose128GFNI(&rows[0], &cols[0])
}

//go:build !amd64 || purego

package ot

// useTransposeGFNI is false where there is no assembly implementation.
const useTransposeGFNI = false

// transpose128Asm is never called where useTransposeGFNI is false.
func transpose128Asm(rows *[128]Block, cols *[baseCount]Block) {
	panic("ot: transpose128Asm without assembly")
}

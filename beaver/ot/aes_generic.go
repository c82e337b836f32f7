//go:build !amd64 || purego

package ot

// useAESNI is false where there is no assembly implementation.
const useAESNI = false

// useVAES512 is false where there is no assembly implementation.
const useVAES512 = false

func encryptBlocksAsm(rk *[176]byte, dst, src *Block, n int) {
	panic("ot: encryptBlocksAsm without assembly")
}

func hashRowsVAES512(rk *[176]byte, out *uint64, rows *Block, n int, off *Block, j0, hi uint64, w int) {
	panic("ot: hashRowsVAES512 without assembly")
}

func hashWideVAES512(rk *[176]byte, out *uint64, ys, tweaks *Block, m int) {
	panic("ot: hashWideVAES512 without assembly")
}

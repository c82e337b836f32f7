//go:build !amd64 || purego

package ot

// useAESNI is false where there is no assembly implementation.
const useAESNI = false

// useVAES512 is false where there is no assembly implementation.
const useVAES512 = false

func encryptBlocksAsm(rk *[176]byte, dst, src *Block, n int) {
	panic("ot: encryptBlocksAsm without assembly")
}

//go:build !amd64 || purego

package ot

// useLPNAsm is false where there is no assembly implementation.
const useLPNAsm = false

func lpnRowsAVX512(idx *uint32, ks *byte, cols int, k uint64, dup *uint64) {
	panic("ot: lpnRowsAVX512 without assembly")
}

func lpnGatherAsm(z, base *Block, idx *uint32, cols int) {
	panic("ot: lpnGatherAsm without assembly")
}

func lpnGatherBitsAsm(z, base *Block, idx *uint32, cols int, u, bits *uint64) {
	panic("ot: lpnGatherBitsAsm without assembly")
}

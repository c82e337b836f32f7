//go:build purego || !amd64

package share

// detectCPU reports no vendor, no AVX2 and no AVX-512: off amd64 (or
// with purego) no x86 kernel is compiled in.
func detectCPU() cpuInfo { return cpuInfo{} }

// splitRows16 is packBSplit's full-panel copy.
func splitRows16(dst, src []uint64, rs, kc int, split splitKind) {
	splitRows16Generic(dst, src, rs, kc, split)
}

// transposeTile4 is transposeBlock's aligned part.
func transposeTile4(dst, src []uint64, ldd, lds, h, w int) {
	transposeTile4Generic(dst, src, ldd, lds, h, w)
}

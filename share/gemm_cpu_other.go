//go:build purego || !amd64

package share

// detectCPU reports no vendor and no AVX-512: only the generic kernel is
// compiled in.
func detectCPU() cpuInfo { return cpuInfo{} }

// archKernels lists no kernels beyond the generic one.
func archKernels() []ringKernel { return nil }

// splitRows16 is packBSplit's full-panel copy.
func splitRows16(dst, src []uint64, rs, kc int, split splitKind) {
	splitRows16Generic(dst, src, rs, kc, split)
}

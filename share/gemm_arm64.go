//go:build !purego

package share

// gemmMicro4x4ARM64 adds the product of a packed 4×kc A panel and a packed
// kc×4 B panel to the 4×4 tile of C at c (rows ldc words apart), or stores
// it there when add is 0, with scalar MADD; kc ≥ 1. Implemented in
// gemm_arm64.s.
//
//go:noescape
func gemmMicro4x4ARM64(kc int, a, b, c *uint64, ldc int, add int)

// arm64Kernel is the arm64 kernel. A 4×4 tile: sixteen accumulators, the
// four B words and two A words fit arm64's general registers (Go's 2×4
// portable kernel was sized for amd64's sixteen), so each k step is four
// LDPs and sixteen MADDs, 1.4 instructions per product against the
// compiled 2×4 kernel's 3.4.
var arm64Kernel = &gemmImpl{name: "arm64-madd", mr: 4, nr: 4, kc: gemmKC, micro: microARM64}

// microARM64 checks the panel and tile bounds, then runs the assembly
// kernel.
func microARM64(kc int, ap, bp, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		clearTile(c, 4, 4, ldc, add)
		return
	}
	_ = ap[kc*4-1]
	_ = bp[kc*4-1]
	_ = c[3*ldc+3]
	gemmMicro4x4ARM64(kc, &ap[0], &bp[0], &c[0], ldc, addFlag(add))
}

// archKernels lists the arm64 kernel, which every arm64 CPU runs.
func archKernels() []ringKernel {
	return []ringKernel{{impl: arm64Kernel, runs: func(cpuInfo) bool { return true }}}
}

//go:build !purego

package share

import "golang.org/x/sys/cpu"

// gemmMicro8x16AVX512 adds the product of a packed 8×kc A panel and a packed
// kc×16 B panel to the 8×16 tile of C at c (rows ldc words apart), or stores
// it there when add is 0, with VPMULLQ on ZMM registers. Implemented in
// gemm_amd64.s.
//
//go:noescape
func gemmMicro8x16AVX512(kc int, a, b, c *uint64, ldc int, add int)

// avx512Kernel is the AVX-512 micro-kernel (F and DQ: 64-bit lane multiplies).
var avx512Kernel = &gemmImpl{name: "avx512", mr: 8, nr: 16, micro: microAVX512}

// microAVX512 checks the panel and tile bounds, then runs the assembly kernel.
func microAVX512(kc int, ap, bp, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		if !add {
			for i := range 8 {
				clear(c[i*ldc : i*ldc+16])
			}
		}
		return
	}
	_ = ap[kc*8-1]
	_ = bp[kc*16-1]
	_ = c[7*ldc+15]
	addFlag := 0
	if add {
		addFlag = 1
	}
	gemmMicro8x16AVX512(kc, &ap[0], &bp[0], &c[0], ldc, addFlag)
}

func init() {
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ {
		gemmKernel = avx512Kernel
	}
}

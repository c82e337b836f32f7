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

// gemmMicro4x16Limb is gemmMicro8x16AVX512's contract for a 4×16 tile of
// panels packed with splitHigh32, with VPMULUDQ (32×32→64-bit) limb
// products. Implemented in gemm_amd64.s.
//
//go:noescape
func gemmMicro4x16Limb(kc int, a, b, c *uint64, ldc int, add int)

// gemmMicro4x16IFMA is gemmMicro8x16AVX512's contract for a 4×16 tile of
// panels packed with splitIFMA, with VPMADD52LUQ/VPMADD52HUQ, for
// kc ≤ ifmaMaxKC. Implemented in gemm_amd64.s.
//
//go:noescape
func gemmMicro4x16IFMA(kc int, a, b, c *uint64, ldc int, add int)

// splitRows16Asm writes kc rows of a split B panel: the 16 words at
// src + p·rs words, then their second words, at dst + 32p words. Implemented
// in gemm_amd64.s.
//
//go:noescape
func splitRows16Asm(dst, src *uint64, rs, kc int, ifma int)

// splitRows16 is packBSplit's full-panel copy (see splitRows16Generic) in
// AVX-512 where the CPU has it.
func splitRows16(dst, src []uint64, rs, kc int, split splitKind) {
	if kc <= 0 {
		return
	}
	if !thisCPU.avx512F {
		splitRows16Generic(dst, src, rs, kc, split)
		return
	}
	_ = dst[32*kc-1]
	_ = src[(kc-1)*rs+15]
	ifma := 0
	if split == splitIFMA {
		ifma = 1
	}
	splitRows16Asm(&dst[0], &src[0], rs, kc, ifma)
}

// cpuid runs CPUID with EAX = eaxArg, ECX = ecxArg. Implemented in
// gemm_amd64.s.
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// ifmaMaxKC is the deepest block the IFMA kernel sums in one call: its low
// cross-term parts, each below 2^24, must sum below 2^32.
const ifmaMaxKC = 256

// The AVX-512 kernels. The 2-word kernels use 128-deep k blocks so that a
// B panel (128·16·2 words, 32 KiB) and an A panel (8 KiB) stay in L1.
var (
	avx512Kernel = &gemmImpl{name: "avx512-vpmullq", mr: 8, nr: 16, kc: gemmKC, micro: microAVX512}
	limbKernel   = &gemmImpl{name: "avx512-vpmuludq", mr: 4, nr: 16, kc: 128, split: splitHigh32, micro: microLimb}
	ifmaKernel   = &gemmImpl{name: "avx512-ifma", mr: 4, nr: 16, kc: 128, split: splitIFMA, micro: microIFMA}
)

// microAVX512 checks the panel and tile bounds, then runs the assembly kernel.
func microAVX512(kc int, ap, bp, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		clearTile(c, 8, 16, ldc, add)
		return
	}
	_ = ap[kc*8-1]
	_ = bp[kc*16-1]
	_ = c[7*ldc+15]
	gemmMicro8x16AVX512(kc, &ap[0], &bp[0], &c[0], ldc, addFlag(add))
}

// microLimb checks the panel and tile bounds, then runs the limb kernel.
func microLimb(kc int, ap, bp, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		clearTile(c, 4, 16, ldc, add)
		return
	}
	_ = ap[kc*8-1]
	_ = bp[kc*32-1]
	_ = c[3*ldc+15]
	gemmMicro4x16Limb(kc, &ap[0], &bp[0], &c[0], ldc, addFlag(add))
}

// microIFMA checks the panel and tile bounds, then runs the IFMA kernel on
// blocks of at most ifmaMaxKC.
func microIFMA(kc int, ap, bp, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		clearTile(c, 4, 16, ldc, add)
		return
	}
	_ = ap[kc*8-1]
	_ = bp[kc*32-1]
	_ = c[3*ldc+15]
	for p := 0; p < kc; p += ifmaMaxKC {
		n := min(ifmaMaxKC, kc-p)
		gemmMicro4x16IFMA(n, &ap[p*8], &bp[p*32], &c[0], ldc, addFlag(add || p > 0))
	}
}

// clearTile zeroes the mr×nr tile at c unless add is set (an empty product).
func clearTile(c []uint64, mr, nr, ldc int, add bool) {
	if add {
		return
	}
	for i := range mr {
		clear(c[i*ldc : i*ldc+nr])
	}
}

// addFlag is add as the assembly kernels take it.
func addFlag(add bool) int {
	if add {
		return 1
	}
	return 0
}

// detectCPU reads the vendor, family and model with CPUID and the AVX-512
// subsets from x/sys/cpu (which also checks that the OS saves ZMM state).
func detectCPU() cpuInfo {
	c := cpuInfo{avx512F: cpu.X86.HasAVX512F, avx512DQ: cpu.X86.HasAVX512DQ, avx512IFMA: cpu.X86.HasAVX512IFMA}
	maxLeaf, b, cx, d := cpuid(0, 0)
	var v [12]byte
	for i, w := range []uint32{b, d, cx} {
		v[4*i], v[4*i+1], v[4*i+2], v[4*i+3] = byte(w), byte(w>>8), byte(w>>16), byte(w>>24)
	}
	c.vendor = string(v[:])
	if maxLeaf >= 1 {
		eax, _, _, _ := cpuid(1, 0)
		c.family, c.model = cpuFamilyModel(eax)
	}
	return c
}

// cpuFamilyModel decodes the display family and model from CPUID leaf 1's
// EAX: the extended family adds to family 15, the extended model extends
// families 6 and 15.
func cpuFamilyModel(eax uint32) (family, model int) {
	family = int(eax>>8) & 0xf
	model = int(eax>>4) & 0xf
	if family == 0xf {
		family += int(eax>>20) & 0xff
	}
	if family == 6 || family >= 0xf {
		model += int(eax>>16) & 0xf << 4
	}
	return family, model
}

// archKernels lists the AVX-512 kernels and what each needs.
func archKernels() []ringKernel {
	return []ringKernel{
		{impl: avx512Kernel, runs: func(c cpuInfo) bool { return c.avx512F && c.avx512DQ }},
		{impl: limbKernel, runs: func(c cpuInfo) bool { return c.avx512F }},
		{impl: ifmaKernel, runs: func(c cpuInfo) bool { return c.avx512F && c.avx512IFMA }},
	}
}

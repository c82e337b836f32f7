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

// gemmMicro3x8AVX2 is gemmMicro8x16AVX512's contract for a 3×8 tile, with
// AVX2 VPMULUDQ and VPMULLD, and B at stride ldb: row p of the 8-column
// block is the 8 words at b + p·ldb words (ldb = 8 in a packed panel; the
// row stride of B read in place). Implemented in gemm_amd64.s.
//
//go:noescape
func gemmMicro3x8AVX2(kc int, a, b, c *uint64, ldc int, add int, ldb int)

// transposeTile4AVX2 writes the w×h transpose of the h×w block at src
// (rows lds words apart) to dst (rows ldd words apart), 4×4 blocks at a
// time in YMM registers; h and w are positive multiples of 4. Implemented
// in gemm_amd64.s.
//
//go:noescape
func transposeTile4AVX2(dst, src *uint64, ldd, lds, h, w int)

// transposeTile4 is transposeBlock's aligned part (see
// transposeTile4Generic), in AVX2 where the CPU has it.
func transposeTile4(dst, src []uint64, ldd, lds, h, w int) {
	if !thisCPU.avx2 {
		transposeTile4Generic(dst, src, ldd, lds, h, w)
		return
	}
	_ = src[(h-1)*lds+w-1]
	_ = dst[(w-1)*ldd+h-1]
	transposeTile4AVX2(&dst[0], &src[0], ldd, lds, h, w)
}

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

// The AVX-512 kernels and the AVX2 one. The 2-word kernels use 128-deep k
// blocks so that a B panel (128·16·2 words, 32 KiB) and an A panel (8 KiB)
// stay in L1; the AVX2 kernel's 256-deep ones (16 KiB and 6 KiB) fit the
// 32 KiB L1 of the cores without AVX-512.
var (
	avx512Kernel = &gemmImpl{name: "avx512-vpmullq", mr: 8, nr: 16, kc: gemmKC, micro: microAVX512}
	limbKernel   = &gemmImpl{name: "avx512-vpmuludq", mr: 4, nr: 16, kc: 128, split: splitHigh32, micro: microLimb}
	ifmaKernel   = &gemmImpl{name: "avx512-ifma", mr: 4, nr: 16, kc: 128, split: splitIFMA, micro: microIFMA}
	avx2Kernel   = &gemmImpl{name: "avx2-vpmulld", mr: 3, nr: 8, kc: gemmKC, micro: microAVX2, direct: directAVX2, directRows: avx2DirectRows}
)

// avx2DirectRows is the most rows of A for which the AVX2 kernel reads a
// row-major B in place instead of packing it (gemmImpl.direct).
const avx2DirectRows = 64

// microAVX2 runs the AVX2 kernel on a packed B panel (rows 8 words apart).
func microAVX2(kc int, ap, bp, c []uint64, ldc int, add bool) {
	directAVX2(kc, ap, bp, 8, c, ldc, add)
}

// directAVX2 checks the panel, B and tile bounds, then runs the AVX2
// kernel with B rows ldb words apart.
func directAVX2(kc int, ap, b []uint64, ldb int, c []uint64, ldc int, add bool) {
	if kc <= 0 {
		clearTile(c, 3, 8, ldc, add)
		return
	}
	_ = ap[kc*3-1]
	_ = b[(kc-1)*ldb+7]
	_ = c[2*ldc+7]
	gemmMicro3x8AVX2(kc, &ap[0], &b[0], &c[0], ldc, addFlag(add), ldb)
}

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

// detectCPU reads the vendor, family and model with CPUID and the AVX-512
// subsets from x/sys/cpu (which also checks that the OS saves ZMM state).
func detectCPU() cpuInfo {
	c := cpuInfo{avx2: cpu.X86.HasAVX2, avx512F: cpu.X86.HasAVX512F, avx512DQ: cpu.X86.HasAVX512DQ, avx512IFMA: cpu.X86.HasAVX512IFMA}
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
		{impl: avx2Kernel, runs: func(c cpuInfo) bool { return c.avx2 }},
	}
}

//go:build !purego

#include "textflag.h"

// func gemmMicro8x16AVX512(kc int, a *uint64, b *uint64, c *uint64, ldc int, add int)
//
// c[8×16] = a·b (add == 0) or c[8×16] += a·b (add != 0) over Z_2^64: a is
// kc groups of 8 words (one A column per group), b is kc groups of 16 words
// (one B row per group), c has rows ldc words apart. Z0–Z15 hold the tile
// (row i in Z(2i), Z(2i+1)), Z16/Z17 the current B row, Z18/Z19 broadcast
// A words, Z20–Z27 the products. VPMULLQ keeps the low 64 bits of each
// lane product, which is multiplication mod 2^64.
TEXT ·gemmMicro8x16AVX512(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), SI
	SHLQ $3, SI
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	TESTQ CX, CX
	JLE done

loop:
	VMOVDQU64 (BX), Z16
	VMOVDQU64 64(BX), Z17
	VPBROADCASTQ 0(AX), Z18
	VPMULLQ Z16, Z18, Z20
	VPMULLQ Z17, Z18, Z21
	VPADDQ Z20, Z0, Z0
	VPADDQ Z21, Z1, Z1
	VPBROADCASTQ 8(AX), Z19
	VPMULLQ Z16, Z19, Z22
	VPMULLQ Z17, Z19, Z23
	VPADDQ Z22, Z2, Z2
	VPADDQ Z23, Z3, Z3
	VPBROADCASTQ 16(AX), Z18
	VPMULLQ Z16, Z18, Z24
	VPMULLQ Z17, Z18, Z25
	VPADDQ Z24, Z4, Z4
	VPADDQ Z25, Z5, Z5
	VPBROADCASTQ 24(AX), Z19
	VPMULLQ Z16, Z19, Z26
	VPMULLQ Z17, Z19, Z27
	VPADDQ Z26, Z6, Z6
	VPADDQ Z27, Z7, Z7
	VPBROADCASTQ 32(AX), Z18
	VPMULLQ Z16, Z18, Z20
	VPMULLQ Z17, Z18, Z21
	VPADDQ Z20, Z8, Z8
	VPADDQ Z21, Z9, Z9
	VPBROADCASTQ 40(AX), Z19
	VPMULLQ Z16, Z19, Z22
	VPMULLQ Z17, Z19, Z23
	VPADDQ Z22, Z10, Z10
	VPADDQ Z23, Z11, Z11
	VPBROADCASTQ 48(AX), Z18
	VPMULLQ Z16, Z18, Z24
	VPMULLQ Z17, Z18, Z25
	VPADDQ Z24, Z12, Z12
	VPADDQ Z25, Z13, Z13
	VPBROADCASTQ 56(AX), Z19
	VPMULLQ Z16, Z19, Z26
	VPMULLQ Z17, Z19, Z27
	VPADDQ Z26, Z14, Z14
	VPADDQ Z27, Z15, Z15
	ADDQ $64, AX
	ADDQ $128, BX
	DECQ CX
	JNZ loop

done:
	MOVQ add+40(FP), CX
	TESTQ CX, CX
	JZ store
	VPADDQ (DX), Z0, Z0
	VPADDQ 64(DX), Z1, Z1
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z2, Z2
	VPADDQ 64(DX), Z3, Z3
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z4, Z4
	VPADDQ 64(DX), Z5, Z5
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z6, Z6
	VPADDQ 64(DX), Z7, Z7
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z8, Z8
	VPADDQ 64(DX), Z9, Z9
	VMOVDQU64 Z8, (DX)
	VMOVDQU64 Z9, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z10, Z10
	VPADDQ 64(DX), Z11, Z11
	VMOVDQU64 Z10, (DX)
	VMOVDQU64 Z11, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z12, Z12
	VPADDQ 64(DX), Z13, Z13
	VMOVDQU64 Z12, (DX)
	VMOVDQU64 Z13, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z14, Z14
	VPADDQ 64(DX), Z15, Z15
	VMOVDQU64 Z14, (DX)
	VMOVDQU64 Z15, 64(DX)
	VZEROUPPER
	RET

store:
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z8, (DX)
	VMOVDQU64 Z9, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z10, (DX)
	VMOVDQU64 Z11, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z12, (DX)
	VMOVDQU64 Z13, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z14, (DX)
	VMOVDQU64 Z15, 64(DX)
	VZEROUPPER
	RET

// func gemmMicro4x16Limb(kc int, a *uint64, b *uint64, c *uint64, ldc int, add int)
//
// c[4×16] = a·b (add == 0) or c[4×16] += a·b (add != 0) over Z_2^64 with
// 32×32→64-bit multiplies: for words x = x0 + 2^32·x1,
// a·b mod 2^64 = a0·b0 + 2^32·(a0·b1 + a1·b0) mod 2^64. a is kc groups of 8
// words (4 A words a, then their high halves a>>32), b kc groups of 32 words
// (16 B words, then their high halves). VPMULUDQ multiplies the low 32 bits
// of its lanes, so the packed words serve as their own low limbs. Z0–Z7
// accumulate Σ a0·b0 (row i in Z(2i), Z(2i+1)), Z8–Z15 the cross terms
// Σ a0·b1 + a1·b0; the tile is Z0–Z7 + (Z8–Z15 << 32), one shift per tile.
// Z16/Z17 hold the B row, Z18/Z19 its high halves, Z20/Z21 a broadcast A
// word and its high half, Z22–Z27 the products.
TEXT ·gemmMicro4x16Limb(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), SI
	SHLQ $3, SI
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	TESTQ CX, CX
	JLE done

loop:
	VMOVDQU64 (BX), Z16
	VMOVDQU64 64(BX), Z17
	VMOVDQU64 128(BX), Z18
	VMOVDQU64 192(BX), Z19
	VPBROADCASTQ 0(AX), Z20
	VPBROADCASTQ 32(AX), Z21
	VPMULUDQ Z16, Z20, Z22
	VPMULUDQ Z17, Z20, Z23
	VPMULUDQ Z18, Z20, Z24
	VPMULUDQ Z19, Z20, Z25
	VPMULUDQ Z16, Z21, Z26
	VPMULUDQ Z17, Z21, Z27
	VPADDQ Z22, Z0, Z0
	VPADDQ Z23, Z1, Z1
	VPADDQ Z24, Z8, Z8
	VPADDQ Z25, Z9, Z9
	VPADDQ Z26, Z8, Z8
	VPADDQ Z27, Z9, Z9
	VPBROADCASTQ 8(AX), Z20
	VPBROADCASTQ 40(AX), Z21
	VPMULUDQ Z16, Z20, Z22
	VPMULUDQ Z17, Z20, Z23
	VPMULUDQ Z18, Z20, Z24
	VPMULUDQ Z19, Z20, Z25
	VPMULUDQ Z16, Z21, Z26
	VPMULUDQ Z17, Z21, Z27
	VPADDQ Z22, Z2, Z2
	VPADDQ Z23, Z3, Z3
	VPADDQ Z24, Z10, Z10
	VPADDQ Z25, Z11, Z11
	VPADDQ Z26, Z10, Z10
	VPADDQ Z27, Z11, Z11
	VPBROADCASTQ 16(AX), Z20
	VPBROADCASTQ 48(AX), Z21
	VPMULUDQ Z16, Z20, Z22
	VPMULUDQ Z17, Z20, Z23
	VPMULUDQ Z18, Z20, Z24
	VPMULUDQ Z19, Z20, Z25
	VPMULUDQ Z16, Z21, Z26
	VPMULUDQ Z17, Z21, Z27
	VPADDQ Z22, Z4, Z4
	VPADDQ Z23, Z5, Z5
	VPADDQ Z24, Z12, Z12
	VPADDQ Z25, Z13, Z13
	VPADDQ Z26, Z12, Z12
	VPADDQ Z27, Z13, Z13
	VPBROADCASTQ 24(AX), Z20
	VPBROADCASTQ 56(AX), Z21
	VPMULUDQ Z16, Z20, Z22
	VPMULUDQ Z17, Z20, Z23
	VPMULUDQ Z18, Z20, Z24
	VPMULUDQ Z19, Z20, Z25
	VPMULUDQ Z16, Z21, Z26
	VPMULUDQ Z17, Z21, Z27
	VPADDQ Z22, Z6, Z6
	VPADDQ Z23, Z7, Z7
	VPADDQ Z24, Z14, Z14
	VPADDQ Z25, Z15, Z15
	VPADDQ Z26, Z14, Z14
	VPADDQ Z27, Z15, Z15
	ADDQ $64, AX
	ADDQ $256, BX
	DECQ CX
	JNZ loop

done:
	VPSLLQ $32, Z8, Z8
	VPADDQ Z8, Z0, Z0
	VPSLLQ $32, Z9, Z9
	VPADDQ Z9, Z1, Z1
	VPSLLQ $32, Z10, Z10
	VPADDQ Z10, Z2, Z2
	VPSLLQ $32, Z11, Z11
	VPADDQ Z11, Z3, Z3
	VPSLLQ $32, Z12, Z12
	VPADDQ Z12, Z4, Z4
	VPSLLQ $32, Z13, Z13
	VPADDQ Z13, Z5, Z5
	VPSLLQ $32, Z14, Z14
	VPADDQ Z14, Z6, Z6
	VPSLLQ $32, Z15, Z15
	VPADDQ Z15, Z7, Z7
	MOVQ add+40(FP), CX
	TESTQ CX, CX
	JZ store
	VPADDQ (DX), Z0, Z0
	VPADDQ 64(DX), Z1, Z1
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z2, Z2
	VPADDQ 64(DX), Z3, Z3
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z4, Z4
	VPADDQ 64(DX), Z5, Z5
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z6, Z6
	VPADDQ 64(DX), Z7, Z7
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	VZEROUPPER
	RET

store:
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	VZEROUPPER
	RET

// func gemmMicro4x16IFMA(kc int, a *uint64, b *uint64, c *uint64, ldc int, add int)
//
// c[4×16] = a·b (add == 0) or c[4×16] += a·b (add != 0) over Z_2^64 with
// 52-bit multiply-adds, for kc ≤ 256. Split each word x = x0 + 2^52·x1
// (x0 < 2^52, x1 < 2^12): a·b mod 2^64 = a0·b0 + 2^52·(a0·b1 + a1·b0 mod 2^12).
// VPMADD52LUQ and VPMADD52HUQ add the low and high 52 bits of the 104-bit
// product of the low 52 bits of their lanes, so with the packed words
// themselves they give a0·b0 = L + 2^52·H. The cross term comes from one
// more product of the second packed words u = (a mod 2^12) + 2^32·a1 and
// v = (b mod 2^12) + 2^32·b1: u·v = a'·b' + 2^32·(a'·b1 + a1·b') + 2^64·a1·b1
// with a', b' < 2^12, whose low 52 bits hold a'·b' < 2^24 below bit 32 and
// the cross term mod 2^20 from bit 32. Over kc ≤ 256 products the sums
// below bit 32 stay below 2^32 (256·(2^12−1)^2 < 2^32), so bits 32–43 of
// the accumulated X = Σ low52(u·v) are the cross sum mod 2^12, and the tile
// is L + ((H + (X >> 32)) << 52). Three multiply-adds per eight lanes, no
// separate adds. a is kc groups of 8 words (4 A words, then their u), b kc
// groups of 32 words (16 B words, then their v). Z0–Z7 accumulate L (row i
// in Z(2i), Z(2i+1)), Z8–Z15 H, Z16–Z23 X; Z24/Z25 hold the B row, Z26/Z27
// its v, Z28/Z29 a broadcast A word and its u.
TEXT ·gemmMicro4x16IFMA(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), SI
	SHLQ $3, SI
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	VPXORQ Z18, Z18, Z18
	VPXORQ Z19, Z19, Z19
	VPXORQ Z20, Z20, Z20
	VPXORQ Z21, Z21, Z21
	VPXORQ Z22, Z22, Z22
	VPXORQ Z23, Z23, Z23
	TESTQ CX, CX
	JLE done

loop:
	VMOVDQU64 (BX), Z24
	VMOVDQU64 64(BX), Z25
	VMOVDQU64 128(BX), Z26
	VMOVDQU64 192(BX), Z27
	VPBROADCASTQ 0(AX), Z28
	VPBROADCASTQ 32(AX), Z29
	VPMADD52LUQ Z24, Z28, Z0
	VPMADD52LUQ Z25, Z28, Z1
	VPMADD52HUQ Z24, Z28, Z8
	VPMADD52HUQ Z25, Z28, Z9
	VPMADD52LUQ Z26, Z29, Z16
	VPMADD52LUQ Z27, Z29, Z17
	VPBROADCASTQ 8(AX), Z28
	VPBROADCASTQ 40(AX), Z29
	VPMADD52LUQ Z24, Z28, Z2
	VPMADD52LUQ Z25, Z28, Z3
	VPMADD52HUQ Z24, Z28, Z10
	VPMADD52HUQ Z25, Z28, Z11
	VPMADD52LUQ Z26, Z29, Z18
	VPMADD52LUQ Z27, Z29, Z19
	VPBROADCASTQ 16(AX), Z28
	VPBROADCASTQ 48(AX), Z29
	VPMADD52LUQ Z24, Z28, Z4
	VPMADD52LUQ Z25, Z28, Z5
	VPMADD52HUQ Z24, Z28, Z12
	VPMADD52HUQ Z25, Z28, Z13
	VPMADD52LUQ Z26, Z29, Z20
	VPMADD52LUQ Z27, Z29, Z21
	VPBROADCASTQ 24(AX), Z28
	VPBROADCASTQ 56(AX), Z29
	VPMADD52LUQ Z24, Z28, Z6
	VPMADD52LUQ Z25, Z28, Z7
	VPMADD52HUQ Z24, Z28, Z14
	VPMADD52HUQ Z25, Z28, Z15
	VPMADD52LUQ Z26, Z29, Z22
	VPMADD52LUQ Z27, Z29, Z23
	ADDQ $64, AX
	ADDQ $256, BX
	DECQ CX
	JNZ loop

done:
	VPSRLQ $32, Z16, Z16
	VPADDQ Z16, Z8, Z8
	VPSLLQ $52, Z8, Z8
	VPADDQ Z8, Z0, Z0
	VPSRLQ $32, Z17, Z17
	VPADDQ Z17, Z9, Z9
	VPSLLQ $52, Z9, Z9
	VPADDQ Z9, Z1, Z1
	VPSRLQ $32, Z18, Z18
	VPADDQ Z18, Z10, Z10
	VPSLLQ $52, Z10, Z10
	VPADDQ Z10, Z2, Z2
	VPSRLQ $32, Z19, Z19
	VPADDQ Z19, Z11, Z11
	VPSLLQ $52, Z11, Z11
	VPADDQ Z11, Z3, Z3
	VPSRLQ $32, Z20, Z20
	VPADDQ Z20, Z12, Z12
	VPSLLQ $52, Z12, Z12
	VPADDQ Z12, Z4, Z4
	VPSRLQ $32, Z21, Z21
	VPADDQ Z21, Z13, Z13
	VPSLLQ $52, Z13, Z13
	VPADDQ Z13, Z5, Z5
	VPSRLQ $32, Z22, Z22
	VPADDQ Z22, Z14, Z14
	VPSLLQ $52, Z14, Z14
	VPADDQ Z14, Z6, Z6
	VPSRLQ $32, Z23, Z23
	VPADDQ Z23, Z15, Z15
	VPSLLQ $52, Z15, Z15
	VPADDQ Z15, Z7, Z7
	MOVQ add+40(FP), CX
	TESTQ CX, CX
	JZ store
	VPADDQ (DX), Z0, Z0
	VPADDQ 64(DX), Z1, Z1
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z2, Z2
	VPADDQ 64(DX), Z3, Z3
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z4, Z4
	VPADDQ 64(DX), Z5, Z5
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VPADDQ (DX), Z6, Z6
	VPADDQ 64(DX), Z7, Z7
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	VZEROUPPER
	RET

store:
	VMOVDQU64 Z0, (DX)
	VMOVDQU64 Z1, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z2, (DX)
	VMOVDQU64 Z3, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z4, (DX)
	VMOVDQU64 Z5, 64(DX)
	ADDQ SI, DX
	VMOVDQU64 Z6, (DX)
	VMOVDQU64 Z7, 64(DX)
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func splitRows16Asm(dst *uint64, src *uint64, rs int, kc int, ifma int)
//
// For p < kc: copies the 16 words at src + p·rs words to dst + 32p words and
// writes their second words after them: x>>32 (ifma == 0) or
// (x mod 2^12) | (x>>52)<<32 (ifma != 0). The one-pass packing of a full
// 16-column B panel for the split kernels (packBSplit).
TEXT ·splitRows16Asm(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rs+16(FP), DX
	SHLQ $3, DX
	MOVQ kc+24(FP), CX
	MOVQ ifma+32(FP), AX
	TESTQ CX, CX
	JLE splitdone
	TESTQ AX, AX
	JNZ splitifma

splithigh:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VPSRLQ $32, Z0, Z2
	VPSRLQ $32, Z1, Z3
	VMOVDQU64 Z0, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ DX, SI
	ADDQ $256, DI
	DECQ CX
	JNZ splithigh
	VZEROUPPER
	RET

splitifma:
	MOVQ $0xfff, AX
	VPBROADCASTQ AX, Z31

splitifmaloop:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VPANDQ Z31, Z0, Z2
	VPANDQ Z31, Z1, Z3
	VPSRLQ $52, Z0, Z4
	VPSRLQ $52, Z1, Z5
	VPSLLQ $32, Z4, Z4
	VPSLLQ $32, Z5, Z5
	VPORQ Z4, Z2, Z2
	VPORQ Z5, Z3, Z3
	VMOVDQU64 Z0, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ DX, SI
	ADDQ $256, DI
	DECQ CX
	JNZ splitifmaloop

splitdone:
	VZEROUPPER
	RET

// func transposeTile4AVX2(dst *uint64, src *uint64, ldd int, lds int, h int, w int)
//
// dst[j][i] = src[i][j] for i < h, j < w (both multiples of 4, positive),
// rows ldd and lds words apart, one 4×4 block at a time: four rows in
// Y0–Y3, interleaved pairwise by VPUNPCKLQDQ/VPUNPCKHQDQ, their 128-bit
// halves recombined by VPERM2I128 into the four columns. The outer loop
// walks block rows (SI, DI advance 4 rows and 4 words), the inner one the
// blocks of a block row (R8 over src, R9 over dst).
TEXT ·transposeTile4AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ldd+16(FP), R10
	SHLQ $3, R10
	MOVQ lds+24(FP), R11
	SHLQ $3, R11
	MOVQ h+32(FP), CX
	MOVQ w+40(FP), DX
	SHRQ $2, CX
	SHRQ $2, DX
	LEAQ (R11)(R11*2), R12 // 3·lds bytes
	LEAQ (R10)(R10*2), R13 // 3·ldd bytes

trrows:
	MOVQ SI, R8
	MOVQ DI, R9
	MOVQ DX, BX

trblocks:
	VMOVDQU (R8), Y0
	VMOVDQU (R8)(R11*1), Y1
	VMOVDQU (R8)(R11*2), Y2
	VMOVDQU (R8)(R12*1), Y3
	VPUNPCKLQDQ Y1, Y0, Y4
	VPUNPCKHQDQ Y1, Y0, Y5
	VPUNPCKLQDQ Y3, Y2, Y6
	VPUNPCKHQDQ Y3, Y2, Y7
	VPERM2I128 $0x20, Y6, Y4, Y0
	VPERM2I128 $0x20, Y7, Y5, Y1
	VPERM2I128 $0x31, Y6, Y4, Y2
	VPERM2I128 $0x31, Y7, Y5, Y3
	VMOVDQU Y0, (R9)
	VMOVDQU Y1, (R9)(R10*1)
	VMOVDQU Y2, (R9)(R10*2)
	VMOVDQU Y3, (R9)(R13*1)
	ADDQ $32, R8
	LEAQ (R9)(R10*4), R9
	DECQ BX
	JNZ trblocks

	LEAQ (SI)(R11*4), SI
	ADDQ $32, DI
	DECQ CX
	JNZ trrows
	VZEROUPPER
	RET

// func gemmMicro3x8AVX2(kc int, a *uint64, b *uint64, c *uint64, ldc int, add int, ldb int)
//
// c[3×8] = a·b (add == 0) or c[3×8] += a·b (add != 0) over Z_2^64 with
// AVX2 32-bit lane multiplies: for words x = x0 + 2^32·x1,
// a·b mod 2^64 = a0·b0 + 2^32·(a0·b1 + a1·b0 mod 2^32). a is kc groups of
// 3 words (one A column); row p of b is the 8 words at b + p·ldb words (a
// packed panel, ldb = 8, or B read in place). VPMULUDQ of a broadcast A
// word and a B row gives a0·b0; VPMULLD of it and the row with its 32-bit
// halves swapped (b1 + 2^32·b0, made once per k step by VPSHUFD into Y13,
// Y14) gives the low 32 bits of a0·b1 and a1·b0 in the two halves of each
// lane, summed there with VPADDD (mod 2^32 each). Two multiplies and two
// adds per four products; the two shuffles per 24 products run beside the
// multiplies, which bound the loop. Row i accumulates a0·b0 in Y(4i),
// Y(4i+1) and the cross halves in Y(4i+2), Y(4i+3); the tile is the former
// plus, per lane, (low + high half of the latter) << 32, once per tile.
// Y12 holds the broadcast A word, Y15 the products. The row 8·ldb words
// ahead is prefetched (R13): B read in place has rows ldb words apart,
// which defeats the hardware's stream prefetch.
TEXT ·gemmMicro3x8AVX2(SB), NOSPLIT, $0-56
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), SI
	SHLQ $3, SI
	MOVQ ldb+48(FP), R8
	SHLQ $3, R8
	LEAQ (BX)(R8*8), R13
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	TESTQ CX, CX
	JLE done

loop:
	VPSHUFD $0xb1, (BX), Y13
	VPSHUFD $0xb1, 32(BX), Y14
	PREFETCHT0 (R13)
	VPBROADCASTQ 0(AX), Y12
	VPMULUDQ (BX), Y12, Y15
	VPADDQ Y15, Y0, Y0
	VPMULUDQ 32(BX), Y12, Y15
	VPADDQ Y15, Y1, Y1
	VPMULLD Y13, Y12, Y15
	VPADDD Y15, Y2, Y2
	VPMULLD Y14, Y12, Y15
	VPADDD Y15, Y3, Y3
	VPBROADCASTQ 8(AX), Y12
	VPMULUDQ (BX), Y12, Y15
	VPADDQ Y15, Y4, Y4
	VPMULUDQ 32(BX), Y12, Y15
	VPADDQ Y15, Y5, Y5
	VPMULLD Y13, Y12, Y15
	VPADDD Y15, Y6, Y6
	VPMULLD Y14, Y12, Y15
	VPADDD Y15, Y7, Y7
	VPBROADCASTQ 16(AX), Y12
	VPMULUDQ (BX), Y12, Y15
	VPADDQ Y15, Y8, Y8
	VPMULUDQ 32(BX), Y12, Y15
	VPADDQ Y15, Y9, Y9
	VPMULLD Y13, Y12, Y15
	VPADDD Y15, Y10, Y10
	VPMULLD Y14, Y12, Y15
	VPADDD Y15, Y11, Y11
	ADDQ $24, AX
	ADDQ R8, BX
	ADDQ R8, R13
	DECQ CX
	JNZ loop

done:
	VPSHUFD $0xb1, Y2, Y13
	VPADDD Y13, Y2, Y2
	VPSLLQ $32, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VPSHUFD $0xb1, Y3, Y13
	VPADDD Y13, Y3, Y3
	VPSLLQ $32, Y3, Y3
	VPADDQ Y3, Y1, Y1
	VPSHUFD $0xb1, Y6, Y13
	VPADDD Y13, Y6, Y6
	VPSLLQ $32, Y6, Y6
	VPADDQ Y6, Y4, Y4
	VPSHUFD $0xb1, Y7, Y13
	VPADDD Y13, Y7, Y7
	VPSLLQ $32, Y7, Y7
	VPADDQ Y7, Y5, Y5
	VPSHUFD $0xb1, Y10, Y13
	VPADDD Y13, Y10, Y10
	VPSLLQ $32, Y10, Y10
	VPADDQ Y10, Y8, Y8
	VPSHUFD $0xb1, Y11, Y13
	VPADDD Y13, Y11, Y11
	VPSLLQ $32, Y11, Y11
	VPADDQ Y11, Y9, Y9
	MOVQ add+40(FP), CX
	TESTQ CX, CX
	JZ store
	VPADDQ (DX), Y0, Y0
	VPADDQ 32(DX), Y1, Y1
	VMOVDQU Y0, (DX)
	VMOVDQU Y1, 32(DX)
	ADDQ SI, DX
	VPADDQ (DX), Y4, Y4
	VPADDQ 32(DX), Y5, Y5
	VMOVDQU Y4, (DX)
	VMOVDQU Y5, 32(DX)
	ADDQ SI, DX
	VPADDQ (DX), Y8, Y8
	VPADDQ 32(DX), Y9, Y9
	VMOVDQU Y8, (DX)
	VMOVDQU Y9, 32(DX)
	VZEROUPPER
	RET

store:
	VMOVDQU Y0, (DX)
	VMOVDQU Y1, 32(DX)
	ADDQ SI, DX
	VMOVDQU Y4, (DX)
	VMOVDQU Y5, 32(DX)
	ADDQ SI, DX
	VMOVDQU Y8, (DX)
	VMOVDQU Y9, 32(DX)
	VZEROUPPER
	RET

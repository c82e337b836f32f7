//go:build !purego

#include "textflag.h"

// macGroup is the number of terms macLimbsAVX2 adds to the limb sums of a
// group of four slots per pass: 2·macGroup weight rows stream at once,
// few enough for the hardware's prefetch.
#define macGroup 4

// func macLimbsAVX2(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)
//
// For each x in [0, n) (n a positive multiple of 4) and the two
// polynomials c ∈ {0, 1}, it adds the limb sums of Σ_t a_t·w_c,t[x],
// a_t = ev_t[idx[x]], to limbs: the block of 24 words of x's group of four
// slots (words 24·(x/4) on) holds L0, M0, H0, L1, M1, H1, four lanes each,
// with a·b = lo(a)·lo(b) + 2^28·(lo(a)·hi(b) + hi(a)·lo(b)) +
// 2^56·hi(a)·hi(b) for the 28-bit halves lo = v mod 2^28, hi = v >> 28 of
// operands below 2^56 (each lane product below 2^56; the caller bounds the
// terms so that no lane wraps). idx must be constant on each aligned group
// of four x (a_t is broadcast); a macTerm is {ev, w0, w1 *uint64}, 24
// bytes. The terms are taken macGroup at a time over every group of slots,
// the sums of a group loaded into Y0–Y5 and stored back once per pass. Y6/Y7
// hold the broadcast a_t's halves, Y8/Y9 a weight word's, Y10 the products,
// Y15 the 28-bit mask.
TEXT ·macLimbsAVX2(SB), NOSPLIT, $0-40
	MOVQ terms+0(FP), SI
	MOVQ nterms+8(FP), CX
	MOVQ idx+16(FP), DI
	MOVQ n+24(FP), R8
	MOVQ $0xfffffff, AX
	MOVQ AX, X15
	VPBROADCASTQ X15, Y15
	TESTQ CX, CX
	JLE done

gloop:
	MOVQ $macGroup, R15
	CMPQ CX, R15
	CMOVQLT CX, R15 // terms in this pass
	MOVQ limbs+32(FP), R9
	XORQ R10, R10 // x

xloop:
	VMOVDQU 0(R9), Y0
	VMOVDQU 32(R9), Y1
	VMOVDQU 64(R9), Y2
	VMOVDQU 96(R9), Y3
	VMOVDQU 128(R9), Y4
	VMOVDQU 160(R9), Y5
	MOVWQZX (DI)(R10*2), R11 // j = idx[x]
	MOVQ SI, R12             // the term
	MOVQ R15, R13            // terms left in the pass

tloop:
	MOVQ 0(R12), AX  // ev
	MOVQ 8(R12), BX  // w0
	MOVQ 16(R12), DX // w1
	VPBROADCASTQ (AX)(R11*8), Y6
	VPSRLQ $28, Y6, Y7
	VPAND Y15, Y6, Y6

	VMOVDQU (BX)(R10*8), Y8
	VPSRLQ $28, Y8, Y9
	VPAND Y15, Y8, Y8
	VPMULUDQ Y6, Y8, Y10
	VPADDQ Y10, Y0, Y0
	VPMULUDQ Y7, Y9, Y10
	VPADDQ Y10, Y2, Y2
	VPMULUDQ Y6, Y9, Y10
	VPADDQ Y10, Y1, Y1
	VPMULUDQ Y7, Y8, Y10
	VPADDQ Y10, Y1, Y1

	VMOVDQU (DX)(R10*8), Y8
	VPSRLQ $28, Y8, Y9
	VPAND Y15, Y8, Y8
	VPMULUDQ Y6, Y8, Y10
	VPADDQ Y10, Y3, Y3
	VPMULUDQ Y7, Y9, Y10
	VPADDQ Y10, Y5, Y5
	VPMULUDQ Y6, Y9, Y10
	VPADDQ Y10, Y4, Y4
	VPMULUDQ Y7, Y8, Y10
	VPADDQ Y10, Y4, Y4

	ADDQ $24, R12
	DECQ R13
	JNZ tloop

	VMOVDQU Y0, 0(R9)
	VMOVDQU Y1, 32(R9)
	VMOVDQU Y2, 64(R9)
	VMOVDQU Y3, 96(R9)
	VMOVDQU Y4, 128(R9)
	VMOVDQU Y5, 160(R9)
	ADDQ $192, R9
	ADDQ $4, R10
	CMPQ R10, R8
	JLT xloop

	MOVQ R12, SI // the next pass's first term
	SUBQ R15, CX
	JG gloop

done:
	VZEROUPPER
	RET

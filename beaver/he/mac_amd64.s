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
	VMOVQ AX, X15
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

// MAC512_WEIGHT adds the limb sums of a_t·w for the eight weights w at
// (wp)(R10*8) to (l, m, h): a_t's halves in Z6/Z7, the weights' in Z8/Z9,
// the products in Z10, the 28-bit mask in Z15.
#define MAC512_WEIGHT(wp, l, m, h) \
	VMOVDQU64 (wp)(R10*8), Z8; \
	VPSRLQ $28, Z8, Z9; \
	VPANDQ Z15, Z8, Z8; \
	VPMULUDQ Z6, Z8, Z10; \
	VPADDQ Z10, l, l; \
	VPMULUDQ Z7, Z9, Z10; \
	VPADDQ Z10, h, h; \
	VPMULUDQ Z6, Z9, Z10; \
	VPADDQ Z10, m, m; \
	VPMULUDQ Z7, Z8, Z10; \
	VPADDQ Z10, m, m

// MAC512_LOAD and MAC512_STORE move a group's limb sums (48 words at R9)
// into Z0–Z5 and back.
#define MAC512_LOAD \
	VMOVDQU64 0(R9), Z0; \
	VMOVDQU64 64(R9), Z1; \
	VMOVDQU64 128(R9), Z2; \
	VMOVDQU64 192(R9), Z3; \
	VMOVDQU64 256(R9), Z4; \
	VMOVDQU64 320(R9), Z5

#define MAC512_STORE \
	VMOVDQU64 Z0, 0(R9); \
	VMOVDQU64 Z1, 64(R9); \
	VMOVDQU64 Z2, 128(R9); \
	VMOVDQU64 Z3, 192(R9); \
	VMOVDQU64 Z4, 256(R9); \
	VMOVDQU64 Z5, 320(R9)

// macGroup512 is macLimbsAVX512's terms per pass (its sums of a group in
// Z0–Z5 stay in registers over them).
#define macGroup512 4

// func macLimbsAVX512(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)
//
// macLimbsAVX2 on groups of eight slots in 512-bit registers: n is a
// positive multiple of 8, idx constant on each aligned group of eight x,
// and the block of 48 words of x's group holds L0, M0, H0, L1, M1, H1,
// eight lanes each.
TEXT ·macLimbsAVX512(SB), NOSPLIT, $0-40
	MOVQ terms+0(FP), SI
	MOVQ nterms+8(FP), CX
	MOVQ idx+16(FP), DI
	MOVQ n+24(FP), R8
	MOVQ $0xfffffff, AX
	VPBROADCASTQ AX, Z15
	TESTQ CX, CX
	JLE done512

gloop512:
	MOVQ $macGroup512, R15
	CMPQ CX, R15
	CMOVQLT CX, R15
	MOVQ limbs+32(FP), R9
	XORQ R10, R10

xloop512:
	MAC512_LOAD
	MOVWQZX (DI)(R10*2), R11
	MOVQ SI, R12
	MOVQ R15, R13

tloop512:
	MOVQ 0(R12), AX
	MOVQ 8(R12), BX
	MOVQ 16(R12), DX
	VPBROADCASTQ (AX)(R11*8), Z6
	VPSRLQ $28, Z6, Z7
	VPANDQ Z15, Z6, Z6

	MAC512_WEIGHT(BX, Z0, Z1, Z2)
	MAC512_WEIGHT(DX, Z3, Z4, Z5)

	ADDQ $24, R12
	DECQ R13
	JNZ tloop512

	MAC512_STORE
	ADDQ $384, R9
	ADDQ $8, R10
	CMPQ R10, R8
	JLT xloop512

	MOVQ R12, SI
	SUBQ R15, CX
	JG gloop512

done512:
	VZEROUPPER
	RET

// func macLimbsAVX512Pairs(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)
//
// macLimbsAVX512 for packings whose evaluation index is constant only on
// aligned runs of four slots (NW = 4): each group of eight takes a_t at
// idx[x] for its lower four lanes and at idx[x+4] for its upper four (a
// masked broadcast), with the same limb layout.
TEXT ·macLimbsAVX512Pairs(SB), NOSPLIT, $0-40
	MOVQ terms+0(FP), SI
	MOVQ nterms+8(FP), CX
	MOVQ idx+16(FP), DI
	MOVQ n+24(FP), R8
	MOVQ $0xfffffff, AX
	VPBROADCASTQ AX, Z15
	MOVQ $0xf0, AX
	KMOVW AX, K1 // the upper four lanes (KMOVW: AVX-512 F)
	TESTQ CX, CX
	JLE donePairs

gloopPairs:
	MOVQ $macGroup512, R15
	CMPQ CX, R15
	CMOVQLT CX, R15
	MOVQ limbs+32(FP), R9
	XORQ R10, R10

xloopPairs:
	MAC512_LOAD
	MOVWQZX (DI)(R10*2), R11
	MOVWQZX 8(DI)(R10*2), R14 // idx[x+4]
	MOVQ SI, R12
	MOVQ R15, R13

tloopPairs:
	MOVQ 0(R12), AX
	MOVQ 8(R12), BX
	MOVQ 16(R12), DX
	VPBROADCASTQ (AX)(R11*8), Z6
	VPBROADCASTQ (AX)(R14*8), K1, Z6 // the upper half's a_t
	VPSRLQ $28, Z6, Z7
	VPANDQ Z15, Z6, Z6

	MAC512_WEIGHT(BX, Z0, Z1, Z2)
	MAC512_WEIGHT(DX, Z3, Z4, Z5)

	ADDQ $24, R12
	DECQ R13
	JNZ tloopPairs

	MAC512_STORE
	ADDQ $384, R9
	ADDQ $8, R10
	CMPQ R10, R8
	JLT xloopPairs

	MOVQ R12, SI
	SUBQ R15, CX
	JG gloopPairs

donePairs:
	VZEROUPPER
	RET

// func maskBelowAVX512(c *uint64, n int, mask, q uint64) bool
//
// maskAllBelow in AVX-512 for n a multiple of 8: every word of c[:n] is
// ANDed with mask in place, and the result reports whether any masked word
// is ≥ q (VPCMPUQ's not-less-than, the lanes ORed into K1). Four registers
// (32 words) a step, then one register at a time.
TEXT ·maskBelowAVX512(SB), NOSPLIT, $0-33
	MOVQ c+0(FP), DI
	MOVQ n+8(FP), CX
	VPBROADCASTQ mask+16(FP), Z1
	VPBROADCASTQ q+24(FP), Z2
	KXORW K1, K1, K1
mask32:
	CMPQ CX, $32
	JB mask8
	VPANDQ 0(DI), Z1, Z3
	VPANDQ 64(DI), Z1, Z4
	VPANDQ 128(DI), Z1, Z5
	VPANDQ 192(DI), Z1, Z6
	VMOVDQU64 Z3, 0(DI)
	VMOVDQU64 Z4, 64(DI)
	VMOVDQU64 Z5, 128(DI)
	VMOVDQU64 Z6, 192(DI)
	VPCMPUQ $5, Z2, Z3, K2
	VPCMPUQ $5, Z2, Z4, K3
	VPCMPUQ $5, Z2, Z5, K4
	VPCMPUQ $5, Z2, Z6, K5
	KORW K2, K1, K1
	KORW K3, K1, K1
	KORW K4, K1, K1
	KORW K5, K1, K1
	ADDQ $256, DI
	SUBQ $32, CX
	JMP mask32
mask8:
	CMPQ CX, $8
	JB maskDone
	VPANDQ 0(DI), Z1, Z3
	VMOVDQU64 Z3, 0(DI)
	VPCMPUQ $5, Z2, Z3, K2
	KORW K2, K1, K1
	ADDQ $64, DI
	SUBQ $8, CX
	JMP mask8
maskDone:
	KMOVW K1, AX
	TESTW AX, AX
	SETNE ret+32(FP)
	VZEROUPPER
	RET

// func normalizeLimbsAVX512(limbs *uint64, n int, q uint64, qinv float64)
//
// accumulators.normalizeTile's loop for limb groups of eight slots (n
// words, a multiple of 48: L0, M0, H0, L1, M1, H1, eight lanes each): M +=
// L >> 28, H += M >> 28, L and M masked to 28 bits, and H mod q by a
// quotient estimated in double precision: for H < 2^64 and q > 2^53 the
// estimate ⌊H·(1/q)⌋ is off by at most one, so r = H − estimate·q
// (VPMULLQ, mod 2^64) lies in [−q, 2q), and min(r, r + q) then
// min(r, r − q), unsigned, give H mod q exactly.
TEXT ·normalizeLimbsAVX512(SB), NOSPLIT, $0-32
	MOVQ limbs+0(FP), DI
	MOVQ n+8(FP), CX
	VPBROADCASTQ q+16(FP), Z13
	VBROADCASTSD qinv+24(FP), Z14
	MOVQ $0xfffffff, AX
	VPBROADCASTQ AX, Z15

normLoop:
	CMPQ CX, $48
	JB normDone
	VMOVDQU64 0(DI), Z0
	VMOVDQU64 64(DI), Z1
	VMOVDQU64 128(DI), Z2
	VMOVDQU64 192(DI), Z6
	VMOVDQU64 256(DI), Z7
	VMOVDQU64 320(DI), Z8

	VPSRLQ $28, Z0, Z3
	VPADDQ Z3, Z1, Z1
	VPSRLQ $28, Z6, Z9
	VPADDQ Z9, Z7, Z7
	VPSRLQ $28, Z1, Z3
	VPADDQ Z3, Z2, Z2
	VPSRLQ $28, Z7, Z9
	VPADDQ Z9, Z8, Z8
	VPANDQ Z15, Z0, Z0
	VPANDQ Z15, Z1, Z1
	VPANDQ Z15, Z6, Z6
	VPANDQ Z15, Z7, Z7

	VCVTUQQ2PD Z2, Z4
	VCVTUQQ2PD Z8, Z10
	VMULPD Z14, Z4, Z4
	VMULPD Z14, Z10, Z10
	VCVTTPD2UQQ Z4, Z4
	VCVTTPD2UQQ Z10, Z10
	VPMULLQ Z13, Z4, Z4
	VPMULLQ Z13, Z10, Z10
	VPSUBQ Z4, Z2, Z2
	VPSUBQ Z10, Z8, Z8
	VPADDQ Z13, Z2, Z5
	VPADDQ Z13, Z8, Z11
	VPMINUQ Z5, Z2, Z2
	VPMINUQ Z11, Z8, Z8
	VPSUBQ Z13, Z2, Z5
	VPSUBQ Z13, Z8, Z11
	VPMINUQ Z5, Z2, Z2
	VPMINUQ Z11, Z8, Z8

	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z6, 192(DI)
	VMOVDQU64 Z7, 256(DI)
	VMOVDQU64 Z8, 320(DI)
	ADDQ $384, DI
	SUBQ $48, CX
	JMP normLoop

normDone:
	VZEROUPPER
	RET

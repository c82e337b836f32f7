//go:build !purego

#include "textflag.h"

// func encryptBlocksAESNI(rk *[176]byte, dst, src *Block, n int)
//
// AES-128 encryption of n blocks (ECB) with AES-NI: eight blocks in X0–X7
// go through each round together so the AESENC latency is hidden; X8
// holds the current round key. The tail is done one block at a time.
TEXT ·encryptBlocksAESNI(SB), NOSPLIT, $0-32
	MOVQ rk+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
loop8:
	CMPQ CX, $8
	JB tail
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVOU 64(SI), X4
	MOVOU 80(SI), X5
	MOVOU 96(SI), X6
	MOVOU 112(SI), X7
	MOVOU 0(AX), X8
	PXOR X8, X0
	PXOR X8, X1
	PXOR X8, X2
	PXOR X8, X3
	PXOR X8, X4
	PXOR X8, X5
	PXOR X8, X6
	PXOR X8, X7
	MOVOU 16(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 32(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 48(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 64(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 80(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 96(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 112(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 128(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 144(AX), X8
	AESENC X8, X0
	AESENC X8, X1
	AESENC X8, X2
	AESENC X8, X3
	AESENC X8, X4
	AESENC X8, X5
	AESENC X8, X6
	AESENC X8, X7
	MOVOU 160(AX), X8
	AESENCLAST X8, X0
	AESENCLAST X8, X1
	AESENCLAST X8, X2
	AESENCLAST X8, X3
	AESENCLAST X8, X4
	AESENCLAST X8, X5
	AESENCLAST X8, X6
	AESENCLAST X8, X7
	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	MOVOU X4, 64(DI)
	MOVOU X5, 80(DI)
	MOVOU X6, 96(DI)
	MOVOU X7, 112(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $8, CX
	JMP loop8
tail:
	TESTQ CX, CX
	JZ done
	MOVOU 0(SI), X0
	MOVOU 0(AX), X8
	PXOR X8, X0
	MOVOU 16(AX), X8
	AESENC X8, X0
	MOVOU 32(AX), X8
	AESENC X8, X0
	MOVOU 48(AX), X8
	AESENC X8, X0
	MOVOU 64(AX), X8
	AESENC X8, X0
	MOVOU 80(AX), X8
	AESENC X8, X0
	MOVOU 96(AX), X8
	AESENC X8, X0
	MOVOU 112(AX), X8
	AESENC X8, X0
	MOVOU 128(AX), X8
	AESENC X8, X0
	MOVOU 144(AX), X8
	AESENC X8, X0
	MOVOU 160(AX), X8
	AESENCLAST X8, X0
	MOVOU X0, 0(DI)
	ADDQ $16, SI
	ADDQ $16, DI
	DECQ CX
	JMP tail
done:
	RET

// LOADKEYS512 broadcasts the eleven round keys at AX to four lanes each,
// in Z16–Z26.
#define LOADKEYS512 \
	VBROADCASTI32X4 0(AX), Z16; \
	VBROADCASTI32X4 16(AX), Z17; \
	VBROADCASTI32X4 32(AX), Z18; \
	VBROADCASTI32X4 48(AX), Z19; \
	VBROADCASTI32X4 64(AX), Z20; \
	VBROADCASTI32X4 80(AX), Z21; \
	VBROADCASTI32X4 96(AX), Z22; \
	VBROADCASTI32X4 112(AX), Z23; \
	VBROADCASTI32X4 128(AX), Z24; \
	VBROADCASTI32X4 144(AX), Z25; \
	VBROADCASTI32X4 160(AX), Z26

// ROUND8 applies one AES round with key k to Z0–Z7.
#define ROUND8(k) \
	VAESENC k, Z0, Z0; \
	VAESENC k, Z1, Z1; \
	VAESENC k, Z2, Z2; \
	VAESENC k, Z3, Z3; \
	VAESENC k, Z4, Z4; \
	VAESENC k, Z5, Z5; \
	VAESENC k, Z6, Z6; \
	VAESENC k, Z7, Z7

// XOR8(a, b…) xors Z0–Z7 with one register each.
#define XOR8(a0, a1, a2, a3, a4, a5, a6, a7) \
	VPXORQ a0, Z0, Z0; \
	VPXORQ a1, Z1, Z1; \
	VPXORQ a2, Z2, Z2; \
	VPXORQ a3, Z3, Z3; \
	VPXORQ a4, Z4, Z4; \
	VPXORQ a5, Z5, Z5; \
	VPXORQ a6, Z6, Z6; \
	VPXORQ a7, Z7, Z7

// AES8 encrypts Z0–Z7 under the round keys in Z16–Z26.
#define AES8 \
	XOR8(Z16, Z16, Z16, Z16, Z16, Z16, Z16, Z16); \
	ROUND8(Z17); \
	ROUND8(Z18); \
	ROUND8(Z19); \
	ROUND8(Z20); \
	ROUND8(Z21); \
	ROUND8(Z22); \
	ROUND8(Z23); \
	ROUND8(Z24); \
	ROUND8(Z25); \
	VAESENCLAST Z26, Z0, Z0; \
	VAESENCLAST Z26, Z1, Z1; \
	VAESENCLAST Z26, Z2, Z2; \
	VAESENCLAST Z26, Z3, Z3; \
	VAESENCLAST Z26, Z4, Z4; \
	VAESENCLAST Z26, Z5, Z5; \
	VAESENCLAST Z26, Z6, Z6; \
	VAESENCLAST Z26, Z7, Z7

// func encryptBlocksVAES512(rk *[176]byte, dst, src *Block, n int)
//
// AES-128 encryption of n blocks (ECB, n a positive multiple of 32) with
// 512-bit VAES: eight registers of four blocks (Z0–Z7) go through each
// round together; the eleven round keys, each broadcast to four lanes,
// stay in Z16–Z26.
TEXT ·encryptBlocksVAES512(SB), NOSPLIT, $0-32
	MOVQ rk+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	LOADKEYS512
loop32:
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVDQU64 256(SI), Z4
	VMOVDQU64 320(SI), Z5
	VMOVDQU64 384(SI), Z6
	VMOVDQU64 448(SI), Z7
	AES8
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	VMOVDQU64 Z4, 256(DI)
	VMOVDQU64 Z5, 320(DI)
	VMOVDQU64 Z6, 384(DI)
	VMOVDQU64 Z7, 448(DI)
	ADDQ $512, SI
	ADDQ $512, DI
	SUBQ $32, CX
	JNZ loop32
	VZEROUPPER
	RET

// Lane constants of hashRowsVAES512: the OT indices of a register's four
// lanes (low words; high words 0), the step between registers, and the
// positions of eight low words in two registers.
DATA hashLaneInc<>+0(SB)/8, $0
DATA hashLaneInc<>+8(SB)/8, $0
DATA hashLaneInc<>+16(SB)/8, $1
DATA hashLaneInc<>+24(SB)/8, $0
DATA hashLaneInc<>+32(SB)/8, $2
DATA hashLaneInc<>+40(SB)/8, $0
DATA hashLaneInc<>+48(SB)/8, $3
DATA hashLaneInc<>+56(SB)/8, $0
GLOBL hashLaneInc<>(SB), RODATA|NOPTR, $64

DATA hashStep<>+0(SB)/8, $4
DATA hashStep<>+8(SB)/8, $0
DATA hashStep<>+16(SB)/8, $4
DATA hashStep<>+24(SB)/8, $0
DATA hashStep<>+32(SB)/8, $4
DATA hashStep<>+40(SB)/8, $0
DATA hashStep<>+48(SB)/8, $4
DATA hashStep<>+56(SB)/8, $0
GLOBL hashStep<>(SB), RODATA|NOPTR, $64

DATA hashLoIdx<>+0(SB)/8, $0
DATA hashLoIdx<>+8(SB)/8, $2
DATA hashLoIdx<>+16(SB)/8, $4
DATA hashLoIdx<>+24(SB)/8, $6
DATA hashLoIdx<>+32(SB)/8, $8
DATA hashLoIdx<>+40(SB)/8, $10
DATA hashLoIdx<>+48(SB)/8, $12
DATA hashLoIdx<>+56(SB)/8, $14
GLOBL hashLoIdx<>(SB), RODATA|NOPTR, $64

// TWEAK xors into Zi the tweaks {j, hi} of its four rows, from Z28 (the
// first register's) by steps of Z29, and leaves Z28 at the next group's.
#define TWEAK \
	VPXORQ Z28, Z0, Z0; \
	VPADDQ Z29, Z28, Z30; \
	VPXORQ Z30, Z1, Z1; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z2, Z2; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z3, Z3; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z4, Z4; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z5, Z5; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z6, Z6; \
	VPADDQ Z29, Z30, Z30; \
	VPXORQ Z30, Z7, Z7; \
	VPADDQ Z29, Z30, Z28

// func hashRowsVAES512(rk *[176]byte, out *uint64, rows *Block, n int, off *Block, j0, hi uint64, w int)
//
// hasher.hashPass for w = 1 or 2 (one block of hash a row) in 512-bit
// VAES, n a positive multiple of 32: for row k, y = π(rows[k] ⊕ off),
// z = π(y ⊕ {j0+k, hi}) ⊕ y, and out gets z's low word (w = 1) or both
// (w = 2). Thirty-two rows a pass, four a register (Z0–Z7), their y kept
// in Z8–Z15; the round keys in Z16–Z26, off in Z27, the tweaks in
// Z28–Z30, the low words' positions in Z31.
TEXT ·hashRowsVAES512(SB), NOSPLIT, $0-64
	MOVQ rk+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ rows+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ off+32(FP), DX
	MOVQ j0+40(FP), R8
	MOVQ hi+48(FP), R9
	MOVQ w+56(FP), R10
	LOADKEYS512
	VBROADCASTI32X4 0(DX), Z27
	VPBROADCASTQ R8, Z28
	VPBROADCASTQ R9, Z30
	VPUNPCKLQDQ Z30, Z28, Z28
	VMOVDQU64 hashLaneInc<>(SB), Z29
	VPADDQ Z29, Z28, Z28
	VMOVDQU64 hashStep<>(SB), Z29
	VMOVDQU64 hashLoIdx<>(SB), Z31

loop32:
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVDQU64 256(SI), Z4
	VMOVDQU64 320(SI), Z5
	VMOVDQU64 384(SI), Z6
	VMOVDQU64 448(SI), Z7
	XOR8(Z27, Z27, Z27, Z27, Z27, Z27, Z27, Z27)
	AES8
	VMOVDQA64 Z0, Z8
	VMOVDQA64 Z1, Z9
	VMOVDQA64 Z2, Z10
	VMOVDQA64 Z3, Z11
	VMOVDQA64 Z4, Z12
	VMOVDQA64 Z5, Z13
	VMOVDQA64 Z6, Z14
	VMOVDQA64 Z7, Z15
	TWEAK
	AES8
	XOR8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	CMPQ R10, $1
	JEQ low32
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	VMOVDQU64 Z4, 256(DI)
	VMOVDQU64 Z5, 320(DI)
	VMOVDQU64 Z6, 384(DI)
	VMOVDQU64 Z7, 448(DI)
	ADDQ $512, DI
	JMP next32

low32:
	VPERMT2Q Z1, Z31, Z0
	VPERMT2Q Z3, Z31, Z2
	VPERMT2Q Z5, Z31, Z4
	VPERMT2Q Z7, Z31, Z6
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z2, 64(DI)
	VMOVDQU64 Z4, 128(DI)
	VMOVDQU64 Z6, 192(DI)
	ADDQ $256, DI

next32:
	ADDQ $512, SI
	SUBQ $32, CX
	JNZ loop32
	VZEROUPPER
	RET

// Lane offsets of hashWideVAES512's tweaks: block b+l of a row in lane l
// (high words).
DATA hashBlockInc<>+0(SB)/8, $0
DATA hashBlockInc<>+8(SB)/8, $0
DATA hashBlockInc<>+16(SB)/8, $0
DATA hashBlockInc<>+24(SB)/8, $1
DATA hashBlockInc<>+32(SB)/8, $0
DATA hashBlockInc<>+40(SB)/8, $2
DATA hashBlockInc<>+48(SB)/8, $0
DATA hashBlockInc<>+56(SB)/8, $3
GLOBL hashBlockInc<>(SB), RODATA|NOPTR, $64

// WIDE(i, zi, yi) loads group i's y into yi and its tweaks, y ⊕ tweak,
// into zi.
#define WIDE(i, zi, yi) \
	VBROADCASTI32X4 (16*i)(SI), yi; \
	VBROADCASTI32X4 (16*i)(DX), zi; \
	VPADDQ Z29, zi, zi; \
	VPXORQ yi, zi, zi

// func hashWideVAES512(rk *[176]byte, out *uint64, ys, tweaks *Block, m int)
//
// The second pass of hasher.hashPass for rows of w = 8·c words (c groups
// of four hash blocks a row) in 512-bit VAES, m a positive multiple of 8
// groups: group g holds blocks b..b+3 of one row, whose first pass y is
// ys[g] and first tweak {j, gen‖b} tweaks[g]; lane l gets
// π(y ⊕ {j, gen‖(b+l)}) ⊕ y, and the groups' 64 bytes follow one another
// in out (row k's w words at out[k·w]). Eight groups a pass (Z0–Z7), their
// y in Z8–Z15, the round keys in Z16–Z26, the lane offsets in Z29.
TEXT ·hashWideVAES512(SB), NOSPLIT, $0-40
	MOVQ rk+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ ys+16(FP), SI
	MOVQ tweaks+24(FP), DX
	MOVQ m+32(FP), CX
	LOADKEYS512
	VMOVDQU64 hashBlockInc<>(SB), Z29

loop8:
	WIDE(0, Z0, Z8)
	WIDE(1, Z1, Z9)
	WIDE(2, Z2, Z10)
	WIDE(3, Z3, Z11)
	WIDE(4, Z4, Z12)
	WIDE(5, Z5, Z13)
	WIDE(6, Z6, Z14)
	WIDE(7, Z7, Z15)
	AES8
	XOR8(Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	VMOVDQU64 Z4, 256(DI)
	VMOVDQU64 Z5, 320(DI)
	VMOVDQU64 Z6, 384(DI)
	VMOVDQU64 Z7, 448(DI)
	ADDQ $128, SI
	ADDQ $128, DX
	ADDQ $512, DI
	SUBQ $8, CX
	JNZ loop8
	VZEROUPPER
	RET

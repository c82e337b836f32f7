//go:build !purego

#include "textflag.h"

// func gemmMicro4x4ARM64(kc int, a *uint64, b *uint64, c *uint64, ldc int, add int)
//
// c[4×4] = a·b (add == 0) or c[4×4] += a·b (add != 0) over Z_2^64 with
// scalar 64-bit multiply-adds: MADD keeps the low 64 bits of a·b + c,
// which is the ring's product and sum. a is kc groups of 4 words (one A
// column), b kc groups of 4 words (one B row); kc ≥ 1. R1–R16 hold the
// tile (row i in R(4i+1)–R(4i+4)), R22–R25 the B row, R20/R21 two A words
// at a time; per k step, four LDPs and sixteen MADDs, nothing spilled.
TEXT ·gemmMicro4x4ARM64(SB), NOSPLIT|NOFRAME, $0-48
	MOVD kc+0(FP), R0
	MOVD a+8(FP), R17
	MOVD b+16(FP), R19
	MOVD ZR, R1
	MOVD ZR, R2
	MOVD ZR, R3
	MOVD ZR, R4
	MOVD ZR, R5
	MOVD ZR, R6
	MOVD ZR, R7
	MOVD ZR, R8
	MOVD ZR, R9
	MOVD ZR, R10
	MOVD ZR, R11
	MOVD ZR, R12
	MOVD ZR, R13
	MOVD ZR, R14
	MOVD ZR, R15
	MOVD ZR, R16
loop:
	LDP.P 16(R19), (R22, R23)
	LDP.P 16(R19), (R24, R25)
	LDP.P 16(R17), (R20, R21)
	MADD R22, R1, R20, R1
	MADD R23, R2, R20, R2
	MADD R24, R3, R20, R3
	MADD R25, R4, R20, R4
	MADD R22, R5, R21, R5
	MADD R23, R6, R21, R6
	MADD R24, R7, R21, R7
	MADD R25, R8, R21, R8
	LDP.P 16(R17), (R20, R21)
	MADD R22, R9, R20, R9
	MADD R23, R10, R20, R10
	MADD R24, R11, R20, R11
	MADD R25, R12, R20, R12
	MADD R22, R13, R21, R13
	MADD R23, R14, R21, R14
	MADD R24, R15, R21, R15
	MADD R25, R16, R21, R16
	SUBS $1, R0, R0
	BNE loop
	MOVD c+24(FP), R26
	MOVD ldc+32(FP), R17
	LSL $3, R17, R17
	MOVD add+40(FP), R19
	CBZ R19, store
	LDP (R26), (R20, R21)
	LDP 16(R26), (R22, R23)
	ADD R20, R1, R1
	ADD R21, R2, R2
	ADD R22, R3, R3
	ADD R23, R4, R4
	STP (R1, R2), (R26)
	STP (R3, R4), 16(R26)
	ADD R17, R26, R26
	LDP (R26), (R20, R21)
	LDP 16(R26), (R22, R23)
	ADD R20, R5, R5
	ADD R21, R6, R6
	ADD R22, R7, R7
	ADD R23, R8, R8
	STP (R5, R6), (R26)
	STP (R7, R8), 16(R26)
	ADD R17, R26, R26
	LDP (R26), (R20, R21)
	LDP 16(R26), (R22, R23)
	ADD R20, R9, R9
	ADD R21, R10, R10
	ADD R22, R11, R11
	ADD R23, R12, R12
	STP (R9, R10), (R26)
	STP (R11, R12), 16(R26)
	ADD R17, R26, R26
	LDP (R26), (R20, R21)
	LDP 16(R26), (R22, R23)
	ADD R20, R13, R13
	ADD R21, R14, R14
	ADD R22, R15, R15
	ADD R23, R16, R16
	STP (R13, R14), (R26)
	STP (R15, R16), 16(R26)
	RET
store:
	STP (R1, R2), (R26)
	STP (R3, R4), 16(R26)
	ADD R17, R26, R26
	STP (R5, R6), (R26)
	STP (R7, R8), 16(R26)
	ADD R17, R26, R26
	STP (R9, R10), (R26)
	STP (R11, R12), 16(R26)
	ADD R17, R26, R26
	STP (R13, R14), (R26)
	STP (R15, R16), 16(R26)
	RET

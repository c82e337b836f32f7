//go:build !purego

#include "textflag.h"

// The LPN encoding of ferret_lpn.go; lpnCode.rows and lpnCode.encodeRange
// are the portable forms these must agree with (TestLPNAsmAgree).

// func lpnRowsAVX512(idx *uint32, ks *byte, cols int, k uint64, dup *uint64)
//
// One column a step: its ten key-stream words in the low lanes of Z0 (K1 =
// 0x3ff), the products with k of the even and the odd dwords by two
// VPMULUDQ, their high halves blended (K2 = 0xaaaa) into the rows, stored
// under K1; VPCONFLICTD under K1 is zero exactly when the ten rows are
// distinct, else the column's bit of dup is set.
TEXT ·lpnRowsAVX512(SB), NOSPLIT, $0-40
	MOVQ idx+0(FP), DI
	MOVQ ks+8(FP), SI
	MOVQ cols+16(FP), CX
	MOVQ k+24(FP), AX
	MOVQ dup+32(FP), DX
	VPBROADCASTQ AX, Z31
	MOVL $0x3ff, R8
	KMOVW R8, K1
	MOVL $0xaaaa, R8
	KMOVW R8, K2
	XORQ BX, BX
rows:
	CMPQ BX, CX
	JAE rowsDone
	VMOVDQU32.Z (SI), K1, Z0
	VPMULUDQ Z31, Z0, Z1
	VPSRLQ $32, Z0, Z2
	VPMULUDQ Z31, Z2, Z2
	VPSRLQ $32, Z1, Z1
	VPBLENDMD Z2, Z1, K2, Z3
	VMOVDQU32 Z3, K1, (DI)
	VPCONFLICTD.Z Z3, K1, Z4
	VPTESTMD Z4, Z4, K3
	KORTESTW K3, K3
	JZ rowsNext
	MOVQ BX, R9
	SHRQ $6, R9
	MOVQ (DX)(R9*8), R10
	BTSQ BX, R10
	MOVQ R10, (DX)(R9*8)
rowsNext:
	ADDQ $40, SI
	ADDQ $40, DI
	INCQ BX
	JMP rows
rowsDone:
	VZEROUPPER
	RET

// ROW xors into X0 the base block (BX) of the row at off(SI).
#define ROW(off) \
	MOVL off(SI), R8; \
	SHLQ $4, R8; \
	VPXOR (BX)(R8*1), X0, X0

// ROWBIT is ROW that also adds the row's bit of the packed choices (DX) to
// R11: BTQ sets the carry to it, ADCL counts it.
#define ROWBIT(off) \
	MOVL off(SI), R8; \
	MOVQ R8, R9; \
	SHRQ $6, R9; \
	MOVQ (DX)(R9*8), R10; \
	BTQ R8, R10; \
	ADCL $0, R11; \
	SHLQ $4, R8; \
	VPXOR (BX)(R8*1), X0, X0

// func lpnGatherAsm(z, base *Block, idx *uint32, cols int)
//
// z[c] ^= base[idx[10c]] ^ … ^ base[idx[10c+9]]: ten loads a column, each
// row scaled by 16 and XORed from memory (VEX, so no alignment needed).
TEXT ·lpnGatherAsm(SB), NOSPLIT, $0-32
	MOVQ z+0(FP), DI
	MOVQ base+8(FP), BX
	MOVQ idx+16(FP), SI
	MOVQ cols+24(FP), CX
	TESTQ CX, CX
	JZ gatherDone
gather:
	VMOVDQU (DI), X0
	ROW(0)
	ROW(4)
	ROW(8)
	ROW(12)
	ROW(16)
	ROW(20)
	ROW(24)
	ROW(28)
	ROW(32)
	ROW(36)
	VMOVDQU X0, (DI)
	ADDQ $16, DI
	ADDQ $40, SI
	DECQ CX
	JNZ gather
gatherDone:
	RET

// func lpnGatherBitsAsm(z, base *Block, idx *uint32, cols int, u, bits *uint64)
//
// lpnGatherAsm, and the parity of the ten rows' bits of u: each bit tested
// by BTQ into the carry and counted by ADCL in R11. R12 gathers 64
// columns' parities (shifted in from the top), XORed into bits a word at
// a time; R13 counts the columns of the word.
TEXT ·lpnGatherBitsAsm(SB), NOSPLIT, $0-48
	MOVQ z+0(FP), DI
	MOVQ base+8(FP), BX
	MOVQ idx+16(FP), SI
	MOVQ cols+24(FP), CX
	MOVQ u+32(FP), DX
	MOVQ bits+40(FP), AX
	TESTQ CX, CX
	JZ bitsDone
	XORQ R12, R12
	XORQ R13, R13
bitsLoop:
	VMOVDQU (DI), X0
	XORL R11, R11
	ROWBIT(0)
	ROWBIT(4)
	ROWBIT(8)
	ROWBIT(12)
	ROWBIT(16)
	ROWBIT(20)
	ROWBIT(24)
	ROWBIT(28)
	ROWBIT(32)
	ROWBIT(36)
	VMOVDQU X0, (DI)
	SHRQ $1, R12
	SHLQ $63, R11
	ORQ R11, R12
	INCQ R13
	CMPQ R13, $64
	JNE bitsNext
	XORQ R12, (AX)
	ADDQ $8, AX
	XORQ R12, R12
	XORQ R13, R13
bitsNext:
	ADDQ $16, DI
	ADDQ $40, SI
	DECQ CX
	JNZ bitsLoop
	TESTQ R13, R13
	JZ bitsDone
	MOVQ $64, CX
	SUBQ R13, CX
	SHRQ CX, R12
	XORQ R12, (AX)
bitsDone:
	RET

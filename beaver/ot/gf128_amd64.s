//go:build !purego

#include "textflag.h"

// func clmulAccumAsm(s *gfSum, a, b *Block, n int)
//
// Adds Σ a[i]·b[i] to s = (lo, mid, hi), unreduced: for each pair the four
// 64×64 carry-less products a.Lo·b.Lo (into lo, X0), a.Lo·b.Hi and
// a.Hi·b.Lo (into mid, X1), a.Hi·b.Hi (into hi, X2). Two pairs a loop so
// that eight independent PCLMULQDQ hide each other's latency.
TEXT ·clmulAccumAsm(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	MOVOU 0(DI), X0
	MOVOU 16(DI), X1
	MOVOU 32(DI), X2
loop2:
	CMPQ CX, $2
	JB tail
	MOVOU 0(SI), X3
	MOVOU 0(DX), X4
	MOVOU 16(SI), X8
	MOVOU 16(DX), X9
	MOVOU X3, X5
	MOVOU X3, X6
	MOVOU X3, X7
	MOVOU X8, X10
	MOVOU X8, X11
	MOVOU X8, X12
	PCLMULQDQ $0x00, X4, X5
	PCLMULQDQ $0x11, X4, X6
	PCLMULQDQ $0x01, X4, X7
	PCLMULQDQ $0x10, X4, X3
	PCLMULQDQ $0x00, X9, X10
	PCLMULQDQ $0x11, X9, X11
	PCLMULQDQ $0x01, X9, X12
	PCLMULQDQ $0x10, X9, X8
	PXOR X5, X0
	PXOR X6, X2
	PXOR X7, X1
	PXOR X3, X1
	PXOR X10, X0
	PXOR X11, X2
	PXOR X12, X1
	PXOR X8, X1
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $2, CX
	JMP loop2
tail:
	TESTQ CX, CX
	JZ done
	MOVOU 0(SI), X3
	MOVOU 0(DX), X4
	MOVOU X3, X5
	MOVOU X3, X6
	MOVOU X3, X7
	PCLMULQDQ $0x00, X4, X5
	PCLMULQDQ $0x11, X4, X6
	PCLMULQDQ $0x01, X4, X7
	PCLMULQDQ $0x10, X4, X3
	PXOR X5, X0
	PXOR X6, X2
	PXOR X7, X1
	PXOR X3, X1
done:
	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	RET

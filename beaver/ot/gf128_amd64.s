//go:build !purego

#include "textflag.h"

// func clmulAccumAsm(s *gfSum, a, b *Block, n int)
//
// Adds Σ a[i]·b[i] to s = (lo, mid, hi), unreduced, by Karatsuba: per pair
// three 64×64 carry-less products, a.Lo·b.Lo (summed in X0), a.Hi·b.Hi
// (X2) and (a.Lo⊕a.Hi)·(b.Lo⊕b.Hi) (X1); at the end mid gets
// X1 ⊕ X0 ⊕ X2 = Σ (a.Lo·b.Hi ⊕ a.Hi·b.Lo). Two pairs a loop, so that six
// independent PCLMULQDQ hide each other's latency.
TEXT ·clmulAccumAsm(SB), NOSPLIT, $0-32
	MOVQ s+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	PXOR X0, X0
	PXOR X1, X1
	PXOR X2, X2
loop2:
	CMPQ CX, $2
	JB tail
	MOVOU 0(SI), X3
	MOVOU 0(DX), X4
	MOVOU 16(SI), X8
	MOVOU 16(DX), X9
	PSHUFD $0x4E, X3, X5 // the words swapped: X5.lo = a.Hi
	PSHUFD $0x4E, X4, X6
	PSHUFD $0x4E, X8, X10
	PSHUFD $0x4E, X9, X11
	PXOR X3, X5          // X5.lo = a.Lo ⊕ a.Hi
	PXOR X4, X6
	PXOR X8, X10
	PXOR X9, X11
	MOVOU X3, X7
	MOVOU X8, X12
	PCLMULQDQ $0x00, X4, X3  // a.Lo·b.Lo
	PCLMULQDQ $0x11, X4, X7  // a.Hi·b.Hi
	PCLMULQDQ $0x00, X6, X5  // Karatsuba middle
	PCLMULQDQ $0x00, X9, X8
	PCLMULQDQ $0x11, X9, X12
	PCLMULQDQ $0x00, X11, X10
	PXOR X3, X0
	PXOR X7, X2
	PXOR X5, X1
	PXOR X8, X0
	PXOR X12, X2
	PXOR X10, X1
	ADDQ $32, SI
	ADDQ $32, DX
	SUBQ $2, CX
	JMP loop2
tail:
	TESTQ CX, CX
	JZ done
	MOVOU 0(SI), X3
	MOVOU 0(DX), X4
	PSHUFD $0x4E, X3, X5
	PSHUFD $0x4E, X4, X6
	PXOR X3, X5
	PXOR X4, X6
	MOVOU X3, X7
	PCLMULQDQ $0x00, X4, X3
	PCLMULQDQ $0x11, X4, X7
	PCLMULQDQ $0x00, X6, X5
	PXOR X3, X0
	PXOR X7, X2
	PXOR X5, X1
done:
	PXOR X0, X1 // mid = K ⊕ lo ⊕ hi
	PXOR X2, X1
	MOVOU 0(DI), X3
	MOVOU 16(DI), X4
	MOVOU 32(DI), X5
	PXOR X3, X0
	PXOR X4, X1
	PXOR X5, X2
	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	RET

// Package share is the arithmetic core of selectformer's two-party computation:
// the ring Z_2^64, fixed-point encoding of reals into it, the Tensor type that
// carries shares, the local ring operations (including the ring GEMM every
// matrix-product protocol uses), a fast seeded pseudo-random generator, and
// additive secret sharing x = x0 + x1 (mod 2^64).
//
// Ring arithmetic is plain uint64 arithmetic: Go's wrap-around on overflow is
// exactly the reduction modulo 2^64, so addition, subtraction, negation and
// multiplication of ring elements are the machine instructions themselves.
// Signed quantities use two's complement: a ring word w stands for the integer
// int64(w), and a fixed-point value v with f fractional bits is the ring word
// of round(v·2^f).
//
// The ring GEMM (MatMulInto, MatMulTransBInto, BatchMatMulInto, MatMul)
// packs panels of its operands and runs a register-blocked micro-kernel on
// every core. On amd64 CPUs with AVX-512 F and DQ the micro-kernel is
// assembly (VPMULLQ, eight 64-bit lanes per instruction), chosen at run time;
// elsewhere, and under the purego build tag, it is portable Go. Both give
// bit-identical results. A right-hand operand used many times (weights) can be
// packed once with PackMatrix and multiplied with MatMulPackedInto.
//
// Nothing in this package talks to a network or knows about parties beyond the
// index (0 or 1) used to decide which party adds a public constant.
package share

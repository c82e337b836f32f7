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
// every core. The micro-kernel is chosen once, at start-up, by CPU
// (RingKernel names it):
//
//   - avx512-vpmullq (AVX-512 F+DQ): VPMULLQ, eight 64-bit lane products
//     per instruction, an 8×16 tile. The choice on AMD (Zen 4, Zen 5), where
//     VPMULLQ is one µop, and on Intel CPUs without IFMA.
//   - avx512-ifma (AVX-512 IFMA): 52-bit multiply-adds, VPMADD52LUQ and
//     VPMADD52HUQ, three per eight products and no separate adds, a 4×16
//     tile; the panels carry a second word per element (the low and top 12
//     bits, for the cross term). The choice on Intel, where VPMULLQ is three
//     µops (plus the add: four per eight products).
//   - avx512-vpmuludq (AVX-512 F): 32-bit limbs, three VPMULUDQ and three
//     VPADDQ per eight products with the cross terms shifted once per tile,
//     a 4×16 tile. Never chosen automatically (six µops per eight products,
//     more than either of the others); kept for CPUs whose VPMULLQ and IFMA
//     are slow, and as a check.
//   - avx2-vpmulld (AVX2): for x86 CPUs without AVX-512 (Zen 2 and 3, most
//     Intel client cores, cloud VMs that hide AVX-512). a·b mod 2^64 =
//     a0·b0 + 2^32·(a0·b1 + a1·b0) with 32-bit halves: VPMULUDQ gives a0·b0,
//     and one VPMULLD of a broadcast A word by the B words with their halves
//     swapped (one VPSHUFD per B row) gives both cross products (mod 2^32,
//     summed in the two halves of the lane and folded once per tile): two
//     multiplies and two adds per four products, a 3×8 tile. With few rows
//     of A it reads B in place instead of packing it.
//   - arm64-madd (arm64): scalar MADD, one per product, a 4×4 tile in
//     registers (Go assembly; its tests run under qemu-user on amd64).
//   - generic: portable Go, on every other CPU and under the purego build
//     tag.
//
// The environment variable SELECTFORMER_RING_KERNEL (RingKernelEnv) forces
// one by name, so that every kernel can be tested and timed on any CPU that
// runs it; GODEBUG=cpu.avx512f=off hides AVX-512 from the choice (and from
// AESCTR), as on a host without it. A name that is unknown or that the CPU
// cannot run is logged and makes the cpu GEMM backend return the error. All
// kernels give bit-identical results. A right-hand operand used many times (weights) can be packed once
// with PackMatrix and multiplied with MatMulPackedInto.
//
// The protocols' whole products go through a GEMM backend (GEMM, GEMMBackend,
// WeightMatrix), chosen at run time: SetGEMM, else the SELECTFORMER_GEMM
// environment variable (cpu, cuda, limb-gonum), else cuda when it is compiled
// in (build tag cuda) and a device opens, else cpu. The non-CPU backends use
// the exact limb method (limb.go): 16-bit limbs multiplied by float64 GEMMs
// whose every partial sum is an exact integer, recombined modulo 2^64, so all
// backends give bit-identical results.
//
// Bit vectors packed 64 to a word (the binary protocols' XOR shares, the
// oblivious-transfer choices) share the helpers of bits.go: PackedWords,
// MaskTail and the 64×64 bit transpose Transpose64; BoundedProduct checks the
// sizes of a correlation request.
//
// Nothing in this package talks to a network or knows about parties beyond the
// index (0 or 1) used to decide which party adds a public constant.
//
// # References
//
//   - Additive sharing over Z_2^64 with fixed-point reals encoded as ring
//     words, as in SecureML (P. Mohassel, Y. Zhang, "SecureML: A System for
//     Scalable Privacy-Preserving Machine Learning", IEEE S&P 2017) and
//     CrypTen (B. Knott, S. Venkataraman, A. Hannun, S. Sengupta, M. Ibrahim,
//     L. van der Maaten, "CrypTen: Secure Multi-Party Computation Meets
//     Machine Learning", NeurIPS 2021); the products of shares use Beaver
//     triples (D. Beaver, "Efficient Multiparty Protocols Using Circuit
//     Randomization", CRYPTO '91), see packages beaver and protocol.
//   - X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and Practical Data
//     Selection for Transformers", arXiv:2310.02373 (2023), ICLR 2025; design
//     notes in DESIGN.md at the module root.
package share

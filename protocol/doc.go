// Package protocol holds selectformer's online two-party protocols on
// additively shared tensors: input sharing and reveal, linear operations,
// multiplication and matrix products (including products with the model
// owner's clear weights by the weight-mask trick), truncation, comparison and
// the nonlinear functions built on them.
//
// Every protocol runs on whole tensors: one call is a fixed number of
// exchanges of ring words on the session's stream, whatever the tensor's size.
// A Session's tensors hold this party's share; the secret is the sum of the
// two parties' tensors modulo 2^64. Correlated randomness comes from the
// session's beaver.Provider, drawn under the session's stream id (StreamID).
//
// # Costs
//
// Costs are per party, online only (dealer traffic is counted apart, see
// beaver.DealerStats), for n elements. A message of w ring words costs
// msg(w) = 8w + 10 bytes on the wire while 8w ≤ 1 MiB
// (transport.DefaultMaxFrame), and 8w + 8 + 10·⌈(8w+8)/2^20⌉ beyond (one
// 10-byte header per frame, plus the total length). A round is one dependent
// exchange. The tests assert every figure below exactly, so a cost
// regression fails them; each method's doc comment repeats its own.
// MessageBytes (msg), SignCircuitWords, MSBCost, TruncCost and TruncReLUCost export the
// figures that cost formulas above this package build on (Cost).
//
// Local, no communication: Add, Sub, Neg, AddPublic (party 0 adds),
// AddPublicScalar, MulPublicInt (exact), Sum, ShareInput, NotBits, XorBits.
//
//	protocol                 rounds              bytes sent per party
//	Reveal                   1                   msg(n)
//	RevealTo                 1                   msg(n) from the other party, none from the receiver
//	Mul                      1                   msg(2n)              ring product, 2f fractional bits
//	MulFixed                 2                   msg(2n) + msg(W)     Mul + Trunc
//	Square                   1                   msg(n)               square pairs
//	SquareFixed              2                   2·msg(n)
//	SquareKeep               1                   msg(n)               as Square, keeping x − a for one KeptOpening.Mul
//	KeptOpening.Mul          1                   msg(n)               x·y, x the kept square's: y − b alone (Mul: msg(2n))
//	SquareKeepRing, its Mul  1 each              msg(⌈nℓ/64⌉) each    as SquareKeep and its Mul mod 2^ℓ, openings packed at ℓ bits (ring.go)
//	Trunc, TruncBy           1                   msg(W)               one bit per element; error ≤ 1 ulp for |x| < 2^62 (TruncBound)
//	MulPublic                1                   msg(n)               public fixed-point tensor, broadcast over a suffix
//	MulPublicScalar          1                   msg(n)               constant kept with 14 extra bits
//	Mean (axis of length l)  1                   msg(n/l)
//	MatMul [..,m,k]·[k,n]    1                   msg(|x| + |y|)       batched products in one exchange
//	MatMulFixed              2                   msg(|x| + |y|) + msg(|out|)
//	ShareWeight (k×n)        1, once per weight  P0 msg(k·n), P1 nothing
//	MatMulWeights            1                   P1 msg(|x|), P0 nothing
//	ShareVector, MulPrivateVector  as ShareWeight, MatMulWeights (γ ⊙ x)
//	MatMulWeightsFixed, MulPrivateVectorFixed  2 rounds; P1 msg(|x|) + msg(|out|), P0 msg(|out|)
//	MulPrivateRowBits        1                   P0 msg(n), P1 msg(⌈rows/64⌉)  x ⊙ a bit per row P1 holds in the clear (row-bit triples)
//	MSB (sign)               6                   Σ msg(k·W), k ∈ {156, 62, 30, 14, 6, 2}, W = ⌈n/64⌉ (33.75 B per element)
//	B2A, RevealBits          1                   msg(W)
//	LTZ, LessThan            7                   MSB + msg(W)         ring 0/1 (× FixedPoint().Scale() for 1.0)
//	LessThanBits             6                   as MSB
//	CompareReveal            7                   MSB + msg(W)         reveals only the bits x < y
//	CompareRevealBounded     6                   Σ msg(k·W), k ∈ {76, 30, 14, 6, 2, 1} (16.125 B per element)  as CompareReveal, exact for |x − y| < 2^31 (32-bit sign circuit)
//	MulBit, Select           1                   msg(W + n)           multiplexer
//	ReLU                     7                   MSB + msg(W + n)
//	TruncReLU (ReLU∘TruncBy) 7                   as ReLU, the first message W words longer: TruncBy's bits ride with the sign circuit's first exchange (1 round and 1 header fewer)
//	Max, ArgMax (last dim m) 7 per halving       7·⌈log2 m⌉ rounds
//	Exp                      16                                       CrypTen's (1 + x/2^8)^(2^8)
//	ReciprocalPositive       46
//	Reciprocal               54
//	InvSqrt                  32
//	Log                      67
//	Softmax (last dim m)     7·⌈log2 m⌉ + 64
//	Entropy (last dim m)     7·⌈log2 m⌉ + 133
//
// Ranges and measured errors of the approximations are in each method's doc
// comment.
//
// The local ring products of MatMul and MatMulWeights run on the session's
// GEMM backend (Session.SetGEMM, else share.GEMM(): the CPU, or a GPU in a
// build with the cuda tag). Backends give bit-identical products, so the
// backend changes neither results nor the costs above.
//
// # Writing a protocol
//
// Talk to the peer through Session.Exchange, SendWords and RecvWords (not the
// raw stream), so that receive taps (SetReceiveTap, used by the view tests)
// see every message; draw correlations with the typed helpers of
// beaver.Typed, s.Provider().X(ctx, s.StreamID(), ...); and make the same
// provider calls in the same order on both parties.
//
// # References
//
//   - Multiplication and matrix products use Beaver triples: D. Beaver,
//     "Efficient Multiparty Protocols Using Circuit Randomization", CRYPTO '91,
//     LNCS 576, pp. 420–432, Springer, 1992.
//   - The approximations of exp, reciprocal, inverse square root, log,
//     softmax and entropy, and the baseline costs quoted against, are those of
//     CrypTen: B. Knott, S. Venkataraman, A. Hannun, S. Sengupta, M. Ibrahim,
//     L. van der Maaten, "CrypTen: Secure Multi-Party Computation Meets
//     Machine Learning", NeurIPS 2021.
//   - Truncation: SecureML's local truncation (P. Mohassel, Y. Zhang,
//     "SecureML: A System for Scalable Privacy-Preserving Machine Learning",
//     IEEE S&P 2017), which CrypTen also uses, costs no round but fails with a
//     large wrap-around error with a small probability per element; over the
//     ~10^9 truncations of a selection that would corrupt entropies. TruncBy
//     instead spends one round of one bit per element and a wrap pair (a
//     product of a random bit of each party, f bits of correlation) to
//     compute the wrap of its shares' sum, the truncation with a known top
//     bit of Cheetah (Z. Huang, W. Lu, C. Hong, J. Ding, "Cheetah: Lean and
//     Fast Secure Two-Party Deep Neural Network Inference", USENIX Security
//     2022), and is exact to one ulp for |x| < 2^62.
//   - The sign circuit (MSB, binary.go) computes the carry into bit 63 of
//     x0 + x1 with the generate/propagate tree of a parallel-prefix adder on
//     XOR-shared bits, as ABY3 extracts the MSB (P. Mohassel, P. Rindal,
//     "ABY3: A Mixed Protocol Framework for Machine Learning", ACM CCS 2018),
//     with the first level's products taken between bits each held by one
//     party, and evaluates it bit-sliced (E. Biham, "A Fast New DES
//     Implementation in Software", FSE 1997): 64 comparisons per word, 6
//     rounds instead of CrypTen's 8.
//   - The application: X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and
//     Practical Data Selection for Transformers", arXiv:2310.02373 (2023),
//     ICLR 2025; design notes in DESIGN.md at the module root.
package protocol

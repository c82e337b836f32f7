// Package he makes the weight-mask correlation of selectformer's products
// with the model owner's clear weights, C0 + C1 = A·B mod 2^64, between the
// two parties alone, by RLWE encryption (no dealer). P0 (the model owner)
// holds the mask B (k×n, fixed per weight matrix); P1 (the data owner) holds
// A (m×k, fresh per candidate) and chooses its share C1 := R uniformly; P0
// learns C0 = A·B − R. It is the cryptographic core only: package
// beaver/ot's provider runs it for the weight-mask kinds with its
// WeightMaskGenerator ot.Lattice (-provider he).
//
// # Protocol (Nimbus layout, Cheetah encoding)
//
// Each step is one function with plain inputs and outputs:
//
//  1. P0: KeyGen → SecretKey, PublicKey (sent once per session).
//  2. P0: EncryptWeights(B) → EncryptedWeights (sent once per weight
//     matrix): seeded symmetric RLWE ciphertexts, only c0 crosses.
//  3. P1: LoadWeights(PublicKey, EncryptedWeights) → Weights (kept).
//  4. P1, per candidate: MulMasked(Weights, A, R) → Output (sent): the
//     homomorphic product A·Enc(B), minus R, re-randomised with a fresh
//     encryption of zero under the public key, flooded, switched down.
//  5. P0, per candidate: DecryptShares(Output) → C0.
//
// Against a P1 that alters what it sends, the product is checked
// (CheckedPlan, "Active security" below): P0 also encrypts B·V and V, V a
// secret projection (n×CheckColumns), with EncryptWeightsAt; P1's outputs
// (MulMaskedSum, a sum of products placed at column offsets) carry check
// columns besides C0's; P0 accepts C0 only if C0·V minus the check columns
// is the value P1 committed to (CheckedPlan.Residual). Package beaver/ot
// runs this checked form.
//
// Messages encode with AppendBinary and decode with the Scheme's Decode
// functions, which take the caller's bounds on every dimension and check
// the exact length a header implies before allocating.
//
// # Scheme
//
// Ring R_Q = Z_Q[X]/(X^N+1), N = 8192, Q the product of two 55-bit and
// two 54-bit NTT-friendly primes (log2 Q ≈ 218), arithmetic by lattigo v6's ring
// package (RNS, NTT). Secret s uniform ternary; errors discrete Gaussian
// σ = 3.2 truncated at 6σ (|e| ≤ B_e = 19), both drawn by noise.go from
// keyed AES-CTR streams. The plaintext modulus
// is t = 2^64 with coefficient encoding and rounded scaling: a weight
// ciphertext of b satisfies c0 + c1·s = round(Q·b/t) + e. Multiplying by a
// plaintext a whose coefficients are A's words lifted to [−2^63, 2^63)
// gives Q·(a·b mod t)/t + (e + ε)·a mod Q, |ε| ≤ 1/2: the wrap-around of
// a·b mod t vanishes because (Q/t)·t·w = Q·w ≡ 0.
//
// Layout (outer product): the plaintext of A for row block ib and
// inner index r holds A[ib·MW+i][r] at X^(i·NW), i < MW; weight ciphertext
// (r, j) holds B[r][j·NW+x] at X^x, x < NW. With MW·NW ≤ N the product has
// A[i][r]·B[r][x] at X^(i·NW+x) with no wrap, and the sum over r
// accumulates homomorphically. NW is a power of two, so the plaintext of A
// is a'(X^NW) and its NTT takes only D = N/NW distinct values a'(ζ), ζ the
// roots of Y^D = −1: P1 evaluates a size-D polynomial instead of a size-N
// NTT. When MW·NW < N (few rows of A), a weight ciphertext also packs KW
// rows of B, row r+t at X^(t·NW+x), and A's plaintext holds A[i][r+t] at
// X^(i·KW·NW − t·NW) (−X^(N−t·NW) for i = 0): the product sums the KW inner
// terms at X^(i·KW·NW+x), the other terms falling where KW·NW does not
// divide the exponent (KW a power of two, MW·KW·NW ≤ N); the plaintext is
// still a polynomial in X^NW, and an output coefficient still sums k·MW
// terms a·e. ChooseLayout's rule: fewest output ciphertexts
// ceil(m/MW)·ceil(n/NW) (they are the per-candidate bytes), then fewest
// weight ciphertexts ceil(k/KW)·ceil(n/NW) (P0's one-time upload, P1's
// memory and work), then the largest MW. For the sst2 product
// 128×768·768×1536: MW = 16, NW = 512, KW = 1, 2,304 weight ciphertexts, 24
// output ciphertexts; for 1×768·768×768: MW = 1, NW = 1024, KW = 8, 96
// weight ciphertexts (768 with KW = 1), 1 output ciphertext.
//
// # Security (DefaultParams)
//
// P1 sees P0's public key and weight ciphertexts: RLWE samples under s with
// N = 8192, log2 Q ≤ 218, ternary secret, σ = 3.2. The Homomorphic
// Encryption Standard (M. Albrecht et al., "Homomorphic Encryption Security
// Standard", HomomorphicEncryption.org, Toronto, November 2018; its table
// for secrets uniform in {−1, 0, 1}, σ ≈ 3.2, 128-bit classical security)
// allows log2 q ≤ 218 at n = 8192 — the bound SEAL enforces as
// CoeffModulus::MaxBitCount(8192, sec_level_type::tc128) = 218
// (seal_he_std_parms_128_tc). Our Q is below 2^218. NewScheme refuses any
// Params below that table for its N (27, 54, 109, 218 bits for N = 2^10 …
// 2^13), with σ below the standard's 8/√(2π) ≈ 3.19 or errors truncated
// below 6σ (TestParamsSecurity). The seeded halves c1 are expanded with
// AES-128-CTR from public seeds (a seeded ciphertext is as secure as one
// with a uniform c1 in the random-oracle/PRG model, as in lattigo's and
// SEAL's seeded ciphertexts).
//
// P0 sees each output ciphertext (c0', c1') and knows s and every error it
// sampled. The ciphertext's c1 = Σ_r a_r·c1_r would reveal A (P0 knows the
// c1_r), so P1 adds (u·p0 + e0, u·p1 + e1), an encryption of zero under the
// public key with a fresh ternary u: c1 + u·p1 + e1 is pseudorandom by RLWE
// with secret u (same N, Q, σ). The phase c0 + c1·s = Δ·(A·B − R) + ν has
// the noise ν = Σ z·c + η: K terms (K ≤ MaxInner·MaxRows = 2^18, RowBudget),
// each an entry z of P1's factor (A; −R in check columns; ρ·A and −ρ·R in
// a compressed check) lifted to [−2^63, 2^63) times c = e + ε, P0's
// encryption error plus the rounding of its encoding (|ε| ≤ 1/2), and
// η = u·e_pk + e1·s + e0 minus the rounding of Δ·R, |η| ≤ (2N+1)·B_e + 1/2.
// P1 adds to every coefficient that holds an output a flood U uniform in
// [−2^f, 2^f). For a fixed ν, ν + U is within statistical distance
// |ν|/2^(f+1) of U. Replacing P0's phases by Δ·C0 + U one coefficient at a
// time, each step costs the mean of that distance over everything else P0
// sees (which may fix A: P0 later sees E = X1 − A), that is E|ν|/2^(f+1),
// the mean over P1's factor and P0's errors (Scheme.DistanceLog). For a
// semi-honest P0 the errors are the scheme's truncated discrete Gaussian
// (addGaussian), independent and symmetric (E[e²] = 10.24 at σ = 3.2, 6σ:
// errSecondMoment, TestErrSecondMoment), and P1's factor entries are uniform words
// (E[z²] = 2^126/3 + 1/6), pairwise independent (in a compressed check, ρ
// is independent of A in the random-oracle model and, with m > 64 columns,
// has two rows equal or zero mod 2 with probability ≤ 3·2^−65), so
//
//	E|ν| ≤ √(E[ν²]) ≤ √(K·(E[e²] + 1/4)·E[z²] + K²·2^61) + |η| ≈ 2^72.90
//
// (TestMeanNoise measures 0.79 of it; the worst case, |z| = 2^63 and
// |e| = B_e in every term, is Bν ≈ 2^85.29). The flood is
// f = ceil(log2 E|ν|) + λ = 73 + 79 = 152, so each coefficient is within
// 2^−80.10 of its simulation, and by the union bound 2^39 coefficients
// within 2^−41.10: NewScheme refuses a λ that does not give 2^−40
// (StatisticalSecurity) over 2^39 (LogSelectionOutputs), no flood included
// (TestStatisticalDistance). The largest selections of bench.Workloads, at
// their batch sizes (product outputs and check columns, from the weight-mask
// requests of each phase's forward and PlanChecked: go test ./bench -run x
// -bench HEOutputs -benchtime 1x): the exact DistilBERT over SST-2,
// 2.72·10^11 coefficients ≈ 2^37.99 (39,900 candidates, 6.82·10^6 each),
// 2^−42.11; qqp-bert 5.77·10^10 ≈ 2^35.75, 2^−44.34; cifar10-vitsmall
// 5.09·10^9, 2^−47.8; sst2-distilbert 1.60·10^9, 2^−49.5. (A P0 that chose
// its errors anywhere within B_e, E[c²] ≤ 19.5², would see 2^−77.5 per
// coefficient.) The modulus switch is a function of the flooded
// ciphertext, so it reveals nothing more. Coefficients that hold no output
// are not sent.
//
// # Noise budget (DefaultParams; NewScheme checks it for every Params)
//
//	ν before flooding, per output coefficient, worst case, k·MW ≤ MaxInner·MaxRows = 4096·64
//	(RowBudget: MW ≤ MaxRows at k = MaxInner, up to 32× more rows at k = 128):
//	  Σ_r (e_r + ε_r)·a_r : k·MW·(B_e + 1/2)·2^63 = 4096·64·19.5·2^63 ≈ 2^85.29
//	  u·e_pk + e1·s + e0  : (2N + 1)·B_e ≈ 2^18.2
//	  rounding of Δ·R     : 1/2
//	  Bν ≈ 2^85.29; the flood f = ceil(log2 E|ν|) + λ = 73 + 79 = 152.
//	Modulus switch to 2^LogQ0 (c0, 68 bits) and 2^LogQ1 (c1, 81 bits): the
//	rounding errors ε0, ε1 satisfy |ε| ≤ 1/2 + 2^−8 (2^−8: the fixed-point
//	CRT), and ε1 is multiplied by s (‖s‖₁ ≤ N).
//	Exact decryption needs 2^64·((Bν + F)/Q + (1/2+2^−8)/2^68 + N·(1/2+2^−8)/2^81) < 1/2:
//	  2^64·(2^152.0/2^218.0 + 2^−68.99 + 2^−68.99) = 0.250 + 0.031 + 0.031 = 0.313 < 1/2.
//	One more flood bit (λ = 80) gives 0.563: TestParamsExactnessBoundary.
//
// # Costs (Sizes gives them exactly)
//
// Output message: 18 + ceil((m·n·68 + ceil(m/MW)·ceil(n/NW)·N·81)/8) bytes.
// For 128×768·768×1536: 3,661,842 bytes per candidate, 2.33× the dealer's
// correction (8·m·n = 1,572,864 bytes). Weights: 54 + ceil(k/KW)·ceil(n/NW)·N·218/8
// bytes (514,326,582 once per weight matrix); public key 223,266 bytes
// once; P1 keeps both components of every weight ciphertext in the NTT
// domain, 2·4·N·8 bytes each (1.21 GB for this product; LoadWeightsCompact
// keeps c0 only, 0.60 GB, and regenerates c1 per candidate).
//
// Products admitted one at a time (MulMaskedSum) that wait on the same
// weights share one pass over them (merge.go): their rows are stacked,
// each padded to whole row blocks, so the weight ciphertexts' c0 stream
// from memory and compact weights' c1 are regenerated once for all of
// them; every product still gets its own output blocks, re-randomised and
// flooded with its own key (TestMulMaskedMergesSharedWeights: byte for
// byte the output of a pass of its own).
//
// Work per candidate is inherent to the layout: m·k·n·2·L 64×64-bit
// multiply-adds (L = 4 primes), 1.2·10^9 for this product — for each prime
// and NTT slot a (ceil(m/MW)×ceil(k/KW))·(ceil(k/KW)×ceil(n/NW)) modular
// GEMM — plus per
// output ciphertext one small NTT, two inverse NTTs and the switch.
// The sum over the inner dimension at each slot runs in AVX2 on amd64
// (macLimbsAVX2: 28-bit halves, VPMULUDQ, limb sums normalized every
// maxMacTerms terms; the portable macGather elsewhere, the same result).
// Measured with go test -bench . -benchtime=3x on the 2-core development
// machine shared with other jobs (load average 5–7, so the figures vary
// 2× between runs; CPU seconds in brackets): MulMasked 1.0–3.0 s
// (1.8–3.1 CPU-s) per candidate with macGather, DecryptShares 0.016 s,
// EncryptWeights 5.3–7.1 s (5.2 CPU-s) and LoadWeights 0.3–0.5 s once
// per matrix; with the AVX2 kernel on an AMD EPYC Zen 3 at load ≤ 2,
// MulMasked 1.34–1.45 CPU-s (3.38–4.15 with macGather in the same runs)
// and with compact weights 1.66–1.88 (3.68–4.70): bench/RESULTS.md.
//
// # Active security
//
// P0's decryption is linear in the ciphertext and its key s is small, so a
// P1 that adds τ to an output's c1 moves the phase P0 decrypts by τ·s:
// δ·2^(LogQ1−64)·X^t moves P0's share at each output position pos by
// ±δ·s[pos−t], one key coefficient per position, and P0's later behaviour
// (the comparisons it helps open) tells P1 which way. That is a "reaction"
// attack on the decryption oracle P0 offers (for exact schemes, Cheon,
// Choe, Passelègue, Stehlé, Suvanto, "Attacks against the IND-CPA^D
// security of exact FHE schemes", CCS 2024); with s, P1 decrypts the
// encrypted masks B and reads the weights W = F + B. Cheetah and Nimbus
// are semi-honest protocols and do not prevent it.
//
// The check is Freivalds' test under a projection only P0 knows, a linear
// MAC with key V (n×c, c = CheckColumns = 40, uniform words, secret): P1's
// outputs carry, beside A·B − R, check columns D = A·(B·V) − R·V − R1 (R1
// fresh; A·(B·V) from Enc(B·V), −R·V from Enc(V)), and P1 commits to R1;
// P0 accepts C0 iff C0·V − D = R1. Honest outputs pass:
// (A·B − R)·V − A·B·V + R·V + R1 = R1. A product with more than
// CheckRows = 64 rows is checked on ρ·C0 instead, ρ a 64×m matrix of
// uniform words expanded from a hash of P1's product output (Fiat–Shamir:
// P1 fixes C0's ciphertexts before it knows ρ), so that the check output
// has 64 rows whatever m: D = ρ·A·(B·V) − ρ·R·V − R1, accepted iff
// ρ·C0·V − D = R1. The check adds nothing to P0's view: D is uniform (R1
// is), the flood covers its noise as every coefficient's, and R1 P0
// computes itself.
//
// Why it suffices against an active P1. Whatever P1 sends, P0 decrypts
// C0 = A·B − R + E0 and D = A·B·V − R·V − R1 + E_D, A, R and R1 being the
// plaintexts P1 multiplied and added, E0 and E_D the effect of everything
// else (altered ciphertexts, altered encryptions it holds): functions of
// s, of P0's encryption noise and of P1's choices, but not of V's value. V
// reaches P1 only encrypted, and P0 computes nothing but the linear phase
// c0 + c1·s: to make an error carry V through the key, P1 would put a V
// ciphertext's c0 = Δ·V + e − a·s into a c1, which P0 multiplies by s, and
// that brings in a·s² with a uniform, which P1 cannot cancel with small
// coefficients (it would need a ciphertext product, which needs keys P0
// never makes). The check passes iff E0·V = E_D + (R1' − R1), R1' what P1
// committed to (ρ·E0 for E0 when compressed). For E0 ≠ 0 with least
// 2-adic valuation v, each column of V maps E0 to a value uniform on
// 2^v·Z_2^64: one column agrees with probability 2^(v−64) ≤ 1/2 (an
// attacker picks δ = 2^63), c independent columns with at most
// 2^−c = 2^−40. Compressed, the same holds unless ρ·E0 = 0, which for a
// fixed E0 ≠ 0 has probability at most 2^−64 over ρ (64 rows, each ≤ 1/2
// by the same valuation argument); ρ is a hash of the output that fixes
// E0, so a P1 that knows its alteration can search for a ρ that hides it
// only by hashing, 2^64 tries, and one that alters through the key cannot
// tell which ρ would. (One MAC key would not do over
// Z_2^64, whose zero divisors let 2^63·x vanish for every even key: the
// problem SPDZ2k solves by computing modulo 2^(64+s), Cramer, Damgård,
// Escudero, Scholl, Xing, CRYPTO 2018; independent columns are the
// simpler fix here.) So a C0 that passes is the honest C0 of the A and R P1
// multiplied, except with probability 2^−40 per altered item, and P0 uses
// nothing of an item before its check. The first failure ends the session
// and P0's key (package beaver/ot), so what P1 learns from the outcomes is
// the index of the first failure: a P1 that alters only check columns
// (E0 = 0, E_D = δ·s_j) passes exactly when it guesses the key-dependent
// E_D, and over the session it learns at most log2(items + 1) bits about s
// (20 bits for a million items). This is an argument, not a proof in a
// formal model: it rests on P1 being unable to make a V-dependent error
// through the key.
//
// Cost (CheckedPlan, PlanChecked chooses per shape), per product: 104,722
// bytes for one of more than 64 rows (one 64×40 check output: 2.9% of
// 128×768·768×1536, 12% of the 6152×128·128×5 of sst2 at batch 8); for
// fewer rows, a check output of its own (83,302 bytes for 1×768·768×768)
// or 40·68 bits per row beside the product's where that costs less
// (1×128·128×2: 340 bytes); P1's work 4% more for 128×768·768×1536
// (BenchmarkCheckMulMasked: 0.13 of 3.0 CPU-s), 34% and 25% more for the
// products of an sst2 phase-0 batch of 1 and 8 candidates
// (BenchmarkSST2Batch); once, B·V (k/KW ciphertexts per weight) and V
// (n/KW ciphertexts per n, shared by the weights with n columns).
//
// # What P0 can do
//
// P0 holds the key, and nothing checks its messages. It controls p0 of the
// public key and the c0 of every encryption it sends, hence the noise P1's
// secrets multiply: the re-randomiser u multiplies the public key's noise,
// A the weights'. A P0 that makes that noise exceed the flood (2^152)
// reads u·e or A·e from the phase it decrypts, so A (and with A, the data
// owner's input X1 from the opened E = X1 − A). The public seeds of p1 and
// of the weights' c1 are derived from the session id (package beaver/ot),
// so P0 does not choose the uniform halves, but nothing bounds its noise.
// Preventing that needs zero-knowledge proofs that each ciphertext P0
// sends has short noise (the ZKPoPK of SPDZ: Keller, Pastro, Rotaru,
// "Overdrive", EUROCRYPT 2018; Baum, Cozzo, Smart, "Using TopGear in
// Overdrive", SAC 2019): amortised over batches, proofs about the size of
// the ciphertexts they cover and a few times P0's encryption work and P1's
// as verifier, once per session here; but their soundness slack (a factor
// of 2^30 or more on the noise) does not fit log2 Q ≤ 218 at N = 8192, so
// N = 16384, which doubles every ciphertext and product. Not built.
//
// References: Z. Huang, W. Lu, C. Hong, J. Ding, "Cheetah: Lean and Fast
// Secure Two-Party Deep Neural Network Inference", USENIX Security 2022
// (coefficient encoding, Z_2^k plaintexts); K. Li et al., "Nimbus: Secure
// and Efficient Two-Party Inference for Transformers", NeurIPS 2024 (the
// weight owner's matrix encrypted once, outer-product packing).
package he

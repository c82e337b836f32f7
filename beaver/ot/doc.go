// Package ot makes the correlated randomness of package beaver between the
// two parties themselves, with no dealer: base OTs with circl's ot/simot,
// SoftSpokenOT OT extension (softspoken.go), and generators of every
// correlation the online suite consumes, each returned as the beaver struct
// of the dealer mode.
//
// A session (Setup, keyed by the beaver.SessionID both parties agreed) runs
// 128 base OTs in each direction once: 3 rounds, 19,552 bytes per party.
// Generators (Session.NewGen, one per stream id) then extend them with
// SoftSpokenOT at k = 4 (Roy, CRYPTO 2022): the extension receiver sends 4
// bytes per OT (one bit per 4-bit tree of Δ; IKNP sent 16), and in a
// generator's first call in each direction its 32 GGM trees, 4,096 bytes;
// each party computes 4 AES blocks of leaf PRG per OT (16 leaves per tree
// for every 128 OTs). Every extension call carries KOS's consistency check
// (kos.go): 256 extra OTs and 32 bytes, 1,056 bytes a call, checked by the
// sender before it uses any OT of the call. The generators:
//
//   - RandomOTs, DeltaOTs: random / Δ-correlated OTs, 4 bytes per OT from
//     the receiver, one round.
//   - ANDTriples: bit-packed AND triples from two random OTs each (ALSZ13),
//     4 bytes per triple and party, one round; CrossANDTriples for u∧v.
//   - Triples, SquarePairs, MatTriples: Z_2^64 products by Gilboa
//     multiplication on correlated OTs (64 OTs per product with short
//     corrections of 64−t bits): 256 + 260 = 516 bytes per triple and party.
//     MatTriplesRing (beaver.Request.RingBits): matrix triples mod 2^ℓ,
//     corrections of ℓ−t bits, ℓ(ℓ+1)/2 a multiply-add.
//   - SquareProducts: a square pair and a triple on one a, its three cross
//     products in two Gilboa batches (party 1's a1 against party 0's
//     two-word (2·a0, b0), a vector OLE; party 0's a0 against b1): 128 OTs
//     per element where a square pair and a triple take 192, 776 bytes
//     from party 0 and 516 from party 1 (776 and 772 for the two);
//     SquareProductsRing mod 2^ℓ on request (corrections of ℓ−t bits).
//   - WrapPairs: one correlated OT per pair (party 1 choosing with its bit
//     v against party 0's bit u, f-bit corrections): 4 bytes of extension
//     matrix and f bits per pair.
//   - BitPairs: bit decomposition of r = ρ0⊕ρ1 made arithmetic with one
//     correlated OT per bit.
//   - RowBitTriples: shares of r_i·A_i for a bit r_i of party 1 and a row
//     A_i of party 0, one correlated OT per row whose correlation is the
//     row: 4 bytes of extension matrix and 8·width bytes of corrections
//     per row.
//   - WeightTriples, WeightVectorTriples: the weight-mask correlation for
//     [X]·W by vector OLE on correlated OTs whose correlation is the fixed
//     mask B of party 0: 64·m·k OTs and 260·m·k·n bytes of corrections,
//     i.e. a product's worth of traffic (see the cost note below).
//
// The two weight-mask kinds are made by the Provider's WeightMaskGenerator
// (weightmask.go), a plug with two implementations: VectorOLE (the
// default, the generators above) and Lattice (he.go, he_item.go; the peer
// binaries' -provider he), which makes them with package beaver/he: party 0
// sends its public key at BindSession and each encrypted matrix once per
// session, as party 1 asks for it on the session stream (he_upload.go;
// he.WeightSizes: B, 509,607,990 bytes for 768×1536 with NW = 512; B·V;
// V's rows, shared by the weights with the same n); per item party 1 sends
// one message on the item's stream: a tag word, its outputs
// (he.OutputSizes: 3,766,564 bytes for 128×768·768×1536, 2.39× a dealer's
// correction, of which 104,722 the check) and a 32-byte commitment, and
// party 0 accepts its share only if the outputs pass the check
// (he.CheckedPlan; a failure wraps beaver.ErrCorrelationCheck and discards
// the key). Every other kind stays on OT. The first setup message carries
// the generator's fingerprint (its way and, for a Lattice, the HE
// parameters' fingerprint bound to the protocol version) and the OT
// extension's (SoftSpokenOT and its k), so parties that disagree, or a peer
// of a version on IKNP, fail with ErrModeMismatch.
//
// No stream waits on another's protocol: an item on a stream waits only
// for the stream's earlier items, the peer's half of itself, and (a
// Lattice's) the upload service on the session stream, whose goroutines
// wait on nothing but each other. The streams of the two parties then
// never wait on each other through what each party holds (its compute
// slots, its prefetch budget, the order of its lanes), whatever the lanes,
// batches and budgets of package selection/lanes (issue 38: on d5bf317 a
// Lattice's party 1 made an item wait for the stream that loaded its
// encryption; TestHEProviderNoCrossStreamWait). Code that calls a Provider
// must keep its side of the bargain: a party must not hold back a stream's
// next request until another stream's item is done (package protocol's
// sessions give their compute slot back while they wait for material).
//
// Provider puts the generators behind beaver.Provider: NewProvider(conn,
// party, opts) on the parties' own transport connection runs Setup at
// BindSession on a dedicated stream (DefaultStreamBase) and one generator per
// beaver stream s on stream DefaultStreamBase+1+s, so protocol code, selection
// and protocol.Prefetch run unchanged with no dealer. The model owner's weight
// masks are expanded from its secret mask seed and the session id.
//
// The Provider serves a beaver kind through the Generator registered for
// it (Register: one call per kind, in the file of its family: arith.go,
// matrix.go, binary.go) or, for a kind with a weight mask, its
// WeightMaskGenerator: one lookup in a table made at NewProvider; a kind
// with neither is refused with an error naming it. correlations.go holds what the generators share (the Gilboa
// products, random and Δ-correlated OTs).
//
// The correlation-robust hash is the tweakable TMMO construction of Guo,
// Katz, Wang and Yu, H(τ, x) = π(π(x)⊕τ)⊕π(x), with π fixed-key AES-128
// under a per-session public key. The extension's PRG (the GGM trees and
// the leaves' bits) is the fixed-key hash G(s, τ) = π′(s⊕τ)⊕s⊕τ under a
// second session key, as in libOTe's SoftSpokenOT. π and π′ run in an
// eight-block AES-NI loop (aes_amd64.s, checked block for block against
// crypto/aes); elsewhere, or with the purego tag, crypto/aes one block per
// call, about 18 times slower.
//
// Security. Computational security λ = 128: the base OTs (Chou–Orlandi
// over Ristretto255, about 126 bits), AES-128 as an ideal permutation for
// the hash and the PRG (an adversary's advantage about q·N/2^128 for q
// queries and N expansions), and Δ uniform over 128 bits. k does not lower
// semi-honest security: Δ stays uniform (the sender's choices are its
// bits), each tree's punctured leaf is pseudorandom to the sender whatever
// its size (the GGM tree), so the corrections u_b ⊕ r hide r, and guessing
// a q_j ⊕ Δ still means guessing all of Δ; k only trades communication
// (128/k bits per OT) for computation (2^k/k PRG blocks per OT).
//
// Against an active extension receiver the extension is checked (kos.go:
// Keller, Orsini and Scholl's consistency check, which Roy's paper notes
// applies to SoftSpokenOT's IKNP-shaped output; Fiat–Shamir challenges in
// GF(2^128), PCLMULQDQ on amd64). A receiver that sends inconsistent
// corrections (another choice vector on a tree of Δ, altered trees) to
// learn Δ by selective failure passes the check only if it guessed the Δ
// bits it probes: it learns s bits of Δ with probability at most 2^−s
// (TestExtensionCheckCatchesCheatingReceiver: exactly one of the 2^k
// guesses of a tree passes), and otherwise the sender's call fails with
// ErrExtensionCheck, a beaver.ErrCorrelationCheck: nothing of the call is
// used, the Provider binds no session after it and selection aborts with
// the public reason AbortCorrelation (TestOTProviderRefusesCheatingReceiver;
// selection's TestOTChecksAbortSelection). The hash then hides the
// other message of every OT behind the 128 − s bits of Δ not learnt (KOS's
// correlation robustness with a leaky Δ).
//
// What stays semi-honest: the generators above the extension. A party can
// send inconsistent corrections as the sender of a correlated OT (Gilboa's
// products, cross-AND triples, wrap and bit pairs, the vector OLE of the
// weight masks), or make its share of an AND triple from other values
// than its OT messages, so that the peer's result is off only where a
// secret bit of the peer is 1: a selective failure on one secret bit per
// altered OT, seen only through what the computation later reveals (the
// comparison outcomes), besides shifting values like any share edit. Not
// detected (it needs a check of the correlations themselves, e.g.
// sacrificing triples; README, "What a lying peer cannot make a party
// do").
//
// A party's view is uniform words of public lengths whatever the peer's
// secrets (TestViews, TestSoftSpokenCorrectionsIndependent,
// TestExtensionCheckHidesChoices). A Lattice's weight-mask items are
// checked too: party 0 checks their outputs against an active party 1
// (he.go, TestHECheckCatchesTampering); an active party 0 there is not
// prevented from reading party 1's masks through oversized noise (package
// beaver/he, "What P0 can do").
//
// Cost note (BenchmarkWeightTriple, one token row through one 768×768
// projection): party 0 sends 153 MB, party 1 201 KB (786 KB with IKNP), 21
// rounds. For a
// sst2-distilbert candidate (128 tokens, 4 projections per layer) that is
// about 79 GB and several hundred CPU-seconds per layer, against about
// 9.4 MB per layer from a dealer: vector OLE from correlated OTs costs Θ(m·k·n·ℓ) bits, so a dealer-free weight mask needs a sublinear
// VOLE (LPN-based silent OT) or RLWE homomorphic encryption instead.
//
// Silent OT (ferret*.go): Ferret's correlated-OT extension, primal LPN
// with regular noise and a d = 10 local code on emp-ot's revised ferret_b13
// parameters (ferret_params.go): an iteration turns 468,768 reserved COTs
// into 10,485,760, keeps the next reserve and hands out 10,016,992 for
// 555,104 bytes in two round trips, 0.44 bits per COT against
// SoftSpokenOT's 32. Its §5 consistency check (ferret_check.go) stops an
// active sender from making the receiver's outputs depend on its noise
// beyond one guess, which ends the instance when wrong; an active receiver
// needs none. A Provider's session runs the instances of each direction
// (ferret_pool.go) on streams below StreamBase: one on the main set where
// party 0 holds Δ (StreamBase−1), and where party 1 (the data owner, whose
// memory is the tighter) holds it two chains on emp-ot's setup set
// (470,016 COTs an iteration in 7.5 MB buffers, 5.2 bits a COT;
// StreamBase−2 and −4), their iterations overlapped (one round trip each:
// the receiver begins the next before it checks the last;
// ferretConfig.overlap and chains), its base COTs
// from SoftSpokenOT at bind, and every generator of the session takes its
// OTs from them instead of extending its own (extension.go): the receiver
// names each range (its first index, and e = c ⊕ x for chosen choices: one
// bit an OT), the sender refuses a range named twice, unaligned or not
// made (ErrSilentRange, a beaver.ErrCorrelationCheck). Sessions from
// Setup alone (the package's own tests of the engine) keep SoftSpokenOT.
package ot

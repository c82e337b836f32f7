// Package ot makes the correlated randomness of package beaver between the
// two parties themselves, with no dealer: base OTs with circl's ot/simot,
// IKNP OT extension, and generators of every correlation the online suite
// consumes, each returned as the beaver struct of the dealer mode.
//
// A session (Setup, keyed by the beaver.SessionID both parties agreed) runs
// 128 base OTs in each direction once: 3 rounds, 19,552 bytes per party.
// Generators (Session.NewGen, one per stream id) then extend them:
//
//   - RandomOTs, DeltaOTs: random / Δ-correlated OTs, 16 bytes per OT from
//     the receiver, one round.
//   - ANDTriples: bit-packed AND triples from two random OTs each (ALSZ13),
//     16 bytes per triple and party, one round; CrossANDTriples for u∧v.
//   - Triples, SquarePairs, MatTriples: Z_2^64 products by Gilboa
//     multiplication on correlated OTs (64 OTs per product with short
//     corrections of 64−t bits): 1,284 bytes per triple and party.
//   - WrapPairs: one correlated OT per pair (party 1 choosing with its bit
//     v against party 0's bit u, f-bit corrections): 16 bytes of IKNP
//     matrix and f bits per pair.
//   - BitPairs: bit decomposition of r = ρ0⊕ρ1 made arithmetic with one
//     correlated OT per bit.
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
// session (he.WeightSizes: B, 509,607,990 bytes for 768×1536 with NW =
// 512; B·V; V's rows, shared by the weights with the same n); per item
// party 1 sends one header word per encrypted matrix, its outputs
// (he.OutputSizes: 3,766,564 bytes for 128×768·768×1536, 2.39× a dealer's
// correction, of which 104,722 the check) and a 32-byte commitment, and
// party 0 accepts its share only if the outputs pass the check
// (he.CheckedPlan; a failure wraps beaver.ErrCorrelationCheck and discards
// the key). Every other kind stays on OT. The first setup message carries
// the generator's fingerprint (its way and, for a Lattice, the HE
// parameters' fingerprint bound to the protocol version), so parties that
// disagree fail with ErrModeMismatch.
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
// under a per-session key. π runs in an eight-block AES-NI loop
// (aes_amd64.s, checked block for block against crypto/aes); elsewhere, or
// with the purego tag, it is crypto/aes one block per call, about 18 times
// slower. The column PRGs are crypto/aes in CTR mode.
//
// Security: semi-honest, as the project's threat model (IKNP without the
// KOS consistency check). A party's view is uniform words of public lengths
// whatever the peer's secrets (TestViews). The exception is a Lattice's
// weight-mask items, whose outputs party 0 checks against an active party
// 1 (he.go, TestHECheckCatchesTampering); an active party 0 there is not
// prevented from reading party 1's masks through oversized noise (package
// beaver/he, "What P0 can do").
//
// Cost note (BenchmarkWeightTriple, one token row through one 768×768
// projection): party 0 sends 153 MB, party 1 786 KB, 21 rounds. For a
// sst2-distilbert candidate (128 tokens, 4 projections per layer) that is
// about 79 GB and several hundred CPU-seconds per layer, against about
// 9.4 MB per layer from a dealer: vector OLE from IKNP-style correlated OTs
// costs Θ(m·k·n·ℓ) bits, so a dealer-free weight mask needs a sublinear
// VOLE (LPN-based silent OT) or RLWE homomorphic encryption instead.
package ot

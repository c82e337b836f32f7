// Package beaver supplies the correlated randomness of selectformer's online
// protocols: arithmetic and matrix Beaver triples, weight-mask correlations for
// products with the model owner's clear weights, bit-packed AND triples,
// wrap pairs (for truncation), random shared bits and row-bit triples (a
// bit of the data owner's per row times a row of the model owner's).
//
// A Provider hands one party (0 = model owner, 1 = data owner) its part of each
// correlation. Material is addressed by (stream, counter): every request on a
// stream consumes the next item of that stream, so concurrent streams never
// race and both parties, making the same requests in the same order on a
// stream, always receive the two halves of the same item.
//
// The Provider interface is a small core: Material answers one Request (a
// kind, a stream and the sizes) with the party's Material, WeightMask gives
// the model owner the reusable mask of one weight matrix (a per-weight
// correlation keyed by the weight id, not a stream kind), next to the
// party, the session binding, the stream positions (Position, Seek) and the
// dealer traffic (Stats). Protocols draw through Typed, whose helpers
// (Triples, MatTriples, WeightMask, WrapPairs, ...) build the request and
// check the shape of the answer. A new provider implements the core; a
// wrapper embeds the Provider it wraps, overrides Material and implements
// Unwrap (see As).
//
// Each kind of correlation is one descriptor (Correlation: its name, the
// size fields it uses and their bounds, each party's part sizes and dealer
// words, how the dealer makes them and how a party assembles its material)
// registered once (Register) in the file of its family: kind_arith.go,
// kind_matrix.go, kind_binary.go. The request codec, the dealers and the
// seeded providers read the descriptors; adding a kind is one such file
// here and, for the dealer-free provider, one generator in beaver/ot
// (toykind_test.go adds one in a single file).
//
// Material is also keyed by session (see SessionID and
// Provider.BindSession): no item is ever served to two computations.
//
// This package is the vocabulary of correlated randomness and nothing
// more: the Provider core, requests and kinds, the session id, the
// stream counters every provider keeps (Counters, ReserveMark), drawing a
// sequence (Sequencer, DrawSequence) and the optional behaviour a caller
// finds through wrappers (As, Wrapper, WeightReleaser, SessionBudgeter).
// The providers live in packages of their own: beaver/dealer (the
// in-process dealer, the networked dealer Server and its Client, their
// seeded expansion and the dealer's state file), beaver/ot (no dealer:
// OT extension, the weight masks by vector OLE or by lattice encryption,
// beaver/he), beaver/marks (a party's persistent high-water marks, a
// wrapper of any provider), and beaver/source names them for the
// binaries (one name, one source). The dealers count their traffic as
// DealerStats, apart from the parties' online traffic.
//
// # Trust
//
// The dealer is semi-honest and colludes with neither party; it never sees
// an input. This is the "trusted third party" mode of CrypTen, the one the
// SelectFormer paper measured; DESIGN.md at the module root states the
// threat model.
//
// # References
//
//   - Multiplication triples: D. Beaver, "Efficient Multiparty Protocols
//     Using Circuit Randomization", CRYPTO '91, LNCS 576, pp. 420–432,
//     Springer, 1992.
//   - The dealer ("trusted third party") mode of CrypTen: B. Knott, S. Venkataraman, A. Hannun, S. Sengupta, M. Ibrahim,
//     L. van der Maaten, "CrypTen: Secure Multi-Party Computation Meets
//     Machine Learning", NeurIPS 2021.
//   - Truncation pairs replace the local truncation of SecureML (P. Mohassel,
//     Y. Zhang, "SecureML: A System for Scalable Privacy-Preserving Machine
//     Learning", IEEE S&P 2017); see package protocol.
//   - X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and Practical Data
//     Selection for Transformers", arXiv:2310.02373 (2023), ICLR 2025.
package beaver

// Package beaver supplies the correlated randomness of selectformer's online
// protocols: arithmetic and matrix Beaver triples, weight-mask correlations for
// products with the model owner's clear weights, bit-packed AND triples,
// wrap pairs (for truncation) and random shared bits.
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
// wrapper embeds the Provider it wraps and overrides Material (see
// Marked).
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
// Provider.BindSession): every stream key is derived from the dealer's seed
// and a session id both parties contribute to and present, so no item is
// ever served to two computations. The networked dealer (Server) binds each
// connection to a role by its listener and pinned key, refuses a hello for
// the other role, and with a state file refuses after a restart every
// counter it served before. It also bounds what a party can make it do
// (ServerOptions): each request's size, a session's total work (the
// smaller of the budgets both parties announce, counted in
// Request.DealerWork units: ConnectOptions.Budget, or the smaller of it and
// the budget a computation derives from its shapes, SessionBudgeter, as
// selection's model owner does), streams, items in progress, connections per
// key and the sessions it keeps; retired sessions are refused for good.
// Marked does the same on a party's side, for the
// material the party expands itself (the dealer never sees party 0's
// counters): wrapped in it, a provider keeps persistent per-session
// high-water marks of its stream counters and weight ids and refuses, after
// any restart, every position it may have drawn (ErrReuse).
//
// Providers: Dealer is the in-process dealer (tests, the quickstart,
// benchmarks); Server is the networked dealer, a third host that parties
// reach with Connect (a Client); a Sequencer draws a known sequence of
// items at once (DrawSequence), on which protocol.Prefetch fetches a
// rehearsed computation's material ahead of its run. Each party
// expands its masks from a seed it shares with the dealer and receives the
// dealer words its kind gives it (for every built-in kind only party 1 gets
// any; a networked model owner draws its own with
// ConnectOptions.DealerWords). DealerStats counts that traffic, apart from
// the parties' online traffic.
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

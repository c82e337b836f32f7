// Package dealer is the dealer of the three-host mode: a party that holds
// two seeds and hands each of the two computing parties its part of every
// correlation of package beaver, never an input.
//
// Providers: Dealer is the in-process dealer (tests, the quickstart,
// benchmarks); Server is the networked dealer, a third host that parties
// reach with Connect (a Client). Both serve the same material for the same
// seeds and session id. Each party expands its masks locally from a session
// seed it shares with the dealer (seeded.go, expand.go) and receives only
// the dealer words its kind gives it (each built-in kind deals its words to
// one party, beaver.Correlation.DealtTo, so both parties draw some),
// counted as beaver.DealerStats, apart from
// the parties' online traffic. A Client is a beaver.Sequencer: a rehearsed
// computation's material is fetched in one round trip per sequence
// (beaver.DrawSequence, protocol.Prefetch).
//
// Every stream key is derived from the dealer's seed and a session id both
// parties contribute to and present (session.go), so no item is ever served
// to two computations. The networked dealer (server.go, serve.go; its wire
// format in wire.go) binds each connection to a role by its listener and pinned key,
// refuses a hello for the other role, and with a state file (state.go)
// refuses after a restart every counter it served before. It also bounds
// what a party can make it do (ServerOptions): each request's size, a
// session's total work (the smaller of the budgets both parties announce,
// counted in beaver.Request.DealerWork units: ConnectOptions.Budget, or the
// smaller of it and the budget a computation derives from its shapes,
// beaver.SessionBudgeter, as selection's model owner does), streams, items
// in progress, connections per key and the sessions it keeps; retired
// sessions are refused for good. The dealer core (core.go) checks every
// request, whichever way it arrives, and pairs the two parties of each
// session (join.go). Package beaver/marks does the same on a party's side, for the
// material the party expands itself (the dealer never sees a party's
// counters of the kinds dealt to the other).
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
//   - The dealer ("trusted third party") mode of CrypTen: B. Knott, S.
//     Venkataraman, A. Hannun, S. Sengupta, M. Ibrahim, L. van der Maaten,
//     "CrypTen: Secure Multi-Party Computation Meets Machine Learning",
//     NeurIPS 2021.
package dealer

// Package purchase makes what a data owner delivers after a selection
// provably what was evaluated: the data owner commits to every candidate of
// its pool before anything is revealed (Commit), each bootstrap point
// arrives with its opening (VerifyOpening), the purchased candidates are
// delivered as a bundle of openings (WriteBundle) that the model owner
// checks against the root it recorded (Verify), and an audit recomputes the
// delivered candidates' scores in the clear and checks them against the
// order the selection revealed (Audit). Package selection sends and records
// what the protocol needs (the root in the handshake, the openings with the
// bootstrap, the revealed order per phase); this package holds the
// commitment, the formats and the checks.
//
// # The commitment
//
// Cost: n leaf hashes (SHA-256 of 33 bytes plus the candidate's canonical
// bytes) and n − 1 inner hashes of 65 bytes, on all cores; 32·n bytes of
// memory for the levels above the leaves (BenchmarkCommit: 10^6 candidates
// of 784 bytes). An opening is its candidate, a 32-byte salt and
// ⌈log2 n⌉ hashes.
//
// Candidate i's leaf is SHA-256(0x00 ‖ salt_i ‖ item_i), item_i its
// canonical bytes (Items: package selection/pool's are the bytes mkpool
// writes); inner nodes are SHA-256(0x01 ‖ left ‖ right), the domain
// separation of RFC 6962 §2.1, on the tree of RFC 6962's shape (the last
// node of an odd level is carried up unchanged: the Merkle Tree Hash of
// RFC 6962 §2.1, split at the largest power of two below n). The root
// binds the head to the pool size: SHA-256("selectformer/purchase/
// pool-root/v1" ‖ n as 8 bytes little-endian ‖ head). salt_i is a PRF of a
// 32-byte seed only the data owner holds: AES-256 under the key
// SHA-256("selectformer/purchase/salt-key/v1" ‖ seed) of the blocks (i, 0)
// and (i, 1).
//
// Binding: opening a position to two different items (or salts) needs a
// SHA-256 collision. Hiding: without the seed every leaf is the hash of a
// 256-bit secret prefix and the item, so the root is independent of the
// pool for anyone who cannot guess a salt: a model owner cannot even test
// a guessed candidate (a public image it suspects the pool holds) against
// it, as it could against unsalted hashes. The bootstrap's openings reveal
// their own salts and sibling hashes, hashes of other salted leaves and
// nodes; the salts are outputs of a PRF at other points, so they say
// nothing about any other salt or candidate. The pool size n is public in
// a selection anyway.
//
// # Encodings
//
// An opening (AppendOpening, the records of a bundle and the bootstrap's
// openings message, EncodeOpenings) is, little-endian: the pool index
// (uint64), the salt (32 bytes), the item's length L (uint32), its L
// bytes, the path's length P (uint8) and P hashes, leaf level first. A
// bundle (BundleMagic "SFBUNDL1") is a 63-byte header (the root, the pool
// size, the record count, the items' kind and image shape; see
// bundleHeaderLen) followed by the records in ascending index. Every
// decoder bounds each length before it reads or allocates: an index below
// the pool size, an item of at most MaxItemBytes (an image of exactly the
// header's shape), a path of exactly PathLen(index, n) hashes, at most n
// records, nothing after the last; buffers grow with the bytes present.
// Verify streams a bundle record by record: its memory is one item, one
// path, a batch of the audit's items and a verdict per purchased
// candidate, whatever the bundle's size.
//
// # The audit
//
// Verify with an Audit recomputes each verified candidate's score for every
// phase it survived, in the clear (ProxyScorer: the phase's proxy,
// proxy.Proxy.Entropies, on the candidate's input), and checks it against
// the order the phase revealed of its survivors (PhaseOrder: the tiers of
// selection/topk's TopKTiers, which every comparison outcome of the phase
// implies, directly or through a chain of outcomes). An outcome "a ahead of
// b" is contradicted when the recomputed scores say s_b − s_a > τ. The
// secure forward's score differs from the plaintext one by at most ε, the
// documented bound of proxy/secure's ScoreError for the proxy's
// architecture (its truncations round either way; 0.01 nats for MLP-only
// proxies, 0.02 with an exact attention softmax, 0.05 with exact LayerNorm
// or score), so an honest outcome has s_b − s_a ≤ 2ε: ProxyTolerance is
// τ = 2ε, and near-ties within it are not evidence. Each candidate's
// report says how many outcomes it was checked in and how many its score
// contradicts; the suspects are the fewest candidates (greedily) whose
// scores explain every contradiction.
//
// What it catches: a data owner that evaluated other data than it delivers,
// or shifted its shares of some candidates' scores, moves those candidates
// in the revealed order; the audit flags a moved candidate whenever the
// move carries it past another purchased candidate of another tier by more
// than τ. Lifting t candidates drawn at random above all others (to sell
// them whatever they are worth) in a phase that orders all its survivors
// (a sort step: at most 91 candidates) lets each escape only if its own
// score was already above every honest purchased candidate's: probability
// 1/(n − t + 1), all t with probability 1/C(n, t)
// (TestAuditDetectsLiftedItems measures it, and the rates with coarser
// tiers: 6–7% per candidate for 200 → 60, 3% for 500 → 200).
//
// What it cannot catch: a shift that keeps a candidate's order against
// every other purchased candidate (lifting one just past the cut, below all
// of them, displaces an unpurchased candidate, whose score the model owner
// never learns); the order within a tier; differences within τ; anything
// about candidates not purchased. The bootstrap needs no audit: its points
// are checked against the commitment when they arrive.
package purchase

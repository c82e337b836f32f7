package ot

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// The extension's consistency check (Keller, Orsini and Scholl, "Actively
// Secure OT Extension with Optimal Overhead", CRYPTO 2015; Roy's
// SoftSpokenOT, §"Malicious security", whose output is the same
// IKNP-shaped correlation q_j = t_j ⊕ r_j·Δ, so KOS's check applies).
//
// Every extension call of n OTs extends n + checkOTs: the receiver draws
// the extra choice bits uniformly and nobody uses the extra OTs. After its
// corrections (and, in the first call, the trees) the receiver appends
//
//	x = Σ_j r_j·χ_j   and   t = Σ_j t_j·χ_j   (GF(2^128), j over all n + checkOTs)
//
// and the sender, before it uses any OT of the call, checks
// Σ_j q_j·χ_j = t ⊕ x·Δ; on a mismatch the call fails with
// ErrExtensionCheck and returns nothing.
//
// Challenges by Fiat–Shamir (as libOTe's KOS offers), so the check costs no
// round: χ_j = π(σ ⊕ (j, spokenCheck)) with σ the first 16 bytes of SHA-256
// over a domain string, the generator id, the call's first OT index, its
// size and every word of the receiver's message before x and t; π is the
// extension's fixed-key AES under the session's key, so χ differ per
// session too. The receiver fixes its whole message before χ exist, and χ
// changes unpredictably with any bit of it.
//
// What the check bounds. An honest receiver uses one choice vector r for
// every tree; one that uses another vector r′ on tree b (or sends trees
// whose leaves disagree) makes column i of the sender's q off by
// Δ_i·(r′ ⊕ r) in tree b's columns: q_j = t_j ⊕ r_j·Δ ⊕ e_j∗Δ, e_j nonzero
// only on tree b. The check then passes exactly when Σ χ_j·(e_j∗Δ) equals
// a value the receiver committed to in (x, t): when it guessed tree b's Δ
// bits right (it can then compute that sum), and otherwise only with
// probability 2^−128 over χ (a fixed nonzero linear form in the uniform
// χ_j). So a cheating receiver learns the Δ bits it guessed, and the
// guess is right with probability 2^−(bits guessed): it learns s bits of Δ
// with probability at most 2^−s, and otherwise the sender refuses, the
// provider ends (beaver.ErrCorrelationCheck: selection's
// AbortCorrelation) and nothing of the call was used. Grinding does not
// help: each try at a message is a fresh random-oracle draw of χ, which
// cancels a given deviation with probability 2^−128, so 2^t hash
// evaluations win with probability 2^(t−128).
//
// What the check hides. x reveals one GF(2^128) combination of the choice
// bits; the checkOTs uniform extra bits make it uniform (their χ_j span
// GF(2^128) over GF(2) except with probability about 2^(128−checkOTs), as
// in KOS's κ + s), and t = Σ q_j·χ_j ⊕ x·Δ is then fixed by x and what
// the sender holds. checkOTs = 256 ≥ κ + s = 128 + 40 (whole blocks of
// 128 OTs: the extension works block by block).

// checkOTs is the OTs each extension call adds for the check.
const checkOTs = 256

// checkWords is the check's words after the receiver's message: x and t.
const checkWords = 4

// spokenCheck is the tweak domain of the check's challenges (the high word
// of τ; the others are in softspoken.go).
const spokenCheck uint64 = 1 << 61

// ErrExtensionCheck is wrapped by a generator's error when the peer, as OT
// extension receiver, sent a call whose consistency check failed: its
// corrections do not follow one choice vector (an active receiver probing
// Δ by selective failure). It wraps beaver.ErrCorrelationCheck, so the
// Provider binds no session after it and selection aborts with
// AbortCorrelation. Nothing of the failed call was used.
var ErrExtensionCheck = fmt.Errorf("the OT extension's consistency check failed: the peer's corrections do not follow one choice vector: %w", beaver.ErrCorrelationCheck)

// challenge holds one call's challenges χ, made 128 at a time.
type challenge struct {
	pi   *fixedAES
	seed Block
	chi  [128]Block
}

// challengeIn is π's input for χ_{128c+i} before the tweak: (i, 0).
var challengeIn = func() (in [128]Block) {
	for i := range in {
		in[i] = Block{uint64(i), 0}
	}
	return in
}()

// newChallenge derives the seed σ of a call of generator gen whose first
// OT is j0, of total OTs, from the receiver's message msg (before x, t).
func newChallenge(pi *fixedAES, gen uint32, j0 uint64, total int, msg []uint64) *challenge {
	h := sha256.New()
	h.Write([]byte("selectformer/beaver/ot/v1/kos-challenge"))
	var hdr [20]byte
	binary.LittleEndian.PutUint32(hdr[:4], gen)
	binary.LittleEndian.PutUint64(hdr[4:12], j0)
	binary.LittleEndian.PutUint64(hdr[12:], uint64(total))
	h.Write(hdr[:])
	if share.HostLittleEndian() {
		h.Write(wordBytes(msg))
	} else {
		var b [8]byte
		for _, w := range msg {
			binary.LittleEndian.PutUint64(b[:], w)
			h.Write(b[:])
		}
	}
	d := h.Sum(nil)
	return &challenge{pi: pi, seed: Block{binary.LittleEndian.Uint64(d[:8]), binary.LittleEndian.Uint64(d[8:16])}}
}

// block returns χ_j for the OTs 128c … 128c+127 of the call:
// π(σ ⊕ τ_j) with τ_j = (j, spokenCheck), π the extension's fixed-key AES
// (the challenges need to be unpredictable before the message is fixed,
// not one-way, so no feed-forward; the tweak σ ⊕ (128c, spokenCheck) is
// folded into π's first round key). The slice is valid until the next call.
func (c *challenge) block(blk int) []Block {
	c.pi.encryptTweaked(c.chi[:], challengeIn[:], c.seed.xor(Block{uint64(128 * blk), spokenCheck}))
	return c.chi[:]
}

// checkReceiver returns x = Σ r_j·χ_j and t = Σ t_j·χ_j over the call's
// rows t and choice bits (one per row, 64 per word).
func checkReceiver(ch *challenge, rows []Block, choices []uint64) (x, t Block) {
	var sum gfSum
	for c := range len(rows) / 128 {
		chi := ch.block(c)
		sum.mulAdd(rows[128*c:128*c+128], chi)
		for h := range 2 { // branch-free on the choice bits
			w := choices[2*c+h]
			for _, v := range chi[64*h : 64*h+64] {
				m := -(w & 1)
				w >>= 1
				x.Lo ^= v.Lo & m
				x.Hi ^= v.Hi & m
			}
		}
	}
	return x, sum.reduce()
}

// checkSender reports whether Σ q_j·χ_j = t ⊕ x·Δ for the sender's rows q.
func checkSender(ch *challenge, rows []Block, delta, x, t Block) bool {
	var sum gfSum
	for c := range len(rows) / 128 {
		sum.mulAdd(rows[128*c:128*c+128], ch.block(c))
	}
	return sum.reduce() == t.xor(gfMul(x, delta))
}

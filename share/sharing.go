package share

import "fmt"

// Additive sharing over Z_2^64: a secret x is split as x = x0 + x1 (mod 2^64),
// party i holding xi. Each share alone is uniformly random.
//
// Input sharing costs no communication for the PRG-derived share: the owner of
// x and the other party both hold a seed (agreed beforehand); the other party's
// share is the PRG stream itself, which it expands locally with PeerShare, and
// the owner keeps x minus that stream (OwnerShare). Only the seed was ever
// exchanged.

// OwnerShare sets dst = x − r where r is the next len(x) words of prg: the
// owner's share of x when the other party's share is r. prg must be the stream
// the other party expands with PeerShare. dst may alias x.
func OwnerShare(dst, x []uint64, prg *PRG) error {
	if len(dst) != len(x) {
		return fmt.Errorf("share: OwnerShare: %d words for %d-word secret", len(dst), len(x))
	}
	// r is made and subtracted a chunk at a time (an L1-sized scratch
	// buffer), not as a second len(x)-word slice: no allocation, no
	// zeroing, and each chunk of stream is read back while still cached.
	r := GetWords(ownerShareChunk)
	for len(x) > 0 {
		n := min(len(x), ownerShareChunk)
		c := r[:n]
		prg.Fill(c)
		d, xs := dst[:n], x[:n]
		for i, v := range xs {
			d[i] = v - c[i]
		}
		dst, x = dst[n:], x[n:]
	}
	PutWords(r)
	return nil
}

// ownerShareChunk is the number of words of stream OwnerShare makes at a
// time (8 KiB).
const ownerShareChunk = 1 << 10

// PeerShare sets dst to the next len(dst) words of prg: the share of a secret
// it does not know, held by the party that did not provide the input.
func PeerShare(dst []uint64, prg *PRG) { prg.Fill(dst) }

// Split returns fresh shares (x0, x1) of x using prg for the randomness; for
// tests and for a dealer that makes both parties' material.
func Split(x []uint64, prg *PRG) (x0, x1 []uint64) {
	x1 = prg.Words(len(x))
	x0 = make([]uint64, len(x))
	_ = SubVec(x0, x, x1)
	return x0, x1
}

// Reconstruct sets dst = s0 + s1, the secret from its two shares.
func Reconstruct(dst, s0, s1 []uint64) error {
	if err := AddVec(dst, s0, s1); err != nil {
		return fmt.Errorf("share: reconstruct: %w", err)
	}
	return nil
}

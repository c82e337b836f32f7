//go:build !purego

package he

import "golang.org/x/sys/cpu"

// macLimbsAVX2 is macLimbs's kernel in AVX2 (VPMULUDQ on 28-bit halves),
// on groups of four slots. Implemented in mac_amd64.s.
//
//go:noescape
func macLimbsAVX2(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)

// macLimbsAVX512 is the same kernel in AVX-512 (eight slots a group).
// Implemented in mac_amd64.s.
//
//go:noescape
func macLimbsAVX512(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)

// macLimbsAVX512Pairs is macLimbsAVX512 for an evaluation index constant
// on aligned runs of four slots only (NW = 4): the upper four lanes of a
// group take their own a_t. Implemented in mac_amd64.s.
//
//go:noescape
func macLimbsAVX512Pairs(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)

// normalizeLimbsAVX512 is accumulators.normalizeTile's loop over n words
// of limb groups of eight slots (n a multiple of 48), for a modulus q with
// 2^53 < q ≤ 2^56 and qinv = 1/q. Implemented in mac_amd64.s.
//
//go:noescape
func normalizeLimbsAVX512(limbs *uint64, n int, q uint64, qinv float64)

// haveNormalizeAVX512 reports whether the CPU runs normalizeLimbsAVX512
// (AVX-512 F and DQ: VPMULLQ and the conversions between quadwords and
// doubles).
var haveNormalizeAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// maskBelowAVX512 is maskAllBelow's loop in AVX-512 for n a multiple of
// 8: it masks c[:n] in place and reports whether a masked word is ≥ q.
// Implemented in mac_amd64.s.
//
//go:noescape
func maskBelowAVX512(c *uint64, n int, mask, q uint64) bool

// haveMacAVX2 reports whether the CPU runs macLimbsAVX2.
var haveMacAVX2 = cpu.X86.HasAVX2

// haveMacAVX512 reports whether the CPU runs macLimbsAVX512.
var haveMacAVX512 = cpu.X86.HasAVX512F

// macLimbsAsm adds the limb sums of the terms over the slots of idx (a
// multiple of the group width g, 4 or 8) to limbs (6 words a slot, in
// groups of g slots) by macLimbsAVX2 or, for g = 8, macLimbsAVX512, or
// macLimbsAVX512Pairs when run, the length of idx's runs of one value, is
// below 8.
func macLimbsAsm(terms []macTerm, idx []uint16, limbs []uint64, g, run int) {
	n := len(idx)
	limbs = limbs[:6*n]
	if n == 0 || len(terms) == 0 {
		return
	}
	switch {
	case g == 8 && run >= 8:
		macLimbsAVX512(&terms[0], len(terms), &idx[0], n, &limbs[0])
	case g == 8:
		macLimbsAVX512Pairs(&terms[0], len(terms), &idx[0], n, &limbs[0])
	default:
		macLimbsAVX2(&terms[0], len(terms), &idx[0], n, &limbs[0])
	}
}

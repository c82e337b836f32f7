//go:build !purego

package he

import "golang.org/x/sys/cpu"

// macLimbsAVX2 is macLimbs's kernel in AVX2 (VPMULUDQ on 28-bit halves).
// Implemented in mac_amd64.s.
//
//go:noescape
func macLimbsAVX2(terms *macTerm, nterms int, idx *uint16, n int, limbs *uint64)

// haveMacAVX2 reports whether the CPU runs macLimbsAVX2.
var haveMacAVX2 = cpu.X86.HasAVX2

// macLimbsAsm adds the limb sums of the terms over the slots of idx (a
// multiple of 4) to limbs (6 words a slot) by macLimbsAVX2.
func macLimbsAsm(terms []macTerm, idx []uint16, limbs []uint64) {
	n := len(idx)
	limbs = limbs[:6*n]
	if n == 0 || len(terms) == 0 {
		return
	}
	macLimbsAVX2(&terms[0], len(terms), &idx[0], n, &limbs[0])
}

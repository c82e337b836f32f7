package he

import "math/bits"

// The HE weight product's inner loop, the sum Σ_r a_r(ζ_x)·w_r[x] over the
// terms r of an output block at every NTT slot x, is party 1's largest cost
// in a dealer-free selection (≈ 60% of its CPU at sst2's defaults). Two
// kernels compute it, bit-identical: macGather, portable, one 64×64→128-bit
// multiply per product accumulated in (lo, hi) words; and, on amd64 with
// AVX2, macLimbsAVX2, which splits every operand (a residue below 2^56)
// into 28-bit halves and sums the four half products of four slots at a
// time with VPMULUDQ in 64-bit lanes, over up to maxMacTerms terms at once,
// before foldLimbs adds the sums to the same (lo, hi) accumulators. The
// slots of a group of four share a_r when the packing's NW ≥ 4 (the
// evaluation index is constant on runs of NW slots), which macLimbs needs.

// macTerm is one term of macLimbsAVX2: a_r's evaluations (indexed by the
// slot's evaluation index) and the two weight polynomials' residues from
// the tile's first slot. The pointers stay within slices the caller holds
// for the call.
type macTerm struct {
	ev, w0, w1 *uint64
}

// maxMacTerms is the most terms macLimbsAVX2 sums at once. For operands
// below 2^56 a term adds below 2^56 to a lane's L and H and below 2^57 to
// its M (two half products), so 64 terms stay below 2^63: no lane wraps.
// So few also keep the terms' weight rows (two per term, 32 bytes of each
// per group of four slots) in the first-level cache between the two groups
// of a cache line.
const maxMacTerms = 64

// macSubTile is the most slots macLimbsAVX2 covers per call: its limb sums
// (six words a slot) stay in the first-level cache until folded.
const macSubTile = 512

// useMacAVX2 selects macLimbsAVX2 (tests switch it off to compare).
var useMacAVX2 = haveMacAVX2

// macLimbsFits reports whether macLimbs can run a tile: AVX2, an
// evaluation index constant on aligned groups of four slots (NW ≥ 4), and
// residues below 2^56 (every modulus of the scheme is below 2^55).
func macLimbsFits(nw, T int, Q []uint64) bool {
	if !useMacAVX2 || nw < 4 || T%4 != 0 {
		return false
	}
	for _, q := range Q {
		if q > 1<<56 {
			return false
		}
	}
	return true
}

// foldLimbs adds the limb sums of macLimbsAVX2 (groups of 24 words: L0, M0,
// H0, L1, M1, H1, four lanes each) to the 128-bit accumulators (lo0, hi0)
// and (lo1, hi1): value = L + 2^28·M + 2^56·H.
func foldLimbs(lo0, hi0, lo1, hi1, limbs []uint64) {
	n := len(lo0)
	hi0, lo1, hi1 = hi0[:n], lo1[:n], hi1[:n]
	limbs = limbs[:6*n]
	for x := range n {
		b := x/4*24 + x%4
		addLimbs(&lo0[x], &hi0[x], limbs[b], limbs[b+4], limbs[b+8])
		addLimbs(&lo1[x], &hi1[x], limbs[b+12], limbs[b+16], limbs[b+20])
	}
}

// addLimbs adds L + 2^28·M + 2^56·H to the 128-bit (*lo, *hi).
func addLimbs(lo, hi *uint64, l, m, h uint64) {
	v, c := bits.Add64(l, m<<28, 0)
	t := m>>36 + c
	v, c = bits.Add64(v, h<<56, 0)
	t += h>>8 + c
	*lo, c = bits.Add64(*lo, v, 0)
	*hi += t + c
}

package he

import (
	"math/bits"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// The HE weight product's inner loop, the sum Σ_r a_r(ζ_x)·w_r[x] over the
// terms r of an output block at every NTT slot x, is party 1's largest cost
// in a dealer-free selection (≈ 60% of its CPU at sst2's defaults). Two
// kernels compute it, with the same residues in the end: macGather,
// portable, one 64×64→128-bit multiply per product summed in (lo, hi)
// words; and, on amd64 with AVX2, macLimbsAVX2, which splits every operand
// (a residue below 2^56) into 28-bit halves and sums the half products of
// four slots at a time with VPMULUDQ in 64-bit lanes, kept as limb sums
// L + 2^28·M + 2^56·H (normalized every maxMacTerms terms, reduced mod q at
// the end). The four slots of a group share a_r when the packing's NW ≥ 4
// (the evaluation index is constant on runs of NW slots).

// macTerm is one term of macLimbsAVX2: a_r's evaluations (indexed by the
// slot's evaluation index) and the two weight polynomials' residues from
// the tile's first slot. The pointers stay within slices the caller holds
// for the call.
type macTerm struct {
	ev, w0, w1 *uint64
}

// maxMacTerms is the most terms added to limb sums between two
// normalizations (accumulators.normalize leaves L, M < 2^28 and H < q <
// 2^56). For operands below 2^56 a term adds below 2^56 to a lane's L and
// H and below 2^57 to its M (two half products), so after 64 terms every
// lane is below 2^28 + 2^63: none wraps.
const maxMacTerms = 64

// macSubTile is the most slots macLimbsAVX2 covers per call: its limb sums
// (six words a slot) stay in the first-level cache until folded.
const macSubTile = 512

// useMacAVX2 selects macLimbsAVX2 (tests switch it off to compare).
var useMacAVX2 = haveMacAVX2

// accumulators are the sums of an encrypted product's output blocks,
// before their reduction mod each q, in the NTT domain: 128-bit words
// (lo, hi) for macGather, or limb sums for macLimbsAVX2.
type accumulators struct {
	s     *Scheme
	nb    int
	lo    []uint64 // 128-bit: index ((bi·2+comp)·L+p)·N+x
	hi    []uint64
	limbs []uint64 // limb sums: the 24-word group of x at ((bi·L+p)·N+x)/4·24
	// pending is the most terms any block's limb sums took since the last
	// normalization.
	pending int
}

// newAccumulators returns zero accumulators for nb blocks of a product
// packed with NW columns per ciphertext and tiled by T slots: limb sums
// where macLimbsAVX2 can run it (AVX2, NW ≥ 4 so that the evaluation index
// is constant on aligned groups of four slots, moduli ≤ 2^56), 128-bit
// words otherwise. The operands' bound holds against a lying peer too: the
// weight ciphertexts party 0 uploads are refused unless every residue is
// below its modulus (readPoly, ErrMalformed), the rest is computed here,
// and even a lazy NTT's outputs below 2q stay below 2^56.
func (s *Scheme) newAccumulators(nb, nw, T int) *accumulators {
	a := &accumulators{s: s, nb: nb}
	n := nb * 2 * len(s.p.Q) * s.n
	fits := useMacAVX2 && nw >= 4 && T%4 == 0
	for _, q := range s.p.Q {
		fits = fits && q <= 1<<56
	}
	if fits {
		a.limbs = make([]uint64, 3*n)
	} else {
		a.lo, a.hi = make([]uint64, n), make([]uint64, n)
	}
	return a
}

// addTerms adds the terms ra ≤ r < re (of the chunk from r0, nr terms, whose
// evaluations are ev and seeded halves c1) of the weights w to the limb
// sums of the tile of slots [x0, x0+len(idx)) of residue p, for every
// output block w covers, over sub-tiles of macSubTile slots.
func (a *accumulators) addTerms(idx []uint16, p, x0, r0, ra, re, nr, rb, cb, cbOut int, w *Weights, c1 []ring.Poly, ev []uint64) {
	L, N, D := len(a.s.p.Q), a.s.n, w.plan.d
	T := len(idx)
	terms := make([]macTerm, 0, re-ra)
	for jb := range cb {
		for ib := range rb {
			bo := ib*cbOut + w.jb0 + jb // the output block
			base := ((bo*L+p)*N + x0) / 4 * 24
			for xs := 0; xs < T; xs += macSubTile {
				xe := min(T, xs+macSubTile)
				terms = terms[:0]
				for r := ra; r < re; r++ {
					terms = append(terms, macTerm{
						ev: &ev[((ib*nr+r-r0)*L+p)*D],
						w0: &w.c0[r*cb+jb].Coeffs[p][x0+xs],
						w1: &c1[(r-r0)*cb+jb].Coeffs[p][x0+xs],
					})
				}
				macLimbsAsm(terms, idx[xs:xe], a.limbs[base+xs/4*24:base+xe/4*24])
			}
		}
	}
}

// normalize carries every limb sum's L and M into the next limb and
// reduces H mod q (a multiple of 2^56·q less, the same residue), so that
// maxMacTerms more terms fit.
func (a *accumulators) normalize() {
	L, N := len(a.s.p.Q), a.s.n
	parallel(a.nb*L, func(t int) {
		q := a.s.p.Q[t%L]
		g := a.limbs[t*N/4*24 : (t+1)*N/4*24]
		for b := 0; b < len(g); b += 24 {
			for c := b; c < b+24; c += 12 {
				for lane := c; lane < c+4; lane++ {
					l, m, h := g[lane], g[lane+4], g[lane+8]
					m += l >> 28
					h += m >> 28
					g[lane], g[lane+4], g[lane+8] = l&(1<<28-1), m&(1<<28-1), h%q
				}
			}
		}
	})
	a.pending = 0
}

// reduce writes block bi's sums of residue p mod q into c0 and c1.
func (a *accumulators) reduce(bi, p int, c0, c1 []uint64) {
	L, N, q := len(a.s.p.Q), a.s.n, a.s.p.Q[p]
	if a.limbs == nil {
		o0, o1 := ((bi*2)*L+p)*N, ((bi*2+1)*L+p)*N
		reduce(c0, a.lo[o0:o0+N], a.hi[o0:o0+N], q)
		reduce(c1, a.lo[o1:o1+N], a.hi[o1:o1+N], q)
		return
	}
	g := a.limbs[(bi*L+p)*N/4*24 : (bi*L+p+1)*N/4*24]
	for x := range N {
		b := x/4*24 + x%4
		var lo, hi uint64
		addLimbs(&lo, &hi, g[b], g[b+4], g[b+8])
		c0[x] = bits.Rem64(hi, lo, q)
		lo, hi = 0, 0
		addLimbs(&lo, &hi, g[b+12], g[b+16], g[b+20])
		c1[x] = bits.Rem64(hi, lo, q)
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

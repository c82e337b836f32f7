package he

import (
	"math/bits"
)

// The HE weight product's inner loop, the sum Σ_r a_r(ζ_x)·w_r[x] over the
// terms r of an output block at every NTT slot x, is party 1's largest cost
// in a dealer-free selection (a fifth to a third of its CPU at sst2's
// defaults, depending on the CPU). Three kernels compute it, with the same
// residues in the end: macGather, portable, one 64×64→128-bit multiply per product summed in (lo, hi)
// words; and, on amd64 with AVX2, macLimbsAVX2, which splits every operand
// (a residue below 2^56) into 28-bit halves and sums the half products of
// four slots at a time with VPMULUDQ in 64-bit lanes, kept as limb sums
// L + 2^28·M + 2^56·H (normalized every maxMacTerms terms, reduced mod q at
// the end). The four slots of a group share a_r when the packing's NW ≥ 4
// (the evaluation index is constant on runs of NW slots). Where the CPU
// has AVX-512 and NW ≥ 8, macLimbsAVX512 does the same on groups of eight
// slots in 512-bit registers, and for NW = 4 macLimbsAVX512Pairs, whose
// groups take one a_r for each half (such products ran on AVX2 at two
// thirds of the speed: issue 38).

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

// macSubTile is the most slots a kernel call covers, and macCallRows the
// most weight rows (terms): the call's limb sums (six words a slot, 24
// KiB) stay in the first-level cache until folded, and its rows' weights
// of these slots (c0 and c1, 128 KiB each) in the second-level cache while
// every row block reads them. A selection reads c0 from memory, a chunk of
// 8·macSubTile bytes a row and call; 512 slots of 32 rows ran that read
// 10% faster than 256 of 64 (bench/TWOHOSTS.md, step 29).
const (
	macSubTile  = 512
	macCallRows = 32
)

// A kernel call's terms must fit between two normalizations.
var _ [maxMacTerms - macCallRows]struct{}

// useMacAVX2 selects the limb kernels, useMacAVX512 the AVX-512 one among
// them (tests switch them off to compare).
var (
	useMacAVX2   = haveMacAVX2
	useMacAVX512 = haveMacAVX512
	// useNormalizeAVX512 selects normalizeLimbsAVX512 for the limb groups
	// of eight (a twentieth of a dealer-free data owner's CPU went to the
	// portable loop's divisions: issue 38).
	useNormalizeAVX512 = haveNormalizeAVX512
)

// MacKernel names the kernel of the HE weight product's sum that this
// process runs for packings of NW ≥ 8 (sst2's): "avx512" (macLimbsAVX512),
// "avx2" (macLimbsAVX2) or "portable" (macGather). A compute bound of the
// dealer-free mode depends on it as much as on the processor.
func MacKernel() string {
	switch {
	case useMacAVX2 && useMacAVX512:
		return "avx512"
	case useMacAVX2:
		return "avx2"
	}
	return "portable"
}

// accumulators are the sums of an encrypted product's output blocks,
// before their reduction mod each q, in the NTT domain: 128-bit words
// (lo, hi) for macGather, or limb sums for macLimbsAVX2.
type accumulators struct {
	s     *Scheme
	nb    int
	lo    []uint64 // 128-bit: index ((bi·2+comp)·L+p)·N+x
	hi    []uint64
	limbs []uint64 // limb sums: 6 words a slot, in groups of g slots (below)
	// g is the slots of a limb group: the group of x at word 6·g·⌊i/g⌋ for
	// i = (bi·L+p)·N+x holds L0, M0, H0, L1, M1, H1 (c0's sums, then
	// c1's), g lanes each; 8 for macLimbsAVX512, 4 for macLimbsAVX2.
	g int
	// run is the length of the packing's runs of one evaluation index (NW)
	// that the kernel may assume, at most 8: with g = 8 and run = 4 the
	// kernel takes two a_t a group (macLimbsAVX512Pairs).
	run int
	// pending is the most terms any block's limb sums took since the last
	// normalization.
	pending int
}

// newAccumulators returns zero accumulators for nb blocks of a product
// packed with NW columns per ciphertext and tiled by T slots: limb sums
// where macLimbsAVX2 can run it (AVX2, NW ≥ 4 so that the evaluation index
// is constant on aligned groups of four slots, moduli ≤ 2^56), 128-bit
// words otherwise; groups of eight slots where the CPU has AVX-512
// (macLimbsAVX512 for NW ≥ 8, macLimbsAVX512Pairs for NW = 4).
// The operands' bound holds against a lying peer too: the
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
		a.limbs = s.passSums(3 * n)
		a.g, a.run = 4, min(nw, 8)
		if useMacAVX512 && T%8 == 0 {
			a.g = 8
		}
	} else {
		w := s.passSums(2 * n)
		a.lo, a.hi = w[:n:n], w[n:]
	}
	return a
}

// passSums returns n zero words of the admitted pass's sums. The sums are
// scratch of up to tens of MiB a pass (1.5 MiB an output block); the
// memory is the Scheme's, kept from pass to pass (only the holder of the
// admission, runPass, calls this), because from the shared free lists a
// dealer-free data owner's passes got fresh memory after most collections
// (a collection every 0.1–0.5 s in sst2's phase 3) and faulted its pages in
// again.
func (s *Scheme) passSums(n int) []uint64 {
	if cap(s.sums) < n {
		s.sums = make([]uint64, n)
		return s.sums
	}
	w := s.sums[:n]
	clear(w)
	return w
}

// release drops the accumulators' hold on the pass's sums once every
// output block is reduced (finishBlock); a must not be used afterwards.
func (a *accumulators) release() {
	a.limbs, a.lo, a.hi = nil, nil, nil
}

// addTerms adds the terms ra ≤ r < re (of the chunk from r0, nr rows, whose
// evaluations are ev) of the weights w to the sums of the tile of slots
// [x0, x0+len(idx)) of residue p, for every output block w covers: column
// block by column block and macSubTile slots at a time, the weights'
// halves of those slots loaded once (loadHalves, into sc) for all the row
// blocks.
func (a *accumulators) addTerms(idx []uint16, p, x0, r0, ra, re, nr, rb, cbOut int, w *Weights, ev []uint64, sc *halvesScratch) {
	L, N, D := len(a.s.p.Q), a.s.n, w.plan.d
	T := len(idx)
	var buf [macCallRows]macTerm // on the stack: a slice made here cost 1% of party 1's CPU
	for jb := range w.cb {
		for xs := 0; xs < T; xs += macSubTile {
			xe := min(T, xs+macSubTile)
			n := xe - xs
			w.loadHalves(sc, ra, re, jb, p, x0+xs, n)
			for ib := range rb {
				bo := ib*cbOut + w.jb0 + jb // the output block
				if a.limbs == nil {
					o0 := ((bo*2)*L+p)*N + x0 + xs
					o1 := ((bo*2+1)*L+p)*N + x0 + xs
					for r := ra; r < re; r++ {
						e := ev[((ib*nr+r-r0)*L+p)*D : ((ib*nr+r-r0)*L+p+1)*D]
						w0 := w.c0[r*w.cb+jb].Coeffs[p][x0+xs : x0+xe]
						macGather(a.lo[o0:o0+n], a.hi[o0:o0+n], a.lo[o1:o1+n], a.hi[o1:o1+n], e, idx[xs:xe], w0, sc.rows[r-ra])
					}
					continue
				}
				terms := buf[:0]
				for r := ra; r < re; r++ {
					terms = append(terms, macTerm{
						ev: &ev[((ib*nr+r-r0)*L+p)*D],
						w0: &w.c0[r*w.cb+jb].Coeffs[p][x0+xs],
						w1: &sc.rows[r-ra][0],
					})
				}
				base := ((bo*L+p)*N + x0 + xs) * 6
				macLimbsAsm(terms, idx[xs:xe], a.limbs[base:base+6*n], a.g, a.run)
			}
		}
	}
}

// normalizeTile carries every limb sum's L and M of slots [x0, x0+T) of
// residue p, in every block, into the next limb and reduces H mod q (a
// multiple of 2^56·q less, the same residue), so that maxMacTerms more
// terms fit.
func (a *accumulators) normalizeTile(p, x0, T int) {
	L, N, w, q := len(a.s.p.Q), a.s.n, a.g, a.s.p.Q[p]
	vector := useNormalizeAVX512 && w == 8 && q > 1<<53
	qinv := 1 / float64(q)
	for bo := range a.nb {
		base := ((bo*L+p)*N + x0) * 6
		g := a.limbs[base : base+6*T]
		if vector {
			normalizeLimbsAVX512(&g[0], len(g), q, qinv)
			continue
		}
		for b := 0; b < len(g); b += 6 * w {
			for c := b; c < b+6*w; c += 3 * w {
				for lane := c; lane < c+w; lane++ {
					l, m, h := g[lane], g[lane+w], g[lane+2*w]
					m += l >> 28
					h += m >> 28
					g[lane], g[lane+w], g[lane+2*w] = l&(1<<28-1), m&(1<<28-1), h%q
				}
			}
		}
	}
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
	g, w := a.limbs[(bi*L+p)*N*6:(bi*L+p+1)*N*6], a.g
	for x := range N {
		b := x/w*6*w + x%w
		var lo, hi uint64
		addLimbs(&lo, &hi, g[b], g[b+w], g[b+2*w])
		c0[x] = bits.Rem64(hi, lo, q)
		lo, hi = 0, 0
		addLimbs(&lo, &hi, g[b+3*w], g[b+4*w], g[b+5*w])
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

package he

import (
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/selectformer/selectformer/share"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// Output is P1's per-candidate message: one ciphertext per output block
// (row block ib of MW rows, column block jb of NW columns, in row-major
// block order), each switched to the moduli 2^LogQ0 (c0, only the
// rows·cols coefficients that hold outputs) and 2^LogQ1 (c1, all N
// coefficients).
type Output struct {
	M, N   int    // shape of the product
	Layout Layout // blocks
	blocks []outBlock
	s      *Scheme
}

type outBlock struct {
	c0 []u128 // rows·cols, row-major within the block
	c1 []u128 // N
}

// MulMasked is P1's step for one candidate: with its A (m×k, row-major) and
// mask R (m×n), which becomes its share C1 := R, it returns encryptions of
// A·B − R under P0's key: the homomorphic product with the encrypted
// weights, minus R, re-randomised with a fresh encryption of zero under the
// public key, flooded and switched down. rnd supplies 32 bytes of key
// material for the re-randomisation and flood (crypto/rand when nil).
// Weights placed at an offset (EncryptWeightsAt) give an m×(Off+n) product
// whose first Off columns are −R's.
func (s *Scheme) MulMasked(w *Weights, A []uint64, m int, R []uint64, rnd io.Reader) (*Output, error) {
	if w == nil || w.sc != s {
		return nil, errScheme
	}
	out, _, err := s.mulMaskedRaw([]Term{{W: w, A: A}}, w.layout, m, w.off+w.n, R, rnd, true)
	return out, err
}

// MulMaskedLayout is MulMasked with the output blocks of layout l instead
// of the weights' own: l.NW and l.KW must be the weights' (the packing of
// B), while
// l.MW, the rows of A per block, may be any valid one (MW ≤ RowBudget(k), for
// which the noise budget holds, and MW·NW ≤ N). Weights encrypted once thus
// serve products with any number of rows m at the layout ChooseLayout(m, k, n)
// picks whenever its NW is theirs. The output's Layout is l (pass it to
// DecryptShares).
func (s *Scheme) MulMaskedLayout(w *Weights, l Layout, A []uint64, m int, R []uint64, rnd io.Reader) (*Output, error) {
	if w == nil || w.sc != s {
		return nil, errScheme
	}
	return s.MulMaskedSum([]Term{{W: w, A: A}}, l, m, w.off+w.n, R, rnd)
}

// Term is one product of a sum MulMaskedSum encrypts: the plaintext matrix
// A (m×W.K(), row-major) times the encrypted weights W, whose columns are
// the product's columns [W.Off(), W.Off()+W.N()).
type Term struct {
	W *Weights
	A []uint64
}

// MulMaskedSum is MulMaskedLayout for a sum of products: it returns
// encryptions of Σ_t A_t·B_t − R, an m×n product with layout l (R m×n),
// each B_t placed at its columns (zero elsewhere). Every W_t must be packed
// with l.NW and l.KW and lie within the n columns, and the inner dimensions must
// satisfy Σ_t K_t ≤ MaxInner and l.MW ≤ RowBudget(Σ_t K_t): the noise of an
// output coefficient is that of one product with inner dimension Σ_t K_t,
// so the noise budget and the flood are those of such a product.
func (s *Scheme) MulMaskedSum(terms []Term, l Layout, m, n int, R []uint64, rnd io.Reader) (*Output, error) {
	out, _, err := s.mulMaskedRaw(terms, l, m, n, R, rnd, true)
	return out, err
}

// rawBlock is an output ciphertext before the modulus switch (tests).
type rawBlock struct{ c0, c1 ring.Poly }

// mulMaskedRaw does MulMaskedSum; with final false it also returns the
// output ciphertexts in R_Q before the switch (for the view tests).
func (s *Scheme) mulMaskedRaw(terms []Term, l Layout, m, n int, R []uint64, rnd io.Reader, final bool) (*Output, []rawBlock, error) {
	if len(terms) == 0 {
		return nil, nil, fmt.Errorf("he: mul masked: no product: %w", errShape)
	}
	if m < 1 || m > 1<<24 || n < 1 || n > maxDim || len(R) != m*n {
		return nil, nil, fmt.Errorf("he: mul masked: R %d words for %d×%d: %w", len(R), m, n, errShape)
	}
	inner := 0
	for i, t := range terms {
		w := t.W
		if w == nil || w.sc != s {
			return nil, nil, errScheme
		}
		if w.pk != terms[0].W.pk {
			return nil, nil, fmt.Errorf("he: mul masked: product %d with weights loaded under another public key: %w", i, errShape)
		}
		if w.layout.NW != l.NW || w.layout.kw() != l.kw() {
			return nil, nil, fmt.Errorf("he: mul masked: layout %v for weights packed with NW = %d, KW = %d: %w", l, w.layout.NW, w.layout.kw(), errShape)
		}
		if len(t.A) != m*w.k || w.off+w.n > n {
			return nil, nil, fmt.Errorf("he: mul masked: product %d: A %d words for %d×%d, columns [%d, %d) of %d: %w", i, len(t.A), m, w.k, w.off, w.off+w.n, n, errShape)
		}
		inner += w.k
	}
	if inner > s.p.MaxInner {
		return nil, nil, fmt.Errorf("he: mul masked: inner dimensions sum to %d, above MaxInner %d: %w", inner, s.p.MaxInner, errShape)
	}
	if err := s.checkLayout(l, inner); err != nil {
		return nil, nil, err
	}
	key, err := keyFrom(rnd)
	if err != nil {
		return nil, nil, err
	}
	j := &mulJob{terms: terms, l: l, m: m, n: n, R: R, key: key, final: final,
		rb: ceilDiv(m, l.MW), done: make(chan struct{})}
	s.admit(j)
	return j.out, j.raws, nil
}

// finishBlock turns output block bi of job j, whose sums are block ab of
// acc, into its ciphertext: the reduction mod each q, the re-randomisation
// with a fresh encryption of zero under the public key, − Δ·R and the
// flood on the coefficients that hold outputs, and the switch down.
func (s *Scheme) finishBlock(j *mulJob, acc *accumulators, ab, bi int) {
	l, m, n, R, key := j.l, j.m, j.n, j.R, j.key
	cbOut := ceilDiv(n, l.NW)
	L, N := len(s.p.Q), s.n
	pk0, pk1 := j.terms[0].W.pk0, j.terms[0].W.pk1
	ib, jb := bi/cbOut, bi%cbOut
	rows := min(l.MW, m-ib*l.MW)
	c0, c1, u := s.scratchPoly(), s.scratchPoly(), s.scratchPoly() // each overwritten whole below
	defer s.putScratch(c0, c1, u)
	res := make([]uint64, L)
	cols := min(l.NW, n-jb*l.NW)
	for p := range s.p.Q {
		acc.reduce(ab, p, c0.Coeffs[p], c1.Coeffs[p])
	}
	// Re-randomise: + (u·p0 + e0, u·p1 + e1). With a flood, e0 is left
	// out: every coefficient of c0 that is sent is flooded (below), which
	// hides e0 as it hides the product's own noise (a flood of 2^floodLog
	// is within |S|·B_e/2^floodLog of itself plus e0 over the |S| sent
	// coefficients), and the others are not sent.
	s.sampleTernary(prngFor(key, domMask, uint64(3*bi)), u, nil)
	s.rq.NTT(u, u)
	s.rq.MulCoeffsBarrettThenAdd(u, pk0, c0)
	s.rq.MulCoeffsBarrettThenAdd(u, pk1, c1)
	s.rq.INTT(c0, c0)
	s.rq.INTT(c1, c1)
	e := prngFor(key, domMask, uint64(3*bi+1))
	if s.floodLog == 0 {
		s.addGaussian(e, c0, false)
	}
	s.addGaussian(e, c1, false)
	// − Δ·R and + flood on the coefficients that hold outputs, the flood
	// read floodChunk coefficients at a time (24 bytes each).
	fl := prngFor(key, domMask, uint64(3*bi+2))
	var fb [floodChunk * 24]byte
	for i := range rows {
		for x0 := 0; x0 < cols; x0 += floodChunk {
			nx := min(floodChunk, cols-x0)
			if s.floodLog > 0 {
				if _, err := io.ReadFull(fl, fb[:24*nx]); err != nil {
					panic(err) // the keyed PRNG does not fail
				}
			}
			for x := x0; x < x0+nx; x++ {
				pos := i*l.stride() + x
				rv := R[(ib*l.MW+i)*n+jb*l.NW+x]
				var f [3]uint64
				if s.floodLog > 0 {
					f = floodWords(fb[24*(x-x0):], s.floodLog+1)
				}
				for p, q := range s.p.Q {
					v := subMod(c0.Coeffs[p][pos], s.encode(rv, p), q)
					if s.floodLog > 0 {
						v = subMod(addMod(v, s.words3(f, p), q), s.powFlood[p], q)
					}
					c0.Coeffs[p][pos] = v
				}
			}
		}
	}
	if !j.final {
		j.raws[bi] = rawBlock{*c0.CopyNew(), *c1.CopyNew()}
	}
	ob := outBlock{c0: make([]u128, rows*cols), c1: make([]u128, N)}
	for i := range rows {
		for x := range cols {
			for p := range L {
				res[p] = c0.Coeffs[p][i*l.stride()+x]
			}
			ob.c0[i*cols+x] = s.modSwitch(&s.ms0, res)
		}
	}
	for x := range N {
		for p := range L {
			res[p] = c1.Coeffs[p][x]
		}
		ob.c1[x] = s.modSwitch(&s.ms1, res)
	}
	j.out.blocks[bi] = ob
}

// chunkBytes bounds the evaluations of A's plaintexts that one pass of
// accumulate's tiles reads (rb·chunk·L·D words). Each pass sweeps every
// accumulator of the product once, a tile at a time, so the fewer passes
// the fewer times the limb sums (1.5 MiB an output block, 36 MiB for sst2
// phase 3's G product) leave the caches: with the seeded halves
// regenerated a tile at a time (step 15 of bench/TWOHOSTS.md) nothing but
// the evaluations bounds a pass, and sst2's products take one. Before,
// the halves of a chunk were regenerated whole (256 KiB each) into 32 MiB
// of scratch: 42 rows a pass for G, 19 sweeps (154 under 4 MiB, step 14).
const chunkBytes = 32 << 20

// chunkRows returns how many of a product's kb rows of weight ciphertexts
// one pass of accumulate takes, for rb row blocks of A and plaintexts of D
// distinct evaluations: within chunkBytes of evaluations.
func (s *Scheme) chunkRows(kb, rb, D int) int {
	return max(1, min(kb, chunkBytes/(rb*len(s.p.Q)*D*8)))
}

// accumulate adds the homomorphic product t.A·Enc(B_t) to the accumulators
// of an output with rb row blocks and cbOut column blocks (tiles of T
// coefficients). Each tile of each residue is one task: it takes the
// weight rows macCallRows at a time (normalizing its own limb sums every
// maxMacTerms), column block by column block and macSubTile slots at a time,
// with the weights' halves of those slots (regenerated from the seed for
// compact weights) and then every row block's terms, so that the tile's
// sums and the slots' weights stay in cache while every row block reads
// them.
func (s *Scheme) accumulate(t Term, l Layout, m, rb, cbOut int, acc *accumulators, T int) {
	w, A := t.W, t.A
	k := w.k
	kw, kb := l.kw(), l.innerBlocks(w.k) // r below counts blocks of KW rows of B
	L, N := len(s.p.Q), s.n
	plan := w.plan
	D := plan.d
	tiles := N / T
	// The NTT of A's plaintext for (ib, r) takes D distinct values, its
	// evaluations ev, computed for a chunk of r at a time (≤ chunkBytes).
	chunk := s.chunkRows(kb, rb, D)
	// Scratch: evaluate writes every word a chunk reads.
	ev := share.GetWords(rb * chunk * L * D)
	defer share.PutWords(ev)
	for r0 := 0; r0 < kb; r0 += chunk {
		r1 := min(kb, r0+chunk)
		nr := r1 - r0
		parallel(rb*nr, func(t int) {
			ib, rr := t/nr, t%nr
			rows := min(l.MW, m-ib*l.MW)
			var col []uint64 // A's plaintext as a polynomial in Y = X^NW (Y^D = −1)
			if kw == 1 {
				col = make([]uint64, rows)
				for i := range rows {
					col[i] = A[(ib*l.MW+i)*k+r0+rr]
				}
			} else {
				// A[i][r·KW+t] at Y^(i·KW−t): for i = 0, t > 0 that is
				// −Y^(D−t).
				col = make([]uint64, D)
				for i := range rows {
					for t := range min(kw, k-(r0+rr)*kw) {
						v := A[(ib*l.MW+i)*k+(r0+rr)*kw+t]
						if e := i*kw - t; e >= 0 {
							col[e] = v
						} else {
							col[D+e] = -v
						}
					}
				}
			}
			s.evaluate(plan, col, ev[(ib*nr+rr)*L*D:(ib*nr+rr+1)*L*D])
		})
		start := acc.pending // every tile takes the same rows: the same count
		parallel(L*tiles, func(t int) {
			p, x0 := t/tiles, (t%tiles)*T
			sc := halvesPool.Get().(*halvesScratch)
			defer halvesPool.Put(sc)
			pending := start
			for ra := r0; ra < r1; ra += macCallRows {
				re := min(r1, ra+macCallRows)
				if acc.limbs != nil && pending+re-ra > maxMacTerms {
					acc.normalizeTile(p, x0, T)
					pending = 0
				}
				acc.addTerms(plan.idx[p][x0:x0+T], p, x0, r0, ra, re, nr, rb, cbOut, w, ev, sc)
				pending += re - ra
			}
		})
		for ra := r0; ra < r1; ra += macCallRows {
			re := min(r1, ra+macCallRows)
			if acc.pending+re-ra > maxMacTerms {
				acc.pending = 0
			}
			acc.pending += re - ra
		}
	}
}

// halvesScratch holds one task's regenerated seeded halves: macCallRows
// rows of macSubTile slots (128 KiB).
type halvesScratch struct {
	words [macCallRows * macSubTile]uint64
	rows  [macCallRows][]uint64
}

// halvesPool recycles accumulate's scratch across tasks and products.
var halvesPool = sync.Pool{New: func() any { return new(halvesScratch) }}

// loadHalves points sc.rows[r−ra], for ra ≤ r < re, at slots [x, x+n) of
// residue p of the seeded half of weight ciphertext (r, jb): the expanded
// weights' own, or, for compact weights, regenerated from the seed into
// sc (n ≤ macSubTile, x even).
func (w *Weights) loadHalves(sc *halvesScratch, ra, re, jb, p, x, n int) {
	for r := ra; r < re; r++ {
		if w.c1 != nil {
			sc.rows[r-ra] = w.c1[r*w.cb+jb].Coeffs[p][x : x+n]
			continue
		}
		d := sc.words[(r-ra)*n : (r-ra+1)*n]
		seededRow(w.seedKey, domWeights, uint64(r*w.cb+jb), uint64(p*w.sc.n+x), w.sc.p.Q[p], d)
		sc.rows[r-ra] = d
	}
}

// floodChunk is how many coefficients' floods finishBlock reads from
// its stream at a time.
const floodChunk = 128

// floodWords reads a uniform integer of nb bits (little-endian words) from b.
func floodWords(b []byte, nb int) [3]uint64 {
	var f [3]uint64
	for i := range 3 {
		f[i] = binary.LittleEndian.Uint64(b[8*i:])
		switch {
		case nb >= 64:
			nb -= 64
		case nb > 0:
			f[i] &= 1<<nb - 1
			nb = 0
		default:
			f[i] = 0
		}
	}
	return f
}

// macGather accumulates ev[idx[x]]·w0[x] into (lo0, hi0) and
// ev[idx[x]]·w1[x] into (lo1, hi1), 128-bit.
func macGather(lo0, hi0, lo1, hi1, ev []uint64, idx []uint16, w0, w1 []uint64) {
	n := len(idx)
	lo0, hi0, lo1, hi1 = lo0[:n], hi0[:n], lo1[:n], hi1[:n]
	w0, w1 = w0[:n], w1[:n]
	for x, j := range idx {
		av := ev[j]
		h, l := bits.Mul64(av, w0[x])
		var c uint64
		lo0[x], c = bits.Add64(lo0[x], l, 0)
		hi0[x] += h + c
		h, l = bits.Mul64(av, w1[x])
		lo1[x], c = bits.Add64(lo1[x], l, 0)
		hi1[x] += h + c
	}
}

// reduce writes (hi, lo) mod q into dst.
func reduce(dst, lo, hi []uint64, q uint64) {
	for x := range dst {
		dst[x] = bits.Rem64(hi[x], lo[x], q)
	}
}

// evalPlan turns a column segment of A, placed at X^(i·NW), into its NTT
// cheaply. With NW a power of two and D = N/NW, the plaintext is a'(X^NW)
// for a' of degree < D, and its NTT at the points ω_x takes only the D values
// a'(ζ_j), ζ_j = ω_x^NW the roots of Y^D = −1: a size-D evaluation (direct
// for small D, lattigo's NTT of degree D otherwise) replaces the size-N NTT,
// and idx maps each of the N slots to its ζ_j.
type evalPlan struct {
	d     int
	zeta  [][]uint64 // [p][j], direct evaluation
	idx   [][]uint16 // [p][x] → j
	small *ring.Ring // degree-D ring, when D > directMax
}

// maxPrimes is the most moduli a Params may have (NewScheme).
const maxPrimes = 16

// directMax is the largest D evaluated directly (D·len(col) products per
// prime); larger D go through lattigo's NTT of degree D. On the AMD EPYC
// Zen 3 a full column took 2.4 µs directly against 0.7 µs by the NTT at
// D = 8, and 34.5 µs against 1.8 µs at D = 32 (NW = 256, the packing of
// sst2's largest products), where the direct sums were 7% of the data
// owner's CPU.
const directMax = 4

func (s *Scheme) newEvalPlan(nw int) (*evalPlan, error) {
	L := len(s.p.Q)
	pl := &evalPlan{d: s.n / nw, zeta: make([][]uint64, L), idx: make([][]uint16, L)}
	for p := range L {
		pl.idx[p] = make([]uint16, s.n)
	}
	if pl.d == 1 { // a is a constant
		for p := range L {
			pl.zeta[p] = []uint64{1}
		}
		return pl, nil
	}
	v := s.rq.NewPoly()
	for p := range L {
		v.Coeffs[p][nw] = 1
	}
	s.rq.NTT(v, v)
	if pl.d > directMax {
		var err error
		if pl.small, err = ring.NewRing(pl.d, s.p.Q); err != nil {
			return nil, fmt.Errorf("he: evaluation ring of degree %d: %w", pl.d, err)
		}
		y := pl.small.NewPoly()
		for p := range L {
			y.Coeffs[p][1] = 1
		}
		pl.small.NTT(y, y)
		for p := range L {
			pl.zeta[p] = y.Coeffs[p]
		}
	} else {
		for p := range L {
			seen := map[uint64]bool{}
			for _, z := range v.Coeffs[p] {
				if !seen[z] {
					seen[z] = true
					pl.zeta[p] = append(pl.zeta[p], z)
				}
			}
		}
	}
	for p := range L {
		pos := make(map[uint64]int, pl.d)
		for j, z := range pl.zeta[p] {
			pos[z] = j
		}
		if len(pos) != pl.d || len(pl.zeta[p]) != pl.d {
			return nil, fmt.Errorf("he: %d evaluation points for NW = %d, want %d", len(pos), nw, pl.d)
		}
		for x, z := range v.Coeffs[p] {
			j, ok := pos[z]
			if !ok {
				return nil, fmt.Errorf("he: NTT slot %d of X^%d is no root of Y^%d+1", x, nw, pl.d)
			}
			pl.idx[p][x] = uint16(j)
		}
	}
	return pl, nil
}

// evaluate writes into dst[p·D+j] the value a'(ζ_{p,j}) for the signed
// column segment col (a' = Σ_i col[i]·Y^i). The NTT runs in place in dst
// (a data owner evaluates millions of columns a selection: a polynomial
// allocated for each was a tenth of its allocations).
func (s *Scheme) evaluate(pl *evalPlan, col []uint64, dst []uint64) {
	D := pl.d
	if pl.small != nil {
		var rows [maxPrimes][]uint64
		a := ring.Poly{Coeffs: rows[:len(s.p.Q)]}
		for p, q := range s.p.Q {
			r := dst[p*D : (p+1)*D]
			for i, v := range col {
				r[i] = liftCentered(v, q)
			}
			clear(r[len(col):])
			a.Coeffs[p] = r
		}
		pl.small.NTT(a, a)
		return
	}
	lift := make([]uint64, len(col))
	for p, q := range s.p.Q {
		br := s.bred[p]
		for i, v := range col {
			lift[i] = liftCentered(v, q)
		}
		for j, z := range pl.zeta[p] {
			var acc uint64
			for i := len(lift) - 1; i >= 0; i-- {
				acc = ring.BRed(acc, z, q, br) + lift[i]
				if acc >= q {
					acc -= q
				}
			}
			dst[p*D+j] = acc
		}
	}
}

// scratchPoly returns a polynomial of R_Q with arbitrary coefficients, for
// a caller that overwrites it whole: the re-randomisation's and the
// regenerated seeded halves', 256 KiB each and several per product (a
// tenth of a data owner's allocations before they were reused).
func (s *Scheme) scratchPoly() ring.Poly {
	if p, ok := s.scratch.Get().(*ring.Poly); ok {
		return *p
	}
	return s.rq.NewPoly()
}

// putScratch gives polynomials of scratchPoly back for reuse.
func (s *Scheme) putScratch(ps ...ring.Poly) {
	for i := range ps {
		p := ps[i]
		s.scratch.Put(&p)
	}
}

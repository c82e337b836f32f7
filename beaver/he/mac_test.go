package he

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// macCase builds nt terms over n slots: evaluations of D values and two
// weight rows per term, drawn below bound (or all bound−1 with extreme),
// and an evaluation index constant on runs of nw slots.
func macCase(rng *rand.Rand, nt, n, D, nw int, bound uint64, extreme bool) (ev, w0, w1 [][]uint64, idx []uint16) {
	draw := func() uint64 {
		if extreme {
			return bound - 1
		}
		return rng.Uint64N(bound)
	}
	for range nt {
		e, a, b := make([]uint64, D), make([]uint64, n), make([]uint64, n)
		for j := range e {
			e[j] = draw()
		}
		for x := range n {
			a[x], b[x] = draw(), draw()
		}
		ev, w0, w1 = append(ev, e), append(w0, a), append(w1, b)
	}
	idx = make([]uint16, n)
	for x := range idx {
		idx[x] = uint16((x / nw * 7) % D)
	}
	return ev, w0, w1, idx
}

// limbKernel is one limb kernel: its group width g and the shortest run
// of one evaluation index it takes (macLimbsAsm's run).
type limbKernel struct{ g, run int }

// limbKernels are the limb kernels this CPU runs: macLimbsAVX2 and, with
// AVX-512, macLimbsAVX512 and macLimbsAVX512Pairs.
func limbKernels() []limbKernel {
	if haveMacAVX512 {
		return []limbKernel{{4, 4}, {8, 8}, {8, 4}}
	}
	return []limbKernel{{4, 4}}
}

// limbWidths are the limb group widths this CPU's kernels run: 4
// (macLimbsAVX2) and, with AVX-512, 8 (macLimbsAVX512).
func limbWidths() []int {
	if haveMacAVX512 {
		return []int{4, 8}
	}
	return []int{4}
}

// TestMacKernelsAgree: each limb kernel the CPU runs (AVX2, AVX-512, and
// AVX-512 with two evaluations a group), folded, gives the portable
// kernel's 128-bit sums bit for bit — for term counts below, at and across
// the kernels' pass of four, up to maxMacTerms, for random residues below
// the largest modulus and for operands at 2^56 − 1, the bound under which
// maxMacTerms terms cannot wrap a lane. A case runs with each kernel whose
// group width divides its slots and whose runs of one evaluation index
// its own runs cover.
func TestMacKernelsAgree(t *testing.T) {
	if !haveMacAVX2 {
		t.Skip("no AVX2 kernel on this CPU or build")
	}
	qmax := uint64(0)
	for _, q := range DefaultParams().Q {
		qmax = max(qmax, q)
	}
	for _, c := range []struct {
		name    string
		nt, n   int
		nw      int
		bound   uint64
		extreme bool
	}{
		{"one-term", 1, 4, 4, qmax, false},
		{"one-term/eight-slots", 1, 8, 8, qmax, false},
		{"three", 3, 64, 4, qmax, false},
		{"four", 4, 64, 8, qmax, false},
		{"five", 5, 128, 16, qmax, false},
		{"max-terms", maxMacTerms, 512, 64, qmax, false},
		{"max-terms/extreme-q", maxMacTerms, 64, 8, qmax, true},
		{"max-terms/2^56-1", maxMacTerms, 64, 8, 1 << 56, true},
		{"nw=4/five", 5, 64, 4, qmax, false},
		{"nw=4/max-terms", maxMacTerms, 256, 4, qmax, false},
		{"nw=4/max-terms/2^56-1", maxMacTerms, 64, 4, 1 << 56, true},
	} {
		for _, k := range limbKernels() {
			if c.n%k.g != 0 || c.nw < k.run {
				continue
			}
			t.Run(fmt.Sprintf("%s/g=%d/run=%d", c.name, k.g, k.run), func(t *testing.T) { macKernelCase(t, c.nt, c.n, c.nw, k, c.bound, c.extreme) })
		}
	}
}

// macKernelCase is one case of TestMacKernelsAgree: nt terms over n slots
// by kernel kern.
func macKernelCase(t *testing.T, nt, n, nw int, kern limbKernel, bound uint64, extreme bool) {
	g := kern.g
	rng := rand.New(rand.NewPCG(uint64(nt), uint64(n)))
	const D = 32
	ev, w0, w1, idx := macCase(rng, nt, n, D, nw, bound, extreme)
	var want, got [4][]uint64
	for i := range 4 {
		want[i] = make([]uint64, n)
		got[i] = make([]uint64, n)
		for x := range n { // start from nonzero sums, as after a fold
			want[i][x] = rng.Uint64()
			got[i][x] = want[i][x]
		}
	}
	for k := range nt {
		macGather(want[0], want[1], want[2], want[3], ev[k], idx, w0[k], w1[k])
	}
	terms := make([]macTerm, nt)
	for k := range terms {
		terms[k] = macTerm{&ev[k][0], &w0[k][0], &w1[k][0]}
	}
	limbs := make([]uint64, 6*n)
	macLimbsAsm(terms, idx, limbs, g, kern.run)
	for x := range n {
		b := x/g*6*g + x%g
		addLimbs(&got[0][x], &got[1][x], limbs[b], limbs[b+g], limbs[b+2*g])
		addLimbs(&got[2][x], &got[3][x], limbs[b+3*g], limbs[b+4*g], limbs[b+5*g])
	}
	for i := range 4 {
		for x := range n {
			if got[i][x] != want[i][x] {
				t.Fatalf("accumulator %d, slot %d: %#x, want %#x", i, x, got[i][x], want[i][x])
			}
		}
	}
}

// TestMulMaskedKernelsAgree: party 1's whole encrypted product is the same
// byte for byte with each limb kernel the CPU runs (AVX2; AVX-512 where
// NW ≥ 8) and with the portable one (the same randomness), over packings
// the kernels take (NW ≥ 4: more terms than a fold's maxMacTerms, KW rows
// per ciphertext, compact weights whose sum is cut into chunks, a sum of
// two products), one only the AVX2 kernel takes (NW = 4) and one left to
// the portable kernel (NW = 2).
func TestMulMaskedKernelsAgree(t *testing.T) {
	if !haveMacAVX2 {
		t.Skip("no AVX2 kernel on this CPU or build")
	}
	if testing.Short() {
		// 2 s in the plain suite, 16 s under -race (which runs -short), where
		// the kernel's writes are not instrumented and TestCorrectness already
		// runs the same path in parallel.
		t.Skip("the plain suite runs it")
	}
	s := defaultScheme
	for i, c := range []struct {
		name    string
		m, k, n int
		l       Layout
		compact bool
		sum     bool
	}{
		{"nw4", 3, 5, 9, Layout{MW: 2, NW: 4}, false, false},
		{"terms-above-fold", 5, 150, 40, Layout{MW: 4, NW: 64}, false, false},
		{"kw", 4, 200, 16, Layout{MW: 4, NW: 16, KW: 128}, false, false},
		{"compact", 6, 70, 300, Layout{MW: 3, NW: 256}, true, false},
		{"sum-of-two", 4, 30, 40, Layout{MW: 4, NW: 32}, false, true},
		{"nw2-portable", 3, 6, 5, Layout{MW: 2, NW: 2}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			rnd := newDetRand(uint64(i))
			sk, pk, err := s.KeyGen(rnd)
			if err != nil {
				t.Fatal(err)
			}
			load := func(k, n int) *Weights {
				ew, err := s.EncryptWeights(sk, fill(rng, k*n, "random"), k, n, c.l, rnd)
				if err != nil {
					t.Fatal(err)
				}
				w, err := s.LoadWeights(pk, ew)
				if c.compact {
					w, err = s.LoadWeightsCompact(pk, ew)
				}
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			terms := []Term{{W: load(c.k, c.n), A: fill(rng, c.m*c.k, "edges")}}
			if c.sum {
				terms = append(terms, Term{W: load(c.k, c.n), A: fill(rng, c.m*c.k, "random")})
			}
			R := fill(rng, c.m*c.n, "random")
			run := func(avx2, avx512 bool) []byte {
				defer func(v, w bool) { useMacAVX2, useMacAVX512 = v, w }(useMacAVX2, useMacAVX512)
				useMacAVX2, useMacAVX512 = avx2, avx512
				out, err := s.MulMaskedSum(terms, c.l, c.m, c.n, R, newDetRand(99))
				if err != nil {
					t.Fatal(err)
				}
				b, err := out.AppendBinary(nil)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			p := run(false, false)
			if a := run(true, false); !bytes.Equal(a, p) {
				t.Fatalf("AVX2 and portable outputs differ (%d and %d bytes)", len(a), len(p))
			}
			if !haveMacAVX512 {
				return
			}
			if a := run(true, true); !bytes.Equal(a, p) {
				t.Fatalf("AVX-512 and portable outputs differ (%d and %d bytes)", len(a), len(p))
			}
		})
	}
}

// BenchmarkMacKernels: the kernels on the same sum, 64 terms over 512
// slots (two weight rows a term), as accumulate runs them; SetBytes counts
// one byte a product (MB/s reads as M products a second).
func BenchmarkMacKernels(b *testing.B) {
	const nt, n, D = maxMacTerms, macSubTile, 32
	rng := rand.New(rand.NewPCG(1, 2))
	ev, w0, w1, idx := macCase(rng, nt, n, D, 16, DefaultParams().Q[0], false)
	b.Run("portable", func(b *testing.B) {
		lo0, hi0, lo1, hi1 := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		b.SetBytes(2 * nt * n)
		for b.Loop() {
			for k := range nt {
				macGather(lo0, hi0, lo1, hi1, ev[k], idx, w0[k], w1[k])
			}
		}
	})
	for _, k := range []struct {
		name   string
		g, run int
		have   bool
	}{{"avx2", 4, 4, haveMacAVX2}, {"avx512", 8, 8, haveMacAVX512}, {"avx512-pairs", 8, 4, haveMacAVX512}} {
		b.Run(k.name, func(b *testing.B) {
			if !k.have {
				b.Skip("no such kernel on this CPU or build")
			}
			limbs := make([]uint64, 6*n)
			terms := make([]macTerm, nt)
			for i := range terms {
				terms[i] = macTerm{&ev[i][0], &w0[i][0], &w1[i][0]}
			}
			b.SetBytes(2 * nt * n)
			for b.Loop() {
				clear(limbs)
				macLimbsAsm(terms, idx, limbs, k.g, k.run)
			}
		})
	}
}

// TestEvaluateMatchesHorner: the evaluations of A's plaintexts are the
// values of a'(X^NW) at every NTT slot, whichever way evaluate takes (the
// direct sums for D ≤ directMax, the NTT of degree D above): each slot's
// value is checked against Horner's rule at that slot's root, for columns
// of every length up to D with entries anywhere in [0, 2^64).
func TestEvaluateMatchesHorner(t *testing.T) {
	s := defaultScheme
	rng := rand.New(rand.NewPCG(5, 6))
	for _, nw := range []int{4096, 2048, 1024, 512, 256, 64, 8} {
		pl, err := s.newEvalPlan(nw)
		if err != nil {
			t.Fatal(err)
		}
		D := pl.d
		// ω_x^NW at every slot x: the NTT of X^NW.
		v := s.rq.NewPoly()
		for p := range s.p.Q {
			v.Coeffs[p][nw] = 1
		}
		s.rq.NTT(v, v)
		for _, n := range []int{1, D / 2, D} {
			col := make([]uint64, max(n, 1))
			for i := range col {
				col[i] = rng.Uint64()
			}
			col[0] = 1<<63 | 5 // a negative lift
			dst := make([]uint64, len(s.p.Q)*D)
			s.evaluate(pl, col, dst)
			for p, q := range s.p.Q {
				for x := 0; x < s.n; x += 1 + x%97 {
					z := v.Coeffs[p][x]
					var want uint64
					for i := len(col) - 1; i >= 0; i-- {
						want = mulMod(want, z, q)
						want = addMod(want, liftCentered(col[i], q), q)
					}
					if got := dst[p*D+int(pl.idx[p][x])]; got != want {
						t.Fatalf("NW = %d (D = %d), %d entries, prime %d, slot %d: %d, Horner gives %d", nw, D, len(col), p, x, got, want)
					}
				}
			}
		}
	}
}

// BenchmarkEvaluate is the evaluation of one column of A's plaintext (D
// entries) at the D roots, for each packing width NW of sst2's products
// (D = N/NW: 8, 32, 128): one op is one column over the four primes.
func BenchmarkEvaluate(b *testing.B) {
	s := defaultScheme
	for _, nw := range []int{1024, 256, 64} {
		pl, err := s.newEvalPlan(nw)
		if err != nil {
			b.Fatal(err)
		}
		col := make([]uint64, pl.d)
		for i := range col {
			col[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
		}
		dst := make([]uint64, len(s.p.Q)*pl.d)
		b.Run(fmt.Sprintf("D=%d", pl.d), func(b *testing.B) {
			for b.Loop() {
				s.evaluate(pl, col, dst)
			}
		})
	}
}

// TestChunkRows: one pass of accumulate's tiles takes all of a product's
// weight rows (each pass sweeps every accumulator of the product once)
// unless their evaluations exceed chunkBytes. The shapes are sst2's at the
// defaults (batches of 16): phase 3's folded G product (769 rows, 9 row
// blocks, D = 32), which took 5 rows a pass when the regenerated halves
// of a chunk bounded it under 4 MiB (10 bytes of accumulators swept a
// multiply-add) and 42 under 32 MiB; a product of 128 rows at D = 2048
// (7 row blocks); a row whose evaluations alone exceed the scratch.
func TestChunkRows(t *testing.T) {
	s := defaultScheme
	L, N := len(s.p.Q), s.n
	rowBeyond := chunkBytes/(L*N*8) + 1 // row blocks whose evaluations at D = N exceed the scratch
	for _, c := range []struct {
		name      string
		kb, rb, D int
		want      int
	}{
		{"phase-3 G", 769, 9, 32, 769},
		{"D = 2048", 128, 7, 2048, 73},
		{"short", 5, 9, 32, 5},
		{"a row beyond the scratch", 40, rowBeyond, N, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := s.chunkRows(c.kb, c.rb, c.D)
			if got != c.want {
				t.Fatalf("%d rows a pass, want %d", got, c.want)
			}
			if got > 1 && got*c.rb*L*c.D*8 > chunkBytes {
				t.Errorf("%d rows a pass: evaluations beyond %d bytes", got, chunkBytes)
			}
		})
	}
}

// TestMaskAllBelow checks maskAllBelow on each path this CPU has (the
// portable loop, and maskBelowAVX512 with the portable tail) against a
// word-by-word reference: lengths around the AVX-512 loop's 32- and 8-word
// steps, a word ≥ q (or q itself, or mask's largest) at every position in
// turn, and words that are below q only once masked.
func TestMaskAllBelow(t *testing.T) {
	paths := []bool{false}
	if haveMacAVX512 {
		paths = append(paths, true)
	}
	saved := useMaskAVX512
	t.Cleanup(func() { useMaskAVX512 = saved })
	const q = 1<<54 - 33 // a 54-bit modulus: mask 2^54 − 1
	mask := uint64(1)<<54 - 1
	rng := rand.New(rand.NewPCG(3, 4))
	for _, avx := range paths {
		useMaskAVX512 = avx
		for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 71} {
			for bad := -1; bad < n; bad++ {
				for _, v := range []uint64{q, mask, q + 1<<54, 1<<63 | (q - 1)} {
					c := make([]uint64, n)
					for i := range c {
						c[i] = rng.Uint64()%q | rng.Uint64()>>54<<54 // below q once masked
					}
					if bad >= 0 {
						c[bad] = v
					}
					want := make([]uint64, n)
					ok := true
					for i, w := range c {
						want[i] = w & mask
						ok = ok && want[i] < q
					}
					if got := maskAllBelow(c, mask, q); got != ok || !slices.Equal(c, want) {
						t.Fatalf("avx512=%v n=%d word %d = %#x: reported %v (want %v), words masked right: %v",
							avx, n, bad, v, got, ok, slices.Equal(c, want))
					}
				}
			}
		}
	}
}

// TestNormalizeLimbsAVX512: the AVX-512 normalization gives the portable
// loop's limbs word for word, for every modulus of the default parameters,
// on limb sums drawn below 2^63 (the most maxMacTerms terms leave), at
// 2^63 − 1, at zero and at multiples of q and of 2^28, and on H within two
// of a multiple of q, where the quotient estimate can exceed the quotient
// by one (the first correction; an estimate one below, which the second
// would catch, did not occur for these moduli in 2·10^7 random tries).
func TestNormalizeLimbsAVX512(t *testing.T) {
	if !haveNormalizeAVX512 {
		t.Skip("no AVX-512 DQ on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for _, q := range DefaultParams().Q {
		const groups = 64
		limbs := make([]uint64, 48*groups)
		special := []uint64{0, 1, 1<<63 - 1, q, q - 1, q + 1, 2 * q, (1<<63 - 1) / q * q, (1<<63-1)/q*q - 1, 1 << 28, 1<<28 - 1}
		for i := range limbs {
			if i%3 == 0 {
				limbs[i] = special[rng.IntN(len(special))]
			} else {
				limbs[i] = rng.Uint64N(1 << 63)
			}
		}
		// The second half's H are k·q + d, d in [−2, 2], with L = M = 0:
		// quotients next to a whole number, where the estimate rounds
		// either way.
		for b := len(limbs) / 2; b < len(limbs); b += 48 {
			for c := b; c < b+48; c += 24 {
				for lane := c; lane < c+8; lane++ {
					k := 1 + rng.Uint64N((1<<63)/q-1)
					limbs[lane], limbs[lane+8], limbs[lane+16] = 0, 0, k*q+uint64(rng.IntN(5))-2
				}
			}
		}
		want := slices.Clone(limbs)
		for b := 0; b < len(want); b += 48 {
			for c := b; c < b+48; c += 24 {
				for lane := c; lane < c+8; lane++ {
					l, m, h := want[lane], want[lane+8], want[lane+16]
					m += l >> 28
					h += m >> 28
					want[lane], want[lane+8], want[lane+16] = l&(1<<28-1), m&(1<<28-1), h%q
				}
			}
		}
		normalizeLimbsAVX512(&limbs[0], len(limbs), q, 1/float64(q))
		for i := range limbs {
			if limbs[i] != want[i] {
				t.Fatalf("q = %#x, word %d: %#x, want %#x", q, i, limbs[i], want[i])
			}
		}
	}
}

// BenchmarkNormalizeTile: one tile's normalization (macSubTile slots of
// one output block and residue), portable and AVX-512.
func BenchmarkNormalizeTile(b *testing.B) {
	s := defaultScheme
	const T = macSubTile
	for _, c := range []struct {
		name   string
		vector bool
		have   bool
	}{{"portable", false, true}, {"avx512", true, haveNormalizeAVX512}} {
		b.Run(c.name, func(b *testing.B) {
			if !c.have || !haveMacAVX512 {
				b.Skip("no such kernel on this CPU or build")
			}
			defer func(v bool) { useNormalizeAVX512 = v }(useNormalizeAVX512)
			useNormalizeAVX512 = c.vector
			a := &accumulators{s: s, nb: 1, g: 8, limbs: make([]uint64, 6*len(s.p.Q)*s.n)}
			rng := rand.New(rand.NewPCG(1, 3))
			for i := range a.limbs {
				a.limbs[i] = rng.Uint64N(1 << 62)
			}
			b.SetBytes(6 * 8 * T)
			for b.Loop() {
				a.normalizeTile(0, 0, T)
			}
		})
	}
}

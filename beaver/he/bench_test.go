package he

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuSeconds returns the process's user+system CPU time, so the benchmarks
// can report CPU seconds per op, which a loaded shared machine inflates far
// less than wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// loop runs f b.N times, reports CPU seconds per op and returns them.
func loop(b *testing.B, f func() error) (cpuPerOp float64) {
	c0 := cpuSeconds()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	cpuPerOp = (cpuSeconds() - c0) / float64(b.N)
	b.ReportMetric(cpuPerOp, "cpu-s/op")
	return cpuPerOp
}

// The sst2 phase-0 product: 128×768 · 768×1536.
const benchM, benchK, benchN = 128, 768, 1536

type benchState struct {
	s    *Scheme
	l    Layout
	sk   *SecretKey
	pk   *PublicKey
	B    []uint64
	A, R []uint64
	ew   *EncryptedWeights
	w    *Weights
	out  *Output
}

var (
	benchOnce sync.Once
	bench     benchState
)

func benchSetup(b *testing.B) *benchState {
	benchOnce.Do(func() {
		s := defaultScheme
		l, err := s.ChooseLayout(benchM, benchK, benchN)
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(3, 4))
		st := benchState{s: s, l: l, B: make([]uint64, benchK*benchN), A: make([]uint64, benchM*benchK), R: make([]uint64, benchM*benchN)}
		for _, v := range [][]uint64{st.B, st.A, st.R} {
			for i := range v {
				v[i] = rng.Uint64()
			}
		}
		rnd := newDetRand(9)
		if st.sk, st.pk, err = s.KeyGen(rnd); err != nil {
			b.Fatal(err)
		}
		if st.ew, err = s.EncryptWeights(st.sk, st.B, benchK, benchN, l, rnd); err != nil {
			b.Fatal(err)
		}
		if st.w, err = s.LoadWeights(st.pk, st.ew); err != nil {
			b.Fatal(err)
		}
		if st.out, err = s.MulMasked(st.w, st.A, benchM, st.R, rnd); err != nil {
			b.Fatal(err)
		}
		bench = st
	})
	if bench.s == nil {
		b.Fatal("setup failed")
	}
	return &bench
}

// BenchmarkEncryptWeights is P0's one-time encryption of a 768×1536 mask.
func BenchmarkEncryptWeights(b *testing.B) {
	st := benchSetup(b)
	sz := st.s.Sizes(benchM, benchK, benchN, st.l)
	loop(b, func() error { _, err := st.s.EncryptWeights(st.sk, st.B, benchK, benchN, st.l, nil); return err })
	b.ReportMetric(float64(sz.Weights), "weight-bytes")
	b.ReportMetric(float64(sz.WeightCiphertexts), "weight-cts")
}

// BenchmarkLoadWeights is P1's one-time preparation (seed expansion).
func BenchmarkLoadWeights(b *testing.B) {
	st := benchSetup(b)
	loop(b, func() error { _, err := st.s.LoadWeights(st.pk, st.ew); return err })
	b.ReportMetric(float64(st.s.Sizes(benchM, benchK, benchN, st.l).P1Weights), "p1-bytes")
}

// BenchmarkDecodeEncryptedWeights is P1's decoding of one uploaded weight
// matrix (768×1536 with sst2's layout: 2,304 seeded ciphertexts, 218 bits a
// coefficient); one op is the whole matrix.
func BenchmarkDecodeEncryptedWeights(b *testing.B) {
	st := benchSetup(b)
	data, err := st.ew.AppendBinary(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	loop(b, func() error { _, err := st.s.DecodeEncryptedWeights(data, benchK, benchN); return err })
}

// BenchmarkMulMasked is P1's per-candidate step for 128×768·768×1536; one
// op is one candidate.
func BenchmarkMulMasked(b *testing.B) {
	st := benchSetup(b)
	sz := st.s.Sizes(benchM, benchK, benchN, st.l)
	loop(b, func() error { _, err := st.s.MulMasked(st.w, st.A, benchM, st.R, nil); return err })
	b.ReportMetric(float64(sz.Output), "bytes/candidate")
	b.ReportMetric(float64(sz.Output)/float64(sz.Dealer), "x-dealer")
}

// BenchmarkMulMaskedCompact is BenchmarkMulMasked with P1's compact
// weights (seeded halves regenerated per candidate, half the memory).
func BenchmarkMulMaskedCompact(b *testing.B) {
	st := benchSetup(b)
	w, err := st.s.LoadWeightsCompact(st.pk, st.ew)
	if err != nil {
		b.Fatal(err)
	}
	loop(b, func() error { _, err := st.s.MulMasked(w, st.A, benchM, st.R, nil); return err })
	b.ReportMetric(float64(st.s.Sizes(benchM, benchK, benchN, st.l).P1WeightsCompact), "p1-bytes")
}

// BenchmarkDecryptShares is P0's per-candidate step.
func BenchmarkDecryptShares(b *testing.B) {
	st := benchSetup(b)
	loop(b, func() error { _, err := st.s.DecryptShares(st.sk, st.out, benchM, benchN, st.l); return err })
}

// checkBench is the check of the sst2 product: its compressed plan's check
// outputs (ρ·A·(B·V) − R1 and −ρ·R·V − R1', one ciphertext of 64×40 each).
type checkBench struct {
	p      CheckedPlan
	terms  [][]Term // per check output
	masks  [][]uint64
	V, rho []uint64
	outs   []*Output
	weight WeightSizes // B·V and V, once
}

var (
	checkOnce sync.Once
	checkSt   checkBench
)

func checkSetup(b *testing.B) *checkBench {
	st := benchSetup(b)
	checkOnce.Do(func() {
		s := st.s
		p, err := s.PlanChecked(benchM, benchK, benchN)
		if err != nil || len(p.Outputs) < 2 {
			b.Fatalf("plan %+v: %v", p, err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		V := fill(rng, benchN*CheckColumns, "random")
		c := checkBench{p: p, V: V, rho: p.Rho([SeedSize]byte{4})}
		c.masks, _ = p.Masks(st.R, func(n int) []uint64 { return fill(rng, n, "random") })
		rnd := newDetRand(10)
		for i, o := range p.Outputs[1:] {
			var terms []Term
			for _, tm := range o.Terms {
				W, err := p.Matrix(tm, st.B, V)
				if err != nil {
					b.Fatal(err)
				}
				rows, cols := p.TermShape(tm)
				ew, err := s.EncryptWeightsAt(st.sk, W, rows, cols, tm.Off, o.Layout, [SeedSize]byte{3}, rnd)
				if err != nil {
					b.Fatal(err)
				}
				w, err := s.LoadWeights(st.pk, ew)
				if err != nil {
					b.Fatal(err)
				}
				ws := s.WeightSizes(rows, cols, tm.Off, o.Layout)
				c.weight.Bytes += ws.Bytes
				c.weight.Ciphertexts += ws.Ciphertexts
				c.weight.P1 += ws.P1
				c.weight.P1Compact += ws.P1Compact
				terms = append(terms, Term{W: w, A: p.Factor(i+1, tm, st.A, st.R, c.rho)})
			}
			out, err := s.MulMaskedSum(terms, o.Layout, o.Rows, o.Width, c.masks[i+1], rnd)
			if err != nil {
				b.Fatal(err)
			}
			c.terms = append(c.terms, terms)
			c.outs = append(c.outs, out)
		}
		checkSt = c
	})
	if checkSt.outs == nil {
		b.Fatal("setup failed")
	}
	return &checkSt
}

// BenchmarkCheckMulMasked is the work the check adds to P1's step for
// 128×768·768×1536 (the check outputs); compare BenchmarkMulMasked. It
// reports the bytes added per candidate and the one-time encryptions of
// B·V and V (V shared by every weight with 1536 columns).
func BenchmarkCheckMulMasked(b *testing.B) {
	st, c := benchSetup(b), checkSetup(b)
	var extra int64
	for _, v := range st.s.OutputSizes(c.p)[1:] {
		extra += v
	}
	loop(b, func() error {
		for i, o := range c.p.Outputs[1:] {
			if _, err := st.s.MulMaskedSum(c.terms[i], o.Layout, o.Rows, o.Width, c.masks[i+1], nil); err != nil {
				return err
			}
		}
		return nil
	})
	b.ReportMetric(float64(extra), "bytes/candidate")
	b.ReportMetric(float64(c.weight.Bytes), "weight-bytes")
	b.ReportMetric(float64(c.weight.P1), "p1-bytes")
}

// BenchmarkCheckResidual is the work the check adds to P0's step: decrypt
// the check outputs and compute C0·V − D.
func BenchmarkCheckResidual(b *testing.B) {
	st, c := benchSetup(b), checkSetup(b)
	C0, err := st.s.DecryptShares(st.sk, st.out, benchM, benchN, st.l)
	if err != nil {
		b.Fatal(err)
	}
	loop(b, func() error {
		dec := [][]uint64{C0}
		for i, o := range c.p.Outputs[1:] {
			d, err := st.s.DecryptShares(st.sk, c.outs[i], o.Rows, o.Width, o.Layout)
			if err != nil {
				return err
			}
			dec = append(dec, d)
		}
		_, _, err := c.p.Residual(dec, c.V, c.rho)
		return err
	})
}

// sst2Batches are the weight products (m, k, n) of one batch of the sst2
// phase-0 proxy ⟨1L,12H,2⟩ at sequence 128, batches of 1 and 8 candidates
// (the requests of `mpcbench forward -shape distilbert -layers 1 -mlp-dim 2
// [-batch 8]`).
var sst2Batches = map[int][][3]int{
	1: {{769, 128, 5}, {3, 769, 768}, {2, 769, 768}, {1, 2, 768}, {1, 768, 768}, {1, 768, 768}, {1, 768, 768},
		{1, 128, 2}, {1, 1, 2}, {1, 768, 2}, {1, 2, 1}},
	8: {{6152, 128, 5}, {24, 769, 768}, {16, 769, 768}, {8, 2, 768}, {8, 768, 768}, {8, 768, 768}, {8, 768, 768},
		{8, 128, 2}, {8, 1, 2}, {8, 768, 2}, {8, 2, 1}},
}

// BenchmarkSST2Batch is P1's HE work for the weight products of one batch
// of the sst2 phase-0 proxy (1 and 8 candidates), unchecked (MulMasked of
// each product) and checked (every output of each CheckedPlan); one op is
// one batch.
func BenchmarkSST2Batch(b *testing.B) {
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { sst2Batch(b, sst2Batches[batch]) })
	}
}

func sst2Batch(b *testing.B, shapes [][3]int) {
	st := benchSetup(b)
	s := st.s
	type prod struct {
		unchecked Term
		ul        Layout
		p         CheckedPlan
		terms     [][]Term
		masks     [][]uint64
		R         []uint64
	}
	var prods []prod
	rng := rand.New(rand.NewPCG(7, 8))
	rnd := newDetRand(11)
	load := func(W []uint64, k, n, off int, l Layout) *Weights {
		ew, err := s.EncryptWeightsAt(st.sk, W, k, n, off, l, [SeedSize]byte{5}, rnd)
		if err != nil {
			b.Fatal(err)
		}
		w, err := s.LoadWeights(st.pk, ew)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		A, B, R := fill(rng, m*k, "random"), fill(rng, k*n, "random"), fill(rng, m*n, "random")
		V := fill(rng, n*CheckColumns, "random")
		ul, err := s.ChooseLayout(m, k, n)
		if err != nil {
			b.Fatal(err)
		}
		p, err := s.PlanChecked(m, k, n)
		if err != nil {
			b.Fatal(err)
		}
		pr := prod{unchecked: Term{W: load(B, k, n, 0, ul), A: A}, ul: ul, p: p, R: R}
		pr.masks, _ = p.Masks(R, func(n int) []uint64 { return fill(rng, n, "random") })
		rho := p.Rho([SeedSize]byte{6})
		for o, po := range p.Outputs {
			var terms []Term
			for _, tm := range po.Terms {
				W, err := p.Matrix(tm, B, V)
				if err != nil {
					b.Fatal(err)
				}
				rows, cols := p.TermShape(tm)
				terms = append(terms, Term{W: load(W, rows, cols, tm.Off, po.Layout), A: p.Factor(o, tm, A, R, rho)})
			}
			pr.terms = append(pr.terms, terms)
		}
		prods = append(prods, pr)
	}
	b.Run("unchecked", func(b *testing.B) {
		loop(b, func() error {
			for _, pr := range prods {
				if _, err := s.MulMaskedSum([]Term{pr.unchecked}, pr.ul, pr.p.M, pr.p.N, pr.R, nil); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("checked", func(b *testing.B) {
		loop(b, func() error {
			for _, pr := range prods {
				for o, po := range pr.p.Outputs {
					if _, err := s.MulMaskedSum(pr.terms[o], po.Layout, po.Rows, po.Width, pr.masks[o], nil); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
}

// BenchmarkUniform is the regeneration of one compact weight ciphertext's
// seeded half (party 1, every batch): N coefficients uniform mod each of
// the four primes from the weights' AES-256-CTR stream. One op is one
// polynomial.
func BenchmarkUniform(b *testing.B) {
	s := defaultScheme
	p := s.rq.NewPoly()
	key := expandKey(make([]byte, SeedSize)) // once per weight matrix, as Weights keeps it
	i := uint64(0)
	b.SetBytes(int64(8 * len(s.p.Q) * s.n))
	for b.Loop() {
		s.seeded(key, domWeights, i, p)
		i++
	}
}

// compactWeights encrypts B (k×n) under st's key with layout l and loads it
// as the data owner does (LoadWeightsCompact).
func compactWeights(b *testing.B, st *benchState, B []uint64, k, n int, l Layout) *Weights {
	ew, err := st.s.EncryptWeights(st.sk, B, k, n, l, newDetRand(3))
	if err != nil {
		b.Fatal(err)
	}
	w, err := st.s.LoadWeightsCompact(st.pk, ew)
	if err != nil {
		b.Fatal(err)
	}
	return w
}

// BenchmarkOutputBlock separates the two costs of party 1's product: one
// output ciphertext (8×k·k×1024 at layout MW = 8, NW = 1024: one block)
// with k = 1 compact weight ciphertext is nearly all the block's own work
// (the re-randomisation, flood, NTTs, reduction and switch); with k = 256
// the difference over 255 more ciphertexts is the cost of one
// ciphertext–plaintext product (regenerating its seeded half, evaluating
// A's plaintext, the sum). One op is one product.
func BenchmarkOutputBlock(b *testing.B) {
	st := benchSetup(b)
	s := st.s
	rng := rand.New(rand.NewPCG(1, 1))
	const m, n = 8, 1024
	for _, k := range []int{1, 256} {
		l, err := s.ChooseLayout(m, k, n)
		if err != nil {
			b.Fatal(err)
		}
		A, B, R := fill(rng, m*k, "random"), fill(rng, k*n, "random"), fill(rng, m*n, "random")
		w := compactWeights(b, st, B, k, n, l)
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			loop(b, func() error {
				_, err := s.MulMaskedLayout(w, l, A, m, R, nil)
				return err
			})
		})
	}
}

// BenchmarkMulMaskedMerged: a batch's products on one weight matrix, as a
// data owner's lanes ask for them at sst2's phase-1 defaults (32 rows
// each, the keys' folded product G = Ŷ₁ᵀ·W_K with k cut to 256 to keep
// the benchmark's weights at 0.2 GB), from one caller at a time (a pass
// each) and from 8 callers at once (their passes merged: merge.go). An op
// is one product; cpu-s/op is its CPU, passes/op the passes it took.
func BenchmarkMulMaskedMerged(b *testing.B) {
	st := benchSetup(b)
	s := st.s
	rng := rand.New(rand.NewPCG(2, 2))
	const m, k, n = 32, 256, 768
	l, err := s.ChooseLayout(m, k, n)
	if err != nil {
		b.Fatal(err)
	}
	w := compactWeights(b, st, fill(rng, k*n, "random"), k, n, l)
	A, R := fill(rng, m*k, "random"), fill(rng, m*n, "random")
	for _, callers := range []int{1, 8} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			p0 := s.MergeStats().Passes
			c0 := cpuSeconds()
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make([]error, callers)
				for i := range callers {
					wg.Go(func() { _, errs[i] = s.MulMaskedLayout(w, l, A, m, R, nil) })
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			ops := float64(b.N * callers)
			b.ReportMetric((cpuSeconds()-c0)/ops, "cpu-s/op")
			b.ReportMetric(float64(s.MergeStats().Passes-p0)/ops, "passes/op")
			b.ReportMetric(b.Elapsed().Seconds()/ops, "s/op")
		})
	}
}

// BenchmarkMulMaskedRows is BenchmarkMulMaskedMerged's product (k cut to
// 256, 768 columns, the layout of 32 rows by 256 columns a block) with
// one, two and four row blocks: a batch of 16, 32 or 64 candidates at
// sst2's phase 1. A pass reads the weights' c0 from memory and
// regenerates their c1 once for all its row blocks, so the CPU a row
// falls with the rows a pass holds; cpu-s/32rows is the op's CPU per row
// block (bench/TWOHOSTS.md, step 30: what larger batches would save and
// why the defaults keep 16).
func BenchmarkMulMaskedRows(b *testing.B) {
	st := benchSetup(b)
	s := st.s
	rng := rand.New(rand.NewPCG(4, 4))
	const k, n = 256, 768
	l := Layout{MW: 32, NW: 256}
	w := compactWeights(b, st, fill(rng, k*n, "random"), k, n, l)
	for _, m := range []int{32, 64, 128} {
		A, R := fill(rng, m*k, "random"), fill(rng, m*n, "random")
		b.Run(fmt.Sprintf("rows=%d", m), func(b *testing.B) {
			op := loop(b, func() error { _, err := s.MulMaskedLayout(w, l, A, m, R, nil); return err })
			b.ReportMetric(op/float64(m/l.MW), "cpu-s/32rows")
		})
	}
}

// BenchmarkMulMaskedSweeps is the product whose sum sweeps the most
// accumulators: sst2's phase-3 folded G = Ŷ₁ᵀ·[W_K; b_K] for a batch of 16
// (256 rows in 8 row blocks of 32, 3 column blocks of 256: 24 output
// blocks, 36 MiB of limb sums), with k cut from 769 to 256 to keep the
// benchmark's weights at 0.2 GB, compact as the data owner holds them.
// Each chunk of accumulate (chunkRows) sweeps all of its limb sums once,
// so the op's CPU follows the rows a chunk holds. An op is one product,
// with each limb kernel the CPU runs.
func BenchmarkMulMaskedSweeps(b *testing.B) {
	st := benchSetup(b)
	s := st.s
	rng := rand.New(rand.NewPCG(3, 3))
	const m, k, n = 256, 256, 768
	l := Layout{MW: 32, NW: 256}
	w := compactWeights(b, st, fill(rng, k*n, "random"), k, n, l)
	A, R := fill(rng, m*k, "random"), fill(rng, m*n, "random")
	for _, g := range limbWidths() {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			defer func(v bool) { useMacAVX512 = v }(useMacAVX512)
			useMacAVX512 = g == 8
			loop(b, func() error { _, err := s.MulMaskedLayout(w, l, A, m, R, nil); return err })
			b.ReportMetric(float64(s.chunkRows(k, m/l.MW, s.n/l.NW)), "rows/chunk")
		})
	}
}

package he

import (
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

// loop runs f b.N times and reports CPU seconds per op.
func loop(b *testing.B, f func() error) {
	c0 := cpuSeconds()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cpuSeconds()-c0)/float64(b.N), "cpu-s/op")
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

// checkBench is the check of the sst2 product (its separate plan: one
// check output A·(B·V) − R·V − R1 of 128×40 with layout MW 113, NW 64).
type checkBench struct {
	p      CheckedPlan
	terms  []Term
	masks  [][]uint64
	V      []uint64
	out    *Output
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
		if err != nil || len(p.Outputs) != 2 {
			b.Fatalf("plan %+v: %v", p, err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		V := fill(rng, benchN*CheckColumns, "random")
		o := p.Outputs[1]
		c := checkBench{p: p, V: V}
		rnd := newDetRand(10)
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
			c.terms = append(c.terms, Term{W: w, A: p.Factor(tm, st.A, st.R)})
		}
		c.masks, _ = p.Masks(st.R, func(n int) []uint64 { return fill(rng, n, "random") })
		if c.out, err = s.MulMaskedSum(c.terms, o.Layout, benchM, o.Width, c.masks[1], rnd); err != nil {
			b.Fatal(err)
		}
		checkSt = c
	})
	if checkSt.out == nil {
		b.Fatal("setup failed")
	}
	return &checkSt
}

// BenchmarkCheckMulMasked is the work the check adds to P1's step for
// 128×768·768×1536 (the check output); compare BenchmarkMulMasked. It
// reports the bytes added per candidate and the one-time encryptions of
// B·V and V (V shared by every weight with 1536 columns).
func BenchmarkCheckMulMasked(b *testing.B) {
	st, c := benchSetup(b), checkSetup(b)
	o := c.p.Outputs[1]
	loop(b, func() error {
		_, err := st.s.MulMaskedSum(c.terms, o.Layout, benchM, o.Width, c.masks[1], nil)
		return err
	})
	b.ReportMetric(float64(st.s.OutputSizes(c.p)[1]), "bytes/candidate")
	b.ReportMetric(float64(c.weight.Bytes), "weight-bytes")
	b.ReportMetric(float64(c.weight.P1), "p1-bytes")
}

// BenchmarkCheckResidual is the work the check adds to P0's step: decrypt
// the check output and compute C0·V − D.
func BenchmarkCheckResidual(b *testing.B) {
	st, c := benchSetup(b), checkSetup(b)
	o := c.p.Outputs[1]
	C0, err := st.s.DecryptShares(st.sk, st.out, benchM, benchN, st.l)
	if err != nil {
		b.Fatal(err)
	}
	loop(b, func() error {
		d, err := st.s.DecryptShares(st.sk, c.out, benchM, o.Width, o.Layout)
		if err != nil {
			return err
		}
		_, _, err = c.p.Residual([][]uint64{C0, d}, c.V)
		return err
	})
}

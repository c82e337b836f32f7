package ot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
)

// cpuSeconds returns the process's user+system CPU time so far.
func cpuSeconds(tb testing.TB) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkRandomOTs measures random OTs with 128-bit messages, both parties
// in this process over an in-memory transport pipe (so the figure is for
// both parties' work on the machine's cores together), for the assembly
// AES-NI path and for crypto/aes one block per call.
func BenchmarkRandomOTs(b *testing.B) {
	const n = 1 << 20
	for _, asm := range []bool{true, false} {
		name := "aes=crypto"
		if asm {
			if !useAESNI {
				continue
			}
			name = "aes=asm"
		}
		b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
			if !asm {
				setAESNI(b, false)
			}
			g0, g1 := genPairRaw(b)
			ctx := testCtx(b)
			otRate(b, n, func() {
				both(b, func() (ROT, error) { return g0.RandomOTs(ctx, n, 0) },
					func() (ROT, error) { return g1.RandomOTs(ctx, n, 0) })
			})
		})
	}
}

// BenchmarkCorrelatedOTs measures the extension's Δ-correlated OTs (the
// COT q_j = t_j ⊕ r_j·Δ, no hash) per k, both parties in this process over
// an in-memory pipe, 2^20 OTs a call.
func BenchmarkCorrelatedOTs(b *testing.B) {
	const n = 1 << 20
	for _, k := range []int{1, 2, 4, 5, 6, 8} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			s0, s1 := fakePair(b, k, rand.New(rand.NewPCG(1, 1)))
			g0, g1, _, _ := fakeGens(b, s0, s1, 1)
			ctx := testCtx(b)
			otRate(b, n, func() {
				both(b, func() (DeltaOT, error) { return g0.DeltaOTs(ctx, n, 0) },
					func() (DeltaOT, error) { return g1.DeltaOTs(ctx, n, 0) })
			})
		})
	}
}

// otRate runs f (ots OTs, both parties) under b.Loop and reports MOT/s and
// the OTs per CPU-second of the process (both parties' CPU together: two
// dedicated cores, one per party, would reach about twice it).
func otRate(b *testing.B, ots int, f func()) {
	cpu0 := cpuSeconds(b)
	for b.Loop() {
		f()
	}
	n := float64(ots) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds()/1e6, "MOT/s")
	b.ReportMetric(n/(cpuSeconds(b)-cpu0)/1e6, "MOT/cpu-s")
}

// perOT runs f under b.Loop on one locked OS thread and reports the time
// per OT of ots OTs per call: wall (ns/OT) and the thread's CPU time
// (cpu-ns/OT, unaffected by other processes sharing the cores).
func perOT(b *testing.B, ots int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, ok := threadCPUSeconds()
	for b.Loop() {
		f()
	}
	n := float64(b.N) * float64(ots)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/OT")
	if c1, ok1 := threadCPUSeconds(); ok && ok1 {
		b.ReportMetric((c1-c0)*1e9/n, "cpu-ns/OT")
	}
}

// BenchmarkExtension measures each party's extension work alone (no
// transport), per k: the receiver's extend (leaf PRG, tree sums,
// corrections, transpose) and the sender's, 2^16 OTs a call, per OT of one
// party on one core. The parts split one 128-OT block of the receiver at
// k = spokenK: the leaf PRG (2^k/k AES blocks per OT), the tree sums and
// the transpose; the receiver's consistency check (χ by fixed-key AES, the
// GF(2^128) sums; the sender's is the same less the choice bits) with
// PCLMULQDQ and portable; and the sender's hash of random OTs (4 AES per
// OT).
func BenchmarkExtension(b *testing.B) {
	const n = 1 << 16
	for _, k := range []int{1, 2, 4, 5, 6, 8} {
		s0, s1 := fakePair(b, k, rand.New(rand.NewPCG(uint64(k), 3))) // 0 the sender, 1 the receiver
		snd, err0 := s0.NewGen(nil, 1)
		rcv, err1 := s1.NewGen(nil, 1)
		if err0 != nil || err1 != nil {
			b.Fatal(err0, err1)
		}
		choices := rcv.prg.Words(n / 64)
		msg, _, _ := rcv.rcv.extend(choices, n) // grows the trees
		if _, _, err := snd.snd.extend(msg, n); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("k=%d/receiver", k), func(b *testing.B) {
			perOT(b, n, func() { rcv.rcv.extend(choices, n) })
		})
		msg, _, j0 := rcv.rcv.extend(choices, n)
		b.Run(fmt.Sprintf("k=%d/sender", k), func(b *testing.B) {
			perOT(b, n, func() {
				snd.snd.next = j0 // the same call again, so that its check passes
				if _, _, err := snd.snd.extend(msg, n); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
	s := fakeSession(b, 0)
	g, err := s.NewGen(nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	g.rcv.extend(make([]uint64, 2), 128)
	leaves := g.rcv.leaves
	var sc spokenScratch
	b.Run("part=leaf-prg", func(b *testing.B) {
		perOT(b, 128, func() { sc.leafBlocks(s.prg, leaves, 1) })
	})
	r := make([]Block, len(leaves))
	var v [maxSpokenK]Block
	b.Run("part=tree-sums", func(b *testing.B) {
		perOT(b, 128, func() {
			copy(r, leaves)
			for t := range s.ext.sizes {
				s.ext.treeSums(t, r, g.rcv.sums, 1, v[:])
			}
		})
	})
	rows := make([]Block, 128)
	b.Run("part=transpose", func(b *testing.B) {
		perOT(b, 128, func() { transpose128(rows, &sc.cols) })
	})
	rows = make([]Block, 1<<16)
	ch := newChallenge(s.prg, 1, 0, len(rows), nil)
	choices := g.prg.Words(len(rows) / 64)
	for _, asm := range []bool{true, false} {
		if asm && !usePCLMUL {
			continue
		}
		b.Run(fmt.Sprintf("part=check-receiver/pclmul=%v", asm), func(b *testing.B) {
			setPCLMUL(b, asm)
			perOT(b, len(rows), func() { checkReceiver(ch, rows, choices) })
		})
	}
	out := make([]Block, 1<<16)
	b.Run("part=hash-sender", func(b *testing.B) {
		perOT(b, len(rows), func() {
			g.h.hashBlocks(out, rows, Block{}, 0)
			g.h.hashBlocks(out, rows, g.snd.delta, 0)
		})
	})
}

// BenchmarkWeightTriple measures the weight-mask correlation by vector OLE
// for one token row through one 768×768 projection (m=1, k=n=768), the unit
// a candidate of sst2-distilbert (seq 128, 4 projections per layer) repeats
// 512 times per layer: P1 chooses with the 64 bits of each A entry, P0's
// correlation is the matching row of its fixed mask B.
func BenchmarkWeightTriple(b *testing.B) {
	m, k, n := 1, 768, 768
	g0, g1 := genPairRaw(b)
	ctx := testCtx(b)
	B := make([]uint64, k*n)
	for i := range B {
		B[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	b.ResetTimer()
	cpu0 := cpuSeconds(b)
	for b.Loop() {
		both(b, func() (struct{}, error) { _, err := g0.WeightTriples(ctx, B, m, k, n); return struct{}{}, err },
			func() (struct{}, error) { _, err := g1.WeightTriples(ctx, nil, m, k, n); return struct{}{}, err })
	}
	b.StopTimer()
	s0, s1 := g0.Stats(), g1.Stats()
	N := float64(b.N)
	b.ReportMetric((cpuSeconds(b)-cpu0)/N, "cpu-s/op")
	b.ReportMetric(8*float64(s0.WordsSent)/N, "B-sent-P0/op")
	b.ReportMetric(8*float64(s1.WordsSent)/N, "B-sent-P1/op")
	b.ReportMetric(float64(s0.Rounds)/N, "rounds/op")
}

// BenchmarkKinds measures both parties' CPU per call of the OT-made kinds
// at sizes of a sst2 candidate's items (cross ANDs, AND triples, elementwise
// triples, a matrix triple, wrap pairs), in one process over an in-memory
// pipe: cpu-ms/op is the two parties' CPU together.
func BenchmarkKinds(b *testing.B) {
	g0, g1 := genPairRaw(b)
	ctx := testCtx(b)
	for _, c := range []struct {
		name string
		f    func(g *Gen) error
	}{
		{"crossand/words=4096", func(g *Gen) error { _, err := g.CrossANDTriples(ctx, 4096); return err }},
		{"and/words=4096", func(g *Gen) error { _, err := g.ANDTriples(ctx, 4096); return err }},
		{"triples/n=16384", func(g *Gen) error { _, err := g.Triples(ctx, 16384); return err }},
		{"mattriple/8x24x16x8", func(g *Gen) error { _, err := g.MatTriples(ctx, 8, 24, 16, 8); return err }},
		{"wrap/n=65536", func(g *Gen) error { _, err := g.WrapPairs(ctx, 65536, 16); return err }},
		// sst2's phase-1 batch of 16 at the defaults: the folded attention's
		// scores (192 products 1×64·64×2) and its LayerNorm's quadruples.
		{"mattriple/192x1x64x2", func(g *Gen) error { _, err := g.MatTriples(ctx, 192, 1, 64, 2); return err }},
		{"squareproducts/n=12288", func(g *Gen) error { _, err := g.SquareProducts(ctx, 12288); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				both(b, func() (struct{}, error) { return struct{}{}, c.f(g0) },
					func() (struct{}, error) { return struct{}{}, c.f(g1) })
			}
			b.ReportMetric((cpuSeconds(b)-cpu0)/float64(b.N)*1e3, "cpu-ms/op")
		})
	}
}

// BenchmarkInputMasking measures the dealer-free material of one layer's
// input masking for a qqp-bert candidate (B·T = 128 rows of H = 768):
// elementwise triples for a Beaver product by the mask broadcast over the
// rows (n = 98,304), against one row-bit triple per row
// (protocol.MulPrivateRowBits). Bytes are each party's OT traffic per
// call; cpu-ms/op is both parties' CPU together.
func BenchmarkInputMasking(b *testing.B) {
	const rows, width = 128, 768
	for _, c := range []struct {
		name string
		f    func(ctx context.Context, g *Gen) error
	}{
		{"triples/n=98304", func(ctx context.Context, g *Gen) error { _, err := g.Triples(ctx, rows*width); return err }},
		{"rowbit/128x768", func(ctx context.Context, g *Gen) error { _, err := g.RowBitTriples(ctx, rows, width); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			g0, g1 := genPairRaw(b)
			ctx := testCtx(b)
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				both(b, func() (struct{}, error) { return struct{}{}, c.f(ctx, g0) },
					func() (struct{}, error) { return struct{}{}, c.f(ctx, g1) })
			}
			s0, s1 := g0.Stats(), g1.Stats()
			N := float64(b.N)
			b.ReportMetric((cpuSeconds(b)-cpu0)/N*1e3, "cpu-ms/op")
			b.ReportMetric(8*float64(s0.WordsSent)/N, "B-sent-P0/op")
			b.ReportMetric(8*float64(s1.WordsSent)/N, "B-sent-P1/op")
			b.ReportMetric(float64(s0.Rounds)/N, "rounds/op")
		})
	}
}

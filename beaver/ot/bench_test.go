package ot

import (
	"fmt"
	"syscall"
	"testing"
	"time"
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
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuSeconds(b)
			for b.Loop() {
				both(b, func() (ROT, error) { return g0.RandomOTs(ctx, n, 0) },
					func() (ROT, error) { return g1.RandomOTs(ctx, n, 0) })
			}
			ots := float64(n) * float64(b.N)
			b.ReportMetric(ots/time.Since(start).Seconds()/1e6, "MOT/s")
			// Both parties' CPU time together: the rate two dedicated cores
			// (one per party) would reach is about twice this.
			b.ReportMetric(ots/(cpuSeconds(b)-cpu0)/1e6, "MOT/cpu-s")
		})
	}
}

// BenchmarkOTParts splits one party's random-OT work per 2^20 OTs: the
// column PRG (AES-CTR), the transpose, and the hash (4 fixed-key AES per OT
// on the sender, 2 on the receiver).
func BenchmarkOTParts(b *testing.B) {
	const n = 1 << 20
	s := fakeSession(b, 0)
	g, err := s.NewGen(nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	nw := n / 64
	cols := make([]uint64, baseCount*nw)
	rows := make([]Block, n)
	out := make([]Block, n)
	b.Run("prg", func(b *testing.B) {
		for b.Loop() {
			for i := range baseCount {
				prgColumn(g.snd.cols[i], 0, cols[i*nw:(i+1)*nw])
			}
		}
	})
	b.Run("transpose", func(b *testing.B) {
		for b.Loop() {
			colsToRows(rows, cols, nw)
		}
	})
	b.Run("hash-sender", func(b *testing.B) {
		for b.Loop() {
			g.h.hashBlocks(out, rows, Block{}, 0)
			g.h.hashBlocks(out, rows, g.snd.delta, 0)
		}
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

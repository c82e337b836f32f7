package share

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmBenchShapes are the products the benchmarks time: one BERT-base
// projection (768→768) and the fused QKV projection (768→2304) of a
// 128-token sequence.
var gemmBenchShapes = []struct{ m, k, n int }{
	{128, 768, 768},
	{128, 768, 2304},
}

// BenchmarkGEMM times the ring GEMM with every available kernel next to
// gonum's float64 Dgemm on the same shapes, all using every core, and reports
// multiply-adds per second.
func BenchmarkGEMM(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range gemmBenchShapes {
		shape := fmt.Sprintf("%dx%dx%d", s.m, s.k, s.n)
		macs := float64(s.m) * float64(s.k) * float64(s.n)
		a, bm, c := make([]uint64, s.m*s.k), make([]uint64, s.k*s.n), make([]uint64, s.m*s.n)
		for i := range a {
			a[i] = rng.Uint64()
		}
		for i := range bm {
			bm[i] = rng.Uint64()
		}
		for _, impl := range gemmKernels() {
			b.Run("ring/"+impl.name+"/"+shape, func(b *testing.B) {
				for b.Loop() {
					gemmParallel(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{data: bm, rs: s.n, cs: 1}, s.m, s.k, s.n)
				}
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
			})
		}
		pm, err := PackMatrix(bm, s.k, s.n)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("ring/MatMulPackedInto/"+shape, func(b *testing.B) {
			for b.Loop() {
				if err := MatMulPackedInto(c, a, s.m, pm); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
		})
		b.Run("ring/MatMulTransBInto/"+shape, func(b *testing.B) {
			for b.Loop() {
				if err := MatMulTransBInto(c, a, bm, s.m, s.k, s.n); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
		})
		fa, fb, fc := make([]float64, s.m*s.k), make([]float64, s.k*s.n), make([]float64, s.m*s.n)
		for i := range fa {
			fa[i] = rng.Float64()
		}
		for i := range fb {
			fb[i] = rng.Float64()
		}
		b.Run("gonum/float64/"+shape, func(b *testing.B) {
			var impl gonum.Implementation
			for b.Loop() {
				impl.Dgemm(blas.NoTrans, blas.NoTrans, s.m, s.n, s.k, 1, fa, s.k, fb, s.n, 0, fc, s.n)
			}
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
		})
	}
}

// BenchmarkPRG times expanding a seed into ring words (AES-128-CTR) through
// Fill, in buffers of several sizes, and the one-word Uint64 path.
func BenchmarkPRG(b *testing.B) {
	var seed Seed
	for _, words := range []int{64, 1 << 10, 1 << 14, 1 << 17} {
		b.Run(fmt.Sprintf("Fill/%dB", words*8), func(b *testing.B) {
			p := NewPRG(seed, "bench")
			dst := make([]uint64, words)
			b.SetBytes(int64(words * 8))
			for b.Loop() {
				p.Fill(dst)
			}
		})
	}
	b.Run("Uint64", func(b *testing.B) {
		p := NewPRG(seed, "bench")
		b.SetBytes(8)
		var sink uint64
		for b.Loop() {
			sink += p.Uint64()
		}
		_ = sink
	})
}

// BenchmarkBatchMatMul times per-head attention scores for BERT-base shapes
// (12 heads, 128 tokens, head size 64: Q·Kᵀ as [12,128,64]·[12,64,128]).
func BenchmarkBatchMatMul(b *testing.B) {
	const heads, seq, dim = 12, 128, 64
	rng := rand.New(rand.NewPCG(3, 4))
	q := randWords(rng, heads*seq*dim, "full")
	kt := randWords(rng, heads*dim*seq, "full")
	c := make([]uint64, heads*seq*seq)
	b.Run("attention/12x128x64x128", func(b *testing.B) {
		for b.Loop() {
			if err := BatchMatMulInto(c, q, kt, heads, seq, dim, seq); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(heads*seq*dim*seq)*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
	})
}

// ringKernelBenchShapes are the sst2-distilbert proxy's products (sequence
// 128, hidden 768, 12 heads of 64): a projection of one sequence, of a batch
// of 16 sequences, and one sequence's attention scores Q·Kᵀ and P·V (12
// heads).
var ringKernelBenchShapes = []struct {
	name           string
	batch, m, k, n int
}{
	{"proj/128x768x768", 1, 128, 768, 768},
	{"proj16/2048x768x768", 1, 2048, 768, 768},
	{"scores/12x128x64x128", 12, 128, 64, 128},
	{"pv/12x128x128x64", 12, 128, 128, 64},
}

// BenchmarkRingKernels times every kernel this CPU can run on the sst2
// proxy's shapes through the exported products (all cores), forced through
// the kernel selector, and reports multiply-adds per second, and on Linux
// per second of the process's CPU time (MAC/CPU-s: per core, whatever
// share of the cores the run got).
func BenchmarkRingKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 8))
	for _, s := range ringKernelBenchShapes {
		a := randWords(rng, s.batch*s.m*s.k, "full")
		bm := randWords(rng, s.batch*s.k*s.n, "full")
		c := make([]uint64, s.batch*s.m*s.n)
		macs := float64(s.batch) * float64(s.m) * float64(s.k) * float64(s.n)
		for _, name := range RingKernels() {
			b.Run(name+"/"+s.name, func(b *testing.B) {
				restore, err := setRingKernel(name)
				if err != nil {
					b.Fatal(err)
				}
				defer restore()
				cpu0, ok := processCPUSeconds()
				for b.Loop() {
					if err := BatchMatMulInto(c, a, bm, s.batch, s.m, s.k, s.n); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
				if cpu1, _ := processCPUSeconds(); ok && cpu1 > cpu0 {
					b.ReportMetric(macs*float64(b.N)/(cpu1-cpu0), "MAC/CPU-s")
				}
			})
		}
	}
}

// BenchmarkMicroKernels times each micro-kernel alone on one core, on
// packed panels that stay in L1 (the kernel's own k block), the figure
// to set beside its µop count: multiply-adds per second per core. On
// Linux it also reports them per second of the thread's own CPU time
// (MAC/CPU-s), which other processes sharing the core do not lower: the
// figure to read on a loaded machine.
func BenchmarkMicroKernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(6, 9))
	for _, impl := range gemmKernels() {
		kc := impl.kc
		a := randWords(rng, impl.mr*kc, "full")
		bm := randWords(rng, kc*impl.nr, "full")
		ap, bp := packPanels(impl, a, bm, kc)
		c := make([]uint64, impl.mr*impl.nr)
		b.Run(fmt.Sprintf("%s/%dx%dx%d", impl.name, impl.mr, kc, impl.nr), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0, ok := threadCPUSeconds()
			for b.Loop() {
				impl.micro(kc, ap, bp, c, impl.nr, true)
			}
			macs := float64(impl.mr*kc*impl.nr) * float64(b.N)
			b.ReportMetric(macs/b.Elapsed().Seconds(), "MAC/s")
			if cpu1, _ := threadCPUSeconds(); ok && cpu1 > cpu0 {
				b.ReportMetric(macs/(cpu1-cpu0), "MAC/CPU-s")
			}
		})
	}
}

// BenchmarkOwnerShare times the data owner's share of a 128×768 input
// (x − r, r expanded from the PRG): one batch row of the sst2 proxy.
func BenchmarkOwnerShare(b *testing.B) {
	const n = 128 * 768
	x, dst := make([]uint64, n), make([]uint64, n)
	p := NewPRG(Seed{}, "bench")
	b.SetBytes(n * 8)
	for b.Loop() {
		if err := OwnerShare(dst, x, p); err != nil {
			b.Fatal(err)
		}
	}
}

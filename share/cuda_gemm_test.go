//go:build cuda

package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

// cudaOrSkip returns the cuda backend, or skips the test on a host without a
// driver or device (the error says which).
func cudaOrSkip(t testing.TB) *cudaGEMM {
	t.Helper()
	g, err := OpenGEMM("cuda")
	if errors.Is(err, ErrGEMMUnavailable) {
		t.Skipf("no CUDA device: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cg := g.(*cudaGEMM)
	t.Logf("device: %s", cg)
	return cg
}

// TestCUDANoDevice runs where the cuda build finds no device: forcing the
// backend must be a clear error (not a panic, not an exit of the process in
// gorgonia.org/cu's init), and the automatic choice must fall back to cpu.
func TestCUDANoDevice(t *testing.T) {
	_, err := OpenGEMM("cuda")
	if err == nil {
		t.Skip("a CUDA device is present")
	}
	if !errors.Is(err, ErrGEMMUnavailable) {
		t.Fatalf("error %v does not wrap ErrGEMMUnavailable", err)
	}
	_, err = resolveGEMM("cuda")
	if err == nil || !strings.Contains(err.Error(), "SELECTFORMER_GEMM=cuda") || !strings.Contains(err.Error(), "CUDA_ERROR_") {
		t.Fatalf("forced cuda without a device: %v", err)
	}
	t.Logf("forced cuda: %v", err)
	b, err := resolveGEMM("")
	if err != nil || b.Name() != "cpu" {
		t.Fatalf("automatic choice without a device: %v, %v", b, err)
	}
}

// TestCUDABitExact checks the device path (whatever the product's size)
// word for word against the CPU ring GEMM: odd shapes, k up to 3072, more
// rows than one pipeline block (both slots reused), edge and uniform words.
func TestCUDABitExact(t *testing.T) {
	g := cudaOrSkip(t)
	rng := rand.New(rand.NewPCG(61, 62))
	shapes := []struct{ m, k, n int }{
		{1, 1, 1}, {3, 5, 2}, {7, 13, 11}, {17, 64, 33}, {2, 3072, 3}, {9, 3072, 17},
		{130, 768, 2304}, {3000, 768, 768}, {1000, 3072, 768},
	}
	for _, s := range shapes {
		for _, p := range [][2]string{{"uniform", "uniform"}, {"max", "max"}, {"alt-a", "alt-5"}, {"edges", "edges"}, {"top", "max"}} {
			t.Run(fmt.Sprintf("%dx%dx%d/%s*%s", s.m, s.k, s.n, p[0], p[1]), func(t *testing.T) {
				a, b := limbWords(rng, s.m*s.k, p[0]), limbWords(rng, s.k*s.n, p[1])
				w, err := NewWeightMatrix(b, s.k, s.n)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]uint64, s.m*s.n)
				if err := g.mulWeightsDevice(got, a, s.m, w); err != nil {
					t.Fatal(err)
				}
				if d := limbDiff(got, ringProduct(t, a, b, s.m, s.k, s.n), s.n); d != "" {
					t.Fatal(d)
				}
			})
		}
	}
}

// TestCUDABatched checks both batched forms on the device, through the
// public methods (above the CPU threshold) and the device paths directly.
func TestCUDABatched(t *testing.T) {
	g := cudaOrSkip(t)
	rng := rand.New(rand.NewPCG(71, 72))
	for _, s := range []struct{ batch, m, k, n int }{{16, 128, 768, 2304}, {12, 128, 64, 128}, {3, 7, 31, 6}} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d", s.batch, s.m, s.k, s.n), func(t *testing.T) {
			a := limbWords(rng, s.batch*s.m*s.k, "uniform")
			b := limbWords(rng, s.batch*s.k*s.n, "edges")
			want := make([]uint64, s.batch*s.m*s.n)
			if err := BatchMatMulInto(want, a, b, s.batch, s.m, s.k, s.n); err != nil {
				t.Fatal(err)
			}
			got := make([]uint64, len(want))
			if err := g.batchMatMulDevice(got, a, b, s.batch, s.m, s.k, s.n); err != nil {
				t.Fatal(err)
			}
			if d := limbDiff(got, want, s.n); d != "" {
				t.Fatal("BatchMatMul " + d)
			}
			w, _ := NewWeightMatrix(b[:s.k*s.n], s.k, s.n)
			want = ringProduct(t, a, b[:s.k*s.n], s.batch*s.m, s.k, s.n)
			clear(got)
			if err := g.MulWeights(got, a, s.batch, s.m, w); err != nil {
				t.Fatal(err)
			}
			if d := limbDiff(got, want, s.n); d != "" {
				t.Fatal("MulWeights " + d)
			}
		})
	}
}

// TestCUDALongK runs an inner dimension above 2^19 on the device: two chunks,
// the second added into the first's result, with all-ones words (every
// entry is k).
func TestCUDALongK(t *testing.T) {
	g := cudaOrSkip(t)
	const m, k, n = 3, 1<<19 + 7, 5
	a := make([]uint64, m*k)
	b := make([]uint64, k*n)
	for i := range a {
		a[i] = ^uint64(0)
	}
	for i := range b {
		b[i] = ^uint64(0)
	}
	w, _ := NewWeightMatrix(b, k, n)
	c := make([]uint64, m*n)
	if err := g.mulWeightsDevice(c, a, m, w); err != nil {
		t.Fatal(err)
	}
	for i, v := range c {
		if v != k {
			t.Fatalf("entry %d: got %d, want %d", i, v, k)
		}
	}
}

// TestCUDAWeightCache checks that a weight matrix's limbs are uploaded once
// and reused, that two matrices do not get each other's limbs, that a
// collected matrix's limbs are freed, and that eviction keeps results exact.
func TestCUDAWeightCache(t *testing.T) {
	g := cudaOrSkip(t)
	rng := rand.New(rand.NewPCG(81, 82))
	const m, k, n = 64, 96, 80
	a := limbWords(rng, m*k, "uniform")
	b1, b2 := limbWords(rng, k*n, "uniform"), limbWords(rng, k*n, "uniform")
	w1, _ := NewWeightMatrix(b1, k, n)
	w2, _ := NewWeightMatrix(b2, k, n)
	before := g.statsNow()
	got := make([]uint64, m*n)
	for i, w := range []*WeightMatrix{w1, w2, w1, w2, w1} {
		if err := g.mulWeightsDevice(got, a, m, w); err != nil {
			t.Fatal(err)
		}
		if d := limbDiff(got, ringProduct(t, a, w.data, m, k, n), n); d != "" {
			t.Fatalf("product %d: %s", i, d)
		}
	}
	st := g.statsNow()
	if up, hits := st.uploads-before.uploads, st.hits-before.hits; up != 2 || hits != 3 {
		t.Fatalf("uploads %d, hits %d; want 2 and 3", up, hits)
	}
	// Drop w2: after a collection its limbs are freed on the next product.
	w2 = nil
	runtime.GC()
	runtime.GC()
	if err := g.mulWeightsDevice(got, a, m, w1); err != nil {
		t.Fatal(err)
	}
	if st2 := g.statsNow(); st2.frees == st.frees {
		t.Log("the collected matrix's cleanup has not run yet (cleanups are asynchronous)")
	}
	// A cache too small for two matrices evicts and stays exact.
	var limit int64
	_ = g.do(func() error { limit, g.limit = g.limit, int64(8*limbCount*k*n); return nil })
	defer g.do(func() error { g.limit = limit; return nil })
	w3, _ := NewWeightMatrix(b2, k, n)
	for _, w := range []*WeightMatrix{w1, w3, w1} {
		if err := g.mulWeightsDevice(got, a, m, w); err != nil {
			t.Fatal(err)
		}
		if d := limbDiff(got, ringProduct(t, a, w.data, m, k, n), n); d != "" {
			t.Fatal(d)
		}
	}
	if g.statsNow().evictions == st.evictions {
		t.Fatal("a one-matrix cache evicted nothing")
	}
}

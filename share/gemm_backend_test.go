package share

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

// openBackends returns every backend compiled in that opens here (cuda only
// with the tag and a device).
func openBackends(t testing.TB) []GEMMBackend {
	t.Helper()
	var out []GEMMBackend
	for _, name := range GEMMBackends() {
		b, err := OpenGEMM(name)
		if err != nil {
			if errors.Is(err, ErrGEMMUnavailable) {
				t.Logf("backend %s: %v", name, err)
				continue
			}
			t.Fatalf("backend %s: %v", name, err)
		}
		out = append(out, b)
	}
	return out
}

// TestGEMMBackendsAgree checks every backend that opens against the naive
// ring product on both batched forms, empty shapes included.
func TestGEMMBackendsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	shapes := []struct{ batch, m, k, n int }{
		{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 17, 33, 9}, {1, 0, 4, 3}, {2, 3, 0, 2}, {0, 4, 4, 4}, {4, 16, 128, 40},
	}
	for _, g := range openBackends(t) {
		for _, s := range shapes {
			t.Run(fmt.Sprintf("%s/%dx%dx%dx%d", g.Name(), s.batch, s.m, s.k, s.n), func(t *testing.T) {
				a := randWords(rng, s.batch*s.m*s.k, "edge")
				b := randWords(rng, s.batch*s.k*s.n, "full")
				want := make([]uint64, s.batch*s.m*s.n)
				for i := range s.batch {
					copy(want[i*s.m*s.n:], naiveMatMul(a[i*s.m*s.k:], b[i*s.k*s.n:], s.m, s.k, s.n))
				}
				got := slices.Repeat([]uint64{0xBAD}, len(want))
				if err := g.BatchMatMul(got, a, b, s.batch, s.m, s.k, s.n); err != nil {
					t.Fatal(err)
				}
				if d := limbDiff(got, want, s.n); d != "" {
					t.Fatal("BatchMatMul " + d)
				}
				w, err := NewWeightMatrix(b[:min(len(b), s.k*s.n)], s.k, s.n)
				if s.batch == 0 {
					w, err = NewWeightMatrix(make([]uint64, s.k*s.n), s.k, s.n)
				}
				if err != nil {
					t.Fatal(err)
				}
				for i := range s.batch {
					copy(want[i*s.m*s.n:], naiveMatMul(a[i*s.m*s.k:], w.data, s.m, s.k, s.n))
				}
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
}

// TestGEMMBackendErrors checks that every backend rejects inconsistent
// operands with an error.
func TestGEMMBackendErrors(t *testing.T) {
	w, _ := NewWeightMatrix(make([]uint64, 12), 3, 4)
	for _, g := range openBackends(t) {
		errs := []error{
			g.MulWeights(make([]uint64, 8), make([]uint64, 5), 1, 2, w),
			g.MulWeights(make([]uint64, 7), make([]uint64, 6), 1, 2, w),
			g.MulWeights(make([]uint64, 8), make([]uint64, 6), 1, 2, nil),
			g.MulWeights(nil, nil, -2, -1, w),
			g.BatchMatMul(make([]uint64, 4), make([]uint64, 4), make([]uint64, 3), 1, 2, 2, 2),
			g.BatchMatMul(nil, nil, nil, 1, -1, 2, 2),
		}
		for i, err := range errs {
			if err == nil {
				t.Errorf("%s: case %d: no error", g.Name(), i)
			}
		}
	}
}

// TestResolveGEMM checks the choice of backend from SELECTFORMER_GEMM:
// names open their backend, an unknown name or one not compiled in (cuda in
// the default build) is an error wrapping ErrGEMMUnavailable that says how to
// get it, and no value picks a backend that works.
func TestResolveGEMM(t *testing.T) {
	_, cudaCompiled := gemmOpeners["cuda"]
	tests := []struct {
		env      string
		want     string
		errParts []string
	}{
		{env: "cpu", want: "cpu"},
		{env: " cpu ", want: "cpu"},
		{env: "limb-gonum", want: "limb-gonum"},
		{env: "tpu", errParts: []string{"SELECTFORMER_GEMM=tpu", `"tpu" is not compiled in`, "cpu, "}},
	}
	if !cudaCompiled {
		tests = append(tests, struct {
			env      string
			want     string
			errParts []string
		}{env: "cuda", errParts: []string{"SELECTFORMER_GEMM=cuda", "-tags cuda"}})
	}
	for _, tc := range tests {
		t.Run(tc.env, func(t *testing.T) {
			b, err := resolveGEMM(tc.env)
			if tc.errParts != nil {
				if err == nil {
					t.Fatalf("got backend %s, want an error", b.Name())
				}
				if !errors.Is(err, ErrGEMMUnavailable) {
					t.Errorf("error %v does not wrap ErrGEMMUnavailable", err)
				}
				for _, p := range tc.errParts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q lacks %q", err, p)
					}
				}
				return
			}
			if err != nil || b.Name() != tc.want {
				t.Fatalf("got %v, %v; want %s", b, err, tc.want)
			}
		})
	}
	t.Run("auto", func(t *testing.T) {
		b, err := resolveGEMM("")
		if err != nil {
			t.Fatal(err)
		}
		if b.Name() != "cpu" && b.Name() != "cuda" {
			t.Fatalf("automatic choice %s", b.Name())
		}
		if !cudaCompiled && b.Name() != "cpu" {
			t.Fatalf("default build chose %s", b.Name())
		}
	})
}

// TestSetGEMM checks that an installed backend is what GEMM returns and that
// nil restores the automatic choice.
func TestSetGEMM(t *testing.T) {
	lg := GonumLimbGEMM()
	prev := SetGEMM(lg)
	defer SetGEMM(prev)
	if g, err := GEMM(); err != nil || g != lg {
		t.Fatalf("after SetGEMM: %v, %v", g, err)
	}
	SetGEMM(nil)
	g, err := GEMM()
	want, wantErr := resolveGEMM(os.Getenv(GEMMEnv))
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("after SetGEMM(nil): error %v, want %v", err, wantErr)
	}
	if err == nil && g.Name() != want.Name() {
		t.Fatalf("after SetGEMM(nil): %s, want the environment's choice %s", g.Name(), want.Name())
	}
}

// TestWeightMatrixCopies checks that a WeightMatrix does not follow later
// changes of the words it was made from, and that each has its own id.
func TestWeightMatrixCopies(t *testing.T) {
	src := []uint64{1, 2, 3, 4, 5, 6}
	w, err := NewWeightMatrix(src, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	src[0] = 99
	if w.data[0] != 1 {
		t.Fatal("WeightMatrix aliases its source")
	}
	if k, n := w.Dims(); k != 2 || n != 3 {
		t.Fatalf("Dims %d×%d", k, n)
	}
	w2, _ := NewWeightMatrix(src, 2, 3)
	if w2.id == w.id {
		t.Fatal("two weight matrices share an id")
	}
}

// batchedShape is the product BenchmarkBatchedGEMM times: the fused QKV
// projection of BERT-base (768→2304) on 128-token candidates.
var batchedShape = struct{ m, k, n int }{128, 768, 2304}

// BenchmarkBatchedGEMM times C[b] = A[b]·W for batches of 16 and 64
// candidates on every backend that opens (cuda only in the cuda build with a
// device), reporting ring multiply-adds per second. limb-gonum, the CPU
// reference of the limb method, does ten float64 multiply-adds per ring
// multiply-add and runs ×16 only.
func BenchmarkBatchedGEMM(b *testing.B) {
	rng := rand.New(rand.NewPCG(51, 52))
	s := batchedShape
	w, err := NewWeightMatrix(randWords(rng, s.k*s.n, "full"), s.k, s.n)
	if err != nil {
		b.Fatal(err)
	}
	for _, g := range openBackends(b) {
		for _, batch := range []int{16, 64} {
			if g.Name() == "limb-gonum" && batch > 16 {
				continue // ~20 s a product on 2 cores; ×16 gives its rate
			}
			b.Run(fmt.Sprintf("%s/x%d", g.Name(), batch), func(b *testing.B) {
				a := randWords(rng, batch*s.m*s.k, "full")
				c := make([]uint64, batch*s.m*s.n)
				// One product outside the timing: the cuda backend uploads
				// the weights' limbs once, as a proxy phase would.
				if err := g.MulWeights(c, a, batch, s.m, w); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := g.MulWeights(c, a, batch, s.m, w); err != nil {
						b.Fatal(err)
					}
				}
				macs := float64(batch) * float64(s.m) * float64(s.k) * float64(s.n)
				b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds(), "MAC/s")
			})
		}
	}
}

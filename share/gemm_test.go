package share

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// gemmKernels returns every kernel this CPU can run, the generic one first.
func gemmKernels() []*gemmImpl {
	var ks []*gemmImpl
	for _, k := range ringKernelTable {
		if k.runs(thisCPU) {
			ks = append(ks, k.impl)
		}
	}
	return ks
}

// naiveMatMul is the textbook triple loop, the reference for every kernel.
func naiveMatMul(a, b []uint64, m, k, n int) []uint64 {
	c := make([]uint64, m*n)
	for i := range m {
		for j := range n {
			var s uint64
			for p := range k {
				s += a[i*k+p] * b[p*n+j]
			}
			c[i*n+j] = s
		}
	}
	return c
}

// transpose returns the n×m transpose of the m×n row-major x.
func transpose(x []uint64, m, n int) []uint64 {
	t := make([]uint64, len(x))
	for i := range m {
		for j := range n {
			t[j*m+i] = x[i*n+j]
		}
	}
	return t
}

// randWords returns n words from rng; mode "full" draws uniform 64-bit words,
// "small" signed values in [−8, 8), "edge" a mix of 0, 1, −1, 2^63, 2^63−1
// and the limb boundaries of the split kernels (2^31, 2^32±1, 2^52±1, the
// low and top 12 bits set), "ones" all-ones words (−1: every limb of every
// product at its maximum, the IFMA kernel's worst case), "top" 2^63 or
// 2^63+1.
func randWords(rng *rand.Rand, n int, mode string) []uint64 {
	edges := []uint64{0, 1, ^uint64(0), 1 << 63, 1<<63 - 1, 1 << 31, 3,
		1<<32 - 1, 1 << 32, 1<<32 + 1, 1<<52 - 1, 1 << 52, 1<<52 + 1, 0xfff, 0xfff << 52, 0xfff<<52 | 0xfff, 0xfff<<52 | 0xfffff000}
	w := make([]uint64, n)
	for i := range w {
		switch mode {
		case "small":
			w[i] = uint64(rng.Int64N(16) - 8)
		case "ones":
			w[i] = ^uint64(0)
		case "top":
			w[i] = 1<<63 | uint64(rng.IntN(2))
		case "edge":
			w[i] = edges[rng.IntN(len(edges))]
		default:
			w[i] = rng.Uint64()
		}
	}
	return w
}

// gemmTestShapes covers single elements, empty products, odd sizes and every
// tail of the 2×4, 4×16 and 8×16 register blocks and of the 128- and
// 256-deep k blocking.
var gemmTestShapes = []struct{ m, k, n int }{
	{1, 1, 1}, {0, 3, 4}, {3, 0, 4}, {3, 4, 0}, {0, 0, 0},
	{1, 7, 1}, {2, 3, 2}, {3, 5, 7}, {4, 4, 4}, {5, 1, 17},
	{7, 9, 15}, {8, 16, 16}, {9, 17, 33}, {16, 32, 16}, {17, 33, 65},
	{8, 300, 16}, {31, 257, 47}, {129, 257, 31}, {1, 513, 200}, {200, 70, 1},
	{64, 64, 130}, {130, 40, 64}, {5, 20, 24}, {9, 300, 40}, {16, 513, 8},
	{4, 128, 16}, {5, 129, 17}, {3, 2, 15}, {6, 255, 32},
}

// TestGEMMKernels checks every kernel, serial and split over cores, against
// the naive product on odd shapes and random full-range words.
func TestGEMMKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, impl := range gemmKernels() {
		for _, s := range gemmTestShapes {
			for _, mode := range []string{"full", "small", "edge", "ones", "top"} {
				name := fmt.Sprintf("%s/%dx%dx%d/%s", impl.name, s.m, s.k, s.n, mode)
				t.Run(name, func(t *testing.T) {
					a := randWords(rng, s.m*s.k, mode)
					b := randWords(rng, s.k*s.n, mode)
					want := naiveMatMul(a, b, s.m, s.k, s.n)
					// Pre-fill c with junk: the kernel must overwrite it.
					c := randWords(rng, s.m*s.n, "full")
					gemmSerial(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{data: b, rs: s.n, cs: 1}, s.m, s.k, s.n)
					if !slices.Equal(c, want) {
						t.Fatalf("serial: got %v…, want %v…", head(c), head(want))
					}
					c = randWords(rng, s.m*s.n, "full")
					gemmParallel(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{data: b, rs: s.n, cs: 1}, s.m, s.k, s.n)
					if !slices.Equal(c, want) {
						t.Fatalf("parallel: got %v…, want %v…", head(c), head(want))
					}
					bt := transpose(b, s.k, s.n)
					c = randWords(rng, s.m*s.n, "full")
					gemmParallel(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{data: bt, rs: 1, cs: s.k}, s.m, s.k, s.n)
					if !slices.Equal(c, want) {
						t.Fatalf("transposed b: got %v…, want %v…", head(c), head(want))
					}
					for _, pm := range []*PackedMatrix{
						packMatrix(impl, matView{data: b, rs: s.n, cs: 1}, s.k, s.n),
						packMatrix(impl, matView{data: bt, rs: 1, cs: s.k}, s.k, s.n),
					} {
						c = randWords(rng, s.m*s.n, "full")
						gemmSerial(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{packed: pm}, s.m, s.k, s.n)
						if !slices.Equal(c, want) {
							t.Fatalf("packed b, serial: got %v…, want %v…", head(c), head(want))
						}
						c = randWords(rng, s.m*s.n, "full")
						gemmParallel(impl, c, s.n, matView{data: a, rs: s.k, cs: 1}, matView{packed: pm}, s.m, s.k, s.n)
						if !slices.Equal(c, want) {
							t.Fatalf("packed b, parallel: got %v…, want %v…", head(c), head(want))
						}
					}
				})
			}
		}
	}
}

func head(x []uint64) []uint64 { return x[:min(len(x), 4)] }

// TestGEMMLarge runs a product big enough to split over cores and to need
// several k, m and n blocks, with the installed kernel against the generic one.
func TestGEMMLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, s := range []struct{ m, k, n int }{{133, 600, 2100}, {300, 260, 40}} {
		a := randWords(rng, s.m*s.k, "full")
		b := randWords(rng, s.k*s.n, "full")
		want := make([]uint64, s.m*s.n)
		gemmGeneric(want, a, b, s.m, s.k, s.n)
		// Spot-check the generic kernel itself against the naive sum.
		for _, ij := range [][2]int{{0, 0}, {s.m - 1, s.n - 1}, {s.m / 2, s.n / 3}} {
			var sum uint64
			for p := range s.k {
				sum += a[ij[0]*s.k+p] * b[p*s.n+ij[1]]
			}
			if got := want[ij[0]*s.n+ij[1]]; got != sum {
				t.Fatalf("generic c[%d][%d] = %d, want %d", ij[0], ij[1], got, sum)
			}
		}
		got := make([]uint64, s.m*s.n)
		if err := MatMulInto(got, a, b, s.m, s.k, s.n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("MatMulInto %v with %s kernel differs from generic", s, activeKernel().name)
		}
		clear(got)
		if err := MatMulTransBInto(got, a, transpose(b, s.k, s.n), s.m, s.k, s.n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("MatMulTransBInto %v differs from generic", s)
		}
		pm, err := PackMatrix(b, s.k, s.n)
		must(t, err)
		clear(got)
		must(t, MatMulPackedInto(got, a, s.m, pm))
		if !slices.Equal(got, want) {
			t.Fatalf("MatMulPackedInto %v differs from generic", s)
		}
	}
}

// TestMatMulAPI checks the exported products (MatMulInto, MatMulTransBInto,
// MatMul with a shared or a batched b, BatchMatMulInto) against the naive
// product on odd shapes, k = 0 and m = 0 included.
func TestMatMulAPI(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, s := range []struct{ batch, m, k, n int }{
		{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 17, 33, 65}, {1, 129, 257, 31}, {4, 2, 0, 3}, {2, 0, 4, 5},
		{5, 1, 9, 1}, {12, 16, 8, 16}, {0, 3, 3, 3}, {4, 40, 64, 70},
	} {
		name := fmt.Sprintf("%dx%dx%dx%d", s.batch, s.m, s.k, s.n)
		t.Run(name, func(t *testing.T) {
			a := randWords(rng, s.batch*s.m*s.k, "full")
			bShared := randWords(rng, s.k*s.n, "full")
			bBatch := randWords(rng, s.batch*s.k*s.n, "full")
			wantShared := make([]uint64, 0, s.batch*s.m*s.n)
			wantBatch := make([]uint64, 0, s.batch*s.m*s.n)
			for i := range s.batch {
				ai := a[i*s.m*s.k : (i+1)*s.m*s.k]
				wantShared = append(wantShared, naiveMatMul(ai, bShared, s.m, s.k, s.n)...)
				wantBatch = append(wantBatch, naiveMatMul(ai, bBatch[i*s.k*s.n:(i+1)*s.k*s.n], s.m, s.k, s.n)...)
			}

			c := randWords(rng, s.batch*s.m*s.n, "full")
			must(t, MatMulInto(c, a, bShared, s.batch*s.m, s.k, s.n))
			if !slices.Equal(c, wantShared) {
				t.Fatal("MatMulInto differs from the naive product")
			}
			c = randWords(rng, s.batch*s.m*s.n, "full")
			must(t, MatMulTransBInto(c, a, transpose(bShared, s.k, s.n), s.batch*s.m, s.k, s.n))
			if !slices.Equal(c, wantShared) {
				t.Fatal("MatMulTransBInto differs from the naive product")
			}
			for _, transposed := range []bool{false, true} {
				var pm *PackedMatrix
				var err error
				if transposed {
					pm, err = PackMatrixTransposed(transpose(bShared, s.k, s.n), s.n, s.k)
				} else {
					pm, err = PackMatrix(bShared, s.k, s.n)
				}
				must(t, err)
				if k, n := pm.Dims(); k != s.k || n != s.n {
					t.Fatalf("Dims() = %d, %d", k, n)
				}
				c = randWords(rng, s.batch*s.m*s.n, "full")
				must(t, MatMulPackedInto(c, a, s.batch*s.m, pm))
				if !slices.Equal(c, wantShared) {
					t.Fatalf("MatMulPackedInto (transposed %v) differs from the naive product", transposed)
				}
			}
			c = randWords(rng, s.batch*s.m*s.n, "full")
			must(t, BatchMatMulInto(c, a, bBatch, s.batch, s.m, s.k, s.n))
			if !slices.Equal(c, wantBatch) {
				t.Fatal("BatchMatMulInto differs from the naive product")
			}
			bBatchT := make([]uint64, 0, len(bBatch))
			for i := range s.batch {
				bBatchT = append(bBatchT, transpose(bBatch[i*s.k*s.n:(i+1)*s.k*s.n], s.k, s.n)...)
			}
			c = randWords(rng, s.batch*s.m*s.n, "full")
			must(t, BatchMatMulTransBInto(c, a, bBatchT, s.batch, s.m, s.k, s.n))
			if !slices.Equal(c, wantBatch) {
				t.Fatal("BatchMatMulTransBInto differs from the naive product")
			}

			ta, err := FromData(a, s.batch, s.m, s.k)
			must(t, err)
			tb, err := FromData(bShared, s.k, s.n)
			must(t, err)
			got, err := MatMul(ta, tb)
			must(t, err)
			if !slices.Equal(got.Shape, []int{s.batch, s.m, s.n}) || !slices.Equal(got.Data, wantShared) {
				t.Fatalf("MatMul broadcast: shape %v", got.Shape)
			}
			tbb, err := FromData(bBatch, s.batch, s.k, s.n)
			must(t, err)
			got, err = MatMul(ta, tbb)
			must(t, err)
			if !slices.Equal(got.Shape, []int{s.batch, s.m, s.n}) || !slices.Equal(got.Data, wantBatch) {
				t.Fatalf("MatMul batched: shape %v", got.Shape)
			}
			// Rank 4 with two leading dims, as per-head attention uses.
			if s.batch%2 == 0 {
				a4, _ := ta.Reshape(2, s.batch/2, s.m, s.k)
				b4, _ := tbb.Reshape(2, s.batch/2, s.k, s.n)
				got, err = MatMul(a4, b4)
				must(t, err)
				if !slices.Equal(got.Shape, []int{2, s.batch / 2, s.m, s.n}) || !slices.Equal(got.Data, wantBatch) {
					t.Fatalf("MatMul rank 4: shape %v", got.Shape)
				}
			}
		})
	}
}

// TestMatMulErrors checks that bad shapes and lengths give errors, not panics,
// including dimensions whose products overflow.
func TestMatMulErrors(t *testing.T) {
	w := func(n int) []uint64 { return make([]uint64, n) }
	big := 1 << (bits.UintSize / 2)
	intoTests := []struct {
		name    string
		c, a, b []uint64
		m, k, n int
	}{
		{"short a", w(6), w(5), w(12), 2, 3, 3},
		{"short b", w(6), w(6), w(8), 2, 3, 3},
		{"short c", w(5), w(6), w(9), 2, 3, 3},
		{"negative m", w(0), w(0), w(9), -1, 3, 3},
		{"negative k", w(0), w(0), w(0), 2, -3, 3},
		{"overflow", w(0), w(0), w(0), big, big, big},
	}
	for _, tc := range intoTests {
		if err := MatMulInto(tc.c, tc.a, tc.b, tc.m, tc.k, tc.n); err == nil {
			t.Errorf("MatMulInto %s: no error", tc.name)
		}
		if err := MatMulTransBInto(tc.c, tc.a, tc.b, tc.m, tc.k, tc.n); err == nil {
			t.Errorf("MatMulTransBInto %s: no error", tc.name)
		}
		if err := BatchMatMulInto(tc.c, tc.a, tc.b, 1, tc.m, tc.k, tc.n); err == nil {
			t.Errorf("BatchMatMulInto %s: no error", tc.name)
		}
		if err := BatchMatMulTransBInto(tc.c, tc.a, tc.b, 1, tc.m, tc.k, tc.n); err == nil {
			t.Errorf("BatchMatMulTransBInto %s: no error", tc.name)
		}
	}
	packErrs := []struct {
		name string
		f    func() error
	}{
		{"PackMatrix short", func() error { _, err := PackMatrix(w(5), 2, 3); return err }},
		{"PackMatrix negative", func() error { _, err := PackMatrix(w(0), -1, 0); return err }},
		{"PackMatrix overflow", func() error { _, err := PackMatrix(w(0), big, big); return err }},
		{"PackMatrixTransposed short", func() error { _, err := PackMatrixTransposed(w(7), 2, 3); return err }},
		{"MatMulPackedInto nil", func() error { return MatMulPackedInto(w(4), w(4), 2, nil) }},
		{"MatMulPackedInto short a", func() error {
			pm, _ := PackMatrix(w(6), 2, 3)
			return MatMulPackedInto(w(6), w(3), 2, pm)
		}},
		{"MatMulPackedInto short c", func() error {
			pm, _ := PackMatrix(w(6), 2, 3)
			return MatMulPackedInto(w(5), w(4), 2, pm)
		}},
		{"MatMulPackedInto negative m", func() error {
			pm, _ := PackMatrix(w(6), 2, 3)
			return MatMulPackedInto(w(0), w(0), -1, pm)
		}},
	}
	for _, tc := range packErrs {
		if err := tc.f(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if err := BatchMatMulInto(w(0), w(0), w(0), -1, 1, 1, 1); err == nil {
		t.Error("BatchMatMulInto negative batch: no error")
	}
	if err := BatchMatMulInto(w(0), w(0), w(0), big, big, big, 1); err == nil {
		t.Error("BatchMatMulInto overflow: no error")
	}
	if err := BatchMatMulTransBInto(w(0), w(0), w(0), -1, 1, 1, 1); err == nil {
		t.Error("BatchMatMulTransBInto negative batch: no error")
	}
	tn := func(shape ...int) *Tensor {
		x, err := NewTensor(shape...)
		must(t, err)
		return x
	}
	tensorTests := []struct {
		name string
		a, b *Tensor
		text string
	}{
		{"rank 1 a", tn(3), tn(3, 2), "rank"},
		{"rank 1 b", tn(2, 3), tn(3), "rank"},
		{"inner", tn(2, 3), tn(4, 2), "inner"},
		{"batched inner", tn(2, 2, 3), tn(2, 4, 2), "inner"},
		{"leading dims", tn(2, 2, 3), tn(3, 3, 2), "leading"},
		{"rank mismatch", tn(2, 3), tn(2, 3, 2), "leading"},
		{"nil", nil, tn(2, 2), "nil"},
		{"inconsistent", &Tensor{Shape: []int{2, 2}, Data: w(3)}, tn(2, 2), "words"},
	}
	for _, tc := range tensorTests {
		if _, err := MatMul(tc.a, tc.b); err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("MatMul %s: err = %v, want one mentioning %q", tc.name, err, tc.text)
		}
	}
}

// FuzzGEMM compares the installed kernel, plain and with a transposed b, with
// the naive product on arbitrary small shapes and words.
func FuzzGEMM(f *testing.F) {
	f.Add(uint8(3), uint8(5), uint8(7), uint64(1))
	f.Add(uint8(17), uint8(0), uint8(33), uint64(2))
	f.Add(uint8(9), uint8(255), uint8(16), uint64(3))
	f.Fuzz(func(t *testing.T, m8, k8, n8 uint8, seed uint64) {
		m, k, n := int(m8%40), int(k8), int(n8%40)
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		a, b := randWords(rng, m*k, "full"), randWords(rng, k*n, "full")
		want := naiveMatMul(a, b, m, k, n)
		c := randWords(rng, m*n, "full")
		if err := MatMulInto(c, a, b, m, k, n); err != nil || !slices.Equal(c, want) {
			t.Fatalf("MatMulInto %d×%d×%d: err %v, equal %v", m, k, n, err, slices.Equal(c, want))
		}
		c = randWords(rng, m*n, "full")
		if err := MatMulTransBInto(c, a, transpose(b, k, n), m, k, n); err != nil || !slices.Equal(c, want) {
			t.Fatalf("MatMulTransBInto %d×%d×%d: err %v, equal %v", m, k, n, err, slices.Equal(c, want))
		}
		pm, err := PackMatrix(b, k, n)
		if err != nil {
			t.Fatal(err)
		}
		c = randWords(rng, m*n, "full")
		if err := MatMulPackedInto(c, a, m, pm); err != nil || !slices.Equal(c, want) {
			t.Fatalf("MatMulPackedInto %d×%d×%d: err %v, equal %v", m, k, n, err, slices.Equal(c, want))
		}
	})
}

// TestPackedMatrixConcurrent uses one packed matrix from several goroutines
// at once (run with -race), as parties multiplying by shared weights do.
func TestPackedMatrixConcurrent(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	const m, k, n = 33, 70, 90
	b := randWords(rng, k*n, "full")
	pm, err := PackMatrix(b, k, n)
	must(t, err)
	errs := make(chan error, 4)
	for g := range 4 {
		a := randWords(rng, (m+g)*k, "full")
		want := naiveMatMul(a, b, m+g, k, n)
		go func() {
			c := make([]uint64, (m+g)*n)
			if err := MatMulPackedInto(c, a, m+g, pm); err != nil {
				errs <- err
				return
			}
			if !slices.Equal(c, want) {
				errs <- fmt.Errorf("goroutine %d: product differs", g)
				return
			}
			errs <- nil
		}()
	}
	for range 4 {
		must(t, <-errs)
	}
}

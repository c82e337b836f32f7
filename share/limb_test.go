package share

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// limbWords returns n words of one of the limb tests' patterns: uniform
// words, the edge words 0, 2^64−1, 2^63 and the alternating bit patterns
// (each alone, so every limb is 0, 0xFFFF, 0x8000, 0xAAAA or 0x5555), or a
// mix of the edges.
func limbWords(rng *rand.Rand, n int, pattern string) []uint64 {
	edges := []uint64{0, ^uint64(0), 1 << 63, 0xAAAAAAAAAAAAAAAA, 0x5555555555555555, 1, 0xFFFF, 0xFFFF << 48}
	w := make([]uint64, n)
	for i := range w {
		switch pattern {
		case "zero":
			w[i] = 0
		case "max":
			w[i] = ^uint64(0)
		case "top":
			w[i] = 1 << 63
		case "alt-a":
			w[i] = 0xAAAAAAAAAAAAAAAA
		case "alt-5":
			w[i] = 0x5555555555555555
		case "edges":
			w[i] = edges[rng.IntN(len(edges))]
		default:
			w[i] = rng.Uint64()
		}
	}
	return w
}

// ringProduct is the ring GEMM's c = a·b, the reference of the limb method.
func ringProduct(t testing.TB, a, b []uint64, m, k, n int) []uint64 {
	t.Helper()
	c := make([]uint64, m*n)
	if err := MatMulInto(c, a, b, m, k, n); err != nil {
		t.Fatal(err)
	}
	return c
}

// limbDiff describes the first differing entry of got and want, or "".
func limbDiff(got, want []uint64, n int) string {
	for i := range want {
		if got[i] != want[i] {
			return fmt.Sprintf("(%d,%d): got %#x, want %#x", i/max(n, 1), i%max(n, 1), got[i], want[i])
		}
	}
	return ""
}

// TestLimbGEMMBitExact proves the limb method on gonum's float64 GEMM equal,
// word for word, to the ring GEMM: odd shapes, inner dimensions up to 3072,
// more rows than one row block, and operands whose limbs are all maximal
// (2^64−1: the largest partial sums), single-bit (2^63), alternating
// (0xAAAA…, 0x5555…), zero, mixed edges or uniform.
func TestLimbGEMMBitExact(t *testing.T) {
	shapes := []struct{ m, k, n int }{
		{1, 1, 1}, {1, 7, 1}, {3, 5, 2}, {7, 13, 11}, {17, 64, 33}, {2, 3072, 3},
		{9, 3072, 17}, {limbRowBlock + 37, 40, 5}, {33, 768, 65},
	}
	patterns := [][2]string{
		{"uniform", "uniform"}, {"max", "max"}, {"top", "top"}, {"alt-a", "alt-5"},
		{"alt-5", "alt-5"}, {"max", "alt-a"}, {"zero", "uniform"}, {"edges", "edges"}, {"edges", "uniform"},
	}
	lg := GonumLimbGEMM()
	rng := rand.New(rand.NewPCG(11, 12))
	for _, s := range shapes {
		for _, p := range patterns {
			if s.k == 3072 && p[0] != "uniform" && p[0] != "max" && p[0] != "edges" {
				continue // keep the longest products to the patterns that stress them
			}
			t.Run(fmt.Sprintf("%dx%dx%d/%s*%s", s.m, s.k, s.n, p[0], p[1]), func(t *testing.T) {
				a, b := limbWords(rng, s.m*s.k, p[0]), limbWords(rng, s.k*s.n, p[1])
				w, err := NewWeightMatrix(b, s.k, s.n)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]uint64, s.m*s.n)
				if err := lg.MulWeights(got, a, 1, s.m, w); err != nil {
					t.Fatal(err)
				}
				want := ringProduct(t, a, b, s.m, s.k, s.n)
				if d := limbDiff(got, want, s.n); d != "" {
					t.Fatal(d)
				}
			})
		}
	}
}

// TestLimbGEMMClosedForm checks the limb method on products whose value is
// known without the ring GEMM: (2^64−1)·(2^64−1) = 1, so a k-long all-ones
// row times an all-ones column is k; 2^63·2^63 = 0; 2^63·odd = 2^63.
func TestLimbGEMMClosedForm(t *testing.T) {
	tests := []struct {
		name string
		a, b uint64
		k    int
		want uint64
	}{
		{"max*max", ^uint64(0), ^uint64(0), 3072, 3072},
		{"top*top", 1 << 63, 1 << 63, 5, 0},
		{"top*odd", 1 << 63, 0x5555555555555555, 3, 1 << 63},
		{"max*one", ^uint64(0), 1, 7, ^uint64(0) - 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := slices.Repeat([]uint64{tc.a}, tc.k)
			w, _ := NewWeightMatrix(slices.Repeat([]uint64{tc.b}, tc.k), tc.k, 1)
			c := make([]uint64, 1)
			if err := GonumLimbGEMM().MulWeights(c, a, 1, 1, w); err != nil {
				t.Fatal(err)
			}
			if c[0] != tc.want {
				t.Fatalf("got %#x, want %#x", c[0], tc.want)
			}
		})
	}
}

// TestLimbGEMMBatched checks both batched forms against the ring GEMM: a
// batch of blocks sharing the weights, and a batch of independent products.
func TestLimbGEMMBatched(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	lg := GonumLimbGEMM()
	for _, s := range []struct{ batch, m, k, n int }{{1, 4, 9, 5}, {3, 7, 31, 6}, {5, 1, 768, 3}, {4, 128, 64, 128}} {
		t.Run(fmt.Sprintf("%dx%dx%dx%d", s.batch, s.m, s.k, s.n), func(t *testing.T) {
			a := limbWords(rng, s.batch*s.m*s.k, "edges")
			b := limbWords(rng, s.batch*s.k*s.n, "uniform")
			got := make([]uint64, s.batch*s.m*s.n)
			if err := lg.BatchMatMul(got, a, b, s.batch, s.m, s.k, s.n); err != nil {
				t.Fatal(err)
			}
			want := make([]uint64, len(got))
			if err := BatchMatMulInto(want, a, b, s.batch, s.m, s.k, s.n); err != nil {
				t.Fatal(err)
			}
			if d := limbDiff(got, want, s.n); d != "" {
				t.Fatal("BatchMatMul " + d)
			}
			w, _ := NewWeightMatrix(b[:s.k*s.n], s.k, s.n)
			if err := lg.MulWeights(got, a, s.batch, s.m, w); err != nil {
				t.Fatal(err)
			}
			want = ringProduct(t, a, b[:s.k*s.n], s.batch*s.m, s.k, s.n)
			if d := limbDiff(got, want, s.n); d != "" {
				t.Fatal("MulWeights " + d)
			}
		})
	}
}

// TestLimbGEMMChunks runs the chunked path on short inner dimensions by
// lowering the chunk limit: every chunk's result must be added into the ring
// (not overwrite it), whether k is a multiple of the chunk or not.
func TestLimbGEMMChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, tc := range []struct{ m, k, n, chunk int }{{3, 23, 4, 7}, {5, 3072, 3, 1000}, {2, 64, 9, 16}, {4, 5, 4, 1}} {
		t.Run(fmt.Sprintf("%dx%dx%d/chunk%d", tc.m, tc.k, tc.n, tc.chunk), func(t *testing.T) {
			l := &limbGEMM{name: "test", f: GonumFloatGEMM, chunk: tc.chunk}
			a, b := limbWords(rng, tc.m*tc.k, "uniform"), limbWords(rng, tc.k*tc.n, "max")
			got := slices.Repeat([]uint64{0xDEAD}, tc.m*tc.n) // must be overwritten
			if err := l.matMul(got, a, b, tc.m, tc.k, tc.n); err != nil {
				t.Fatal(err)
			}
			if d := limbDiff(got, ringProduct(t, a, b, tc.m, tc.k, tc.n), tc.n); d != "" {
				t.Fatal(d)
			}
		})
	}
}

// TestLimbGEMMLongK runs the real chunk limit on an inner dimension above
// 2^21 (five chunks of at most 2^19) with all-ones words, whose partial sums
// are the largest possible: every entry must be exactly k.
func TestLimbGEMMLongK(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~200 MB")
	}
	const m, k, n = 2, 1<<21 + 5, 3
	a := slices.Repeat([]uint64{^uint64(0)}, m*k)
	w, err := NewWeightMatrix(slices.Repeat([]uint64{^uint64(0)}, k*n), k, n)
	if err != nil {
		t.Fatal(err)
	}
	c := make([]uint64, m*n)
	if err := GonumLimbGEMM().MulWeights(c, a, 1, m, w); err != nil {
		t.Fatal(err)
	}
	for i, v := range c {
		if v != k {
			t.Fatalf("entry %d: got %d, want %d", i, v, k)
		}
	}
}

// TestLimbChunkBoundNeeded is the negative control of the chunk limit: with
// chunks of 2^21 (the bound of ONE limb product, 2^32·k < 2^53, which
// ignores that a shift sums up to four of them) the largest partial sums
// pass 2^53 and the result is wrong, so the limit of 2^19 is what keeps the
// method exact on these operands.
func TestLimbChunkBoundNeeded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MB")
	}
	const k = 1 << 21
	a := slices.Repeat([]uint64{^uint64(0)}, k)
	b := slices.Repeat([]uint64{^uint64(0)}, k)
	c := make([]uint64, 1)
	loose := &limbGEMM{name: "loose", f: GonumFloatGEMM, chunk: 1 << 21}
	if err := loose.matMul(c, a, b, 1, k, 1); err != nil {
		t.Fatal(err)
	}
	if c[0] == k {
		t.Fatalf("chunks of 2^21 gave the exact %d: the operands do not reach the float64 bound", c[0])
	}
	exact := &limbGEMM{name: "exact", f: GonumFloatGEMM, chunk: limbMaxK}
	if err := exact.matMul(c, a, b, 1, k, 1); err != nil {
		t.Fatal(err)
	}
	if c[0] != k {
		t.Fatalf("chunks of 2^19: got %d, want %d", c[0], k)
	}
}

// TestLimbSplitRecombine checks the layout the float GEMMs rely on: the
// limbs of the left operand side by side, the right operand's stacked in
// reverse, and recombine inverting a split through the identity product.
func TestLimbSplitRecombine(t *testing.T) {
	a := []uint64{0x0004_0003_0002_0001, 0xFFFF_8000_AAAA_5555}
	left := make([]float64, 2*limbCount)
	splitLeft(left, a, 1, 0, 2, 0, 1)
	if want := []float64{1, 2, 3, 4, 0x5555, 0xAAAA, 0x8000, 0xFFFF}; !slices.Equal(left, want) {
		t.Fatalf("splitLeft: got %v, want %v", left, want)
	}
	right := make([]float64, limbCount*2)
	splitRight(right, a, 2, 0, 1)
	if want := []float64{4, 0xFFFF, 3, 0x8000, 2, 0xAAAA, 1, 0x5555}; !slices.Equal(right, want) {
		t.Fatalf("splitRight: got %v, want %v", right, want)
	}
	// planes of a 1×2 result: P_s = limb s of a, so recombine rebuilds a.
	planes := []float64{1, 0x5555, 2, 0xAAAA, 3, 0x8000, 4, 0xFFFF}
	c := make([]uint64, 2)
	recombine(c, 2, planes, 1, 2, 0, 1, false)
	if !slices.Equal(c, a) {
		t.Fatalf("recombine: got %#x, want %#x", c, a)
	}
	recombine(c, 2, planes, 1, 2, 0, 1, true)
	if want := []uint64{2 * a[0], 2 * a[1]}; !slices.Equal(c, want) {
		t.Fatalf("recombine add: got %#x, want %#x", c, want)
	}
}

// TestLimbGEMMErrors checks that bad operands are errors, not panics, in the
// backend and in the float GEMM.
func TestLimbGEMMErrors(t *testing.T) {
	lg := GonumLimbGEMM()
	w, _ := NewWeightMatrix(make([]uint64, 6), 2, 3)
	cases := []struct {
		name string
		err  error
	}{
		{"nil weights", lg.MulWeights(make([]uint64, 3), make([]uint64, 2), 1, 1, nil)},
		{"short a", lg.MulWeights(make([]uint64, 3), make([]uint64, 1), 1, 1, w)},
		{"short c", lg.MulWeights(make([]uint64, 2), make([]uint64, 2), 1, 1, w)},
		{"negative batch", lg.MulWeights(nil, nil, -1, 1, w)},
		{"batch sizes", lg.BatchMatMul(make([]uint64, 6), make([]uint64, 4), make([]uint64, 6), 2, 1, 2, 3)},
		{"float short", GonumFloatGEMM(2, 2, 2, make([]float64, 3), 2, make([]float64, 4), 2, make([]float64, 4), 2)},
		{"float stride", GonumFloatGEMM(2, 2, 2, make([]float64, 4), 1, make([]float64, 4), 2, make([]float64, 4), 2)},
		{"float negative", GonumFloatGEMM(-1, 2, 2, nil, 2, nil, 2, nil, 2)},
	}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := NewWeightMatrix(make([]uint64, 5), 2, 3); err == nil {
		t.Error("NewWeightMatrix with 5 words for 2×3: no error")
	}
	// Empty shapes are valid: nothing to do, or zeros when k is 0.
	c := []uint64{7, 7}
	w0, _ := NewWeightMatrix(nil, 0, 2)
	if err := lg.MulWeights(c, nil, 1, 1, w0); err != nil || c[0] != 0 || c[1] != 0 {
		t.Errorf("k = 0: got %v, %v; want zeros", c, err)
	}
	if err := lg.BatchMatMul(nil, nil, nil, 0, 3, 4, 5); err != nil {
		t.Errorf("empty batch: %v", err)
	}
}

// FuzzLimbGEMM compares the limb method with the ring GEMM on small
// products built from arbitrary bytes.
func FuzzLimbGEMM(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(3), uint8(5), uint8(2), bytesOf(^uint64(0), 1<<63, 0xAAAAAAAAAAAAAAAA))
	f.Add(uint8(2), uint8(9), uint8(4), []byte{})
	lg := GonumLimbGEMM()
	f.Fuzz(func(t *testing.T, m, k, n uint8, data []byte) {
		mm, kk, nn := int(m%9), int(k%40), int(n%9)
		words := func(count, off int) []uint64 {
			w := make([]uint64, count)
			for i := range w {
				var b [8]byte
				for j := range b {
					if len(data) > 0 {
						b[j] = data[(off+i*8+j)%len(data)]
					}
				}
				w[i] = binary.LittleEndian.Uint64(b[:])
			}
			return w
		}
		a, b := words(mm*kk, 0), words(kk*nn, 3)
		w, err := NewWeightMatrix(b, kk, nn)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]uint64, mm*nn)
		if err := lg.MulWeights(got, a, 1, mm, w); err != nil {
			t.Fatal(err)
		}
		if d := limbDiff(got, naiveMatMul(a, b, mm, kk, nn), nn); d != "" {
			t.Fatal(d)
		}
	})
}

// bytesOf returns the little-endian bytes of words.
func bytesOf(words ...uint64) []byte {
	var out []byte
	for _, w := range words {
		out = binary.LittleEndian.AppendUint64(out, w)
	}
	return out
}

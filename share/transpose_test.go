package share

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTransposeMatrixTiles checks the tiled transpose (4×4 blocks in AVX2 where
// the CPU has it, ragged edges word by word) against the plain loop, for
// shapes around the 4-word blocks and the 32-word tiles, with stale words
// in dst; and that a short source or destination is an error.
func TestTransposeMatrixTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 14))
	for _, c := range []struct{ m, n int }{{1, 1}, {1, 40}, {40, 1}, {3, 70}, {4, 4}, {5, 9}, {32, 32}, {33, 65}, {36, 36}, {128, 96}, {128, 768}, {769, 131}} {
		t.Run(fmt.Sprintf("%dx%d", c.m, c.n), func(t *testing.T) {
			src := randWords(rng, c.m*c.n, "full")
			want := make([]uint64, c.m*c.n)
			for i := range c.m {
				for j := range c.n {
					want[j*c.m+i] = src[i*c.n+j]
				}
			}
			got := randWords(rng, c.m*c.n, "full") // stale contents are overwritten
			must(t, TransposeMatrix(got, src, c.m, c.n))
			if !slices.Equal(got, want) {
				t.Fatalf("TransposeMatrix(%d×%d) differs from the plain transpose", c.m, c.n)
			}
			if c.m%4 == 0 && c.n%4 == 0 {
				gen := make([]uint64, c.m*c.n)
				transposeTile4Generic(gen, src, c.m, c.n, c.m, c.n)
				if !slices.Equal(gen, want) {
					t.Fatalf("transposeTile4Generic(%d×%d) differs from the plain transpose", c.m, c.n)
				}
			}
		})
	}
	if err := TransposeMatrix(make([]uint64, 5), make([]uint64, 6), 2, 3); err == nil {
		t.Fatal("a destination shorter than the source: no error")
	}
	if err := TransposeMatrix(make([]uint64, 6), make([]uint64, 5), 2, 3); err == nil {
		t.Fatal("a source of the wrong size: no error")
	}
}

// BenchmarkTranspose times TransposeMatrix on foldedAttention's Y_augᵀ block
// (128×768 words).
func BenchmarkTranspose(b *testing.B) {
	const m, n = 128, 768
	src, dst := make([]uint64, m*n), make([]uint64, m*n)
	b.SetBytes(8 * m * n)
	for b.Loop() {
		if err := TransposeMatrix(dst, src, m, n); err != nil {
			b.Fatal(err)
		}
	}
}

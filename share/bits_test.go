package share

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestPackedWords(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, 0}, {1, 1}, {63, 1}, {64, 1}, {65, 2}, {128, 2}, {129, 3}, {1 << 20, 1 << 14},
	} {
		if got := PackedWords(tc.n); got != tc.want {
			t.Errorf("PackedWords(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestMaskTail(t *testing.T) {
	const ones = ^uint64(0)
	for _, tc := range []struct {
		name   string
		packed []uint64
		n      int
		want   []uint64
	}{
		{"empty", nil, 0, nil},
		{"empty, n not a multiple", []uint64{}, 5, []uint64{}},
		{"one bit", []uint64{ones}, 1, []uint64{1}},
		{"63 bits", []uint64{ones}, 63, []uint64{ones >> 1}},
		{"full word", []uint64{ones}, 64, []uint64{ones}},
		{"second word", []uint64{ones, ones}, 70, []uint64{ones, 0x3f}},
		{"two full words", []uint64{ones, ones}, 128, []uint64{ones, ones}},
		{"only the last word", []uint64{ones, ones, ones}, 129, []uint64{ones, ones, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			MaskTail(tc.packed, tc.n)
			if len(tc.packed) != len(tc.want) {
				t.Fatalf("len %d, want %d", len(tc.packed), len(tc.want))
			}
			for i := range tc.want {
				if tc.packed[i] != tc.want[i] {
					t.Errorf("word %d: %#x, want %#x", i, tc.packed[i], tc.want[i])
				}
			}
		})
	}
}

// transposeBits is the bit-by-bit transpose Transpose64 must equal.
func transposeBits(a [64]uint64) (out [64]uint64) {
	for r := range 64 {
		for c := range 64 {
			out[c] |= (a[r] >> c & 1) << r
		}
	}
	return out
}

func TestTranspose64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var identity, ones, corner, row, col, random [64]uint64
	for i := range 64 {
		identity[i] = 1 << i
		ones[i] = math.MaxUint64
		col[i] = 1 << 5
		random[i] = rng.Uint64()
	}
	corner[63] = 1 << 0 // bit 0 of row 63 → bit 63 of row 0
	row[7] = math.MaxUint64
	for _, tc := range []struct {
		name string
		a    [64]uint64
	}{
		{"zero", [64]uint64{}}, {"identity", identity}, {"ones", ones}, {"corner", corner},
		{"row", row}, {"column", col}, {"random", random},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.a
			Transpose64(&got)
			if want := transposeBits(tc.a); got != want {
				t.Fatalf("Transpose64 differs from the bit-by-bit transpose")
			}
			Transpose64(&got)
			if got != tc.a {
				t.Fatalf("Transpose64 twice is not the identity")
			}
		})
	}
}

func TestBoundedProduct(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		dims  []int
		want  int
		err   string
	}{
		{"none", 10, nil, 1, ""},
		{"one", 10, []int{7}, 7, ""},
		{"at the limit", 12, []int{3, 4}, 12, ""},
		{"zero dim", 10, []int{0, 10}, 0, ""},
		{"negative", 10, []int{2, -1}, 0, "negative size -1"},
		{"dim over the limit", 10, []int{0, 11}, 0, "size 11 exceeds the limit of 10"},
		{"product over the limit", 12, []int{3, 5}, 0, "product exceeds the limit of 12"},
		{"no overflow", math.MaxInt, []int{1 << 40, 1 << 40}, 0, "product exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BoundedProduct(tc.limit, tc.dims...)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %d, %v; want an error containing %q", got, err, tc.err)
			}
		})
	}
}

func BenchmarkTranspose64(b *testing.B) {
	var a [64]uint64
	for i := range a {
		a[i] = uint64(i)*0x9E3779B97F4A7C15 + 1
	}
	b.SetBytes(64 * 8)
	for b.Loop() {
		Transpose64(&a)
	}
}

func TestPackFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		n    int
		bits uint
	}{
		{0, 16}, {1, 1}, {5, 16}, {4, 16}, {7, 13}, {64, 1}, {65, 1}, {33, 63}, {9, 64}, {100, 37},
	} {
		vals := make([]uint64, tc.n)
		for i := range vals {
			vals[i] = rng.Uint64() // the bits above tc.bits must be dropped
		}
		dst := make([]uint64, FieldWords(tc.n, tc.bits))
		for i := range dst {
			dst[i] = rng.Uint64() // PackFields overwrites whatever is there
		}
		if want := (tc.n*int(tc.bits) + 63) / 64; len(dst) != want {
			t.Fatalf("FieldWords(%d, %d) = %d, want %d", tc.n, tc.bits, len(dst), want)
		}
		PackFields(dst, vals, tc.bits)
		m := ^uint64(0) >> (64 - tc.bits)
		// Bit by bit: field i's bit k is bit i·bits+k of the string.
		for i, v := range vals {
			for k := uint(0); k < tc.bits; k++ {
				pos := uint(i)*tc.bits + k
				if got := dst[pos/64] >> (pos % 64) & 1; got != v>>k&1 {
					t.Fatalf("n=%d bits=%d: field %d bit %d is %d", tc.n, tc.bits, i, k, got)
				}
			}
		}
		if used := uint(tc.n) * tc.bits; used%64 != 0 && len(dst) > 0 && dst[len(dst)-1]>>(used%64) != 0 {
			t.Errorf("n=%d bits=%d: bits past the last field are set", tc.n, tc.bits)
		}
		back := make([]uint64, tc.n)
		UnpackFields(back, dst, tc.bits)
		for i := range back {
			if back[i] != vals[i]&m {
				t.Fatalf("n=%d bits=%d: field %d unpacked as %#x, want %#x", tc.n, tc.bits, i, back[i], vals[i]&m)
			}
		}
	}
}

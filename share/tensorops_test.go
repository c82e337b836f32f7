package share

import (
	"fmt"
	"slices"
	"testing"
)

// TestInPlace checks AddInPlace and SubInPlace against Add and Sub (words
// that wrap included), y left unchanged, and their refusal of nil tensors,
// differing shapes and shapes that do not describe their words.
func TestInPlace(t *testing.T) {
	for _, c := range []struct {
		name    string
		inPlace func(x, y *Tensor) error
		copying func(a, b *Tensor) (*Tensor, error)
	}{
		{"add", AddInPlace, Add},
		{"sub", SubInPlace, Sub},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := seqTensor(t, 2, 3)
			y := seqTensor(t, 2, 3)
			for i := range y.Data {
				y.Data[i] = ^uint64(0) - 3*y.Data[i] // wraps for every x word but the first
			}
			want, err := c.copying(x, y)
			must(t, err)
			y0 := y.Clone()
			must(t, c.inPlace(x, y))
			if !slices.Equal(x.Data, want.Data) || !slices.Equal(x.Shape, want.Shape) {
				t.Fatalf("in place %v %v, copying %v %v", x.Shape, x.Data, want.Shape, want.Data)
			}
			if !slices.Equal(y.Data, y0.Data) {
				t.Fatal("the operand changed")
			}
			for _, bad := range []struct {
				name string
				x, y *Tensor
			}{
				{"nil x", nil, y},
				{"nil y", x, nil},
				{"shapes differ", x, seqTensor(t, 3, 2)},
				{"ranks differ", x, seqTensor(t, 6)},
				{"short data", x, &Tensor{Shape: []int{2, 3}, Data: make([]uint64, 5)}},
			} {
				if err := c.inPlace(bad.x, bad.y); err == nil {
					t.Errorf("%s: no error", bad.name)
				}
			}
		})
	}
}

// TestBroadcastLast checks the shape and words of a broadcast, the empty
// cases, and the refusal of a negative width and of a result too large.
func TestBroadcastLast(t *testing.T) {
	v := &Tensor{Shape: []int{2, 2}, Data: []uint64{1, 0, 7, ^uint64(0)}}
	got, err := BroadcastLast(v, 3)
	must(t, err)
	want := []uint64{1, 1, 1, 0, 0, 0, 7, 7, 7, ^uint64(0), ^uint64(0), ^uint64(0)}
	if !slices.Equal(got.Shape, []int{2, 2, 3}) || !slices.Equal(got.Data, want) {
		t.Fatalf("BroadcastLast = %v %v, want [2 2 3] %v", got.Shape, got.Data, want)
	}
	if got, err := BroadcastLast(v, 0); err != nil || len(got.Data) != 0 || !slices.Equal(got.Shape, []int{2, 2, 0}) {
		t.Errorf("width 0: %v, %v", got, err)
	}
	empty := &Tensor{Shape: []int{0}, Data: nil}
	if got, err := BroadcastLast(empty, 5); err != nil || len(got.Data) != 0 {
		t.Errorf("empty input: %v, %v", got, err)
	}
	for _, bad := range []struct {
		name string
		v    *Tensor
		w    int
	}{
		{"nil", nil, 2},
		{"negative width", v, -1},
		{"too large", v, maxTensorElems},
		{"short data", &Tensor{Shape: []int{3}, Data: make([]uint64, 2)}, 2},
	} {
		if _, err := BroadcastLast(bad.v, bad.w); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

// TestTransposeMatrix checks the tiled transpose against the plain one on
// shapes below, at and across the tile size, every word of dst overwritten,
// and its refusal of sizes that do not match.
func TestTransposeMatrix(t *testing.T) {
	for _, c := range []struct{ m, n int }{{0, 0}, {0, 5}, {1, 1}, {1, 40}, {40, 1}, {3, 70}, {32, 32}, {33, 65}, {128, 96}} {
		t.Run(fmt.Sprintf("%dx%d", c.m, c.n), func(t *testing.T) {
			src := make([]uint64, c.m*c.n)
			for i := range src {
				src[i] = uint64(i)*0x9e3779b97f4a7c15 + 1
			}
			want := make([]uint64, c.m*c.n)
			for i := 0; i < c.m; i++ {
				for j := 0; j < c.n; j++ {
					want[j*c.m+i] = src[i*c.n+j]
				}
			}
			got := make([]uint64, c.m*c.n)
			for i := range got {
				got[i] = ^uint64(0) // stale contents must all be overwritten
			}
			must(t, TransposeMatrix(got, src, c.m, c.n))
			if !slices.Equal(got, want) {
				t.Fatalf("TransposeMatrix(%d×%d) differs from the plain transpose", c.m, c.n)
			}
		})
	}
	for _, bad := range []struct {
		name     string
		dst, src int
		m, n     int
	}{
		{"short dst", 5, 6, 2, 3},
		{"long src", 6, 7, 2, 3},
		{"negative", 0, 0, -1, 0},
		{"negative product", 2, 2, -1, -2},
		{"overflow", 0, 0, huge, huge},
	} {
		if err := TransposeMatrix(make([]uint64, bad.dst), make([]uint64, bad.src), bad.m, bad.n); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

package share

import (
	"math"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// huge is a dimension whose square overflows int.
const huge = 1 << (bits.UintSize/2 + 4)

// seqTensor returns a tensor of the given shape holding 0, 1, 2, … so every
// element's value is its row-major index.
func seqTensor(t *testing.T, shape ...int) *Tensor {
	t.Helper()
	x, err := NewTensor(shape...)
	must(t, err)
	for i := range x.Data {
		x.Data[i] = uint64(i)
	}
	return x
}

func TestNewTensorAndFromData(t *testing.T) {
	tests := []struct {
		shape []int
		n     int
		ok    bool
	}{
		{[]int{}, 1, true}, {[]int{0}, 0, true}, {[]int{3}, 3, true}, {[]int{2, 3, 4}, 24, true},
		{[]int{5, 0, 7}, 0, true}, {[]int{-1}, 0, false}, {[]int{2, -3}, 0, false},
		{[]int{huge, huge}, 0, false}, {[]int{math.MaxInt, 2}, 0, false},
	}
	for _, tc := range tests {
		x, err := NewTensor(tc.shape...)
		if (err == nil) != tc.ok {
			t.Fatalf("NewTensor(%v): err = %v, want ok=%v", tc.shape, err, tc.ok)
		}
		if !tc.ok {
			continue
		}
		if x.Len() != tc.n || x.Rank() != len(tc.shape) || slices.ContainsFunc(x.Data, func(v uint64) bool { return v != 0 }) {
			t.Fatalf("NewTensor(%v) = %v with %d words", tc.shape, x, x.Len())
		}
		data := make([]uint64, tc.n)
		y, err := FromData(data, tc.shape...)
		must(t, err)
		if tc.n > 0 && &y.Data[0] != &data[0] {
			t.Fatal("FromData copied its data")
		}
		if _, err := FromData(make([]uint64, tc.n+1), tc.shape...); err == nil {
			t.Fatalf("FromData(%d words, %v): no error", tc.n+1, tc.shape)
		}
	}
	// The shape is copied: changing the caller's slice later changes nothing.
	shape := []int{2, 2}
	x, _ := NewTensor(shape...)
	shape[0] = 9
	if x.Shape[0] != 2 || x.String() != "tensor[2 2]" {
		t.Fatalf("shape aliased the argument: %v", x)
	}
	c := x.Clone()
	c.Data[0], c.Shape[0] = 5, 3
	if x.Data[0] != 0 || x.Shape[0] != 2 {
		t.Fatal("Clone shares memory")
	}
}

func TestReshape(t *testing.T) {
	x := seqTensor(t, 2, 3, 4)
	tests := []struct {
		shape []int
		want  []int // nil: an error
	}{
		{[]int{24}, []int{24}}, {[]int{4, 6}, []int{4, 6}}, {[]int{-1}, []int{24}},
		{[]int{2, -1}, []int{2, 12}}, {[]int{-1, 3, 2}, []int{4, 3, 2}}, {[]int{1, 24, 1}, []int{1, 24, 1}},
		{[]int{5, -1}, nil}, {[]int{-1, -1}, nil}, {[]int{0, -1}, nil}, {[]int{25}, nil},
		{[]int{-2, 12}, nil}, {[]int{}, nil}, {[]int{huge, huge}, nil}, {[]int{-1, huge, huge, huge, huge}, nil},
	}
	for _, tc := range tests {
		y, err := x.Reshape(tc.shape...)
		if tc.want == nil {
			if err == nil {
				t.Errorf("Reshape(%v) = %v, want an error", tc.shape, y)
			}
			continue
		}
		if err != nil {
			t.Errorf("Reshape(%v): %v", tc.shape, err)
			continue
		}
		if !slices.Equal(y.Shape, tc.want) || &y.Data[0] != &x.Data[0] {
			t.Errorf("Reshape(%v) = %v (view: %v)", tc.shape, y.Shape, &y.Data[0] == &x.Data[0])
		}
	}
	empty := seqTensor(t, 0, 5)
	if y, err := empty.Reshape(5, 0); err != nil || y.Len() != 0 {
		t.Errorf("reshape of empty: %v, %v", y, err)
	}
	if s, err := seqTensor(t).Reshape(1, 1); err != nil || s.Len() != 1 {
		t.Errorf("reshape of scalar: %v, %v", s, err)
	}
	var nilT *Tensor
	if _, err := nilT.Reshape(1); err == nil {
		t.Error("reshape of nil: no error")
	}
}

func TestSlice(t *testing.T) {
	x := seqTensor(t, 5, 2, 3)
	tests := []struct {
		from, to int
		ok       bool
	}{
		{0, 5, true}, {1, 3, true}, {2, 2, true}, {4, 5, true}, {5, 5, true},
		{-1, 2, false}, {3, 2, false}, {0, 6, false},
	}
	for _, tc := range tests {
		y, err := x.Slice(tc.from, tc.to)
		if (err == nil) != tc.ok {
			t.Fatalf("Slice(%d, %d): err = %v", tc.from, tc.to, err)
		}
		if !tc.ok {
			continue
		}
		if !slices.Equal(y.Shape, []int{tc.to - tc.from, 2, 3}) || y.Len() != 6*(tc.to-tc.from) {
			t.Fatalf("Slice(%d, %d) = %v", tc.from, tc.to, y)
		}
		for i, v := range y.Data {
			if v != uint64(tc.from*6+i) {
				t.Fatalf("Slice(%d, %d)[%d] = %d", tc.from, tc.to, i, v)
			}
		}
		// A view: writes show in the source; appends never do.
		if y.Len() > 0 {
			y.Data[0] = 999
			if x.Data[tc.from*6] != 999 {
				t.Fatal("slice is not a view")
			}
			x.Data[tc.from*6] = uint64(tc.from * 6)
			_ = append(y.Data, 12345)
			if tc.to < 5 && x.Data[tc.to*6] != uint64(tc.to*6) {
				t.Fatal("append to a slice overwrote the source")
			}
		}
	}
	if _, err := seqTensor(t).Slice(0, 0); err == nil {
		t.Error("slice of a scalar: no error")
	}
	bad := &Tensor{Shape: []int{4, 4}, Data: make([]uint64, 3)}
	if _, err := bad.Slice(0, 2); err == nil {
		t.Error("slice of an inconsistent tensor: no error")
	}
}

func TestStackConcat(t *testing.T) {
	a, b := seqTensor(t, 2, 3), MulScalar(seqTensor(t, 2, 3), 10)
	s, err := Stack(a, b, a)
	must(t, err)
	if !slices.Equal(s.Shape, []int{3, 2, 3}) || s.Data[6+4] != 40 || s.Data[12+5] != 5 {
		t.Fatalf("Stack = %v %v", s.Shape, s.Data)
	}
	c, err := Concat(a, seqTensor(t, 1, 3), b)
	must(t, err)
	if !slices.Equal(c.Shape, []int{5, 3}) || c.Data[6] != 0 || c.Data[9+2] != 20 {
		t.Fatalf("Concat = %v %v", c.Shape, c.Data)
	}
	// Round trip: concatenated rows sliced back are the inputs.
	part, err := c.Slice(3, 5)
	must(t, err)
	if !slices.Equal(part.Data, b.Data) {
		t.Fatal("Concat then Slice is not the identity")
	}
	errTests := []struct {
		name string
		f    func() error
	}{
		{"stack/none", func() error { _, err := Stack(); return err }},
		{"stack/shapes", func() error { _, err := Stack(a, seqTensor(t, 3, 2)); return err }},
		{"stack/nil", func() error { _, err := Stack(a, nil); return err }},
		{"concat/none", func() error { _, err := Concat(); return err }},
		{"concat/inner", func() error { _, err := Concat(a, seqTensor(t, 2, 4)); return err }},
		{"concat/rank", func() error { _, err := Concat(a, seqTensor(t, 6)); return err }},
		{"concat/scalar", func() error { _, err := Concat(seqTensor(t), seqTensor(t)); return err }},
		{"concat/nil", func() error { _, err := Concat(nil, a); return err }},
		{"concat/inconsistent", func() error { _, err := Concat(&Tensor{Shape: []int{2}, Data: nil}); return err }},
	}
	for _, tc := range errTests {
		if err := tc.f(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestTransposeLast2(t *testing.T) {
	for _, shape := range [][]int{{1, 1}, {3, 5}, {2, 7, 3}, {2, 3, 33, 65}, {4, 0, 3}, {0, 2, 2}, {1, 40, 1}} {
		x := seqTensor(t, shape...)
		y, err := TransposeLast2(x)
		must(t, err)
		r := len(shape)
		m, n := shape[r-2], shape[r-1]
		want := slices.Clone(shape)
		want[r-2], want[r-1] = n, m
		if !slices.Equal(y.Shape, want) {
			t.Fatalf("%v: shape %v, want %v", shape, y.Shape, want)
		}
		for b := 0; b*m*n < x.Len(); b++ {
			for i := range m {
				for j := range n {
					if y.Data[b*m*n+j*m+i] != x.Data[b*m*n+i*n+j] {
						t.Fatalf("%v: element (%d, %d, %d) misplaced", shape, b, i, j)
					}
				}
			}
		}
		z, err := TransposeLast2(y)
		must(t, err)
		if !slices.Equal(z.Data, x.Data) || !z.SameShape(x) {
			t.Fatalf("%v: transposing twice is not the identity", shape)
		}
	}
	for _, bad := range []*Tensor{nil, seqTensor(t, 5), seqTensor(t), {Shape: []int{3, 3}, Data: make([]uint64, 4)}} {
		if _, err := TransposeLast2(bad); err == nil {
			t.Errorf("TransposeLast2(%v): no error", bad)
		}
	}
}

func TestSplitMergeHeads(t *testing.T) {
	tests := []struct{ b, s, heads, d int }{{1, 1, 1, 1}, {2, 3, 4, 5}, {1, 7, 3, 1}, {3, 2, 1, 6}, {2, 0, 2, 3}, {1, 5, 12, 2}}
	for _, tc := range tests {
		x := seqTensor(t, tc.b, tc.s, tc.heads*tc.d)
		y, err := SplitHeads(x, tc.heads)
		must(t, err)
		if !slices.Equal(y.Shape, []int{tc.b, tc.heads, tc.s, tc.d}) {
			t.Fatalf("%+v: SplitHeads shape %v", tc, y.Shape)
		}
		for bi := range tc.b {
			for h := range tc.heads {
				for si := range tc.s {
					for di := range tc.d {
						got := y.Data[((bi*tc.heads+h)*tc.s+si)*tc.d+di]
						want := x.Data[(bi*tc.s+si)*tc.heads*tc.d+h*tc.d+di]
						if got != want {
							t.Fatalf("%+v: [%d %d %d %d] = %d, want %d", tc, bi, h, si, di, got, want)
						}
					}
				}
			}
		}
		z, err := MergeHeads(y)
		must(t, err)
		if !z.SameShape(x) || !slices.Equal(z.Data, x.Data) {
			t.Fatalf("%+v: MergeHeads(SplitHeads(x)) ≠ x", tc)
		}
	}
	x := seqTensor(t, 2, 3, 6)
	for _, tc := range []struct {
		x     *Tensor
		heads int
	}{{x, 4}, {x, 0}, {x, -2}, {seqTensor(t, 3, 6), 2}, {nil, 1}, {&Tensor{Shape: []int{1, 2, 2}}, 2}} {
		if _, err := SplitHeads(tc.x, tc.heads); err == nil || !strings.Contains(err.Error(), "share") {
			t.Errorf("SplitHeads(%v, %d): err = %v", tc.x, tc.heads, err)
		}
	}
	for _, bad := range []*Tensor{nil, x, seqTensor(t, 1, 2, 3, 4, 5), {Shape: []int{1, 1, 2, 2}, Data: make([]uint64, 3)}} {
		if _, err := MergeHeads(bad); err == nil {
			t.Errorf("MergeHeads(%v): no error", bad)
		}
	}
}

// FuzzReshape checks that Reshape of arbitrary shapes either errors or
// returns a view with the same number of elements, and never panics.
func FuzzReshape(f *testing.F) {
	f.Add(6, 2, -1, 3)
	f.Add(0, 0, -1, 5)
	f.Add(24, -1, -1, 2)
	f.Add(8, huge, huge, huge)
	f.Fuzz(func(t *testing.T, n, d0, d1, d2 int) {
		if n < 0 || n > 1<<12 {
			return
		}
		x := &Tensor{Shape: []int{n}, Data: make([]uint64, n)}
		y, err := x.Reshape(d0, d1, d2)
		if err != nil {
			return
		}
		got, err := numel(y.Shape)
		if err != nil || got != n || y.Len() != n {
			t.Fatalf("Reshape(%d, %d, %d) of %d elements = %v (%d elements, %v)", d0, d1, d2, n, y.Shape, got, err)
		}
	})
}

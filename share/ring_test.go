package share

import (
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ringEdges are the words where wrap-around bugs show: 0, 1, −1, 2^63 (the
// most negative int64), 2^63−1, the default fixed-point bound 2^31 and its
// negation, and the encoding of 1.0.
var ringEdges = []uint64{0, 1, ^uint64(0), 1 << 63, 1<<63 - 1, 1 << 31, ^uint64(1<<31 - 1), 1 << 16}

// mod64 reduces a big integer into Z_2^64, the independent reference.
func mod64(x *big.Int) uint64 {
	m := new(big.Int).Lsh(big.NewInt(1), 64)
	return new(big.Int).Mod(x, m).Uint64()
}

func bigOf(w uint64) *big.Int { return new(big.Int).SetUint64(w) }

// ringVectors returns test vectors: every pair of edge words, then random words.
func ringVectors(rng *rand.Rand) (a, b []uint64) {
	for _, x := range ringEdges {
		for _, y := range ringEdges {
			a, b = append(a, x), append(b, y)
		}
	}
	for range 200 {
		a, b = append(a, rng.Uint64()), append(b, rng.Uint64())
	}
	return a, b
}

// TestRingSliceOps checks each elementwise op against big-integer arithmetic
// reduced mod 2^64, both into a fresh slice and in place.
func TestRingSliceOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	a, b := ringVectors(rng)
	const c = 0xdeadbeefcafebabe
	tests := []struct {
		name string
		op   func(dst, a, b []uint64) error
		ref  func(x, y *big.Int) *big.Int
	}{
		{"AddVec", AddVec, func(x, y *big.Int) *big.Int { return new(big.Int).Add(x, y) }},
		{"SubVec", SubVec, func(x, y *big.Int) *big.Int { return new(big.Int).Sub(x, y) }},
		{"MulVec", MulVec, func(x, y *big.Int) *big.Int { return new(big.Int).Mul(x, y) }},
		{"NegVec", func(dst, a, _ []uint64) error { return NegVec(dst, a) },
			func(x, _ *big.Int) *big.Int { return new(big.Int).Neg(x) }},
		{"MulScalarVec", func(dst, a, _ []uint64) error { return MulScalarVec(dst, a, c) },
			func(x, _ *big.Int) *big.Int { return new(big.Int).Mul(x, bigOf(c)) }},
		{"MulScalarVec/-1", func(dst, a, _ []uint64) error { return MulScalarVec(dst, a, ^uint64(0)) },
			func(x, _ *big.Int) *big.Int { return new(big.Int).Neg(x) }},
		{"AddPublicVec/0", func(dst, a, b []uint64) error { return AddPublicVec(dst, a, b, 0) },
			func(x, y *big.Int) *big.Int { return new(big.Int).Add(x, y) }},
		{"AddPublicVec/1", func(dst, a, b []uint64) error { return AddPublicVec(dst, a, b, 1) },
			func(x, _ *big.Int) *big.Int { return x }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := make([]uint64, len(a))
			for i := range a {
				want[i] = mod64(tc.ref(bigOf(a[i]), bigOf(b[i])))
			}
			got := make([]uint64, len(a))
			if err := tc.op(got, a, b); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("element %d: op(%#x, %#x) = %#x, want %#x", i, a[i], b[i], got[i], want[i])
			}
			inPlace := slices.Clone(a)
			if err := tc.op(inPlace, inPlace, b); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(inPlace, want); i >= 0 {
				t.Fatalf("in place, element %d: got %#x, want %#x", i, inPlace[i], want[i])
			}
			if err := tc.op(got[:1], a, b); err == nil {
				t.Fatal("no error for a short destination")
			}
			if err := tc.op(nil, nil, nil); err != nil {
				t.Fatalf("empty slices: %v", err)
			}
		})
	}
}

// firstDiff returns the first index where x and y differ, or −1.
func firstDiff[T comparable](x, y []T) int {
	for i := range x {
		if x[i] != y[i] {
			return i
		}
	}
	if len(x) != len(y) {
		return min(len(x), len(y))
	}
	return -1
}

// TestRingIdentities checks the algebra the protocols rely on: a+b−b = a,
// a+(−a) = 0, distributivity, and SumVec against big integers.
func TestRingIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	a, b := ringVectors(rng)
	n := len(a)
	tmp, back, neg, zero := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
	must(t, AddVec(tmp, a, b))
	must(t, SubVec(back, tmp, b))
	if i := firstDiff(back, a); i >= 0 {
		t.Fatalf("(a+b)−b ≠ a at %d", i)
	}
	must(t, NegVec(neg, a))
	must(t, AddVec(zero, a, neg))
	if SumVec(zero) != 0 || slices.ContainsFunc(zero, func(v uint64) bool { return v != 0 }) {
		t.Fatal("a + (−a) ≠ 0")
	}
	// c·(a+b) = c·a + c·b for an odd and an even public c.
	for _, c := range []uint64{3, 1 << 40, ^uint64(0)} {
		lhs, ca, cb, rhs := make([]uint64, n), make([]uint64, n), make([]uint64, n), make([]uint64, n)
		must(t, MulScalarVec(lhs, tmp, c))
		must(t, MulScalarVec(ca, a, c))
		must(t, MulScalarVec(cb, b, c))
		must(t, AddVec(rhs, ca, cb))
		if i := firstDiff(lhs, rhs); i >= 0 {
			t.Fatalf("c=%#x: distributivity fails at %d", c, i)
		}
	}
	sum := new(big.Int)
	for _, v := range a {
		sum.Add(sum, bigOf(v))
	}
	if got, want := SumVec(a), mod64(sum); got != want {
		t.Fatalf("SumVec = %#x, want %#x", got, want)
	}
	if SumVec(nil) != 0 {
		t.Fatal("SumVec(nil) ≠ 0")
	}
}

func TestAddPublicVecBadParty(t *testing.T) {
	for _, party := range []int{-1, 2, 7} {
		err := AddPublicVec(make([]uint64, 2), make([]uint64, 2), make([]uint64, 2), party)
		if err == nil || !strings.Contains(err.Error(), "party") {
			t.Fatalf("party %d: err = %v", party, err)
		}
	}
	if err := AddPublicVec(make([]uint64, 2), make([]uint64, 2), make([]uint64, 3), 1); err == nil {
		t.Fatal("party 1: no error for mismatched lengths")
	}
}

// TestTensorRingOps checks the tensor wrappers against the slice ops and
// their shape errors.
func TestTensorRingOps(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	a, b := ringVectors(rng)
	n := len(a)
	ta, _ := FromData(a, 2, n/2)
	tb, _ := FromData(b, 2, n/2)
	other, _ := NewTensor(n/2, 2)
	type binop func(x, y *Tensor) (*Tensor, error)
	tests := []struct {
		name string
		op   binop
		ref  func(dst, x, y []uint64) error
	}{
		{"Add", Add, AddVec},
		{"Sub", Sub, SubVec},
		{"Neg", func(x, _ *Tensor) (*Tensor, error) { return Neg(x), nil }, func(d, x, _ []uint64) error { return NegVec(d, x) }},
		{"MulScalar", func(x, _ *Tensor) (*Tensor, error) { return MulScalar(x, 1<<63+5), nil },
			func(d, x, _ []uint64) error { return MulScalarVec(d, x, 1<<63+5) }},
		{"AddPublic/0", func(x, y *Tensor) (*Tensor, error) { return AddPublic(x, y, 0) }, AddVec},
		{"AddPublic/1", func(x, y *Tensor) (*Tensor, error) { return AddPublic(x, y, 1) },
			func(d, x, _ []uint64) error { copy(d, x); return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.op(ta, tb)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]uint64, n)
			must(t, tc.ref(want, a, b))
			if !slices.Equal(got.Shape, ta.Shape) || firstDiff(got.Data, want) >= 0 {
				t.Fatalf("got %v %v…, want %v %v…", got.Shape, head(got.Data), ta.Shape, head(want))
			}
			if &got.Data[0] == &a[0] {
				t.Fatal("result aliases its operand")
			}
		})
	}
	for name, op := range map[string]binop{"Add": Add, "Sub": Sub,
		"AddPublic": func(x, y *Tensor) (*Tensor, error) { return AddPublic(x, y, 0) }} {
		if _, err := op(ta, other); err == nil || !strings.Contains(err.Error(), "shape") {
			t.Errorf("%s of shapes %v and %v: err = %v", name, ta.Shape, other.Shape, err)
		}
		if _, err := op(ta, nil); err == nil {
			t.Errorf("%s with nil: no error", name)
		}
	}
	if _, err := AddPublic(ta, tb, 2); err == nil {
		t.Error("AddPublic party 2: no error")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

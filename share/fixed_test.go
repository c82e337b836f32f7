package share

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// fixedTestParams are encodings from the coarsest to the finest the package
// allows, the default among them.
var fixedTestParams = []struct{ f, intBits uint }{
	{1, 10}, {8, 20}, {12, 30}, {16, 15}, {20, 20}, {24, 8}, {32, 28}, {40, 22}, {61, 1}, {1, 61},
}

// TestFixedPointRoundTrip checks |Decode(Encode(x)) − x| ≤ 2^−f/2 (round to
// nearest) for random reals across the range, tiny values, and the largest
// values below the bound.
func TestFixedPointRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, p := range fixedTestParams {
		t.Run(fmt.Sprintf("f=%d,int=%d", p.f, p.intBits), func(t *testing.T) {
			fp, err := NewFixedPoint(p.f, p.intBits)
			if err != nil {
				t.Fatal(err)
			}
			bound := fp.Bound()
			below := math.Nextafter(bound, 0)
			xs := []float64{0, 1, -1, 0.5, -0.5, fp.Ulp(), -fp.Ulp(), fp.Ulp() / 2, fp.Ulp() / 3, -fp.Ulp() / 3,
				below, -below, bound - fp.Ulp(), -(bound - fp.Ulp()), math.SmallestNonzeroFloat64, math.Copysign(0, -1)}
			for range 2000 {
				xs = append(xs, (2*rng.Float64()-1)*bound, (2*rng.Float64()-1)*math.Min(bound, 4))
			}
			for _, x := range xs {
				if math.Abs(x) >= bound {
					continue // e.g. 1 with f=61, int=1 is out of range
				}
				w, err := fp.Encode(x)
				if err != nil {
					t.Fatalf("Encode(%g): %v", x, err)
				}
				if got := fp.Decode(w); math.Abs(got-x) > fp.Ulp()/2 {
					t.Fatalf("Decode(Encode(%g)) = %g: error %g > ulp/2 = %g", x, got, math.Abs(got-x), fp.Ulp()/2)
				}
				// The word is the two's complement of the rounded integer.
				if want := int64(math.RoundToEven(math.Ldexp(x, int(p.f)))); int64(w) != want {
					t.Fatalf("Encode(%g) = %d, want %d", x, int64(w), want)
				}
			}
		})
	}
}

// TestFixedPointRingHomomorphism checks that ring addition of encodings is
// addition of reals and that a ring product carries 2f fractional bits.
func TestFixedPointRingHomomorphism(t *testing.T) {
	fp := DefaultFixedPoint
	tests := []struct{ x, y float64 }{{1.5, -2.25}, {-3, -7.75}, {100.125, 0.5}, {-0.25, 0.25}, {0, -9}}
	for _, tc := range tests {
		wx, err := fp.Encode(tc.x)
		must(t, err)
		wy, err := fp.Encode(tc.y)
		must(t, err)
		if got := fp.Decode(wx + wy); got != tc.x+tc.y {
			t.Errorf("%g + %g decodes to %g", tc.x, tc.y, got)
		}
		if got := fp.Decode(wx - wy); got != tc.x-tc.y {
			t.Errorf("%g − %g decodes to %g", tc.x, tc.y, got)
		}
		if got := math.Ldexp(float64(int64(wx*wy)), -2*int(fp.FracBits)); got != tc.x*tc.y {
			t.Errorf("%g · %g decodes (2f bits) to %g", tc.x, tc.y, got)
		}
	}
}

// TestFixedPointEncodeErrors checks that NaN, ±Inf and |x| ≥ bound are
// rejected with an error naming the value and the bound.
func TestFixedPointEncodeErrors(t *testing.T) {
	for _, p := range []struct{ f, intBits uint }{{16, 15}, {8, 4}, {30, 30}} {
		fp := FixedPoint{FracBits: p.f, IntBits: p.intBits}
		bound := fp.Bound()
		boundText := fmt.Sprintf("%g", bound)
		tests := []struct {
			x    float64
			text string
		}{
			{math.NaN(), "NaN"},
			{math.Inf(1), "+Inf"},
			{math.Inf(-1), "-Inf"},
			{bound, boundText},
			{-bound, fmt.Sprintf("%g", -bound)},
			{bound * 3, fmt.Sprintf("%g", bound*3)},
			{-1e300, "-1e+300"},
			{math.MaxFloat64, fmt.Sprintf("%g", math.MaxFloat64)},
		}
		for _, tc := range tests {
			w, err := fp.Encode(tc.x)
			if err == nil {
				t.Fatalf("%+v: Encode(%g) = %#x, want an error", p, tc.x, w)
			}
			if !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), boundText) {
				t.Errorf("%+v: Encode(%g) error %q does not name %q and the bound %s", p, tc.x, err, tc.text, boundText)
			}
		}
	}
}

func TestNewFixedPoint(t *testing.T) {
	tests := []struct {
		f, intBits uint
		ok         bool
	}{
		{16, 15, true}, {1, 0, true}, {1, 61, true}, {62, 0, true}, {31, 31, true},
		{0, 15, false}, {0, 0, false}, {63, 0, false}, {31, 32, false}, {40, 40, false},
		{^uint(0), 1, false}, {1, ^uint(0), false}, {^uint(0) - 5, 10, false},
	}
	for _, tc := range tests {
		fp, err := NewFixedPoint(tc.f, tc.intBits)
		if (err == nil) != tc.ok {
			t.Errorf("NewFixedPoint(%d, %d): err = %v, want ok=%v", tc.f, tc.intBits, err, tc.ok)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprint(tc.f)) {
			t.Errorf("NewFixedPoint(%d, %d): error %q does not name the parameters", tc.f, tc.intBits, err)
		}
		if tc.ok && (fp.FracBits != tc.f || fp.IntBits != tc.intBits || fp.Scale() != 1<<tc.f || fp.Ulp()*float64(fp.Scale()) != 1) {
			t.Errorf("NewFixedPoint(%d, %d) = %+v", tc.f, tc.intBits, fp)
		}
	}
	if err := DefaultFixedPoint.Validate(); err != nil {
		t.Fatalf("default encoding invalid: %v", err)
	}
}

// TestFixedPointDecodeEdges decodes the ring words at the wrap-around points.
func TestFixedPointDecodeEdges(t *testing.T) {
	fp := DefaultFixedPoint
	tests := []struct {
		w    uint64
		want float64
	}{
		{0, 0}, {1, 1.0 / 65536}, {^uint64(0), -1.0 / 65536}, {1 << 16, 1},
		{1 << 63, -math.Ldexp(1, 63-16)}, {1<<63 - 1, math.Ldexp(1, 63-16)},
	}
	for _, tc := range tests {
		if got := fp.Decode(tc.w); got != tc.want {
			t.Errorf("Decode(%#x) = %g, want %g", tc.w, got, tc.want)
		}
	}
}

func TestFixedPointSlicesAndTensors(t *testing.T) {
	fp := DefaultFixedPoint
	xs := []float64{0, 1.5, -2.25, 3e4, -1e-3, 7}
	ws := make([]uint64, len(xs))
	must(t, fp.EncodeSlice(ws, xs))
	back := make([]float64, len(xs))
	must(t, fp.DecodeSlice(back, ws))
	for i := range xs {
		if math.Abs(back[i]-xs[i]) > fp.Ulp()/2 {
			t.Fatalf("element %d: %g → %g", i, xs[i], back[i])
		}
	}
	tn, err := fp.EncodeTensor(xs, 2, 3)
	must(t, err)
	if !tn.SameShape(&Tensor{Shape: []int{2, 3}}) || firstDiff(tn.Data, ws) >= 0 {
		t.Fatalf("EncodeTensor = %v %v", tn.Shape, tn.Data)
	}
	dec := fp.DecodeTensor(tn)
	for i := range dec {
		if dec[i] != back[i] {
			t.Fatalf("DecodeTensor[%d] = %g, want %g", i, dec[i], back[i])
		}
	}
	errTests := []struct {
		name string
		err  func() error
		text string
	}{
		{"EncodeSlice/len", func() error { return fp.EncodeSlice(make([]uint64, 2), xs) }, "words"},
		{"DecodeSlice/len", func() error { return fp.DecodeSlice(make([]float64, 2), ws) }, "values"},
		{"EncodeSlice/value", func() error {
			return fp.EncodeSlice(make([]uint64, 3), []float64{1, 2, math.Inf(1)})
		}, "element 2"},
		{"EncodeTensor/shape", func() error { _, err := fp.EncodeTensor(xs, 4, 2); return err }, "words"},
		{"EncodeTensor/negative", func() error { _, err := fp.EncodeTensor(xs, -6); return err }, "negative"},
		{"EncodeTensor/value", func() error { _, err := fp.EncodeTensor([]float64{1, 1e9}, 2); return err }, "1e+09"},
	}
	for _, tc := range errTests {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: err = %v, want one mentioning %q", tc.name, err, tc.text)
		}
	}
	if fp.DecodeTensor(nil) != nil {
		t.Error("DecodeTensor(nil) ≠ nil")
	}
}

// FuzzFixedPointRoundTrip checks on arbitrary reals and encodings that Encode
// either fails (exactly when the value is out of range) or round-trips
// within half a unit in the last place, and never panics.
func FuzzFixedPointRoundTrip(f *testing.F) {
	f.Add(1.5, uint8(16), uint8(15))
	f.Add(-32767.99, uint8(16), uint8(15))
	f.Add(math.Inf(1), uint8(1), uint8(0))
	f.Add(1e-30, uint8(62), uint8(0))
	f.Fuzz(func(t *testing.T, x float64, fb, ib uint8) {
		fp, err := NewFixedPoint(uint(fb), uint(ib))
		if err != nil {
			return
		}
		w, err := fp.Encode(x)
		inRange := !math.IsNaN(x) && math.Abs(x) < fp.Bound()
		if (err == nil) != inRange {
			t.Fatalf("%+v Encode(%g): err = %v, in range %v", fp, x, err, inRange)
		}
		if err == nil && math.Abs(fp.Decode(w)-x) > fp.Ulp()/2 {
			t.Fatalf("%+v: %g round-trips to %g", fp, x, fp.Decode(w))
		}
	})
}

// TestEncodeSliceMatchesEncode checks that the slice encoder gives Encode's
// word for every value, at several fraction sizes: zeros of both signs,
// subnormals, ties at half a unit (rounded to even), values just inside the
// bound, random values; and Encode's error, with the index, for the first
// value it refuses.
func TestEncodeSliceMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 2))
	for _, fp := range []FixedPoint{DefaultFixedPoint, {FracBits: 1, IntBits: 61}, {FracBits: 40, IntBits: 20}, {FracBits: 62, IntBits: 0}} {
		t.Run(fmt.Sprintf("f=%d,i=%d", fp.FracBits, fp.IntBits), func(t *testing.T) {
			ulp, bound := fp.Ulp(), fp.Bound()
			xs := []float64{0, math.Copysign(0, -1), math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
				ulp / 2, -ulp / 2, 1.5 * ulp, -2.5 * ulp, math.Nextafter(bound, 0), -math.Nextafter(bound, 0)}
			for range 1000 {
				xs = append(xs, (rng.Float64()*2-1)*bound*math.Pow(2, -float64(rng.IntN(40))))
			}
			got := make([]uint64, len(xs))
			if err := fp.EncodeSlice(got, xs); err != nil {
				t.Fatal(err)
			}
			for i, x := range xs {
				want, err := fp.Encode(x)
				if err != nil {
					t.Fatalf("Encode(%g): %v", x, err)
				}
				if got[i] != want {
					t.Fatalf("EncodeSlice word %d (%g) = %#x, Encode gives %#x", i, x, got[i], want)
				}
			}
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), bound, -bound} {
				in := []float64{1 * ulp, bad, 0}
				_, want := fp.Encode(bad)
				err := fp.EncodeSlice(make([]uint64, 3), in)
				if err == nil || err.Error() != "element 1: "+want.Error() {
					t.Fatalf("EncodeSlice with %g: error %v, want element 1: %v", bad, err, want)
				}
			}
		})
	}
}

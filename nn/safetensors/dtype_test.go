package safetensors

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestF16KnownPatterns(t *testing.T) {
	tests := []struct {
		bits uint16
		v    float64
	}{
		{0x0000, 0},
		{0x3C00, 1},
		{0xC000, -2},
		{0x3555, 0.333251953125},
		{0x7BFF, 65504},
		{0xFBFF, -65504},
		{0x0400, math.Ldexp(1, -14)},        // smallest normal
		{0x03FF, 1023 * math.Ldexp(1, -24)}, // largest subnormal
		{0x0001, math.Ldexp(1, -24)},        // smallest subnormal
		{0x3BFF, 1 - math.Ldexp(1, -11)},    // largest below one
		{0x3C01, 1 + math.Ldexp(1, -10)},    // smallest above one
		{0x7C00, math.Inf(1)},
		{0xFC00, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := F16ToFloat64(tc.bits); got != tc.v {
			t.Errorf("F16ToFloat64(%#04x) = %v, want %v", tc.bits, got, tc.v)
		}
		if got := Float64ToF16(tc.v); got != tc.bits {
			t.Errorf("Float64ToF16(%v) = %#04x, want %#04x", tc.v, got, tc.bits)
		}
	}
	if got := F16ToFloat64(0x8000); got != 0 || !math.Signbit(got) {
		t.Errorf("F16ToFloat64(0x8000) = %v, want -0", got)
	}
	if got := Float64ToF16(math.Copysign(0, -1)); got != 0x8000 {
		t.Errorf("Float64ToF16(-0) = %#04x, want 0x8000", got)
	}
	for _, b := range []uint16{0x7E00, 0x7C01, 0xFFFF} {
		if !math.IsNaN(F16ToFloat64(b)) {
			t.Errorf("F16ToFloat64(%#04x) is not NaN", b)
		}
	}
	if got := Float64ToF16(math.NaN()); got&0x7C00 != 0x7C00 || got&0x3FF == 0 {
		t.Errorf("Float64ToF16(NaN) = %#04x, not a NaN", got)
	}
}

func TestF16Rounding(t *testing.T) {
	q := func(e int) float64 { return math.Ldexp(1, e) }
	tests := []struct {
		name string
		x    float64
		want uint16
	}{
		{"tie at one rounds to even (down)", 1 + q(-11), 0x3C00},
		{"tie rounds to even (up)", 1 + 3*q(-11), 0x3C02},
		{"just above tie rounds up", 1 + q(-11) + q(-30), 0x3C01},
		{"largest finite", 65519, 0x7BFF},
		{"overflow at halfway to 2^16", 65520, 0x7C00},
		{"huge", 1e300, 0x7C00},
		{"negative overflow", -70000, 0xFC00},
		{"half smallest subnormal ties to zero", q(-25), 0x0000},
		{"1.5 quanta ties to two", 3 * q(-25), 0x0002},
		{"just above half quantum", q(-25) + q(-40), 0x0001},
		{"tiny underflows to zero", 1e-10, 0x0000},
		{"negative tiny keeps sign", -1e-10, 0x8000},
		{"subnormal rounds up into normal", q(-14) - q(-26), 0x0400},
		{"pi", math.Pi, 0x4248},
	}
	for _, tc := range tests {
		if got := Float64ToF16(tc.x); got != tc.want {
			t.Errorf("%s: Float64ToF16(%v) = %#04x, want %#04x", tc.name, tc.x, got, tc.want)
		}
	}
}

func TestBF16KnownPatterns(t *testing.T) {
	tests := []struct {
		bits uint16
		v    float64
	}{
		{0x3F80, 1},
		{0xC000, -2},
		{0x4049, 3.140625},
		{0x7F7F, 3.3895313892515355e38},
		{0x0080, math.Ldexp(1, -126)},
		{0x0001, math.Ldexp(1, -133)},
		{0x7F80, math.Inf(1)},
		{0xFF80, math.Inf(-1)},
	}
	for _, tc := range tests {
		if got := BF16ToFloat64(tc.bits); got != tc.v {
			t.Errorf("BF16ToFloat64(%#04x) = %v, want %v", tc.bits, got, tc.v)
		}
		if got := Float64ToBF16(tc.v); got != tc.bits {
			t.Errorf("Float64ToBF16(%v) = %#04x, want %#04x", tc.v, got, tc.bits)
		}
	}
	q := func(e int) float64 { return math.Ldexp(1, e) }
	rounding := []struct {
		x    float64
		want uint16
	}{
		{math.Pi, 0x4049},
		{1 + q(-8), 0x3F80},          // tie to even
		{1 + 3*q(-8), 0x3F82},        // tie to even
		{1 + q(-8) + q(-30), 0x3F81}, // float32 first would give 0x3F80 (double rounding)
		{3.4e38, 0x7F80},             // beyond max+half ulp: overflow
		{-3.3895313892515355e38, 0xFF7F},
	}
	for _, tc := range rounding {
		if got := Float64ToBF16(tc.x); got != tc.want {
			t.Errorf("Float64ToBF16(%v) = %#04x, want %#04x", tc.x, got, tc.want)
		}
	}
	if !math.IsNaN(BF16ToFloat64(Float64ToBF16(math.NaN()))) {
		t.Error("bfloat16 NaN does not round-trip")
	}
}

// TestExhaustiveRoundTrip decodes every 16-bit pattern and encodes it back.
func TestExhaustiveRoundTrip(t *testing.T) {
	for b := 0; b < 1<<16; b++ {
		h := F16ToFloat64(uint16(b))
		if math.IsNaN(h) {
			if b&0x7C00 != 0x7C00 || b&0x3FF == 0 {
				t.Fatalf("F16 %#04x decoded to NaN", b)
			}
		} else if got := Float64ToF16(h); got != uint16(b) {
			t.Fatalf("F16 %#04x -> %v -> %#04x", b, h, got)
		}
		bf := BF16ToFloat64(uint16(b))
		want := float64(math.Float32frombits(uint32(b) << 16))
		if math.IsNaN(bf) != math.IsNaN(want) || (!math.IsNaN(bf) && bf != want) {
			t.Fatalf("BF16 %#04x decoded to %v, want %v", b, bf, want)
		}
		if !math.IsNaN(bf) {
			if got := Float64ToBF16(bf); got != uint16(b) {
				t.Fatalf("BF16 %#04x -> %v -> %#04x", b, bf, got)
			}
		}
	}
}

// TestMinifloatMatchesFloat32 checks the generic rounding code against Go's own
// float64 -> float32 conversion, which is correctly rounded, by instantiating
// it for the binary32 layout.
func TestMinifloatMatchesFloat32(t *testing.T) {
	f32 := minifloat{expBits: 8, mantBits: 23}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		var x float64
		switch i % 4 {
		case 0: // random bits: all exponents, including far out of range
			x = math.Float64frombits(r.Uint64())
		case 1: // normal range
			x = math.Ldexp(r.Float64()-0.5, r.IntN(260)-130)
		case 2: // subnormal range of binary32
			x = math.Ldexp(r.Float64()-0.5, -126-r.IntN(25))
		case 3: // exact ties: a float32 plus half an ulp
			f := math.Float32frombits(r.Uint32() & 0x7F7FFFFF)
			x = float64(f) + (float64(math.Nextafter32(f, float32(math.Inf(1))))-float64(f))/2
		}
		if math.IsNaN(x) {
			continue
		}
		want := math.Float32bits(float32(x))
		if got := f32.encode(x); got != want {
			t.Fatalf("encode(%v = %#x) = %#08x, want %#08x", x, math.Float64bits(x), got, want)
		}
		if got, want := f32.decode(want), float64(math.Float32frombits(want)); got != want {
			t.Fatalf("decode(%#08x) = %v, want %v", want, got, want)
		}
	}
}

package safetensors

import (
	"fmt"
	"math"
)

// DType is a safetensors element type, spelled as in the file header.
type DType string

// The element types this package understands.
const (
	F64  DType = "F64"  // IEEE 754 binary64
	F32  DType = "F32"  // IEEE 754 binary32
	F16  DType = "F16"  // IEEE 754 binary16 (half precision)
	BF16 DType = "BF16" // bfloat16: the top 16 bits of a binary32
	I64  DType = "I64"  // signed 64-bit integer
	I32  DType = "I32"  // signed 32-bit integer
	I16  DType = "I16"  // signed 16-bit integer
	I8   DType = "I8"   // signed 8-bit integer
	U64  DType = "U64"  // unsigned 64-bit integer
	U32  DType = "U32"  // unsigned 32-bit integer
	U16  DType = "U16"  // unsigned 16-bit integer
	U8   DType = "U8"   // unsigned 8-bit integer
	BOOL DType = "BOOL" // one byte per element, 0 or 1
)

// Size returns the size in bytes of one element of d, or 0 if d is unknown.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, BOOL:
		return 1
	}
	return 0
}

// Valid reports whether d is a dtype this package understands.
func (d DType) Valid() bool { return d.Size() != 0 }

// IsFloat reports whether d is one of the floating-point dtypes F64, F32, F16, BF16.
func (d DType) IsFloat() bool {
	switch d {
	case F64, F32, F16, BF16:
		return true
	}
	return false
}

// minifloat describes a binary floating-point format with an implicit leading
// bit, IEEE-style exponent bias, subnormals, infinities and NaNs.
type minifloat struct {
	expBits, mantBits uint
}

var (
	half     = minifloat{expBits: 5, mantBits: 10}
	bfloat16 = minifloat{expBits: 8, mantBits: 7}
)

func (f minifloat) bias() int { return 1<<(f.expBits-1) - 1 }

// decode converts the bit pattern b of format f to float64 exactly.
func (f minifloat) decode(b uint32) float64 {
	mantMask := uint32(1)<<f.mantBits - 1
	expMask := uint32(1)<<f.expBits - 1
	sign := b >> (f.expBits + f.mantBits) & 1
	e := b >> f.mantBits & expMask
	m := b & mantMask
	var v float64
	switch {
	case e == 0: // zero or subnormal: m * 2^(1-bias-mantBits)
		v = math.Ldexp(float64(m), 1-f.bias()-int(f.mantBits))
	case e == expMask:
		if m != 0 {
			v = math.NaN()
		} else {
			v = math.Inf(1)
		}
	default:
		v = math.Ldexp(float64(m|1<<f.mantBits), int(e)-f.bias()-int(f.mantBits))
	}
	if sign != 0 {
		v = -v
	}
	return v
}

// encode converts x to format f with round-to-nearest, ties-to-even; values
// beyond the largest finite number become infinities and NaNs stay (quiet) NaNs.
func (f minifloat) encode(x float64) uint32 {
	signBit := uint32(0)
	if math.Signbit(x) {
		signBit = 1 << (f.expBits + f.mantBits)
	}
	expMask := uint32(1)<<f.expBits - 1
	inf := signBit | expMask<<f.mantBits
	if math.IsNaN(x) {
		return inf | 1<<(f.mantBits-1)
	}
	a := math.Abs(x)
	if math.IsInf(a, 0) {
		return inf
	}
	if a == 0 {
		return signBit
	}
	emin := 1 - f.bias()
	mb := int(f.mantBits)
	if a < math.Ldexp(1, emin) {
		// Subnormal range: the quantum is 2^(emin-mantBits). Scaling by a power
		// of two is exact, so RoundToEven rounds correctly. A result of
		// 2^mantBits is the smallest normal, whose encoding is the same integer.
		return signBit | uint32(math.RoundToEven(math.Ldexp(a, mb-emin)))
	}
	_, exp := math.Frexp(a) // a = fr * 2^exp with fr in [0.5, 1)
	e := exp - 1            // a in [2^e, 2^(e+1))
	m := math.RoundToEven(math.Ldexp(a, mb-e))
	if m == math.Ldexp(1, mb+1) {
		m /= 2
		e++
	}
	if e > f.bias() {
		return inf
	}
	return signBit | uint32(e+f.bias())<<f.mantBits | (uint32(m) - 1<<f.mantBits)
}

// F16ToFloat64 converts an IEEE 754 half-precision bit pattern to float64 exactly.
func F16ToFloat64(b uint16) float64 { return half.decode(uint32(b)) }

// Float64ToF16 converts x to the nearest IEEE 754 half-precision bit pattern
// (round to nearest, ties to even; overflow to ±Inf; NaN to a quiet NaN).
func Float64ToF16(x float64) uint16 { return uint16(half.encode(x)) }

// BF16ToFloat64 converts a bfloat16 bit pattern to float64 exactly.
func BF16ToFloat64(b uint16) float64 { return bfloat16.decode(uint32(b)) }

// Float64ToBF16 converts x to the nearest bfloat16 bit pattern (round to
// nearest, ties to even, computed from the float64 value directly so there is
// no double rounding; overflow to ±Inf; NaN to a quiet NaN).
func Float64ToBF16(x float64) uint16 { return uint16(bfloat16.encode(x)) }

// checkDType returns an error if d is not a known dtype.
func checkDType(d DType) error {
	if !d.Valid() {
		return fmt.Errorf("unknown dtype %q", string(d))
	}
	return nil
}

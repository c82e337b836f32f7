package share

import (
	"fmt"
	"math"
)

// DefaultFracBits is the default number of fractional bits of the fixed-point
// encoding (resolution 2^−16 ≈ 1.5e−5).
const DefaultFracBits = 16

// DefaultIntBits is the default number of integer bits: encoded reals must
// satisfy |x| < 2^DefaultIntBits. With DefaultFracBits this keeps every encoded
// value below 2^31 in magnitude, so the product of two encoded values (2f
// fractional bits) stays below 2^62, the bound under which the truncation
// protocol is exact to one unit in the last place.
const DefaultIntBits = 15

// FixedPoint describes the encoding of reals into Z_2^64: a real x is the
// two's-complement ring word of round(x·2^FracBits), and only reals with
// |x| < 2^IntBits are accepted.
type FixedPoint struct {
	// FracBits is the number of fractional bits f.
	FracBits uint
	// IntBits bounds the magnitude of encodable reals: |x| < 2^IntBits.
	IntBits uint
}

// DefaultFixedPoint is the encoding used unless configured otherwise:
// 16 fractional bits, |x| < 2^15.
var DefaultFixedPoint = FixedPoint{FracBits: DefaultFracBits, IntBits: DefaultIntBits}

// NewFixedPoint returns the encoding with f fractional bits and the bound
// |x| < 2^intBits. It requires f ≥ 1 and f+intBits ≤ 62, so that every encoded
// value and its negation are distinct ring words with room to spare.
func NewFixedPoint(f, intBits uint) (FixedPoint, error) {
	fp := FixedPoint{FracBits: f, IntBits: intBits}
	return fp, fp.Validate()
}

// Validate reports whether the parameters describe a usable encoding.
func (fp FixedPoint) Validate() error {
	// Each term is checked alone too, so that a huge value cannot wrap the sum.
	if fp.FracBits < 1 || fp.FracBits > 62 || fp.IntBits > 62 || fp.FracBits+fp.IntBits > 62 {
		return fmt.Errorf("share: fixed point with %d fractional and %d integer bits: need fractional ≥ 1 and fractional+integer ≤ 62", fp.FracBits, fp.IntBits)
	}
	return nil
}

// Scale returns 2^FracBits as a ring word (the encoding of 1.0).
func (fp FixedPoint) Scale() uint64 { return 1 << fp.FracBits }

// Bound returns the exclusive bound 2^IntBits on the magnitude of encodable reals.
func (fp FixedPoint) Bound() float64 { return math.Ldexp(1, int(fp.IntBits)) }

// Ulp returns the resolution 2^−FracBits of the encoding.
func (fp FixedPoint) Ulp() float64 { return math.Ldexp(1, -int(fp.FracBits)) }

// Encode returns the ring word of round(x·2^f). It rejects NaN, ±Inf and
// |x| ≥ 2^IntBits with an error naming the value and the bound.
func (fp FixedPoint) Encode(x float64) (uint64, error) {
	switch {
	case math.IsNaN(x):
		return 0, fmt.Errorf("share: cannot encode NaN in fixed point (|x| must be < %g)", fp.Bound())
	case math.IsInf(x, 0):
		return 0, fmt.Errorf("share: cannot encode %v in fixed point (|x| must be < %g)", x, fp.Bound())
	case math.Abs(x) >= fp.Bound():
		return 0, fmt.Errorf("share: value %g out of fixed-point range: |x| must be < %g (2^%d)", x, fp.Bound(), fp.IntBits)
	}
	return uint64(int64(math.RoundToEven(math.Ldexp(x, int(fp.FracBits))))), nil
}

// Decode returns the real a ring word stands for: int64(w)·2^−f. Every ring
// word decodes; words outside the encodable range decode to large values.
func (fp FixedPoint) Decode(w uint64) float64 {
	return math.Ldexp(float64(int64(w)), -int(fp.FracBits))
}

// EncodeSlice encodes xs into dst (len(dst) == len(xs)). On an error it names
// the index of the first offending value; dst is then partly written.
func (fp FixedPoint) EncodeSlice(dst []uint64, xs []float64) error {
	if len(dst) != len(xs) {
		return fmt.Errorf("share: EncodeSlice: %d words for %d values", len(dst), len(xs))
	}
	// x·2^f is exact for every accepted x (a power-of-two scaling that
	// cannot overflow), so multiplying by a precomputed scale gives the
	// words Encode's Ldexp gives; a value the comparison refuses (NaN,
	// ±Inf, out of range) goes through Encode for its error.
	bound, scale := fp.Bound(), math.Ldexp(1, int(fp.FracBits))
	dst = dst[:len(xs)]
	for i, x := range xs {
		if !(math.Abs(x) < bound) {
			if _, err := fp.Encode(x); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		dst[i] = uint64(int64(math.RoundToEven(x * scale)))
	}
	return nil
}

// DecodeSlice decodes ws into dst (len(dst) == len(ws)).
func (fp FixedPoint) DecodeSlice(dst []float64, ws []uint64) error {
	if len(dst) != len(ws) {
		return fmt.Errorf("share: DecodeSlice: %d values for %d words", len(dst), len(ws))
	}
	for i, w := range ws {
		dst[i] = fp.Decode(w)
	}
	return nil
}

// EncodeTensor encodes xs into a new tensor of the given shape.
func (fp FixedPoint) EncodeTensor(xs []float64, shape ...int) (*Tensor, error) {
	t, err := NewTensor(shape...)
	if err != nil {
		return nil, err
	}
	if err := fp.EncodeSlice(t.Data, xs); err != nil {
		return nil, fmt.Errorf("encode tensor %v: %w", shape, err)
	}
	return t, nil
}

// DecodeTensor returns the reals a tensor's words stand for.
func (fp FixedPoint) DecodeTensor(t *Tensor) []float64 {
	if t == nil {
		return nil
	}
	out := make([]float64, len(t.Data))
	for i, w := range t.Data {
		out[i] = fp.Decode(w)
	}
	return out
}

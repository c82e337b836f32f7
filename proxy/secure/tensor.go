package secure

import (
	"fmt"
	"math"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// Local (communication-free) tensor helpers on shares.

// lastDim returns the last dimension of x and the number of rows.
func lastDim(x *share.Tensor) (w, rows int) {
	w = x.Shape[len(x.Shape)-1]
	if w == 0 {
		return 0, 0
	}
	return w, len(x.Data) / w
}

// cols returns columns [from, to) of x along its last dimension.
func cols(x *share.Tensor, from, to int) *share.Tensor {
	w, rows := lastDim(x)
	n := to - from
	shape := slices.Clone(x.Shape)
	shape[len(shape)-1] = n
	out := &share.Tensor{Shape: shape, Data: make([]uint64, rows*n)}
	for r := 0; r < rows; r++ {
		copy(out.Data[r*n:(r+1)*n], x.Data[r*w+from:r*w+to])
	}
	return out
}

// firstToken returns x[:, 0:1, :] of a [B, T, H] tensor.
func firstToken(x *share.Tensor) *share.Tensor {
	b, t, h := x.Shape[0], x.Shape[1], x.Shape[2]
	out := &share.Tensor{Shape: []int{b, 1, h}, Data: make([]uint64, b*h)}
	for i := 0; i < b; i++ {
		copy(out.Data[i*h:(i+1)*h], x.Data[i*t*h:i*t*h+h])
	}
	return out
}

// reshape returns x with a new shape (same data).
func reshape(x *share.Tensor, shape ...int) (*share.Tensor, error) {
	out, err := x.Reshape(shape...)
	if err != nil {
		return nil, fmt.Errorf("secure: %w", err)
	}
	return out, nil
}

// addRowVec adds, as party 0, the ring vector v (length = last dimension) to
// every row of x in place; party 1 adds nothing. v nil is a no-op.
func addRowVec(party int, x *share.Tensor, v []uint64) { addRowVecShifted(party, x, v, 0) }

// addRowVecShifted adds, as party 0, v·2^k (v a ring vector of the last
// dimension's length) to every row of x in place: a bias added before a
// truncation by 2^k. Party 1 adds nothing; v nil is a no-op.
func addRowVecShifted(party int, x *share.Tensor, v []uint64, k uint) {
	if party != 0 || v == nil {
		return
	}
	w, rows := lastDim(x)
	for r := 0; r < rows; r++ {
		row := x.Data[r*w : (r+1)*w]
		for j := range row {
			row[j] += v[j] << k
		}
	}
}

// encode returns round(x·2^bits) as ring words, failing on values that do not
// fit in 2^61 (NaN, Inf, or absurdly large weights).
func encode(xs []float64, bits uint) ([]uint64, error) {
	out := make([]uint64, len(xs))
	scale := math.Ldexp(1, int(bits))
	for i, x := range xs {
		v := math.Round(x * scale)
		if math.IsNaN(v) || math.Abs(v) >= math.Ldexp(1, 61) {
			return nil, fmt.Errorf("secure: value %g at %d does not fit the ring at %d fractional bits", x, i, bits)
		}
		out[i] = uint64(int64(v))
	}
	return out, nil
}

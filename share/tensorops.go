package share

import (
	"fmt"
	"slices"
)

// Local tensor operations the secure layers build on: in-place sums,
// broadcasting along a new last axis and the tiled matrix transpose. Like
// AddVec and SubVec they are ring arithmetic on words, with no party or
// network behind them.

// AddInPlace sets x = x + y elementwise (mod 2^64): x's words are
// overwritten, y is read. Both must have the same shape.
func AddInPlace(x, y *Tensor) error { return inPlace("AddInPlace", x, y, AddVec) }

// SubInPlace sets x = x − y elementwise (mod 2^64): x's words are
// overwritten, y is read. Both must have the same shape.
func SubInPlace(x, y *Tensor) error { return inPlace("SubInPlace", x, y, SubVec) }

// inPlace applies the slice op f as x = f(x, y) to two same-shaped tensors.
func inPlace(op string, x, y *Tensor, f func(dst, a, b []uint64) error) error {
	if err := checkNil(op, x, y); err != nil {
		return err
	}
	if !x.SameShape(y) {
		return fmt.Errorf("share.%s: shapes %v and %v differ", op, x.Shape, y.Shape)
	}
	return f(x.Data, x.Data, y.Data)
}

// BroadcastLast returns a new tensor of shape [..., w] that repeats each
// word of v (shape [...]) w times along a new last axis: the per-row value
// (a mean, a mask word) spread over a row of w words.
func BroadcastLast(v *Tensor, w int) (*Tensor, error) {
	if err := checkNil("BroadcastLast", v); err != nil {
		return nil, err
	}
	shape := append(slices.Clone(v.Shape), w)
	n, err := numel(shape)
	if err != nil {
		return nil, fmt.Errorf("share.BroadcastLast: %w", err)
	}
	out := &Tensor{Shape: shape, Data: make([]uint64, n)}
	for i, a := range v.Data {
		row := out.Data[i*w : (i+1)*w]
		for j := range row {
			row[j] = a
		}
	}
	return out, nil
}

// TransposeMatrix writes the n×m transpose of src, an m×n row-major matrix,
// into dst (every word of dst[:m·n] overwritten). Both must hold exactly
// m·n words. It works in 32×32 tiles, so that neither side is walked at the
// stride of a whole row for long: a plain loop writing dst column by column
// misses the cache on every word once m is a few hundred words.
func TransposeMatrix(dst, src []uint64, m, n int) error {
	if m < 0 || n < 0 || (n != 0 && m > maxTensorElems/n) {
		return fmt.Errorf("share.TransposeMatrix: %d×%d matrix", m, n)
	}
	if err := checkLen("TransposeMatrix", m*n, dst, src); err != nil {
		return err
	}
	transposeBlock(dst, src, m, n)
	return nil
}

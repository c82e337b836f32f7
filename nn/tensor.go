// Package nn is a small plaintext (float64) neural-network engine for transformer
// encoders: layers with explicit forward and backward passes, cross-entropy, AdamW
// and finite-difference gradient checks. Matrix products go through gonum's BLAS
// (blas64.Gemm).
//
// Every layer caches what its backward pass needs during Forward, so one layer
// instance serves one use site per forward pass; Backward must follow the Forward it
// belongs to. Parameter gradients accumulate (+=) until ZeroGrad; input gradients
// returned by Backward are freshly allocated.
//
// Activations are row-major tensors whose last dimension is the feature dimension:
// a batch of B sequences of T tokens with D features has shape [B, T, D]. Layers that
// act per token (Linear, LayerNorm, activations) accept any leading shape.
package nn

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Tensor is a dense row-major float64 tensor.
type Tensor struct {
	// Shape holds the dimensions, outermost first.
	Shape []int
	// Data holds the elements in row-major order; len(Data) is the product of Shape.
	Data []float64
}

// New returns a zero tensor of the given shape. Negative dimensions are treated as 0.
func New(shape ...int) *Tensor {
	s := make([]int, len(shape))
	n := 1
	for i, d := range shape {
		if d < 0 {
			d = 0
		}
		s[i] = d
		n *= d
	}
	return &Tensor{Shape: s, Data: make([]float64, n)}
}

// FromSlice wraps data (without copying) as a tensor of the given shape.
func FromSlice(data []float64, shape ...int) (*Tensor, error) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("nn: negative dimension in shape %v", shape)
		}
		n *= d
	}
	if n != len(data) {
		return nil, fmt.Errorf("nn: shape %v needs %d elements, have %d", shape, n, len(data))
	}
	return &Tensor{Shape: append([]int(nil), shape...), Data: data}, nil
}

// Len returns the number of elements.
func (t *Tensor) Len() int { return len(t.Data) }

// Cols returns the size of the last dimension (1 for a scalar tensor).
func (t *Tensor) Cols() int {
	if len(t.Shape) == 0 {
		return 1
	}
	return t.Shape[len(t.Shape)-1]
}

// Rows returns the product of all dimensions but the last.
func (t *Tensor) Rows() int {
	c := t.Cols()
	if c == 0 {
		return 0
	}
	return len(t.Data) / c
}

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Shape: append([]int(nil), t.Shape...), Data: append([]float64(nil), t.Data...)}
}

// Reshape returns a tensor sharing t's data with a new shape of the same size.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	r, err := FromSlice(t.Data, shape...)
	if err != nil {
		return nil, fmt.Errorf("reshape %v: %w", t.Shape, err)
	}
	return r, nil
}

// Zero sets every element to 0.
func (t *Tensor) Zero() { clear(t.Data) }

// SameShape reports whether a and b have identical shapes.
func SameShape(a, b *Tensor) bool {
	if len(a.Shape) != len(b.Shape) {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	return true
}

// withLastDim returns a copy of shape with its last dimension replaced by d.
func withLastDim(shape []int, d int) []int {
	s := append([]int(nil), shape...)
	if len(s) == 0 {
		return []int{d}
	}
	s[len(s)-1] = d
	return s
}

// matrix views the tensor as a Rows()×Cols() matrix.
func (t *Tensor) matrix() blas64.General {
	return blas64.General{Rows: t.Rows(), Cols: t.Cols(), Stride: max(t.Cols(), 1), Data: t.Data}
}

// firstDimMatrix views the tensor as Shape[0] × (everything else), the layout of a
// Hugging Face weight such as a Linear [out, in] or a conv kernel [out, c, p, p].
func (t *Tensor) firstDimMatrix() blas64.General {
	r := 1
	if len(t.Shape) > 0 {
		r = t.Shape[0]
	}
	c := 0
	if r > 0 {
		c = len(t.Data) / r
	}
	return blas64.General{Rows: r, Cols: c, Stride: max(c, 1), Data: t.Data}
}

// gemm computes c = alpha·op(a)·op(b) + beta·c with gonum's BLAS.
func gemm(ta, tb bool, alpha float64, a, b blas64.General, beta float64, c blas64.General) {
	if c.Rows == 0 || c.Cols == 0 {
		return
	}
	k := a.Cols
	if ta {
		k = a.Rows
	}
	if k == 0 {
		if beta != 1 {
			for i := 0; i < c.Rows; i++ {
				row := c.Data[i*c.Stride : i*c.Stride+c.Cols]
				for j := range row {
					row[j] *= beta
				}
			}
		}
		return
	}
	// gonum's kernels for transposed operands (dot products for A·Bᵀ, rank-1
	// updates streaming C for Aᵀ·B) measured slower than its A·B kernel on
	// transformer shapes; a contiguous transposed copy costs far less than the
	// product.
	if ta {
		a = transpose(a)
	}
	if tb {
		b = transpose(b)
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, alpha, a, b, beta, c)
}

// transpose returns a contiguous transposed copy of g.
func transpose(g blas64.General) blas64.General {
	t := blas64.General{Rows: g.Cols, Cols: g.Rows, Stride: max(g.Rows, 1), Data: make([]float64, g.Rows*g.Cols)}
	const blk = 32
	for i0 := 0; i0 < g.Rows; i0 += blk {
		for j0 := 0; j0 < g.Cols; j0 += blk {
			for i := i0; i < min(i0+blk, g.Rows); i++ {
				row := g.Data[i*g.Stride:]
				for j := j0; j < min(j0+blk, g.Cols); j++ {
					t.Data[j*t.Stride+i] = row[j]
				}
			}
		}
	}
	return t
}

// sub returns the r×c block of g starting at row i, column j.
func sub(g blas64.General, i, j, r, c int) blas64.General {
	off := i*g.Stride + j
	end := off + (r-1)*g.Stride + c
	if r == 0 || c == 0 {
		end = off
	}
	return blas64.General{Rows: r, Cols: c, Stride: g.Stride, Data: g.Data[off:end]}
}

// MatMul returns a·b for 2-D tensors a [m, k] and b [k, n] (transposed first when the
// corresponding flag is set).
func MatMul(a, b *Tensor, transA, transB bool) (*Tensor, error) {
	if len(a.Shape) != 2 || len(b.Shape) != 2 {
		return nil, fmt.Errorf("nn: matmul needs 2-D tensors, have %v and %v", a.Shape, b.Shape)
	}
	m, k := a.Shape[0], a.Shape[1]
	if transA {
		m, k = k, m
	}
	k2, n := b.Shape[0], b.Shape[1]
	if transB {
		k2, n = n, k2
	}
	if k != k2 {
		return nil, fmt.Errorf("nn: matmul %v×%v (trans %v,%v): inner dimensions differ", a.Shape, b.Shape, transA, transB)
	}
	c := New(m, n)
	gemm(transA, transB, 1, a.matrix(), b.matrix(), 0, c.matrix())
	return c, nil
}

// AddInPlace adds b to a elementwise; shapes must match.
func AddInPlace(a, b *Tensor) error {
	if len(a.Data) != len(b.Data) {
		return fmt.Errorf("nn: add %v and %v: sizes differ", a.Shape, b.Shape)
	}
	for i, v := range b.Data {
		a.Data[i] += v
	}
	return nil
}

// Add returns a+b elementwise; shapes must match.
func Add(a, b *Tensor) (*Tensor, error) {
	if !SameShape(a, b) {
		return nil, fmt.Errorf("nn: add %v and %v: shapes differ", a.Shape, b.Shape)
	}
	c := a.Clone()
	for i, v := range b.Data {
		c.Data[i] += v
	}
	return c, nil
}

// Norm returns the Euclidean norm of the elements.
func (t *Tensor) Norm() float64 {
	s := 0.0
	for _, v := range t.Data {
		s += v * v
	}
	return math.Sqrt(s)
}

package share

import (
	"fmt"
	"math"
	"slices"
)

// Tensor is a dense row-major array of ring words: a shape and one flat slice.
// Views (Reshape, Slice) share Data with their source; the copying operations
// (Clone, Transpose, SplitHeads, ...) allocate exactly one new slice.
type Tensor struct {
	// Shape holds the size of each dimension; the product is len(Data).
	Shape []int
	// Data holds the words in row-major order.
	Data []uint64
}

// maxTensorElems caps the number of elements of a tensor (2^35 words, 256 GiB,
// on 64-bit hosts), so that absurd shapes fail with an error instead of an
// allocation panic.
const maxTensorElems = min(1<<35, math.MaxInt>>3)

// numel returns the product of the dims, or an error for a negative dim or an
// overflowing product.
func numel(shape []int) (int, error) {
	n := 1
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("share: negative dimension %d at axis %d of shape %v", d, i, shape)
		}
		if d != 0 && n > maxTensorElems/d {
			return 0, fmt.Errorf("share: shape %v has too many elements", shape)
		}
		n *= d
	}
	return n, nil
}

// NewTensor returns a zero tensor of the given shape.
func NewTensor(shape ...int) (*Tensor, error) {
	n, err := numel(shape)
	if err != nil {
		return nil, err
	}
	return &Tensor{Shape: slices.Clone(shape), Data: make([]uint64, n)}, nil
}

// FromData wraps data (not copied) as a tensor of the given shape.
func FromData(data []uint64, shape ...int) (*Tensor, error) {
	n, err := numel(shape)
	if err != nil {
		return nil, err
	}
	if n != len(data) {
		return nil, fmt.Errorf("share: %d words do not fill shape %v (%d elements)", len(data), shape, n)
	}
	return &Tensor{Shape: slices.Clone(shape), Data: data}, nil
}

// Len returns the number of elements.
func (t *Tensor) Len() int { return len(t.Data) }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.Shape) }

// Clone returns a deep copy.
func (t *Tensor) Clone() *Tensor {
	return &Tensor{Shape: slices.Clone(t.Shape), Data: slices.Clone(t.Data)}
}

// SameShape reports whether t and o have identical shapes.
func (t *Tensor) SameShape(o *Tensor) bool { return slices.Equal(t.Shape, o.Shape) }

// String returns a short description such as "tensor[2 3]".
func (t *Tensor) String() string { return fmt.Sprintf("tensor%v", t.Shape) }

// Reshape returns a view of t with another shape of the same size. One
// dimension may be −1 and is then inferred.
func (t *Tensor) Reshape(shape ...int) (*Tensor, error) {
	if t == nil {
		return nil, fmt.Errorf("share: reshape of a nil tensor")
	}
	shape = slices.Clone(shape)
	infer := -1
	known := 1
	for i, d := range shape {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d < 0:
			return nil, fmt.Errorf("share: reshape %v to %v: bad dimension %d", t.Shape, shape, d)
		default:
			known *= d
		}
	}
	if infer >= 0 {
		if known == 0 || len(t.Data)%known != 0 {
			return nil, fmt.Errorf("share: reshape %v to %v: cannot infer dimension", t.Shape, shape)
		}
		shape[infer] = len(t.Data) / known
	}
	n, err := numel(shape)
	if err != nil {
		return nil, err
	}
	if n != len(t.Data) {
		return nil, fmt.Errorf("share: reshape %v (%d elements) to %v (%d elements)", t.Shape, len(t.Data), shape, n)
	}
	return &Tensor{Shape: shape, Data: t.Data}, nil
}

// Slice returns a view of rows [from, to) along the first axis.
func (t *Tensor) Slice(from, to int) (*Tensor, error) {
	if err := checkNil("slice", t); err != nil {
		return nil, err
	}
	if len(t.Shape) == 0 {
		return nil, fmt.Errorf("share: slice of a scalar tensor")
	}
	if from < 0 || to < from || to > t.Shape[0] {
		return nil, fmt.Errorf("share: slice [%d:%d] of first axis of %v", from, to, t.Shape)
	}
	inner := 1
	for _, d := range t.Shape[1:] {
		inner *= d
	}
	shape := slices.Clone(t.Shape)
	shape[0] = to - from
	return &Tensor{Shape: shape, Data: t.Data[from*inner : to*inner : to*inner]}, nil
}

// Stack returns a new tensor whose first axis indexes ts, all of one shape
// (batch stacking).
func Stack(ts ...*Tensor) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("share: stack of no tensors")
	}
	if err := checkNil("stack", ts...); err != nil {
		return nil, err
	}
	for i, x := range ts {
		if !x.SameShape(ts[0]) {
			return nil, fmt.Errorf("share: stack: tensor %d has shape %v, tensor 0 has %v", i, x.Shape, ts[0].Shape)
		}
	}
	shape := append([]int{len(ts)}, ts[0].Shape...)
	out, err := NewTensor(shape...)
	if err != nil {
		return nil, err
	}
	n := ts[0].Len()
	for i, x := range ts {
		copy(out.Data[i*n:], x.Data)
	}
	return out, nil
}

// Concat joins tensors along the first axis; the other dims must agree.
func Concat(ts ...*Tensor) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("share: concat of no tensors")
	}
	if err := checkNil("concat", ts...); err != nil {
		return nil, err
	}
	if ts[0].Rank() == 0 {
		return nil, fmt.Errorf("share: concat of scalar tensors")
	}
	rows := 0
	for i, x := range ts {
		if x.Rank() != ts[0].Rank() || !slices.Equal(x.Shape[1:], ts[0].Shape[1:]) {
			return nil, fmt.Errorf("share: concat: tensor %d has shape %v, tensor 0 has %v", i, x.Shape, ts[0].Shape)
		}
		rows += x.Shape[0]
	}
	shape := slices.Clone(ts[0].Shape)
	shape[0] = rows
	out, err := NewTensor(shape...)
	if err != nil {
		return nil, err
	}
	off := 0
	for _, x := range ts {
		off += copy(out.Data[off:], x.Data)
	}
	return out, nil
}

// TransposeLast2 returns a copy of t with its last two axes swapped: shape
// [..., m, n] becomes [..., n, m]. It is the Kᵀ of attention scores.
func TransposeLast2(t *Tensor) (*Tensor, error) {
	if err := checkNil("transpose", t); err != nil {
		return nil, err
	}
	r := t.Rank()
	if r < 2 {
		return nil, fmt.Errorf("share: transpose of rank-%d tensor %v", r, t.Shape)
	}
	m, n := t.Shape[r-2], t.Shape[r-1]
	shape := slices.Clone(t.Shape)
	shape[r-2], shape[r-1] = n, m
	out := &Tensor{Shape: shape, Data: make([]uint64, len(t.Data))}
	if m*n == 0 {
		return out, nil
	}
	for b := 0; b < len(t.Data); b += m * n {
		transposeBlock(out.Data[b:b+m*n], t.Data[b:b+m*n], m, n)
	}
	return out, nil
}

// SplitHeads turns [B, S, H·D] into [B, H, S, D]: the per-head layout of
// multi-head attention (a copy).
func SplitHeads(t *Tensor, heads int) (*Tensor, error) {
	if err := checkNil("split heads", t); err != nil {
		return nil, err
	}
	if t.Rank() != 3 || heads <= 0 || t.Shape[2]%heads != 0 {
		return nil, fmt.Errorf("share: split %v into %d heads: want [batch, seq, heads·dim]", t.Shape, heads)
	}
	b, s, hd := t.Shape[0], t.Shape[1], t.Shape[2]
	d := hd / heads
	out := &Tensor{Shape: []int{b, heads, s, d}, Data: make([]uint64, len(t.Data))}
	for bi := 0; bi < b; bi++ {
		for si := 0; si < s; si++ {
			src := t.Data[(bi*s+si)*hd:]
			for h := 0; h < heads; h++ {
				copy(out.Data[((bi*heads+h)*s+si)*d:][:d], src[h*d:h*d+d])
			}
		}
	}
	return out, nil
}

// MergeHeads turns [B, H, S, D] back into [B, S, H·D] (a copy); it inverts SplitHeads.
func MergeHeads(t *Tensor) (*Tensor, error) {
	if err := checkNil("merge heads", t); err != nil {
		return nil, err
	}
	if t.Rank() != 4 {
		return nil, fmt.Errorf("share: merge heads of %v: want [batch, heads, seq, dim]", t.Shape)
	}
	b, heads, s, d := t.Shape[0], t.Shape[1], t.Shape[2], t.Shape[3]
	hd := heads * d
	out := &Tensor{Shape: []int{b, s, hd}, Data: make([]uint64, len(t.Data))}
	for bi := 0; bi < b; bi++ {
		for h := 0; h < heads; h++ {
			for si := 0; si < s; si++ {
				copy(out.Data[(bi*s+si)*hd+h*d:][:d], t.Data[((bi*heads+h)*s+si)*d:][:d])
			}
		}
	}
	return out, nil
}

// elementwise applies a slice op to two same-shaped tensors into a new tensor.
func elementwise(op string, a, b *Tensor, f func(dst, a, b []uint64) error) (*Tensor, error) {
	if err := checkNil(op, a, b); err != nil {
		return nil, err
	}
	if !a.SameShape(b) {
		return nil, fmt.Errorf("share: %s of %v and %v: shapes differ", op, a.Shape, b.Shape)
	}
	out := &Tensor{Shape: slices.Clone(a.Shape), Data: make([]uint64, len(a.Data))}
	return out, f(out.Data, a.Data, b.Data)
}

// Add returns a + b elementwise (a new tensor).
func Add(a, b *Tensor) (*Tensor, error) { return elementwise("add", a, b, AddVec) }

// Sub returns a − b elementwise (a new tensor).
func Sub(a, b *Tensor) (*Tensor, error) { return elementwise("sub", a, b, SubVec) }

// Neg returns −a (a new tensor).
func Neg(a *Tensor) *Tensor {
	out := &Tensor{Shape: slices.Clone(a.Shape), Data: make([]uint64, len(a.Data))}
	_ = NegVec(out.Data, a.Data)
	return out
}

// MulScalar returns c·a for a public integer c (a new tensor).
func MulScalar(a *Tensor, c uint64) *Tensor {
	out := &Tensor{Shape: slices.Clone(a.Shape), Data: make([]uint64, len(a.Data))}
	_ = MulScalarVec(out.Data, a.Data, c)
	return out
}

// AddPublic returns party's share of (shared a) + (public p): party 0 adds p,
// party 1 copies its share.
func AddPublic(a, p *Tensor, party int) (*Tensor, error) {
	if err := checkNil("add public", a, p); err != nil {
		return nil, err
	}
	if !a.SameShape(p) {
		return nil, fmt.Errorf("share: add public %v to share %v: shapes differ", p.Shape, a.Shape)
	}
	out := &Tensor{Shape: slices.Clone(a.Shape), Data: make([]uint64, len(a.Data))}
	return out, AddPublicVec(out.Data, a.Data, p.Data, party)
}

// checkNil returns an error naming op if any of ts is nil or has a shape
// that does not describe its data (possible for a Tensor built by hand).
func checkNil(op string, ts ...*Tensor) error {
	for i, t := range ts {
		if t == nil {
			return fmt.Errorf("share: %s: tensor %d is nil", op, i)
		}
		n, err := numel(t.Shape)
		if err != nil {
			return fmt.Errorf("share: %s: tensor %d: %w", op, i, err)
		}
		if n != len(t.Data) {
			return fmt.Errorf("share: %s: tensor %d has shape %v (%d elements) but %d words", op, i, t.Shape, n, len(t.Data))
		}
	}
	return nil
}

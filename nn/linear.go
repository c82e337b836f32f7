package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Linear is y = x·Wᵀ + b with W stored as [out, in] (the PyTorch / Hugging Face
// layout). W may have more than two dimensions, e.g. a convolution kernel
// [out, c, p, p] applied to flattened patches; it is used as [out, product of the rest].
type Linear struct {
	// W is the weight, [out, in...].
	W *Param
	// B is the bias [out]; nil for a layer without bias.
	B *Param
	x *Tensor
}

// NewLinear returns a Linear layer named name (parameters name+".weight" and
// name+".bias") initialised like PyTorch: U(-1/√in, 1/√in). A nil rng leaves the
// parameters zero (for weights about to be loaded or initialised otherwise).
func NewLinear(name string, in, out int, bias bool, rng *rand.Rand) *Linear {
	l := &Linear{W: NewParam(name+".weight", out, in)}
	a := 1 / math.Sqrt(float64(max(in, 1)))
	if rng != nil {
		InitUniform(l.W.Value, a, rng)
	}
	if bias {
		l.B = NewParam(name+".bias", out)
		l.B.NoDecay = true
		if rng != nil {
			InitUniform(l.B.Value, a, rng)
		}
	}
	return l
}

// In returns the input width.
func (l *Linear) In() int { return l.W.Value.firstDimMatrix().Cols }

// Out returns the output width.
func (l *Linear) Out() int { return l.W.Value.firstDimMatrix().Rows }

// Forward computes x·Wᵀ + b over the last dimension of x.
func (l *Linear) Forward(x *Tensor) (*Tensor, error) {
	w := l.W.Value.firstDimMatrix()
	if x.Cols() != w.Cols {
		return nil, fmt.Errorf("linear %s: input %v, want last dimension %d", l.W.Name, x.Shape, w.Cols)
	}
	y := New(withLastDim(x.Shape, w.Rows)...)
	gemm(false, true, 1, x.matrix(), w, 0, y.matrix())
	if l.B != nil {
		b := l.B.Value.Data
		for r := 0; r < y.Rows(); r++ {
			row := y.Data[r*w.Rows : (r+1)*w.Rows]
			for j := range row {
				row[j] += b[j]
			}
		}
	}
	l.x = x
	return y, nil
}

// Backward accumulates dW += dyᵀ·x, db += Σ dy and returns dy·W.
func (l *Linear) Backward(dy *Tensor) (*Tensor, error) {
	if l.x == nil {
		return nil, fmt.Errorf("linear %s: backward before forward", l.W.Name)
	}
	w := l.W.Value.firstDimMatrix()
	if dy.Cols() != w.Rows || dy.Rows() != l.x.Rows() {
		return nil, fmt.Errorf("linear %s: gradient %v does not match output of input %v", l.W.Name, dy.Shape, l.x.Shape)
	}
	gemm(true, false, 1, dy.matrix(), l.x.matrix(), 1, l.W.EnsureGrad().firstDimMatrix())
	if l.B != nil {
		gb := l.B.EnsureGrad().Data
		for r := 0; r < dy.Rows(); r++ {
			for j, v := range dy.Data[r*w.Rows : (r+1)*w.Rows] {
				gb[j] += v
			}
		}
	}
	dx := New(l.x.Shape...)
	gemm(false, false, 1, dy.matrix(), w, 0, dx.matrix())
	return dx, nil
}

// Params returns the weight and, if present, the bias.
func (l *Linear) Params() []*Param {
	if l.B == nil {
		return []*Param{l.W}
	}
	return []*Param{l.W, l.B}
}

// Embedding maps integer ids to rows of a table [num, dim].
type Embedding struct {
	// Table is the embedding matrix [num, dim] (extra leading singleton dimensions, as
	// in a ViT position embedding [1, n, dim], are allowed).
	Table *Param
	ids   []int
}

// NewEmbedding returns an embedding named name (parameter name+".weight") with
// N(0, 0.02²) entries, the BERT initialisation; a nil rng leaves it zero.
func NewEmbedding(name string, num, dim int, rng *rand.Rand) *Embedding {
	e := &Embedding{Table: NewParam(name+".weight", num, dim)}
	if rng != nil {
		InitNormal(e.Table.Value, 0.02, rng)
	}
	return e
}

// Dim returns the embedding width.
func (e *Embedding) Dim() int { return e.Table.Value.Cols() }

// Num returns the number of rows.
func (e *Embedding) Num() int { return e.Table.Value.Rows() }

// Forward returns a tensor of shape shape+[dim] whose rows are the table rows of ids;
// shape must multiply to len(ids).
func (e *Embedding) Forward(ids []int, shape ...int) (*Tensor, error) {
	d, n := e.Dim(), e.Num()
	out := New(append(append([]int(nil), shape...), d)...)
	if out.Rows() != len(ids) || (d == 0 && len(ids) != 0) {
		return nil, fmt.Errorf("embedding %s: %d ids do not fill shape %v", e.Table.Name, len(ids), shape)
	}
	for i, id := range ids {
		if id < 0 || id >= n {
			return nil, fmt.Errorf("embedding %s: id %d at position %d out of range [0,%d)", e.Table.Name, id, i, n)
		}
		copy(out.Data[i*d:(i+1)*d], e.Table.Value.Data[id*d:(id+1)*d])
	}
	e.ids = append(e.ids[:0], ids...)
	return out, nil
}

// Backward scatters dy's rows into the table gradient.
func (e *Embedding) Backward(dy *Tensor) error {
	d := e.Dim()
	if dy.Cols() != d || dy.Rows() != len(e.ids) {
		return fmt.Errorf("embedding %s: gradient %v does not match %d ids of width %d", e.Table.Name, dy.Shape, len(e.ids), d)
	}
	g := e.Table.EnsureGrad().Data
	for i, id := range e.ids {
		row := g[id*d : (id+1)*d]
		for j, v := range dy.Data[i*d : (i+1)*d] {
			row[j] += v
		}
	}
	return nil
}

// Params returns the table.
func (e *Embedding) Params() []*Param { return []*Param{e.Table} }

package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// elementwise implements Forward/Backward for y = f(x) with derivative f'(x, y).
type elementwise struct {
	name string
	x, y *Tensor
}

func (e *elementwise) forward(x *Tensor, f func(float64) float64) *Tensor {
	y := New(x.Shape...)
	for i, v := range x.Data {
		y.Data[i] = f(v)
	}
	e.x, e.y = x, y
	return y
}

func (e *elementwise) backward(dy *Tensor, df func(x, y float64) float64) (*Tensor, error) {
	if e.x == nil {
		return nil, fmt.Errorf("%s: backward before forward", e.name)
	}
	if len(dy.Data) != len(e.x.Data) {
		return nil, fmt.Errorf("%s: gradient %v does not match input %v", e.name, dy.Shape, e.x.Shape)
	}
	dx := New(e.x.Shape...)
	for i, g := range dy.Data {
		dx.Data[i] = g * df(e.x.Data[i], e.y.Data[i])
	}
	return dx, nil
}

// GeLU is the exact (erf) Gaussian error linear unit x·Φ(x).
type GeLU struct{ e elementwise }

// Forward applies x·Φ(x).
func (g *GeLU) Forward(x *Tensor) (*Tensor, error) {
	g.e.name = "gelu"
	return g.e.forward(x, func(v float64) float64 { return 0.5 * v * (1 + math.Erf(v/math.Sqrt2)) }), nil
}

// Backward multiplies by Φ(x) + x·φ(x).
func (g *GeLU) Backward(dy *Tensor) (*Tensor, error) {
	return g.e.backward(dy, func(x, _ float64) float64 {
		return 0.5*(1+math.Erf(x/math.Sqrt2)) + x*math.Exp(-0.5*x*x)/math.Sqrt(2*math.Pi)
	})
}

// Params returns nil.
func (g *GeLU) Params() []*Param { return nil }

// ReLU is max(x, 0).
type ReLU struct{ e elementwise }

// Forward applies max(x, 0).
func (r *ReLU) Forward(x *Tensor) (*Tensor, error) {
	r.e.name = "relu"
	return r.e.forward(x, func(v float64) float64 { return max(v, 0) }), nil
}

// Backward passes the gradient where x > 0.
func (r *ReLU) Backward(dy *Tensor) (*Tensor, error) {
	return r.e.backward(dy, func(x, _ float64) float64 {
		if x > 0 {
			return 1
		}
		return 0
	})
}

// Params returns nil.
func (r *ReLU) Params() []*Param { return nil }

// Tanh is the hyperbolic tangent.
type Tanh struct{ e elementwise }

// Forward applies tanh.
func (t *Tanh) Forward(x *Tensor) (*Tensor, error) {
	t.e.name = "tanh"
	return t.e.forward(x, math.Tanh), nil
}

// Backward multiplies by 1 − tanh².
func (t *Tanh) Backward(dy *Tensor) (*Tensor, error) {
	return t.e.backward(dy, func(_, y float64) float64 { return 1 - y*y })
}

// Params returns nil.
func (t *Tanh) Params() []*Param { return nil }

// NewActivation returns the activation module for a Hugging Face activation name:
// "gelu" (erf form), "relu" or "tanh".
func NewActivation(name string) (Module, error) {
	switch name {
	case "gelu":
		return &GeLU{}, nil
	case "relu":
		return &ReLU{}, nil
	case "tanh":
		return &Tanh{}, nil
	}
	return nil, fmt.Errorf("nn: unsupported activation %q (want gelu, relu or tanh)", name)
}

// ActivationName returns the Hugging Face name of an activation module built by
// NewActivation, or "" for any other module.
func ActivationName(m Module) string {
	switch m.(type) {
	case *GeLU:
		return "gelu"
	case *ReLU:
		return "relu"
	case *Tanh:
		return "tanh"
	}
	return ""
}

// Softmax is the softmax along the last dimension. It is the default softmax of
// attention; approximators replacing it implement Module with the same shapes.
type Softmax struct{ y *Tensor }

// Forward returns the row-wise softmax (max-subtracted for stability).
func (s *Softmax) Forward(x *Tensor) (*Tensor, error) {
	y := New(x.Shape...)
	SoftmaxRows(x.Data, y.Data, x.Cols())
	s.y = y
	return y, nil
}

// SoftmaxRows writes the softmax of each length-n row of x into y.
func SoftmaxRows(x, y []float64, n int) {
	if n == 0 {
		return
	}
	for off := 0; off+n <= len(x); off += n {
		row, out := x[off:off+n], y[off:off+n]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, v)
		}
		s := 0.0
		for j, v := range row {
			e := math.Exp(v - m)
			out[j] = e
			s += e
		}
		for j := range out {
			out[j] /= s
		}
	}
}

// Backward returns y ⊙ (dy − Σ dy⊙y) per row.
func (s *Softmax) Backward(dy *Tensor) (*Tensor, error) {
	if s.y == nil {
		return nil, fmt.Errorf("softmax: backward before forward")
	}
	if len(dy.Data) != len(s.y.Data) {
		return nil, fmt.Errorf("softmax: gradient %v does not match output %v", dy.Shape, s.y.Shape)
	}
	n := s.y.Cols()
	dx := New(s.y.Shape...)
	for off := 0; off+n <= len(dy.Data); off += n {
		y, g := s.y.Data[off:off+n], dy.Data[off:off+n]
		dot := 0.0
		for j := range y {
			dot += y[j] * g[j]
		}
		for j := range y {
			dx.Data[off+j] = y[j] * (g[j] - dot)
		}
	}
	return dx, nil
}

// Params returns nil.
func (s *Softmax) Params() []*Param { return nil }

// InvSqrt maps a variance v to 1/√(v + Eps). It is the default reciprocal square root
// of LayerNorm; approximators replacing it implement Module with the same shapes.
type InvSqrt struct {
	// Eps is added to the variance.
	Eps float64
	e   elementwise
}

// Forward applies 1/√(v + Eps).
func (s *InvSqrt) Forward(x *Tensor) (*Tensor, error) {
	s.e.name = "invsqrt"
	for i, v := range x.Data {
		if v+s.Eps <= 0 {
			return nil, fmt.Errorf("invsqrt: non-positive argument %g at %d", v+s.Eps, i)
		}
	}
	return s.e.forward(x, func(v float64) float64 { return 1 / math.Sqrt(v+s.Eps) }), nil
}

// Backward multiplies by −y³/2.
func (s *InvSqrt) Backward(dy *Tensor) (*Tensor, error) {
	return s.e.backward(dy, func(_, y float64) float64 { return -0.5 * y * y * y })
}

// Params returns nil.
func (s *InvSqrt) Params() []*Param { return nil }

// Dropout zeroes each element with probability P during training and scales the
// rest by 1/(1−P); it is the identity in evaluation mode (the default).
type Dropout struct {
	// P is the drop probability in [0, 1).
	P float64
	// Training enables dropping.
	Training bool
	// Rng draws the masks; it must be set when Training is on and P > 0.
	Rng  *rand.Rand
	mask []float64
}

// SetTraining switches dropping on or off.
func (d *Dropout) SetTraining(on bool) { d.Training = on }

// Forward drops elements in training mode.
func (d *Dropout) Forward(x *Tensor) (*Tensor, error) {
	if !d.Training || d.P == 0 {
		d.mask = nil
		return x, nil
	}
	if d.P < 0 || d.P >= 1 {
		return nil, fmt.Errorf("dropout: probability %g outside [0,1)", d.P)
	}
	if d.Rng == nil {
		return nil, fmt.Errorf("dropout: training mode needs an Rng")
	}
	scale := 1 / (1 - d.P)
	y := New(x.Shape...)
	d.mask = make([]float64, len(x.Data))
	for i, v := range x.Data {
		if d.Rng.Float64() >= d.P {
			d.mask[i] = scale
			y.Data[i] = v * scale
		}
	}
	return y, nil
}

// Backward applies the same mask to the gradient.
func (d *Dropout) Backward(dy *Tensor) (*Tensor, error) {
	if d.mask == nil {
		return dy, nil
	}
	if len(dy.Data) != len(d.mask) {
		return nil, fmt.Errorf("dropout: gradient %v does not match the last input", dy.Shape)
	}
	dx := New(dy.Shape...)
	for i, g := range dy.Data {
		dx.Data[i] = g * d.mask[i]
	}
	return dx, nil
}

// Params returns nil.
func (d *Dropout) Params() []*Param { return nil }

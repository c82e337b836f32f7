package mlp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/selectformer/selectformer/nn"
)

// FixedPointBound is the magnitude bound |x| < 2^15 of the project's default
// fixed-point encoding (share.DefaultFixedPoint: 15 integer and 16 fractional bits).
const FixedPointBound = 1 << 15

// FillZ is the standardised value that replaces a padded attention score: the fill
// value of feature j is μ_j + FillZ·σ_j.
const FillZ = -4.0

// Kind names the nonlinear module an MLP emulates.
type Kind string

// The three emulated module kinds.
const (
	// AttnSoftmax is the attention softmax along the last dimension (in = out = T).
	AttnSoftmax Kind = "attn_softmax"
	// InvSqrt is LayerNorm's reciprocal square root of the variance (in = out = 1).
	InvSqrt Kind = "invsqrt"
	// SoftmaxEntropy is the final MLP: the softmax over the logits fused with
	// the selection criterion's score (in = C, out = 1); the criterion is the
	// prediction entropy unless a Dataset names another (Dataset.Criterion).
	SoftmaxEntropy Kind = "softmax_entropy"
)

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool { return k == AttnSoftmax || k == InvSqrt || k == SoftmaxEntropy }

// OutWidth returns the output width of a module of kind k with input width in.
func (k Kind) OutWidth(in int) int {
	if k == AttnSoftmax {
		return in
	}
	return 1
}

// Exact computes the exact module output of kind k for each width-in row of x into
// y (len(y) = rows·OutWidth(in)); for SoftmaxEntropy that is the default
// criterion's score (Dataset.Rows uses the dataset's criterion). For AttnSoftmax, −Inf entries are padding: the
// softmax runs over the other entries and padded outputs are 0 (a row padded
// entirely yields zeros). For InvSqrt, y = 1/√(x+eps) and x+eps must be positive.
func Exact(k Kind, x []float64, in int, eps float64, y []float64) error {
	if in <= 0 || len(x)%in != 0 {
		return fmt.Errorf("mlp exact %s: %d values do not form rows of width %d", k, len(x), in)
	}
	rows := len(x) / in
	out := k.OutWidth(in)
	if len(y) != rows*out {
		return fmt.Errorf("mlp exact %s: output has %d values, want %d", k, len(y), rows*out)
	}
	switch k {
	case AttnSoftmax:
		for r := 0; r < rows; r++ {
			maskedSoftmax(x[r*in:(r+1)*in], y[r*in:(r+1)*in])
		}
	case InvSqrt:
		for i, v := range x {
			if !(v+eps > 0) || math.IsInf(v, 0) {
				return fmt.Errorf("mlp exact invsqrt: argument %g+%g at %d is not a positive finite number", v, eps, i)
			}
			y[i] = 1 / math.Sqrt(v+eps)
		}
	case SoftmaxEntropy:
		c, err := LookupCriterion(DefaultCriterion)
		if err != nil {
			return err
		}
		c.exact(x, in, y)
	default:
		return fmt.Errorf("mlp exact: unknown kind %q", k)
	}
	return nil
}

// maskedSoftmax writes the softmax of the finite entries of x into y (0 elsewhere).
func maskedSoftmax(x, y []float64) {
	m := math.Inf(-1)
	for _, v := range x {
		if !math.IsInf(v, -1) {
			m = max(m, v)
		}
	}
	if math.IsInf(m, -1) {
		clear(y)
		return
	}
	s := 0.0
	for j, v := range x {
		if math.IsInf(v, -1) {
			y[j] = 0
			continue
		}
		y[j] = math.Exp(v - m)
		s += y[j]
	}
	for j := range y {
		y[j] /= s
	}
}

// MLP is an approximator linear(in→d) → ReLU → linear(d→out) acting on raw module
// inputs (see the package comment). It implements nn.Module, so it can replace
// nn.Softmax in attention or nn.InvSqrt in LayerNorm; its parameters train in vivo
// with the rest of a proxy.
type MLP struct {
	// Kind is the emulated module.
	Kind Kind
	// FC1 maps the input to the hidden layer (weight [d, in]); FC2 maps the hidden
	// layer to the output (weight [out, d]).
	FC1, FC2 *nn.Linear
	// Fill holds the per-feature values substituted for padded (−Inf) inputs
	// (AttnSoftmax only; nil otherwise).
	Fill []float64
	// Eps is the LayerNorm epsilon of an InvSqrt MLP (documentation of the target
	// 1/√(v+Eps); the MLP itself adds nothing).
	Eps float64

	act   nn.ReLU
	valid []bool // per input entry of the last Forward: false for padding
}

// New returns a randomly initialised MLP of kind k with input width in and hidden
// width hidden; its parameters are named name+".fc1" and name+".fc2".
func New(k Kind, name string, in, hidden int, eps float64, rng *rand.Rand) (*MLP, error) {
	if !k.Valid() {
		return nil, fmt.Errorf("mlp: unknown kind %q", k)
	}
	if in <= 0 || hidden <= 0 || (k == InvSqrt && in != 1) {
		return nil, fmt.Errorf("mlp %s: input width %d, hidden width %d", k, in, hidden)
	}
	m := &MLP{Kind: k, Eps: eps,
		FC1: nn.NewLinear(name+".fc1", in, hidden, true, rng),
		FC2: nn.NewLinear(name+".fc2", hidden, k.OutWidth(in), true, rng)}
	if k == AttnSoftmax {
		m.Fill = make([]float64, in)
	}
	return m, nil
}

// In returns the input width.
func (m *MLP) In() int { return m.FC1.In() }

// Hidden returns the hidden width d.
func (m *MLP) Hidden() int { return m.FC1.Out() }

// Out returns the output width.
func (m *MLP) Out() int { return m.FC2.Out() }

// Forward evaluates the MLP on each row of x [..., In]. For AttnSoftmax, −Inf
// entries are padding: replaced by Fill before the MLP, their outputs set to 0.
func (m *MLP) Forward(x *nn.Tensor) (*nn.Tensor, error) {
	in := m.In()
	if x.Cols() != in {
		return nil, fmt.Errorf("mlp %s: input %v, want last dimension %d", m.Kind, x.Shape, in)
	}
	z := x
	m.valid = nil
	if m.Kind == AttnSoftmax {
		if len(m.Fill) != in {
			return nil, fmt.Errorf("mlp %s: %d fill values for width %d", m.Kind, len(m.Fill), in)
		}
		z = nn.New(x.Shape...)
		m.valid = make([]bool, len(x.Data))
		for i, v := range x.Data {
			switch {
			case math.IsInf(v, -1):
				z.Data[i] = m.Fill[i%in]
			case math.IsNaN(v) || math.IsInf(v, 1):
				return nil, fmt.Errorf("mlp %s: input %v at %d", m.Kind, v, i)
			default:
				z.Data[i] = v
				m.valid[i] = true
			}
		}
	} else {
		for i, v := range x.Data {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("mlp %s: input %v at %d", m.Kind, v, i)
			}
		}
	}
	h, err := m.FC1.Forward(z)
	if err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	if h, err = m.act.Forward(h); err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	y, err := m.FC2.Forward(h)
	if err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	if m.valid != nil {
		for i, ok := range m.valid {
			if !ok {
				y.Data[i] = 0
			}
		}
	}
	return y, nil
}

// Backward propagates dy through the MLP, accumulating parameter gradients; padded
// inputs get gradient 0.
func (m *MLP) Backward(dy *nn.Tensor) (*nn.Tensor, error) {
	if m.valid != nil {
		if len(dy.Data) != len(m.valid) {
			return nil, fmt.Errorf("mlp %s: gradient %v does not match the last output", m.Kind, dy.Shape)
		}
		g := dy.Clone()
		for i, ok := range m.valid {
			if !ok {
				g.Data[i] = 0
			}
		}
		dy = g
	}
	g, err := m.FC2.Backward(dy)
	if err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	if g, err = m.act.Backward(g); err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	if g, err = m.FC1.Backward(g); err != nil {
		return nil, fmt.Errorf("mlp %s: %w", m.Kind, err)
	}
	if m.valid != nil {
		for i, ok := range m.valid {
			if !ok {
				g.Data[i] = 0
			}
		}
	}
	return g, nil
}

// Params returns the weights and biases of FC1 and FC2.
func (m *MLP) Params() []*nn.Param { return slices.Concat(m.FC1.Params(), m.FC2.Params()) }

// Weights returns copies of W1 [d, in], b1 [d], W2 [out, d] and b2 [out] as
// row-major float64 slices (the nn.Linear / PyTorch layout [out, in]); they act on
// raw inputs: y = W2·ReLU(W1·x + b1) + b2.
func (m *MLP) Weights() (w1, b1, w2, b2 []float64) {
	return slices.Clone(m.FC1.W.Value.Data), slices.Clone(m.FC1.B.Value.Data),
		slices.Clone(m.FC2.W.Value.Data), slices.Clone(m.FC2.B.Value.Data)
}

// setWeights replaces the weights (layouts as returned by Weights).
func (m *MLP) setWeights(w1, b1, w2, b2 []float64) error {
	for _, c := range []struct {
		name string
		dst  *nn.Param
		src  []float64
	}{{"W1", m.FC1.W, w1}, {"b1", m.FC1.B, b1}, {"W2", m.FC2.W, w2}, {"b2", m.FC2.B, b2}} {
		if len(c.src) != len(c.dst.Value.Data) {
			return fmt.Errorf("mlp %s: %s has %d values, want %d", m.Kind, c.name, len(c.src), len(c.dst.Value.Data))
		}
		for i, v := range c.src {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("mlp %s: %s[%d] = %v", m.Kind, c.name, i, v)
			}
		}
	}
	copy(m.FC1.W.Value.Data, w1)
	copy(m.FC1.B.Value.Data, b1)
	copy(m.FC2.W.Value.Data, w2)
	copy(m.FC2.B.Value.Data, b2)
	return nil
}

// Clone returns a deep copy with parameters renamed to name+".fc1"/".fc2" (the
// name of the original when name is empty) and fresh gradients.
func (m *MLP) Clone(name string) *MLP {
	cp := func(l *nn.Linear, suffix string) *nn.Linear {
		n := l.W.Name[:len(l.W.Name)-len(".weight")]
		if name != "" {
			n = name + suffix
		}
		w := nn.NewParam(n+".weight", l.W.Value.Shape...)
		copy(w.Value.Data, l.W.Value.Data)
		b := nn.NewParam(n+".bias", l.B.Value.Shape...)
		copy(b.Value.Data, l.B.Value.Data)
		b.NoDecay = true
		return &nn.Linear{W: w, B: b}
	}
	return &MLP{Kind: m.Kind, FC1: cp(m.FC1, ".fc1"), FC2: cp(m.FC2, ".fc2"), Fill: slices.Clone(m.Fill), Eps: m.Eps}
}

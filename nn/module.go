package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Param is a named trainable tensor with its gradient.
type Param struct {
	// Name identifies the parameter, e.g. a Hugging Face name such as
	// "bert.encoder.layer.0.attention.self.query.weight".
	Name string
	// Value holds the parameter; its shape is the one stored in checkpoints.
	Value *Tensor
	// Grad has Value's shape and accumulates gradients until ZeroGrad. It is nil
	// until a backward pass (or EnsureGrad) first needs it, so models used only for
	// inference carry no gradient memory.
	Grad *Tensor
	// Frozen parameters still receive gradients but optimizers leave them unchanged.
	Frozen bool
	// NoDecay exempts the parameter from weight decay (biases, LayerNorm, embeddings of
	// positions and the like).
	NoDecay bool
}

// NewParam returns a zero parameter of the given shape (without a gradient yet).
func NewParam(name string, shape ...int) *Param {
	return &Param{Name: name, Value: New(shape...)}
}

// EnsureGrad returns the gradient, allocating a zero one of Value's shape if there is
// none (or if Value was reshaped).
func (p *Param) EnsureGrad() *Tensor {
	if p.Grad == nil || len(p.Grad.Data) != len(p.Value.Data) {
		p.Grad = New(p.Value.Shape...)
	}
	return p.Grad
}

// ZeroGrad clears the gradients of params.
func ZeroGrad(params []*Param) {
	for _, p := range params {
		if p.Grad != nil {
			p.Grad.Zero()
		}
	}
}

// Module is a differentiable map from one tensor to another.
type Module interface {
	// Forward computes the output and caches what Backward needs.
	Forward(x *Tensor) (*Tensor, error)
	// Backward takes the gradient of the loss with respect to the last output,
	// accumulates parameter gradients and returns the gradient with respect to the input.
	Backward(dy *Tensor) (*Tensor, error)
	// Params lists the trainable parameters (nil for parameter-free modules).
	Params() []*Param
}

// Trainable is implemented by modules whose behaviour differs between training and
// evaluation (dropout, and containers holding dropout).
type Trainable interface {
	// SetTraining switches training behaviour on or off.
	SetTraining(on bool)
}

// SetTraining calls SetTraining on every module that implements Trainable.
func SetTraining(on bool, mods ...any) {
	for _, m := range mods {
		if t, ok := m.(Trainable); ok {
			t.SetTraining(on)
		}
	}
}

// Sequential applies modules one after the other.
type Sequential struct {
	// Layers are applied in order.
	Layers []Module
}

// Forward applies the layers in order.
func (s *Sequential) Forward(x *Tensor) (*Tensor, error) {
	var err error
	for i, l := range s.Layers {
		if x, err = l.Forward(x); err != nil {
			return nil, fmt.Errorf("sequential layer %d: %w", i, err)
		}
	}
	return x, nil
}

// Backward propagates through the layers in reverse order.
func (s *Sequential) Backward(dy *Tensor) (*Tensor, error) {
	var err error
	for i := len(s.Layers) - 1; i >= 0; i-- {
		if dy, err = s.Layers[i].Backward(dy); err != nil {
			return nil, fmt.Errorf("sequential layer %d backward: %w", i, err)
		}
	}
	return dy, nil
}

// Params concatenates the layers' parameters.
func (s *Sequential) Params() []*Param {
	var ps []*Param
	for _, l := range s.Layers {
		ps = append(ps, l.Params()...)
	}
	return ps
}

// SetTraining propagates the training flag to the layers.
func (s *Sequential) SetTraining(on bool) {
	for _, l := range s.Layers {
		SetTraining(on, l)
	}
}

// Residual computes x + Inner(x).
type Residual struct {
	// Inner is the residual branch; its output must have x's shape.
	Inner Module
}

// Forward returns x + Inner(x).
func (r *Residual) Forward(x *Tensor) (*Tensor, error) {
	y, err := r.Inner.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("residual branch: %w", err)
	}
	out, err := Add(x, y)
	if err != nil {
		return nil, fmt.Errorf("residual: %w", err)
	}
	return out, nil
}

// Backward returns dy + Inner'(dy).
func (r *Residual) Backward(dy *Tensor) (*Tensor, error) {
	dx, err := r.Inner.Backward(dy)
	if err != nil {
		return nil, fmt.Errorf("residual branch backward: %w", err)
	}
	if err := AddInPlace(dx, dy); err != nil {
		return nil, fmt.Errorf("residual backward: %w", err)
	}
	return dx, nil
}

// Params returns the branch's parameters.
func (r *Residual) Params() []*Param { return r.Inner.Params() }

// SetTraining propagates the training flag to the branch.
func (r *Residual) SetTraining(on bool) { SetTraining(on, r.Inner) }

// Recorder wraps a module and reports every forward pass's input and output, e.g. to
// collect the inputs and outputs of a nonlinear module that an approximator will
// replace. The tensors passed to OnForward must not be modified.
type Recorder struct {
	// Inner is the recorded module.
	Inner Module
	// OnForward is called after each successful forward pass of Inner.
	OnForward func(in, out *Tensor)
}

// Forward runs Inner and reports its input and output.
func (r *Recorder) Forward(x *Tensor) (*Tensor, error) {
	y, err := r.Inner.Forward(x)
	if err != nil {
		return nil, err
	}
	if r.OnForward != nil {
		r.OnForward(x, y)
	}
	return y, nil
}

// Backward delegates to Inner.
func (r *Recorder) Backward(dy *Tensor) (*Tensor, error) { return r.Inner.Backward(dy) }

// Params returns Inner's parameters.
func (r *Recorder) Params() []*Param { return r.Inner.Params() }

// SetTraining propagates the training flag to Inner.
func (r *Recorder) SetTraining(on bool) { SetTraining(on, r.Inner) }

// NewRNG returns a deterministic generator for the given seed.
func NewRNG(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// InitNormal fills t with N(0, std²) samples.
func InitNormal(t *Tensor, std float64, rng *rand.Rand) {
	for i := range t.Data {
		t.Data[i] = rng.NormFloat64() * std
	}
}

// InitUniform fills t with samples from U(-a, a).
func InitUniform(t *Tensor, a float64, rng *rand.Rand) {
	for i := range t.Data {
		t.Data[i] = (2*rng.Float64() - 1) * a
	}
}

// GlobalGradNorm returns the Euclidean norm of all gradients together.
func GlobalGradNorm(params []*Param) float64 {
	s := 0.0
	for _, p := range params {
		if p.Grad == nil {
			continue
		}
		for _, g := range p.Grad.Data {
			s += g * g
		}
	}
	return math.Sqrt(s)
}

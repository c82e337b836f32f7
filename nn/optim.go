package nn

import (
	"fmt"
	"math"
)

// AdamW is Adam with decoupled weight decay (Loshchilov & Hutter), a linear warm-up
// followed by a linear decay to zero, and clipping of the global gradient norm.
type AdamW struct {
	// LR is the peak learning rate.
	LR float64
	// Beta1, Beta2 and Eps are Adam's constants (0.9, 0.999, 1e-8 when zero).
	Beta1, Beta2, Eps float64
	// WeightDecay is the decoupled decay coefficient (skipped for NoDecay params).
	WeightDecay float64
	// ClipNorm clips the global gradient norm to this value; 0 disables clipping.
	ClipNorm float64
	// WarmupSteps is the number of steps of linear warm-up from 0 to LR.
	WarmupSteps int
	// TotalSteps, if positive, decays the rate linearly to 0 at this step.
	TotalSteps int

	step  int
	state map[*Param]*adamState
}

type adamState struct{ m, v []float64 }

// Steps returns the number of steps taken.
func (o *AdamW) Steps() int { return o.step }

// RateAt returns the learning rate used by step s (1-based).
func (o *AdamW) RateAt(s int) float64 {
	if o.WarmupSteps > 0 && s <= o.WarmupSteps {
		return o.LR * float64(s) / float64(o.WarmupSteps)
	}
	if o.TotalSteps > 0 {
		if s >= o.TotalSteps {
			return 0
		}
		rem := o.TotalSteps - o.WarmupSteps
		if rem <= 0 {
			return 0
		}
		return o.LR * float64(o.TotalSteps-s) / float64(rem)
	}
	return o.LR
}

// Step clips the gradients of params (in place), updates the non-frozen params that
// have a gradient and returns the global gradient norm before clipping. It does not
// zero the gradients.
func (o *AdamW) Step(params []*Param) (float64, error) {
	b1, b2, eps := o.Beta1, o.Beta2, o.Eps
	if b1 == 0 {
		b1 = 0.9
	}
	if b2 == 0 {
		b2 = 0.999
	}
	if eps == 0 {
		eps = 1e-8
	}
	norm := GlobalGradNorm(params)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("adamw: gradient norm is %v", norm)
	}
	if o.ClipNorm > 0 && norm > o.ClipNorm {
		f := o.ClipNorm / (norm + 1e-6)
		for _, p := range params {
			if p.Grad == nil {
				continue
			}
			for i := range p.Grad.Data {
				p.Grad.Data[i] *= f
			}
		}
	}
	if o.state == nil {
		o.state = map[*Param]*adamState{}
	}
	o.step++
	lr := o.RateAt(o.step)
	c1 := 1 - math.Pow(b1, float64(o.step))
	c2 := 1 - math.Pow(b2, float64(o.step))
	for _, p := range params {
		if p.Frozen || p.Grad == nil {
			continue
		}
		if len(p.Grad.Data) != len(p.Value.Data) {
			return norm, fmt.Errorf("adamw: parameter %s has %d gradients for %d values", p.Name, len(p.Grad.Data), len(p.Value.Data))
		}
		st := o.state[p]
		if st == nil || len(st.m) != len(p.Value.Data) {
			st = &adamState{m: make([]float64, len(p.Value.Data)), v: make([]float64, len(p.Value.Data))}
			o.state[p] = st
		}
		decay := 1.0
		if !p.NoDecay {
			decay = 1 - lr*o.WeightDecay
		}
		for i, g := range p.Grad.Data {
			st.m[i] = b1*st.m[i] + (1-b1)*g
			st.v[i] = b2*st.v[i] + (1-b2)*g*g
			p.Value.Data[i] = p.Value.Data[i]*decay - lr*(st.m[i]/c1)/(math.Sqrt(st.v[i]/c2)+eps)
		}
	}
	return norm, nil
}

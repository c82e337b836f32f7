package nn

import "fmt"

// LayerNorm normalises the last dimension: y = (x − μ)·r(σ²)·γ + β, where the
// reciprocal square root r is the pluggable module InvSqrt applied to the per-row
// variances (shape [rows, 1]). With the default InvSqrt{Eps} this is exactly
// PyTorch's LayerNorm.
type LayerNorm struct {
	// Gamma ("weight") and Beta ("bias") are the affine parameters [dim].
	Gamma, Beta *Param
	// InvSqrt maps variances [rows, 1] to reciprocal standard deviations [rows, 1].
	InvSqrt Module
	// Eps is the epsilon of the exact reciprocal square root (kept for checkpoints'
	// configs even when InvSqrt is replaced).
	Eps float64

	x        *Tensor
	centered []float64
	r        *Tensor
}

// NewLayerNorm returns a LayerNorm named name (name+".weight", name+".bias") with
// γ = 1, β = 0 and the exact reciprocal square root.
func NewLayerNorm(name string, dim int, eps float64) *LayerNorm {
	ln := &LayerNorm{Gamma: NewParam(name+".weight", dim), Beta: NewParam(name+".bias", dim), Eps: eps,
		InvSqrt: &InvSqrt{Eps: eps}}
	for i := range ln.Gamma.Value.Data {
		ln.Gamma.Value.Data[i] = 1
	}
	ln.Gamma.NoDecay, ln.Beta.NoDecay = true, true
	return ln
}

// Forward normalises each row of x.
func (ln *LayerNorm) Forward(x *Tensor) (*Tensor, error) {
	d := ln.Gamma.Value.Len()
	if x.Cols() != d || d == 0 {
		return nil, fmt.Errorf("layernorm %s: input %v, want last dimension %d", ln.Gamma.Name, x.Shape, d)
	}
	rows := x.Rows()
	c := make([]float64, len(x.Data))
	v := New(rows, 1)
	for r := 0; r < rows; r++ {
		row := x.Data[r*d : (r+1)*d]
		mu := 0.0
		for _, a := range row {
			mu += a
		}
		mu /= float64(d)
		s := 0.0
		for j, a := range row {
			c[r*d+j] = a - mu
			s += (a - mu) * (a - mu)
		}
		v.Data[r] = s / float64(d)
	}
	rs, err := ln.InvSqrt.Forward(v)
	if err != nil {
		return nil, fmt.Errorf("layernorm %s: %w", ln.Gamma.Name, err)
	}
	if rs.Len() != rows {
		return nil, fmt.Errorf("layernorm %s: inverse square root returned %v for %d rows", ln.Gamma.Name, rs.Shape, rows)
	}
	y := New(x.Shape...)
	g, b := ln.Gamma.Value.Data, ln.Beta.Value.Data
	for r := 0; r < rows; r++ {
		k := rs.Data[r]
		for j := 0; j < d; j++ {
			y.Data[r*d+j] = c[r*d+j]*k*g[j] + b[j]
		}
	}
	ln.x, ln.centered, ln.r = x, c, rs
	return y, nil
}

// Backward propagates through the affine map, the normalisation and InvSqrt.
func (ln *LayerNorm) Backward(dy *Tensor) (*Tensor, error) {
	if ln.x == nil {
		return nil, fmt.Errorf("layernorm %s: backward before forward", ln.Gamma.Name)
	}
	if len(dy.Data) != len(ln.x.Data) {
		return nil, fmt.Errorf("layernorm %s: gradient %v does not match input %v", ln.Gamma.Name, dy.Shape, ln.x.Shape)
	}
	d := ln.Gamma.Value.Len()
	rows := ln.x.Rows()
	g, gg, gb := ln.Gamma.Value.Data, ln.Gamma.EnsureGrad().Data, ln.Beta.EnsureGrad().Data
	dc := make([]float64, len(dy.Data))
	dr := New(rows, 1)
	for r := 0; r < rows; r++ {
		k := ln.r.Data[r]
		s := 0.0
		for j := 0; j < d; j++ {
			i := r*d + j
			c := ln.centered[i]
			gg[j] += dy.Data[i] * c * k
			gb[j] += dy.Data[i]
			dxh := dy.Data[i] * g[j]
			dc[i] = dxh * k
			s += dxh * c
		}
		dr.Data[r] = s
	}
	dv, err := ln.InvSqrt.Backward(dr)
	if err != nil {
		return nil, fmt.Errorf("layernorm %s: %w", ln.Gamma.Name, err)
	}
	if dv.Len() != rows {
		return nil, fmt.Errorf("layernorm %s: inverse square root gradient %v for %d rows", ln.Gamma.Name, dv.Shape, rows)
	}
	dx := New(ln.x.Shape...)
	for r := 0; r < rows; r++ {
		f := 2 * dv.Data[r] / float64(d)
		mean := 0.0
		for j := 0; j < d; j++ {
			i := r*d + j
			dc[i] += f * ln.centered[i]
			mean += dc[i]
		}
		mean /= float64(d)
		for j := 0; j < d; j++ {
			dx.Data[r*d+j] = dc[r*d+j] - mean
		}
	}
	return dx, nil
}

// Params returns γ, β and the parameters of InvSqrt (if any).
func (ln *LayerNorm) Params() []*Param {
	return append([]*Param{ln.Gamma, ln.Beta}, ln.InvSqrt.Params()...)
}

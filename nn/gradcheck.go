package nn

import (
	"fmt"
	"math"
)

// GradCheckResult reports the worst disagreement between analytic and numerical
// gradients.
type GradCheckResult struct {
	// MaxRelErr is the largest per-tensor relative error ‖a − n‖ / max(‖a‖, ‖n‖, f),
	// where a and n are the analytic and numerical gradients of the tensor's checked
	// entries and the floor f = 1e-4·‖all analytic gradients‖ keeps tensors whose
	// gradient is structurally zero (such as the key bias of attention, to which the
	// softmax is invariant) from dividing rounding noise by zero.
	MaxRelErr float64
	// Worst names the tensor with the largest error.
	Worst string
	// Checked is the number of scalar entries compared.
	Checked int
}

// GradCheck compares the gradients that backward accumulates into params' Grad with
// central finite differences (step h) of loss. loss must be a deterministic function
// of the params' values; backward must run the forward pass it needs and accumulate
// the gradient of the same loss (GradCheck zeroes the gradients first). At most
// maxPerParam entries of each tensor are checked (all when ≤ 0), spread evenly.
func GradCheck(loss func() (float64, error), backward func() error, params []*Param, h float64, maxPerParam int) (GradCheckResult, error) {
	var res GradCheckResult
	ZeroGrad(params)
	if err := backward(); err != nil {
		return res, fmt.Errorf("gradcheck backward: %w", err)
	}
	analytic := make([][]float64, len(params))
	for i, p := range params {
		analytic[i] = append([]float64(nil), p.EnsureGrad().Data...)
	}
	floor := 1e-4 * GlobalGradNorm(params)
	for pi, p := range params {
		n := len(p.Value.Data)
		stride := 1
		if maxPerParam > 0 && n > maxPerParam {
			stride = (n + maxPerParam - 1) / maxPerParam
		}
		var diff, na, nn float64
		for i := 0; i < n; i += stride {
			orig := p.Value.Data[i]
			p.Value.Data[i] = orig + h
			lp, err := loss()
			if err != nil {
				return res, fmt.Errorf("gradcheck %s[%d]: %w", p.Name, i, err)
			}
			p.Value.Data[i] = orig - h
			lm, err := loss()
			p.Value.Data[i] = orig
			if err != nil {
				return res, fmt.Errorf("gradcheck %s[%d]: %w", p.Name, i, err)
			}
			num := (lp - lm) / (2 * h)
			a := analytic[pi][i]
			diff += (a - num) * (a - num)
			na += a * a
			nn += num * num
			res.Checked++
		}
		den := max(math.Sqrt(na), math.Sqrt(nn), floor)
		rel := 0.0
		if den > 0 {
			rel = math.Sqrt(diff) / den
		}
		if rel > res.MaxRelErr || res.Worst == "" {
			res.MaxRelErr, res.Worst = rel, p.Name
		}
	}
	return res, nil
}

// CheckModule gradient-checks a module at input x against the loss Σ R⊙m(x) for a
// fixed random R drawn from seed. The input gradient is reported under the name
// "input". The module must be deterministic (dropout off).
func CheckModule(m Module, x *Tensor, seed uint64, h float64, maxPerParam int) (GradCheckResult, error) {
	in := &Param{Name: "input", Value: x, Grad: New(x.Shape...)}
	y, err := m.Forward(x)
	if err != nil {
		return GradCheckResult{}, err
	}
	r := New(y.Shape...)
	InitNormal(r, 1, NewRNG(seed))
	loss := func() (float64, error) {
		y, err := m.Forward(x)
		if err != nil {
			return 0, err
		}
		s := 0.0
		for i, v := range y.Data {
			s += v * r.Data[i]
		}
		return s, nil
	}
	backward := func() error {
		if _, err := m.Forward(x); err != nil {
			return err
		}
		dx, err := m.Backward(r.Clone())
		if err != nil {
			return err
		}
		return AddInPlace(in.Grad, dx)
	}
	return GradCheck(loss, backward, append([]*Param{in}, m.Params()...), h, maxPerParam)
}

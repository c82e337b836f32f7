package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// DefaultTwoQuadC is MPCFormer's shift c of the 2Quad softmax (x+c)²/Σ(x+c)².
const DefaultTwoQuadC = 5

// TwoQuad is MPCFormer's "2Quad" softmax replacement along the last dimension:
// y_j = (x_j + C)² / Σ_k (x_k + C)². −Inf entries (masked keys) get weight 0.
type TwoQuad struct {
	// C is the shift.
	C float64

	x, y []float64
	s    []float64
	n    int
}

// Forward applies 2Quad row-wise.
func (q *TwoQuad) Forward(x *nn.Tensor) (*nn.Tensor, error) {
	n := x.Cols()
	y := nn.New(x.Shape...)
	rows := x.Rows()
	q.s = make([]float64, rows)
	for r := 0; r < rows; r++ {
		s := 1e-12
		for j := 0; j < n; j++ {
			v := x.Data[r*n+j]
			if math.IsInf(v, -1) {
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return nil, fmt.Errorf("2quad: input %v", v)
			}
			y.Data[r*n+j] = (v + q.C) * (v + q.C)
			s += y.Data[r*n+j]
		}
		for j := 0; j < n; j++ {
			y.Data[r*n+j] /= s
		}
		q.s[r] = s
	}
	q.x, q.y, q.n = x.Data, y.Data, n
	return y, nil
}

// Backward propagates through 2Quad.
func (q *TwoQuad) Backward(dy *nn.Tensor) (*nn.Tensor, error) {
	if q.y == nil || len(dy.Data) != len(q.y) {
		return nil, fmt.Errorf("2quad: backward without a matching forward")
	}
	n := q.n
	dx := nn.New(dy.Shape...)
	for r := range q.s {
		dot := 0.0
		for j := 0; j < n; j++ {
			dot += dy.Data[r*n+j] * q.y[r*n+j]
		}
		for j := 0; j < n; j++ {
			v := q.x[r*n+j]
			if math.IsInf(v, -1) {
				continue
			}
			dx.Data[r*n+j] = (dy.Data[r*n+j] - dot) / q.s[r] * 2 * (v + q.C)
		}
	}
	return dx, nil
}

// Params returns nil.
func (q *TwoQuad) Params() []*nn.Param { return nil }

// QuadGeLU is MPCFormer's quadratic GeLU replacement 0.125x² + 0.25x + 0.5.
type QuadGeLU struct{ x []float64 }

// Forward applies the quadratic.
func (g *QuadGeLU) Forward(x *nn.Tensor) (*nn.Tensor, error) {
	y := nn.New(x.Shape...)
	for i, v := range x.Data {
		y.Data[i] = 0.125*v*v + 0.25*v + 0.5
	}
	g.x = x.Data
	return y, nil
}

// Backward multiplies by 0.25x + 0.25.
func (g *QuadGeLU) Backward(dy *nn.Tensor) (*nn.Tensor, error) {
	if len(dy.Data) != len(g.x) {
		return nil, fmt.Errorf("quad gelu: backward without a matching forward")
	}
	dx := nn.New(dy.Shape...)
	for i, v := range dy.Data {
		dx.Data[i] = v * (0.25*g.x[i] + 0.25)
	}
	return dx, nil
}

// Params returns nil.
func (g *QuadGeLU) Params() []*nn.Param { return nil }

// installQuad swaps in 2Quad softmaxes and quadratic GeLUs.
func (p *Proxy) installQuad() {
	for _, b := range p.Model.Blocks {
		b.Attn.Softmax = &TwoQuad{C: p.TwoQuadC}
		if b.FFN != nil {
			b.FFN.Act = &QuadGeLU{}
		}
	}
}

// Baseline builds the MPCFormer-style baseline from the tuned backbone M_g
// (Result.Backbone): same layers, heads and FFNs, attention softmax replaced by
// 2Quad (shift c, DefaultTwoQuadC when ≤ 0), GeLU by 0.125x²+0.25x+0.5, LayerNorm
// and the top softmax+entropy exact (as MPCFormer evaluates them), and distilled
// from M_g on the bootstrap inputs: the loss is the mean squared error between
// every layer's hidden states plus the soft cross-entropy between the teacher's
// and the student's predictions (MPCFormer's two distillation objectives, here
// in one stage). Labels are not needed.
func Baseline(ctx context.Context, backbone *model.Model, boot model.Input, c float64, tc TrainConfig, seed uint64, logger *slog.Logger) (*Proxy, error) {
	if err := tc.validate("baseline"); err != nil {
		return nil, err
	}
	if c <= 0 {
		c = DefaultTwoQuadC
	}
	if logger == nil {
		logger = slog.Default()
	}
	n := boot.Len()
	if n == 0 {
		return nil, fmt.Errorf("proxy baseline: empty bootstrap set")
	}
	m, err := copyBottom(backbone, backbone.Config.Layers, seed)
	if err != nil {
		return nil, fmt.Errorf("proxy baseline: %w", err)
	}
	p := &Proxy{Kind: MPCFormer, Shape: Shape{Layers: len(m.Blocks), Heads: m.Config.Heads}, Ablation: NoApprox, Model: m, TwoQuadC: c}
	all := make([]int, m.Config.Heads)
	for i := range all {
		all[i] = i
	}
	for range m.Blocks {
		p.HeadsKept = append(p.HeadsKept, all)
	}
	if err := p.shape(); err != nil {
		return nil, fmt.Errorf("proxy baseline: %w", err)
	}
	p.installQuad()
	// Teacher: the backbone itself, evaluation mode, its outputs per batch.
	teacher := func(batch model.Input) ([]*nn.Tensor, *nn.Tensor, error) {
		backbone.SetTraining(false)
		x, mask, err := backbone.Embed(batch)
		if err != nil {
			return nil, nil, err
		}
		var hs []*nn.Tensor
		for _, b := range backbone.Blocks {
			if x, err = b.Forward(x, mask); err != nil {
				return nil, nil, err
			}
			hs = append(hs, x)
		}
		logits, err := backbone.Head(x)
		return hs, logits, err
	}
	params := trainableParams(p.Params())
	labels := make([]int, n) // unused by the distillation loss
	step := func(batch model.Input, _ []int, _ bool) (float64, error) {
		ths, tl, err := teacher(batch)
		if err != nil {
			return 0, fmt.Errorf("teacher: %w", err)
		}
		p.Model.SetTraining(true)
		x, mask, err := m.Embed(batch)
		if err != nil {
			return 0, err
		}
		hs := make([]*nn.Tensor, len(m.Blocks))
		for i, b := range m.Blocks {
			if x, err = b.Forward(x, mask); err != nil {
				return 0, err
			}
			hs[i] = x
		}
		logits, err := p.head.forward(x)
		if err != nil {
			return 0, err
		}
		// Soft cross-entropy −Σ q log p with q = softmax(teacher), gradient (p − q)/B.
		rows, cls := logits.Rows(), logits.Cols()
		ps, qs := nn.New(rows, cls), nn.New(rows, cls)
		nn.SoftmaxRows(logits.Data, ps.Data, cls)
		nn.SoftmaxRows(tl.Data, qs.Data, cls)
		loss := 0.0
		dl := nn.New(rows, cls)
		for i := range ps.Data {
			loss -= qs.Data[i] * math.Log(max(ps.Data[i], 1e-300))
			dl.Data[i] = (ps.Data[i] - qs.Data[i]) / float64(rows)
		}
		loss /= float64(rows)
		dx, err := p.head.backward(dl)
		if err != nil {
			return 0, err
		}
		for i := len(m.Blocks) - 1; i >= 0; i-- {
			h, t := hs[i], ths[i]
			inv := 1 / float64(len(h.Data))
			for j := range h.Data {
				d := h.Data[j] - t.Data[j]
				loss += d * d * inv
				dx.Data[j] += 2 * d * inv
			}
			if dx, err = m.Blocks[i].Backward(dx); err != nil {
				return 0, err
			}
		}
		return loss, nil
	}
	if err := trainLoop(ctx, boot, labels, tc, seed, params, p.Model, step, "baseline distillation", nil, logger); err != nil {
		return nil, fmt.Errorf("proxy baseline: %w", err)
	}
	return p, nil
}

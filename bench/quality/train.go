package quality

import (
	"fmt"
	"slices"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// Clone returns a deep copy of m (same configuration, parameter values
// copied; dropout in evaluation mode).
func Clone(m *model.Model) (*model.Model, error) {
	c, err := model.New(m.Config, 1)
	if err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	src, dst := m.Params(), c.Params()
	if len(src) != len(dst) {
		return nil, fmt.Errorf("clone: %d parameters, copy has %d", len(src), len(dst))
	}
	for i, p := range dst {
		s := src[i]
		if s.Name != p.Name || !slices.Equal(s.Value.Shape, p.Value.Shape) {
			return nil, fmt.Errorf("clone: parameter %d is %s %v, copy has %s %v", i, s.Name, s.Value.Shape, p.Name, p.Value.Shape)
		}
		copy(p.Value.Data, s.Value.Data)
	}
	c.SetTraining(false)
	return c, nil
}

// FineTune fine-tunes a copy of the target on the purchased points idx of the
// pool (with their true labels) and returns its test accuracy.
func (d *Data) FineTune(idx []int, seed uint64) (float64, error) {
	if len(idx) == 0 {
		return 0, fmt.Errorf("fine-tune: empty purchase")
	}
	m, err := Clone(d.Target)
	if err != nil {
		return 0, err
	}
	in, err := d.Pool.Select(idx)
	if err != nil {
		return 0, fmt.Errorf("fine-tune: %w", err)
	}
	y := make([]int, len(idx))
	for i, j := range idx {
		y[i] = d.PoolY[j]
	}
	if d.Setting.Replay {
		// The model owner trains on its public data and the purchase.
		if in, err = proxy.ConcatInputs(d.Public, in); err != nil {
			return 0, fmt.Errorf("fine-tune: %w", err)
		}
		y = append(slices.Clone(d.PublicY), y...)
	}
	tc := d.Setting.FineTune
	tc.Seed = seed
	if _, err := model.Train(m, in, y, tc); err != nil {
		return 0, fmt.Errorf("fine-tune: %w", err)
	}
	mt, err := model.Evaluate(m, d.Test, d.TestY, 256)
	if err != nil {
		return 0, fmt.Errorf("fine-tune: evaluate: %w", err)
	}
	return mt.Accuracy, nil
}

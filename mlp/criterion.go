package mlp

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/selectformer/selectformer/nn"
)

// DefaultCriterion names the selection criterion of a proxy or an architecture
// that names none: the prediction entropy (criterion_entropy.go).
const DefaultCriterion = "entropy"

// maxCriterionName bounds the length of a criterion's name.
const maxCriterionName = 64

// Criterion is a selection criterion: the score of a candidate from its row of
// logits. The final MLP of a proxy (kind SoftmaxEntropy, in = the number of
// classes C, out = 1) is trained toward it, the plaintext proxy forward scores
// candidates with it when that MLP is kept exact, and a selection keeps the
// candidates of highest score. Adding a criterion is one file that calls
// RegisterCriterion from an init function (criterion_entropy.go is the model);
// its exact version over MPC, needed only when the score is kept exact (the
// Oracle, Ablation.ExactEntropy), is one more file in proxy/secure
// (secure.RegisterExactScore).
type Criterion struct {
	// Name identifies the criterion in saved proxies, configurations and
	// architectures (at most 64 bytes, no spaces).
	Name string
	// Score returns the exact score of one row of logits; it must not retain
	// or modify the row.
	Score func(logits []float64) float64
	// Scores, optional, returns the score of every row of logits [N, C] with
	// exactly the values Score gives or, where an existing batch form rounds
	// differently in the last bits, that form's (the entropy's is nn.Entropy,
	// the plaintext forward's since before criteria existed). Nil: Score row
	// by row.
	Scores func(logits *nn.Tensor) []float64
	// Range returns the interval [lo, hi] every score of a row of C logits lies
	// in; hi must stay below FixedPointBound for C up to the widths the project
	// supports, so that the shared scores fit the fixed-point encoding.
	Range func(classes int) (lo, hi float64)
	// Sqrt says that a √ calibration applies (the final MLP may be fitted to
	// √score, proxy.Distill.SqrtEntropy): the scores are ≥ 0 and an appraisal
	// squares them back.
	Sqrt bool
}

var criteria = struct {
	sync.RWMutex
	m map[string]Criterion
}{m: map[string]Criterion{}}

// RegisterCriterion adds c to the criteria. It refuses an incomplete
// descriptor (no name, no Score or no Range), a name already taken, and a
// criterion whose scores of a few probe rows are not finite, fall outside
// its Range, or are negative while Sqrt is set.
func RegisterCriterion(c Criterion) error {
	if err := c.check(); err != nil {
		return err
	}
	criteria.Lock()
	defer criteria.Unlock()
	if _, dup := criteria.m[c.Name]; dup {
		return fmt.Errorf("mlp: criterion %q registered twice", c.Name)
	}
	criteria.m[c.Name] = c
	return nil
}

// MustRegisterCriterion is RegisterCriterion for init functions: it panics on
// an error.
func MustRegisterCriterion(c Criterion) {
	if err := RegisterCriterion(c); err != nil {
		panic(err)
	}
}

// check verifies a descriptor before registration.
func (c Criterion) check() error {
	switch {
	case c.Name == "" || len(c.Name) > maxCriterionName:
		return fmt.Errorf("mlp: criterion name %q (1 to %d bytes)", c.Name, maxCriterionName)
	case c.Score == nil:
		return fmt.Errorf("mlp: criterion %q has no Score", c.Name)
	case c.Range == nil:
		return fmt.Errorf("mlp: criterion %q has no Range", c.Name)
	}
	for _, r := range c.Name {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("mlp: criterion name %q has a space or control character", c.Name)
		}
	}
	probes := [][]float64{{0, 0}, {3, -1}, {0, 0, 0, 0, 0}, {2, 1, 0, -1, -2}, {-8, 8, 0.5, 0, 1}}
	for _, row := range probes {
		lo, hi := c.Range(len(row))
		if !(lo <= hi) || math.IsNaN(lo) || math.IsInf(hi, 0) || hi >= FixedPointBound {
			return fmt.Errorf("mlp: criterion %q: range [%g, %g] for %d classes", c.Name, lo, hi, len(row))
		}
		if c.Sqrt && lo < 0 {
			return fmt.Errorf("mlp: criterion %q: √ calibration with scores down to %g", c.Name, lo)
		}
		v := c.Score(slices.Clone(row))
		if math.IsNaN(v) || math.IsInf(v, 0) || v < lo-1e-9 || v > hi+1e-9 {
			return fmt.Errorf("mlp: criterion %q: score %g of %v outside its range [%g, %g]", c.Name, v, row, lo, hi)
		}
	}
	return nil
}

// LookupCriterion returns the registered criterion of that name; the empty
// name is DefaultCriterion.
func LookupCriterion(name string) (Criterion, error) {
	if name == "" {
		name = DefaultCriterion
	}
	criteria.RLock()
	c, ok := criteria.m[name]
	criteria.RUnlock()
	if !ok {
		return Criterion{}, fmt.Errorf("mlp: unknown selection criterion %q (registered: %v)", name, Criteria())
	}
	return c, nil
}

// Criteria returns the names of the registered criteria, sorted.
func Criteria() []string {
	criteria.RLock()
	defer criteria.RUnlock()
	names := make([]string, 0, len(criteria.m))
	for n := range criteria.m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ScoreRows returns the score of every row of logits [N, C].
func (c Criterion) ScoreRows(logits *nn.Tensor) []float64 {
	if c.Scores != nil {
		return c.Scores(logits)
	}
	k := logits.Cols()
	out := make([]float64, logits.Rows())
	for i := range out {
		out[i] = c.Score(logits.Data[i*k : (i+1)*k])
	}
	return out
}

// exact writes the score of each width-in row of x into y.
func (c Criterion) exact(x []float64, in int, y []float64) {
	for r := range y {
		y[r] = c.Score(x[r*in : (r+1)*in])
	}
}

package mlp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/selectformer/selectformer/nn"
)

// Observer accumulates the inputs a nonlinear module sees: running per-feature
// means and variances (Welford), minima and maxima, and a uniform reservoir sample
// of whole rows (the "observed real inputs" on which Train reports errors and from
// which padding patterns are resampled). Entries ≤ MaskBelow are padding: they are
// stored as −Inf and left out of the statistics.
type Observer struct {
	// Kind is the observed module.
	Kind Kind
	// Width is the row width (the module's input width).
	Width int
	// MaskBelow marks padding: entries ≤ MaskBelow are masked attention scores
	// (NewObserver sets −1e8 for AttnSoftmax, −Inf otherwise).
	MaskBelow float64

	rows       int
	n          []float64 // per-feature count of unmasked entries
	mean, m2   []float64
	lo, hi     []float64
	padded     int // rows with at least one padded entry
	keep       int
	sample     [][]float64
	rng        *rand.Rand
	pooledN    float64
	pooledMean float64
	pooledM2   float64
}

// NewObserver returns an observer of rows of width width keeping a reservoir of at
// most keep rows, sampled with the given seed.
func NewObserver(k Kind, width, keep int, seed uint64) (*Observer, error) {
	if !k.Valid() || width <= 0 || keep < 0 || (k == InvSqrt && width != 1) {
		return nil, fmt.Errorf("mlp observer: kind %q, width %d, reservoir %d", k, width, keep)
	}
	o := &Observer{Kind: k, Width: width, MaskBelow: math.Inf(-1), keep: keep, rng: nn.NewRNG(seed),
		n: make([]float64, width), mean: make([]float64, width), m2: make([]float64, width),
		lo: make([]float64, width), hi: make([]float64, width)}
	if k == AttnSoftmax {
		o.MaskBelow = -1e8
	}
	for j := range o.lo {
		o.lo[j], o.hi[j] = math.Inf(1), math.Inf(-1)
	}
	return o, nil
}

// Observe adds the rows of x (len(x) a multiple of Width). It is safe to pass a
// module's live input: x is not retained.
func (o *Observer) Observe(x []float64) error {
	w := o.Width
	if len(x)%w != 0 {
		return fmt.Errorf("mlp observer %s: %d values do not form rows of width %d", o.Kind, len(x), w)
	}
	for off := 0; off < len(x); off += w {
		row := x[off : off+w]
		valid := 0
		for _, v := range row {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return fmt.Errorf("mlp observer %s: value %v in row %d", o.Kind, v, o.rows)
			}
			if v > o.MaskBelow {
				valid++
			}
		}
		if valid == 0 {
			continue // a fully padded row carries no information
		}
		if valid < w {
			o.padded++
		}
		for j, v := range row {
			if v <= o.MaskBelow {
				continue
			}
			o.n[j]++
			d := v - o.mean[j]
			o.mean[j] += d / o.n[j]
			o.m2[j] += d * (v - o.mean[j])
			o.lo[j], o.hi[j] = min(o.lo[j], v), max(o.hi[j], v)
			o.pooledN++
			d = v - o.pooledMean
			o.pooledMean += d / o.pooledN
			o.pooledM2 += d * (v - o.pooledMean)
		}
		o.rows++
		slot := -1
		switch {
		case len(o.sample) < o.keep:
			slot = len(o.sample)
			o.sample = append(o.sample, nil)
		case o.keep > 0:
			if r := o.rng.IntN(o.rows); r < o.keep {
				slot = r
			}
		}
		if slot >= 0 {
			s := make([]float64, w)
			for j, v := range row {
				if v <= o.MaskBelow {
					v = math.Inf(-1)
				}
				s[j] = v
			}
			o.sample[slot] = s
		}
	}
	return nil
}

// Rows returns the number of rows observed (fully padded rows excluded).
func (o *Observer) Rows() int { return o.rows }

// paddedRows returns the number of observed rows with at least one padded entry.
func (o *Observer) paddedRows() int { return o.padded }

// Sample returns the reservoir of observed rows (padding as −Inf), concatenated.
func (o *Observer) Sample() []float64 { return slices.Concat(o.sample...) }

// Range returns the smallest and largest unmasked value observed over all features.
func (o *Observer) Range() (lo, hi float64) {
	return slices.Min(o.lo), slices.Max(o.hi)
}

// Gaussian fits the observations. Per feature (pooled false), each input position
// j gets its own ⟨μ_j, σ_j⟩: attention-score columns are key positions whose
// distributions differ (the class token, padding-prone tail positions), and logits
// are classes with different priors, so a per-feature fit reproduces the marginals
// that a single ⟨μ, σ⟩ would blur. Pooled (true) fits one ⟨μ, σ⟩ to every entry of
// the module, the paper's literal reading; it suits modules whose features are
// exchangeable. Correlations between features are not modelled in either case
// (the paper's recipe). σ is floored at 1e-6·max(1, |μ|).
func (o *Observer) Gaussian(pooled bool) (Gaussian, error) {
	if o.rows < 2 {
		return Gaussian{}, fmt.Errorf("mlp observer %s: %d rows observed, need at least 2", o.Kind, o.rows)
	}
	g := Gaussian{Mean: make([]float64, o.Width), Std: make([]float64, o.Width)}
	for j := range g.Mean {
		mu, n, m2 := o.mean[j], o.n[j], o.m2[j]
		if pooled || n < 2 {
			mu, n, m2 = o.pooledMean, o.pooledN, o.pooledM2
		}
		g.Mean[j] = mu
		g.Std[j] = max(math.Sqrt(m2/(n-1)), 1e-6*max(1, math.Abs(mu)))
	}
	return g, nil
}

// CentredGaussian fits a diagonal Gaussian to the reservoir's rows after
// subtracting each row's mean over its unpadded entries (Dataset.Centre):
// attention scores carry a per-query shift that the softmax ignores and that
// inflates every feature's spread in a fit of the raw rows. Features padded
// in every sampled row get the pooled statistics.
func (o *Observer) CentredGaussian() (Gaussian, error) {
	if len(o.sample) < 2 {
		return Gaussian{}, fmt.Errorf("mlp observer %s: %d rows sampled, need at least 2", o.Kind, len(o.sample))
	}
	w := o.Width
	n, mean, m2 := make([]float64, w), make([]float64, w), make([]float64, w)
	var pn, pmean, pm2 float64
	for _, row := range o.sample {
		mu, k := 0.0, 0
		for _, v := range row {
			if !math.IsInf(v, -1) {
				mu += v
				k++
			}
		}
		mu /= float64(max(k, 1))
		for j, v := range row {
			if math.IsInf(v, -1) {
				continue
			}
			v -= mu
			n[j]++
			d := v - mean[j]
			mean[j] += d / n[j]
			m2[j] += d * (v - mean[j])
			pn++
			d = v - pmean
			pmean += d / pn
			pm2 += d * (v - pmean)
		}
	}
	g := Gaussian{Mean: make([]float64, w), Std: make([]float64, w)}
	for j := range g.Mean {
		mu, k, s := mean[j], n[j], m2[j]
		if k < 2 {
			mu, k, s = pmean, pn, pm2
		}
		if k < 2 {
			return Gaussian{}, fmt.Errorf("mlp observer %s: too few unpadded entries to fit", o.Kind)
		}
		g.Mean[j] = mu
		g.Std[j] = max(math.Sqrt(s/(k-1)), 1e-6*max(1, math.Abs(mu)))
	}
	return g, nil
}

// Gaussian is a diagonal normal distribution over rows: feature j ~ N(Mean[j], Std[j]²).
type Gaussian struct {
	// Mean and Std hold μ_j and σ_j (σ_j > 0) per feature.
	Mean, Std []float64
}

// Validate checks that the distribution is well formed for width in.
func (g Gaussian) Validate(in int) error {
	if len(g.Mean) != in || len(g.Std) != in {
		return fmt.Errorf("mlp gaussian: %d means and %d deviations for width %d", len(g.Mean), len(g.Std), in)
	}
	for j := range g.Mean {
		if math.IsNaN(g.Mean[j]) || math.IsInf(g.Mean[j], 0) || !(g.Std[j] > 0) || math.IsInf(g.Std[j], 0) {
			return fmt.Errorf("mlp gaussian: feature %d has mean %g and deviation %g", j, g.Mean[j], g.Std[j])
		}
	}
	return nil
}

// Dataset is a synthesised training set for one nonlinear module: N rows drawn
// from Gauss, generated deterministically from Seed in fixed blocks, with the
// module's exact outputs. One Dataset per module of the backbone serves the MLPs of
// every proxy (every hidden width), exactly as in the paper.
type Dataset struct {
	// Kind is the module.
	Kind Kind
	// Gauss is the input distribution; its width is the module's input width.
	Gauss Gaussian
	// N is the number of training rows.
	N int
	// Seed fixes the rows.
	Seed uint64
	// Eps is the LayerNorm epsilon (InvSqrt).
	Eps float64
	// Floor is the smallest variance an InvSqrt row may take: samples below it are
	// redrawn (a variance is positive, a Gaussian is not). NewDataset sets half the
	// smallest observed variance.
	Floor float64
	// Pads are padding patterns (true = padded key) resampled uniformly for
	// AttnSoftmax rows, so padded rows appear with their observed frequency; nil
	// means no padding.
	Pads [][]bool
	// Real are observed rows (padding as −Inf) on which Train reports errors.
	Real []float64
	// RealFrac in [0, 1] is the share of the rows resampled uniformly from Real
	// (observed inputs, with their padding) instead of drawn from Gauss: a
	// diagonal Gaussian reproduces each feature's marginal but not the joint
	// shape of real rows (an attention row's few large scores, a variance's
	// skew), which is where the MLP is used. 0 draws every row from Gauss (and
	// the rows are exactly those of a data set without the field).
	RealFrac float64
	// Centre (AttnSoftmax only) makes the MLP see each row minus its mean
	// (padding at its fill value): the softmax ignores a common shift of its
	// row, so the MLP need not learn to; the centring is linear and folded
	// into W1 (each row of W1 sums to 0), so the MLP's form is unchanged.
	// Gauss should then describe centred rows (Observer.CentredGaussian).
	Centre bool
	// Criterion (SoftmaxEntropy only) names the selection criterion whose
	// score is the exact output (RegisterCriterion; empty: DefaultCriterion,
	// the entropy).
	Criterion string
}

// exact writes the module's exact outputs of the width-in rows x into y: the
// criterion's score for SoftmaxEntropy, Exact otherwise.
func (d *Dataset) exact(x []float64, in int, y []float64) error {
	if d.Kind != SoftmaxEntropy {
		return Exact(d.Kind, x, in, d.Eps, y)
	}
	c, err := LookupCriterion(d.Criterion)
	if err != nil {
		return err
	}
	if in <= 0 || len(x) != len(y)*in {
		return fmt.Errorf("mlp exact %s: %d values for %d rows of width %d", d.Kind, len(x), len(y), in)
	}
	c.exact(x, in, y)
	return nil
}

// blockRows is the number of rows generated from one derived seed; Batch results
// do not depend on the batch size used to read them.
const blockRows = 1024

// NewDataset builds the synthesised data set of an observed module: a Gaussian fit
// (see Observer.Gaussian), the padding patterns and real rows of the reservoir, and
// for InvSqrt the floor at half the smallest observed variance.
func NewDataset(o *Observer, n int, pooled bool, eps float64, seed uint64) (*Dataset, error) {
	if n <= 0 {
		return nil, fmt.Errorf("mlp dataset %s: %d points", o.Kind, n)
	}
	g, err := o.Gaussian(pooled)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Kind: o.Kind, Gauss: g, N: n, Seed: seed, Eps: eps, Real: o.Sample()}
	if o.Kind == InvSqrt {
		lo, _ := o.Range()
		d.Floor = max(lo/2, 1e-12)
		if lo+eps <= 0 {
			return nil, fmt.Errorf("mlp dataset invsqrt: observed variance %g", lo)
		}
	}
	if o.Kind == AttnSoftmax && o.padded > 0 {
		for _, row := range o.sample {
			p := make([]bool, len(row))
			for j, v := range row {
				p[j] = math.IsInf(v, -1)
			}
			d.Pads = append(d.Pads, p)
		}
	}
	return d, nil
}

// In returns the input width.
func (d *Dataset) In() int { return len(d.Gauss.Mean) }

// Validate checks the data set's parameters.
func (d *Dataset) Validate() error {
	if !d.Kind.Valid() || d.N <= 0 {
		return fmt.Errorf("mlp dataset: kind %q, %d points", d.Kind, d.N)
	}
	if err := d.Gauss.Validate(d.In()); err != nil {
		return fmt.Errorf("mlp dataset %s: %w", d.Kind, err)
	}
	if d.Kind == InvSqrt && (d.In() != 1 || !(d.Floor+d.Eps > 0)) {
		return fmt.Errorf("mlp dataset invsqrt: width %d, floor %g, eps %g", d.In(), d.Floor, d.Eps)
	}
	for i, p := range d.Pads {
		if len(p) != d.In() {
			return fmt.Errorf("mlp dataset %s: padding pattern %d has width %d", d.Kind, i, len(p))
		}
	}
	if len(d.Real)%d.In() != 0 {
		return fmt.Errorf("mlp dataset %s: %d real values for width %d", d.Kind, len(d.Real), d.In())
	}
	if d.Criterion != "" {
		if d.Kind != SoftmaxEntropy {
			return fmt.Errorf("mlp dataset %s: a selection criterion applies to the final MLP (%s) only", d.Kind, SoftmaxEntropy)
		}
		if _, err := LookupCriterion(d.Criterion); err != nil {
			return fmt.Errorf("mlp dataset %s: %w", d.Kind, err)
		}
	}
	if d.Centre && d.Kind != AttnSoftmax {
		return fmt.Errorf("mlp dataset %s: centring applies to attention softmax rows only", d.Kind)
	}
	if !(d.RealFrac >= 0 && d.RealFrac <= 1) || (d.RealFrac > 0 && len(d.Real) == 0) {
		return fmt.Errorf("mlp dataset %s: real fraction %g with %d real rows", d.Kind, d.RealFrac, len(d.Real)/d.In())
	}
	if d.RealFrac > 0 {
		if err := d.checkReal(); err != nil {
			return err
		}
	}
	return nil
}

// Rows writes rows [start, start+count) of the stream with the given seed into x
// (count·In values) and their exact outputs into y. The stream with seed d.Seed is
// the training set; Train draws held-out rows from a different seed.
func (d *Dataset) Rows(seed uint64, start, count int, x, y []float64) error {
	in := d.In()
	if len(x) != count*in || len(y) != count*d.Kind.OutWidth(in) || start < 0 {
		return fmt.Errorf("mlp dataset %s: buffers of %d/%d values for %d rows", d.Kind, len(x), len(y), count)
	}
	for r := 0; r < count; {
		blk := (start + r) / blockRows
		off := (start + r) % blockRows
		rng := nn.NewRNG(seed ^ (uint64(blk)+1)*0x9e3779b97f4a7c15)
		// Skip to the row offset inside the block: every row consumes the same
		// number of draws only when no redraw happens, so generate from the block
		// start.
		n := min(blockRows-off, count-r)
		row := make([]float64, in)
		for i := 0; i < off+n; i++ {
			d.draw(rng, row)
			if i >= off {
				copy(x[(r+i-off)*in:], row)
			}
		}
		r += n
	}
	return d.exact(x, in, y)
}

// checkReal verifies that the real rows are valid module inputs (they become
// training rows when RealFrac > 0): finite or padding (−Inf, AttnSoftmax
// only), and for InvSqrt a variance v with v + Eps > 0.
func (d *Dataset) checkReal() error {
	for i, v := range d.Real {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 1):
			return fmt.Errorf("mlp dataset %s: real value %v at %d", d.Kind, v, i)
		case math.IsInf(v, -1) && d.Kind != AttnSoftmax:
			return fmt.Errorf("mlp dataset %s: padding in a real row at %d", d.Kind, i)
		case d.Kind == InvSqrt && !(v+d.Eps > 0):
			return fmt.Errorf("mlp dataset invsqrt: real variance %g", v)
		}
	}
	return nil
}

// draw fills row with one input: an observed row with probability RealFrac,
// else a synthesised one.
func (d *Dataset) draw(rng *rand.Rand, row []float64) {
	if d.RealFrac > 0 && rng.Float64() < d.RealFrac {
		in := len(row)
		r := rng.IntN(len(d.Real) / in)
		copy(row, d.Real[r*in:(r+1)*in])
		return
	}
	g := d.Gauss
	for j := range row {
		v := g.Mean[j] + g.Std[j]*rng.NormFloat64()
		if d.Kind == InvSqrt {
			for try := 0; v < d.Floor && try < 64; try++ {
				v = g.Mean[j] + g.Std[j]*rng.NormFloat64()
			}
			if v < d.Floor {
				v = d.Floor + (g.Mean[j]-d.Floor)*rng.Float64()
				v = max(v, d.Floor)
			}
		}
		row[j] = v
	}
	if len(d.Pads) > 0 {
		p := d.Pads[rng.IntN(len(d.Pads))]
		for j, pad := range p {
			if pad {
				row[j] = math.Inf(-1)
			}
		}
	}
}

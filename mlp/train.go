package mlp

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/selectformer/selectformer/nn"
)

// DefaultPoints is the paper's size of a synthesised data set (5.12 million rows).
const DefaultPoints = 5_120_000

// TrainConfig sets up ex vivo training.
type TrainConfig struct {
	// Epochs over the data set's N rows (1 when zero).
	Epochs int
	// BatchSize is the mini-batch size (256 when zero).
	BatchSize int
	// LR is the peak Adam learning rate (3e-3 when zero); it warms up over the
	// first 2% of steps and decays linearly to 0.
	LR float64
	// Test is the number of held-out synthesised rows for the report (4096 when
	// zero).
	Test int
	// Seed initialises the weights.
	Seed uint64
	// Logger, if set, receives progress lines (about every 10% of the steps).
	Logger *slog.Logger
	// Progress, if set, is called after every block of 1024 rows with the rows
	// trained so far and the total.
	Progress func(done, total int)
}

func (c TrainConfig) withDefaults() TrainConfig {
	if c.Epochs <= 0 {
		c.Epochs = 1
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	if c.LR <= 0 {
		c.LR = 3e-3
	}
	if c.Test <= 0 {
		c.Test = 4096
	}
	return c
}

// Ranges are the magnitudes an MLP handles on its evaluation points (held-out
// synthesised rows and observed real rows), the figures a fixed-point encoding
// must accommodate.
type Ranges struct {
	// InMin and InMax bound the (finite, fill-substituted) inputs: the documented
	// input domain.
	InMin, InMax float64
	// HiddenMaxAbs bounds the hidden pre-activations |W1·x + b1|.
	HiddenMaxAbs float64
	// OutMin and OutMax bound the outputs.
	OutMin, OutMax float64
	// WeightMaxAbs bounds every weight and bias.
	WeightMaxAbs float64
}

// Check reports an error if any magnitude reaches bound (e.g. FixedPointBound).
func (r Ranges) Check(bound float64) error {
	for _, c := range []struct {
		name string
		v    float64
	}{{"input", max(-r.InMin, r.InMax)}, {"hidden pre-activation", r.HiddenMaxAbs},
		{"output", max(-r.OutMin, r.OutMax)}, {"weight", r.WeightMaxAbs}} {
		if !(c.v < bound) {
			return fmt.Errorf("mlp ranges: %s magnitude %g reaches the fixed-point bound %g", c.name, c.v, bound)
		}
	}
	return nil
}

// Report describes one ex vivo training run and the resulting approximation error.
type Report struct {
	// Kind, In, Hidden and Out describe the MLP.
	Kind            Kind
	In, Hidden, Out int
	// Points is the number of synthesised training rows (N × epochs rows were
	// visited); Steps the number of Adam steps; Duration the wall-clock time.
	Points, Steps int
	Duration      time.Duration
	// FinalLoss is the mean squared error (standardised units) of the last 10% of
	// the steps.
	FinalLoss float64
	// SynthMaxAbs and SynthMeanAbs are the largest and mean absolute errors of the
	// outputs on held-out synthesised rows (SynthRows of them); padded outputs are
	// excluded.
	SynthMaxAbs, SynthMeanAbs float64
	SynthRows                 int
	// ConstMeanAbs is the mean absolute error on the held-out synthesised rows of
	// the best constant predictor (each output's mean): the error an MLP that
	// learnt nothing about its input would make.
	ConstMeanAbs float64
	// RealMaxAbs and RealMeanAbs are the same errors on the observed real rows
	// (RealRows of them; 0 when the data set holds none).
	RealMaxAbs, RealMeanAbs float64
	RealRows                int
	// Ranges are the magnitudes seen on all evaluation rows.
	Ranges Ranges
}

// String summarises the report on one line.
func (r Report) String() string {
	return fmt.Sprintf("%s %d→%d→%d: %d pts, %d steps in %v, synth err max %.4g mean %.4g (constant predictor %.4g), real err max %.4g mean %.4g (%d rows), |in| ≤ %.3g, |h| ≤ %.3g",
		r.Kind, r.In, r.Hidden, r.Out, r.Points, r.Steps, r.Duration.Round(time.Millisecond), r.SynthMaxAbs, r.SynthMeanAbs, r.ConstMeanAbs,
		r.RealMaxAbs, r.RealMeanAbs, r.RealRows, max(-r.Ranges.InMin, r.Ranges.InMax), r.Ranges.HiddenMaxAbs)
}

// heldOutSeed derives the seed of the held-out stream from the training seed.
func heldOutSeed(seed uint64) uint64 { return seed ^ 0x5deece66d<<20 ^ 0xa5a5a5a5 }

// Train fits a new MLP of hidden width hidden (parameters named name+".fc1"/".fc2")
// to the data set ex vivo: inputs and outputs are standardised with the
// distribution's μ, σ and the outputs' statistics on the held-out rows, the
// standardised MLP is trained with Adam on mini-batches of the N synthesised rows
// (mean squared error over unpadded outputs), and the standardisation is then
// folded into the weights. ctx cancels a long run between mini-batches.
func Train(ctx context.Context, d *Dataset, hidden int, name string, cfg TrainConfig) (*MLP, Report, error) {
	var rep Report
	if err := d.Validate(); err != nil {
		return nil, rep, err
	}
	cfg = cfg.withDefaults()
	in := d.In()
	out := d.Kind.OutWidth(in)
	rng := nn.NewRNG(cfg.Seed)
	m, err := New(d.Kind, name, in, hidden, d.Eps, rng)
	if err != nil {
		return nil, rep, err
	}
	start := time.Now()
	rep = Report{Kind: d.Kind, In: in, Hidden: hidden, Out: out, Points: d.N}

	st, err := heldOutStandardisation(d, cfg.Test)
	if err != nil {
		return nil, rep, err
	}
	rep.ConstMeanAbs = constError(st.testX, st.testY, in, out, d.Kind, st.muY)

	tr := newTrainer(m, d, name, cfg, st)
	if err := tr.run(ctx, rng, start); err != nil {
		return nil, rep, err
	}
	rep.Steps = tr.done
	if tr.lossN > 0 {
		rep.FinalLoss = tr.lossSum / float64(tr.lossN)
	}
	fold(m, st.muX, st.sdX, st.muY, st.sdY, d.Centre)
	if m.Kind == AttnSoftmax {
		copy(m.Fill, st.fill)
	}
	rep.Duration = time.Since(start)
	rep.SynthRows = cfg.Test
	if err := evaluateTrained(m, d, st, name, &rep); err != nil {
		return nil, rep, err
	}
	nn.ZeroGrad(m.Params())
	return m, rep, nil
}

// standardisation holds the held-out rows of a training run and the
// statistics the network is standardised with: z = (x − μ)/σ (FillZ for
// padding), ŷ = (y − μy)/σy.
type standardisation struct {
	// testX and testY are the held-out synthesised rows (test of them).
	testX, testY []float64
	// muX, sdX standardise the inputs (the distribution's, or the centred
	// held-out rows' statistics when the data set centres); muY, sdY the
	// outputs (their statistics on the held-out rows).
	muX, sdX, muY, sdY []float64
	// fill holds the per-feature values substituted for padded inputs, raw
	// units: μ + FillZ·σ of the distribution.
	fill []float64
}

// heldOutStandardisation draws test held-out rows of d (from the held-out
// stream of d's seed) and derives the standardisation from them and d's
// distribution.
func heldOutStandardisation(d *Dataset, test int) (*standardisation, error) {
	in := d.In()
	out := d.Kind.OutWidth(in)
	st := &standardisation{testX: make([]float64, test*in), testY: make([]float64, test*out)}
	if err := d.Rows(heldOutSeed(d.Seed), 0, test, st.testX, st.testY); err != nil {
		return nil, err
	}
	st.muY, st.sdY = outputStats(st.testX, st.testY, in, out, d.Kind)
	st.muX, st.sdX = d.Gauss.Mean, d.Gauss.Std
	st.fill = make([]float64, in)
	for j := range st.fill {
		st.fill[j] = st.muX[j] + FillZ*st.sdX[j]
	}
	if d.Centre {
		// The network sees centred rows C·x' (x' with the fill values): their
		// statistics on the held-out rows standardise them.
		st.muX, st.sdX = centredStats(centreRows(st.testX, in, st.fill), in)
	}
	return st, nil
}

// trainSteps is the number of Adam steps of epochs passes over n rows, read
// in blocks of blockRows rows cut into mini-batches of batch rows (the last
// of each block possibly shorter).
func trainSteps(n, batch, epochs int) int {
	blocks := (n + blockRows - 1) / blockRows
	steps := 0
	for b := 0; b < blocks; b++ {
		k := min(blockRows, n-b*blockRows)
		steps += (k + batch - 1) / batch
	}
	return steps * epochs
}

// trainer runs Adam on the standardised network of one Train call and keeps
// its counts: steps done and the loss of the last 10% of the steps.
type trainer struct {
	m       *MLP
	d       *Dataset
	name    string
	cfg     TrainConfig
	st      *standardisation
	act     *nn.ReLU
	params  []*nn.Param
	opt     *nn.AdamW
	bx, by  []float64 // one block of rows
	steps   int       // steps in all
	tail    int       // the last tail steps' losses make the final loss
	done    int       // steps done
	lossSum float64   // loss over the tail steps done
	lossN   int
}

// newTrainer sets up the optimiser (warm-up over the first 2% of the steps,
// linear decay) and the block buffers for training m on d.
func newTrainer(m *MLP, d *Dataset, name string, cfg TrainConfig, st *standardisation) *trainer {
	in := d.In()
	out := d.Kind.OutWidth(in)
	steps := trainSteps(d.N, cfg.BatchSize, cfg.Epochs)
	return &trainer{
		m: m, d: d, name: name, cfg: cfg, st: st,
		act:    &nn.ReLU{},
		params: m.Params(),
		opt:    &nn.AdamW{LR: cfg.LR, WarmupSteps: steps / 50, TotalSteps: steps + 1, ClipNorm: 10},
		bx:     make([]float64, blockRows*in),
		by:     make([]float64, blockRows*out),
		steps:  steps,
		tail:   max(steps/10, 1),
	}
}

// run trains for cfg.Epochs passes over the data set's blocks, in order in
// the first epoch and in an order shuffled with rng in each later one,
// reporting progress after each block. ctx is checked before every block.
func (tr *trainer) run(ctx context.Context, rng *rand.Rand, start time.Time) error {
	blocks := (tr.d.N + blockRows - 1) / blockRows
	total := tr.d.N * tr.cfg.Epochs
	rows := 0
	order := make([]int, blocks)
	for e := 0; e < tr.cfg.Epochs; e++ {
		for i := range order {
			order[i] = i
		}
		if e > 0 {
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, b := range order {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("mlp train %s: %w", tr.name, err)
			}
			n, err := tr.block(b, start)
			if err != nil {
				return err
			}
			rows += n
			if tr.cfg.Progress != nil {
				tr.cfg.Progress(rows, total)
			}
		}
	}
	return nil
}

// block trains on block b of the data set's rows, one Adam step per
// mini-batch, and returns the number of rows it held.
func (tr *trainer) block(b int, start time.Time) (int, error) {
	d, in := tr.d, tr.d.In()
	out := d.Kind.OutWidth(in)
	n := min(blockRows, d.N-b*blockRows)
	if err := d.Rows(d.Seed, b*blockRows, n, tr.bx[:n*in], tr.by[:n*out]); err != nil {
		return 0, err
	}
	for off := 0; off < n; off += tr.cfg.BatchSize {
		k := min(tr.cfg.BatchSize, n-off)
		xb := tr.bx[off*in : (off+k)*in]
		xz := xb
		if d.Centre {
			xz = centreRows(xb, in, tr.st.fill)
		}
		st := tr.st
		z, tgt, w := standardise(xz, xb, tr.by[off*out:(off+k)*out], in, out, st.muX, st.sdX, st.muY, st.sdY)
		loss, err := tr.step(z, tgt, w)
		if err != nil {
			return 0, err
		}
		tr.record(loss, start)
	}
	return n, nil
}

// step is one Adam step on the standardised mini-batch z with targets tgt
// and weights w (0 for padded outputs): forward, weighted mean squared error,
// backward. It returns the loss.
func (tr *trainer) step(z *nn.Tensor, tgt, w []float64) (float64, error) {
	fc1, fc2 := tr.m.FC1, tr.m.FC2
	nn.ZeroGrad(tr.params)
	h, err := fc1.Forward(z)
	if err != nil {
		return 0, fmt.Errorf("mlp train %s: %w", tr.name, err)
	}
	if h, err = tr.act.Forward(h); err != nil {
		return 0, fmt.Errorf("mlp train %s: %w", tr.name, err)
	}
	y, err := fc2.Forward(h)
	if err != nil {
		return 0, fmt.Errorf("mlp train %s: %w", tr.name, err)
	}
	loss := weightedMSE(y.Data, tgt, w)
	g, err := fc2.Backward(y)
	if err == nil {
		if g, err = tr.act.Backward(g); err == nil {
			_, err = fc1.Backward(g)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("mlp train %s: %w", tr.name, err)
	}
	if _, err := tr.opt.Step(tr.params); err != nil {
		return 0, fmt.Errorf("mlp train %s step %d: %w", tr.name, tr.done, err)
	}
	return loss, nil
}

// weightedMSE returns the mean squared error of y against tgt over the
// entries weighted by w (the mean is over Σw) and overwrites y with its
// gradient.
func weightedMSE(y, tgt, w []float64) float64 {
	loss, cnt := 0.0, 0.0
	for i := range y {
		cnt += w[i]
	}
	for i, v := range y {
		diff := (v - tgt[i]) * w[i]
		loss += diff * diff
		y[i] = 2 * diff / cnt // reuse y as the gradient
	}
	return loss / cnt
}

// record counts one step done with its loss: into the final loss when among
// the last tail steps, and into a progress line about every 10% of the steps
// when a logger is set.
func (tr *trainer) record(loss float64, start time.Time) {
	tr.done++
	if tr.done > tr.steps-tr.tail {
		tr.lossSum += loss
		tr.lossN++
	}
	if tr.cfg.Logger != nil && tr.done%max(tr.steps/10, 1) == 0 {
		el := time.Since(start)
		eta := time.Duration(float64(el) * float64(tr.steps-tr.done) / float64(tr.done))
		tr.cfg.Logger.Info("mlp ex vivo training", "mlp", tr.name, "step", tr.done, "of", tr.steps, "loss", loss,
			"elapsed", el.Round(time.Millisecond), "eta", eta.Round(time.Second))
	}
}

// evaluateTrained fills the report's errors and ranges of the trained
// (folded) m: on the held-out synthesised rows, on d's observed real rows if
// it holds any, and the largest weight.
func evaluateTrained(m *MLP, d *Dataset, st *standardisation, name string, rep *Report) error {
	in := d.In()
	out := d.Kind.OutWidth(in)
	var rg rangeAcc
	rg.init()
	var err error
	if rep.SynthMaxAbs, rep.SynthMeanAbs, err = evaluate(m, st.testX, st.testY, &rg); err != nil {
		return err
	}
	if len(d.Real) > 0 {
		rep.RealRows = len(d.Real) / in
		ry := make([]float64, rep.RealRows*out)
		if err := d.exact(d.Real, in, ry); err != nil {
			return fmt.Errorf("mlp train %s: real rows: %w", name, err)
		}
		if rep.RealMaxAbs, rep.RealMeanAbs, err = evaluate(m, d.Real, ry, &rg); err != nil {
			return err
		}
	}
	rep.Ranges = rg.r
	for _, p := range m.Params() {
		for _, v := range p.Value.Data {
			rep.Ranges.WeightMaxAbs = max(rep.Ranges.WeightMaxAbs, math.Abs(v))
		}
	}
	return nil
}

// outputStats returns per-output means and deviations of y over unpadded entries
// (deviations floored so that a constant output does not divide by zero).
func outputStats(x, y []float64, in, out int, k Kind) (mu, sd []float64) {
	mu, sd = make([]float64, out), make([]float64, out)
	cnt := make([]float64, out)
	rows := len(y) / out
	for r := 0; r < rows; r++ {
		for j := 0; j < out; j++ {
			if k == AttnSoftmax && math.IsInf(x[r*in+j], -1) {
				continue
			}
			v := y[r*out+j]
			cnt[j]++
			mu[j] += v
			sd[j] += v * v
		}
	}
	for j := range mu {
		if cnt[j] == 0 {
			mu[j], sd[j] = 0, 1
			continue
		}
		mu[j] /= cnt[j]
		v := sd[j]/cnt[j] - mu[j]*mu[j]
		sd[j] = math.Sqrt(max(v, 0))
		sd[j] = max(sd[j], 1e-3*max(math.Abs(mu[j]), 1e-3))
	}
	return mu, sd
}

// constError returns the mean absolute error of predicting muY for every row.
func constError(x, y []float64, in, out int, k Kind, muY []float64) float64 {
	s, n := 0.0, 0
	for i, v := range y {
		if k == AttnSoftmax && math.IsInf(x[i], -1) {
			continue
		}
		s += math.Abs(v - muY[i%out])
		n++
	}
	return s / float64(max(n, 1))
}

// centreRows returns the rows of x (width in) with padding (−Inf) replaced by
// fill and each row's mean subtracted: C·x' with C = I − 11ᵀ/in.
func centreRows(x []float64, in int, fill []float64) []float64 {
	c := make([]float64, len(x))
	for off := 0; off < len(x); off += in {
		mean := 0.0
		for j := 0; j < in; j++ {
			v := x[off+j]
			if math.IsInf(v, -1) {
				v = fill[j]
			}
			c[off+j] = v
			mean += v
		}
		mean /= float64(in)
		for j := 0; j < in; j++ {
			c[off+j] -= mean
		}
	}
	return c
}

// centredStats returns per-feature means and deviations (floored) of rows.
func centredStats(x []float64, in int) (mu, sd []float64) {
	mu, sd = make([]float64, in), make([]float64, in)
	rows := len(x) / in
	for r := 0; r < rows; r++ {
		for j := 0; j < in; j++ {
			v := x[r*in+j]
			mu[j] += v
			sd[j] += v * v
		}
	}
	for j := range mu {
		mu[j] /= float64(rows)
		sd[j] = math.Sqrt(max(sd[j]/float64(rows)-mu[j]*mu[j], 0))
		sd[j] = max(sd[j], 1e-6*max(1, math.Abs(mu[j])))
	}
	return mu, sd
}

// standardise maps rows to the standardised network's inputs and targets and
// the per-output loss weights (0 for padded outputs): xz are the rows the
// network sees (the raw rows x, or their centred form), x marks the padding.
func standardise(xz, x, y []float64, in, out int, muX, sdX, muY, sdY []float64) (z *nn.Tensor, tgt, w []float64) {
	rows := len(x) / in
	z = nn.New(rows, in)
	tgt = make([]float64, len(y))
	w = make([]float64, len(y))
	for r := 0; r < rows; r++ {
		for j := 0; j < in; j++ {
			v := xz[r*in+j]
			if math.IsInf(v, -1) {
				z.Data[r*in+j] = FillZ
			} else {
				z.Data[r*in+j] = (v - muX[j]) / sdX[j]
			}
		}
		for j := 0; j < out; j++ {
			i := r*out + j
			tgt[i] = (y[i] - muY[j]) / sdY[j]
			w[i] = 1
			if out == in && math.IsInf(x[r*in+j], -1) {
				w[i] = 0
			}
		}
	}
	return z, tgt, w
}

// fold rewrites the standardised weights as raw-space weights and sets the fill
// values (see the package comment); centre folds the row centring C in too
// (W1 ← W1·C: each row of W1 loses its mean).
func fold(m *MLP, muX, sdX, muY, sdY []float64, centre bool) {
	in, hid, out := m.In(), m.Hidden(), m.Out()
	w1, b1 := m.FC1.W.Value.Data, m.FC1.B.Value.Data
	for i := 0; i < hid; i++ {
		mean := 0.0
		for j := 0; j < in; j++ {
			b1[i] -= w1[i*in+j] * muX[j] / sdX[j]
			w1[i*in+j] /= sdX[j]
			mean += w1[i*in+j]
		}
		if centre {
			mean /= float64(in)
			for j := 0; j < in; j++ {
				w1[i*in+j] -= mean
			}
		}
	}
	w2, b2 := m.FC2.W.Value.Data, m.FC2.B.Value.Data
	for o := 0; o < out; o++ {
		for i := 0; i < hid; i++ {
			w2[o*hid+i] *= sdY[o]
		}
		b2[o] = b2[o]*sdY[o] + muY[o]
	}
	if m.Kind == AttnSoftmax {
		for j := range m.Fill {
			m.Fill[j] = muX[j] + FillZ*sdX[j]
		}
	}
}

type rangeAcc struct{ r Ranges }

func (a *rangeAcc) init() {
	a.r = Ranges{InMin: math.Inf(1), InMax: math.Inf(-1), OutMin: math.Inf(1), OutMax: math.Inf(-1)}
}

// evaluate runs the MLP on rows x, compares with y over unpadded outputs and
// accumulates the ranges.
func evaluate(m *MLP, x, y []float64, rg *rangeAcc) (maxAbs, meanAbs float64, err error) {
	in := m.In()
	rows := len(x) / in
	xt, err := nn.FromSlice(x, rows, in)
	if err != nil {
		return 0, 0, fmt.Errorf("mlp evaluate: %w", err)
	}
	pred, err := m.Forward(xt)
	if err != nil {
		return 0, 0, fmt.Errorf("mlp evaluate: %w", err)
	}
	for i, v := range x {
		if math.IsInf(v, -1) {
			v = m.Fill[i%in]
		}
		rg.r.InMin, rg.r.InMax = min(rg.r.InMin, v), max(rg.r.InMax, v)
	}
	hid := m.Hidden()
	w1, b1 := m.FC1.W.Value.Data, m.FC1.B.Value.Data
	for r := 0; r < rows; r++ {
		for i := 0; i < hid; i++ {
			s := b1[i]
			for j := 0; j < in; j++ {
				v := x[r*in+j]
				if math.IsInf(v, -1) {
					v = m.Fill[j]
				}
				s += w1[i*in+j] * v
			}
			rg.r.HiddenMaxAbs = max(rg.r.HiddenMaxAbs, math.Abs(s))
		}
	}
	cnt := 0
	for i, v := range pred.Data {
		if m.Kind == AttnSoftmax && math.IsInf(x[i], -1) {
			continue
		}
		rg.r.OutMin, rg.r.OutMax = min(rg.r.OutMin, v), max(rg.r.OutMax, v)
		e := math.Abs(v - y[i])
		maxAbs = max(maxAbs, e)
		meanAbs += e
		cnt++
	}
	if cnt > 0 {
		meanAbs /= float64(cnt)
	}
	return maxAbs, meanAbs, nil
}

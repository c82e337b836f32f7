package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// Distill makes the proxies track the target's own predictions rather than
// only the bootstrap labels (Config.Distill; nil keeps the paper's in-vivo
// tuning on the labels).
//
// The teacher is M_g after its fine-tuning on the bootstrap (Result.Backbone:
// the target's bottom layers, adapted to the pool), evaluated exactly. Each
// proxy is tuned in vivo on the bootstrap inputs plus Extra with the loss
//
//	(1 − α) · Σ_boot w_y · CE(y, proxy) / B  +  α · T² · Σ_all KL(q_T ‖ p_T) / B
//
// over a batch of B rows, where q_T and p_T are the teacher's and the proxy's
// softmax at temperature T, w_y = 1, or the inverse frequency of class y in
// the bootstrap when BalanceClasses is set (a bootstrap with two examples of a
// class otherwise teaches the proxies that the class hardly exists). The
// entropy MLP learns the teacher's entropy from the proxy's logits when
// TeacherEntropy is set, the entropy of the proxy's own logits otherwise.
//
// Selecting by the proxies' entropies is a stand-in for selecting by the
// target's; the ranking the target would produce is what the proxies must
// reproduce, and the teacher's soft predictions carry that ranking where hard
// labels do not. Extra data (e.g. the model owner's public pretraining data)
// costs the data owner nothing and multiplies the examples the proxies learn
// the teacher's uncertainty from.
type Distill struct {
	// Weight is α in [0, 1]: the share of the distillation term.
	Weight float64
	// Temperature is T (1 when 0).
	Temperature float64
	// Extra holds inputs the model owner holds in the clear (no labels are
	// needed), distilled on besides the bootstrap.
	Extra model.Input
	// BalanceClasses weighs the label loss by the inverse class frequency of
	// the bootstrap, in M_g's tuning and in vivo.
	BalanceClasses bool
	// TeacherEntropy trains the entropy MLP toward the teacher's entropy.
	TeacherEntropy bool
	// Calibrate, if positive, is the number of epochs of a last pass that
	// trains only the entropy MLP, on the tuned proxy's own (now fixed)
	// logits over the distillation inputs: during in-vivo tuning the MLP
	// chases logits that keep moving, and ends up ranking the samples far
	// worse than the exact entropy of the same logits would.
	Calibrate int
	// CalibrateLR is the calibration's peak learning rate (Config.InVivo.LR
	// when 0).
	CalibrateLR float64
	// SqrtEntropy makes the calibration fit √H instead of H (for another
	// criterion than the entropy, the square root of its score;
	// mlp.Criterion.Sqrt must allow it). Proxy.SqrtEntropy records it: a
	// selection only compares entropies, and √ stretches the confident end
	// where most of a pool lies, so the MLP's roughly uniform absolute error
	// swaps fewer ranks there (bench/QUALITY.md: on MNIST the
	// final proxy's Spearman with the target rises from 0.82 to 0.85, against
	// 0.86 for the exact entropy of its logits). Needs Calibrate > 0.
	SqrtEntropy bool
	// Mixup, if positive, adds that many synthetic inputs to the
	// distillation set, each mixing two inputs drawn from the bootstrap and
	// Extra (see MixInputs); the teacher labels them like Extra. The
	// bootstrap and the model owner's pretraining data are mostly inputs the
	// teacher is sure about, while a selection by entropy ranks the pool's
	// uncertain points: mixed inputs lie between classes, where the teacher
	// hesitates, and show the proxies how it ranks such points.
	Mixup int
}

func (d *Distill) validate(target *model.Model) error {
	if d == nil {
		return nil
	}
	if d.Calibrate < 0 {
		return fmt.Errorf("proxy: distill: %d calibration epochs", d.Calibrate)
	}
	if d.SqrtEntropy && d.Calibrate == 0 {
		return fmt.Errorf("proxy: distill: SqrtEntropy needs calibration epochs")
	}
	if d.Mixup < 0 {
		return fmt.Errorf("proxy: distill: %d mixed inputs", d.Mixup)
	}
	if !(d.CalibrateLR >= 0) || math.IsInf(d.CalibrateLR, 0) {
		return fmt.Errorf("proxy: distill: calibration learning rate %g", d.CalibrateLR)
	}
	if !(d.Weight >= 0 && d.Weight <= 1) || d.Temperature < 0 || math.IsNaN(d.Temperature) || math.IsInf(d.Temperature, 0) {
		return fmt.Errorf("proxy: distill: weight %g outside [0, 1] or temperature %g", d.Weight, d.Temperature)
	}
	if n := d.Extra.Len(); n > 0 {
		if _, err := d.Extra.Select(nil); err != nil {
			return fmt.Errorf("proxy: distill: extra inputs: %w", err)
		}
		if (d.Extra.Pixels != nil) != (target.Config.Family == model.ViT) {
			return fmt.Errorf("proxy: distill: extra inputs do not fit a %s target", target.Config.Family)
		}
	}
	return nil
}

// checkSeq checks that text inputs of Extra have the bootstrap's sequence
// length (the proxies are tuned on both in the same batches and mixed
// position by position).
func (d *Distill) checkSeq(boot model.Input) error {
	if d == nil || d.Extra.Len() == 0 || boot.Len() == 0 || boot.IDs == nil || d.Extra.IDs == nil {
		return nil
	}
	T := len(boot.IDs[0])
	for i, r := range d.Extra.IDs {
		if len(r) != T {
			return fmt.Errorf("distill: public input %d has %d tokens, the bootstrap %d: tokenize the model owner's public texts to the data owner's sequence length", i, len(r), T)
		}
	}
	return nil
}

// logGeneration says which generation runs: the paper's plain one, or
// distillation on the bootstrap and the model owner's public inputs, or on
// the bootstrap alone.
func logGeneration(log *slog.Logger, cfg Config, n int) {
	d := cfg.Distill
	switch {
	case d == nil:
		log.Info("proxy: generation: in-vivo tuning on the bootstrap labels (the paper's)", "bootstrap", n, "plain", cfg.Plain)
	case d.Extra.Len() > 0:
		log.Info("proxy: generation: distilling the adapted target on the bootstrap, the model owner's public inputs and mixes of them",
			"bootstrap", n, "public", d.Extra.Len(), "mixes", d.Mixup, "plain", cfg.Plain)
	default:
		log.Info("proxy: generation: no public inputs of the model owner (Config.Public): distilling the adapted target on the bootstrap alone and mixes of it",
			"bootstrap", n, "mixes", d.Mixup, "plain", cfg.Plain)
	}
}

// classWeights returns the inverse-frequency weight of each class of labels
// (n / (C' · n_c) over the C' classes present; 1 for absent classes), or nil
// when balancing is off.
func (d *Distill) classWeights(labels []int, classes int) []float64 {
	if d == nil || !d.BalanceClasses {
		return nil
	}
	counts := make([]float64, classes)
	for _, y := range labels {
		if y >= 0 && y < classes {
			counts[y]++
		}
	}
	present := 0
	for _, c := range counts {
		if c > 0 {
			present++
		}
	}
	w := make([]float64, classes)
	for c, n := range counts {
		w[c] = 1
		if n > 0 {
			w[c] = float64(len(labels)) / (float64(present) * n)
		}
	}
	return w
}

// weightedCrossEntropy is nn.CrossEntropy with a weight per class (nil: all
// 1): loss Σ w_y·CE_i / B, gradient w_y·(p − onehot)/B.
func weightedCrossEntropy(logits *nn.Tensor, y []int, w []float64) (float64, *nn.Tensor, error) {
	loss, dl, err := nn.CrossEntropy(logits, y)
	if err != nil || w == nil {
		return loss, dl, err
	}
	c := logits.Cols()
	loss = 0
	for i, yi := range y {
		row := logits.Data[i*c : (i+1)*c]
		lse := nn.LogSumExp(row)
		loss += w[yi] * (lse - row[yi])
		for j := 0; j < c; j++ {
			dl.Data[i*c+j] *= w[yi]
		}
	}
	return loss / float64(len(y)), dl, nil
}

// ConcatInputs returns the samples of a followed by those of b (same kind of
// input; a nil mask or type-id list stands for all ones or zeros).
func ConcatInputs(a, b model.Input) (model.Input, error) {
	if a.Len() == 0 {
		return b, nil
	}
	if b.Len() == 0 {
		return a, nil
	}
	if (a.Pixels != nil) != (b.Pixels != nil) {
		return model.Input{}, fmt.Errorf("concat inputs: images and texts")
	}
	if a.Pixels != nil {
		return model.Input{Pixels: append(append([][]float64{}, a.Pixels...), b.Pixels...)}, nil
	}
	fill := func(rows [][]int, like [][]int, v int) [][]int {
		if rows != nil {
			return rows
		}
		out := make([][]int, len(like))
		for i, r := range like {
			out[i] = make([]int, len(r))
			for j := range out[i] {
				out[i][j] = v
			}
		}
		return out
	}
	out := model.Input{IDs: append(append([][]int{}, a.IDs...), b.IDs...)}
	if a.TypeIDs != nil || b.TypeIDs != nil {
		out.TypeIDs = append(append([][]int{}, fill(a.TypeIDs, a.IDs, 0)...), fill(b.TypeIDs, b.IDs, 0)...)
	}
	if a.Mask != nil || b.Mask != nil {
		out.Mask = append(append([][]int{}, fill(a.Mask, a.IDs, 1)...), fill(b.Mask, b.IDs, 1)...)
	}
	if _, err := out.Select(nil); err != nil {
		return model.Input{}, fmt.Errorf("concat inputs: %w", err)
	}
	return out, nil
}

// MixInputs returns n synthetic inputs, each mixing two distinct samples a
// and b of in drawn uniformly (seeded): images are λ·a + (1−λ)·b with λ
// uniform in [0, 1]; texts are a with a random span of positions [s, e)
// (1 ≤ s < e ≤ T, the first token kept) taken from b, token ids, type ids
// and mask alike. in must hold at least two samples.
func MixInputs(in model.Input, n int, seed uint64) (model.Input, error) {
	m := in.Len()
	if m < 2 || n < 0 {
		return model.Input{}, fmt.Errorf("mix inputs: %d mixes of %d samples", n, m)
	}
	if _, err := in.Select(nil); err != nil {
		return model.Input{}, fmt.Errorf("mix inputs: %w", err)
	}
	rng := nn.NewRNG(seed ^ 0x6d1f3a5b)
	pair := func() (int, int) {
		a := rng.IntN(m)
		b := rng.IntN(m - 1)
		if b >= a {
			b++
		}
		return a, b
	}
	var out model.Input
	if in.Pixels != nil {
		out.Pixels = make([][]float64, n)
		for i := range out.Pixels {
			a, b := pair()
			lam := rng.Float64()
			pa, pb := in.Pixels[a], in.Pixels[b]
			if len(pa) != len(pb) {
				return model.Input{}, fmt.Errorf("mix inputs: images of %d and %d values", len(pa), len(pb))
			}
			px := make([]float64, len(pa))
			for j := range px {
				px[j] = lam*pa[j] + (1-lam)*pb[j]
			}
			out.Pixels[i] = px
		}
		return out, nil
	}
	mix := func(rows [][]int, a, b, s, e int) []int {
		r := slices.Clone(rows[a])
		copy(r[s:e], rows[b][s:e])
		return r
	}
	for range n {
		a, b := pair()
		T := len(in.IDs[a])
		if T < 2 || len(in.IDs[b]) != T {
			return model.Input{}, fmt.Errorf("mix inputs: texts of %d and %d tokens", T, len(in.IDs[b]))
		}
		s := 1 + rng.IntN(T-1)
		e := s + 1 + rng.IntN(T-s)
		out.IDs = append(out.IDs, mix(in.IDs, a, b, s, e))
		if in.TypeIDs != nil {
			out.TypeIDs = append(out.TypeIDs, mix(in.TypeIDs, a, b, s, e))
		}
		if in.Mask != nil {
			out.Mask = append(out.Mask, mix(in.Mask, a, b, s, e))
		}
	}
	return out, nil
}

// teacherSet is the distillation data: bootstrap inputs then Extra, the
// teacher's logits on them and the labels of the bootstrap rows.
type teacherSet struct {
	in     model.Input
	logits *nn.Tensor
	labels []int // len = bootstrap rows
	w      []float64
}

func newTeacherSet(teacher *model.Model, boot model.Input, labels []int, d *Distill, seed uint64) (*teacherSet, error) {
	in, err := ConcatInputs(boot, d.Extra)
	if err != nil {
		return nil, err
	}
	if d.Mixup > 0 {
		mixed, err := MixInputs(in, d.Mixup, seed)
		if err != nil {
			return nil, err
		}
		if in, err = ConcatInputs(in, mixed); err != nil {
			return nil, err
		}
	}
	lg, err := model.Predict(teacher, in, 256)
	if err != nil {
		return nil, fmt.Errorf("teacher predictions: %w", err)
	}
	return &teacherSet{in: in, logits: lg, labels: labels, w: d.classWeights(labels, teacher.Config.NumLabels())}, nil
}

// distillInVivo tunes the proxy on ts with the loss of Distill.
func (p *Proxy) distillInVivo(ctx context.Context, ts *teacherSet, cfg Config, stage string, log *slog.Logger) error {
	d := cfg.Distill
	w := cfg.EntropyWeight
	if w <= 0 {
		w = 1
	}
	T := d.Temperature
	if T <= 0 {
		T = 1
	}
	alpha := d.Weight
	c := ts.logits.Cols()
	crit, err := p.criterion()
	if err != nil {
		return err
	}
	teacherH := crit.ScoreRows(ts.logits)
	nBoot := len(ts.labels)
	// trainLoop hands each batch its row numbers as "labels".
	rows := make([]int, ts.in.Len())
	for i := range rows {
		rows[i] = i
	}
	params := trainableParams(p.Params())
	pt, qt := make([]float64, c), make([]float64, c)
	step := func(batch model.Input, idx []int, _ bool) (float64, error) {
		logits, err := p.Logits(batch)
		if err != nil {
			return 0, err
		}
		B := float64(len(idx))
		dl := nn.New(logits.Shape...)
		loss := 0.0
		for r, i := range idx {
			row := logits.Data[r*c : (r+1)*c]
			g := dl.Data[r*c : (r+1)*c]
			if i < nBoot && alpha < 1 {
				y := ts.labels[i]
				wy := 1.0
				if ts.w != nil {
					wy = ts.w[y]
				}
				nn.SoftmaxRows(row, pt, c)
				loss += (1 - alpha) * wy * (nn.LogSumExp(row) - row[y]) / B
				for j := range g {
					v := pt[j]
					if j == y {
						v--
					}
					g[j] += (1 - alpha) * wy * v / B
				}
			}
			if alpha > 0 {
				scaled := make([]float64, c)
				tl := ts.logits.Data[i*c : (i+1)*c]
				for j := range scaled {
					scaled[j] = row[j] / T
				}
				nn.SoftmaxRows(scaled, pt, c)
				lsP := nn.LogSumExp(scaled)
				for j := range scaled {
					scaled[j] = tl[j] / T
				}
				nn.SoftmaxRows(scaled, qt, c)
				lsQ := nn.LogSumExp(scaled)
				kl := 0.0
				for j := range g {
					if qt[j] > 0 {
						kl += qt[j] * ((tl[j]/T - lsQ) - (row[j]/T - lsP))
					}
					g[j] += alpha * T * (pt[j] - qt[j]) / B
				}
				loss += alpha * T * T * kl / B
			}
		}
		if p.Entropy != nil {
			det := logits.Clone()
			pred, err := p.Entropy.Forward(det)
			if err != nil {
				return 0, err
			}
			var target []float64
			if d.TeacherEntropy {
				target = make([]float64, len(idx))
				for r, i := range idx {
					target[r] = teacherH[i]
				}
			} else {
				target = crit.ScoreRows(det)
			}
			g := nn.New(pred.Shape...)
			for i, v := range pred.Data {
				g.Data[i] = w * 2 * (v - target[i]) / B
			}
			if _, err := p.Entropy.Backward(g); err != nil {
				return 0, err
			}
		}
		if err := p.backward(dl); err != nil {
			return 0, err
		}
		return loss, nil
	}
	return trainLoop(ctx, ts.in, rows, cfg.InVivo, cfg.Seed+uint64(p.Shape.Layers)*31+uint64(p.Shape.MLPHidden), params, p.Model, step, stage, cfg.Progress, log)
}

// calibrateEntropy trains the proxy's entropy MLP alone for d.Calibrate
// epochs on the proxy's logits over ts.in: toward the teacher's entropy when
// TeacherEntropy is set, toward the exact entropy of the proxy's logits
// otherwise, or toward its square root with SqrtEntropy (squared error, AdamW
// at CalibrateLR).
func (p *Proxy) calibrateEntropy(ctx context.Context, ts *teacherSet, cfg Config, stage string, log *slog.Logger) error {
	d := cfg.Distill
	if p.Entropy == nil || d == nil || d.Calibrate <= 0 {
		return nil
	}
	n := ts.in.Len()
	c := ts.logits.Cols()
	logits := nn.New(n, c)
	const bs = 256
	for off := 0; off < n; off += bs {
		idx := make([]int, 0, bs)
		for i := off; i < min(off+bs, n); i++ {
			idx = append(idx, i)
		}
		batch, err := ts.in.Select(idx)
		if err != nil {
			return fmt.Errorf("%s: %w", stage, err)
		}
		lg, _, err := p.Forward(batch)
		if err != nil {
			return fmt.Errorf("%s: %w", stage, err)
		}
		copy(logits.Data[off*c:], lg.Data)
	}
	crit, err := p.criterion()
	if err != nil {
		return fmt.Errorf("%s: %w", stage, err)
	}
	target := crit.ScoreRows(ts.logits)
	if !d.TeacherEntropy {
		target = crit.ScoreRows(logits)
	}
	if d.SqrtEntropy && !crit.Sqrt {
		return fmt.Errorf("%s: criterion %q has no √ calibration", stage, crit.Name)
	}
	if d.SqrtEntropy {
		for i, h := range target {
			target[i] = math.Sqrt(max(h, 0))
		}
	}
	p.SqrtEntropy = d.SqrtEntropy
	params := p.Entropy.Params()
	batch := max(16, cfg.InVivo.BatchSize)
	steps := d.Calibrate * ((n + batch - 1) / batch)
	lr := d.CalibrateLR
	if lr == 0 {
		lr = cfg.InVivo.LR
	}
	opt := &nn.AdamW{LR: lr, ClipNorm: 1, WarmupSteps: steps / 20, TotalSteps: steps + 1}
	rng := nn.NewRNG(cfg.Seed ^ 0x3c6ef372 ^ uint64(p.Shape.MLPHidden))
	for e := 0; e < d.Calibrate; e++ {
		perm := rng.Perm(n)
		sum := 0.0
		for off := 0; off < n; off += batch {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
			idx := perm[off:min(off+batch, n)]
			x := nn.New(len(idx), c)
			for r, i := range idx {
				copy(x.Data[r*c:(r+1)*c], logits.Data[i*c:(i+1)*c])
			}
			nn.ZeroGrad(params)
			pred, err := p.Entropy.Forward(x)
			if err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
			g := nn.New(pred.Shape...)
			for r, v := range pred.Data {
				diff := v - target[idx[r]]
				sum += diff * diff
				g.Data[r] = 2 * diff / float64(len(idx))
			}
			if _, err := p.Entropy.Backward(g); err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
			if _, err := opt.Step(params); err != nil {
				return fmt.Errorf("%s: %w", stage, err)
			}
		}
		if e == d.Calibrate-1 {
			log.Info("proxy: "+stage, "epochs", d.Calibrate, "mse", sum/float64(n))
		}
	}
	return nil
}

package selection

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/topk"
	"github.com/selectformer/selectformer/share"
)

// DealerBudgetFactor is the safety factor of DealerBudget: the budget is
// this many times the most dealer work one uninterrupted run of the
// selection draws. The room above one run is for resumes (see
// DealerBudget).
const DealerBudgetFactor = 2

// topKMaxSteps is the number of QuickSelect steps DealerBudget allows a
// phase whose candidates one sort step cannot order: twice the most that
// TestSelectPlanSteps and TestSelectPlanTwoSteps allow (4).
const topKMaxSteps = 8

// DealerBudget returns the session budget, in beaver.Request.DealerWork
// units, that a selection of parameters p whose phases run the proxies of
// archs (one per phase, for the pool's sequence length) may draw from a
// networked dealer: an upper bound of what an honest run draws, times
// DealerBudgetFactor. It depends on public shapes alone, and computes and
// draws nothing: the model owner announces it to the dealer when it binds
// the session (beaver.SessionBudgeter), so that a data owner cannot make the
// dealer work for more than the announced shapes need.
//
// With n_0 the pool without the bootstrap sample, n_i the survivors of phase
// i−1, k_i those of phase i, B the batch size and f = DealerBudgetFactor:
//
//	budget = f · ( Σ_i [ prepare_i + ⌈n_i/B⌉ · batch_i + topK(n_i, k_i) ] + appraisal )
//
// where prepare_i is the work of sharing phase i's proxy and batch_i that
// of one full batch of its secure forward (a partial last batch draws
// less), both the sum of DealerWork over the requests of a rehearsal
// (protocol.Rehearse: the requests of a computation depend on its shapes
// alone) with a random network of archs[i]
// (secure.RandomNet: costs do not depend on weights); topK is QuickSelect's
// bound (topKWork: (⌊C/64⌋ + 1 + s) times the rehearsed work of a step of
// 64 comparisons, with C = n(n−1)/2 and s = 1 when one sort step orders
// the n values, else s = 8 steps of at most min(max(step budget, 2^15, n),
// n(n−1)/2) comparisons each, twice the steps the plan's tests allow; none
// when k ≥ n) and appraisal the rehearsed work of p.Appraisal on the
// final set (the mean of squared scores, and the comparison with the
// threshold). Sums saturate at math.MaxUint64. It costs about one batch
// of local computation per phase (on zeros, the products skipped), as the
// batch scheduler's own rehearsal of each phase does.
//
// The factor leaves room for about one interrupted run: a resumed run
// redoes the lost batches, and prepares its phase's proxy again, while the
// material drawn ahead for them by the interrupted run is not given back
// (TestDealerBudgetCoversResume).
func DealerBudget(ctx context.Context, p Params, archs []secure.Arch) (uint64, error) {
	return dealerBudget(ctx, p, archEvaluator{}, archs)
}

// dealerBudget is DealerBudget rehearsing each phase with eval (party 0's
// side: a substitute Evaluator's, or the proxies' own).
func dealerBudget(ctx context.Context, p Params, eval Evaluator, archs []secure.Arch) (uint64, error) {
	p = p.WithDefaults()
	if err := p.Validate(); err != nil {
		return 0, err
	}
	if len(archs) != len(p.Schedule) {
		return 0, fmt.Errorf("selection: dealer budget: %d architectures for %d phases", len(archs), len(p.Schedule))
	}
	perCmp, err := compareBlockWork(ctx, p.FixedPoint)
	if err != nil {
		return 0, err
	}
	var total uint64
	n := p.PoolSize - p.Bootstrap
	for i := range p.Schedule {
		prep, batch, err := phaseWork(ctx, p, eval, i, archs[i])
		if err != nil {
			return 0, err
		}
		nb := uint64(p.phaseBatches(i, n))
		keep := p.keep(i)
		total = addSat(total, addSat(prep, addSat(mulSat(nb, batch), topKWork(n, keep, perCmp))))
		n = keep
	}
	if p.Appraisal != AppraiseNone {
		a, err := appraisalWork(ctx, p, n)
		if err != nil {
			return 0, err
		}
		total = addSat(total, a)
	}
	return mulSat(total, DealerBudgetFactor), nil
}

// rehearse runs op on a rehearsal session of party 0 and returns the dealer
// work of the requests it drew.
func rehearse(ctx context.Context, fp share.FixedPoint, op func(*protocol.Session) error) (uint64, error) {
	sc, err := protocol.Rehearse(ctx, 0, 1, fp, func(_ context.Context, s *protocol.Session) error { return op(s) })
	if err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return beaver.Work(sc.Requests), nil
}

// phaseWork rehearses phase i's preparation of arch and one full batch of
// its forward with eval, and returns the work of each.
func phaseWork(ctx context.Context, p Params, eval Evaluator, i int, arch secure.Arch) (prep, batch uint64, err error) {
	var fw Forwarder
	prep, err = rehearse(ctx, p.FixedPoint, func(s *protocol.Session) error {
		var err error
		fw, err = eval.Prepare(ctx, s, i, arch, uint64(i)<<32)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("selection: dealer budget: phase %d: rehearse the preparation: %w", i, err)
	}
	idx := make([]int, p.PhaseBatchSize(i))
	for j := range idx {
		idx[j] = j
	}
	batch, err = rehearse(ctx, p.FixedPoint, func(s *protocol.Session) error {
		_, err := fw.Forward(ctx, s, idx)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("selection: dealer budget: phase %d: rehearse a batch: %w", i, err)
	}
	return prep, batch, nil
}

// compareBlockWork is the dealer work of one comparison step of 64
// comparisons (a step of topk.TopK): a step of m comparisons draws at most
// ⌈m/64⌉ times as much (the sign circuit's material grows with ⌈m/64⌉
// words of packed bits and m words; TestDealerBudgetCompareBlocks).
func compareBlockWork(ctx context.Context, fp share.FixedPoint) (uint64, error) {
	w, err := compareWork(ctx, fp, 64)
	if err != nil {
		return 0, fmt.Errorf("selection: dealer budget: rehearse a comparison step: %w", err)
	}
	return w, nil
}

// compareWork rehearses the comparison of one QuickSelect step of m
// comparisons (topk.TopK's: CompareRevealBounded when the encoding
// allows, else CompareReveal) and returns its dealer work.
func compareWork(ctx context.Context, fp share.FixedPoint, m int) (uint64, error) {
	return rehearse(ctx, fp, func(s *protocol.Session) error {
		x, err := share.NewTensor(m)
		if err != nil {
			return err
		}
		y, err := share.NewTensor(m)
		if err != nil {
			return err
		}
		if topk.UsesBounded(fp) {
			_, err = s.CompareRevealBounded(ctx, x, y)
		} else {
			_, err = s.CompareReveal(ctx, x, y)
		}
		return err
	})
}

// topKComparisons bounds the comparisons of TopK selecting k of n values
// and the steps it takes: none when there is nothing to choose; n(n−1)/2 in
// one step when one sort step orders all of them (the step budget allows
// it); otherwise at most topKMaxSteps steps, each of at most the larger of
// the step budgets and n comparisons (a partition step compares every
// other active value with at least one pivot) and at most n(n−1)/2 (no
// step compares a pair twice).
func topKComparisons(n, k int) (cmps, steps uint64) {
	if k <= 0 || k >= n {
		return 0, 0
	}
	all := uint64(n) * uint64(n-1) / 2
	if topk.OneStep(n) {
		return all, 1
	}
	step := uint64(topk.MaxStepComparisons(n))
	return mulSat(min(step, all), topKMaxSteps), topKMaxSteps
}

// topKWork bounds the dealer work of TopK selecting k of n values, perCmp
// being the work of a step of 64 comparisons (compareBlockWork): each step
// of m comparisons costs at most ⌈m/64⌉·perCmp, so all of them at most
// (⌈C/64⌉ + steps)·perCmp for C comparisons in all (topKComparisons).
func topKWork(n, k int, perCmp uint64) uint64 {
	c, steps := topKComparisons(n, k)
	if steps == 0 {
		return 0
	}
	return mulSat(c/64+1+steps, perCmp)
}

// appraisalWork rehearses the appraisal of a final set of n candidates:
// the mean of its squared scores (the larger case of meanEntropy) and, for
// AppraiseThreshold, the threshold's input and the comparison.
func appraisalWork(ctx context.Context, p Params, n int) (uint64, error) {
	w, err := rehearse(ctx, p.FixedPoint, func(s *protocol.Session) error {
		scores, err := share.NewTensor(max(n, 1))
		if err != nil {
			return err
		}
		mean, err := meanEntropy(ctx, s, scores, true)
		if err != nil {
			return err
		}
		if p.Appraisal != AppraiseThreshold {
			return nil
		}
		t, err := s.ShareInput(0, mean.Clone())
		if err != nil {
			return err
		}
		_, err = s.CompareReveal(ctx, t, mean)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("selection: dealer budget: rehearse the appraisal: %w", err)
	}
	return w, nil
}

// archEvaluator is party 0's secure forward of a random network of the
// architecture it is given (secure.RandomNet): it draws what a proxy of
// that architecture draws, for DealerBudget's rehearsals.
type archEvaluator struct{}

// Arch implements Evaluator.
func (archEvaluator) Arch(phase, seq int) (secure.Arch, error) {
	return secure.Arch{}, fmt.Errorf("selection: no proxy for phase %d", phase)
}

// Prepare implements Evaluator.
func (archEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, weightBase uint64) (Forwarder, error) {
	net, err := secure.RandomNet(arch, 1)
	if err != nil {
		return nil, err
	}
	p, err := secure.Prepare(ctx, s, arch, net, secure.Options{WeightBase: weightBase})
	if err != nil {
		return nil, err
	}
	return &secureForwarder{p: p}, nil
}

// generatedArchs returns the architectures of the proxies that
// proxy.Generate makes from a target of configuration c with cfg (the
// schedule's shapes in cfg.Phases) for inputs of seq tokens: the target's
// family, width, head width and labels, each phase's ⟨layers, kept heads,
// MLP width⟩, cfg's ablation, entropy MLP and selection criterion, no FFN (secure.ArchOfProxy of
// the generated proxies, private embeddings aside).
func generatedArchs(c model.Config, cfg proxy.Config, seq int) ([]secure.Arch, error) {
	if c.Heads <= 0 {
		return nil, fmt.Errorf("selection: target with %d heads", c.Heads)
	}
	out := make([]secure.Arch, len(cfg.Phases))
	for i, sh := range cfg.Phases {
		abl := cfg.Ablation
		if len(cfg.PhaseAblations) > 0 {
			if i >= len(cfg.PhaseAblations) {
				return nil, fmt.Errorf("selection: %d phase ablations for %d phases", len(cfg.PhaseAblations), len(cfg.Phases))
			}
			abl = cfg.PhaseAblations[i]
		}
		a := secure.Arch{Family: c.Family, Layers: sh.Layers, Heads: sh.Heads, HeadDim: c.Hidden / c.Heads, Hidden: c.Hidden,
			Seq: seq, Labels: c.NumLabels(), MLPHidden: sh.MLPHidden, Ablation: abl, Eps: c.LayerNormEps,
			SqrtEntropy: cfg.Distill != nil && cfg.Distill.SqrtEntropy && !abl.ExactEntropy}
		if !abl.ExactEntropy && cfg.EntropyHidden > 0 && cfg.EntropyHidden != sh.MLPHidden {
			a.EntropyHidden = cfg.EntropyHidden
		}
		if cfg.Criterion != mlp.DefaultCriterion {
			a.Criterion = cfg.Criterion // empty for the entropy, as secure.ArchOfProxy
		}
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("selection: phase %d proxy: %w", i, err)
		}
		out[i] = a
	}
	return out, nil
}

// addSat returns a+b, or math.MaxUint64 when it overflows.
func addSat(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}

// mulSat returns a·b, or math.MaxUint64 when it overflows.
func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

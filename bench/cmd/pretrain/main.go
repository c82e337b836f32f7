// Command pretrain makes the project's small pretrained text transformer: a
// BERT encoder pretrained by masked language modelling (nn/mlm) on the GNU
// Collaborative International Dictionary of English, which the Debian
// package dict-gcide installs, with a WordPiece vocabulary built from the
// same text (wordpiece.BuildVocab), saved as a Hugging Face
// BertForMaskedLM directory (config.json, model.safetensors, tokenizer.json,
// vocab.txt) with a model card (README.md: recipe, corpus digest, loss
// curve, probe score) and the same as curve.json. The probe fine-tunes the
// checkpoint (embeddings frozen, and whole) and the same architecture from scratch on
// the bundled WordNet subset's ten noun supersenses.
//
//	apt-get install dict-gcide
//	go run ./bench/cmd/pretrain -out examples/pretrained/gcide-bert-mini
//
// The defaults are the committed checkpoint's recipe; the run is
// deterministic (the same corpus file and flags give the same weights,
// vocabulary and config). -docs and -steps shrink it for a quick look;
// -card rewrites a checkpoint's card (and runs the probe) without
// training.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/mlm"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
	"github.com/selectformer/selectformer/nn/wordpiece"
)

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "pretrain:", err)
		os.Exit(1)
	}
}

// recipe is everything that determines the checkpoint.
type recipe struct {
	Corpus       string  `json:"corpus"`
	CorpusSHA256 string  `json:"corpus_sha256"`
	Docs         int     `json:"docs"`
	HoldoutEvery int     `json:"holdout_every"`
	Vocab        int     `json:"vocab"`
	Hidden       int     `json:"hidden"`
	Layers       int     `json:"layers"`
	Heads        int     `json:"heads"`
	Intermediate int     `json:"intermediate"`
	Seq          int     `json:"seq"`
	Steps        int     `json:"steps"`
	Batch        int     `json:"batch"`
	LR           float64 `json:"lr"`
	Warmup       float64 `json:"warmup"`
	WeightDecay  float64 `json:"weight_decay"`
	Seed         uint64  `json:"seed"`
	DType        string  `json:"dtype"`
}

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pretrain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r recipe
	fs.StringVar(&r.Corpus, "corpus", dataset.GCIDEPath, "GCIDE in dictd format (Debian package dict-gcide)")
	out := fs.String("out", "", "checkpoint directory to write (required)")
	fs.IntVar(&r.Docs, "docs", 0, "use only the first N paragraphs of the corpus (0: all)")
	fs.IntVar(&r.HoldoutEvery, "holdout-every", 200, "every N-th paragraph is held out for the loss curve's held-out points")
	fs.IntVar(&r.Vocab, "vocab", 4096, "WordPiece vocabulary size")
	fs.IntVar(&r.Hidden, "hidden", 64, "hidden width")
	fs.IntVar(&r.Layers, "layers", 2, "encoder layers")
	fs.IntVar(&r.Heads, "heads", 4, "attention heads")
	fs.IntVar(&r.Intermediate, "intermediate", 0, "FFN width (0: 2 × hidden)")
	fs.IntVar(&r.Seq, "seq", 64, "tokens a pretraining sequence (and the checkpoint's max_position_embeddings)")
	fs.IntVar(&r.Steps, "steps", 2500, "optimiser steps")
	fs.IntVar(&r.Batch, "batch", 32, "sequences a step")
	fs.Float64Var(&r.LR, "lr", 2e-3, "AdamW's peak learning rate")
	fs.Float64Var(&r.Warmup, "warmup", 0.05, "fraction of the steps warming up")
	fs.Float64Var(&r.WeightDecay, "weight-decay", 0.01, "AdamW's decoupled weight decay")
	fs.Uint64Var(&r.Seed, "seed", 1, "seed of the initialisation, sequence order and masking")
	fs.StringVar(&r.DType, "dtype", "F16", "tensor dtype of model.safetensors: F16, BF16, F32 or F64")
	evalEvery := fs.Int("eval-every", 0, "steps between two points of the loss curve (0: steps/10)")
	var pc probeConfig
	fs.IntVar(&pc.train, "probe-train", 1000, "the probe after pretraining: definitions of the bundled WordNet subset the checkpoint (embeddings frozen, and whole) and the same architecture from scratch are fine-tuned on (0: no probe)")
	fs.IntVar(&pc.test, "probe-test", 1000, "the probe: other definitions the three are tested on")
	fs.IntVar(&pc.epochs, "probe-epochs", 40, "the probe: epochs of fine-tuning")
	card := fs.Bool("card", false, "only rewrite -out's curve.json and model card (README.md) from its curve.json, running the probe: the weights are not touched")
	level := fs.String("log", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: pretrain -out DIR [flags]; -h lists them")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		return fmt.Errorf("-log: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	if *card {
		return rewriteCard(*out, pc, log)
	}
	if r.Intermediate == 0 {
		r.Intermediate = 2 * r.Hidden
	}
	if *evalEvery == 0 {
		*evalEvery = max(r.Steps/10, 1)
	}
	dt := safetensors.DType(strings.ToUpper(r.DType))
	if !dt.IsFloat() {
		return fmt.Errorf("-dtype %q is not a floating-point dtype", r.DType)
	}
	if r.HoldoutEvery < 2 {
		return fmt.Errorf("-holdout-every %d: want ≥ 2", r.HoldoutEvery)
	}
	start := time.Now()
	sum, err := fileSHA256(r.Corpus)
	if err != nil {
		return fmt.Errorf("corpus: %w (install the Debian package dict-gcide)", err)
	}
	r.CorpusSHA256 = sum
	paras, err := dataset.LoadGCIDE(r.Corpus)
	if err != nil {
		return err
	}
	if r.Docs > 0 && r.Docs < len(paras) {
		paras = paras[:r.Docs]
	}
	train, _ := splitCorpus(paras, r.HoldoutEvery)
	log.Info("corpus read", "paragraphs", len(paras), "took", time.Since(start).Round(time.Millisecond))
	t := time.Now()
	vocab, err := wordpiece.BuildVocab(train, r.Vocab)
	if err != nil {
		return err
	}
	tok := wordpiece.NewTokenizer(vocab, true)
	log.Info("vocabulary built", "tokens", vocab.Size(), "took", time.Since(t).Round(time.Millisecond))
	t = time.Now()
	stats, seqs, err := countCorpus(tok, paras, r)
	if err != nil {
		return err
	}
	log.Info("corpus packed", "sequences", stats.Sequences, "tokens", stats.Tokens, "held_out_sequences", len(seqs[1]), "took", time.Since(t).Round(time.Millisecond))
	cfg := model.Config{Family: model.BERT, Hidden: r.Hidden, Heads: r.Heads, Layers: r.Layers, Intermediate: r.Intermediate,
		LayerNormEps: 1e-12, HiddenAct: "gelu", HiddenDropout: 0.1, AttentionDropout: 0.1, ClassifierDropout: 0.1,
		VocabSize: vocab.Size(), MaxPositions: r.Seq, TypeVocabSize: 2, PadTokenID: vocab.PadID(), Labels: model.DefaultLabels(2)}
	m, err := model.New(cfg, r.Seed)
	if err != nil {
		return err
	}
	hd, err := mlm.NewHead(m, nn.NewRNG(r.Seed+1))
	if err != nil {
		return err
	}
	st, err := mlm.Train(m, hd, vocab, seqs[0], seqs[1], mlm.Config{Steps: r.Steps, BatchSize: r.Batch, LR: r.LR,
		WeightDecay: r.WeightDecay, WarmupFrac: r.Warmup, ClipNorm: 1, Seed: r.Seed + 2, EvalEvery: *evalEvery, Logger: log})
	if err != nil {
		return err
	}
	if err := mlm.Save(*out, m, hd, tok, dt); err != nil {
		return err
	}
	rep := &report{Command: commandLine(args), Recipe: r, Corpus: stats, Params: nParams(m, hd), Curve: st.Curve,
		Seconds: time.Since(start).Seconds(), CPUs: runtime.GOMAXPROCS(0)}
	if err := finish(*out, rep, pc, log); err != nil {
		return err
	}
	log.Info("checkpoint written", "dir", *out, "took", time.Since(start).Round(time.Second))
	return nil
}

// report is what curve.json holds and the model card says.
type report struct {
	Command string      `json:"command"`
	Recipe  recipe      `json:"recipe"`
	Corpus  corpusStats `json:"corpus"`
	Params  int         `json:"params"`
	Seconds float64     `json:"seconds"`
	CPUs    int         `json:"cpus"`
	Curve   []mlm.Point `json:"curve"`
	Probe   *probe      `json:"probe,omitempty"`
}

// corpusStats describes the corpus as the run used it.
type corpusStats struct {
	Paragraphs int `json:"paragraphs"`
	Bytes      int `json:"bytes"`
	HeldOut    int `json:"held_out"`
	Sequences  int `json:"sequences"`
	Tokens     int `json:"tokens"`
}

// finish runs the probe (when asked) and writes curve.json and the model
// card README.md into dir.
func finish(dir string, rep *report, pc probeConfig, log *slog.Logger) error {
	if pc.train > 0 {
		p, err := runProbeTask(dir, pc, rep.Recipe.Seed, log)
		if err != nil {
			return err
		}
		rep.Probe = p
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "curve.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "README.md"), []byte(modelCard(rep)), 0o644)
}

// rewriteCard is -card: it reads dir's curve.json, counts the corpus again
// with dir's tokenizer (runs before the counts were recorded have none),
// runs the probe and rewrites curve.json and README.md; the weights are
// not touched.
func rewriteCard(dir string, pc probeConfig, log *slog.Logger) error {
	b, err := os.ReadFile(filepath.Join(dir, "curve.json"))
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s/curve.json: %w", dir, err)
	}
	if rep.Corpus.Sequences == 0 {
		_, tok, err := mlm.Load(dir, nil, 1)
		if err != nil {
			return err
		}
		paras, err := dataset.LoadGCIDE(rep.Recipe.Corpus)
		if err != nil {
			return err
		}
		if sum, err := fileSHA256(rep.Recipe.Corpus); err != nil || sum != rep.Recipe.CorpusSHA256 {
			return fmt.Errorf("corpus %s: sha256 %s (%v), the run's %s", rep.Recipe.Corpus, sum, err, rep.Recipe.CorpusSHA256)
		}
		if rep.Corpus, _, err = countCorpus(tok, paras, rep.Recipe); err != nil {
			return err
		}
	}
	if rep.Params == 0 {
		if rep.Params, err = checkpointParams(dir); err != nil {
			return err
		}
	}
	if rep.Seconds == 0 && len(rep.Curve) > 0 {
		rep.Seconds = rep.Curve[len(rep.Curve)-1].Seconds
	}
	return finish(dir, &rep, pc, log)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// splitCorpus holds out every every-th paragraph.
func splitCorpus(paras []string, every int) (train, held []string) {
	for i, p := range paras {
		if i%every == every-1 {
			held = append(held, p)
		} else {
			train = append(train, p)
		}
	}
	return train, held
}

// maxHeldOut bounds the held-out sequences scored at every point of the
// curve.
const maxHeldOut = 128

// countCorpus splits and packs the corpus as the recipe does: the training
// and held-out sequences, and their counts.
func countCorpus(tok *wordpiece.Tokenizer, paras []string, r recipe) (corpusStats, [2][][]int, error) {
	var st corpusStats
	var seqs [2][][]int
	train, held := splitCorpus(paras, r.HoldoutEvery)
	var err error
	if seqs[0], err = mlm.Pack(tok, train, r.Seq); err != nil {
		return st, seqs, err
	}
	if seqs[1], err = mlm.Pack(tok, held, r.Seq); err != nil {
		return st, seqs, err
	}
	seqs[1] = seqs[1][:min(len(seqs[1]), maxHeldOut)]
	st = corpusStats{Paragraphs: len(paras), HeldOut: len(held), Sequences: len(seqs[0])}
	for _, p := range paras {
		st.Bytes += len(p)
	}
	for _, s := range seqs[0] {
		for _, id := range s {
			if id != tok.Vocab().PadID() {
				st.Tokens++
			}
		}
	}
	return st, seqs, nil
}

// checkpointParams counts the parameters of dir's model.safetensors.
func checkpointParams(dir string) (int, error) {
	f, err := safetensors.ReadFile(filepath.Join(dir, model.WeightsFile))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, t := range f.Tensors {
		n += t.NumElements()
	}
	return n, nil
}

// nParams counts the checkpoint's parameters (the tied decoder once).
func nParams(m *model.Model, hd *mlm.Head) int {
	skip := map[*nn.Param]bool{}
	for _, p := range m.HeadParams() {
		skip[p] = true
	}
	n := 0
	for _, p := range append(m.Params(), hd.Params()...) {
		if !skip[p] {
			n += p.Value.Len()
		}
	}
	return n
}

// probe is the checkpoint's score on a probe task: WordNet noun
// supersenses of the bundled subset, the checkpoint fine-tuned with its
// embeddings frozen (as a selection's target is: the data owner embeds
// with the public tables) and whole, against the same architecture
// trained from scratch on the same texts.
type probe struct {
	Task       string  `json:"task"`
	Train      int     `json:"train"`
	Test       int     `json:"test"`
	Seq        int     `json:"seq"`
	Epochs     int     `json:"epochs"`
	Frozen     float64 `json:"pretrained_frozen_accuracy"`
	Pretrained float64 `json:"pretrained_accuracy"`
	Scratch    float64 `json:"scratch_accuracy"`
}

// probeSeq is the tokens a probe definition (at most the checkpoint's
// positions); probeLR the fine-tuning's peak learning rate.
const (
	probeSeq = 32
	probeLR  = 3e-3
)

// probeConfig sizes the probe: definitions to fine-tune on and to test,
// epochs (0 train: no probe).
type probeConfig struct{ train, test, epochs int }

// runProbeTask fine-tunes dir's checkpoint with its embeddings frozen and
// whole, and the same architecture from a random initialisation, the same
// way, on pc.train definitions of the bundled WordNet subset's ten
// supersenses, and tests the three on pc.test others.
func runProbeTask(dir string, pc probeConfig, seed uint64, log *slog.Logger) (*probe, error) {
	if pc.train < 1 || pc.test < 1 || pc.epochs < 1 || pc.train+pc.test > 3000 {
		return nil, fmt.Errorf("probe: %d definitions to fine-tune on, %d to test, %d epochs: want positive, at most 3000 definitions", pc.train, pc.test, pc.epochs)
	}
	all, err := dataset.WordNetSubset()
	if err != nil {
		return nil, err
	}
	set, err := dataset.Supersenses(all, dataset.WordNetSubsetClasses)
	if err != nil {
		return nil, err
	}
	perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(seed))
	train, err := set.Subset(perm[:pc.train])
	if err != nil {
		return nil, err
	}
	test, err := set.Subset(perm[pc.train : pc.train+pc.test])
	if err != nil {
		return nil, err
	}
	frozen, tok, err := mlm.Load(dir, set.ClassNames, seed)
	if err != nil {
		return nil, err
	}
	pre, _, err := mlm.Load(dir, set.ClassNames, seed)
	if err != nil {
		return nil, err
	}
	scratch, err := model.New(pre.Config, seed)
	if err != nil {
		return nil, err
	}
	seq := min(probeSeq, pre.Config.MaxPositions)
	inTrain, err := model.EncodeTexts(tok, train.Texts, seq)
	if err != nil {
		return nil, err
	}
	inTest, err := model.EncodeTexts(tok, test.Texts, seq)
	if err != nil {
		return nil, err
	}
	p := &probe{Task: fmt.Sprintf("WordNet noun supersense of a definition, %d classes (%s), bundled subset", len(set.ClassNames), strings.Join(set.ClassNames, ", ")),
		Train: train.Len(), Test: test.Len(), Seq: seq, Epochs: pc.epochs}
	for _, c := range []struct {
		m      *model.Model
		freeze bool
		acc    *float64
	}{{frozen, true, &p.Frozen}, {pre, false, &p.Pretrained}, {scratch, false, &p.Scratch}} {
		if _, err := model.Train(c.m, inTrain, train.Labels, model.TrainConfig{Epochs: pc.epochs, BatchSize: 16, LR: probeLR, WeightDecay: 0.01,
			WarmupFrac: 0.1, ClipNorm: 1, Seed: seed, FreezeEmbeddings: c.freeze}); err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		mt, err := model.Evaluate(c.m, inTest, test.Labels, 256)
		if err != nil {
			return nil, fmt.Errorf("probe: %w", err)
		}
		*c.acc = mt.Accuracy
	}
	log.Info("probe", "pretrained_frozen_accuracy", p.Frozen, "pretrained_accuracy", p.Pretrained, "scratch_accuracy", p.Scratch)
	return p, nil
}

// commandLine is the command as the model card shows it.
func commandLine(args []string) string {
	return strings.TrimSpace("go run ./bench/cmd/pretrain " + strings.Join(args, " "))
}

// modelCard is the checkpoint's README.md: what it is, how it was made,
// its loss curve and probe score.
func modelCard(rep *report) string {
	var b strings.Builder
	r, c := rep.Recipe, rep.Corpus
	last := rep.Curve[len(rep.Curve)-1]
	fmt.Fprintf(&b, "# A small BERT pretrained on GCIDE\n\n")
	fmt.Fprintf(&b, "A BERT encoder (%d layers, hidden %d, %d heads, FFN %d, %d positions) with a WordPiece vocabulary of %d tokens, "+
		"pretrained by masked language modelling (BERT's 15%% masking, 80/10/10) with the project's own engine (`nn/mlm`): "+
		"%d parameters (the decoder tied to the word embeddings), stored as %s. It is a Hugging Face `BertForMaskedLM` "+
		"directory: `mlm.Load(dir, classes, seed)` or `model.Load(dir, model.LoadOptions{NewHead: true})` read it as a "+
		"classifier to fine-tune; `tokenizer.json` and `vocab.txt` are its tokenizer (uncased). The weights and the "+
		"vocabulary are derived from GCIDE and distributed under its licence, the GPL (version 2 or later).\n\n",
		r.Layers, r.Hidden, r.Heads, r.Intermediate, r.Seq, r.Vocab, rep.Params, r.DType)
	fmt.Fprintf(&b, "## Recipe\n\n`%s` (deterministic: the same corpus file and flags give the same weights and vocabulary), "+
		"%s on %d CPUs shared with other jobs.\n\n", rep.Command, (time.Duration(rep.Seconds) * time.Second).String(), rep.CPUs)
	fmt.Fprintf(&b, "- Corpus: the GNU Collaborative International Dictionary of English (GPL-2+), `%s` of the Debian package "+
		"`dict-gcide` (sha256 %s): %d paragraphs, %.1f MB of text once dictd's markup is removed "+
		"(`dataset.LoadGCIDE`; entries taken from WordNet are left out); every %d-th paragraph held out (%d).\n",
		r.Corpus, r.CorpusSHA256, c.Paragraphs, float64(c.Bytes)/1e6, r.HoldoutEvery, c.HeldOut)
	fmt.Fprintf(&b, "- Vocabulary: `wordpiece.BuildVocab` on the training paragraphs, %d tokens.\n", r.Vocab)
	fmt.Fprintf(&b, "- Training: %d sequences of %d tokens (%d tokens of text, packed without padding), %d steps of %d sequences (%.2f epochs), "+
		"AdamW lr %g (warm-up %g of the steps, then linear decay to 0), weight decay %g, gradient norm clipped to 1, no dropout, seed %d.\n\n",
		c.Sequences, r.Seq, c.Tokens, r.Steps, r.Batch, float64(r.Steps*r.Batch)/float64(max(c.Sequences, 1)), r.LR, r.Warmup, r.WeightDecay, r.Seed)
	fmt.Fprintf(&b, "## Loss curve\n\nMasked-token cross-entropy (nats; uniform over the vocabulary would be %.2f) and top-1 accuracy "+
		"of the masked tokens of %d held-out sequences (the same masks at every point); the training loss is the mean since the previous point.\n\n",
		math.Log(float64(r.Vocab)), maxHeldOut)
	b.WriteString("| step | training loss | held-out loss | held-out accuracy | time |\n|---|---|---|---|---|\n")
	for _, p := range rep.Curve {
		tl := "—"
		if p.Step > 0 {
			tl = fmt.Sprintf("%.3f", p.TrainLoss)
		}
		fmt.Fprintf(&b, "| %d | %s | %.3f | %.1f%% | %v |\n", p.Step, tl, p.EvalLoss, 100*p.EvalAccuracy, time.Duration(p.Seconds*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(&b, "\nFinal held-out loss %.3f, accuracy %.1f%%.\n", last.EvalLoss, 100*last.EvalAccuracy)
	if p := rep.Probe; p != nil {
		fmt.Fprintf(&b, "\n## Probe\n\n%s: fine-tuned on %d definitions (%d epochs, AdamW lr %g with warm-up and decay, "+
			"batches of 16, %d tokens a definition) and tested on %d others. With its embeddings frozen, as the target of a selection "+
			"is (the data owner embeds its texts with this checkpoint's tables): **%.1f%%** test accuracy; every weight fine-tuned: "+
			"**%.1f%%**; the same architecture and tokenizer trained the same way from a random initialisation: %.1f%% (chance: 10%%).\n",
			p.Task, p.Train, p.Epochs, probeLR, p.Seq, p.Test, 100*p.Frozen, 100*p.Pretrained, 100*p.Scratch)
	}
	return b.String()
}

// Command pretrain makes the project's small pretrained text transformer: a
// BERT encoder pretrained by masked language modelling (nn/mlm) on the GNU
// Collaborative International Dictionary of English, which the Debian
// package dict-gcide installs, with a WordPiece vocabulary built from the
// same text (wordpiece.BuildVocab), saved as a Hugging Face
// BertForMaskedLM directory (config.json, model.safetensors, tokenizer.json,
// vocab.txt) with a model card (README.md: recipe, corpus digest, loss
// curve) and the curve as curve.json.
//
//	apt-get install dict-gcide
//	go run ./bench/cmd/pretrain -out examples/pretrained/gcide-bert-mini
//
// The defaults are the committed checkpoint's recipe; the run is
// deterministic (the same corpus file and flags give the same bytes).
// -docs and -steps shrink it for a quick look.
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
	fs.IntVar(&r.Intermediate, "intermediate", 0, "FFN width (0: 4 × hidden)")
	fs.IntVar(&r.Seq, "seq", 64, "tokens a pretraining sequence (and the checkpoint's max_position_embeddings)")
	fs.IntVar(&r.Steps, "steps", 6000, "optimiser steps")
	fs.IntVar(&r.Batch, "batch", 32, "sequences a step")
	fs.Float64Var(&r.LR, "lr", 1e-3, "AdamW's peak learning rate")
	fs.Float64Var(&r.Warmup, "warmup", 0.05, "fraction of the steps warming up")
	fs.Float64Var(&r.WeightDecay, "weight-decay", 0.01, "AdamW's decoupled weight decay")
	fs.Uint64Var(&r.Seed, "seed", 1, "seed of the initialisation, sequence order and masking")
	fs.StringVar(&r.DType, "dtype", "F16", "tensor dtype of model.safetensors: F16, BF16, F32 or F64")
	evalEvery := fs.Int("eval-every", 0, "steps between two points of the loss curve (0: steps/20)")
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
	if r.Intermediate == 0 {
		r.Intermediate = 4 * r.Hidden
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
	var train, held []string
	bytes := 0
	for i, p := range paras {
		bytes += len(p)
		if i%r.HoldoutEvery == r.HoldoutEvery-1 {
			held = append(held, p)
		} else {
			train = append(train, p)
		}
	}
	log.Info("corpus read", "paragraphs", len(paras), "bytes", bytes, "held_out", len(held), "took", time.Since(start).Round(time.Millisecond))
	t := time.Now()
	vocab, err := wordpiece.BuildVocab(train, r.Vocab)
	if err != nil {
		return err
	}
	tok := wordpiece.NewTokenizer(vocab, true)
	log.Info("vocabulary built", "tokens", vocab.Size(), "took", time.Since(t).Round(time.Millisecond))
	t = time.Now()
	trainSeqs, err := mlm.Pack(tok, train, r.Seq)
	if err != nil {
		return err
	}
	heldSeqs, err := mlm.Pack(tok, held, r.Seq)
	if err != nil {
		return err
	}
	heldSeqs = heldSeqs[:min(len(heldSeqs), 128)]
	tokens := 0
	for _, s := range trainSeqs {
		for _, id := range s {
			if id != vocab.PadID() {
				tokens++
			}
		}
	}
	log.Info("corpus packed", "sequences", len(trainSeqs), "tokens", tokens, "held_out_sequences", len(heldSeqs), "took", time.Since(t).Round(time.Millisecond))
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
	st, err := mlm.Train(m, hd, vocab, trainSeqs, heldSeqs, mlm.Config{Steps: r.Steps, BatchSize: r.Batch, LR: r.LR,
		WeightDecay: r.WeightDecay, WarmupFrac: r.Warmup, ClipNorm: 1, Seed: r.Seed + 2, EvalEvery: *evalEvery, Logger: log})
	if err != nil {
		return err
	}
	if err := mlm.Save(*out, m, hd, tok, dt); err != nil {
		return err
	}
	curve, err := json.MarshalIndent(map[string]any{"recipe": r, "curve": st.Curve}, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(*out, "curve.json"), append(curve, '\n'), 0o644); err != nil {
		return err
	}
	card := modelCard(r, args, len(paras), bytes, len(trainSeqs), tokens, st, time.Since(start), nParams(m, hd))
	if err := atomicfile.Write(filepath.Join(*out, "README.md"), []byte(card), 0o644); err != nil {
		return err
	}
	log.Info("checkpoint written", "dir", *out, "took", time.Since(start).Round(time.Second))
	return nil
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

// modelCard is the checkpoint's README.md: what it is, how it was made,
// its loss curve.
func modelCard(r recipe, args []string, paras, bytes, seqs, tokens int, st mlm.Stats, took time.Duration, params int) string {
	var b strings.Builder
	last := st.Curve[len(st.Curve)-1]
	fmt.Fprintf(&b, "# A small BERT pretrained on GCIDE\n\n")
	fmt.Fprintf(&b, "A BERT encoder (%d layers, hidden %d, %d heads, FFN %d, %d positions) with a WordPiece vocabulary of %d tokens, "+
		"pretrained by masked language modelling (BERT's 15%% masking, 80/10/10) with the project's own engine (`nn/mlm`), "+
		"%d parameters (the decoder tied to the word embeddings), stored as %s. It is a Hugging Face `BertForMaskedLM` "+
		"directory: `model.Load(dir, model.LoadOptions{NewHead: true})` or `mlm.Load(dir, classes, seed)` read it as a "+
		"classifier to fine-tune; `tokenizer.json` and `vocab.txt` are its tokenizer (uncased).\n\n",
		r.Layers, r.Hidden, r.Heads, r.Intermediate, r.Seq, r.Vocab, params, r.DType)
	fmt.Fprintf(&b, "## Recipe\n\n`go run ./bench/cmd/pretrain %s` (deterministic: the same corpus file and flags give the same bytes), %s on %d CPUs.\n\n",
		strings.Join(args, " "), took.Round(time.Second), runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "- Corpus: the GNU Collaborative International Dictionary of English (GPL-2+), `%s` of the Debian package "+
		"`dict-gcide` (sha256 %s): %d paragraphs, %.1f MB of text once dictd's markup is removed "+
		"(`dataset.LoadGCIDE`; entries taken from WordNet are left out); every %d-th paragraph held out.\n",
		r.Corpus, r.CorpusSHA256, paras, float64(bytes)/1e6, r.HoldoutEvery)
	fmt.Fprintf(&b, "- Training: %d sequences of %d tokens (%d tokens of text), %d steps of %d sequences (%.2f epochs), AdamW lr %g "+
		"(warm-up %g of the steps, then linear decay), weight decay %g, gradient norm clipped to 1, no dropout, seed %d.\n\n",
		seqs, r.Seq, tokens, r.Steps, r.Batch, float64(r.Steps*r.Batch)/float64(seqs), r.LR, r.Warmup, r.WeightDecay, r.Seed)
	fmt.Fprintf(&b, "## Loss curve\n\nMasked-token cross-entropy (nats; uniform over the vocabulary would be %.2f) and the held-out "+
		"top-1 accuracy of the masked tokens; the training loss is the mean since the previous point.\n\n", math.Log(float64(r.Vocab)))
	b.WriteString("| step | training loss | held-out loss | held-out accuracy | time |\n|---|---|---|---|---|\n")
	for _, p := range st.Curve {
		tl := "—"
		if p.Step > 0 {
			tl = fmt.Sprintf("%.3f", p.TrainLoss)
		}
		fmt.Fprintf(&b, "| %d | %s | %.3f | %.1f%% | %v |\n", p.Step, tl, p.EvalLoss, 100*p.EvalAccuracy, time.Duration(p.Seconds*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(&b, "\nFinal held-out loss %.3f, accuracy %.1f%%.\n", last.EvalLoss, 100*last.EvalAccuracy)
	return b.String()
}

package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
)

// TestQuickstartSmall runs the quickstart end to end on a small pool (the
// full default run takes about 12 s and is what the README shows).
func TestQuickstartSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a selection; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Whatever logs through slog.Default writes a second format on the same
	// stream: catch it.
	var foreign bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&foreign, nil)))
	defer slog.SetDefault(prev)
	var out, errb bytes.Buffer
	code := run(ctx, []string{"-pool", "120", "-budget", "40", "-bootstrap", "20", "-schedule", "1:2:4@0.5,2:2:8",
		"-epochs", "2", "-mlp-points", "4000", "-public", "40", "-mixes", "200", "-log", "info"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errb)
	}
	t.Logf("\n%s", &out)
	checkOneLogAndEarlyProgress(t, errb.String(), foreign.String())
	// The library's default generation, distilled on -public digits with
	// the quickstart's lighter setting.
	if want := "distilling the adapted target on the bootstrap, the model owner's public inputs and mixes of them\" bootstrap=20 public=40 mixes=200"; !strings.Contains(errb.String(), want) {
		t.Errorf("log lacks %q", want)
	}
	for _, want := range []string{"pool: 120 unlabeled digits", "budget: 40 points = bootstrap 20", "phases: proxy <l=1, w=2, d=4> keep 50%",
		"selected 20 of 100 candidates", "\n1        100->50 ", "\n2         50->20 ", "  selected  0:", "  random    0:", "appraisal: mean"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// checkOneLogAndEarlyProgress checks the quickstart's stderr (not a
// terminal, -log info): one log format — every line a record of its own
// text handler, nothing through slog.Default (foreign) — and progress from
// the first second: a step line for the pretraining, then steps up to the
// first phase, which shows as it starts (issue 30: 13 s of pretraining
// showed nothing, the bar appeared once a phase was done, and the dealer's
// log had another format).
func checkOneLogAndEarlyProgress(t *testing.T, stderr, foreign string) {
	t.Helper()
	if foreign != "" {
		t.Errorf("records logged through slog.Default, in a second format:\n%s", foreign)
	}
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "time=") || !strings.Contains(l, " level=") || !strings.Contains(l, " msg=") {
			t.Errorf("stderr line not of the quickstart's log format: %q", l)
		}
	}
	pretrain := strings.Index(stderr, `msg=step step="pretraining the public checkpoint (2 epochs)"`)
	generate := strings.Index(stderr, `msg=step step="generating the proxies: `)
	start := strings.Index(stderr, "msg=progress phase=1/2 batches=0/")
	first := strings.Index(stderr, "msg=progress phase=1/2")
	if pretrain < 0 || generate < 0 || start < 0 || !(pretrain < generate && generate < start && start == first) {
		t.Errorf("want the pretraining step, then proxy generation steps, then phase 1 at 0 batches first; stderr:\n%s", stderr)
	}
}

func TestQuickstartFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-pool", "1"}, peer.ExitUsage, "-pool"},
		{[]string{"-budget", "700"}, peer.ExitUsage, "budget"},
		{[]string{"-link", "moon"}, peer.ExitUsage, "-link"},
		{[]string{"extra"}, peer.ExitUsage, "unexpected argument"},
		{[]string{"-text"}, peer.ExitUsage, "-text needs -export"},
		{[]string{"-public", "1501"}, peer.ExitUsage, "-public 1501 outside [0, 1500]"},
		{[]string{"-public", "-1"}, peer.ExitUsage, "-public -1 outside"},
		{[]string{"-mixes", "-2"}, peer.ExitUsage, "-mixes -2"},
		{[]string{"-text", "-export", "x", "-pool", "1300"}, peer.ExitUsage, "at most 1200 mails"},
		{[]string{"-wordnet"}, peer.ExitUsage, "-wordnet needs -export"},
		{[]string{"-wordnet", "-text", "-export", "x"}, peer.ExitUsage, "-wordnet needs -export and not -text"},
		{[]string{"-wordnet", "-export", "x", "-pool", "2600"}, peer.ExitUsage, "at most 2500 definitions"},
		{[]string{"-h"}, peer.ExitOK, "-export"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, &errb, tc.code, tc.msg)
		}
	}
}

func TestQuickstartExport(t *testing.T) {
	if testing.Short() {
		t.Skip("pretrains a model; skipped with -short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-export", dir, "-epochs", "1", "-pool", "100", "-budget", "30", "-bootstrap", "10"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, &errb)
	}
	for _, f := range []string{"pool.sfimg.gz", "labels.txt", "checkpoint/config.json", "checkpoint/model.safetensors", "dealer.crt", "modelowner.key", "dataowner.crt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	for _, want := range []string{"./examples/dealer ", "./examples/modelowner ", "./examples/dataowner ", "-pool-size 100"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export output lacks %q:\n%s", want, &out)
		}
	}
}

// TestQuickstartExportText: -export -text writes a text pool, labels by
// class name and a BERT checkpoint directory with its vocab.txt, and prints
// commands that pass -seq to the data owner.
func TestQuickstartExportText(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a model; skipped with -short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-export", dir, "-text", "-epochs", "1", "-pool", "60", "-budget", "16", "-bootstrap", "8"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, &errb)
	}
	for _, f := range []string{"pool.jsonl.gz", "labels.txt", "checkpoint/config.json", "checkpoint/model.safetensors", "checkpoint/vocab.txt", "dealer.crt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	labels, err := os.ReadFile(filepath.Join(dir, "labels.txt"))
	if err != nil || !strings.HasPrefix(string(labels), "ham\n") && !strings.HasPrefix(string(labels), "spam\n") {
		t.Errorf("labels.txt starts %.20q (%v), want a class name", labels, err)
	}
	for _, want := range []string{"-pool-size 60", "-pool " + dir + "/pool.jsonl.gz", "-seq 16 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export output lacks %q:\n%s", want, &out)
		}
	}
}

// TestQuickstartExportWordNet: -export -wordnet writes the pretrained text
// demo (a CSV of texts, the public pretrained checkpoint, the fine-tuned
// target with its tokenizer.json, the labeller script and its answers) and
// prints the commands of a text selection from start to end: mkpool from
// the CSV, the model owner labelling through -label-cmd, the data owner
// embedding with the pretrained checkpoint.
func TestQuickstartExportWordNet(t *testing.T) {
	if testing.Short() {
		t.Skip("fine-tunes a model; skipped with -short")
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-export", dir, "-wordnet", "-epochs", "1", "-pool", "60", "-budget", "16", "-bootstrap", "8"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, &errb)
	}
	for _, f := range []string{"texts.csv", "answers.txt", "label.sh", "public.jsonl.gz", "gcide-bert-mini/config.json", "gcide-bert-mini/model.safetensors",
		"gcide-bert-mini/tokenizer.json", "target/config.json", "target/model.safetensors", "target/tokenizer.json", "dealer.crt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	answers, err := os.ReadFile(filepath.Join(dir, "answers.txt"))
	if n := strings.Count(string(answers), "\n"); err != nil || n != 60 {
		t.Errorf("answers.txt: %d lines (%v), want 60", n, err)
	}
	for _, want := range []string{"./examples/mkpool texts -csv " + dir + "/texts.csv -column text -out " + dir + "/pool.jsonl.gz",
		"-label-cmd 'sh " + dir + "/label.sh'", "-model " + dir + "/target ", "-pool-size 60", "-embedding " + dir + "/gcide-bert-mini -seq 32 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("export output lacks %q:\n%s", want, &out)
		}
	}
}

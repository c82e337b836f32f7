package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
		{[]string{"-wordnet", "-export", "x", "-public", "5"}, peer.ExitUsage, "-public 5 with -wordnet: want at least 10"},
		{[]string{"-wordnet", "-export", "x", "-public", "1000", "-pool", "2500"}, peer.ExitUsage, "at most 3000 with the pool's 2500"},
		{[]string{"-h"}, peer.ExitOK, "-export"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, &errb, tc.code, tc.msg)
		}
	}
}

// TestQuickstartExport: -export writes each demo as two organisations hold
// it (the data owner's own files for mkpool, the public checkpoint, the
// model owner's target and labelling script with its answers, the
// identities) and prints the two organisations' commands with no dealer
// (mkpool, then modelowner and dataowner with -provider he, the model owner
// labelling with -label-cmd), then the same with a dealer (issue 39).
// examples' TestExportedCommandsParse runs the printed commands' flags
// through the binaries, TestPretrainedTextProcesses runs the -wordnet
// selection.
func TestQuickstartExport(t *testing.T) {
	if testing.Short() {
		t.Skip("trains models; skipped with -short")
	}
	for _, tc := range []struct {
		name    string
		args    []string
		files   []string
		answer  string   // answers.txt's first line is one of these
		printed []string // besides the commands every export prints; DIR is the directory
	}{
		{"mnist", nil, []string{"images/00.png", "images/99.png", "checkpoint/config.json", "checkpoint/model.safetensors"}, "0 1 2 3 4 5 6 7 8 9",
			[]string{"go run ./examples/mkpool images -dir DIR/images -embedding DIR/checkpoint -out DIR/pool.sfimg.gz\n",
				"-pool DIR/pool.sfimg.gz -embedding DIR/checkpoint -budget 30 "}},
		{"text", []string{"-text"}, []string{"texts.csv", "checkpoint/config.json", "checkpoint/model.safetensors", "checkpoint/vocab.txt"}, "ham spam",
			[]string{"go run ./examples/mkpool texts -csv DIR/texts.csv -column text -out DIR/pool.jsonl.gz\n",
				"-pool DIR/pool.jsonl.gz -embedding DIR/checkpoint -seq 16 -budget 30 "}},
		{"wordnet", []string{"-wordnet"}, []string{"texts.csv", "public.jsonl.gz", "gcide-bert-mini/config.json", "gcide-bert-mini/model.safetensors",
			"gcide-bert-mini/tokenizer.json", "target/config.json", "target/model.safetensors", "target/tokenizer.json"},
			"artifact person plant animal location substance food body object quantity",
			[]string{"go run ./examples/mkpool texts -csv DIR/texts.csv -column text -out DIR/pool.jsonl.gz\n",
				"-model DIR/target -label-cmd 'sh DIR/label.sh' -pool-size 100 -public DIR/public.jsonl.gz -public-seq 32 ",
				"-pool DIR/pool.jsonl.gz -embedding DIR/gcide-bert-mini -seq 32 -budget 30 "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var out, errb bytes.Buffer
			if code := run(context.Background(), append(tc.args, "-export", dir, "-epochs", "1", "-pool", "100", "-budget", "30", "-bootstrap", "10"), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, &errb)
			}
			for _, f := range append(tc.files, "label.sh", "answers.txt", "dealer.crt", "modelowner.key", "dataowner.crt") {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			answers, err := os.ReadFile(filepath.Join(dir, "answers.txt"))
			lines := strings.Split(strings.TrimSuffix(string(answers), "\n"), "\n")
			if err != nil || len(lines) != 100 || !slices.Contains(strings.Fields(tc.answer), lines[0]) {
				t.Errorf("answers.txt: %d lines starting %q (%v); want 100, one of %q", len(lines), lines[0], err, tc.answer)
			}
			checkPrinted(t, out.String(), dir, tc.printed)
		})
	}
}

// checkPrinted checks an export's printout: six commands, mkpool first,
// the two organisations' pair with -provider he and no dealer, then the
// dealer, the model owner and the data owner; both model owners label
// through -label-cmd and name the pool size, and the lines contain the
// demo's own wants (DIR standing for dir).
func checkPrinted(t *testing.T, out, dir string, wants []string) {
	t.Helper()
	var cmds []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "go run ") {
			cmds = append(cmds, l)
		}
	}
	prefixes := []string{"go run ./examples/mkpool ", "go run ./examples/modelowner ", "go run ./examples/dataowner ",
		"go run ./examples/dealer ", "go run ./examples/modelowner ", "go run ./examples/dataowner "}
	if len(cmds) != len(prefixes) {
		t.Fatalf("%d commands printed, want %d:\n%s", len(cmds), len(prefixes), out)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(cmds[i], p) {
			t.Errorf("command %d is %q, want %q...", i+1, cmds[i], p)
		}
	}
	for i, c := range cmds[1:3] {
		if !strings.Contains(c, " -provider he ") || strings.Contains(c, "-dealer") {
			t.Errorf("two organisations' command %d lacks -provider he or names a dealer: %s", i+2, c)
		}
	}
	for i, c := range cmds[4:] {
		if !strings.Contains(c, " -dealer 127.0.0.1:710") || strings.Contains(c, "-provider") {
			t.Errorf("dealer variant's command %d: %s", i+5, c)
		}
	}
	for _, c := range []string{cmds[1], cmds[4]} {
		if !strings.Contains(c, " -label-cmd 'sh "+dir+"/label.sh' ") || !strings.Contains(c, " -pool-size 100 ") || strings.Contains(c, "-labels") {
			t.Errorf("model owner's command does not label with -label-cmd 'sh %s/label.sh' for a pool of 100: %s", dir, c)
		}
	}
	for _, w := range wants {
		if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(out, w) {
			t.Errorf("export output lacks %q:\n%s", w, out)
		}
	}
}

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/mlm"
	"github.com/selectformer/selectformer/nn/model"
)

// fixtureCorpus writes a small dictd file in GCIDE's layout.
func fixtureCorpus(t *testing.T) string {
	t.Helper()
	animals := []string{"cat", "dog", "horse", "sparrow", "trout", "beetle"}
	things := []string{"hammer", "chair", "lamp", "wagon", "kettle", "rope"}
	var b strings.Builder
	for i := range 120 {
		a, th := animals[i%len(animals)], things[(i/2)%len(things)]
		fmt.Fprintf(&b, "Word%d \\Word%d\\, n.\n   1. (Zool.) A small %s that lives near the %s.\n      [1913 Webster]\n\n", i, i, a, th)
		fmt.Fprintf(&b, "   2. A %s used to move the %s.\n      [1913 Webster]\n\n", th, a)
	}
	p := filepath.Join(t.TempDir(), "gcide.dict")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPretrainReproducible runs the command twice with the same corpus and
// flags: the checkpoints are the same bytes, read back as a classifier to
// fine-tune, with a model card holding the recipe and the loss curve.
func TestPretrainReproducible(t *testing.T) {
	corpus := fixtureCorpus(t)
	var dirs [2]string
	for i := range dirs {
		dirs[i] = t.TempDir()
		args := []string{"-corpus", corpus, "-out", dirs[i], "-steps", "6", "-vocab", "90", "-hidden", "16", "-heads", "2",
			"-seq", "16", "-batch", "4", "-holdout-every", "10", "-eval-every", "3", "-log", "warn", "-probe-train", "0"}
		if err := run(args, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{model.ConfigFile, model.WeightsFile, mlm.TokenizerFile, mlm.VocabFile} {
		a, err := os.ReadFile(filepath.Join(dirs[0], f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dirs[1], f))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s differs between two runs (%v)", f, err)
		}
	}
	m, tok, err := mlm.Load(dirs[0], []string{"x", "y"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.Hidden != 16 || m.Config.MaxPositions != 16 || tok.Vocab().Size() != m.Config.VocabSize {
		t.Fatalf("config %+v, vocabulary %d", m.Config, tok.Vocab().Size())
	}
	card, err := os.ReadFile(filepath.Join(dirs[0], "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-steps 6", "| 0 | — |", "| 3 |", "| 6 |", "held-out", "sha256"} {
		if !strings.Contains(string(card), want) {
			t.Errorf("the model card lacks %q:\n%s", want, card)
		}
	}
	// -card rewrites the card with the probe, the weights untouched.
	before, _ := os.ReadFile(filepath.Join(dirs[0], model.WeightsFile))
	if err := run([]string{"-out", dirs[0], "-card", "-probe-train", "100", "-probe-test", "100", "-probe-epochs", "1", "-log", "warn"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dirs[0], model.WeightsFile))
	card, _ = os.ReadFile(filepath.Join(dirs[0], "README.md"))
	if !bytes.Equal(before, after) || !strings.Contains(string(card), "## Probe") || !strings.Contains(string(card), "from a random initialisation") || !strings.Contains(string(card), "embeddings frozen") {
		t.Errorf("-card: weights unchanged %v; card:\n%s", bytes.Equal(before, after), card)
	}
	if err := run([]string{"-corpus", corpus}, io.Discard); err == nil {
		t.Error("no -out was accepted")
	}
	if err := run([]string{"-corpus", filepath.Join(t.TempDir(), "none"), "-out", t.TempDir()}, io.Discard); err == nil || !strings.Contains(err.Error(), "dict-gcide") {
		t.Errorf("a missing corpus: %v (want the package named)", err)
	}
}

package examples_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/pretrained"
	"github.com/selectformer/selectformer/nn/model"
)

// TestPretrainedTextProcesses is the pretrained text selection of the
// quickstart's -export -wordnet, end to end as OS processes: the data owner
// builds its pool from a CSV of texts with mkpool and embeds it with the
// committed pretrained checkpoint (a BertForMaskedLM directory, no
// classifier: before it the data owner refused it, "missing tensor
// bert.pooler.dense.weight"); the model owner selects with that checkpoint
// fine-tuned on its labelled definitions (embeddings frozen: the handshake
// compares their hash) and labels the bootstrap through the demo's
// -label-cmd script; both output the same selection.
func TestPretrainedTextProcesses(t *testing.T) {
	f := getFixture(t)
	const poolSize = 40
	d, err := demo.PrepareWordNet(demo.WordNetConfig{Public: 60, Pool: poolSize, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := d.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	emb, err := model.Load(files.Pretrained, model.LoadOptions{NewHead: true})
	if err != nil {
		t.Fatal(err)
	}
	if h0, _ := model.EmbeddingHash(d.Target); h0 != mustHash(t, emb) {
		t.Fatal("the fine-tuned target's embeddings differ from the pretrained checkpoint's")
	}
	if _, err := model.Load(files.Pretrained, model.LoadOptions{}); err == nil {
		t.Fatal("the pretrained checkpoint has a classifier: it does not test a base checkpoint")
	}
	built := filepath.Join(dir, "pool.jsonl.gz")
	if code, out := mkpool(t, f, "texts", "-csv", files.Texts, "-column", "text", "-out", built); code != 0 || !strings.Contains(out, fmt.Sprintf("%d texts from", poolSize)) {
		t.Fatalf("mkpool texts exited %d:\n%s", code, out)
	}
	const sched = "-budget 16 -bootstrap 8 -schedule 1:2:4@0.5,2:2:4 -batch 8 -workers 2"
	out := t.TempDir()
	dl, a0, a1 := f.dealer(t, "-once")
	args := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-dealer", a0, "-dealer-fingerprint", f.fp["dealer"],
		"-model", files.Target, "-label-cmd", "sh " + shellQuote(files.Labeller),
		"-pool-size", fmt.Sprint(poolSize), "-mlp-points", "2000", "-connect-timeout", "20s", "-log", "info",
		"-out", filepath.Join(out, "mo.json")}, strings.Fields(sched)...)
	mo := f.start(t, "modelowner", args...)
	addr := strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	args = append([]string{"-cert", f.path("do.crt"), "-key", f.path("do.key"), "-connect", addr,
		"-peer-fingerprint", f.fp["mo"], "-dealer", a1, "-dealer-fingerprint", f.path("dealer.crt"),
		"-pool", built, "-embedding", files.Pretrained, "-seq", "16",
		"-connect-timeout", "20s", "-log", "info", "-out", filepath.Join(out, "do.json")}, strings.Fields(sched)...)
	do := f.start(t, "dataowner", args...)
	for _, p := range []*proc{mo, do, dl} {
		if code := p.wait(t, 120*time.Second); code != 0 {
			t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
		}
	}
	if log := mo.stderr.String(); !strings.Contains(log, "bootstrap labelled") {
		t.Errorf("the model owner's log does not show the bootstrap labelled:\n%s", log)
	}
	if log := do.stderr.String(); !strings.Contains(log, "kind=texts candidates=40 checkpoint=bert") {
		t.Errorf("the data owner's log does not show the text pool with the BERT checkpoint:\n%s", log)
	}
	r0, r1 := readResult(t, filepath.Join(out, "mo.json")), readResult(t, filepath.Join(out, "do.json"))
	if !slices.Equal(r0.Selected, r1.Selected) || !slices.Equal(r0.Bootstrap, r1.Bootstrap) || len(r0.Selected) != 8 || len(r0.Bootstrap) != 8 {
		t.Fatalf("selected %v / %v, bootstrap %v / %v: want the same 8 and 8", r0.Selected, r1.Selected, r0.Bootstrap, r1.Bootstrap)
	}
	t.Logf("pretrained text selection (%s): selected %v", pretrained.Name, r0.Selected)
}

func mustHash(t *testing.T, m *model.Model) string {
	t.Helper()
	h, err := model.EmbeddingHash(m)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

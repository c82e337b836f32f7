package examples_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/pretrained"
	"github.com/selectformer/selectformer/nn/model"
)

// exported is what quickstart -export printed: each command's binary and
// arguments (the words after "go run ./examples/"), by role.
type exported struct {
	mkpool                     []string
	modelOwner, dataOwner      []string // two organisations, -provider he
	dealer, dealerMO, dealerDO []string // with a dealer
	all                        [][]string
	stdout                     string
}

// exportDemo runs the quickstart binary (in bin) with -export dir and args
// and returns the commands it printed, checking their shape: mkpool, then
// the two organisations' model owner and data owner with -provider he and
// no dealer, then the dealer variant.
func exportDemo(t *testing.T, bin, dir string, args ...string) exported {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "quickstart"), append([]string{"-export", dir}, args...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("quickstart -export %v: %v\n%s%s", args, err, out, &stderr)
	}
	e := exported{stdout: string(out)}
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "go run ./examples/"); ok {
			e.all = append(e.all, shellFields(t, rest))
		}
	}
	if len(e.all) != 6 {
		t.Fatalf("quickstart -export printed %d commands, want 6:\n%s", len(e.all), out)
	}
	e.mkpool, e.modelOwner, e.dataOwner, e.dealer, e.dealerMO, e.dealerDO = e.all[0], e.all[1], e.all[2], e.all[3], e.all[4], e.all[5]
	for i, name := range []string{"mkpool", "modelowner", "dataowner", "dealer", "modelowner", "dataowner"} {
		if e.all[i][0] != name {
			t.Fatalf("command %d is %s, want %s:\n%s", i+1, e.all[i][0], name, out)
		}
	}
	for _, c := range [][]string{e.modelOwner, e.dataOwner} {
		if flagValue(c, "-provider") != "he" || slices.Contains(c, "-dealer") {
			t.Errorf("two organisations' %s: %q; want -provider he and no -dealer", c[0], c)
		}
	}
	for _, c := range [][]string{e.modelOwner, e.dealerMO} {
		if flagValue(c, "-label-cmd") != "sh "+filepath.Join(dir, "label.sh") || slices.Contains(c, "-labels") {
			t.Errorf("%q: want -label-cmd 'sh %s' and no -labels", c, filepath.Join(dir, "label.sh"))
		}
	}
	for _, c := range [][]string{e.dataOwner, e.dealerDO} {
		if flagValue(c, "-pool") != flagValue(e.mkpool, "-out") {
			t.Errorf("the data owner's -pool %q is not what mkpool writes (%q)", flagValue(c, "-pool"), flagValue(e.mkpool, "-out"))
		}
	}
	return e
}

// checkFlagsParse runs every command with -h after its arguments: each
// binary parses them all before it reaches -h, so it exits 0 only if every
// flag exists and every value parses.
func checkFlagsParse(t *testing.T, bin string, e exported) {
	t.Helper()
	for _, c := range e.all {
		if out, err := exec.Command(filepath.Join(bin, c[0]), append(c[1:], "-h")...).CombinedOutput(); err != nil {
			t.Errorf("%s's printed flags do not parse (%v): %q\n%s", c[0], err, c[1:], out)
		}
	}
}

// flagValue returns the value after the last flag name in args ("" if
// none).
func flagValue(args []string, name string) string {
	v := ""
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			v = args[i+1]
		}
	}
	return v
}

// withFlag returns args with the value of flag name replaced by value.
func withFlag(t *testing.T, args []string, name, value string) []string {
	t.Helper()
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%q has no %s", args, name)
	}
	out := slices.Clone(args)
	out[i+1] = value
	return out
}

// shellFields splits a command line the way a POSIX shell splits the
// quickstart's: words separated by spaces, single-quoted parts taken as
// they are.
func shellFields(t *testing.T, line string) []string {
	t.Helper()
	var (
		words []string
		w     strings.Builder
		in    bool // a word has started
	)
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				t.Fatalf("unterminated quote in %q", line)
			}
			w.WriteString(line[i+1 : i+1+j])
			i, in = i+1+j, true
		case c == ' ':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		case strings.IndexByte("\"\\$`", c) >= 0:
			t.Fatalf("%q: character %q outside single quotes", line, c)
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// TestExportedCommandsParse: quickstart -export (MNIST) and -export -text
// print the two organisations' commands (mkpool from the data owner's own
// files, -provider he, -label-cmd) and the dealer variant, every command's
// flags parse in its binary, and the printed mkpool builds the pool the
// data owner's command reads from the files written (issue 39). The
// -wordnet export is run whole by TestPretrainedTextProcesses.
func TestExportedCommandsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	bin := helpBins(t)
	for _, tc := range []struct {
		name string
		args []string
		pool string // mkpool's summary
	}{
		{"mnist", nil, "40 images of 28×28, grey"},
		{"text", []string{"-text"}, "40 texts from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := exportDemo(t, bin, dir, append(tc.args, "-epochs", "1", "-pool", "40", "-budget", "16", "-bootstrap", "8")...)
			checkFlagsParse(t, bin, e)
			out, err := exec.Command(filepath.Join(bin, "mkpool"), e.mkpool[1:]...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), tc.pool) {
				t.Fatalf("mkpool %q: %v\n%s", e.mkpool[1:], err, out)
			}
			if _, err := os.Stat(flagValue(e.dataOwner, "-pool")); err != nil {
				t.Fatal(err)
			}
			answers, err := os.ReadFile(filepath.Join(dir, "answers.txt"))
			if n := bytes.Count(answers, []byte("\n")); err != nil || n != 40 {
				t.Fatalf("answers.txt: %d lines (%v), want one per pool candidate, 40", n, err)
			}
		})
	}
}

// TestPretrainedTextProcesses runs what quickstart -export -wordnet prints,
// as two organisations would, as OS processes with no dealer: the data
// owner builds its pool from the CSV of texts with mkpool and embeds it with
// the committed pretrained checkpoint (examples/pretrained, a
// BertForMaskedLM directory with its tokenizer.json and no classifier:
// before it the data owner refused it, "missing tensor
// bert.pooler.dense.weight"); the model owner selects with that checkpoint
// fine-tuned on its labelled definitions (embeddings frozen: the handshake
// compares their hash) and labels the bootstrap through the exported
// label.sh (-label-cmd); -provider he on both sides. Both output the same
// selection of budget − bootstrap definitions. Only the model owner's
// listening address, the data owner's, and test speed-ups (-mlp-points, -out,
// -log) differ from the printed commands. A checkpoint that does not load
// stops the export, and the test with it.
func TestPretrainedTextProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries; skipped with -short")
	}
	bin := helpBins(t)
	f := &fixture{bin: bin}
	const poolSize = 40
	dir := t.TempDir()
	e := exportDemo(t, bin, dir, "-wordnet", "-public", "10", "-epochs", "1", "-pool", fmt.Sprint(poolSize), "-budget", "16", "-bootstrap", "8",
		"-schedule", "1:2:4@0.5,1:2:4", "-batch", "8", "-inflight", "2")
	checkFlagsParse(t, bin, e)

	// The data owner's -embedding is the committed checkpoint, byte for
	// byte, a base checkpoint (no classifier); the model owner's target
	// is it fine-tuned, with the same embeddings.
	emb := flagValue(e.dataOwner, "-embedding")
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		got, err := os.ReadFile(filepath.Join(emb, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("pretrained", pretrained.Name, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s of the data owner's -embedding %s differs from the committed checkpoint's", name, emb)
		}
	}
	if _, err := model.Load(emb, model.LoadOptions{}); err == nil {
		t.Fatal("the pretrained checkpoint has a classifier: it does not test a base checkpoint")
	}
	base, err := model.Load(emb, model.LoadOptions{NewHead: true})
	if err != nil {
		t.Fatal(err)
	}
	target, err := model.Load(flagValue(e.modelOwner, "-model"), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mustHash(t, target) != mustHash(t, base) {
		t.Fatal("the fine-tuned target's embeddings differ from the pretrained checkpoint's")
	}

	if out, err := exec.Command(filepath.Join(bin, "mkpool"), e.mkpool[1:]...).CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("%d texts from", poolSize)) {
		t.Fatalf("mkpool %q: %v\n%s", e.mkpool[1:], err, out)
	}
	out := t.TempDir()
	mo := f.start(t, "modelowner", append(withFlag(t, e.modelOwner[1:], "-listen", "127.0.0.1:0"),
		"-mlp-points", "2000", "-connect-timeout", "20s", "-log", "info", "-out", filepath.Join(out, "mo.json"))...)
	addr := strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	do := f.start(t, "dataowner", append(withFlag(t, e.dataOwner[1:], "-connect", addr),
		"-connect-timeout", "20s", "-log", "info", "-out", filepath.Join(out, "do.json"))...)
	for _, p := range []*proc{mo, do} {
		if code := p.wait(t, 3*time.Minute); code != 0 {
			t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
		}
	}
	if log := mo.stderr.String(); !strings.Contains(log, "bootstrap labelled") {
		t.Errorf("the model owner's log does not show the bootstrap labelled:\n%s", log)
	}
	if log := do.stderr.String(); !strings.Contains(log, fmt.Sprintf("kind=texts candidates=%d checkpoint=bert", poolSize)) {
		t.Errorf("the data owner's log does not show the text pool with the BERT checkpoint:\n%s", log)
	}
	r0, r1 := readResult(t, filepath.Join(out, "mo.json")), readResult(t, filepath.Join(out, "do.json"))
	if !slices.Equal(r0.Selected, r1.Selected) || !slices.Equal(r0.Bootstrap, r1.Bootstrap) || len(r0.Selected) != 8 || len(r0.Bootstrap) != 8 {
		t.Fatalf("selected %v / %v, bootstrap %v / %v: want the same 8 and 8", r0.Selected, r1.Selected, r0.Bootstrap, r1.Bootstrap)
	}
	for i, ph := range r0.Phases {
		if ph.RandomnessBytes == 0 {
			t.Errorf("phase %d: no randomness counted: %+v", i+1, ph)
		}
	}
	t.Logf("pretrained text selection (%s), two organisations, -provider he: selected %v", pretrained.Name, r0.Selected)
}

func mustHash(t *testing.T, m *model.Model) string {
	t.Helper()
	h, err := model.EmbeddingHash(m)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

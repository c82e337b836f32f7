package examples_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection/pool"
)

// The environment of TestHelperLabeller: set, it labels; the oracle is the
// fixture's full-pool label file, the pool the data owner's.
const (
	helperEnv       = "SELECTFORMER_TEST_LABELLER"
	helperOracleEnv = "SELECTFORMER_TEST_ORACLE"
	helperPoolEnv   = "SELECTFORMER_TEST_POOL"
	// For a text pool: the checkpoint and the data owner's -seq.
	helperModelEnv = "SELECTFORMER_TEST_MODEL"
	helperSeqEnv   = "SELECTFORMER_TEST_SEQ"
)

// TestHelperLabeller is the labeller TestLabelHooks gives the model owner as
// -label-cmd (this test binary, re-executed): it checks that the exported
// points ($SELECTFORMER_POINTS) are the pool's candidates at the indices of
// $SELECTFORMER_INDICES, and writes their lines of the oracle label file to
// $SELECTFORMER_LABELS. Run directly, it skips.
func TestHelperLabeller(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("the labeller of TestLabelHooks, run by the model owner's -label-cmd")
	}
	idx := readIndices(t, os.Getenv("SELECTFORMER_INDICES"))
	if n, err := strconv.Atoi(os.Getenv("SELECTFORMER_COUNT")); err != nil || n != len(idx) {
		t.Fatalf("SELECTFORMER_COUNT=%q for %d indices", os.Getenv("SELECTFORMER_COUNT"), len(idx))
	}
	points, err := pool.ReadFile(os.Getenv("SELECTFORMER_POINTS"))
	if err != nil {
		t.Fatal(err)
	}
	whole, err := pool.ReadFile(os.Getenv(helperPoolEnv))
	if err != nil {
		t.Fatal(err)
	}
	if points.Kind() != whole.Kind() || points.Len() != len(idx) || os.Getenv("SELECTFORMER_KIND") != string(whole.Kind()) {
		t.Fatalf("points: %s of %d for %d indices of a pool of %s (SELECTFORMER_KIND=%s)", points.Kind(), points.Len(), len(idx), whole.Kind(), os.Getenv("SELECTFORMER_KIND"))
	}
	if whole.Images != nil {
		for k, i := range idx {
			if !slices.Equal(points.Images.Pixels[k], whole.Images.Pixels[i]) {
				t.Fatalf("point %d is not pool candidate %d", k, i)
			}
		}
	} else {
		// The texts are what the model sees: the candidates' tokens.
		dir := os.Getenv(helperModelEnv)
		m, err := model.Load(dir, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := party.Tokenizer(dir, "")
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := strconv.Atoi(os.Getenv(helperSeqEnv))
		in, err := whole.Input(m.Config, tok, seq)
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			want := party.Detokenize(tok.Vocab(), in.IDs[i], in.Mask[i])
			if got := points.Texts.Texts[k]; got != want || got == "" {
				t.Fatalf("point %d is %q; pool candidate %d is %q as the model sees it (%q in the pool)", k, got, i, want, whole.Texts.Texts[i])
			}
		}
	}
	out := oracleLines(t, os.Getenv(helperOracleEnv), idx)
	labels := os.Getenv("SELECTFORMER_LABELS")
	if err := os.WriteFile(labels, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
}

// readIndices reads an indices.txt.
func readIndices(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var idx []int
	for _, l := range strings.Fields(string(b)) {
		i, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		idx = append(idx, i)
	}
	return idx
}

// oracleLines returns the lines of the label file at path (one per pool
// candidate) of the candidates idx, in their order.
func oracleLines(t *testing.T, path string, idx []int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			all = append(all, l)
		}
	}
	var out strings.Builder
	for _, i := range idx {
		if i < 0 || i >= len(all) {
			t.Fatalf("index %d outside the %d labels", i, len(all))
		}
		out.WriteString(all[i] + "\n")
	}
	return out.String()
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// labellingModelOwner starts a model owner that labels the bootstrap as
// the label flags in extra say (no -labels).
func (f *fixture) labellingModelOwner(t *testing.T, dealer0 string, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-model", f.files.Checkpoint, "-pool-size", fmt.Sprint(f.pool),
		"-mlp-points", "4000", "-connect-timeout", "20s"}, strings.Fields(testArgs)...)
	args = append(append(args, dealerArgs(dealer0, f.fp["dealer"])...), extra...)
	p := f.start(t, "modelowner", args...)
	l := p.waitLine(t, "modelowner listening ")
	return p, strings.TrimPrefix(l, "modelowner listening ")
}

// TestLabelHooks runs the selection with the model owner labelling the
// bootstrap as it arrives, through each hook: -label-cmd (this test binary
// re-executed as TestHelperLabeller, which checks the exported points
// against the pool) and -label-dir (a goroutine that waits for the request
// and writes labels.txt). Each run starts from the joint coin of a
// reference run with the full-pool -labels file and its labeller returns
// the same labels, so the bootstrap, the generated proxies (byte for byte)
// and the selection (up to the near-ties compareRuns allows) are the
// reference's. A labeller that never answers ends the model owner with
// exit code 5 at -label-timeout, and its peer with 3.
func TestLabelHooks(t *testing.T) {
	f := getFixture(t)
	dir := t.TempDir()
	rr := getRef(t, f) // the model owner labels from the full-pool -labels
	ref, ref0, ref1 := rr.res, rr.dirs[0], rr.dirs[1]

	t.Setenv(helperEnv, "1")
	t.Setenv(helperOracleEnv, f.files.Labels)
	t.Setenv(helperPoolEnv, f.files.Pool)
	handoff := filepath.Join(dir, "handoff")
	for _, tc := range []struct {
		name string
		args []string
		// labeller, if set, runs beside the model owner.
		labeller func(t *testing.T, done <-chan struct{}) error
		log      string // the model owner's log must say this
	}{
		{"command", []string{"-label-cmd", shellQuote(os.Args[0]) + " -test.run='^TestHelperLabeller$' -test.count=1"}, nil,
			"labelling the bootstrap: running the label command"},
		{"directory", []string{"-label-dir", handoff, "-label-timeout", "2m"}, func(t *testing.T, done <-chan struct{}) error {
			return handOff(t, handoff, f.files.Labels, done)
		}, "waiting for the bootstrap labels: write " + filepath.Join(handoff, party.LabelsFile)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st0, st1 := filepath.Join(dir, tc.name+"-mo"), filepath.Join(dir, tc.name+"-do")
			startFromCoin(t, [2]string{ref0, ref1}, [2]string{st0, st1})
			out := filepath.Join(dir, tc.name+".json")
			dl, a0, a1 := f.dealer(t, "-once")
			mo, addr := f.labellingModelOwner(t, a0, append(tc.args, "-log", "info", "-state", st0, "-out", out)...)
			do := f.dataOwner(t, addr, a1, "-state", st1)
			var lerr chan error
			if tc.labeller != nil {
				lerr = make(chan error, 1)
				go func() { lerr <- tc.labeller(t, mo.done) }()
			}
			for _, p := range []*proc{mo, do, dl} {
				if code := p.wait(t, 90*time.Second); code != 0 {
					t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
				}
			}
			if lerr != nil {
				if err := <-lerr; err != nil {
					t.Fatal(err)
				}
			}
			if log := mo.stderr.String(); !strings.Contains(log, tc.log) || !strings.Contains(log, "bootstrap labelled") {
				t.Errorf("the model owner's log lacks %q or \"bootstrap labelled\":\n%s", tc.log, log)
			}
			got := readResult(t, out)
			if !slices.Equal(got.Bootstrap, ref.Bootstrap) {
				t.Fatalf("bootstrap %v, reference %v", got.Bootstrap, ref.Bootstrap)
			}
			sameTree(t, filepath.Join(ref0, "proxies"), filepath.Join(st0, "proxies"))
			compareRuns(t, ref, got, [2]string{ref0, ref1}, [2]string{st0, st1})
			t.Logf("%s: selected %v (reference %v)", tc.name, got.Selected, ref.Selected)
		})
	}

	t.Run("timeout", func(t *testing.T) {
		dl, a0, a1 := f.dealer(t, "-once")
		mo, addr := f.labellingModelOwner(t, a0, "-label-dir", filepath.Join(dir, "nobody"), "-label-timeout", "1s", "-log", "warn")
		do := f.dataOwner(t, addr, a1)
		mo.expect(t, peer.ExitLabel, "no labels in "+filepath.Join(dir, "nobody", party.LabelsFile)+" within -label-timeout 1s")
		do.expect(t, peer.ExitPeer, "could not label the bootstrap")
		_ = dl
	})
}

// handOff is a labeller behind a -label-dir: it waits for the request in
// dir, then writes the oracle's labels of the requested points as
// labels.txt.tmp and renames it labels.txt.
func handOff(t *testing.T, dir, oracle string, done <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	var req party.LabelRequest
	for {
		b, err := os.ReadFile(filepath.Join(dir, party.RequestFile))
		if err == nil {
			if err := json.Unmarshal(b, &req); err != nil {
				return fmt.Errorf("request.json: %w", err)
			}
			break
		}
		select {
		case <-done:
			return fmt.Errorf("the model owner exited before the request")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s in 60 s", party.RequestFile)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		return fmt.Errorf("hand-off directory: %v, %v; want mode 0700", fi.Mode(), err)
	}
	idx := readIndices(t, filepath.Join(dir, req.Indices))
	p, err := pool.ReadFile(filepath.Join(dir, req.Points))
	if err != nil {
		return err
	}
	if req.Count != len(idx) || p.Len() != len(idx) || req.Kind != pool.KindImages {
		return fmt.Errorf("request %+v: %d indices, %d points", req, len(idx), p.Len())
	}
	labels := filepath.Join(dir, req.Labels)
	if err := os.WriteFile(labels+".tmp", []byte(oracleLines(t, oracle, idx)), 0o600); err != nil {
		return err
	}
	return os.Rename(labels+".tmp", labels)
}

// sameTree checks that the regular files under a and b are the same, byte
// for byte.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string][]byte {
		m := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			m[rel], err = os.ReadFile(p)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := read(a), read(b)
	if len(ma) == 0 || len(ma) != len(mb) {
		t.Fatalf("%s holds %d files, %s %d", a, len(ma), b, len(mb))
	}
	for name, x := range ma {
		if !bytes.Equal(x, mb[name]) {
			t.Errorf("%s differs between %s and %s", name, a, b)
		}
	}
}

// TestLabelCommandText runs a BERT-style selection whose model owner labels
// the bootstrap with -label-cmd: the labeller (TestHelperLabeller) receives
// the sampled mails as selectformer-texts/1, written back from their token
// ids with the checkpoint's vocab.txt, and labels them by class name.
func TestLabelCommandText(t *testing.T) {
	f, tf := getTextFixture(t)
	out := t.TempDir()
	t.Setenv(helperEnv, "1")
	t.Setenv(helperOracleEnv, tf.files.Labels)
	t.Setenv(helperPoolEnv, tf.files.Pool)
	t.Setenv(helperModelEnv, tf.files.Checkpoint)
	t.Setenv(helperSeqEnv, "16")
	dl, a0, a1 := f.dealer(t, "-once")
	args := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-dealer", a0, "-dealer-fingerprint", f.fp["dealer"],
		"-model", tf.files.Checkpoint, "-pool-size", fmt.Sprint(tf.pool),
		"-label-cmd", shellQuote(os.Args[0]) + " -test.run='^TestHelperLabeller$' -test.count=1",
		"-mlp-points", "2000", "-connect-timeout", "20s", "-log", "info", "-out", filepath.Join(out, "mo.json")}, strings.Fields(textArgs)...)
	mo := f.start(t, "modelowner", args...)
	addr := strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	args = append([]string{"-cert", f.path("do.crt"), "-key", f.path("do.key"), "-connect", addr,
		"-peer-fingerprint", f.fp["mo"], "-dealer", a1, "-dealer-fingerprint", f.path("dealer.crt"),
		"-pool", tf.files.Pool, "-embedding", tf.files.Checkpoint, "-seq", "16",
		"-connect-timeout", "20s", "-log", "warn", "-out", filepath.Join(out, "do.json")}, strings.Fields(textArgs)...)
	do := f.start(t, "dataowner", args...)
	for _, p := range []*proc{mo, do, dl} {
		if code := p.wait(t, 90*time.Second); code != 0 {
			t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
		}
	}
	if log := mo.stderr.String(); !strings.Contains(log, "kind=texts") || !strings.Contains(log, "bootstrap labelled") {
		t.Errorf("the model owner's log does not show the texts labelled:\n%s", log)
	}
	r0, r1 := readResult(t, filepath.Join(out, "mo.json")), readResult(t, filepath.Join(out, "do.json"))
	if !slices.Equal(r0.Selected, r1.Selected) || len(r0.Selected) != 8 || len(r0.Bootstrap) != 8 {
		t.Fatalf("selected %v / %v, bootstrap %v", r0.Selected, r1.Selected, r0.Bootstrap)
	}
}

// TestLabelUsageErrors checks the model owner's labelling flags before any
// connection: one way of labelling, no more; a hand-off directory it can
// make.
func TestLabelUsageErrors(t *testing.T) {
	f := getFixture(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mo := func(extra ...string) []string {
		return append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
			"-peer-fingerprint", f.fp["do"], "-dealer", "127.0.0.1:1", "-dealer-fingerprint", f.fp["dealer"],
			"-model", f.files.Checkpoint, "-pool-size", fmt.Sprint(f.pool), "-budget", "40", "-bootstrap", "20"}, extra...)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"none", mo(), peer.ExitUsage, "-label-cmd COMMAND, -label-dir DIR, or -labels FILE"},
		{"two", mo("-labels", f.files.Labels, "-label-cmd", "true"), peer.ExitUsage, "-labels and -label-cmd are mutually exclusive"},
		{"with-proxies", mo("-proxies", t.TempDir(), "-label-dir", t.TempDir()), peer.ExitUsage, "-label-dir is not used with -proxies"},
		{"timeout-without-hook", mo("-labels", f.files.Labels, "-label-timeout", "1m"), peer.ExitUsage, "-label-timeout applies to"},
		{"timeout-zero", mo("-label-cmd", "true", "-label-timeout", "0s"), peer.ExitUsage, "-label-timeout must be positive"},
		{"vocab-with-vit", mo("-label-cmd", "true", "-vocab", file), peer.ExitUsage, "-vocab applies to text models"},
		{"dir-is-a-file", mo("-label-dir", filepath.Join(file, "sub")), peer.ExitInput, "-label-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.start(t, "modelowner", tc.args...).expect(t, tc.code, tc.stderr)
		})
	}
}

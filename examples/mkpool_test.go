package examples_test

import (
	"encoding/csv"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

// mkpool runs the mkpool binary (built with the fixture's, buildBins) with
// args; it returns the exit code and the combined output.
func mkpool(t *testing.T, f *fixture, args ...string) (int, string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(f.bin, "mkpool"), args...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// runSelection runs dealer, model owner and data owner (with the given pool
// and embedding checkpoint flags and the model owner's checkpoint) and
// checks that the parties agree on want selected candidates. The model
// owner labels the bootstrap when it arrives, through -label-cmd: the
// labeller (TestHelperLabeller, this test binary re-executed) checks the
// exported points against builtPool (as the model in moModel sees them,
// for texts: seq tokens) and answers with labels' lines.
func runSelection(t *testing.T, f *fixture, moModel, labels, builtPool string, seq, poolSize, want int, schedule string, doArgs ...string) {
	t.Helper()
	t.Setenv(helperEnv, "1")
	t.Setenv(helperOracleEnv, labels)
	t.Setenv(helperPoolEnv, builtPool)
	t.Setenv(helperModelEnv, moModel)
	t.Setenv(helperSeqEnv, fmt.Sprint(seq))
	labelCmd := shellQuote(os.Args[0]) + " -test.run='^TestHelperLabeller$' -test.count=1"
	out := t.TempDir()
	dl, a0, a1 := f.dealer(t, "-once")
	args := append([]string{"-cert", f.path("mo.crt"), "-key", f.path("mo.key"), "-listen", "127.0.0.1:0",
		"-peer-fingerprint", f.path("do.crt"), "-dealer", a0, "-dealer-fingerprint", f.fp["dealer"],
		"-model", moModel, "-label-cmd", labelCmd, "-pool-size", fmt.Sprint(poolSize),
		"-mlp-points", "2000", "-connect-timeout", "20s", "-log", "warn", "-out", filepath.Join(out, "mo.json")}, strings.Fields(schedule)...)
	mo := f.start(t, "modelowner", args...)
	addr := strings.TrimPrefix(mo.waitLine(t, "modelowner listening "), "modelowner listening ")
	args = append([]string{"-cert", f.path("do.crt"), "-key", f.path("do.key"), "-connect", addr,
		"-peer-fingerprint", f.fp["mo"], "-dealer", a1, "-dealer-fingerprint", f.path("dealer.crt"),
		"-connect-timeout", "20s", "-log", "warn", "-out", filepath.Join(out, "do.json")}, strings.Fields(schedule)...)
	do := f.start(t, "dataowner", append(args, doArgs...)...)
	for _, p := range []*proc{mo, do, dl} {
		if code := p.wait(t, 90*time.Second); code != 0 {
			t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, p.stderr)
		}
	}
	r0, r1 := readResult(t, filepath.Join(out, "mo.json")), readResult(t, filepath.Join(out, "do.json"))
	if !slices.Equal(r0.Selected, r1.Selected) || !slices.Equal(r0.Bootstrap, r1.Bootstrap) {
		t.Fatalf("parties disagree: selected %v / %v, bootstrap %v / %v", r0.Selected, r1.Selected, r0.Bootstrap, r1.Bootstrap)
	}
	if len(r0.Selected) != want {
		t.Fatalf("selected %d candidates, want %d", len(r0.Selected), want)
	}
	for _, i := range r0.Selected {
		if slices.Contains(r0.Bootstrap, i) || i < 0 || i >= poolSize {
			t.Fatalf("selected index %d is out of range or in the bootstrap sample", i)
		}
	}
}

// TestMkpoolImages (issue 30): the demo pool's images written as a
// directory of PNG files, built into a pool by mkpool with the checkpoint's
// size, give the demo pool's pixels exactly, in file order, with an index
// naming each file; the data owner runs a selection on the built pool, the
// model owner labelling the bootstrap through its -label-cmd hook.
func TestMkpoolImages(t *testing.T) {
	f := getFixture(t)
	orig, err := pool.ReadFile(f.files.Pool)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	s := orig.Images
	for i, px := range s.Pixels {
		img := image.NewGray(image.Rect(0, 0, s.Width, s.Height))
		for j, p := range px {
			img.Pix[j] = uint8(math.Round(p * 255))
		}
		// One in three as RGB, to be turned grey again.
		var m image.Image = img
		if i%3 == 1 {
			rgb := image.NewRGBA(img.Rect)
			for j, v := range img.Pix {
				rgb.Set(j%s.Width, j/s.Width, color.RGBA{v, v, v, 255})
			}
			m = rgb
		}
		fh, err := os.Create(filepath.Join(photos, fmt.Sprintf("%04d.png", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(fh, m); err != nil {
			t.Fatal(err)
		}
		fh.Close()
	}
	if err := os.WriteFile(filepath.Join(photos, "README.txt"), []byte("the photos"), 0o644); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(dir, "pool.sfimg.gz")
	code, out := mkpool(t, f, "images", "-dir", photos, "-embedding", f.files.Checkpoint, "-out", built)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d images of 28×28, grey", s.Len())) || !strings.Contains(out, "left out 1 files") {
		t.Fatalf("mkpool images exited %d:\n%s", code, out)
	}
	got, err := pool.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind() != pool.KindImages || got.Len() != s.Len() || got.Images.Width != s.Width || got.Images.NumChannels() != 1 {
		t.Fatalf("built %s of %d, %d×%d×%d", got.Kind(), got.Len(), got.Images.Width, got.Images.Height, got.Images.NumChannels())
	}
	for i := range s.Pixels {
		if !slices.Equal(got.Images.Pixels[i], s.Pixels[i]) {
			t.Fatalf("image %d differs from the demo pool's", i)
		}
	}
	idx := readIndex(t, filepath.Join(dir, "pool.index.csv"))
	if len(idx) != s.Len()+1 || !slices.Equal(idx[0], []string{"index", "file", "record", "line"}) || !slices.Equal(idx[8], []string{"7", "0007.png", "", ""}) {
		t.Fatalf("index rows %d, header %q, row 8 %q", len(idx), idx[0], idx[8])
	}
	runSelection(t, f, f.files.Checkpoint, f.files.Labels, built, 0, f.pool, 20, testArgs, "-pool", built, "-embedding", f.files.Checkpoint)
}

func readIndex(t *testing.T, path string) [][]string {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestMkpoolTextsTokenizerJSON (issue 30): the text demo's pool as a CSV
// column (mails with newlines, commas and quotes), built by mkpool, gives
// the same texts; the data owner runs a selection on it with a checkpoint
// directory that has a Hugging Face tokenizer.json and no vocab.txt (before
// issue 30 it stopped: no vocab.txt), the model owner labelling the
// bootstrap through its -label-cmd hook.
func TestMkpoolTextsTokenizerJSON(t *testing.T) {
	f, tf := getTextFixture(t)
	orig, err := pool.ReadFile(tf.files.Pool)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	csvPath := filepath.Join(dir, "mails.csv")
	fh, err := os.Create(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(fh)
	_ = w.Write([]string{"id", "text", "received"})
	for i, text := range orig.Texts.Texts {
		_ = w.Write([]string{fmt.Sprint(i + 1), text, "2024-01-02"})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	built := filepath.Join(dir, "mails.jsonl.gz")
	code, out := mkpool(t, f, "texts", "-csv", csvPath, "-column", "text", "-out", built, "-index", filepath.Join(dir, "mails.index.csv"))
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d texts from", tf.pool)) {
		t.Fatalf("mkpool texts exited %d:\n%s", code, out)
	}
	got, err := pool.ReadFile(built)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Texts.Texts, orig.Texts.Texts) {
		t.Fatal("the built pool's texts differ from the CSV's")
	}
	if idx := readIndex(t, filepath.Join(dir, "mails.index.csv")); len(idx) != tf.pool+1 || idx[1][1] != csvPath || idx[1][2] != "1" || idx[1][3] != "2" {
		t.Fatalf("index rows %d, first %q", len(idx), idx[1])
	}
	// The checkpoint as the Hugging Face hub may ship it: tokenizer.json,
	// no vocab.txt.
	hf := filepath.Join(dir, "checkpoint")
	if err := os.CopyFS(hf, os.DirFS(tf.files.Checkpoint)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(hf, "vocab.txt")); err != nil {
		t.Fatal(err)
	}
	v, err := wordpiece.LoadVocab(filepath.Join(tf.files.Checkpoint, "vocab.txt"))
	if err != nil {
		t.Fatal(err)
	}
	writeTokenizerJSON(t, filepath.Join(hf, "tokenizer.json"), v.Tokens())
	runSelection(t, f, tf.files.Checkpoint, tf.files.Labels, built, 16, tf.pool, 8, textArgs, "-pool", built, "-embedding", hf, "-seq", "16")
}

// TestMkpoolErrors: mkpool's usage and input errors, with the documented exit
// codes and messages that name the file and what to do.
func TestMkpoolErrors(t *testing.T) {
	f, tf := getTextFixture(t)
	dir := t.TempDir()
	photos := filepath.Join(dir, "photos")
	if err := os.MkdirAll(photos, 0o755); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(filepath.Join(photos, "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(fh, image.NewGray(image.Rect(0, 0, 32, 30))); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	csvPath := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(csvPath, []byte("id,body\n1,hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gz")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", nil, peer.ExitUsage, "missing subcommand"},
		{"unknown subcommand", []string{"videos"}, peer.ExitUsage, `unknown subcommand "videos"`},
		{"no size", []string{"images", "-dir", photos, "-out", out}, peer.ExitUsage, "-embedding CHECKPOINT or -size N"},
		{"size mismatch", []string{"images", "-dir", photos, "-embedding", f.files.Checkpoint, "-out", out}, peer.ExitInput, "big.png is 32×30, the pool's images are 28×28"},
		{"size flag against checkpoint", []string{"images", "-dir", photos, "-embedding", f.files.Checkpoint, "-size", "32", "-out", out}, peer.ExitUsage, "do not fit checkpoint"},
		{"text checkpoint", []string{"images", "-dir", photos, "-embedding", tf.files.Checkpoint, "-out", out}, peer.ExitInput, "not a vit"},
		{"channels", []string{"images", "-dir", photos, "-size", "28", "-channels", "2", "-out", out}, peer.ExitUsage, "-channels 2"},
		{"two sources", []string{"texts", "-csv", csvPath, "-lines", csvPath, "-out", out}, peer.ExitUsage, "exactly one of -csv, -tsv and -lines"},
		{"column on lines", []string{"texts", "-lines", csvPath, "-column", "body", "-out", out}, peer.ExitUsage, "apply to -csv and -tsv"},
		{"no column", []string{"texts", "-csv", csvPath, "-column", "text", "-out", out}, peer.ExitInput, `no column "text" in the header ("id", "body")`},
		{"missing file", []string{"texts", "-csv", csvPath + ".x", "-out", out}, peer.ExitInput, "no such file"},
		{"no out", []string{"texts", "-csv", csvPath}, peer.ExitUsage, "-out is required"},
		{"exists", []string{"texts", "-csv", csvPath, "-out", csvPath}, peer.ExitUsage, "exists; pass -force"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := mkpool(t, f, tc.args...)
			if code != tc.code || !strings.Contains(msg, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, tc.code, tc.want, msg)
			}
		})
	}
	if code, msg := mkpool(t, f, "images", "-dir", photos, "-size", "28", "-resize", "-out", out); code != 0 {
		t.Fatalf("-resize: exit %d:\n%s", code, msg)
	}
}

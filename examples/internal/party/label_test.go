package party

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection/pool"
)

var testClasses = []string{"ham", "spam", "eggs"}

func TestParseBootstrapLabels(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		want     []int
		err      string
	}{
		{"numbers", "0\n1\n2\n", 3, []int{0, 1, 2}, ""},
		{"no final newline", "2\n0", 2, []int{2, 0}, ""},
		{"names", "spam\nham\neggs\n", 3, []int{1, 0, 2}, ""},
		{"mixed, blank and comments", "# point 0\n1\n\n  eggs  \r\n# done\n", 2, []int{1, 2}, ""},
		{"too few", "0\n1\n", 3, nil, "2 labels for 3 points"},
		{"too many", "0\n1\n2\n0\n", 3, nil, "4 labels for 3 points"},
		{"out of range", "0\n3\n", 2, nil, "line 2: class 3 outside [0, 3)"},
		{"negative", "-1\n", 1, nil, "class -1 outside"},
		{"unknown name", "0\nbacon\n", 2, nil, `line 2: "bacon" is neither`},
		{"leading zero", "01\n", 1, nil, `"01" is neither`},
		{"empty", "", 1, nil, "no labels"},
		{"only comments", "# nothing\n\n", 1, nil, "no labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBootstrapLabels([]byte(tc.in), testClasses, tc.n)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzParseBootstrapLabels: no panic, and what parses is n classes in range.
func FuzzParseBootstrapLabels(f *testing.F) {
	for _, s := range []string{"0\n1\n2\n", "spam\nham\n", "# c\n\n2\r\n", "-1\n", "99999999999999999999\n", "\xff\n", ""} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		got, err := ParseBootstrapLabels(b, testClasses, n)
		if err != nil {
			return
		}
		if len(got) != n {
			t.Fatalf("%d labels for n = %d", len(got), n)
		}
		for _, l := range got {
			if l < 0 || l >= len(testClasses) {
				t.Fatalf("label %d out of range", l)
			}
		}
	})
}

func TestLabelFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		proxies bool
		err     string
	}{
		{"labels", []string{"-labels", "l.txt"}, false, ""},
		{"cmd", []string{"-label-cmd", "./label", "-label-timeout", "5m"}, false, ""},
		{"dir", []string{"-label-dir", "d", "-vocab", "v.txt"}, false, ""},
		{"proxies alone", nil, true, ""},
		{"proxies with labels (ignored, as before)", []string{"-labels", "l.txt"}, true, ""},
		{"none", nil, false, "-label-cmd COMMAND, -label-dir DIR, or -labels FILE"},
		{"two", []string{"-labels", "l.txt", "-label-dir", "d"}, false, "-labels and -label-dir are mutually exclusive"},
		{"three", []string{"-labels", "l", "-label-cmd", "c", "-label-dir", "d"}, false, "-labels and -label-cmd and -label-dir are mutually exclusive"},
		{"cmd with proxies", []string{"-label-cmd", "c"}, true, "-label-cmd is not used with -proxies"},
		{"empty cmd", []string{"-label-cmd", " "}, false, "flag -label-cmd is empty"},
		{"timeout without a hook", []string{"-labels", "l", "-label-timeout", "1m"}, false, "-label-timeout applies to"},
		{"vocab without a hook", []string{"-labels", "l", "-vocab", "v"}, false, "-vocab applies to"},
		{"zero timeout", []string{"-label-dir", "d", "-label-timeout", "0s"}, false, "-label-timeout must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("modelowner", flag.ContinueOnError)
			var lf LabelFlags
			lf.Register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := lf.Check(fs, tc.proxies)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || peer.Code(err) != peer.ExitUsage {
				t.Fatalf("got %v (code %d), want a usage error containing %q", err, peer.Code(err), tc.err)
			}
		})
	}
}

// imageBootstrap returns an exporter for a ViT of 3 channels of 5×5 and
// the inputs of an image pool at idx, as the data owner sends them, with
// the pool.
func imageBootstrap(t *testing.T, idx []int) (*Exporter, model.Input, *pool.Images) {
	t.Helper()
	cfg := model.Config{Family: model.ViT, ImageSize: 5, NumChannels: 3, Labels: testClasses}
	imgs := &pool.Images{Width: 5, Height: 5}
	for i := range 10 {
		px := make([]float64, 25)
		for j := range px {
			px[j] = float64((i*37+j*11)%256) / 255
		}
		imgs.Pixels = append(imgs.Pixels, px)
	}
	in, err := (&pool.Pool{Images: imgs}).Input(cfg, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in, err = in.Select(idx); err != nil {
		t.Fatal(err)
	}
	ex, err := NewExporter(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return ex, in, imgs
}

// TestExportImages: the exported points are the pool's images at the
// bootstrap's indices, byte for byte, in SFIMGS01 and as PNGs, with their
// indices, the class names and the request; all owner-only.
func TestExportImages(t *testing.T) {
	idx := []int{7, 2, 9}
	ex, in, imgs := imageBootstrap(t, idx)
	dir := t.TempDir()
	req, err := ex.Write(dir, idx, in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ReadFile(filepath.Join(dir, ImagePointsFile))
	if err != nil {
		t.Fatal(err)
	}
	if p.Images == nil || p.Images.Len() != len(idx) || p.Images.Width != 5 {
		t.Fatalf("points file: %+v", p)
	}
	for k, i := range idx {
		if !slices.Equal(p.Images.Pixels[k], imgs.Pixels[i]) {
			t.Errorf("point %d: %v, pool image %d: %v", k, p.Images.Pixels[k], i, imgs.Pixels[i])
		}
		f, err := os.Open(filepath.Join(dir, ImagesDir, fmt.Sprintf("%d.png", k)))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for j, want := range imgs.Pixels[i] {
			r, _, _, _ := img.At(j%5, j/5).RGBA()
			if got := float64(r>>8) / 255; got != want {
				t.Fatalf("png %d pixel %d: %v, want %v", k, j, got, want)
			}
		}
	}
	checkExportFiles(t, dir, req, idx, pool.KindImages)
	if req.Images != ImagesDir || req.Points != ImagePointsFile {
		t.Errorf("request %+v", req)
	}
}

// TestExportColourImages: the points of an RGB pool come out in colour
// (SFIMGS02, RGB PNGs), byte for byte the pool's, not as their grey mean.
func TestExportColourImages(t *testing.T) {
	cfg := model.Config{Family: model.ViT, ImageSize: 4, NumChannels: 3, Labels: testClasses}
	imgs := &pool.Images{Width: 4, Height: 4, Channels: 3}
	for i := range 6 {
		px := make([]float64, 3*16)
		for j := range px {
			px[j] = float64((i*53+j*29)%256) / 255
		}
		imgs.Pixels = append(imgs.Pixels, px)
	}
	idx := []int{4, 1}
	in, err := (&pool.Pool{Images: imgs}).Input(cfg, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if in, err = in.Select(idx); err != nil {
		t.Fatal(err)
	}
	ex, err := NewExporter(cfg, "", "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := ex.Write(dir, idx, in); err != nil {
		t.Fatal(err)
	}
	p, err := pool.ReadFile(filepath.Join(dir, ImagePointsFile))
	if err != nil {
		t.Fatal(err)
	}
	if p.Images == nil || p.Images.NumChannels() != 3 {
		t.Fatalf("points file: %+v", p.Images)
	}
	for k, i := range idx {
		if !slices.Equal(p.Images.Pixels[k], imgs.Pixels[i]) {
			t.Errorf("point %d: %v, pool image %d: %v", k, p.Images.Pixels[k], i, imgs.Pixels[i])
		}
		f, err := os.Open(filepath.Join(dir, ImagesDir, fmt.Sprintf("%d.png", k)))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for j := range 16 {
			r, g, b, _ := img.At(j%4, j/4).RGBA()
			for ch, v := range []uint32{r, g, b} {
				if got, want := float64(v>>8)/255, imgs.Pixels[i][ch*16+j]; got != want {
					t.Fatalf("png %d pixel %d channel %d: %v, want %v", k, j, ch, got, want)
				}
			}
		}
	}
}

// checkExportFiles checks indices.txt, classes.txt, request.json and the
// modes of what Write wrote into dir.
func checkExportFiles(t *testing.T, dir string, req *LabelRequest, idx []int, kind pool.Kind) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, IndicesFile))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, i := range idx {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if string(b) != want.String() {
		t.Errorf("indices.txt %q, want %q", b, want.String())
	}
	if b, err = os.ReadFile(filepath.Join(dir, ClassesFile)); err != nil || string(b) != "ham\nspam\neggs\n" {
		t.Errorf("classes.txt %q, %v", b, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, RequestFile))
	if err != nil {
		t.Fatal(err)
	}
	var got LabelRequest
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Format != LabelRequestFormat || got.Kind != kind || got.Count != len(idx) || !slices.Equal(got.Classes, testClasses) ||
		got.Labels != LabelsFile || got.Indices != IndicesFile || got.Points != req.Points {
		t.Errorf("request.json %+v", got)
	}
	if runtime.GOOS == "windows" {
		return
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if m := fi.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %v: readable by others", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestExportTexts: the exported texts are the tokens the model sees, back
// in the selectformer-texts/1 format.
func TestExportTexts(t *testing.T) {
	bert, bare, _, vocabPath, models := checkpoints(t)
	cfg := models["bert"].Config
	cfg.Labels = testClasses
	texts := []string{"Hello world", "world", "hello, hello world world", "nothing known"}
	tok, err := Tokenizer(bert, "")
	if err != nil {
		t.Fatal(err)
	}
	in, err := (&pool.Pool{Texts: &pool.Texts{Texts: texts}}).Input(cfg, tok, 6)
	if err != nil {
		t.Fatal(err)
	}
	idx := []int{3, 0, 2}
	if in, err = in.Select(idx); err != nil {
		t.Fatal(err)
	}
	if _, err := NewExporter(cfg, bare, ""); err == nil || peer.Code(err) != peer.ExitInput || !strings.Contains(err.Error(), "-vocab") {
		t.Fatalf("no vocab.txt: %v (code %d)", err, peer.Code(err))
	}
	ex, err := NewExporter(cfg, bare, vocabPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	req, err := ex.Write(dir, idx, in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.ReadFile(filepath.Join(dir, TextPointsFile))
	if err != nil {
		t.Fatal(err)
	}
	// Lower-cased, punctuation split off ("," is unknown), cut to 4 tokens
	// between [CLS] and [SEP].
	want := []string{"[UNK] [UNK]", "hello world", "hello [UNK] hello world"}
	if p.Texts == nil || !slices.Equal(p.Texts.Texts, want) {
		t.Fatalf("texts %+v, want %q", p.Texts, want)
	}
	checkExportFiles(t, dir, req, idx, pool.KindTexts)
	if req.Images != "" || req.Points != TextPointsFile {
		t.Errorf("request %+v", req)
	}
}

func TestDetokenize(t *testing.T) {
	v, err := wordpiece.NewVocab([]string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##believ", "##able", "!"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		ids, mask []int
		want      string
	}{
		{"pieces", []int{2, 4, 5, 6, 7, 3, 0, 0}, nil, "unbelievable !"},
		{"mask", []int{2, 4, 7, 3, 4}, []int{1, 1, 1, 1, 0}, "un !"},
		{"short mask", []int{4, 7}, []int{1}, "un"},
		{"leading continuation", []int{5, 1}, nil, "##believ [UNK]"},
		{"unknown id", []int{4, 99, -1}, nil, "un [id 99] [id -1]"},
		{"empty", []int{2, 3, 0}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detokenize(v, tc.ids, tc.mask); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestExportRefuses(t *testing.T) {
	idx := []int{1, 2}
	ex, in, _ := imageBootstrap(t, idx)
	if _, err := ex.Write(t.TempDir(), []int{1}, in); err == nil || !strings.Contains(err.Error(), "2 inputs for 1 points") {
		t.Fatalf("count mismatch: %v", err)
	}
	in.Pixels[1] = in.Pixels[1][:10]
	if _, err := ex.Write(t.TempDir(), idx, in); err == nil || !strings.Contains(err.Error(), "point 1 has 10 values, want 75") {
		t.Fatalf("short row: %v", err)
	}
	_, _, vit, _, models := checkpoints(t)
	if _, err := NewExporter(models["vit"].Config, vit, "v.txt"); peer.Code(err) != peer.ExitUsage {
		t.Fatalf("-vocab with a ViT: %v", err)
	}
}

// quiet discards log lines.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// TestCommandLabeler runs shell commands as labellers.
func TestCommandLabeler(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the commands are sh scripts")
	}
	idx := []int{7, 2, 9}
	ex, in, _ := imageBootstrap(t, idx)
	envOut := filepath.Join(t.TempDir(), "env")
	for _, tc := range []struct {
		name, cmd string
		timeout   time.Duration
		code      int // of the error; -1: none
		err       string
		want      []int
	}{
		{"labels", `sed 's/^7$/spam/; s/^2$/0/; s/^9$/2/' "$SELECTFORMER_INDICES" > "$SELECTFORMER_LABELS"; env | grep ^SELECTFORMER_ > ` + envOut, time.Minute, -1, "", []int{1, 0, 2}},
		{"fails", `echo broken >&2; exit 3`, time.Minute, peer.ExitLabel, "the label command failed (exit status 3)", nil},
		{"no labels", `true`, time.Minute, peer.ExitLabel, "wrote no $SELECTFORMER_LABELS file", nil},
		{"too few", `echo 1 > "$SELECTFORMER_LABELS"`, time.Minute, peer.ExitInput, "1 labels for 3 points", nil},
		{"bad class", `printf '0\n1\n5\n' > "$SELECTFORMER_LABELS"`, time.Minute, peer.ExitInput, "line 3: class 5 outside [0, 3)", nil},
		{"timeout", `sleep 30; printf '0\n0\n0\n' > "$SELECTFORMER_LABELS"`, 300 * time.Millisecond, peer.ExitLabel, "did not finish within -label-timeout 300ms", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &CommandLabeler{Command: tc.cmd, Exporter: ex, Timeout: tc.timeout, Output: io.Discard, Logger: quiet}
			start := time.Now()
			got, err := c.Label(context.Background(), idx, in)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			if tc.code < 0 {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err == nil || peer.Code(err) != tc.code || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, %v (code %d); want code %d and %q", got, err, peer.Code(err), tc.code, tc.err)
			}
		})
	}
	b, err := os.ReadFile(envOut)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	dir := env["SELECTFORMER_LABEL_DIR"]
	want := map[string]string{
		"SELECTFORMER_LABEL_DIR": dir, "SELECTFORMER_KIND": "images", "SELECTFORMER_COUNT": "3", "SELECTFORMER_CLASSES": "3",
		"SELECTFORMER_REQUEST": filepath.Join(dir, RequestFile), "SELECTFORMER_POINTS": filepath.Join(dir, ImagePointsFile),
		"SELECTFORMER_IMAGES": filepath.Join(dir, ImagesDir), "SELECTFORMER_INDICES": filepath.Join(dir, IndicesFile),
		"SELECTFORMER_CLASS_NAMES": filepath.Join(dir, ClassesFile), "SELECTFORMER_LABELS": filepath.Join(dir, LabelsFile),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if len(env) != len(want) {
		t.Errorf("environment %v, want %v", env, want)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the label directory %s was not removed: %v", dir, err)
	}

	// An interrupted run is not a labelling failure.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	c := &CommandLabeler{Command: "sleep 30", Exporter: ex, Timeout: time.Minute, Logger: quiet}
	if _, err := c.Label(ctx, idx, in); !errors.Is(err, context.Canceled) || peer.Code(err) != peer.ExitFailure {
		t.Fatalf("cancelled: %v (code %d)", err, peer.Code(err))
	}
}

// TestDirLabeler hands the points off through a directory: a stale labels
// file is moved aside, a malformed one rejected and the wait goes on, a
// good one ends it; no labels within the timeout and an interrupt end it
// with their errors.
func TestDirLabeler(t *testing.T) {
	defer func(p time.Duration) { labelPoll = p }(labelPoll)
	labelPoll = 10 * time.Millisecond
	idx := []int{7, 2, 9}
	ex, in, _ := imageBootstrap(t, idx)
	dir := filepath.Join(t.TempDir(), "handoff")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	labels := filepath.Join(dir, LabelsFile)
	write := func(s string) {
		if err := os.WriteFile(labels+".tmp", []byte(s), 0o600); err != nil {
			t.Error(err)
		}
		if err := os.Rename(labels+".tmp", labels); err != nil {
			t.Error(err)
		}
	}
	write("0\n0\n0\n") // an earlier run's
	if err := os.WriteFile(filepath.Join(dir, RequestFile), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitFor := func(path string) bool {
			for range 1000 {
				if _, err := os.Stat(path); err == nil {
					return true
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Errorf("no %s", path)
			return false
		}
		if !waitFor(filepath.Join(dir, ImagePointsFile)) || !waitFor(filepath.Join(dir, RequestFile)) {
			return
		}
		write("spam\nham\n") // one short
		if !waitFor(labels + ".rejected") {
			return
		}
		write("spam\nham\neggs\n")
	}()
	d := &DirLabeler{Dir: dir, Exporter: ex, Timeout: time.Minute, Logger: quiet}
	got, err := d.Label(context.Background(), idx, in)
	<-done
	if err != nil || !slices.Equal(got, []int{1, 0, 2}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for name, want := range map[string]string{LabelsFile + ".stale": "0\n0\n0\n", LabelsFile + ".rejected": "spam\nham\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v; want %q", name, b, err, want)
		}
	}

	// No labels in time.
	fresh := filepath.Join(t.TempDir(), "a", "b")
	d = &DirLabeler{Dir: fresh, Exporter: ex, Timeout: 100 * time.Millisecond, Logger: quiet}
	_, err = d.Label(context.Background(), idx, in)
	if peer.Code(err) != peer.ExitLabel || !strings.Contains(err.Error(), "no labels in "+filepath.Join(fresh, LabelsFile)+" within -label-timeout 100ms") {
		t.Fatalf("timeout: %v (code %d)", err, peer.Code(err))
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("made %s: %v, %v; want mode 0700", fresh, fi.Mode(), err)
	}
	// Interrupted.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	d.Timeout = time.Minute
	if _, err := d.Label(ctx, idx, in); !errors.Is(err, context.Canceled) || peer.Code(err) != peer.ExitFailure {
		t.Fatalf("cancelled: %v (code %d)", err, peer.Code(err))
	}
}

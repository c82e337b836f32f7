package demo

import (
	"encoding/csv"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// Export is a demo written as two organisations hold it, for the peer
// binaries: the data owner's own data in a form mkpool reads (a directory
// of image files or a CSV of texts) and the public checkpoint it embeds
// with; the model owner's target and a labelling script for -label-cmd
// with the answers a person labelling the pool would give. Pool index i is
// the data owner's file or data row i in mkpool's order.
type Export struct {
	// Sources is the data owner's data: a directory of PNG files
	// (images), or a CSV file with a "text" column (texts).
	Sources string
	// Mkpool are mkpool's arguments that build Pool from Sources.
	Mkpool []string
	// Pool is the pool file mkpool writes (not written by the export).
	Pool string
	// PoolSize is the number of candidates in the pool.
	PoolSize int
	// Embedding is the data owner's -embedding: the public checkpoint.
	Embedding string
	// Seq is the data owner's -seq for a text pool (0 for images).
	Seq int
	// Model is the model owner's -model: its target.
	Model string
	// Labeller is the model owner's labelling script (run as
	// -label-cmd 'sh Labeller'); Answers are its answers, line i+1 the
	// class of pool index i.
	Labeller, Answers string
	// Public is the model owner's own unlabelled inputs as a pool file
	// (-public; "" for none), tokenized to PublicSeq tokens for texts.
	Public    string
	PublicSeq int
	// Written names the files written, for a person: "what (path)".
	Written []string
}

// labeller is the demos' -label-cmd script: it looks each requested pool
// index up in the answers file beside it.
const labeller = `#!/bin/sh
# The demo's labeller (modelowner -label-cmd 'sh label.sh'): a person with
# the answers. Line k of $SELECTFORMER_INDICES is point k's pool index i;
# its label is line i+1 of answers.txt, written as line k of
# $SELECTFORMER_LABELS.
set -eu
awk 'NR == FNR { answer[NR - 1] = $0; next } { print answer[$1] }' \
	"$(dirname "$0")/answers.txt" "$SELECTFORMER_INDICES" > "$SELECTFORMER_LABELS"
`

// WriteLabeller writes the labelling script label.sh and its answers.txt
// (answers[i] on line i+1: the class, a name or a number, of pool index i)
// into dir and returns their paths.
func WriteLabeller(dir string, answers []string) (script, answersFile string, err error) {
	script, answersFile = filepath.Join(dir, "label.sh"), filepath.Join(dir, "answers.txt")
	var b strings.Builder
	for _, a := range answers {
		if a == "" || strings.ContainsAny(a, "\n\r") {
			return "", "", fmt.Errorf("demo: answer %q is not one line", a)
		}
		fmt.Fprintln(&b, a)
	}
	if err := os.WriteFile(answersFile, []byte(b.String()), 0o644); err != nil {
		return "", "", fmt.Errorf("demo: %w", err)
	}
	if err := os.WriteFile(script, []byte(labeller), 0o755); err != nil {
		return "", "", fmt.Errorf("demo: %w", err)
	}
	return script, answersFile, nil
}

// WriteTextsCSV writes texts as a CSV file with the columns id (from 1)
// and text, the input of mkpool texts -column text: pool index i is data
// row i.
func WriteTextsCSV(path string, texts []string) error {
	return writeFile(path, func(w io.Writer) error {
		cw := csv.NewWriter(w)
		_ = cw.Write([]string{"id", "text"})
		for i, t := range texts {
			_ = cw.Write([]string{strconv.Itoa(i + 1), t})
		}
		cw.Flush()
		return cw.Error()
	})
}

// WriteImageDir writes an image set's (grey) images as PNG files into dir,
// named by their index with zeros in front so that mkpool images' order
// (byte-wise by path) is the set's (PNG files already in dir are removed
// first: an earlier export's would join the pool): pixel values in [0, 1] are stored as
// round(255 v), which mkpool reads back as v for the demo's 8-bit data.
func WriteImageDir(dir string, s *dataset.ImageSet) error {
	if s.Width <= 0 || s.Height <= 0 {
		return fmt.Errorf("demo: images of %d×%d", s.Width, s.Height)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	// An earlier export's images would join the pool mkpool builds.
	old, err := filepath.Glob(filepath.Join(dir, "*.png"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	width := len(strconv.Itoa(max(s.Len()-1, 0)))
	for i, px := range s.Images {
		if len(px) != s.Width*s.Height {
			return fmt.Errorf("demo: image %d has %d pixels, not %d×%d", i, len(px), s.Width, s.Height)
		}
		img := image.NewGray(image.Rect(0, 0, s.Width, s.Height))
		for j, p := range px {
			img.Pix[j] = uint8(math.Round(min(max(p, 0), 1) * 255))
		}
		if err := writeFile(filepath.Join(dir, fmt.Sprintf("%0*d.png", width, i)), func(w io.Writer) error { return png.Encode(w, img) }); err != nil {
			return err
		}
	}
	return nil
}

// Export writes the MNIST demo for two organisations under dir: the pool's
// digits as PNG files (images/), the public checkpoint (checkpoint/: the
// data owner's -embedding and the model owner's target) and the labeller
// with every digit's class.
func (d *Demo) Export(dir string) (Export, error) {
	e := Export{Sources: filepath.Join(dir, "images"), Pool: filepath.Join(dir, "pool.sfimg.gz"), PoolSize: d.Pool.Len(),
		Embedding: filepath.Join(dir, "checkpoint"), Model: filepath.Join(dir, "checkpoint")}
	e.Mkpool = []string{"images", "-dir", e.Sources, "-embedding", e.Embedding, "-out", e.Pool}
	if err := WriteImageDir(e.Sources, d.Pool); err != nil {
		return e, err
	}
	if err := d.Checkpoint.Save(e.Model, safetensors.F64); err != nil {
		return e, fmt.Errorf("demo: saving checkpoint: %w", err)
	}
	answers := make([]string, d.Pool.Len())
	for i, l := range d.Pool.Labels {
		answers[i] = strconv.Itoa(l)
	}
	return e, e.finish(dir, answers, fmt.Sprintf("the data owner's %d digits (%s)", e.PoolSize, e.Sources),
		fmt.Sprintf("the public checkpoint, a tiny ViT (%s)", e.Model))
}

// Export writes the text demo for two organisations under dir: the pool's
// mails as a CSV (texts.csv), the public checkpoint with its vocab.txt
// (checkpoint/: the data owner's -embedding and the model owner's target)
// and the labeller with every mail's class (ham, spam).
func (d *TextDemo) Export(dir string) (Export, error) {
	e := Export{Sources: filepath.Join(dir, "texts.csv"), Pool: filepath.Join(dir, "pool.jsonl.gz"), PoolSize: d.Pool.Len(),
		Embedding: filepath.Join(dir, "checkpoint"), Model: filepath.Join(dir, "checkpoint"), Seq: d.Config.Seq}
	e.Mkpool = []string{"texts", "-csv", e.Sources, "-column", "text", "-out", e.Pool}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return e, fmt.Errorf("demo: %w", err)
	}
	if err := WriteTextsCSV(e.Sources, d.Pool.Texts); err != nil {
		return e, err
	}
	if err := d.Checkpoint.Save(e.Model, safetensors.F64); err != nil {
		return e, fmt.Errorf("demo: saving checkpoint: %w", err)
	}
	if err := d.Vocab.SaveVocab(filepath.Join(e.Model, "vocab.txt")); err != nil {
		return e, fmt.Errorf("demo: saving vocabulary: %w", err)
	}
	return e, e.finish(dir, className(d.Pool), fmt.Sprintf("the data owner's %d mails (%s)", e.PoolSize, e.Sources),
		fmt.Sprintf("the public checkpoint, a tiny BERT with its vocab.txt (%s)", e.Model))
}

// Export writes the pretrained text demo for two organisations under dir
// (WriteFiles: the definitions as a CSV, the pretrained checkpoint as the
// data owner's -embedding, the fine-tuned target, the labeller and the
// model owner's own definitions as -public).
func (d *WordNetDemo) Export(dir string) (Export, error) {
	f, err := d.WriteFiles(dir)
	if err != nil {
		return Export{}, err
	}
	e := Export{Sources: f.Texts, Pool: filepath.Join(dir, "pool.jsonl.gz"), PoolSize: d.Pool.Len(),
		Embedding: f.Pretrained, Seq: d.Config.Seq, Model: f.Target, Labeller: f.Labeller, Answers: f.Answers,
		Public: f.Public, PublicSeq: d.Config.Seq}
	e.Mkpool = []string{"texts", "-csv", e.Sources, "-column", "text", "-out", e.Pool}
	e.Written = []string{fmt.Sprintf("the data owner's %d definitions (%s)", e.PoolSize, e.Sources),
		fmt.Sprintf("the public pretrained checkpoint (%s)", e.Embedding),
		fmt.Sprintf("the model owner's target, fine-tuned on %d labelled definitions (%s)", d.Public.Len(), e.Model),
		fmt.Sprintf("the model owner's labeller and its answers (%s, %s)", e.Labeller, e.Answers),
		fmt.Sprintf("the model owner's own texts (%s)", e.Public)}
	return e, nil
}

// finish writes the labeller with answers and lists the files written.
func (e *Export) finish(dir string, answers []string, written ...string) error {
	var err error
	if e.Labeller, e.Answers, err = WriteLabeller(dir, answers); err != nil {
		return err
	}
	e.Written = append(written, fmt.Sprintf("the model owner's labeller and its answers (%s, %s)", e.Labeller, e.Answers))
	return nil
}

// className returns the class name of each text of s.
func className(s *dataset.TextSet) []string {
	out := make([]string, len(s.Labels))
	for i, l := range s.Labels {
		out[i] = s.ClassNames[l]
	}
	return out
}

package party

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/wordpiece"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/pool"
)

// The files of a label request (see examples/README.md, "Labelling the
// bootstrap"): the model owner writes all but LabelsFile into the label
// directory, RequestFile last; the labeller writes LabelsFile.
const (
	// RequestFile describes the request as JSON (a LabelRequest).
	RequestFile = "request.json"
	// IndicesFile holds the points' pool indices, one per line, in order.
	IndicesFile = "indices.txt"
	// ClassesFile holds the model's class names, line c naming class c.
	ClassesFile = "classes.txt"
	// ImagePointsFile holds the points of an image pool, uncompressed
	// SFIMGS01 (package selection/pool).
	ImagePointsFile = "points.sfimg"
	// TextPointsFile holds the points of a text pool, uncompressed
	// selectformer-texts/1 JSON lines (package selection/pool).
	TextPointsFile = "points.jsonl"
	// ImagesDir holds one PNG per image point, <k>.png for point k.
	ImagesDir = "images"
	// LabelsFile is what the labeller writes: one class per line, line k
	// for point k (see ParseBootstrapLabels).
	LabelsFile = "labels.txt"
)

// LabelRequestFormat is the "format" of a RequestFile.
const LabelRequestFormat = "selectformer-label-request/1"

// DefaultLabelTimeout is the default of -label-timeout.
const DefaultLabelTimeout = time.Hour

// labelPoll is how often a label directory is looked at for LabelsFile;
// labelRemind how often the model owner repeats what it waits for.
var (
	labelPoll   = 200 * time.Millisecond
	labelRemind = 5 * time.Minute
)

// LabelRequest is the content of RequestFile: what is to be labelled and
// where. File names are relative to the label directory.
type LabelRequest struct {
	// Format is LabelRequestFormat.
	Format string `json:"format"`
	// Kind is the kind of the points: images or texts.
	Kind pool.Kind `json:"kind"`
	// Count is the number of points, and of labels to write.
	Count int `json:"count"`
	// Classes are the model's class names; a label is an index into them
	// (or one of them).
	Classes []string `json:"classes"`
	// Indices, Points and Images (images only) name the files written;
	// Labels names the file to write.
	Indices string `json:"indices"`
	Points  string `json:"points"`
	Images  string `json:"images,omitempty"`
	Labels  string `json:"labels"`
}

// LabelFlags are the model owner's ways of labelling the bootstrap sample:
// a label file for the whole pool (-labels, for demos), a command run on
// the exported sample (-label-cmd), or a hand-off through a directory
// (-label-dir); at most one of them.
type LabelFlags struct {
	Labels  string
	Cmd     string
	Dir     string
	Timeout time.Duration
	Vocab   string
}

// Register adds -labels, -label-cmd, -label-dir, -label-timeout and -vocab
// to fs.
func (f *LabelFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Labels, "labels", "", "labels of every pool candidate, one class number or name per line, line i for candidate i (a demo's oracle: only the bootstrap's lines are read); one of -labels, -label-cmd, -label-dir is required unless -proxies")
	fs.StringVar(&f.Cmd, "label-cmd", "", "label the bootstrap when it arrives by running this command (with /bin/sh -c) on the exported points: it reads $SELECTFORMER_POINTS (the points in the pool's format), $SELECTFORMER_INDICES (their pool indices), and writes $SELECTFORMER_LABELS, one class per line in the points' order, classes 0..$SELECTFORMER_CLASSES-1 or names from $SELECTFORMER_CLASS_NAMES (examples/README.md, \"Labelling the bootstrap\")")
	fs.StringVar(&f.Dir, "label-dir", "", "label the bootstrap when it arrives through this directory (made 0700 if missing): the points are written there (request.json last), then the model owner waits for DIR/labels.txt, one class per line in the points' order; write it as labels.txt.tmp and rename it (examples/README.md, \"Labelling the bootstrap\")")
	fs.DurationVar(&f.Timeout, "label-timeout", DefaultLabelTimeout, "how long -label-cmd may run, or how long to wait for -label-dir's labels.txt; past it the run stops with exit code 5 (restart with the same -state to label the same points again)")
	fs.StringVar(&f.Vocab, "vocab", "", "with -label-cmd or -label-dir and a text model: the WordPiece vocabulary that turns the bootstrap's token ids back into texts (default MODEL/vocab.txt); with -public texts, the one that tokenizes them (default MODEL/vocab.txt, else MODEL/tokenizer.json)")
}

// Check checks the combination of the flags: at most one way of labelling,
// exactly one unless proxies are given (then none of -label-cmd, -label-dir);
// -label-timeout only with -label-cmd or -label-dir, -vocab only with them or
// -public (the model owner's public texts). Problems are usage errors.
func (f *LabelFlags) Check(fs *flag.FlagSet, proxies bool) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var ways []string
	for _, w := range []struct{ name, v string }{{"labels", f.Labels}, {"label-cmd", f.Cmd}, {"label-dir", f.Dir}} {
		if set[w.name] {
			if strings.TrimSpace(w.v) == "" {
				return peer.Usage("flag -%s is empty", w.name)
			}
			ways = append(ways, "-"+w.name)
		}
	}
	switch {
	case len(ways) > 1:
		return peer.Usage("%s are mutually exclusive: label the bootstrap one way", strings.Join(ways, " and "))
	case proxies && (f.Cmd != "" || f.Dir != ""):
		return peer.Usage("%s is not used with -proxies (pre-generated proxies need no labels)", ways[0])
	case !proxies && len(ways) == 0:
		return peer.Usage("how to label the bootstrap is required: -label-cmd COMMAND, -label-dir DIR, or -labels FILE (every pool candidate's label, for demos)")
	}
	if f.Cmd == "" && f.Dir == "" {
		if set["label-timeout"] {
			return peer.Usage("-label-timeout applies to -label-cmd and -label-dir")
		}
		if set["vocab"] && !set["public"] {
			return peer.Usage("-vocab applies to -label-cmd, -label-dir and -public")
		}
	}
	if f.Timeout <= 0 {
		return peer.Usage("-label-timeout must be positive")
	}
	return nil
}

// Labeler returns the labelling function of the flags for target (poolSize
// candidates; modelDir holds its vocab.txt for a text model), with the
// command's input stdin and output out (its stdout and stderr). Errors are
// coded: an unreadable -labels or vocabulary, a model without classes, a
// -label-dir that cannot be made are ExitInput errors.
func (f *LabelFlags) Labeler(target *model.Model, modelDir string, poolSize int, stdin io.Reader, out io.Writer, log *slog.Logger) (selection.Labeler, error) {
	classes := target.Config.Labels
	if f.Labels != "" {
		oracle, err := pool.ReadLabels(f.Labels, classes)
		if err != nil {
			return nil, peer.WithCode(peer.ExitInput, err)
		}
		if len(oracle) != poolSize {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("%s has %d labels for a pool of %d (-labels names every candidate's class; to label only the bootstrap, use -label-cmd or -label-dir)", f.Labels, len(oracle), poolSize))
		}
		return OracleLabeler(oracle), nil
	}
	ex, err := NewExporter(target.Config, modelDir, f.Vocab)
	if err != nil {
		return nil, err
	}
	if f.Cmd != "" {
		c := &CommandLabeler{Command: f.Cmd, Exporter: ex, Timeout: f.Timeout, Stdin: stdin, Output: out, Logger: log}
		return c.Label, nil
	}
	// The hand-off directory is made now, so that a bad path stops the run
	// before any connection.
	if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("-label-dir: %w", err))
	}
	d := &DirLabeler{Dir: f.Dir, Exporter: ex, Timeout: f.Timeout, Logger: log}
	return d.Label, nil
}

// Exporter writes a bootstrap sample, as the model owner receives it (the
// model input of the target's checkpoint), in the pool's own format.
type Exporter struct {
	// Kind is the pool kind of the target's family.
	Kind pool.Kind
	// Classes are the target's class names.
	Classes []string
	// ImageSize and Channels are a ViT's input shape.
	ImageSize, Channels int
	// Vocab turns a text model's token ids back into texts.
	Vocab *wordpiece.Vocab
}

// NewExporter returns the exporter of a target with configuration cfg:
// images for a ViT, texts for a BERT or DistilBERT, whose vocabulary it
// loads (vocabPath, or modelDir/vocab.txt). A missing or unreadable
// vocabulary is an ExitInput error, a family without a pool format a usage
// error.
func NewExporter(cfg model.Config, modelDir, vocabPath string) (*Exporter, error) {
	if len(cfg.Labels) == 0 {
		return nil, peer.WithCode(peer.ExitInput, errors.New("the target model names no classes (config.json's id2label)"))
	}
	ex := &Exporter{Classes: cfg.Labels}
	switch cfg.Family {
	case model.ViT:
		if vocabPath != "" {
			return nil, peer.Usage("-vocab applies to text models; the target is a %s", cfg.Family)
		}
		if cfg.ImageSize <= 0 || cfg.ImageSize > pool.MaxImageSide || cfg.NumChannels < 1 {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("the target ViT's input (%d channels of %d×%d) has no image pool format", cfg.NumChannels, cfg.ImageSize, cfg.ImageSize))
		}
		ex.Kind, ex.ImageSize, ex.Channels = pool.KindImages, cfg.ImageSize, cfg.NumChannels
	case model.BERT, model.DistilBERT:
		tok, err := Tokenizer(modelDir, vocabPath)
		if err != nil {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("labelling the bootstrap of a text model writes its texts from their token ids: %w", err))
		}
		ex.Kind, ex.Vocab = pool.KindTexts, tok.Vocab()
	default:
		return nil, peer.Usage("the target's family %q has no pool format to export the bootstrap in", cfg.Family)
	}
	return ex, nil
}

// Write writes the points idx (pool indices) with inputs in into dir, which
// must exist: IndicesFile, ClassesFile, the points (ImagePointsFile and
// ImagesDir, or TextPointsFile), and RequestFile last, all mode 0600. It
// returns the request.
func (e *Exporter) Write(dir string, idx []int, in model.Input) (*LabelRequest, error) {
	if in.Len() != len(idx) {
		return nil, fmt.Errorf("export bootstrap: %d inputs for %d points (the data owner sent no pool?)", in.Len(), len(idx))
	}
	req := &LabelRequest{Format: LabelRequestFormat, Kind: e.Kind, Count: len(idx), Classes: e.Classes,
		Indices: IndicesFile, Labels: LabelsFile}
	var points bytes.Buffer
	switch e.Kind {
	case pool.KindImages:
		imgs, err := e.images(in)
		if err != nil {
			return nil, err
		}
		if err := pool.EncodeImages(&points, imgs); err != nil {
			return nil, fmt.Errorf("export bootstrap: %w", err)
		}
		if err := writePNGs(filepath.Join(dir, ImagesDir), imgs); err != nil {
			return nil, err
		}
		req.Points, req.Images = ImagePointsFile, ImagesDir
	case pool.KindTexts:
		texts, err := e.texts(in)
		if err != nil {
			return nil, err
		}
		if err := pool.EncodeTexts(&points, texts); err != nil {
			return nil, fmt.Errorf("export bootstrap: %w", err)
		}
		req.Points = TextPointsFile
	default:
		return nil, fmt.Errorf("export bootstrap: unknown kind %q", e.Kind)
	}
	// The pool encoders write gzip; the points are written plain, for
	// labelling scripts that read them directly.
	if err := atomicfile.WriteFunc(filepath.Join(dir, req.Points), 0o600, func(w io.Writer) error {
		zr, err := gzip.NewReader(&points)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, zr)
		return err
	}); err != nil {
		return nil, fmt.Errorf("export bootstrap: %w", err)
	}
	var ib strings.Builder
	for _, i := range idx {
		ib.WriteString(strconv.Itoa(i))
		ib.WriteByte('\n')
	}
	if err := atomicfile.Write(filepath.Join(dir, IndicesFile), []byte(ib.String()), 0o600); err != nil {
		return nil, fmt.Errorf("export bootstrap: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ClassesFile), []byte(strings.Join(e.Classes, "\n")+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("export bootstrap: %w", err)
	}
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("export bootstrap: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, RequestFile), append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("export bootstrap: %w", err)
	}
	return req, nil
}

// images turns a ViT's inputs (channels × size × size values normalised to
// [-1, 1], as pool.Pool.Input makes them) back into the pool's images,
// mapped to [0, 1] (values outside are clipped): grey images (one channel,
// SFIMGS01) when every point's channels are equal, as a grey pool's are,
// else colour images of the model's channels (SFIMGS02).
func (e *Exporter) images(in model.Input) (*pool.Images, error) {
	npix := e.ImageSize * e.ImageSize
	grey := true
	for k, row := range in.Pixels {
		if len(row) != e.Channels*npix {
			return nil, fmt.Errorf("export bootstrap: point %d has %d values, want %d (%d channels of %d×%d)", k, len(row), e.Channels*npix, e.Channels, e.ImageSize, e.ImageSize)
		}
		for c := 1; c < e.Channels && grey; c++ {
			grey = slices.Equal(row[:npix], row[c*npix:(c+1)*npix])
		}
	}
	channels := e.Channels
	if grey {
		channels = 1
	}
	out := &pool.Images{Width: e.ImageSize, Height: e.ImageSize, Pixels: make([][]float64, len(in.Pixels))}
	if channels > 1 {
		out.Channels = channels
	}
	for k, row := range in.Pixels {
		img := make([]float64, channels*npix)
		for j := range img {
			g := (row[j] + 1) / 2
			if !(g >= 0) { // NaN too
				g = 0
			}
			img[j] = math.Min(g, 1)
		}
		out.Pixels[k] = img
	}
	return out, nil
}

// texts turns a text model's token ids back into texts (Detokenize).
func (e *Exporter) texts(in model.Input) (*pool.Texts, error) {
	out := &pool.Texts{Texts: make([]string, len(in.IDs))}
	for k, ids := range in.IDs {
		var mask []int
		if in.Mask != nil {
			mask = in.Mask[k]
		}
		out.Texts[k] = Detokenize(e.Vocab, ids, mask)
	}
	return out, nil
}

// Detokenize writes the text the model sees in token ids: the tokens of the
// positions mask keeps (all if mask is nil), without [CLS], [SEP] and
// [PAD], joined by spaces, a "##" continuation glued to the token before.
// It is not the original text: WordPiece lower-cased it (for an uncased
// vocabulary), split off its punctuation, replaced unknown words by [UNK]
// and cut it to the sequence length. An id outside the vocabulary is
// written as [id N].
func Detokenize(v *wordpiece.Vocab, ids, mask []int) string {
	var b strings.Builder
	for i, id := range ids {
		if mask != nil && (i >= len(mask) || mask[i] == 0) {
			continue
		}
		if id == v.ClsID() || id == v.SepID() || id == v.PadID() {
			continue
		}
		tok, ok := v.Token(id)
		if !ok {
			tok = fmt.Sprintf("[id %d]", id)
		}
		if rest, cont := strings.CutPrefix(tok, "##"); cont && b.Len() > 0 {
			b.WriteString(rest)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// writePNGs writes image k of imgs as dir/<k>.png (8-bit grey, or RGB
// for colour images), replacing the directory's earlier PNGs.
func writePNGs(dir string, imgs *pool.Images) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("export bootstrap: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("export bootstrap: %w", err)
	}
	npix := imgs.Width * imgs.Height
	for k, px := range imgs.Pixels {
		var img image.Image
		if c := imgs.NumChannels(); c == 1 {
			g := image.NewGray(image.Rect(0, 0, imgs.Width, imgs.Height))
			for j, p := range px {
				g.Pix[j] = byte(math.Round(p * 255))
			}
			img = g
		} else {
			rgb := image.NewNRGBA(image.Rect(0, 0, imgs.Width, imgs.Height))
			for j := range npix {
				for ch := range 3 {
					rgb.Pix[4*j+ch] = byte(math.Round(px[min(ch, c-1)*npix+j] * 255))
				}
				rgb.Pix[4*j+3] = 255
			}
			img = rgb
		}
		if err := atomicfile.WriteFunc(filepath.Join(dir, strconv.Itoa(k)+".png"), 0o600, func(w io.Writer) error {
			return png.Encode(w, img)
		}); err != nil {
			return fmt.Errorf("export bootstrap: image %d: %w", k, err)
		}
	}
	return nil
}

// ParseBootstrapLabels parses a labeller's labels file for n points: one
// class per line, line k for point k, as a number in [0, len(classes)) or
// a class name (pool.ParseLabels: blank lines and lines starting with '#'
// are skipped). A file of other than n labels is an error.
func ParseBootstrapLabels(b []byte, classes []string, n int) ([]int, error) {
	l, err := pool.ParseLabels(b, classes)
	if err != nil {
		return nil, err
	}
	if len(l) != n {
		return nil, fmt.Errorf("%d labels for %d points: write one class per point, line k for point k (the order of %s)", len(l), n, IndicesFile)
	}
	return l, nil
}

// readBootstrapLabels reads and parses the labels file at path.
func readBootstrapLabels(path string, classes []string, n int) ([]int, error) {
	b, err := atomicfile.ReadLimited(path, pool.MaxLabelBytes)
	if err != nil {
		return nil, err
	}
	l, err := ParseBootstrapLabels(b, classes, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// CommandLabeler labels the bootstrap sample by running a command: it
// exports the points into a fresh 0700 directory, runs Command with /bin/sh
// -c in the current directory, with the environment variables below added,
// and reads the labels file the command wrote. The directory is removed
// afterwards.
//
//	SELECTFORMER_LABEL_DIR    the directory
//	SELECTFORMER_REQUEST      DIR/request.json (a LabelRequest)
//	SELECTFORMER_KIND         images or texts
//	SELECTFORMER_COUNT        the number of points
//	SELECTFORMER_POINTS       DIR/points.sfimg or DIR/points.jsonl
//	SELECTFORMER_IMAGES       DIR/images, <k>.png for point k (images only)
//	SELECTFORMER_INDICES      DIR/indices.txt
//	SELECTFORMER_CLASSES      the number of classes
//	SELECTFORMER_CLASS_NAMES  DIR/classes.txt
//	SELECTFORMER_LABELS       DIR/labels.txt, to be written
type CommandLabeler struct {
	// Command is the shell command line.
	Command string
	// Exporter writes the points.
	Exporter *Exporter
	// Timeout bounds the command's run; past it the command (its process
	// group) is killed.
	Timeout time.Duration
	// Stdin, Output are the command's standard input and output (its
	// stdout and stderr both go to Output); nil: none.
	Stdin  io.Reader
	Output io.Writer
	// Logger receives what happens (slog.Default() if nil).
	Logger *slog.Logger
}

// Label is the selection.Labeler. A failing or timed-out command is an
// ExitLabel error, a malformed labels file an ExitInput error; an
// interrupted run (ctx done) returns ctx's error.
func (c *CommandLabeler) Label(ctx context.Context, idx []int, in model.Input) ([]int, error) {
	log := logger(c.Logger)
	dir, err := os.MkdirTemp("", "selectformer-label-")
	if err != nil {
		return nil, fmt.Errorf("label: %w", err)
	}
	defer os.RemoveAll(dir)
	req, err := c.Exporter.Write(dir, idx, in)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"SELECTFORMER_LABEL_DIR="+dir,
		"SELECTFORMER_REQUEST="+filepath.Join(dir, RequestFile),
		"SELECTFORMER_KIND="+string(req.Kind),
		"SELECTFORMER_COUNT="+strconv.Itoa(req.Count),
		"SELECTFORMER_POINTS="+filepath.Join(dir, req.Points),
		"SELECTFORMER_INDICES="+filepath.Join(dir, req.Indices),
		"SELECTFORMER_CLASSES="+strconv.Itoa(len(req.Classes)),
		"SELECTFORMER_CLASS_NAMES="+filepath.Join(dir, ClassesFile),
		"SELECTFORMER_LABELS="+filepath.Join(dir, req.Labels),
	)
	if req.Images != "" {
		env = append(env, "SELECTFORMER_IMAGES="+filepath.Join(dir, req.Images))
	}
	log.Info("labelling the bootstrap: running the label command", "points", req.Count, "kind", req.Kind, "dir", dir, "command", c.Command, "timeout", c.Timeout)
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	err = runShell(tctx, c.Command, env, c.Stdin, c.Output)
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("labelling interrupted: %w", ctx.Err())
	case tctx.Err() != nil:
		return nil, peer.WithCode(peer.ExitLabel, fmt.Errorf("the label command did not finish within -label-timeout %v and was stopped: %s", c.Timeout, c.Command))
	case err != nil:
		return nil, peer.WithCode(peer.ExitLabel, fmt.Errorf("the label command failed (%v): %s", err, c.Command))
	}
	labels, err := readBootstrapLabels(filepath.Join(dir, req.Labels), req.Classes, req.Count)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, peer.WithCode(peer.ExitLabel, fmt.Errorf("the label command exited 0 but wrote no $SELECTFORMER_LABELS file: %s", c.Command))
	}
	if err != nil {
		return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("the label command's labels: %w", err))
	}
	log.Info("bootstrap labelled", "points", req.Count, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	return labels, nil
}

// DirLabeler labels the bootstrap sample through a directory: it exports
// the points into Dir (made 0700 if missing; RequestFile written last) and
// waits for Dir/labels.txt, which the labeller writes (atomically: as
// labels.txt.tmp, then renamed). A labels.txt there before the export is
// moved to labels.txt.stale; one that does not parse is moved to
// labels.txt.rejected, the reason logged, and the wait goes on.
type DirLabeler struct {
	// Dir is the hand-off directory.
	Dir string
	// Exporter writes the points.
	Exporter *Exporter
	// Timeout bounds the wait.
	Timeout time.Duration
	// Logger receives what happens (slog.Default() if nil).
	Logger *slog.Logger
}

// Label is the selection.Labeler. No labels within Timeout is an ExitLabel
// error; an interrupted run (ctx done) returns ctx's error.
func (d *DirLabeler) Label(ctx context.Context, idx []int, in model.Input) ([]int, error) {
	log := logger(d.Logger)
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("-label-dir: %w", err))
	}
	labelsPath := filepath.Join(d.Dir, LabelsFile)
	// A request of an earlier run must not be mistaken for this one.
	if err := os.Remove(filepath.Join(d.Dir, RequestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("-label-dir: %w", err))
	}
	if _, err := os.Stat(labelsPath); err == nil {
		if err := os.Rename(labelsPath, labelsPath+".stale"); err != nil {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("-label-dir: moving an earlier %s aside: %w", LabelsFile, err))
		}
		log.Warn("an earlier labels file was moved aside: it may not be this bootstrap's", "file", labelsPath+".stale")
	}
	req, err := d.Exporter.Write(d.Dir, idx, in)
	if err != nil {
		return nil, err
	}
	points := filepath.Join(d.Dir, req.Points)
	wait := func(left time.Duration) {
		log.Info("waiting for the bootstrap labels: write "+labelsPath+" with one class per line, line k for point k (0.."+strconv.Itoa(len(req.Classes)-1)+" or a name of "+filepath.Join(d.Dir, ClassesFile)+"), as "+LabelsFile+".tmp renamed to "+LabelsFile,
			"points", points, "indices", filepath.Join(d.Dir, IndicesFile), "count", req.Count, "left", left.Round(time.Second))
	}
	start := time.Now()
	wait(d.Timeout)
	timer := time.NewTimer(d.Timeout)
	defer timer.Stop()
	tick := time.NewTicker(labelPoll)
	defer tick.Stop()
	lastRemind := start
	// A file that does not parse is rejected only when seen unchanged at
	// the next look: one written in place may still be growing.
	var suspect fs.FileInfo
	for {
		labels, err := readBootstrapLabels(labelsPath, req.Classes, req.Count)
		switch {
		case err == nil:
			log.Info("bootstrap labelled", "points", req.Count, "file", labelsPath, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
			return labels, nil
		case errors.Is(err, fs.ErrNotExist):
			suspect = nil
		default:
			fi, serr := os.Stat(labelsPath)
			if serr == nil && (suspect == nil || fi.Size() != suspect.Size() || !fi.ModTime().Equal(suspect.ModTime())) {
				suspect = fi
				break
			}
			suspect = nil
			if rerr := os.Rename(labelsPath, labelsPath+".rejected"); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("%w (and moving it aside: %v)", err, rerr))
			}
			log.Error("labels file rejected (moved to "+LabelsFile+".rejected): fix it and write "+LabelsFile+" again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("labelling interrupted: %w", ctx.Err())
		case <-timer.C:
			return nil, peer.WithCode(peer.ExitLabel, fmt.Errorf("no labels in %s within -label-timeout %v (the %d points are in %s)", labelsPath, d.Timeout, req.Count, points))
		case now := <-tick.C:
			if now.Sub(lastRemind) >= labelRemind {
				lastRemind = now
				wait(d.Timeout - now.Sub(start))
			}
		}
	}
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

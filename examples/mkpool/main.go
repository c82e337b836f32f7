// Command mkpool builds a data owner's pool file (the -pool of command
// dataowner) from the data owner's own files, and an index file that maps
// each pool index back to its source, since a selection's result names pool
// indices.
//
// Images, from a directory of PNG and JPEG files (subdirectories included,
// names starting with "." left out), in the byte-wise order of their paths
// relative to the directory (name them 0001.png, 0002.png, ... to keep a
// numeric order):
//
//	mkpool images -dir photos/ -embedding checkpoint/ -out pool.sfimg.gz
//	mkpool images -dir digits/ -size 28 -channels 1 -out pool.sfimg.gz
//
// -embedding takes the size and channels from the checkpoint's config.json
// (image_size, num_channels); -size and -channels give them instead. An
// image of another size is refused with its name and both sizes, unless
// -resize scales every image (bilinear, as the Hugging Face ViT processor
// does). Colour becomes grey (luma) for one channel; grey is repeated for
// three.
//
// Texts, from one column of a CSV or TSV file (quoted fields may span
// lines), or from a file of one text per line:
//
//	mkpool texts -csv mails.csv -column text -out pool.jsonl.gz
//	mkpool texts -tsv reviews.tsv -column 2 -no-header -out pool.jsonl.gz
//	mkpool texts -lines sentences.txt -out pool.jsonl
//
// Empty texts (and blank lines) are left out; the index says which record
// or line each pool index is. The pool is gzip-compressed if -out ends in
// ".gz", plain otherwise. The index (-index, default: -out without its
// extensions plus ".index.csv") is CSV with the columns index, file, record,
// line. Existing files are kept unless -force is given. Exit codes are those
// of examples/README.md (0 ok, 1 failure, 2 usage error, 4 bad input file).
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection/pool"
)

// summary is the first line of -h.
const summary = "mkpool builds a data owner's pool file from a directory of PNG/JPEG images or from a CSV, TSV or plain-text file of texts, with an index of where each pool candidate came from."

// synopsis follows the summary in -h.
const synopsis = `  mkpool images -dir DIR (-embedding CHECKPOINT | -size N [-channels 1|3]) [-resize] -out POOL [-index INDEX] [-force]
  mkpool texts (-csv FILE | -tsv FILE | -lines FILE) [-column NAME|N] [-no-header] [-lazy-quotes] -out POOL [-index INDEX] [-force]

Images are taken in the byte-wise order of their paths relative to DIR; texts
in file order, empty ones left out. Pool index i is row i of the index file
(CSV: index,file,record,line). Run 'mkpool images -h' or 'mkpool texts -h'
for the flags.
`

func main() { peer.Exec("mkpool", summary, mkpool, nil) }

func mkpool(_ context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage of mkpool:\n%s", summary, synopsis)
	}
	if len(args) == 0 {
		return peer.Usage("missing subcommand: images or texts")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fs.Usage()
		return flag.ErrHelp
	case "images":
		return images(args[1:], stdout, stderr)
	case "texts":
		return texts(args[1:], stdout, stderr)
	}
	return peer.Usage("unknown subcommand %q: images or texts", args[0])
}

// subFlags returns the flag set of a subcommand, whose -h prints its
// summary and flags.
func subFlags(name, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mkpool "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "mkpool %s %s\n\nUsage of mkpool %s:\n", name, about, name)
		fs.PrintDefaults()
	}
	return fs
}

// outFlags are the output flags of both subcommands.
type outFlags struct {
	out, index *string
	force      *bool
}

func (o *outFlags) register(fs *flag.FlagSet, example string) {
	o.out = fs.String("out", "", "the pool file to write (gzip-compressed if it ends in .gz), e.g. "+example+"; required")
	o.index = fs.String("index", "", "the index file to write: pool index → source, CSV (default: -out without its extensions, plus .index.csv)")
	o.force = fs.Bool("force", false, "overwrite existing -out and -index files")
}

// paths checks the output flags and returns the pool and index paths.
func (o *outFlags) paths() (string, string, error) {
	if err := peer.Require("out", *o.out); err != nil {
		return "", "", err
	}
	index := *o.index
	if index == "" {
		base := filepath.Base(*o.out)
		if i := strings.IndexByte(base, '.'); i > 0 {
			base = base[:i]
		}
		index = filepath.Join(filepath.Dir(*o.out), base+".index.csv")
	}
	if filepath.Clean(index) == filepath.Clean(*o.out) {
		return "", "", peer.Usage("-index and -out name the same file %s", index)
	}
	if !*o.force {
		for _, p := range []string{*o.out, index} {
			if _, err := os.Stat(p); err == nil {
				return "", "", peer.Usage("%s exists; pass -force to overwrite it", p)
			}
		}
	}
	return *o.out, index, nil
}

// write writes the pool (encode writes it gzip-compressed; a name without
// ".gz" gets it plain) and the index, each atomically.
func write(path, index string, encode func(io.Writer) error, src []pool.Source) error {
	var buf bytes.Buffer
	if err := encode(&buf); err != nil {
		return err
	}
	err := atomicfile.WriteFunc(path, 0o644, func(w io.Writer) error {
		if strings.HasSuffix(strings.ToLower(path), ".gz") {
			_, err := w.Write(buf.Bytes())
			return err
		}
		zr, err := gzip.NewReader(&buf)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, zr)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the pool: %w", err)
	}
	if err := atomicfile.WriteFunc(index, 0o644, func(w io.Writer) error { return pool.WriteIndex(w, src) }); err != nil {
		return fmt.Errorf("writing the index: %w", err)
	}
	return nil
}

func images(args []string, stdout, stderr io.Writer) error {
	fs := subFlags("images", "builds an image pool from a directory of PNG and JPEG files (in the byte-wise order of their paths).", stderr)
	dir := fs.String("dir", "", "the directory of PNG and JPEG files (subdirectories included, names starting with . left out); required")
	emb := fs.String("embedding", "", "the ViT checkpoint (model directory) the pool is for: its image_size and num_channels give -size and -channels")
	size := fs.Int("size", 0, "the images' width and height in pixels (the checkpoint's image_size)")
	channels := fs.Int("channels", 0, "1 (grey) or 3 (RGB): the checkpoint's num_channels (default: the checkpoint's, else 1)")
	resize := fs.Bool("resize", false, "scale every image of another size to -size×-size (bilinear, aspect ratio not kept); without it such an image is an error")
	var o outFlags
	o.register(fs, "pool.sfimg.gz")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	if err := peer.Require("dir", *dir); err != nil {
		return err
	}
	if *size < 0 || *size > pool.MaxImageSide {
		return peer.Usage("flag -size %d outside 1..%d", *size, pool.MaxImageSide)
	}
	if *channels != 0 && *channels != 1 && *channels != 3 {
		return peer.Usage("flag -channels %d: want 1 (grey) or 3 (RGB)", *channels)
	}
	if *emb != "" {
		cfg, err := model.ReadConfig(filepath.Join(*emb, "config.json"))
		if err != nil {
			return peer.WithCode(peer.ExitInput, fmt.Errorf("reading the checkpoint: %w", err))
		}
		if cfg.Family != model.ViT {
			return peer.WithCode(peer.ExitInput, fmt.Errorf("checkpoint %s is a %s model, not a vit: an image pool is for a ViT checkpoint", *emb, cfg.Family))
		}
		if cfg.NumChannels != 1 && cfg.NumChannels != 3 {
			return peer.WithCode(peer.ExitInput, fmt.Errorf("checkpoint %s takes %d channels: mkpool builds 1 (grey) or 3 (RGB)", *emb, cfg.NumChannels))
		}
		if *size != 0 && *size != cfg.ImageSize || *channels != 0 && *channels != cfg.NumChannels {
			return peer.Usage("-size %d -channels %d do not fit checkpoint %s (image_size %d, num_channels %d): leave them out", *size, *channels, *emb, cfg.ImageSize, cfg.NumChannels)
		}
		*size, *channels = cfg.ImageSize, cfg.NumChannels
	}
	if *size == 0 {
		return peer.Usage("give the image size: -embedding CHECKPOINT or -size N")
	}
	*channels = max(*channels, 1)
	out, index, err := o.paths()
	if err != nil {
		return err
	}
	files, skipped, err := pool.ImageFiles(*dir)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "mkpool: left out %d files that are not .png, .jpg or .jpeg: %s\n", len(skipped), list(skipped))
	}
	s, src, err := pool.BuildImages(*dir, files, pool.ImageOptions{Width: *size, Height: *size, Channels: *channels, Resize: *resize})
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	if err := write(out, index, func(w io.Writer) error { return pool.EncodeImages(w, s) }, src); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mkpool: %s: %d images of %d×%d, %s, from %s; index %s\n", out, s.Len(), *size, *size, map[int]string{1: "grey", 3: "RGB"}[*channels], *dir, index)
	return nil
}

func texts(args []string, stdout, stderr io.Writer) error {
	fs := subFlags("texts", "builds a text pool from a column of a CSV or TSV file, or from a file of one text per line.", stderr)
	csvPath := fs.String("csv", "", "a CSV file (comma-separated, RFC 4180 quoting: quoted fields may hold commas, quotes \"\" and newlines)")
	tsvPath := fs.String("tsv", "", "a TSV file (tab-separated, the same quoting)")
	linesPath := fs.String("lines", "", "a plain-text file of one text per line (blank lines left out)")
	column := fs.String("column", "", "-csv/-tsv: the column of the texts, a header name or a field number from 1 (default: the only column)")
	noHeader := fs.Bool("no-header", false, "-csv/-tsv: the first record is a text, not a header (-column is then a number)")
	lazy := fs.Bool("lazy-quotes", false, "-csv/-tsv: accept quotes inside unquoted fields and undoubled quotes in quoted ones")
	var o outFlags
	o.register(fs, "pool.jsonl.gz")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	var path string
	var comma rune
	n := 0
	for _, f := range []struct {
		path  string
		comma rune
	}{{*csvPath, ','}, {*tsvPath, '\t'}, {*linesPath, 0}} {
		if f.path != "" {
			path, comma, n = f.path, f.comma, n+1
		}
	}
	if n != 1 {
		return peer.Usage("give exactly one of -csv, -tsv and -lines")
	}
	if comma == 0 && (*column != "" || *noHeader || *lazy) {
		return peer.Usage("flags -column, -no-header and -lazy-quotes apply to -csv and -tsv, not -lines")
	}
	if *noHeader && *column != "" {
		if k, err := strconv.Atoi(*column); err != nil || k < 1 {
			return peer.Usage("flag -column %q: with -no-header the column is a field number, from 1", *column)
		}
	}
	out, index, err := o.paths()
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	defer f.Close()
	var s *pool.Texts
	var src []pool.Source
	if comma == 0 {
		s, src, err = pool.ReadTextLines(f, path)
	} else {
		s, src, err = pool.ReadTextsCSV(f, path, pool.TextOptions{Comma: comma, Column: *column, NoHeader: *noHeader, LazyQuotes: *lazy})
	}
	if errors.Is(err, pool.ErrTooLarge) {
		err = fmt.Errorf("%w: %s holds more than the %d bytes of a text pool: split it into several pools", err, path, pool.MaxTextBytes)
	}
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	if err := write(out, index, func(w io.Writer) error { return pool.EncodeTexts(w, s) }, src); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "mkpool: %s: %d texts from %s; index %s\n", out, s.Len(), path, index)
	return nil
}

// list names the first few of names.
func list(names []string) string {
	const show = 5
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:show], ", ") + fmt.Sprintf(", … (%d more)", len(names)-show)
}

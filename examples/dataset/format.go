package dataset

import (
	"errors"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/selection/pool"
)

// The bundled subsets are stored in the public pool formats of package
// selection/pool (with labels): images as gzip'd "SFIMGS01", texts as gzip'd
// "selectformer-texts/1" JSON lines. These functions convert between the
// labelled sets of this package and that package's types; the encoding and
// its limits live there.

// EncodeImages writes s in the image format of package selection/pool
// (pool.EncodeImages): a gzip stream of "SFIMGS01", the count, width and
// height, one label byte per image and the uint8 pixels. Labels must lie in
// [0, 255], one per image.
func EncodeImages(w io.Writer, s *ImageSet) error {
	if len(s.Labels) != len(s.Images) {
		return fmt.Errorf("encode images: %d labels for %d images", len(s.Labels), len(s.Images))
	}
	return pool.EncodeImages(w, &pool.Images{Width: s.Width, Height: s.Height, Pixels: s.Images, Labels: s.Labels})
}

// DecodeImages reads the format written by EncodeImages (pool.DecodeImages);
// the images must be grey-scale.
func DecodeImages(r io.Reader) (*ImageSet, error) {
	s, err := pool.DecodeImages(r)
	if err != nil {
		return nil, err
	}
	if c := s.NumChannels(); c != 1 {
		return nil, fmt.Errorf("decode images: images of %d channels, not grey-scale", c)
	}
	return &ImageSet{Width: s.Width, Height: s.Height, Images: s.Pixels, Labels: s.Labels}, nil
}

// EncodeTexts writes s in the text format of package selection/pool
// (pool.EncodeTexts) as a labelled set: a gzip stream of JSON lines, first
// {"format":"selectformer-texts/1","class_names":[...]}, then one
// {"label":L,"text":T} per text.
func EncodeTexts(w io.Writer, s *TextSet) error {
	if len(s.ClassNames) == 0 {
		return errors.New("encode texts: 0 class names")
	}
	return pool.EncodeTexts(w, &pool.Texts{Texts: s.Texts, Labels: s.Labels, ClassNames: s.ClassNames})
}

// DecodeTexts reads the format written by EncodeTexts; the set must be
// labelled.
func DecodeTexts(r io.Reader) (*TextSet, error) {
	s, err := pool.DecodeTexts(r)
	if err != nil {
		return nil, err
	}
	if !s.Labelled() {
		return nil, errors.New("decode texts: no class_names: not a labelled set")
	}
	return &TextSet{Texts: s.Texts, Labels: s.Labels, ClassNames: s.ClassNames}, nil
}

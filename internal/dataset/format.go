package dataset

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// imagesMagic starts the uncompressed image format.
const imagesMagic = "SFIMGS01"

// Limits that keep a corrupt or hostile file from requesting huge buffers.
const (
	maxImageSide  = 4096
	maxImageBytes = 1 << 30
	maxTextLine   = 16 << 20
	maxClasses    = 1 << 16
)

// textsFormat names the text format in its header line.
const textsFormat = "selectformer-texts/1"

// EncodeImages writes s in the compact committed format: a gzip stream
// (deterministic: no name, no time stamp) of the magic "SFIMGS01", the image
// count (uint32 LE), width and height (uint16 LE each), one label byte per
// image, then width*height pixel bytes per image. Pixels are quantised to
// round(255*p); labels must lie in [0, 255].
func EncodeImages(w io.Writer, s *ImageSet) error {
	if s.Width <= 0 || s.Height <= 0 || s.Width > maxImageSide || s.Height > maxImageSide {
		return fmt.Errorf("encode images: invalid size %d×%d", s.Width, s.Height)
	}
	if len(s.Labels) != len(s.Images) {
		return fmt.Errorf("encode images: %d labels for %d images", len(s.Labels), len(s.Images))
	}
	if len(s.Images) > math.MaxUint32 {
		return fmt.Errorf("encode images: too many images (%d)", len(s.Images))
	}
	npix := s.Width * s.Height
	var raw bytes.Buffer
	raw.WriteString(imagesMagic)
	raw.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(s.Images))))
	raw.Write(binary.LittleEndian.AppendUint16(nil, uint16(s.Width)))
	raw.Write(binary.LittleEndian.AppendUint16(nil, uint16(s.Height)))
	for i, l := range s.Labels {
		if l < 0 || l > 255 {
			return fmt.Errorf("encode images: label %d of image %d outside [0, 255]", l, i)
		}
		raw.WriteByte(byte(l))
	}
	for i, img := range s.Images {
		if len(img) != npix {
			return fmt.Errorf("encode images: image %d has %d pixels, want %d", i, len(img), npix)
		}
		for j, p := range img {
			if !(p >= 0 && p <= 1) {
				return fmt.Errorf("encode images: image %d pixel %d = %v outside [0, 1]", i, j, p)
			}
			raw.WriteByte(byte(math.Round(p * 255)))
		}
	}
	return writeGzip(w, raw.Bytes())
}

// DecodeImages reads the format written by EncodeImages.
func DecodeImages(r io.Reader) (*ImageSet, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	defer zr.Close()
	var hdr [16]byte
	if _, err := io.ReadFull(zr, hdr[:]); err != nil {
		return nil, fmt.Errorf("decode images: header: %w", err)
	}
	if string(hdr[:8]) != imagesMagic {
		return nil, fmt.Errorf("decode images: bad magic %q", hdr[:8])
	}
	n := int(binary.LittleEndian.Uint32(hdr[8:]))
	w := int(binary.LittleEndian.Uint16(hdr[12:]))
	h := int(binary.LittleEndian.Uint16(hdr[14:]))
	if w == 0 || h == 0 || w > maxImageSide || h > maxImageSide {
		return nil, fmt.Errorf("decode images: invalid size %d×%d", w, h)
	}
	want := uint64(n) * uint64(1+w*h)
	if want > maxImageBytes {
		return nil, fmt.Errorf("decode images: %d images of %d×%d exceed the %d-byte limit", n, w, h, maxImageBytes)
	}
	// ReadAll grows with the data actually present, so a header that lies
	// about the count cannot force a large allocation.
	body, err := io.ReadAll(io.LimitReader(zr, int64(want)+1))
	if err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	if uint64(len(body)) != want {
		return nil, fmt.Errorf("decode images: %d bytes of labels and pixels, want %d for %d images of %d×%d", len(body), want, n, w, h)
	}
	s := &ImageSet{Width: w, Height: h, Images: make([][]float64, n), Labels: make([]int, n)}
	pix := make([]float64, n*w*h)
	for i := 0; i < n; i++ {
		s.Labels[i] = int(body[i])
		img := pix[i*w*h : (i+1)*w*h : (i+1)*w*h]
		for j, b := range body[n+i*w*h : n+(i+1)*w*h] {
			img[j] = float64(b) / 255
		}
		s.Images[i] = img
	}
	return s, nil
}

// textsHeader is the first line of the text format.
type textsHeader struct {
	Format     string   `json:"format"`
	ClassNames []string `json:"class_names"`
}

// textRecord is one line of the text format after the header.
type textRecord struct {
	Label int    `json:"label"`
	Text  string `json:"text"`
}

// EncodeTexts writes s in the compact committed format: a gzip stream
// (deterministic) of JSON lines, first {"format":"selectformer-texts/1",
// "class_names":[...]}, then one {"label":L,"text":T} per text. Texts must be
// valid UTF-8.
func EncodeTexts(w io.Writer, s *TextSet) error {
	if len(s.Labels) != len(s.Texts) {
		return fmt.Errorf("encode texts: %d labels for %d texts", len(s.Labels), len(s.Texts))
	}
	if len(s.ClassNames) == 0 || len(s.ClassNames) > maxClasses {
		return fmt.Errorf("encode texts: %d class names", len(s.ClassNames))
	}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(textsHeader{Format: textsFormat, ClassNames: s.ClassNames}); err != nil {
		return fmt.Errorf("encode texts: %w", err)
	}
	for i, t := range s.Texts {
		if s.Labels[i] < 0 || s.Labels[i] >= len(s.ClassNames) {
			return fmt.Errorf("encode texts: text %d has label %d outside [0, %d)", i, s.Labels[i], len(s.ClassNames))
		}
		if !utf8.ValidString(t) {
			return fmt.Errorf("encode texts: text %d is not valid UTF-8", i)
		}
		if len(t) > maxTextLine/2 {
			return fmt.Errorf("encode texts: text %d is too long (%d bytes)", i, len(t))
		}
		if err := enc.Encode(textRecord{Label: s.Labels[i], Text: t}); err != nil {
			return fmt.Errorf("encode texts: text %d: %w", i, err)
		}
	}
	return writeGzip(w, raw.Bytes())
}

// DecodeTexts reads the format written by EncodeTexts.
func DecodeTexts(r io.Reader) (*TextSet, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("decode texts: %w", err)
	}
	defer zr.Close()
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), maxTextLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("decode texts: header: %w", err)
		}
		return nil, errors.New("decode texts: missing header line")
	}
	var hdr textsHeader
	if err := strictUnmarshal(sc.Bytes(), &hdr); err != nil {
		return nil, fmt.Errorf("decode texts: header: %w", err)
	}
	if hdr.Format != textsFormat {
		return nil, fmt.Errorf("decode texts: unknown format %q", hdr.Format)
	}
	if len(hdr.ClassNames) == 0 || len(hdr.ClassNames) > maxClasses {
		return nil, fmt.Errorf("decode texts: %d class names", len(hdr.ClassNames))
	}
	s := &TextSet{ClassNames: hdr.ClassNames, Texts: []string{}, Labels: []int{}}
	for line := 2; sc.Scan(); line++ {
		var rec textRecord
		if err := strictUnmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("decode texts: line %d: %w", line, err)
		}
		if rec.Label < 0 || rec.Label >= len(hdr.ClassNames) {
			return nil, fmt.Errorf("decode texts: line %d: label %d outside [0, %d)", line, rec.Label, len(hdr.ClassNames))
		}
		s.Texts = append(s.Texts, rec.Text)
		s.Labels = append(s.Labels, rec.Label)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("decode texts: %w", err)
	}
	return s, nil
}

// strictUnmarshal decodes one JSON value, rejecting unknown fields and
// trailing data.
func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after JSON value")
	}
	return nil
}

// writeGzip compresses b with a header carrying no name or time, so the
// output depends only on b (and the compress/flate implementation).
func writeGzip(w io.Writer, b []byte) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if _, err := zw.Write(b); err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	return nil
}

package pool

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// ImagesMagic starts the (decompressed) image format.
const ImagesMagic = "SFIMGS01"

// imagesHeaderLen is the length of the image format's fixed header.
const imagesHeaderLen = 16

// Limits on what the decoders accept.
const (
	// MaxItems bounds the number of images or texts in one file.
	MaxItems = 1 << 22
	// MaxImageSide bounds an image's width and height.
	MaxImageSide = 4096
	// MaxImageBytes bounds the label and pixel bytes of an image file,
	// N·(1+W·H), after decompression.
	MaxImageBytes = 512 << 20
	// MaxTextBytes bounds a text file after decompression.
	MaxTextBytes = 512 << 20
	// MaxLineBytes bounds one line of a text file.
	MaxLineBytes = 16 << 20
	// MaxClasses bounds the class names of a labelled text file.
	MaxClasses = 1 << 16
)

// Images is a set of grey-scale images of one size. Each image holds
// Width·Height pixels in [0, 1], row-major. Labels, if not nil, holds one
// class in [0, 255] per image.
type Images struct {
	Width, Height int
	Pixels        [][]float64
	Labels        []int
}

// Len returns the number of images.
func (s *Images) Len() int { return len(s.Pixels) }

// EncodeImages writes s in the image format (see the package comment),
// gzip-compressed. Pixels are quantised to round(255·p); nil Labels are
// written as 0s.
func EncodeImages(w io.Writer, s *Images) error {
	if s.Width <= 0 || s.Height <= 0 || s.Width > MaxImageSide || s.Height > MaxImageSide {
		return fmt.Errorf("encode images: invalid size %d×%d", s.Width, s.Height)
	}
	n := len(s.Pixels)
	if s.Labels != nil && len(s.Labels) != n {
		return fmt.Errorf("encode images: %d labels for %d images", len(s.Labels), n)
	}
	npix := s.Width * s.Height
	if n > MaxItems || uint64(n)*uint64(1+npix) > MaxImageBytes {
		return fmt.Errorf("encode images: %d images of %d×%d exceed the limits (%d images, %d bytes)", n, s.Width, s.Height, MaxItems, MaxImageBytes)
	}
	raw := make([]byte, 0, imagesHeaderLen+n*(1+npix))
	raw = append(raw, ImagesMagic...)
	raw = binary.LittleEndian.AppendUint32(raw, uint32(n))
	raw = binary.LittleEndian.AppendUint16(raw, uint16(s.Width))
	raw = binary.LittleEndian.AppendUint16(raw, uint16(s.Height))
	for i := range n {
		l := 0
		if s.Labels != nil {
			l = s.Labels[i]
		}
		if l < 0 || l > 255 {
			return fmt.Errorf("encode images: label %d of image %d outside [0, 255]", l, i)
		}
		raw = append(raw, byte(l))
	}
	for i, img := range s.Pixels {
		if len(img) != npix {
			return fmt.Errorf("encode images: image %d has %d pixels, want %d", i, len(img), npix)
		}
		for j, p := range img {
			if !(p >= 0 && p <= 1) {
				return fmt.Errorf("encode images: image %d pixel %d = %v outside [0, 1]", i, j, p)
			}
			raw = append(raw, byte(math.Round(p*255)))
		}
	}
	if err := writeGzip(w, raw); err != nil {
		return fmt.Errorf("encode images: %w", err)
	}
	return nil
}

// DecodeImages reads the image format, gzip-compressed or not. The labels
// are returned as stored (a pool's are 0s).
func DecodeImages(r io.Reader) (*Images, error) {
	rd, closeFn, err := decompress(r, MaxImageBytes+imagesHeaderLen)
	if err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	defer closeFn()
	s, err := decodeImages(rd)
	if err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	return s, nil
}

func decodeImages(r io.Reader) (*Images, error) {
	var hdr [imagesHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if string(hdr[:8]) != ImagesMagic {
		return nil, fmt.Errorf("bad magic %q", hdr[:8])
	}
	n := uint64(binary.LittleEndian.Uint32(hdr[8:]))
	w := int(binary.LittleEndian.Uint16(hdr[12:]))
	h := int(binary.LittleEndian.Uint16(hdr[14:]))
	if w == 0 || h == 0 || w > MaxImageSide || h > MaxImageSide {
		return nil, fmt.Errorf("invalid size %d×%d", w, h)
	}
	want := n * uint64(1+w*h)
	if n > MaxItems || want > MaxImageBytes {
		return nil, fmt.Errorf("%d images of %d×%d exceed the limits (%d images, %d bytes)", n, w, h, MaxItems, MaxImageBytes)
	}
	// ReadAll grows with the data actually present, so a header that lies
	// about the count cannot force a large allocation.
	body, err := io.ReadAll(io.LimitReader(r, int64(want)+1))
	if err != nil {
		return nil, err
	}
	if uint64(len(body)) != want {
		return nil, fmt.Errorf("%d bytes of labels and pixels, want %d for %d images of %d×%d", len(body), want, n, w, h)
	}
	cnt, npix := int(n), w*h
	s := &Images{Width: w, Height: h, Pixels: make([][]float64, cnt), Labels: make([]int, cnt)}
	pix := make([]float64, cnt*npix)
	for i := range cnt {
		s.Labels[i] = int(body[i])
		img := pix[i*npix : (i+1)*npix : (i+1)*npix]
		for j, b := range body[cnt+i*npix : cnt+(i+1)*npix] {
			img[j] = float64(b) / 255
		}
		s.Pixels[i] = img
	}
	return s, nil
}

// isImages reports whether a decompressed stream starting with b is in the
// image format.
func isImages(b []byte) bool { return bytes.HasPrefix(b, []byte(ImagesMagic)) }

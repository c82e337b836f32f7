package pool

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// ImagesMagic starts the (decompressed) grey-scale image format;
// ImagesMagicChannels the one with a channel count (colour images).
const (
	ImagesMagic         = "SFIMGS01"
	ImagesMagicChannels = "SFIMGS02"
)

// imagesHeaderLen is the length of the image format's fixed header;
// SFIMGS02 adds the 2-byte channel count.
const imagesHeaderLen = 16

// Limits on what the decoders accept.
const (
	// MaxItems bounds the number of images or texts in one file.
	MaxItems = 1 << 22
	// MaxImageSide bounds an image's width and height.
	MaxImageSide = 4096
	// MaxImageChannels bounds the channels of an image.
	MaxImageChannels = 4
	// MaxImageBytes bounds the label and pixel bytes of an image file,
	// N·(1+C·W·H), after decompression.
	MaxImageBytes = 512 << 20
	// MaxTextBytes bounds a text file after decompression.
	MaxTextBytes = 512 << 20
	// MaxLineBytes bounds one line of a text file.
	MaxLineBytes = 16 << 20
	// MaxClasses bounds the class names of a labelled text file.
	MaxClasses = 1 << 16
)

// Images is a set of images of one size and number of channels. Each image
// holds Channels·Height·Width values in [0, 1]: channel after channel (for
// colour images red, green, blue), each row-major. Channels 0 means 1 (grey
// scale). Labels, if not nil, holds one class in [0, 255] per image.
type Images struct {
	Width, Height int
	Channels      int
	Pixels        [][]float64
	Labels        []int
	// Raw, if set, holds each image's pixel bytes as its file stores them
	// (the decoders keep them: 1/8 of Pixels' memory), which AppendItem
	// returns without converting Pixels again. Whoever changes Pixels must
	// clear or update Raw.
	Raw [][]byte
}

// Len returns the number of images.
func (s *Images) Len() int { return len(s.Pixels) }

// NumChannels returns the number of channels: Channels, or 1 if it is 0.
func (s *Images) NumChannels() int { return max(s.Channels, 1) }

// EncodeImages writes s in the image format (see the package comment),
// gzip-compressed: "SFIMGS01" for grey-scale images (Channels 0 or 1), else
// "SFIMGS02". Pixels are quantised to round(255·p); nil Labels are written
// as 0s.
func EncodeImages(w io.Writer, s *Images) error {
	if s.Width <= 0 || s.Height <= 0 || s.Width > MaxImageSide || s.Height > MaxImageSide {
		return fmt.Errorf("encode images: invalid size %d×%d", s.Width, s.Height)
	}
	if s.Channels < 0 || s.Channels > MaxImageChannels {
		return fmt.Errorf("encode images: %d channels outside [1, %d]", s.Channels, MaxImageChannels)
	}
	n, c := len(s.Pixels), s.NumChannels()
	if s.Labels != nil && len(s.Labels) != n {
		return fmt.Errorf("encode images: %d labels for %d images", len(s.Labels), n)
	}
	npix := c * s.Width * s.Height
	if n > MaxItems || uint64(n)*uint64(1+npix) > MaxImageBytes {
		return fmt.Errorf("encode images: %d images of %d×%d×%d exceed the limits (%d images, %d bytes)", n, c, s.Width, s.Height, MaxItems, MaxImageBytes)
	}
	raw := make([]byte, 0, imagesHeaderLen+2+n*(1+npix))
	raw = appendImagesHeader(raw, n, s.Width, s.Height, c)
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
			return fmt.Errorf("encode images: image %d has %d pixels, want %d (%d channels of %d×%d)", i, len(img), npix, c, s.Width, s.Height)
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

// appendImagesHeader appends the header of n images of w×h and c channels:
// SFIMGS01 for one channel, SFIMGS02 with the channel count otherwise.
func appendImagesHeader(b []byte, n, w, h, c int) []byte {
	magic := ImagesMagic
	if c > 1 {
		magic = ImagesMagicChannels
	}
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint16(b, uint16(w))
	b = binary.LittleEndian.AppendUint16(b, uint16(h))
	if c > 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(c))
	}
	return b
}

// DecodeImages reads the image format, gzip-compressed or not. The labels
// are returned as stored (a pool's are 0s).
func DecodeImages(r io.Reader) (*Images, error) {
	rd, closeFn, err := decompress(r, MaxImageBytes+imagesHeaderLen+2)
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
	c := 1
	switch string(hdr[:8]) {
	case ImagesMagic:
	case ImagesMagicChannels:
		var cb [2]byte
		if _, err := io.ReadFull(r, cb[:]); err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		if c = int(binary.LittleEndian.Uint16(cb[:])); c < 1 || c > MaxImageChannels {
			return nil, fmt.Errorf("%d channels outside [1, %d]", c, MaxImageChannels)
		}
	default:
		return nil, fmt.Errorf("bad magic %q", hdr[:8])
	}
	n := uint64(binary.LittleEndian.Uint32(hdr[8:]))
	w := int(binary.LittleEndian.Uint16(hdr[12:]))
	h := int(binary.LittleEndian.Uint16(hdr[14:]))
	if w == 0 || h == 0 || w > MaxImageSide || h > MaxImageSide {
		return nil, fmt.Errorf("invalid size %d×%d", w, h)
	}
	want := n * uint64(1+c*w*h)
	if n > MaxItems || want > MaxImageBytes {
		return nil, fmt.Errorf("%d images of %d×%d×%d exceed the limits (%d images, %d bytes)", n, c, w, h, MaxItems, MaxImageBytes)
	}
	// ReadAll grows with the data actually present, so a header that lies
	// about the count cannot force a large allocation.
	body, err := io.ReadAll(io.LimitReader(r, int64(want)+1))
	if err != nil {
		return nil, err
	}
	if uint64(len(body)) != want {
		return nil, fmt.Errorf("%d bytes of labels and pixels, want %d for %d images of %d×%d×%d", len(body), want, n, c, w, h)
	}
	cnt, npix := int(n), c*w*h
	s := &Images{Width: w, Height: h, Pixels: make([][]float64, cnt), Labels: make([]int, cnt), Raw: make([][]byte, cnt)}
	if c > 1 {
		s.Channels = c
	}
	pix := make([]float64, cnt*npix)
	for i := range cnt {
		s.Labels[i] = int(body[i])
		img := pix[i*npix : (i+1)*npix : (i+1)*npix]
		raw := body[cnt+i*npix : cnt+(i+1)*npix : cnt+(i+1)*npix]
		for j, b := range raw {
			img[j] = float64(b) / 255
		}
		s.Pixels[i], s.Raw[i] = img, raw
	}
	return s, nil
}

// isImages reports whether a decompressed stream starting with b is in the
// image format.
func isImages(b []byte) bool {
	return bytes.HasPrefix(b, []byte(ImagesMagic)) || bytes.HasPrefix(b, []byte(ImagesMagicChannels))
}

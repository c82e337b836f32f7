package pool

import (
	"fmt"
	"unicode/utf8"
)

// A candidate's canonical bytes are what the data owner commits to, sends
// with the bootstrap and delivers after a purchase (package
// selection/purchase): the bytes mkpool writes for it. An image's are its
// pixels as the image format stores them, one byte round(255·p) each,
// channel after channel, each row-major (C·H·W bytes); a text's are its
// UTF-8 bytes (the format's JSON line escapes them; the text is what it
// holds).

// AppendItem appends candidate i's canonical bytes to dst; with Len it
// makes a Pool the purchase.Items of a commitment. An image's are its Raw
// bytes where the decoder kept them, else its Pixels converted (a pixel
// outside [0, 1] is an error).
func (p *Pool) AppendItem(dst []byte, i int) ([]byte, error) {
	if i < 0 || i >= p.Len() {
		return dst, fmt.Errorf("pool: candidate %d of %d", i, p.Len())
	}
	if p.Images != nil {
		if raw := p.Images.Raw; len(raw) == p.Len() && len(raw[i]) == len(p.Images.Pixels[i]) {
			return append(dst, raw[i]...), nil
		}
		px := p.Images.Pixels[i]
		n := len(dst)
		dst = append(dst, make([]byte, len(px))...)
		for j, v := range px {
			if !(v >= 0 && v <= 1) {
				return dst[:n], fmt.Errorf("pool: image %d pixel %d = %v outside [0, 1]", i, j, v)
			}
			dst[n+j] = roundByte(v * 255)
		}
		return dst, nil
	}
	return append(dst, p.Texts.Texts[i]...), nil
}

// roundByte is byte(math.Round(x)) for x in [0, 255] (EncodeImages'
// rounding), without math.Round's cost: x + 0.5 truncated, less one where
// the addition itself rounded up past a half.
func roundByte(x float64) byte {
	r := byte(x + 0.5)
	if x < float64(r)-0.5 {
		r--
	}
	return r
}

// FromItems returns the pool of kind that holds items, candidates' canonical
// bytes (see AppendItem): images of width × height, each of C·width·height
// bytes for a C of 1..MaxImageChannels that every image shares, or UTF-8
// texts of at most MaxLineBytes/2 bytes. It is how the model owner turns
// the candidates it bought (or the bootstrap's) into a pool, and so into
// the model's input (Pool.Input).
func FromItems(kind Kind, width, height int, items [][]byte) (*Pool, error) {
	if len(items) == 0 || len(items) > MaxItems {
		return nil, fmt.Errorf("pool: %d items (1..%d)", len(items), MaxItems)
	}
	switch kind {
	case KindImages:
		if width < 1 || height < 1 || width > MaxImageSide || height > MaxImageSide {
			return nil, fmt.Errorf("pool: images of %d×%d", width, height)
		}
		wh := width * height
		c := len(items[0]) / wh
		if c < 1 || c > MaxImageChannels {
			return nil, fmt.Errorf("pool: an item of %d bytes is no image of %d×%d", len(items[0]), width, height)
		}
		s := &Images{Width: width, Height: height, Pixels: make([][]float64, len(items))}
		if c > 1 {
			s.Channels = c
		}
		for i, b := range items {
			if len(b) != c*wh {
				return nil, fmt.Errorf("pool: item %d has %d bytes, not an image of %d×%d×%d", i, len(b), c, width, height)
			}
			px := make([]float64, len(b))
			for j, v := range b {
				px[j] = float64(v) / 255
			}
			s.Pixels[i] = px
		}
		s.Raw = items
		return &Pool{Images: s}, nil
	case KindTexts:
		s := &Texts{Texts: make([]string, len(items))}
		for i, b := range items {
			if len(b) > MaxLineBytes/2 || !utf8.Valid(b) {
				return nil, fmt.Errorf("pool: item %d is no text (%d bytes, UTF-8 %v)", i, len(b), utf8.Valid(b))
			}
			s.Texts[i] = string(b)
		}
		return &Pool{Texts: s}, nil
	}
	return nil, fmt.Errorf("pool: kind %q", kind)
}

package pool

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

// Kind names a pool's format.
type Kind string

// The pool kinds.
const (
	KindImages Kind = "images"
	KindTexts  Kind = "texts"
)

// Pool is a decoded pool file: exactly one of Images and Texts is set.
type Pool struct {
	Images *Images
	Texts  *Texts
}

// Kind returns the pool's kind.
func (p *Pool) Kind() Kind {
	if p.Images != nil {
		return KindImages
	}
	return KindTexts
}

// Len returns the number of candidates.
func (p *Pool) Len() int {
	switch {
	case p.Images != nil:
		return p.Images.Len()
	case p.Texts != nil:
		return p.Texts.Len()
	}
	return 0
}

// ErrTooLarge is returned (wrapped) when a file exceeds MaxImageBytes or
// MaxTextBytes after decompression.
var ErrTooLarge = errors.New("file exceeds the size limit")

// Read reads a pool in either format, gzip-compressed or not, detecting
// which from its first bytes: "SFIMGS01" starts an image pool, "{" (after
// optional white space) a text pool. A pool must hold at least one
// candidate.
func Read(r io.Reader) (*Pool, error) {
	rd, closeFn, err := decompress(r, max(MaxImageBytes+imagesHeaderLen+2, MaxTextBytes))
	if err != nil {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	defer closeFn()
	head, err := rd.Peek(len(ImagesMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	p := &Pool{}
	switch {
	case isImages(head):
		if p.Images, err = decodeImages(rd); err != nil {
			return nil, fmt.Errorf("read pool: images: %w", err)
		}
	case isTexts(head):
		if p.Texts, err = decodeTexts(rd); err != nil {
			return nil, fmt.Errorf("read pool: texts: %w", err)
		}
	default:
		return nil, fmt.Errorf("read pool: unknown format (starts %q): want an image pool (%q or %q) or a text pool (JSON lines, %q), optionally gzip'd", head, ImagesMagic, ImagesMagicChannels, TextsFormat)
	}
	if p.Len() == 0 {
		return nil, fmt.Errorf("read pool: no %s", p.Kind())
	}
	return p, nil
}

// ReadFile reads the pool file at path (see Read).
func ReadFile(path string) (*Pool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read pool: %w", err)
	}
	defer f.Close()
	p, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// gzipMagic starts every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// decompress returns r's content, gunzipped if r starts with the gzip magic,
// cut off with ErrTooLarge past limit bytes.
func decompress(r io.Reader, limit int64) (*bufio.Reader, func(), error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(gzipMagic))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, err
	}
	if !bytes.Equal(head, gzipMagic) {
		return bufio.NewReader(&capReader{r: br, left: limit}), func() {}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, nil, fmt.Errorf("gzip: %w", err)
	}
	return bufio.NewReader(&capReader{r: zr, left: limit}), func() { zr.Close() }, nil
}

// capReader reads at most left bytes from r and fails with ErrTooLarge if r
// has more.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(c.r, one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
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

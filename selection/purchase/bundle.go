package purchase

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// BundleMagic starts every bundle.
const BundleMagic = "SFBUNDL1"

// A bundle's header, all integers little-endian (the records follow, each
// an opening as AppendOpening encodes it, in ascending pool index; nothing
// may follow the last):
//
//	offset  size  field
//	0       8     magic, the ASCII bytes "SFBUNDL1"
//	8       32    the root of the session's commitment
//	40      8     N, the pool size (uint64)
//	48      8     M, the number of records (uint64, at most N)
//	56      1     the items' kind: 0 bytes, 1 images, 2 texts (ItemKind)
//	57      2     images: the width (uint16; 0 otherwise)
//	59      2     images: the height (uint16)
//	61      2     images: the channels (uint16)
const bundleHeaderLen = 63

// ItemKind says how a bundle's items are to be read.
type ItemKind uint8

// The item kinds: the canonical bytes of package selection/pool.
const (
	// KindBytes: opaque bytes.
	KindBytes ItemKind = 0
	// KindImages: an image's pixels, one byte each (value byte/255),
	// channel after channel, each row-major (pool's "SFIMGS" pixels).
	KindImages ItemKind = 1
	// KindTexts: a text in UTF-8.
	KindTexts ItemKind = 2
)

// MaxImageSide bounds an image's width and height in a bundle header.
const MaxImageSide = 4096

// Format describes a bundle's items: their kind and, for images, their
// shape (each item then holds Channels·Height·Width bytes).
type Format struct {
	Kind                    ItemKind
	Width, Height, Channels int
}

// ItemBytes is the length of an item of format f: C·H·W for images, 0 (any)
// otherwise.
func (f Format) ItemBytes() int {
	if f.Kind != KindImages {
		return 0
	}
	return f.Width * f.Height * f.Channels
}

// check refuses a kind outside the set, or an image shape outside 1..4096
// (channels 1..4).
func (f Format) check() error {
	switch f.Kind {
	case KindBytes, KindTexts:
		if f.Width != 0 || f.Height != 0 || f.Channels != 0 {
			return fmt.Errorf("%w: a shape for items of kind %d", errFormat, f.Kind)
		}
	case KindImages:
		if f.Width < 1 || f.Width > MaxImageSide || f.Height < 1 || f.Height > MaxImageSide || f.Channels < 1 || f.Channels > 4 {
			return fmt.Errorf("%w: images of %d×%d×%d", errFormat, f.Width, f.Height, f.Channels)
		}
	default:
		return fmt.Errorf("%w: item kind %d", errFormat, f.Kind)
	}
	return nil
}

// Header is what a bundle says of itself before its records.
type Header struct {
	// Root is the commitment the records open.
	Root Root
	// PoolSize is the committed pool's size.
	PoolSize int
	// Count is the number of records.
	Count int
	// Format describes the items.
	Format Format
}

// WriteBundle writes the bundle of the candidates indices (ascending,
// distinct) of the pool committed to by t: the header, then each one's
// opening, streamed (one item in memory at a time).
func WriteBundle(w io.Writer, t *Tree, indices []int, f Format) error {
	for k, i := range indices {
		if i < 0 || i >= t.n || k > 0 && i <= indices[k-1] {
			return fmt.Errorf("purchase: bundle: indices not ascending and distinct in 0..%d", t.n-1)
		}
	}
	bw, err := NewBundleWriter(w, Header{Root: t.root, PoolSize: t.n, Count: len(indices), Format: f})
	if err != nil {
		return err
	}
	for _, i := range indices {
		op, err := t.Open(i)
		if err != nil {
			return fmt.Errorf("purchase: bundle: %w", err)
		}
		if err := bw.Write(op); err != nil {
			return err
		}
	}
	return bw.Close()
}

// BundleWriter writes a bundle record by record. WriteBundle is the data
// owner's honest use of it; it writes whatever openings it is given, in
// the order given (tests write dishonest bundles with it).
type BundleWriter struct {
	bw      *bufio.Writer
	h       Header
	written int
	rec     []byte
}

// NewBundleWriter writes h and returns the writer of its h.Count records.
func NewBundleWriter(w io.Writer, h Header) (*BundleWriter, error) {
	if err := h.Format.check(); err != nil {
		return nil, fmt.Errorf("purchase: bundle: %w", err)
	}
	if h.PoolSize <= 0 || h.PoolSize > MaxPool || h.Count < 0 || h.Count > h.PoolSize {
		return nil, fmt.Errorf("purchase: bundle: %d records of a pool of %d", h.Count, h.PoolSize)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if _, err := bw.Write(appendHeader(nil, h)); err != nil {
		return nil, fmt.Errorf("purchase: bundle: %w", err)
	}
	return &BundleWriter{bw: bw, h: h}, nil
}

// Write writes the next record (an image of the header's shape).
func (b *BundleWriter) Write(op Opening) error {
	if b.written == b.h.Count {
		return fmt.Errorf("purchase: bundle: a record beyond the header's %d", b.h.Count)
	}
	if n := b.h.Format.ItemBytes(); n > 0 && len(op.Item) != n {
		return fmt.Errorf("purchase: bundle: candidate %d has %d bytes, not an image of %d×%d×%d", op.Index, len(op.Item), b.h.Format.Width, b.h.Format.Height, b.h.Format.Channels)
	}
	if len(op.Item) > MaxItemBytes || len(op.Path) > maxPath {
		return fmt.Errorf("purchase: bundle: candidate %d of %d bytes and %d hashes", op.Index, len(op.Item), len(op.Path))
	}
	b.rec = AppendOpening(b.rec[:0], op)
	if _, err := b.bw.Write(b.rec); err != nil {
		return fmt.Errorf("purchase: bundle: %w", err)
	}
	b.written++
	return nil
}

// Close flushes the bundle; it is an error if fewer records than the
// header's count were written.
func (b *BundleWriter) Close() error {
	if err := b.bw.Flush(); err != nil {
		return fmt.Errorf("purchase: bundle: %w", err)
	}
	if b.written != b.h.Count {
		return fmt.Errorf("purchase: bundle: %d records written, the header announces %d", b.written, b.h.Count)
	}
	return nil
}

func appendHeader(dst []byte, h Header) []byte {
	dst = append(dst, BundleMagic...)
	dst = append(dst, h.Root[:]...)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.PoolSize))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(h.Count))
	dst = append(dst, byte(h.Format.Kind))
	for _, v := range []int{h.Format.Width, h.Format.Height, h.Format.Channels} {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
	}
	return dst
}

// BundleReader reads a bundle record by record: memory for one item and
// its path, whatever the bundle's size.
type BundleReader struct {
	h    Header
	or   openingReader
	read int
	err  error
}

// NewBundleReader reads the header of the bundle r: the magic, a pool size
// of 1..MaxPool, at most as many records as candidates, a known item kind
// and image shape. Records are read by Next.
func NewBundleReader(r io.Reader) (*BundleReader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var b [bundleHeaderLen]byte
	if _, err := io.ReadFull(br, b[:]); err != nil {
		return nil, fmt.Errorf("purchase: bundle header: %w", unexpected(err))
	}
	if string(b[:8]) != BundleMagic {
		return nil, fmt.Errorf("purchase: not a bundle (starts %q, want %q)", b[:8], BundleMagic)
	}
	var h Header
	copy(h.Root[:], b[8:40])
	n := binary.LittleEndian.Uint64(b[40:48])
	m := binary.LittleEndian.Uint64(b[48:56])
	if n == 0 || n > MaxPool {
		return nil, fmt.Errorf("purchase: bundle header: %w: a pool of %d", errFormat, n)
	}
	if m > n {
		return nil, fmt.Errorf("purchase: bundle header: %w: %d records of a pool of %d", errFormat, m, n)
	}
	h.PoolSize, h.Count = int(n), int(m)
	h.Format = Format{Kind: ItemKind(b[56]), Width: int(binary.LittleEndian.Uint16(b[57:])),
		Height: int(binary.LittleEndian.Uint16(b[59:])), Channels: int(binary.LittleEndian.Uint16(b[61:]))}
	if err := h.Format.check(); err != nil {
		return nil, fmt.Errorf("purchase: bundle header: %w", err)
	}
	maxItem := MaxItemBytes
	if ib := h.Format.ItemBytes(); ib > 0 {
		maxItem = ib
	}
	return &BundleReader{h: h, or: openingReader{r: br, n: h.PoolSize, maxItem: maxItem}}, nil
}

// Header returns the bundle's header.
func (b *BundleReader) Header() Header { return b.h }

// Next returns the next record (valid until the next call), or io.EOF after
// the last of Header().Count: then the bundle must end. An image of another
// size than the header's, an index or path length out of bounds, a cut
// record and bytes after the last are errors (wrapping io.ErrUnexpectedEOF
// for a cut one); after an error Next returns it again.
func (b *BundleReader) Next() (Opening, error) {
	if b.err != nil {
		return Opening{}, b.err
	}
	if b.read == b.h.Count {
		var one [1]byte
		if n, _ := io.ReadFull(b.or.r, one[:]); n > 0 {
			b.err = fmt.Errorf("purchase: bundle: %w: data after record %d, the last the header announces", errFormat, b.h.Count)
			return Opening{}, b.err
		}
		b.err = io.EOF
		return Opening{}, io.EOF
	}
	op, err := b.or.read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		b.err = fmt.Errorf("purchase: bundle: record %d of %d: %w", b.read, b.h.Count, err)
		return Opening{}, b.err
	}
	if ib := b.h.Format.ItemBytes(); ib > 0 && len(op.Item) != ib {
		b.err = fmt.Errorf("purchase: bundle: record %d: %w: %d bytes, not an image of the header's %d×%d×%d", b.read, errFormat, len(op.Item), b.h.Format.Width, b.h.Format.Height, b.h.Format.Channels)
		return Opening{}, b.err
	}
	b.read++
	return op, nil
}

// sortedDistinct reports whether v is ascending and distinct.
func sortedDistinct(v []int) bool {
	return slices.IsSorted(v) && !hasAdjacentEqual(v)
}

func hasAdjacentEqual(v []int) bool {
	for i := 1; i < len(v); i++ {
		if v[i] == v[i-1] {
			return true
		}
	}
	return false
}

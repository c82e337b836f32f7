package purchase

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// An opening's encoding (the bootstrap's openings and a bundle's records),
// all integers little-endian:
//
//	offset      size        field
//	0           8           the candidate's pool index (uint64)
//	8           32          its salt
//	40          4           L, the length of its canonical bytes (uint32)
//	44          L           its canonical bytes
//	44+L        1           P, the hashes on its path (uint8)
//	45+L        32·P        the path, leaf level first
const openingFixed = 8 + SaltSize + 4

// OpeningSize is the encoded size of op.
func OpeningSize(op Opening) int { return openingFixed + len(op.Item) + 1 + HashSize*len(op.Path) }

// AppendOpening appends op's encoding to dst.
func AppendOpening(dst []byte, op Opening) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(op.Index))
	dst = append(dst, op.Salt[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(op.Item)))
	dst = append(dst, op.Item...)
	dst = append(dst, byte(len(op.Path)))
	for _, h := range op.Path {
		dst = append(dst, h[:]...)
	}
	return dst
}

// openingReader reads encoded openings one at a time, reusing its buffers:
// what a read returns is valid until the next read.
type openingReader struct {
	r       io.Reader
	n       int // the pool size: indices and path lengths are checked against it
	maxItem int // the largest item accepted
	fixed   [openingFixed]byte
	item    []byte
	path    [][HashSize]byte
}

// errFormat is wrapped by every error of a malformed encoding.
var errFormat = errors.New("malformed")

// read reads the next opening: every length is checked before anything is
// read or allocated for it (an index below n, an item of at most maxItem
// bytes, a path of exactly PathLen(index, n) hashes), and the buffers grow
// only with the bytes actually read. A clean end before the first byte is
// io.EOF; an end inside an opening io.ErrUnexpectedEOF.
func (o *openingReader) read() (Opening, error) {
	if _, err := io.ReadFull(o.r, o.fixed[:]); err != nil {
		return Opening{}, err
	}
	idx := binary.LittleEndian.Uint64(o.fixed[:8])
	if idx >= uint64(o.n) {
		return Opening{}, fmt.Errorf("%w: candidate %d of a pool of %d", errFormat, idx, o.n)
	}
	op := Opening{Index: int(idx)}
	copy(op.Salt[:], o.fixed[8:8+SaltSize])
	l := binary.LittleEndian.Uint32(o.fixed[8+SaltSize:])
	if uint64(l) > uint64(o.maxItem) {
		return Opening{}, fmt.Errorf("%w: candidate %d of %d bytes (at most %d)", errFormat, idx, l, o.maxItem)
	}
	var err error
	if o.item, err = readInto(o.r, o.item[:0], int(l)); err != nil {
		return Opening{}, unexpected(err)
	}
	op.Item = o.item
	var pl [1]byte
	if _, err := io.ReadFull(o.r, pl[:]); err != nil {
		return Opening{}, unexpected(err)
	}
	if want := PathLen(op.Index, o.n); int(pl[0]) != want {
		return Opening{}, fmt.Errorf("%w: candidate %d with a path of %d hashes (a pool of %d has %d)", errFormat, idx, pl[0], o.n, want)
	}
	o.path = o.path[:0]
	for range int(pl[0]) {
		var h [HashSize]byte
		if _, err := io.ReadFull(o.r, h[:]); err != nil {
			return Opening{}, unexpected(err)
		}
		o.path = append(o.path, h)
	}
	op.Path = o.path
	return op, nil
}

// readInto appends exactly n bytes of r to dst, growing it in steps of at
// most 1 MiB, so that a length that promises more than r holds costs no
// more memory than what r holds.
func readInto(r io.Reader, dst []byte, n int) ([]byte, error) {
	const step = 1 << 20
	for n > 0 {
		k := min(n, step)
		start := len(dst)
		dst = append(dst, make([]byte, k)...)
		if _, err := io.ReadFull(r, dst[start:]); err != nil {
			return dst, err
		}
		n -= k
	}
	return dst, nil
}

// unexpected turns an end of input inside an opening into
// io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// clone returns a copy of op that owns its item and path.
func (op Opening) clone() Opening {
	op.Item = append([]byte(nil), op.Item...)
	op.Path = append([][HashSize]byte(nil), op.Path...)
	return op
}

// EncodeOpenings encodes openings as one message: their count (uint32)
// and each opening (see AppendOpening). The bootstrap of a selection sends
// it beside the sample's inputs.
func EncodeOpenings(ops []Opening) []byte {
	size := 4
	for _, op := range ops {
		size += OpeningSize(op)
	}
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, size), uint32(len(ops)))
	for _, op := range ops {
		b = AppendOpening(b, op)
	}
	return b
}

// OpeningsBound is the largest EncodeOpenings message of count openings
// of a pool of n candidates whose items are at most maxItem bytes.
func OpeningsBound(count, n, maxItem int) int64 {
	return 4 + int64(count)*int64(openingFixed+maxItem+1+HashSize*pathBound(n))
}

// DecodeOpenings decodes an EncodeOpenings message that must hold exactly
// the openings of the candidates indices, in that order, of a pool of n
// candidates, each item at most maxItem bytes (at most MaxItemBytes). It
// checks the encoding, not the hashes: VerifyOpening does.
func DecodeOpenings(b []byte, indices []int, n, maxItem int) ([]Opening, error) {
	if n <= 0 || n > MaxPool || maxItem < 0 || maxItem > MaxItemBytes {
		return nil, fmt.Errorf("purchase: openings of a pool of %d, items of %d bytes", n, maxItem)
	}
	if lim := OpeningsBound(len(indices), n, maxItem); int64(len(b)) > lim {
		return nil, fmt.Errorf("purchase: openings: %w: %d bytes (at most %d for %d)", errFormat, len(b), lim, len(indices))
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("purchase: openings: %w: %d bytes", errFormat, len(b))
	}
	if c := binary.LittleEndian.Uint32(b); uint64(c) != uint64(len(indices)) {
		return nil, fmt.Errorf("purchase: openings: %w: %d openings for a sample of %d", errFormat, c, len(indices))
	}
	r := &byteReader{b: b[4:]}
	or := &openingReader{r: r, n: n, maxItem: maxItem}
	out := make([]Opening, 0, len(indices))
	for k, want := range indices {
		op, err := or.read()
		if err != nil {
			return nil, fmt.Errorf("purchase: opening %d: %w", k, unexpected(err))
		}
		if op.Index != want {
			return nil, fmt.Errorf("purchase: opening %d: %w: candidate %d where the sample's is %d", k, errFormat, op.Index, want)
		}
		out = append(out, op.clone())
	}
	if len(r.b) > 0 {
		return nil, fmt.Errorf("purchase: openings: %w: %d bytes after the last", errFormat, len(r.b))
	}
	return out, nil
}

// byteReader reads a byte slice (bytes.Reader without its seeking).
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

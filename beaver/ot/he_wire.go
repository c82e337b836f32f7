package ot

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/selectformer/selectformer/beaver/he"
)

// How a Lattice's byte strings travel as words on a stream: chunked,
// zero-padded, the padding checked.

// sendChunked sends b zero-padded to words on c, in messages of at most
// heChunkWords words.
func sendChunked(ctx context.Context, c Conn, b []byte) error {
	for off := 0; off < len(b); off += 8 * heChunkWords {
		end := min(len(b), off+8*heChunkWords)
		if err := c.SendWords(ctx, bytesToWordsPad(b[off:end])); err != nil {
			return err
		}
	}
	return nil
}

// recvChunked receives from c the size bytes sendChunked sent (size > 0,
// known to both parties), checking the padding.
func recvChunked(ctx context.Context, c Conn, size int64) ([]byte, error) {
	b := make([]byte, 0, size)
	for off := int64(0); off < size; off += 8 * heChunkWords {
		n := min(size-off, 8*heChunkWords)
		w := make([]uint64, wordsFor(n))
		if err := c.RecvWords(ctx, w); err != nil {
			return nil, err
		}
		c, err := wordsToBytesExact(w, n)
		if err != nil {
			return nil, err
		}
		b = append(b, c...)
	}
	return b, nil
}

// wordsFor is the number of words that hold size bytes.
func wordsFor(size int64) int { return int((size + 7) / 8) }

// bytesToWordsPad packs b little-endian into words, the last one
// zero-padded.
func bytesToWordsPad(b []byte) []uint64 {
	w := make([]uint64, (len(b)+7)/8)
	full := len(b) / 8
	for i := range full {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	if full < len(w) {
		var last [8]byte
		copy(last[:], b[8*full:])
		w[full] = binary.LittleEndian.Uint64(last[:])
	}
	return w
}

// wordsToBytesExact unpacks the first size bytes of w (wordsFor(size)
// words), refusing non-zero padding.
func wordsToBytesExact(w []uint64, size int64) ([]byte, error) {
	if int64(len(w)) != int64(wordsFor(size)) {
		return nil, fmt.Errorf("%d words for %d bytes: %w", len(w), size, he.ErrMalformed)
	}
	b := make([]byte, 0, 8*len(w))
	for _, x := range w {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	for _, x := range b[size:] {
		if x != 0 {
			return nil, fmt.Errorf("non-zero padding: %w", he.ErrMalformed)
		}
	}
	return b[:size], nil
}

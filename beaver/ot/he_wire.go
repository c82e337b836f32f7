package ot

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/share"
)

// How a Lattice's byte strings travel as words on a stream: chunked,
// zero-padded, the padding checked.

// chunkWriter sends what is written to it on c zero-padded to words, in
// messages of heChunkWords words (the last one the rest), holding at most
// one message: size is announced to the receiver (chunkReader), and the
// writer refuses to exceed it.
type chunkWriter struct {
	ctx   context.Context
	c     Conn
	size  int64 // bytes announced
	left  int64 // bytes the receiver still expects
	buf   []byte
	words []uint64
	chunk int64 // bytes a message, a multiple of 8 (0: 8·heChunkWords; tests use less)
}

// Write implements io.Writer.
func (w *chunkWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > w.left-int64(len(w.buf)) {
		return 0, fmt.Errorf("%d bytes beyond the %d announced", int64(len(p))-(w.left-int64(len(w.buf))), w.left)
	}
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, min(w.left, chunkBytes(w.chunk)))
		}
		k := min(len(p), cap(w.buf)-len(w.buf))
		w.buf, p = append(w.buf, p[:k]...), p[k:]
		if len(w.buf) == cap(w.buf) {
			if err := w.send(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// send sends the buffered bytes as one message.
func (w *chunkWriter) send() error {
	nw := wordsFor(int64(len(w.buf)))
	if cap(w.words) < nw {
		w.words = make([]uint64, nw)
	}
	words := w.words[:nw]
	full := len(w.buf) / 8
	for i := range full {
		words[i] = binary.LittleEndian.Uint64(w.buf[8*i:])
	}
	if full < nw {
		var last [8]byte
		copy(last[:], w.buf[8*full:])
		words[full] = binary.LittleEndian.Uint64(last[:])
	}
	if err := w.c.SendWords(w.ctx, words); err != nil {
		return err
	}
	w.left -= int64(len(w.buf))
	w.buf = w.buf[:0]
	if w.left < int64(cap(w.buf)) {
		w.buf = w.buf[:0:w.left]
	}
	return nil
}

// close sends what is buffered and checks that the announced size was
// written.
func (w *chunkWriter) close() error {
	if len(w.buf) > 0 {
		if err := w.send(); err != nil {
			return err
		}
	}
	if w.left != 0 {
		return fmt.Errorf("%d of the %d bytes announced not written", w.left, w.size)
	}
	return nil
}

// chunkReader reads the size bytes a chunkWriter sent on c (size > 0, known
// to both parties), one message at a time, checking the padding: it holds
// one message (at most heChunkWords words) of what may be GBs.
type chunkReader struct {
	ctx   context.Context
	c     Conn
	left  int64  // bytes not yet received
	cur   []byte // received, not yet read
	words []uint64
	buf   []byte
	chunk int64 // the writer's chunkWriter.chunk
	// portable makes Read encode the words byte by byte even on a
	// little-endian host (the tests' way to run the other path).
	portable bool
}

// Read implements io.Reader.
func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.cur) == 0 {
		if r.left == 0 {
			return 0, io.EOF
		}
		n := min(r.left, chunkBytes(r.chunk))
		if cap(r.words) < wordsFor(n) {
			r.words = make([]uint64, wordsFor(n))
		}
		w := r.words[:wordsFor(n)]
		if err := r.c.RecvWords(r.ctx, w); err != nil {
			return 0, err
		}
		b := r.wireBytes(w)
		for _, x := range b[n:] {
			if x != 0 {
				return 0, fmt.Errorf("non-zero padding: %w", he.ErrMalformed)
			}
		}
		r.cur, r.left = b[:n], r.left-n
	}
	k := copy(p, r.cur)
	r.cur = r.cur[k:]
	return k, nil
}

// wireBytes returns the little-endian bytes of w: w's own memory on a
// little-endian host (a data owner decodes GBs of uploads a phase, and
// the byte-by-byte copy was 1.3% of its CPU), else r.buf.
func (r *chunkReader) wireBytes(w []uint64) []byte {
	if share.HostLittleEndian() && !r.portable {
		return wordBytes(w)
	}
	if cap(r.buf) < 8*len(w) {
		r.buf = make([]byte, 8*len(w))
	}
	b := r.buf[:8*len(w)]
	for i, x := range w {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

// chunkBytes is the size of a chunkWriter's messages: 8·heChunkWords bytes,
// or chunk if positive (the tests' small messages).
func chunkBytes(chunk int64) int64 {
	if chunk > 0 {
		return chunk
	}
	return 8 * heChunkWords
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

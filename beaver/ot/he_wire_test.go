package ot

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/transport"
)

// TestChunkWriter: what a chunkWriter sends, written in pieces of any
// size, a chunkReader of the same size reads back byte for byte, in
// messages of the chunk's size (the last the rest, zero-padded); writing
// beyond the announced size, or closing short of it, is an error. The
// chunking runs with messages of 8 KiB, around and across them; the
// messages of the deployed size (heChunkWords words, 64 MiB), whose copies
// took 40 s under the race detector, run without -short.
func TestChunkWriter(t *testing.T) {
	type tc struct {
		chunk, size int64
		portable    bool // the reader's byte-by-byte path
	}
	small := int64(8 << 10)
	var cases []tc
	for _, size := range []int64{1, 7, 8, 4099, small - 3, small, small + 5, 3*small + 11} {
		cases = append(cases, tc{small, size, false}, tc{small, size, true})
	}
	if !testing.Short() {
		chunk := int64(8 * heChunkWords)
		for _, size := range []int64{4099, chunk - 3, chunk, chunk + 5} {
			cases = append(cases, tc{0, size, false})
		}
	}
	for _, c := range cases {
		chunk, size := chunkBytes(c.chunk), c.size
		c0, c1 := transport.Pipe(transport.Options{})
		ctx := testCtx(t)
		data := make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		errc := make(chan error, 1)
		go func() {
			w := &chunkWriter{ctx: ctx, c: c0.Stream(1), size: size, left: size, chunk: c.chunk}
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(int(chunk/16)))
				if _, err := w.Write(rest[:k]); err != nil {
					errc <- err
					return
				}
				rest = rest[k:]
			}
			errc <- w.close()
		}()
		r := &chunkReader{ctx: ctx, c: c1.Stream(1), left: size, chunk: c.chunk, portable: c.portable}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("chunk %d, size %d: read %d bytes (%v), want the %d written", chunk, size, len(got), err, size)
		}
		if err := <-errc; err != nil {
			t.Fatalf("chunk %d, size %d: %v", chunk, size, err)
		}
		if msgs, want := c0.Stream(1).Stats().MsgsSent, (size+chunk-1)/chunk; msgs != want {
			t.Errorf("chunk %d, size %d: %d messages, want %d", chunk, size, msgs, want)
		}
		c0.Close()
		c1.Close()
	}

	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	w := &chunkWriter{ctx: context.Background(), c: c0.Stream(2), size: 10, left: 10}
	if _, err := w.Write(make([]byte, 11)); err == nil || !strings.Contains(err.Error(), "beyond the 10 announced") {
		t.Errorf("a write beyond the size: %v", err)
	}
	if _, err := w.Write(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err == nil || !strings.Contains(err.Error(), "6 of the 10 bytes") {
		t.Errorf("a close short of the size: %v", err)
	}
}

// TestChunkReaderPadding: a message whose padding beyond the announced
// size is not zero is refused as malformed, on both of the reader's paths.
func TestChunkReaderPadding(t *testing.T) {
	for _, portable := range []bool{false, true} {
		c0, c1 := transport.Pipe(transport.Options{})
		ctx := testCtx(t)
		go func() { _ = c0.Stream(1).SendWords(ctx, []uint64{0x0102030405060708, 1 << 40}) }()
		r := &chunkReader{ctx: ctx, c: c1.Stream(1), left: 13, chunk: 16, portable: portable}
		if _, err := io.ReadAll(r); !errors.Is(err, he.ErrMalformed) {
			t.Errorf("portable %v: byte 13 of 16 set: %v, want he.ErrMalformed", portable, err)
		}
		c0.Close()
		c1.Close()
	}
}

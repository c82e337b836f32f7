package ot

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/transport"
)

// TestChunkWriter: what a chunkWriter sends, written in pieces of any
// size, a chunkReader of the same size reads back byte for byte, in
// messages of heChunkWords words (the last the rest, zero-padded); writing
// beyond the announced size, or closing short of it, is an error.
func TestChunkWriter(t *testing.T) {
	chunk := int64(8 * heChunkWords)
	sizes := []int64{1, 7, 8, 4099, chunk - 3}
	if !testing.Short() {
		sizes = append(sizes, chunk, chunk+5)
	}
	for _, size := range sizes {
		c0, c1 := transport.Pipe(transport.Options{})
		ctx := testCtx(t)
		data := make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(size), 1))
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		errc := make(chan error, 1)
		go func() {
			w := &chunkWriter{ctx: ctx, c: c0.Stream(1), size: size, left: size}
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(1<<22))
				if _, err := w.Write(rest[:k]); err != nil {
					errc <- err
					return
				}
				rest = rest[k:]
			}
			errc <- w.close()
		}()
		r := &chunkReader{ctx: ctx, c: c1.Stream(1), left: size}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: read %d bytes (%v), want the %d written", size, len(got), err, size)
		}
		if err := <-errc; err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if msgs, want := c0.Stream(1).Stats().MsgsSent, (size+chunk-1)/chunk; msgs != want {
			t.Errorf("size %d: %d messages, want %d", size, msgs, want)
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

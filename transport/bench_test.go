package transport

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// tlsPair connects two Conns over loopback TLS.
func tlsPair(b *testing.B, o Options) (*Conn, *Conn) {
	b.Helper()
	p0, _ := GenerateIdentity("p0")
	p1, _ := GenerateIdentity("p1")
	ln, err := Listen("127.0.0.1:0", p0, o)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	ctx := context.Background()
	type res struct {
		c   *Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := Dial(ctx, ln.Addr().String(), p1, p0.Fingerprint(), o)
		ch <- res{c, err}
	}()
	s, err := ln.Accept(ctx, p1.Fingerprint())
	if err != nil {
		b.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		b.Fatal(r.err)
	}
	b.Cleanup(func() { s.Close(); r.c.Close() })
	return r.c, s
}

// BenchmarkThroughputTLS sends word messages one way over loopback TLS.
func BenchmarkThroughputTLS(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			a, c := tlsPair(b, Options{})
			ctx := context.Background()
			w := make([]uint64, size/8)
			dst := make([]uint64, size/8)
			b.SetBytes(int64(size))
			b.ResetTimer()
			errc := make(chan error, 1)
			go func() {
				for i := 0; i < b.N; i++ {
					if err := a.Stream(1).SendWords(ctx, w); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			for i := 0; i < b.N; i++ {
				if err := c.Stream(1).RecvWords(ctx, dst); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkExchangeTLS measures both directions at once (Exchange of 1 MB
// words per side) over loopback TLS.
func BenchmarkExchangeTLS(b *testing.B) {
	a, c := tlsPair(b, Options{})
	ctx := context.Background()
	const n = 1 << 17
	sa, sc := make([]uint64, n), make([]uint64, n)
	ra, rc := make([]uint64, n), make([]uint64, n)
	b.SetBytes(8 * n)
	b.ResetTimer()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			if err := c.Stream(1).Exchange(ctx, sc, rc); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < b.N; i++ {
		if err := a.Stream(1).Exchange(ctx, sa, ra); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRoundTrip is the latency of one Exchange of one word (a round).
func BenchmarkRoundTrip(b *testing.B) {
	for _, kind := range []string{"tls", "pipe"} {
		b.Run(kind, func(b *testing.B) {
			var a, c *Conn
			if kind == "tls" {
				a, c = tlsPair(b, Options{})
			} else {
				a, c = Pipe(Options{})
				b.Cleanup(func() { a.Close(); c.Close() })
			}
			ctx := context.Background()
			errc := make(chan error, 1)
			b.ResetTimer()
			go func() {
				got := make([]uint64, 1)
				for i := 0; i < b.N; i++ {
					if err := c.Stream(1).Exchange(ctx, []uint64{2}, got); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			got := make([]uint64, 1)
			for i := 0; i < b.N; i++ {
				if err := a.Stream(1).Exchange(ctx, []uint64{1}, got); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkCompression reports the zstd ratio (compressed/original) of
// uniformly random ring words (about 1: no gain) and of a sorted index list.
func BenchmarkCompression(b *testing.B) {
	const n = 1 << 16
	random := make([]byte, 8*n)
	if _, err := rand.Read(random); err != nil {
		b.Fatal(err)
	}
	index := make([]byte, 0, 8*n)
	for i := 0; i < n; i++ {
		index = binary.LittleEndian.AppendUint64(index, uint64(i*37+i%5))
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{{"random-words", random}, {"index-list", index}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			var out []byte
			for i := 0; i < b.N; i++ {
				out = enc.EncodeAll(tc.data, out[:0])
			}
			b.ReportMetric(float64(len(out))/float64(len(tc.data)), "ratio")
		})
	}
}

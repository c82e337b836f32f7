package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// These tests pin the bounds of issue 24 (holes 2–4): receives bounded by
// the caller before any allocation or decompression, compression opt-in on
// the receiving side, flow control that counts frames, and an Accept that
// silent sockets cannot starve.

// zeroBomb returns the zstd compression of n zero bytes (a few KiB), as a
// stream without a content size, with a window of window bytes (0: the
// encoder's default).
func zeroBomb(t *testing.T, n, window int) []byte {
	t.Helper()
	opts := []zstd.EOption{zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest)}
	if window > 0 {
		opts = append(opts, zstd.WithWindowSize(window))
	}
	enc, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	var buf bytes.Buffer
	w := enc
	w.Reset(&buf)
	_ = w
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= len(chunk) {
		if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// allocated runs f and returns the bytes it allocated (TotalAlloc, which
// counts every allocation, freed or not) and the live heap's growth.
func allocated(f func()) (total, heap int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc), int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestRecvRefusesCompressedBomb: a compressed message that expands to
// 128 MiB (a bootstrap-like message of zeros, a few KiB on the wire) sent to
// a receiver expecting at most 1 MiB fails fast, and the receiver allocates
// no more than a few MiB; the same for RecvWords expecting 4 words against
// 256 MiB. Both streams accept compression (the receiver opted in).
func TestRecvRefusesCompressedBomb(t *testing.T) {
	for _, tc := range []struct {
		name   string
		plain  int
		window int
		recv   func(ctx context.Context, s *Stream) error
	}{
		{"bytes-128MiB-max-1MiB", 128 << 20, 0, func(ctx context.Context, s *Stream) error {
			_, err := s.RecvBytes(ctx, 1<<20)
			return err
		}},
		// A small window: the decoder accepts the frame and must stop
		// decoding at the maximum.
		{"bytes-128MiB-small-window-max-1MiB", 128 << 20, 64 << 10, func(ctx context.Context, s *Stream) error {
			_, err := s.RecvBytes(ctx, 1<<20)
			return err
		}},
		{"words-256MiB-want-4", 256 << 20, 0, func(ctx context.Context, s *Stream) error {
			return s.RecvWords(ctx, make([]uint64, 4))
		}},
		{"words-256MiB-small-window-want-64Ki", 256 << 20, 64 << 10, func(ctx context.Context, s *Stream) error {
			return s.RecvWords(ctx, make([]uint64, 64<<10))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bomb := zeroBomb(t, tc.plain, tc.window)
			if len(bomb) > 64<<10 {
				t.Fatalf("bomb of %d bytes; want a few KiB", len(bomb))
			}
			p := newRawPeer(t, Options{Compression: CompressAll}, true)
			ctx := testCtx(t, 10*time.Second)
			go func() {
				_, _ = p.Write(frameBytes(frameData, flagStart|flagEnd|flagCompressed, 1, uint32(len(bomb)), bomb))
			}()
			var err error
			start := time.Now()
			total, heap := allocated(func() { err = tc.recv(ctx, p.c.Stream(1)) })
			if total > 8<<20 || heap > 8<<20 {
				t.Fatalf("the receiver allocated %d bytes (heap grew by %d) on a %d-byte message expanding to %d (error %v)", total, heap, len(bomb), tc.plain, err)
			}
			if err == nil {
				t.Fatal("the bomb was received")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("refusing took %v", d)
			}
			t.Logf("%d-byte bomb refused after allocating %d bytes: %v", len(bomb), total, err)
		})
	}
}

// TestRecvRefusesOversizedAnnouncement: a message whose first frame
// announces more than the receive allows is refused at once, before
// anything is allocated for it (the rest of it never needs to arrive), and
// the stream stays usable: its frames are skipped.
func TestRecvRefusesOversizedAnnouncement(t *testing.T) {
	start := func(total uint64, n int) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, total), make([]byte, n-lenPrefix)...)
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		recv  func(ctx context.Context, s *Stream) error
		want  error
	}{
		{"bytes-512MiB-max-1KiB", frameBytes(frameData, flagStart, 1, 1024, start(512<<20, 1024)), func(ctx context.Context, s *Stream) error {
			_, err := s.RecvBytes(ctx, 1<<10)
			return err
		}, ErrTooLarge},
		{"bytes-4KiB-single-frame-max-1KiB", frameBytes(frameData, flagStart|flagEnd, 1, 4096, make([]byte, 4096)), func(ctx context.Context, s *Stream) error {
			_, err := s.RecvBytes(ctx, 1<<10)
			return err
		}, ErrTooLarge},
		{"words-512MiB-want-4", frameBytes(frameData, flagStart, 1, 1024, start(512<<20, 1024)), func(ctx context.Context, s *Stream) error {
			return s.RecvWords(ctx, make([]uint64, 4))
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newRawPeer(t, Options{}, true)
			ctx := testCtx(t, 10*time.Second)
			go func() { _, _ = p.Write(tc.frame) }()
			var err error
			t0 := time.Now()
			total, _ := allocated(func() {
				rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				err = tc.recv(rctx, p.c.Stream(1))
			})
			switch {
			case err == nil:
				t.Fatal("the oversized message was received")
			case errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("the receive waited for the oversized message (%v)", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("error %v, want %v", err, tc.want)
			case time.Since(t0) > 2*time.Second:
				t.Fatalf("refusing took %v", time.Since(t0))
			case total > 4<<20:
				t.Fatalf("the receiver allocated %d bytes for an announcement", total)
			}
			if p.c.Err() != nil {
				t.Fatalf("the connection died: %v", p.c.Err())
			}
		})
	}
}

// TestCompressionIsOptInForReceivers: a compressed message on a stream
// whose receiver did not enable compression kills the connection with a
// clear error, however small; with compression enabled on both sides,
// messages still round-trip.
func TestCompressionIsOptInForReceivers(t *testing.T) {
	bomb := zeroBomb(t, 1<<10, 0)
	p := newRawPeer(t, Options{}, true)
	ctx := testCtx(t, 5*time.Second)
	go func() {
		_, _ = p.Write(frameBytes(frameData, flagStart|flagEnd|flagCompressed, 1, uint32(len(bomb)), bomb))
	}()
	_, err := p.c.Stream(1).RecvBytes(ctx, 1<<20)
	if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "did not enable compression") {
		t.Fatalf("got %v, want a protocol error about compression", err)
	}
	if p.c.Err() == nil {
		t.Fatal("the connection survived")
	}

	// A receiver in CompressBytes mode accepts compressed bytes but not
	// compressed words.
	a, b := pipe(t, Options{})
	a.Stream(1).SetCompression(CompressAll)
	b.Stream(1).SetCompression(CompressBytes)
	idx := make([]byte, 8<<10)
	go func() { _ = a.Stream(1).SendBytes(ctx, idx) }()
	got, err := b.Stream(1).RecvBytes(ctx, len(idx))
	if err != nil || !bytes.Equal(got, idx) {
		t.Fatalf("compressed bytes: %v", err)
	}
	if a.Stats().BytesSent >= int64(len(idx)) {
		t.Fatalf("%d bytes sent: not compressed", a.Stats().BytesSent)
	}
	go func() { _ = a.Stream(1).SendWords(ctx, make([]uint64, 1024)) }()
	if err := b.Stream(1).RecvWords(ctx, make([]uint64, 1024)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("compressed words on a CompressBytes stream: %v", err)
	}
}

// TestEmptyFramesAreFlowControlled: a flood of empty START|END frames on a
// stream the receiver does not read kills the connection with a
// flow-control error once the window is used up (each frame costs
// frameOverhead bytes of it), instead of queueing without bound; up to that
// point the queued frames hold about the window in memory, at most
// 1.25 × StreamWindow.
func TestEmptyFramesAreFlowControlled(t *testing.T) {
	const window = 4 << 20
	p := newRawPeer(t, Options{StreamWindow: window}, true)
	s := p.c.Stream(5) // never read
	empty := frameBytes(frameData, flagStart|flagEnd, 5, 0, nil)
	fits := window / frameOverhead
	batch := bytes.Repeat(empty, 4096)

	write := func(n int) error {
		for n > 0 {
			k := min(n, 4096)
			if _, err := p.Write(batch[:k*len(empty)]); err != nil {
				return err
			}
			n -= k
		}
		return nil
	}
	queued := func() int {
		s.qmu.Lock()
		defer s.qmu.Unlock()
		return len(s.q) - s.qhead
	}
	_, heap := allocated(func() {
		if err := write(fits); err != nil {
			t.Fatalf("writing %d empty frames (within the window): %v", fits, err)
		}
		for end := time.Now().Add(5 * time.Second); queued() < fits && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		runtime.GC()
	})
	if q := queued(); q != fits {
		t.Fatalf("%d frames queued, want %d", q, fits)
	}
	if p.c.Err() != nil {
		t.Fatalf("the connection died within the window: %v", p.c.Err())
	}
	if heap > window+window/4 {
		t.Fatalf("%d empty frames hold %d bytes of heap; want at most 1.25 × the window (%d)", fits, heap, window)
	}
	t.Logf("%d queued empty frames hold %d bytes of heap (window %d)", fits, heap, window)

	// The attack of issue 24: 2 M empty frames. The connection dies at the
	// first frame beyond the window.
	_ = write(2_000_000 - fits)
	select {
	case <-p.c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the connection survived a flood of empty frames")
	}
	if err := p.c.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "flow-control window") {
		t.Fatalf("got %v, want a flow-control error", err)
	}
}

// TestEmptyMessagesHonestSender: an honest sender of many empty messages on
// a small window waits for credit (it charges the same per-frame cost) and
// never trips the receiver's flow control.
func TestEmptyMessagesHonestSender(t *testing.T) {
	a, b := pipe(t, Options{StreamWindow: 4096})
	ctx := testCtx(t, 20*time.Second)
	const n = 5000
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := a.Stream(1).SendBytes(ctx, nil); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	time.Sleep(50 * time.Millisecond) // let the sender fill the window
	for i := 0; i < n; i++ {
		if m, err := b.Stream(1).RecvBytes(ctx, 0); err != nil || len(m) != 0 {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestAcceptSilentFloodDoesNotKeepPeerOut: an outsider opening silent TCP
// connections (no TLS byte) faster than handshakes time out — 100 a second,
// 150 in all, over loopback — while the pinned peer dials: the peer gets in
// within a few seconds (it took the whole 60 s connect timeout when Accept
// ran 16 handshakes and left the rest in the kernel's backlog).
func TestAcceptSilentFloodDoesNotKeepPeerOut(t *testing.T) {
	f := newAcceptFixture(t, Options{})
	ctx := testCtx(t, 20*time.Second)
	res := f.accept(ctx)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var socks []net.Conn
	defer func() {
		close(stop)
		wg.Wait()
		for _, c := range socks {
			c.Close()
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range 150 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			c, err := net.Dial("tcp", f.addr())
			if err != nil {
				continue
			}
			mu.Lock()
			socks = append(socks, c)
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(socks)
	}
	for count() < 50 { // the flood has outgrown any slot count before the peer dials
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cc, err := Dial(dctx, f.addr(), f.p1, f.p0.Fingerprint(), Options{})
	if err != nil {
		t.Fatalf("the pinned peer could not connect within 5 s under a flood of %d silent sockets: %v", count(), err)
	}
	defer cc.Close()
	r := <-res
	checkServed(t, ctx, f, r, cc)
	waited := r.at.Sub(t0)
	t.Logf("the peer got in after %v with %d silent sockets opened", waited, count())
	if waited > 5*time.Second {
		t.Fatalf("the peer got in after %v", waited)
	}
}

// TestAcceptPerSourceEviction: a source at its per-source bound evicts its
// own oldest silent socket (no whole ClientHello record for 200 ms: a
// partial hello counts as silent); a socket that has sent a whole
// ClientHello is kept while silent ones remain, and so is the youngest
// silent socket, whose ClientHello may be on its way.
func TestAcceptPerSourceEviction(t *testing.T) {
	f := newAcceptFixture(t, Options{MaxPendingPerSource: 3, HandshakeTimeout: 5 * time.Second})
	ctx := testCtx(t, 10*time.Second)
	res := f.accept(ctx)
	hello := clientHello(t, f)
	talker := silent(t, f.addr()) // a whole ClientHello, then nothing
	if _, err := talker.Write(hello); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	partial := silent(t, f.addr()) // half a ClientHello: silent
	if _, err := partial.Write(hello[:len(hello)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	young := silent(t, f.addr())
	time.Sleep(20 * time.Millisecond)
	_ = silent(t, f.addr()) // evicts partial: silent for 200 ms, unlike talker and young
	if !closedByPeer(partial, 2*time.Second) {
		t.Fatal("the oldest silent socket (half a ClientHello) was not evicted")
	}
	if closedByPeer(talker, 200*time.Millisecond) {
		t.Fatal("the socket that sent a whole ClientHello was evicted before a silent one")
	}
	if closedByPeer(young, 10*time.Millisecond) {
		t.Fatal("the youngest socket was evicted")
	}
	cc, err := Dial(ctx, f.addr(), f.p1, f.p0.Fingerprint(), Options{})
	if err != nil {
		t.Fatalf("the real peer could not connect: %v", err)
	}
	defer cc.Close()
	checkServed(t, ctx, f, <-res, cc)
}

// FuzzCompressedRecv: whatever bytes arrive as a compressed message, a
// receive with a maximum never panics and never returns more than the
// maximum.
func FuzzCompressedRecv(f *testing.F) {
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	f.Add(enc.EncodeAll(make([]byte, 1<<20), nil), 100)
	f.Add(enc.EncodeAll([]byte("hello hello hello hello hello hello hello hello"), nil), 64)
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0}, 10)
	f.Fuzz(func(t *testing.T, payload []byte, max int) {
		if len(payload) == 0 || len(payload) > 1<<16 {
			return
		}
		max = max & (1<<20 - 1)
		in := append(preface{window: 1 << 20, maxFrame: 1 << 16}.encode(),
			frameBytes(frameData, flagStart|flagEnd|flagCompressed, 1, uint32(len(payload)), payload)...)
		o, _ := Options{Compression: CompressAll}.normalize()
		c, err := newConn(context.Background(), &byteConn{r: bytes.NewReader(in)}, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		got, err := c.Stream(1).RecvBytes(ctx, max)
		if err == nil && len(got) > max {
			t.Fatalf("received %d bytes with a maximum of %d", len(got), max)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatal("receive hung")
		}
	})
}

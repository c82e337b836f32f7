package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock is a virtual clock: time moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at  time.Time
	c   chan time.Time
	clk *fakeClock
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1000, 0)} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) NewTimer(d time.Duration) clockTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{at: f.now.Add(d), c: make(chan time.Time, 1), clk: f}
	if d <= 0 {
		t.c <- f.now
	} else {
		f.timers = append(f.timers, t)
	}
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.clk.mu.Lock()
	defer t.clk.mu.Unlock()
	for i, x := range t.clk.timers {
		if x == t {
			t.clk.timers = append(t.clk.timers[:i], t.clk.timers[i+1:]...)
			return true
		}
	}
	return false
}

// advance moves to the earliest pending timer and fires it; false if none.
func (f *fakeClock) advance() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return false
	}
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	t := f.timers[0]
	f.timers = f.timers[1:]
	if t.at.After(f.now) {
		f.now = t.at
	}
	t.c <- f.now
	return true
}

// drive advances the clock whenever a timer is pending and ready() holds,
// until done is closed.
func (f *fakeClock) drive(done <-chan struct{}, ready func() bool) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if !ready() || !f.advance() {
			runtime.Gosched()
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// recorder is the far end of an emulated link: it records when each piece
// is delivered, on the fake clock.
type recorder struct {
	net.Conn
	clk *fakeClock
	mu  sync.Mutex
	at  []time.Duration
	n   []int
	sum int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at = append(r.at, r.clk.Now().Sub(time.Unix(1000, 0)))
	r.n = append(r.n, len(p))
	r.sum += len(p)
	return len(p), nil
}

func (r *recorder) Close() error { return nil }

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sum
}

func TestLinkModelLargeMessage(t *testing.T) {
	clk := newFakeClock()
	rec := &recorder{clk: clk}
	e := newEmuConn(rec, PaperWAN, clk)
	defer e.Close()
	const size = 10_000_000 // 10 MB at 100 MB/s: 0.1 s + 50 ms
	writeDone := make(chan struct{})
	go func() {
		defer close(writeDone)
		if n, err := e.Write(make([]byte, size)); n != size || err != nil {
			t.Errorf("write: %d %v", n, err)
		}
	}()
	delivered := make(chan struct{})
	go func() {
		for rec.total() < size {
			time.Sleep(50 * time.Microsecond)
		}
		close(delivered)
	}()
	clk.drive(delivered, func() bool {
		// Advance only once the writer has filled the in-flight queue (or
		// finished), so every piece is scheduled back to back.
		select {
		case <-writeDone:
			return true
		default:
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.queued+pieceSize > e.maxQueued
	})
	<-writeDone
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.at[len(rec.at)-1], 150*time.Millisecond; got != want {
		t.Errorf("last byte arrives at %v, want %v", got, want)
	}
	if got, want := rec.at[0], 50*time.Millisecond+PaperWAN.serialize(pieceSize); got != want {
		t.Errorf("first piece arrives at %v, want %v", got, want)
	}
	for i := 1; i < len(rec.at); i++ {
		if d := rec.at[i] - rec.at[i-1]; d != PaperWAN.serialize(int64(rec.n[i])) {
			t.Fatalf("piece %d arrives %v after the previous, want its serialization time", i, d)
		}
	}
}

func TestLinkModelSmallRoundTrips(t *testing.T) {
	clk := newFakeClock()
	x, y := net.Pipe()
	ex, ey := newEmuConn(x, PaperWAN, clk), newEmuConn(y, PaperWAN, clk)
	defer ex.Close()
	defer ey.Close()
	go func() { // echo
		b := make([]byte, 8)
		for {
			if _, err := io.ReadFull(ey, b); err != nil {
				return
			}
			if _, err := ey.Write(b); err != nil {
				return
			}
		}
	}()
	done := make(chan struct{})
	go clk.drive(done, func() bool { return true })
	start := clk.Now()
	b := make([]byte, 8)
	for i := 0; i < 100; i++ {
		if _, err := ex.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(ex, b); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	// 100 round trips of one word at 50 ms one-way: 100 × 2 × (50 ms + 80 ns).
	if got, want := clk.Now().Sub(start), 100*2*(50*time.Millisecond+80*time.Nanosecond); got != want {
		t.Errorf("100 round trips took %v of link time, want %v", got, want)
	}
}

func TestLinkPipelinesWrites(t *testing.T) {
	// Many small writes must not each wait for the latency.
	clk := newFakeClock()
	rec := &recorder{clk: clk}
	e := newEmuConn(rec, PaperWAN, clk)
	defer e.Close()
	for i := 0; i < 200; i++ {
		if _, err := e.Write(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if now := clk.Now().Sub(time.Unix(1000, 0)); now != 0 {
		t.Fatalf("writes took %v of link time", now)
	}
	done := make(chan struct{})
	go func() {
		for rec.total() < 20_000 {
			time.Sleep(50 * time.Microsecond)
		}
		close(done)
	}()
	clk.drive(done, func() bool { return true })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.at[len(rec.at)-1], 50*time.Millisecond+200*time.Microsecond; got != want {
		t.Errorf("last of 200×100 B arrives at %v, want %v", got, want)
	}
}

func TestLinkRealTime(t *testing.T) {
	// Real clock, tolerances one-sided where timing is involved: timers
	// never fire early, so the lower bounds cannot flake.
	p := Profile{Name: "test", Bandwidth: 10_000_000, Latency: 20 * time.Millisecond}
	a, b := pipe(t, Options{Link: &p})
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	const rounds = 5
	for i := 0; i < rounds; i++ {
		errc := make(chan error, 1)
		go func() { errc <- b.Stream(1).Exchange(ctx, []uint64{1}, make([]uint64, 1)) }()
		if err := a.Stream(1).Exchange(ctx, []uint64{2}, make([]uint64, 1)); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < rounds*p.Latency || d > rounds*p.Latency+5*time.Second {
		t.Errorf("%d exchanges took %v, want about %v (one latency each)", rounds, d, rounds*p.Latency)
	}
	start = time.Now()
	big := make([]uint64, 125_000) // 1 MB: 100 ms + 20 ms
	errc := make(chan error, 1)
	go func() { errc <- a.Stream(2).SendWords(ctx, big) }()
	if err := b.Stream(2).RecvWords(ctx, big); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if d, want := time.Since(start), p.TransferTime(1_000_000); d < want || d > want+5*time.Second {
		t.Errorf("1 MB took %v, want about %v", d, want)
	}
}

func TestLinkDeadlineAndClose(t *testing.T) {
	x, y := net.Pipe() // nobody reads y: deliveries block
	defer y.Close()
	e := Emulate(x, Profile{Bandwidth: 1_000_000, Latency: time.Millisecond})
	if err := e.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := e.Write(make([]byte, 1<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write past the in-flight limit: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("deadline honoured after %v", d)
	}
	go func() { _, _ = io.Copy(io.Discard, y) }()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Write([]byte{1}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
}

func TestLinkCloseWriteFlushes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // returns at the half-close
		got <- b
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	e := Emulate(raw, Profile{Bandwidth: 50_000_000, Latency: 10 * time.Millisecond})
	defer e.Close()
	msg := bytes.Repeat([]byte("selectformer"), 50_000)
	if _, err := e.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := e.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, msg) {
			t.Fatalf("received %d bytes, want %d", len(b), len(msg))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no half-close")
	}
}

func TestProfiles(t *testing.T) {
	for _, tc := range []struct {
		name string
		bw   int64
		lat  time.Duration
		ok   bool
	}{
		{"lan", 1_000_000_000, 100 * time.Microsecond, true},
		{"paper-wan", 100_000_000, 50 * time.Millisecond, true},
		{"none", 0, 0, true},
		{"wan", 0, 0, false},
	} {
		p, err := ProfileByName(tc.name)
		if (err == nil) != tc.ok || p.Bandwidth != tc.bw || p.Latency != tc.lat {
			t.Errorf("ProfileByName(%q) = %v, %v", tc.name, p, err)
		}
	}
	if d := PaperWAN.TransferTime(10_000_000); d != 150*time.Millisecond {
		t.Errorf("10 MB on paper-wan: %v", d)
	}
	x, _ := net.Pipe()
	if Emulate(x, NoLink) != x {
		t.Error("the none profile wraps the connection")
	}
}

func TestLinkOptionOverTLS(t *testing.T) {
	p0, _ := GenerateIdentity("p0")
	p1, _ := GenerateIdentity("p1")
	prof := Profile{Name: "test", Bandwidth: 50_000_000, Latency: 15 * time.Millisecond}
	o := Options{Link: &prof}
	ln, err := Listen("127.0.0.1:0", p0, o)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx := testCtx(t, 20*time.Second)
	srv := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx, p1.Fingerprint())
		if err != nil {
			srv <- err
			return
		}
		defer c.Close()
		w := make([]uint64, 1)
		if err := c.Stream(1).RecvWords(ctx, w); err != nil {
			srv <- err
			return
		}
		srv <- c.Stream(1).SendWords(ctx, w)
	}()
	c, err := Dial(ctx, ln.Addr().String(), p1, p0.Fingerprint(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if err := c.Stream(1).SendWords(ctx, []uint64{3}); err != nil {
		t.Fatal(err)
	}
	if err := c.Stream(1).RecvWords(ctx, make([]uint64, 1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 2*prof.Latency || d > 2*prof.Latency+5*time.Second {
		t.Errorf("round trip over emulated TLS took %v, want about %v", d, 2*prof.Latency)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
}

func TestLinkCloseWithStalledPeer(t *testing.T) {
	x, y := net.Pipe() // nobody ever reads y
	defer y.Close()
	e := Emulate(x, Profile{Latency: time.Millisecond})
	if _, err := e.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs on a stalled peer")
	}
}

// jump moves the clock forward by d and fires every timer due by then.
func (f *fakeClock) jump(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.timers[:0]
	for _, t := range f.timers {
		if t.at.After(f.now) {
			kept = append(kept, t)
			continue
		}
		t.c <- f.now
	}
	f.timers = kept
}

func TestLinkLateDeliveryCatchesUp(t *testing.T) {
	// A delivery goroutine woken long after its pieces were due (the
	// process busy computing) hands every due piece over in one write, so
	// the emulated wire loses no more than that one wake-up; the pieces
	// not yet due wait for their time.
	clk := newFakeClock()
	rec := &recorder{clk: clk}
	e := newEmuConn(rec, PaperWAN, clk)
	defer e.Close()
	const pieces = 10
	if _, err := e.Write(make([]byte, pieces*pieceSize)); err != nil {
		t.Fatal(err)
	}
	// Due: piece i at 50 ms + (i+1)·655 µs. Wake 5 pieces' worth late.
	late := PaperWAN.Latency + PaperWAN.serialize(5*pieceSize)
	for {
		clk.mu.Lock()
		n := len(clk.timers)
		clk.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(50 * time.Microsecond)
	}
	clk.jump(late)
	for rec.total() < 5*pieceSize {
		time.Sleep(50 * time.Microsecond)
	}
	time.Sleep(5 * time.Millisecond) // nothing more may arrive before its time
	rec.mu.Lock()
	n, sum := slices.Clone(rec.n), rec.sum
	rec.mu.Unlock()
	if len(n) != 1 || sum != 5*pieceSize {
		t.Fatalf("woken at %v: delivered %v (total %d bytes), want the 5 pieces due in one write", late, n, sum)
	}
	done := make(chan struct{})
	go func() {
		for rec.total() < pieces*pieceSize {
			time.Sleep(50 * time.Microsecond)
		}
		close(done)
	}()
	clk.drive(done, func() bool { return true })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.at[len(rec.at)-1], PaperWAN.TransferTime(pieces*pieceSize); got != want {
		t.Errorf("last piece arrives at %v, want %v (its due time)", got, want)
	}
}

func TestLinkQueuesSocketBufferOnShortLink(t *testing.T) {
	// On a link whose bandwidth-delay product is tiny (100 MB/s, 0.5 ms
	// one-way: 50 kB), a writer may still have 50 ms of serialization in
	// flight, as a kernel socket buffer would hold, before it blocks.
	clk := newFakeClock()
	rec := &recorder{clk: clk}
	p := Profile{Name: "short", Bandwidth: 100_000_000, Latency: 500 * time.Microsecond}
	e := newEmuConn(rec, p, clk)
	defer e.Close()
	done := make(chan error, 1)
	go func() {
		_, err := e.Write(make([]byte, 4_000_000))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a 4 MB write (40 ms of wire) blocked with the link's clock stopped")
	}
	if got, want := e.maxQueued, int64(5_000_000+4*pieceSize); got != want {
		t.Errorf("in-flight cap %d bytes, want %d", got, want)
	}
}

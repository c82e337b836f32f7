package transport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"time"
)

// Profile describes an emulated link: a bandwidth cap and a one-way latency,
// applied to each direction independently.
type Profile struct {
	Name      string        // profile name, informational
	Bandwidth int64         // bytes per second per direction; 0 = unlimited
	Latency   time.Duration // one-way propagation delay
}

// Standard profiles.
var (
	// LAN is a 1 GB/s link with 0.1 ms one-way latency.
	LAN = Profile{Name: "lan", Bandwidth: 1_000_000_000, Latency: 100 * time.Microsecond}
	// PaperWAN is the WAN of the SelectFormer evaluation: 100 MB/s, 50 ms one-way.
	PaperWAN = Profile{Name: "paper-wan", Bandwidth: 100_000_000, Latency: 50 * time.Millisecond}
	// NoLink applies no shaping.
	NoLink = Profile{Name: "none"}
)

var profiles = map[string]Profile{LAN.Name: LAN, PaperWAN.Name: PaperWAN, NoLink.Name: NoLink}

// ProfileByName returns the named profile: "lan", "paper-wan" or "none".
func ProfileByName(name string) (Profile, error) {
	p, ok := profiles[name]
	if !ok {
		return Profile{}, fmt.Errorf("transport: unknown link profile %q (known: %v)", name, ProfileNames())
	}
	return p, nil
}

// ProfileNames lists the names ProfileByName accepts, sorted.
func ProfileNames() []string {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// String describes the profile.
func (p Profile) String() string {
	bw := "unlimited"
	if p.Bandwidth > 0 {
		bw = fmt.Sprintf("%g MB/s", float64(p.Bandwidth)/1e6)
	}
	name := p.Name
	if name == "" {
		name = "custom"
	}
	return fmt.Sprintf("%s (%s, %v one-way)", name, bw, p.Latency)
}

// TransferTime is the time for one message of n bytes to arrive on an idle
// link: serialization at the capped rate plus the latency.
func (p Profile) TransferTime(n int64) time.Duration {
	return p.serialize(n) + p.Latency
}

func (p Profile) serialize(n int64) time.Duration {
	if p.Bandwidth <= 0 || n <= 0 {
		return 0
	}
	// Split to avoid overflow of n*1e9 for huge n.
	sec := n / p.Bandwidth
	rem := n % p.Bandwidth
	return time.Duration(sec)*time.Second + time.Duration(rem*int64(time.Second)/p.Bandwidth)
}

func (p Profile) validate() error {
	if p.Bandwidth < 0 || p.Latency < 0 {
		return fmt.Errorf("transport: invalid link profile %v: negative bandwidth or latency", p)
	}
	if p.Bandwidth > 0 && p.Bandwidth < 1000 {
		return fmt.Errorf("transport: invalid link profile %v: bandwidth below 1000 B/s", p)
	}
	return nil
}

func (p Profile) shapes() bool { return p.Bandwidth > 0 || p.Latency > 0 }

// clock abstracts time for the link emulator so tests can run it on a
// virtual clock.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) clockTimer
}

type clockTimer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) NewTimer(d time.Duration) clockTimer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// pieceSize is the granularity at which written data is scheduled, so that
// the receiver sees a large write arrive progressively.
const pieceSize = 64 << 10

// maxDeliver bounds the bytes the emulator hands to the underlying
// connection in one write.
const maxDeliver = 4 << 20

// Emulate wraps c so that data written to it is serialized at p.Bandwidth
// and becomes readable at the other end p.Latency after its serialization
// ends. Writes block only for serialization (back-pressure), never for the
// latency, so messages pipeline. Reads are not shaped: wrap both ends (or
// use a relay that wraps both directions) for a symmetric link. With a
// profile that shapes nothing, c is returned unchanged.
func Emulate(c net.Conn, p Profile) net.Conn {
	if !p.shapes() {
		return c
	}
	return newEmuConn(c, p, realClock{})
}

// emuConn implements the link model: each piece of written data occupies
// the wire from max(now, wire free) for len/bandwidth, and is delivered to
// the underlying connection at the end of that plus the latency.
type emuConn struct {
	net.Conn
	p         Profile
	clk       clock
	maxQueued int64

	wmu sync.Mutex // serializes Write

	mu          sync.Mutex
	free        time.Time // when the wire is next free
	q           []piece
	queued      int64
	closed      bool
	writeClosed bool
	werr        error
	wdl         time.Time
	dlCh        chan struct{}

	wake  chan struct{} // to the delivery goroutine
	space chan struct{} // to writers: the queue shrank
	kill  chan struct{}
	done  chan struct{}
	once  sync.Once
}

type piece struct {
	b  []byte
	at time.Time
}

// minQueued is the least the emulator lets a writer have in flight: 50 ms
// of serialization, about what a kernel socket buffer holds on such a link.
// A cap of one bandwidth-delay product alone would be a few milliseconds of
// wire on a short link, and the delivery goroutine shares the process's
// CPUs with the computation: woken a few milliseconds late, it would leave
// the emulated wire idle while writers wait for space (the link emulated
// slower than its bandwidth).
func minQueued(p Profile) int64 {
	return p.Bandwidth / 20
}

func newEmuConn(c net.Conn, p Profile, clk clock) *emuConn {
	bdp := int64(64 << 20)
	if p.Bandwidth > 0 {
		bdp = p.Bandwidth * int64(p.Latency) / int64(time.Second)
	}
	e := &emuConn{
		Conn:      c,
		p:         p,
		clk:       clk,
		maxQueued: min(max(bdp, minQueued(p)), 256<<20) + 4*pieceSize,
		dlCh:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		space:     make(chan struct{}, 1),
		kill:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	go e.deliver()
	return e
}

// Write schedules p on the emulated wire.
func (e *emuConn) Write(p []byte) (int, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		k := min(len(p), pieceSize)
		if err := e.waitSpace(int64(k)); err != nil {
			return n, err
		}
		b := append([]byte(nil), p[:k]...)
		now := e.clk.Now()
		e.mu.Lock()
		start := e.free
		if now.After(start) {
			start = now
		}
		e.free = start.Add(e.p.serialize(int64(k)))
		e.q = append(e.q, piece{b: b, at: e.free.Add(e.p.Latency)})
		e.queued += int64(k)
		e.mu.Unlock()
		signal(e.wake)
		n += k
		p = p[k:]
	}
	return n, nil
}

// waitSpace blocks until k more bytes fit in the in-flight queue (about one
// bandwidth-delay product, at least minQueued), honouring the write deadline.
func (e *emuConn) waitSpace(k int64) error {
	for {
		e.mu.Lock()
		switch {
		case e.closed || e.writeClosed:
			e.mu.Unlock()
			return net.ErrClosed
		case e.werr != nil:
			err := e.werr
			e.mu.Unlock()
			return err
		case e.queued == 0 || e.queued+k <= e.maxQueued:
			e.mu.Unlock()
			return nil
		}
		dl, dlCh := e.wdl, e.dlCh
		e.mu.Unlock()
		var timeout <-chan time.Time
		var t *time.Timer
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t = time.NewTimer(d)
			timeout = t.C
		}
		select {
		case <-e.space:
		case <-dlCh:
		case <-timeout:
		case <-e.kill:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// deliver writes queued pieces to the underlying connection when due.
func (e *emuConn) deliver() {
	defer close(e.done)
	var buf []byte
	for {
		e.mu.Lock()
		for len(e.q) == 0 {
			if e.closed {
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
			select {
			case <-e.wake:
			case <-e.kill:
				return
			}
			e.mu.Lock()
		}
		pc := e.q[0]
		e.mu.Unlock()
		if d := pc.at.Sub(e.clk.Now()); d > 0 {
			t := e.clk.NewTimer(d)
			select {
			case <-t.C():
			case <-e.kill:
				t.Stop()
				return
			}
		}
		// Every piece due by now goes in one write: a delivery goroutine
		// woken late (the process busy) catches up at once instead of
		// one piece per wake-up.
		now := e.clk.Now()
		e.mu.Lock()
		k, size := 0, 0
		for k < len(e.q) && !e.q[k].at.After(now) && size < maxDeliver {
			size += len(e.q[k].b)
			k++
		}
		if k == 0 {
			k, size = 1, len(pc.b)
		}
		b := pc.b
		if k > 1 {
			buf = buf[:0]
			for _, q := range e.q[:k] {
				buf = append(buf, q.b...)
			}
			b = buf
		}
		e.mu.Unlock()
		_, err := e.Conn.Write(b)
		e.mu.Lock()
		clear(e.q[:k])
		e.q = e.q[k:]
		e.queued -= int64(size)
		if err != nil {
			e.werr = fmt.Errorf("link emulator: %w", err)
			e.q, e.queued = nil, 0
		}
		e.mu.Unlock()
		signal(e.space)
		if err != nil {
			return
		}
	}
}

// flush waits until everything written has been delivered or the wait
// exceeds the latency plus a grace period.
func (e *emuConn) flush() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	signal(e.wake)
	e.mu.Lock()
	backlog := e.free.Sub(e.clk.Now())
	e.mu.Unlock()
	t := time.NewTimer(max(backlog, 0) + e.p.Latency + 500*time.Millisecond)
	defer t.Stop()
	select {
	case <-e.done:
	case <-t.C:
	}
}

// Close delivers what was written (bounded wait), then closes the
// underlying connection.
func (e *emuConn) Close() error {
	var err error
	e.once.Do(func() {
		e.flush()
		close(e.kill)
		err = e.Conn.Close() // unblocks a delivery stuck on a stalled peer
		<-e.done
	})
	if err != nil {
		return err
	}
	return nil
}

// CloseWrite delivers what was written, then half-closes the underlying
// connection if it supports it.
func (e *emuConn) CloseWrite() error {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	e.writeClosed = true
	e.mu.Unlock()
	for {
		e.mu.Lock()
		empty, werr := len(e.q) == 0, e.werr
		e.mu.Unlock()
		if werr != nil {
			return werr
		}
		if empty {
			break
		}
		select {
		case <-e.space:
		case <-e.kill:
			return net.ErrClosed
		}
	}
	if cw, ok := e.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("link emulator: underlying connection cannot half-close")
}

// SetDeadline sets the read deadline of the underlying connection and the
// write deadline of the emulator.
func (e *emuConn) SetDeadline(t time.Time) error {
	if err := e.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return e.SetWriteDeadline(t)
}

// SetWriteDeadline bounds how long Write waits for room on the emulated wire.
func (e *emuConn) SetWriteDeadline(t time.Time) error {
	e.mu.Lock()
	e.wdl = t
	close(e.dlCh)
	e.dlCh = make(chan struct{})
	e.mu.Unlock()
	return nil
}

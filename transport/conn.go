package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/selectformer/selectformer/internal/prio"
	"io"
	"net"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// ErrClosed is wrapped by the errors of operations on a Conn closed locally.
var ErrClosed = errors.New("transport: connection closed")

// ErrTooLarge is wrapped by the error of a receive that refused a message
// larger than the caller's maximum (RecvBytes' max).
var ErrTooLarge = errors.New("transport: message too large")

// frameOverhead is what every DATA frame costs against the receiver's
// stream window beyond its payload: it pays for the receiver's bookkeeping
// of a queued frame (its slot in the queue and the rounding of its buffer),
// so that empty or tiny frames cannot queue without bound. With it, the
// memory the queued frames of one stream hold stays within about
// 1.25 × StreamWindow (TestEmptyFramesAreFlowControlled).
const frameOverhead = 128

// frameCost is the flow-control cost of a DATA frame with an n-byte payload.
func frameCost(n int) int64 { return int64(n) + frameOverhead }

// sendChunk is the largest DATA payload sent to a peer that accepts frames
// of maxFrame bytes with a stream window of window bytes: a frame never
// needs more than half the window (so that the peer's grants, made each half
// window, keep a sender of large messages going).
func sendChunk(maxFrame, window int) int { return min(maxFrame, window/2-frameOverhead) }

// MessageBytes returns the bytes one uncompressed message of payload bytes
// costs on the wire (what Stats.BytesSent counts) between ends with the
// default MaxFrame and StreamWindow: the payload and a 10-byte header per
// frame, plus the 8-byte total length in the first frame when the message
// spans several. Frames carry at most min(DefaultMaxFrame,
// DefaultStreamWindow/2 − 128) = 1 MiB of payload, the length included, as
// Stream.Send splits a message. A message of at most 1 MiB is one frame:
// payload + 10 bytes.
func MessageBytes(payload int) int64 {
	return messageBytes(payload, sendChunk(DefaultMaxFrame, DefaultStreamWindow))
}

// messageBytes is MessageBytes for frames of at most chunk payload bytes.
func messageBytes(payload, chunk int) int64 {
	b, c := int64(payload), int64(chunk)
	if b <= c {
		return b + headerSize
	}
	frames := (b + lenPrefix + c - 1) / c
	return b + lenPrefix + headerSize*frames
}

// cancelGrace is how long a frame being written when its context ends may
// still take to reach the peer before the write is interrupted (which kills
// the connection).
const cancelGrace = 2 * time.Second

// aLongTimeAgo is a deadline in the past, used to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// smallWrite is how much payload is copied next to its header so that a
// frame goes out in one write (one TLS record) when it is small.
const smallWrite = 16<<10 - headerSize

// Conn is an authenticated connection carrying independent streams. It is
// safe for concurrent use. Create one with Dial, Listener.Accept or Pipe.
type Conn struct {
	nc     net.Conn
	raw    net.Conn // what to close: below TLS, so that closing never blocks
	opt    Options
	peer   preface
	chunk  int // largest DATA payload we send: min(peer max frame, peer window/2 - frameOverhead)
	br     *bufio.Reader
	peerFP string

	wtok *prio.Gate // write token: the waiting frame of the lowest priority number goes first
	wbuf []byte     // guarded by wtok

	mu         sync.Mutex
	streams    map[uint32]*Stream
	peerOpened int

	ctrlMu  sync.Mutex
	ctrlQ   []header
	ctrlSig chan struct{}

	dead chan struct{}
	// readDone is closed when readLoop has returned: every frame it read is
	// queued on its stream by then.
	readDone chan struct{}
	errMu    sync.Mutex
	err      error
	wg       sync.WaitGroup
	closeMu  sync.Once

	stats counters

	bufs sync.Pool // *[]byte of cap opt.MaxFrame, for large frames

	zOnce sync.Once
	zEnc  *zstd.Encoder
	zErr  error

	zDecMu sync.Mutex // guards zDec: its limit is set per message
	zDec   *zstd.Decoder
}

// newConn exchanges the preface on nc and starts the connection's
// goroutines. o must be normalized. On error nc is closed.
func newConn(ctx context.Context, nc net.Conn, o Options) (*Conn, error) {
	mine := preface{window: uint32(o.StreamWindow), maxFrame: uint32(o.MaxFrame)}
	stop := interruptOnCancel(ctx, func() { _ = nc.SetDeadline(aLongTimeAgo) })
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := nc.Write(mine.encode())
		werr <- err
	}()
	buf := make([]byte, prefaceSize)
	_, rerr := io.ReadFull(nc, buf)
	if rerr != nil {
		_ = nc.Close() // unblocks the writer
	}
	err := <-werr
	interrupted := stop()
	_ = nc.SetDeadline(time.Time{})
	if rerr != nil || err != nil {
		_ = nc.Close()
		if endedByCtx(ctx, rerr, interrupted) || endedByCtx(ctx, err, interrupted) {
			return nil, fmt.Errorf("transport: connection preface: %w", ctx.Err())
		}
		if rerr != nil {
			return nil, fmt.Errorf("transport: reading connection preface: %w", rerr)
		}
		return nil, fmt.Errorf("transport: writing connection preface: %w", err)
	}
	peer, err := decodePreface(buf)
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		// tls.Conn.Close may block for seconds sending close_notify to a
		// stalled peer; closing the socket below it cannot. (Go peers accept
		// an EOF at a record boundary as the end.)
		raw = tc.NetConn()
	}
	c := &Conn{
		nc:       nc,
		raw:      raw,
		opt:      o,
		peer:     peer,
		chunk:    sendChunk(int(peer.maxFrame), int(peer.window)),
		br:       bufio.NewReaderSize(nc, 64<<10),
		wtok:     prio.NewGate(1),
		streams:  make(map[uint32]*Stream),
		ctrlSig:  make(chan struct{}, 1),
		dead:     make(chan struct{}),
		readDone: make(chan struct{}),
	}
	c.wg.Add(2)
	go c.readLoop()
	go c.ctrlLoop()
	return c, nil
}

// interruptOnCancel runs f if ctx is cancelled before the returned stop is
// called; stop reports whether f ran, and waits for it to finish.
func interruptOnCancel(ctx context.Context, f func()) (stop func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	done := make(chan struct{})
	s := context.AfterFunc(ctx, func() {
		defer close(done)
		f()
	})
	return func() bool {
		if s() {
			return false
		}
		<-done
		return true
	}
}

// PeerFingerprint is the pinned fingerprint of the peer's key ("" for Pipe).
func (c *Conn) PeerFingerprint() string { return c.peerFP }

// LocalAddr is the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// RemoteAddr is the peer's network address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// Stats returns a snapshot of the connection's counters (all streams, plus
// credit frames).
func (c *Conn) Stats() Stats { return c.stats.snapshot() }

// Done is closed when the connection has failed or been closed; Err then
// says why.
func (c *Conn) Done() <-chan struct{} { return c.dead }

// Err returns why the connection ended, or nil while it is alive.
func (c *Conn) Err() error {
	select {
	case <-c.dead:
		return c.deadErr()
	default:
		return nil
	}
}

// Close closes the connection; blocked stream operations return an error
// wrapping ErrClosed. Messages already sent stay deliverable to the peer.
func (c *Conn) Close() error {
	c.fail(ErrClosed)
	c.wg.Wait()
	return nil
}

// fail records the first error, wakes every waiter and closes the socket.
func (c *Conn) fail(err error) {
	c.errMu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.errMu.Unlock()
	if first {
		close(c.dead)
		_ = c.raw.Close()
	}
}

func (c *Conn) deadErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// Stream returns the stream with the given id, creating it if needed. Both
// sides address a stream by the same id.
func (c *Conn) Stream(id uint32) *Stream {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil {
		s = c.newStream(id)
	}
	return s
}

// newStream must be called with c.mu held.
func (c *Conn) newStream(id uint32) *Stream {
	s := &Stream{
		c:         c,
		id:        id,
		sendTok:   make(chan struct{}, 1),
		recvTok:   make(chan struct{}, 1),
		creditSig: make(chan struct{}, 1),
		qSig:      make(chan struct{}, 1),
		credit:    int64(c.peer.window),
	}
	s.compression.Store(uint32(c.opt.Compression))
	c.streams[id] = s
	return s
}

// readLoop decodes frames until the connection fails.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer close(c.readDone)
	hbuf := make([]byte, headerSize)
	for {
		h, p, err := readFrame(c.br, hbuf, c.opt.MaxFrame, c.allocFrame)
		if err == nil {
			switch h.typ {
			case frameData:
				err = c.onData(h, p)
			case frameCredit:
				err = c.onCredit(h)
			}
		}
		if err != nil {
			c.fail(c.readError(err))
			return
		}
	}
}

func (c *Conn) readError(err error) error {
	select {
	case <-c.dead: // closed locally; keep the first error
		return err
	default:
	}
	switch {
	case errors.Is(err, ErrProtocol):
		return err
	case errors.Is(err, io.EOF):
		return fmt.Errorf("transport: connection closed by peer: %w", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("transport: connection closed by peer mid-frame: %w", err)
	default:
		return fmt.Errorf("transport: read: %w", err)
	}
}

func (c *Conn) onData(h header, p []byte) error {
	c.mu.Lock()
	s := c.streams[h.stream]
	if s == nil {
		if c.peerOpened >= c.opt.MaxStreams {
			c.mu.Unlock()
			return fmt.Errorf("%w: peer opened more than %d streams (stream %d)", ErrProtocol, c.opt.MaxStreams, h.stream)
		}
		c.peerOpened++
		s = c.newStream(h.stream)
	}
	c.mu.Unlock()

	f := inFrame{flags: h.flags, data: p, wire: int64(len(p))}
	if cap(p) == c.opt.MaxFrame && len(p) >= poolMin && len(p) >= c.opt.MaxFrame-c.opt.MaxFrame/8 {
		f.pooled = p
	}
	n := int64(len(p))
	start, end := h.flags&flagStart != 0, h.flags&flagEnd != 0
	if s.rxRemaining == 0 {
		switch {
		case !start:
			return fmt.Errorf("%w: stream %d: continuation frame outside a message", ErrProtocol, s.id)
		case end:
			f.total = n
		default:
			total := leUint64(p)
			rest := n - lenPrefix
			if total > uint64(c.opt.MaxMessage) {
				return fmt.Errorf("%w: stream %d: oversized message of %d bytes (maximum %d)", ErrProtocol, s.id, total, c.opt.MaxMessage)
			}
			if total <= uint64(rest) {
				return fmt.Errorf("%w: stream %d: multi-frame message of %d bytes fits in its first frame", ErrProtocol, s.id, total)
			}
			f.total = int64(total)
			f.data = p[lenPrefix:]
			s.rxRemaining = int64(total) - rest
		}
	} else {
		switch {
		case start:
			return fmt.Errorf("%w: stream %d: new message started with %d bytes of the previous one missing", ErrProtocol, s.id, s.rxRemaining)
		case n > s.rxRemaining:
			return fmt.Errorf("%w: stream %d: frame of %d bytes overruns the message (%d left)", ErrProtocol, s.id, n, s.rxRemaining)
		case n == 0 && !end:
			return fmt.Errorf("%w: stream %d: empty continuation frame", ErrProtocol, s.id)
		}
		s.rxRemaining -= n
		if end != (s.rxRemaining == 0) {
			return fmt.Errorf("%w: stream %d: END flag does not match the message length (%d bytes left)", ErrProtocol, s.id, s.rxRemaining)
		}
	}

	cost := frameCost(int(n))
	s.qmu.Lock()
	if s.buffered+s.unacked+cost > int64(c.opt.StreamWindow) {
		queued := len(s.q) - s.qhead
		s.qmu.Unlock()
		return fmt.Errorf("%w: stream %d: peer exceeded the flow-control window of %d bytes (%d frames queued; each frame costs its payload plus %d bytes)",
			ErrProtocol, s.id, c.opt.StreamWindow, queued, frameOverhead)
	}
	s.q = append(s.q, f)
	s.buffered += cost
	s.qmu.Unlock()
	signal(s.qSig)
	return nil
}

func (c *Conn) onCredit(h header) error {
	c.mu.Lock()
	s := c.streams[h.stream]
	c.mu.Unlock()
	if s == nil {
		return fmt.Errorf("%w: CREDIT for unknown stream %d", ErrProtocol, h.stream)
	}
	s.creditMu.Lock()
	s.credit += int64(h.length)
	over := s.credit > int64(c.peer.window)
	s.creditMu.Unlock()
	if over {
		return fmt.Errorf("%w: stream %d: peer granted credit beyond its window of %d bytes", ErrProtocol, s.id, c.peer.window)
	}
	s.stats.bytesRecv.Add(headerSize)
	c.stats.bytesRecv.Add(headerSize)
	signal(s.creditSig)
	return nil
}

// queueCredit schedules a CREDIT frame; it is counted as sent now.
func (c *Conn) queueCredit(s *Stream, n int64) {
	s.stats.bytesSent.Add(headerSize)
	c.stats.bytesSent.Add(headerSize)
	c.ctrlMu.Lock()
	c.ctrlQ = append(c.ctrlQ, header{typ: frameCredit, stream: s.id, length: uint32(n)})
	c.ctrlMu.Unlock()
	signal(c.ctrlSig)
}

// ctrlLoop writes queued CREDIT frames, so that receivers never block on
// the socket.
func (c *Conn) ctrlLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctrlSig:
		case <-c.dead:
			return
		}
		c.ctrlMu.Lock()
		q := c.ctrlQ
		c.ctrlQ = nil
		c.ctrlMu.Unlock()
		if len(q) == 0 {
			continue
		}
		buf := make([]byte, len(q)*headerSize)
		for i, h := range q {
			h.put(buf[i*headerSize:])
		}
		if err := c.writeFrame(context.Background(), -1<<62, buf, nil); err != nil {
			return
		}
	}
}

// writeFrame writes hdr followed by payload atomically with respect to
// other frames. Any write error, including one caused by ctx interrupting
// a blocked write, kills the connection (the framing is then corrupt).
func (c *Conn) writeFrame(ctx context.Context, pr int64, hdr, payload []byte) error {
	if err := c.wtok.Acquire(ctx, pr, c.dead); err != nil {
		if err == prio.ErrDone {
			return c.deadErr()
		}
		return err
	}
	defer c.wtok.Release()
	select {
	case <-c.dead:
		return c.deadErr()
	default:
	}
	if err := ctx.Err(); err != nil { // no new frame once the context ended
		return err
	}
	// A context that ends mid-frame gives the frame cancelGrace to reach a
	// peer that reads: cutting it would corrupt the framing and kill the
	// connection, and with it the abort a failing party still has to send
	// on another stream. A peer that does not read is cut off at the grace.
	stop := interruptOnCancel(ctx, func() { _ = c.nc.SetWriteDeadline(time.Now().Add(cancelGrace)) })
	err := c.writeLocked(hdr, payload)
	if stop() {
		if err == nil {
			_ = c.nc.SetWriteDeadline(time.Time{})
		} else {
			err = fmt.Errorf("%w (write interrupted: %w)", ctx.Err(), err)
		}
	}
	if err != nil {
		err = fmt.Errorf("transport: write: %w", err)
		c.fail(err)
		return err
	}
	return nil
}

func (c *Conn) writeLocked(hdr, payload []byte) error {
	k := min(len(payload), smallWrite)
	c.wbuf = append(append(c.wbuf[:0], hdr...), payload[:k]...)
	if _, err := c.nc.Write(c.wbuf); err != nil {
		return err
	}
	if k < len(payload) {
		if _, err := c.nc.Write(payload[k:]); err != nil {
			return err
		}
	}
	return nil
}

// encoder returns the connection's zstd encoder.
func (c *Conn) encoder() (*zstd.Encoder, error) {
	c.zOnce.Do(func() {
		c.zEnc, c.zErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedFastest))
		if c.zErr != nil {
			c.zErr = fmt.Errorf("transport: zstd encoder: %w", c.zErr)
		}
	})
	return c.zEnc, c.zErr
}

// decompress appends the decompression of src to dst, refusing (with an
// error wrapping ErrTooLarge) output beyond limit bytes: the decoder stops
// within a block of the limit, so a small message that would expand
// without bound costs at most about limit bytes of memory.
func (c *Conn) decompress(src, dst []byte, limit int) ([]byte, error) {
	c.zDecMu.Lock()
	defer c.zDecMu.Unlock()
	if c.zDec == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("transport: zstd decoder: %w", err)
		}
		c.zDec = d
	}
	// The decoder is ours alone under zDecMu, so its limit can be set for
	// this message: WithDecoderMaxMemory caps DecodeAll's total output
	// (and the window it accepts).
	if err := c.zDec.ResetWithOptions(nil, zstd.WithDecoderMaxMemory(uint64(max(limit, 1)))); err != nil {
		return nil, fmt.Errorf("transport: zstd decoder: %w", err)
	}
	n0 := len(dst)
	out, err := c.zDec.DecodeAll(src, dst)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) ||
		(err == nil && len(out)-n0 > limit) {
		return nil, fmt.Errorf("%w: decompresses to more than the maximum of %d bytes", ErrTooLarge, limit)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// poolMin is the smallest frame payload read into a pooled buffer.
const poolMin = 64 << 10

// allocFrame returns a buffer for an n-byte frame payload: pooled buffers
// (of capacity MaxFrame) for large frames, which recvMsg recycles after
// copying them out. Only frames of at least 7/8 of MaxFrame get one (a
// sender's full frames), so that a queued frame never holds much more
// memory than the payload flow control counts.
func (c *Conn) allocFrame(n int) []byte {
	if n < poolMin || n < c.opt.MaxFrame-c.opt.MaxFrame/8 || n > c.opt.MaxFrame {
		return make([]byte, n)
	}
	if bp, ok := c.bufs.Get().(*[]byte); ok {
		return (*bp)[:n]
	}
	return make([]byte, n, c.opt.MaxFrame)
}

func (c *Conn) recycle(f *inFrame) {
	if f.pooled != nil {
		b := f.pooled[:0]
		c.bufs.Put(&b)
		f.pooled, f.data = nil, nil
	}
}

// signal does a non-blocking send on a 1-buffered channel.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func leUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Stream is one ordered, flow-controlled message channel of a Conn. Sends on
// a stream are serialized with each other, and so are receives; one send and
// one receive may run concurrently (Exchange does). Get one with Conn.Stream.
type Stream struct {
	c           *Conn
	id          uint32
	stats       counters
	compression atomic.Uint32
	prio        atomic.Int64

	// sending side
	sendTok   chan struct{}
	sendErr   error // guarded by sendTok: set when a message was abandoned mid-way
	creditMu  sync.Mutex
	credit    int64
	creditSig chan struct{}

	// receiving side
	recvTok    chan struct{}
	discarding bool // guarded by recvTok: skip to the end of an abandoned message
	qmu        sync.Mutex
	q          []inFrame
	qhead      int
	buffered   int64 // payload bytes queued, not yet consumed
	unacked    int64 // payload bytes consumed, not yet credited
	qSig       chan struct{}

	rxRemaining int64 // owned by the read loop: bytes left in the current message
}

// inFrame is a received DATA frame.
type inFrame struct {
	flags byte
	data  []byte // payload without the length prefix
	total int64  // message length (START frames only)
	wire  int64  // payload length on the wire (flow-control units)

	pooled []byte // the pooled buffer holding data, if any
}

// ID returns the stream id.
func (s *Stream) ID() uint32 { return s.id }

// SetPriority sets the priority of this stream's frames on the connection:
// when several streams have frames waiting, the lowest number goes first
// (the default is 0).
func (s *Stream) SetPriority(p int64) { s.prio.Store(p) }

// Stats returns a snapshot of the stream's counters.
func (s *Stream) Stats() Stats { return s.stats.snapshot() }

// SetCompression sets which messages this side compresses on this stream,
// and which compressed messages it accepts from the peer: compression is
// opt-in on both ends. With CompressNone (the default unless
// Options.Compression says otherwise) a compressed message from the peer
// kills the connection; CompressBytes accepts compressed byte messages
// (RecvBytes) and CompressAll compressed word messages too. Set it on both
// sides before the first message. Never enable it on a stream whose
// messages are private: their compressed length depends on their content.
func (s *Stream) SetCompression(m Compression) { s.compression.Store(uint32(m)) }

// SendWords sends w as one message (little-endian words). One round.
func (s *Stream) SendWords(ctx context.Context, w []uint64) error {
	if err := s.sendWords(ctx, w); err != nil {
		return err
	}
	s.addRound()
	return nil
}

// RecvWords receives one message into dst, which must have exactly the
// message's length in words; otherwise the message is discarded and an
// error returned. The length is checked on the size the peer announces in
// the message's first frame, before anything is allocated; a compressed
// message (accepted only with CompressAll, see SetCompression) is
// decompressed into dst and never beyond len(dst) words. One round.
func (s *Stream) RecvWords(ctx context.Context, dst []uint64) error {
	if err := s.recvWords(ctx, dst); err != nil {
		return err
	}
	s.addRound()
	return nil
}

// SendBytes sends b as one message. One round.
func (s *Stream) SendBytes(ctx context.Context, b []byte) error {
	if err := s.sendPayload(ctx, b, CompressBytes); err != nil {
		return fmt.Errorf("stream %d: send %d bytes: %w", s.id, len(b), err)
	}
	s.addRound()
	return nil
}

// RecvBytes receives one message of at most max bytes (an empty message
// yields an empty, possibly nil, slice). A message whose announced size
// (the length its first frame declares) exceeds max is refused before
// anything is allocated for it: it is discarded as it arrives and an error
// wrapping ErrTooLarge returned, leaving the stream usable. A compressed
// message (accepted only with CompressBytes or CompressAll, see
// SetCompression) is decompressed with a limit of max bytes, so it never
// takes more than about max bytes of memory whatever its ratio. The
// connection's Options.MaxMessage also applies. One round.
func (s *Stream) RecvBytes(ctx context.Context, max int) ([]byte, error) {
	if max < 0 {
		return nil, fmt.Errorf("stream %d: receive: negative maximum size %d", s.id, max)
	}
	b, err := s.recvMsg(ctx, nil, false, min(max, s.c.opt.MaxMessage), CompressBytes)
	if err != nil {
		return nil, fmt.Errorf("stream %d: receive: %w", s.id, err)
	}
	s.addRound()
	return b, nil
}

// Exchange sends send and receives into recv concurrently: one round. recv
// must have exactly the length of the peer's message.
func (s *Stream) Exchange(ctx context.Context, send, recv []uint64) error {
	errc := make(chan error, 1)
	go func() { errc <- s.sendWords(ctx, send) }()
	rerr := s.recvWords(ctx, recv)
	serr := <-errc
	if err := errors.Join(serr, rerr); err != nil {
		return err
	}
	s.addRound()
	return nil
}

func (s *Stream) addRound() {
	s.stats.rounds.Add(1)
	s.c.stats.rounds.Add(1)
}

func (s *Stream) sendWords(ctx context.Context, w []uint64) error {
	if err := s.sendPayload(ctx, wordsToWire(w), CompressAll); err != nil {
		return fmt.Errorf("stream %d: send %d words: %w", s.id, len(w), err)
	}
	return nil
}

func (s *Stream) recvWords(ctx context.Context, dst []uint64) error {
	var err error
	if hostLittleEndian {
		_, err = s.recvMsg(ctx, wordsView(dst), true, 8*len(dst), CompressAll)
	} else {
		var b []byte
		if b, err = s.recvMsg(ctx, nil, false, 8*len(dst), CompressAll); err == nil {
			if len(b) != 8*len(dst) {
				err = fmt.Errorf("message has %d bytes, want %d words", len(b), len(dst))
			} else {
				decodeWordsLE(dst, b)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("stream %d: receive %d words: %w", s.id, len(dst), err)
	}
	return nil
}

// sendPayload compresses b if the stream's mode is at least level and that
// helps, then sends it.
func (s *Stream) sendPayload(ctx context.Context, b []byte, level Compression) error {
	compressed := false
	if Compression(s.compression.Load()) >= level && len(b) >= 64 {
		enc, err := s.c.encoder()
		if err != nil {
			return err
		}
		if z := enc.EncodeAll(b, make([]byte, 0, len(b)/2)); len(z) < len(b) {
			b, compressed = z, true
		}
	}
	return s.sendMsg(ctx, b, compressed)
}

// sendMsg splits b into DATA frames, waiting for credit before each.
func (s *Stream) sendMsg(ctx context.Context, b []byte, compressed bool) error {
	c := s.c
	select {
	case s.sendTok <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.dead:
		return c.deadErr()
	}
	defer func() { <-s.sendTok }()
	if s.sendErr != nil {
		return s.sendErr
	}
	if len(b) > c.opt.MaxMessage {
		return fmt.Errorf("message of %d bytes exceeds MaxMessage %d", len(b), c.opt.MaxMessage)
	}
	var hbuf [headerSize + lenPrefix]byte
	flags := flagStart
	if compressed {
		flags |= flagCompressed
	}
	rest := b
	first := true
	for first || len(rest) > 0 {
		hdr := hbuf[:headerSize]
		var part []byte
		n := 0 // payload length including any prefix
		if first && len(b) > c.chunk {
			binary.LittleEndian.PutUint64(hbuf[headerSize:], uint64(len(b)))
			hdr = hbuf[:]
			part = rest[:c.chunk-lenPrefix]
			n = c.chunk
		} else {
			part = rest[:min(len(rest), c.chunk)]
			n = len(part)
		}
		rest = rest[len(part):]
		if len(rest) == 0 {
			flags |= flagEnd
		}
		header{typ: frameData, flags: flags, stream: s.id, length: uint32(n)}.put(hbuf[:])
		if err := s.waitCredit(ctx, frameCost(n)); err != nil {
			return s.abandon(first, err)
		}
		if err := c.writeFrame(ctx, s.prio.Load(), hdr, part); err != nil {
			return s.abandon(first, err)
		}
		s.stats.bytesSent.Add(int64(headerSize + n))
		c.stats.bytesSent.Add(int64(headerSize + n))
		first = false
		flags &^= flagStart | flagCompressed
	}
	s.stats.msgsSent.Add(1)
	c.stats.msgsSent.Add(1)
	return nil
}

// abandon records that a message was cut off after its first frame, which
// leaves the stream unusable for sending.
func (s *Stream) abandon(first bool, err error) error {
	if !first {
		s.sendErr = fmt.Errorf("an earlier message on this stream was abandoned mid-way: %w", err)
	}
	return err
}

func (s *Stream) waitCredit(ctx context.Context, n int64) error {
	for {
		s.creditMu.Lock()
		if s.credit >= n {
			s.credit -= n
			s.creditMu.Unlock()
			return nil
		}
		s.creditMu.Unlock()
		select {
		case <-s.creditSig:
		case <-ctx.Done():
			return fmt.Errorf("waiting for flow-control credit: %w", ctx.Err())
		case <-s.c.dead:
			return s.c.deadErr()
		}
	}
}

// next pops the next received frame, crediting the peer as data is consumed.
func (s *Stream) next(ctx context.Context) (inFrame, error) {
	for {
		s.qmu.Lock()
		if s.qhead < len(s.q) {
			f := s.q[s.qhead]
			s.q[s.qhead] = inFrame{}
			s.qhead++
			if s.qhead == len(s.q) {
				s.q, s.qhead = s.q[:0], 0
			}
			s.buffered -= frameCost(int(f.wire))
			s.unacked += frameCost(int(f.wire))
			var grant int64
			if s.unacked >= int64(s.c.opt.StreamWindow/2) {
				grant, s.unacked = s.unacked, 0
			}
			s.qmu.Unlock()
			s.stats.bytesRecv.Add(headerSize + f.wire)
			s.c.stats.bytesRecv.Add(headerSize + f.wire)
			if grant > 0 {
				s.c.queueCredit(s, grant)
			}
			return f, nil
		}
		s.qmu.Unlock()
		select {
		case <-s.qSig:
		case <-ctx.Done():
			return inFrame{}, ctx.Err()
		case <-s.c.dead:
			// The connection failed (a write to a peer that closed, say),
			// but what the reader already read is still to be delivered:
			// wait for the reader, which stops as the socket is closed, to
			// queue it, then report the failure only if nothing is left.
			select {
			case <-s.c.readDone:
			case <-ctx.Done():
				return inFrame{}, ctx.Err()
			}
			s.qmu.Lock()
			empty := s.qhead == len(s.q)
			s.qmu.Unlock()
			if empty {
				return inFrame{}, s.c.deadErr()
			}
		}
	}
}

// recvMsg receives one message of at most max bytes. For words, the
// uncompressed message must have exactly len(dst) == max bytes and is
// written into dst; otherwise the message is returned in a new slice (dst
// unused). level is the compression mode the stream must have for a
// compressed message to be accepted.
func (s *Stream) recvMsg(ctx context.Context, dst []byte, words bool, max int, level Compression) ([]byte, error) {
	c := s.c
	select {
	case s.recvTok <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.recvTok }()
	for s.discarding {
		f, err := s.next(ctx)
		if err != nil {
			return nil, fmt.Errorf("skipping an abandoned message: %w", err)
		}
		s.discarding = f.flags&flagEnd == 0
		c.recycle(&f)
	}
	f, err := s.next(ctx)
	if err != nil {
		return nil, err
	}
	total := f.total
	compressed := f.flags&flagCompressed != 0
	if compressed && Compression(s.compression.Load()) < level {
		c.recycle(&f)
		err := fmt.Errorf("%w: stream %d: the peer sent a compressed message, but this side did not enable compression on the stream",
			ErrProtocol, s.id)
		c.fail(err)
		return nil, err
	}
	// The announced size is checked before anything is allocated for the
	// message. A compressed message is sent only when it is smaller than
	// the original, so its announced (compressed) size is bounded too.
	var refuse error
	switch {
	case words && !compressed && total != int64(len(dst)):
		refuse = fmt.Errorf("message has %d bytes, want %d", total, len(dst))
	case total > int64(max):
		what := "a"
		if compressed {
			what = "a compressed"
		}
		refuse = fmt.Errorf("%w: %s message of %d bytes, maximum %d", ErrTooLarge, what, total, max)
	}
	if refuse != nil {
		s.discarding = f.flags&flagEnd == 0
		c.recycle(&f)
		return nil, refuse
	}
	var out []byte
	if f.flags&flagEnd != 0 && !words {
		out = f.data // single frame: hand over the buffer
	} else {
		if words && !compressed {
			out = dst[:0] // exact length checked above: never reallocates
		} else {
			// total <= max, checked above; grown as frames arrive, so that
			// an announcement alone never allocates more than this.
			out = make([]byte, 0, min(total, int64(2*c.opt.StreamWindow)))
		}
		for {
			out = append(out, f.data...)
			c.recycle(&f)
			if f.flags&flagEnd != 0 {
				break
			}
			if f, err = s.next(ctx); err != nil {
				s.discarding = true
				return nil, fmt.Errorf("after %d of %d bytes of a message: %w", len(out), total, err)
			}
		}
	}
	if compressed {
		var into []byte
		if words {
			into = dst[:0]
		}
		plain, err := c.decompress(out, into, max)
		if err != nil {
			return nil, fmt.Errorf("decompressing a %d-byte message: %w", len(out), err)
		}
		if words {
			if len(plain) != len(dst) {
				return nil, fmt.Errorf("message has %d bytes, want %d", len(plain), len(dst))
			}
			if len(plain) > 0 && &plain[0] != &dst[0] {
				copy(dst, plain)
			}
		}
		out = plain
	}
	s.stats.msgsRecv.Add(1)
	c.stats.msgsRecv.Add(1)
	return out, nil
}

package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame types.
const (
	frameData   byte = 1
	frameCredit byte = 2
)

// DATA frame flags.
const (
	flagStart      byte = 0x01
	flagEnd        byte = 0x02
	flagCompressed byte = 0x04
	flagMask            = flagStart | flagEnd | flagCompressed
)

const (
	headerSize  = 10
	prefaceSize = 16
	lenPrefix   = 8 // total message length in a multi-frame START frame
	protoMagic  = "SFTR"
	// protoVer 2: every DATA frame costs its payload plus frameOverhead
	// bytes of flow-control window (version 1 counted payloads only).
	protoVer = 2
)

// ErrProtocol is wrapped by every error caused by malformed input from the peer.
var ErrProtocol = errors.New("transport: protocol violation")

// header is a decoded frame header.
type header struct {
	typ    byte
	flags  byte
	stream uint32
	length uint32 // DATA: payload length; CREDIT: increment
}

func (h header) put(b []byte) {
	b[0] = h.typ
	b[1] = h.flags
	binary.LittleEndian.PutUint32(b[2:6], h.stream)
	binary.LittleEndian.PutUint32(b[6:10], h.length)
}

// decodeHeader parses and validates a frame header; maxFrame bounds the
// payload length of DATA frames.
func decodeHeader(b []byte, maxFrame int) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("%w: short frame header (%d bytes)", ErrProtocol, len(b))
	}
	h := header{
		typ:    b[0],
		flags:  b[1],
		stream: binary.LittleEndian.Uint32(b[2:6]),
		length: binary.LittleEndian.Uint32(b[6:10]),
	}
	switch h.typ {
	case frameData:
		if h.flags&^flagMask != 0 {
			return h, fmt.Errorf("%w: malformed header: unknown DATA flags %#x", ErrProtocol, h.flags)
		}
		if h.flags&flagCompressed != 0 && h.flags&flagStart == 0 {
			return h, fmt.Errorf("%w: malformed header: COMPRESSED flag without START", ErrProtocol)
		}
		if int64(h.length) > int64(maxFrame) {
			return h, fmt.Errorf("%w: frame of %d bytes on stream %d exceeds the maximum frame size %d",
				ErrProtocol, h.length, h.stream, maxFrame)
		}
		if h.flags&(flagStart|flagEnd) == flagStart && h.length <= lenPrefix {
			return h, fmt.Errorf("%w: malformed header: multi-frame START frame of %d bytes on stream %d",
				ErrProtocol, h.length, h.stream)
		}
	case frameCredit:
		if h.flags != 0 {
			return h, fmt.Errorf("%w: malformed header: CREDIT frame with flags %#x", ErrProtocol, h.flags)
		}
		if h.length == 0 {
			return h, fmt.Errorf("%w: malformed header: zero CREDIT on stream %d", ErrProtocol, h.stream)
		}
	default:
		return h, fmt.Errorf("%w: malformed header: unknown frame type %#x", ErrProtocol, h.typ)
	}
	return h, nil
}

// readFrame reads one frame from r. The payload of a DATA frame is returned
// in a slice from alloc (nil for an empty one); alloc nil means make.
func readFrame(r io.Reader, hbuf []byte, maxFrame int, alloc func(int) []byte) (header, []byte, error) {
	if _, err := io.ReadFull(r, hbuf[:headerSize]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return header{}, nil, fmt.Errorf("%w: connection closed inside a frame header: %w", ErrProtocol, err)
		}
		return header{}, nil, err
	}
	h, err := decodeHeader(hbuf, maxFrame)
	if err != nil {
		return h, nil, err
	}
	if h.typ != frameData || h.length == 0 {
		return h, nil, nil
	}
	var p []byte
	if alloc != nil {
		p = alloc(int(h.length))
	} else {
		p = make([]byte, h.length)
	}
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, fmt.Errorf("reading %d-byte payload on stream %d: %w", h.length, h.stream, err)
	}
	return h, p, nil
}

// preface is what each side announces when a connection starts.
type preface struct {
	window   uint32 // per-stream receive window in bytes
	maxFrame uint32 // largest DATA payload accepted
}

func (p preface) encode() []byte {
	b := make([]byte, prefaceSize)
	copy(b, protoMagic)
	b[4] = protoVer
	binary.LittleEndian.PutUint32(b[8:12], p.window)
	binary.LittleEndian.PutUint32(b[12:16], p.maxFrame)
	return b
}

func decodePreface(b []byte) (preface, error) {
	if len(b) != prefaceSize || string(b[:4]) != protoMagic {
		return preface{}, fmt.Errorf("%w: bad connection preface %q (not a selectformer transport peer?)", ErrProtocol, b)
	}
	if b[4] != protoVer {
		return preface{}, fmt.Errorf("%w: peer speaks transport version %d, want %d", ErrProtocol, b[4], protoVer)
	}
	p := preface{
		window:   binary.LittleEndian.Uint32(b[8:12]),
		maxFrame: binary.LittleEndian.Uint32(b[12:16]),
	}
	if p.window < minWindow || p.window > maxWindow {
		return p, fmt.Errorf("%w: peer stream window %d outside [%d, %d]", ErrProtocol, p.window, minWindow, maxWindow)
	}
	if p.maxFrame < minFrame || p.maxFrame > maxFrameLimit {
		return p, fmt.Errorf("%w: peer maximum frame %d outside [%d, %d]", ErrProtocol, p.maxFrame, minFrame, maxFrameLimit)
	}
	return p, nil
}

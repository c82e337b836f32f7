package transport

import (
	"fmt"
)

// Defaults and limits of Options.
const (
	DefaultMaxFrame     = 1 << 20 // 1 MiB of payload per frame
	DefaultStreamWindow = 16 << 20
	DefaultMaxMessage   = 1 << 30
	DefaultMaxStreams   = 4096

	minFrame      = 64
	maxFrameLimit = 1 << 26
	minWindow     = 1 << 10
	maxWindow     = 1 << 30
)

// Compression selects which messages of a stream are zstd-compressed. A
// message is sent compressed only when that makes it smaller, so enabling
// compression never costs bytes, only CPU. Receivers need no setting.
type Compression uint32

const (
	// CompressNone sends every message as is (the default).
	CompressNone Compression = iota
	// CompressBytes compresses SendBytes messages (index lists, reports).
	CompressBytes
	// CompressAll also compresses word messages. Uniformly random ring
	// elements (shares, masked values) do not compress; use it only for
	// streams that carry structured words.
	CompressAll
)

// Options configure a Conn. The zero value selects the defaults.
type Options struct {
	// MaxFrame is the largest DATA payload this side accepts, and it bounds
	// the frames it sends; default DefaultMaxFrame, range [64, 64 MiB].
	MaxFrame int
	// StreamWindow is the per-stream receive window (bytes the peer may have
	// outstanding on one stream); default DefaultStreamWindow, range
	// [1 KiB, 1 GiB]. Keep it above the bandwidth-delay product.
	StreamWindow int
	// MaxMessage is the largest message accepted, before and after
	// decompression; default DefaultMaxMessage. At least MaxFrame.
	MaxMessage int
	// MaxStreams bounds the number of streams the peer may open on this
	// side; default DefaultMaxStreams. Memory is bounded by MaxStreams ×
	// StreamWindow.
	MaxStreams int
	// Link, when set, emulates this link profile on this side's outgoing
	// direction (set it on both sides for a symmetric link).
	Link *Profile
	// Compression is the default compression of new streams.
	Compression Compression
}

// normalize fills defaults and validates.
func (o Options) normalize() (Options, error) {
	if o.MaxFrame == 0 {
		o.MaxFrame = DefaultMaxFrame
	}
	if o.StreamWindow == 0 {
		o.StreamWindow = DefaultStreamWindow
	}
	if o.MaxMessage == 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxStreams == 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	switch {
	case o.MaxFrame < minFrame || o.MaxFrame > maxFrameLimit:
		return o, fmt.Errorf("transport: MaxFrame %d outside [%d, %d]", o.MaxFrame, minFrame, maxFrameLimit)
	case o.StreamWindow < minWindow || o.StreamWindow > maxWindow:
		return o, fmt.Errorf("transport: StreamWindow %d outside [%d, %d]", o.StreamWindow, minWindow, maxWindow)
	case o.MaxMessage < o.MaxFrame:
		return o, fmt.Errorf("transport: MaxMessage %d below MaxFrame %d", o.MaxMessage, o.MaxFrame)
	case o.MaxStreams < 0:
		return o, fmt.Errorf("transport: negative MaxStreams %d", o.MaxStreams)
	case o.Compression > CompressAll:
		return o, fmt.Errorf("transport: unknown compression mode %d", o.Compression)
	}
	if o.Link != nil {
		if err := o.Link.validate(); err != nil {
			return o, err
		}
	}
	return o, nil
}

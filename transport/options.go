package transport

import (
	"fmt"
	"log/slog"
	"time"
)

// Defaults and limits of Options.
const (
	DefaultMaxFrame     = 1 << 20 // 1 MiB of payload per frame
	DefaultStreamWindow = 16 << 20
	DefaultMaxMessage   = 1 << 30
	// DefaultMaxStreams bounds the streams the peer may open: with
	// DefaultStreamWindow, 2 GiB of receive window in all. A selection
	// uses at most 3 + selection.MaxWorkers streams per connection.
	DefaultMaxStreams = 128
	// DefaultHandshakeTimeout bounds the TLS handshake and the connection
	// preface of Dial and Listener.Accept.
	DefaultHandshakeTimeout = 10 * time.Second
	// DefaultMaxPendingHandshakes bounds the handshakes a Listener.Accept
	// runs at once.
	DefaultMaxPendingHandshakes = 64
	// DefaultMaxPendingPerSource bounds the handshakes a Listener.Accept
	// runs at once for one source IP address.
	DefaultMaxPendingPerSource = 16
	// DefaultFirstByteTimeout is how long a Listener waits for the whole
	// first TLS record (the ClientHello) of a new socket.
	DefaultFirstByteTimeout = 2 * time.Second

	minFrame      = 64
	maxFrameLimit = 1 << 26
	minWindow     = 1 << 10
	maxWindow     = 1 << 30
)

// Compression selects which messages of a stream are zstd-compressed, and
// which compressed messages the stream accepts: a receiver must enable the
// same mode (Stream.SetCompression or Options.Compression), or a compressed
// message kills the connection. A message is sent compressed only when that
// makes it smaller, so enabling compression never costs bytes, only CPU;
// but the length of a compressed message depends on its content, so never
// enable it on a stream that carries private values.
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
	// decompression, whatever the receiving call allows; default
	// DefaultMaxMessage. At least MaxFrame. Each receive has its own,
	// usually much smaller, maximum (RecvBytes' max, RecvWords' length).
	MaxMessage int
	// MaxStreams bounds the number of streams the peer may open on this
	// side; default DefaultMaxStreams. The frames queued on a stream take
	// at most about 1.25 × StreamWindow of memory (every frame is charged
	// its payload plus a fixed overhead), so unread data is bounded by
	// 1.25 × (MaxStreams + the streams this side opened) × StreamWindow.
	MaxStreams int
	// Link, when set, emulates this link profile on this side's outgoing
	// direction (set it on both sides for a symmetric link).
	Link *Profile
	// Compression is the default compression of new streams, for sending
	// and for accepting compressed messages (see Stream.SetCompression).
	Compression Compression
	// HandshakeTimeout bounds the TLS handshake and the exchange of the
	// connection prefaces, on either side, so that a silent or slow peer
	// cannot hold a connection attempt (or a listener's slot) for longer;
	// the caller's context, if it ends sooner, ends it sooner. Default
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// MaxPendingHandshakes bounds the connections a Listener
	// authenticates at once (over its Accepts: a handshake in progress
	// when Accept returns with another connection goes on). Accept keeps
	// taking sockets from the kernel: one beyond the bound evicts a
	// pending socket of the source address with the most pending, its
	// oldest silent one (no whole ClientHello for 200 ms) or else its
	// oldest (see Listener.Accept). It also bounds the authenticated
	// connections a Listener keeps for a later Accept; one more closes the
	// oldest. Default DefaultMaxPendingHandshakes.
	MaxPendingHandshakes int
	// MaxPendingPerSource bounds the connections from one IP address that
	// a Listener.Accept authenticates at once; one beyond it evicts that
	// address's oldest silent (or else oldest) pending socket, never
	// another address's. Default DefaultMaxPendingPerSource.
	MaxPendingPerSource int
	// FirstByteTimeout bounds how long a Listener.Accept waits for a new
	// socket's whole first TLS record, its ClientHello (a real peer sends
	// it at once), before HandshakeTimeout starts. Default
	// DefaultFirstByteTimeout.
	FirstByteTimeout time.Duration
	// Log receives a warning for every connection a Listener rejects (a
	// wrong key, bytes that are not TLS, a handshake timeout); nil means
	// slog.Default().
	Log *slog.Logger
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
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxPendingHandshakes == 0 {
		o.MaxPendingHandshakes = DefaultMaxPendingHandshakes
	}
	if o.MaxPendingPerSource == 0 {
		o.MaxPendingPerSource = min(DefaultMaxPendingPerSource, o.MaxPendingHandshakes)
	}
	if o.FirstByteTimeout == 0 {
		o.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
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
	case o.HandshakeTimeout < 0:
		return o, fmt.Errorf("transport: negative HandshakeTimeout %v", o.HandshakeTimeout)
	case o.MaxPendingHandshakes < 0:
		return o, fmt.Errorf("transport: negative MaxPendingHandshakes %d", o.MaxPendingHandshakes)
	case o.MaxPendingPerSource < 0:
		return o, fmt.Errorf("transport: negative MaxPendingPerSource %d", o.MaxPendingPerSource)
	case o.FirstByteTimeout < 0:
		return o, fmt.Errorf("transport: negative FirstByteTimeout %v", o.FirstByteTimeout)
	}
	if o.Link != nil {
		if err := o.Link.validate(); err != nil {
			return o, err
		}
	}
	return o, nil
}

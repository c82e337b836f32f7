// Package transport is the authenticated, accounted, multiplexed connection
// between the two parties of a selectformer session.
//
// # Connections and identities
//
// Each host has an Ed25519 [Identity]: a private key and a self-signed X.509
// certificate, stored as PEM files. Hosts authenticate each other with TLS 1.3
// and mutual certificates, and each side pins the peer by its fingerprint: the
// lower-case hex SHA-256 of the peer certificate's DER-encoded
// SubjectPublicKeyInfo (x509.Certificate.RawSubjectPublicKeyInfo). No
// certificate authority is involved; a wrong key fails the handshake with an
// error naming the expected and the presented fingerprints. [Dial] and
// [Listener.Accept] return a [*Conn]; [Pipe] returns two connected in-memory
// Conns with the same API (no TLS) for tests.
//
// Every handshake (TLS and the connection preface) ends within
// Options.HandshakeTimeout (10 s by default) or the caller's context,
// whichever is sooner. [Listener.Accept] returns the first connection that
// proves the pinned key: a silent socket, a garbage sender or a stranger is
// closed, logged at warn level on Options.Log and skipped, so it can neither
// delay the pinned peer nor end the wait before its context. Accept never
// leaves sockets in the kernel's backlog: it takes every one at once, gives
// it Options.FirstByteTimeout (2 s) to send its whole first TLS record (the
// ClientHello), and authenticates at most Options.MaxPendingHandshakes (64)
// at a time, at most Options.MaxPendingPerSource (16) from one IP address; a
// socket beyond either bound evicts a pending one of its own address (for
// the per-address bound) or of the address with the most pending: the
// oldest that has sent no whole ClientHello for 200 ms, or else the oldest.
// A flood of silent, one-byte or partial connections therefore only evicts
// itself, and never the pinned peer's socket in the moment before its
// ClientHello arrives (TestAcceptFloodDoesNotEvictPeer,
// TestAcceptSilentFloodDoesNotKeepPeerOut, TestAcceptMoreSilentSocketsThanSlots,
// TestAcceptPerSourceEviction, TestAcceptSilentSocketDoesNotBlockPeer).
//
// # Streams, frames and flow control
//
// A Conn carries independent logical [Stream]s, named by a uint32 id that both
// sides choose alike (for example one per concurrent batch). Each stream is an
// ordered sequence of messages; messages of different streams interleave
// frame by frame. When frames of several streams wait for the connection,
// the stream of the lowest priority number ([Stream.SetPriority], default
// 0) goes first, in arrival order among equals; credit frames go before
// any data. A message is a byte string or a []uint64 sent little-endian
// (on little-endian hosts the slice memory is sent as is, without encoding).
//
// After a 16-byte preface per side ("SFTR", version, receive window, maximum
// frame), the wire is a sequence of frames with a 10-byte header:
//
//	byte 0     type: 1 = DATA, 2 = CREDIT
//	byte 1     flags (DATA): 0x01 START, 0x02 END, 0x04 COMPRESSED
//	bytes 2-5  stream id, little-endian uint32
//	bytes 6-9  DATA: payload length; CREDIT: window increment (no payload)
//
// A message travels as one or more DATA frames: the first has START, the last
// END. A message that needs several frames carries its total length (uint64
// LE) in the first 8 payload bytes of its START frame. Frames are at most the
// peer's maximum frame size and half its stream window (less 128 bytes).
// MessageBytes gives what a message costs on the wire with the default
// options (the figure the protocol costs are built on).
//
// Flow control is credit-based per stream, like HTTP/2 windows, and counts
// frames as well as bytes: every DATA frame costs its payload plus 128 bytes
// of the window (so an empty message costs 128), a sender may have at most
// the receiver's window of unconsumed cost outstanding per stream, and the
// receiver grants credit back (a CREDIT frame) whenever the application has
// consumed at least half a window since the last grant. A peer that exceeds
// the window (with empty frames, say) kills the connection with a
// flow-control error (TestEmptyFramesAreFlowControlled); an honest sender
// waits for credit instead (TestEmptyMessagesHonestSender). A slow reader of
// one stream therefore never blocks other streams, a sender waiting for
// credit is always released once the reader catches up, and the frames
// queued on a stream hold at most about 1.25 × Options.StreamWindow of
// memory (16 MiB by default; 0.63 × measured for a window of empty frames).
// The number of streams the peer may open is bounded by Options.MaxStreams
// (128 by default), so the data queued on a Conn and not yet read takes at
// most about 1.25 × (MaxStreams + the streams opened locally) ×
// StreamWindow: 2.5 GiB with the defaults, in the worst case of a peer that
// fills every window of streams nobody reads. A stream's state lives as long
// as its Conn, so reuse ids (for example one per batch slot of a pipeline)
// rather than numbering streams without end.
//
// # Receive limits and compression
//
// Every receive has a maximum chosen by the caller, checked on the size the
// peer announces in the message's first frame, before anything is allocated
// or decompressed: [Stream.RecvWords] accepts exactly len(dst) words and
// [Stream.RecvBytes] at most its max bytes; a larger announcement is refused
// with [ErrTooLarge], the message skipped as it arrives and the stream left
// usable (TestRecvRefusesOversizedAnnouncement). Compression (zstd) is
// opt-in per stream on both ends ([Stream.SetCompression],
// Options.Compression): a compressed message on a stream whose receiver did
// not enable it kills the connection (TestCompressionIsOptInForReceivers),
// and an accepted one is decompressed with the receive's maximum as the
// limit, so a few KiB that would expand to 128 MiB cost the receiver a few
// MiB at most (TestRecvRefusesCompressedBomb, FuzzCompressedRecv).
// Options.MaxMessage (1 GiB) bounds every message besides. The length of a
// compressed message depends on its content: never enable compression on a
// stream that carries private values.
//
// # Accounting
//
// Every Conn and every Stream counts [Stats]: bytes sent and received (frame
// headers plus payloads, i.e. what this package wrote to or read from the
// socket; the connection preface and TLS record overhead are not counted),
// messages sent and received, and rounds. The round rule is:
//
//   - an Exchange (send mine, receive theirs concurrently) counts 1 round;
//   - a lone Send (SendWords, SendBytes) counts 1 round for the sender;
//   - a lone Recv (RecvWords, RecvBytes) counts 1 round for the receiver.
//
// Rounds are counted when the operation succeeds; messages when they are
// complete.
//
// Received DATA bytes are counted when the application consumes the message,
// so a snapshot taken right after a Recv does not depend on what the peer
// has sent ahead. CREDIT frames are counted on the stream they refer to (and
// in the total): as sent when the receiving application's consumption
// triggers them (deterministic), as received when they arrive. They occur
// only once per half window consumed (8 MiB by default, counting 128 bytes
// per frame besides the payloads), so protocol tests with smaller messages
// see none and all their counts are exact. Take a
// snapshot with Stats() and subtract snapshots with [Stats.Sub] to measure
// one protocol.
//
// # Errors and cancellation
//
// Every blocking call takes a context.Context. A malformed or oversized frame,
// a message beyond MaxMessage, a flow-control violation, an unrequested
// compressed message or too many streams kills the connection with a
// descriptive error, which every blocked and later stream
// operation returns promptly; so does the peer closing or the socket failing.
// A context that ends while a frame is being written lets that frame
// finish for up to 2 s (so a party that fails mid-run can still send its
// abort on another stream; TestCancelMidFrameKeepsConnection); a write that
// is then still blocked (a peer that stopped reading) is interrupted, which
// corrupts the framing and also kills the connection; a context that ends
// while waiting for credit or for the socket leaves the connection usable
// (but a message cut off after its first frame makes that stream unusable
// for sending).
//
// # Link emulation
//
// [Emulate] wraps any net.Conn with a bandwidth cap and a one-way latency on
// its outgoing direction; [Profile] names the standard links ([ProfileByName]:
// "lan", "paper-wan", "none"). Options.Link applies a profile to a Conn's
// sending direction (set it on both sides, or use the bench/cmd/linkem relay).
package transport

package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// byteConn is a net.Conn whose peer sends a fixed byte string and then EOF.
type byteConn struct {
	net.Conn
	r *bytes.Reader
}

func (c *byteConn) Read(p []byte) (int, error)        { return c.r.Read(p) }
func (c *byteConn) Write(p []byte) (int, error)       { return len(p), nil }
func (c *byteConn) Close() error                      { return nil }
func (c *byteConn) SetDeadline(time.Time) error       { return nil }
func (c *byteConn) SetWriteDeadline(time.Time) error  { return nil }
func (c *byteConn) SetReadDeadline(t time.Time) error { return nil }

func FuzzFrameDecoder(f *testing.F) {
	f.Add(frameBytes(frameData, flagStart|flagEnd, 1, 8, make([]byte, 8)))
	f.Add(append(frameBytes(frameData, flagStart, 2, 16, binary.LittleEndian.AppendUint64(nil, 20)[:8:8]), make([]byte, 8)...))
	f.Add(frameBytes(frameCredit, 0, 1, 100, nil))
	f.Add([]byte{1, 3, 0, 0, 0, 0, 255, 255, 255, 255})
	// Huge length prefixes: a START frame announcing 2^62 bytes, and one
	// announcing just over MaxMessage.
	f.Add(frameBytes(frameData, flagStart, 1, 16, append(binary.LittleEndian.AppendUint64(nil, 1<<62), make([]byte, 8)...)))
	f.Add(frameBytes(frameData, flagStart, 1, 16, append(binary.LittleEndian.AppendUint64(nil, 4097), make([]byte, 8)...)))
	f.Add([]byte{})
	o, _ := Options{MaxFrame: 256, StreamWindow: 1024, MaxMessage: 4096, MaxStreams: 4}.normalize()
	f.Fuzz(func(t *testing.T, data []byte) {
		// The bare decoder: never panics, never returns an over-long payload.
		r := bytes.NewReader(data)
		hbuf := make([]byte, headerSize)
		for {
			h, p, err := readFrame(r, hbuf, o.MaxFrame, nil)
			if err != nil {
				break
			}
			if len(p) > o.MaxFrame || (h.typ == frameData && len(p) != int(h.length)) {
				t.Fatalf("payload of %d bytes for header %+v", len(p), h)
			}
		}
		// A whole connection fed with the bytes: it must end with an error
		// (at the latest at EOF) and never hang or panic on receive.
		in := append(preface{window: 1024, maxFrame: 256}.encode(), data...)
		c, err := newConn(context.Background(), &byteConn{r: bytes.NewReader(in)}, o)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		<-c.Done()
		if c.Err() == nil {
			t.Fatal("dead connection without an error")
		}
		c.mu.Lock()
		var ids []uint32
		for id := range c.streams {
			ids = append(ids, id)
		}
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		for _, id := range ids {
			for i := 0; i < 20; i++ {
				if _, err := c.Stream(id).RecvBytes(ctx, o.MaxMessage); err != nil {
					break
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatal("receive hung")
		}
	})
}

func FuzzParseIdentity(f *testing.F) {
	id, err := GenerateIdentity("fuzz")
	if err != nil {
		f.Fatal(err)
	}
	cp, kp, _ := id.MarshalPEM()
	f.Add(cp, kp)
	f.Add(cp[:len(cp)/2], kp)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), kp)
	f.Fuzz(func(t *testing.T, certPEM, keyPEM []byte) {
		got, err := ParseIdentity(certPEM, keyPEM)
		if err == nil && got.Fingerprint() == "" {
			t.Fatal("identity without a fingerprint")
		}
	})
}

func FuzzPreface(f *testing.F) {
	f.Add(preface{window: 1 << 20, maxFrame: 1 << 16}.encode())
	f.Add([]byte("SFTR\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePreface(b)
		if err == nil && (p.window < minWindow || p.maxFrame < minFrame) {
			t.Fatalf("accepted %+v", p)
		}
	})
}

// FuzzServerHandshake feeds arbitrary bytes as a client's side of the
// connection to a listener's handshake (TLS, then the preface): it must end
// with an error (without a key, nobody authenticates) that names a reason,
// within the handshake timeout, without panicking.
func FuzzServerHandshake(f *testing.F) {
	p0, err := GenerateIdentity("p0")
	if err != nil {
		f.Fatal(err)
	}
	p1, err := GenerateIdentity("p1")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{0x16, 0x03, 0x01, 0xff, 0xff})
	f.Add([]byte{0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{})
	// A genuine ClientHello of the pinned peer (the rest never comes).
	a, b := net.Pipe()
	go func() {
		_ = tls.Client(b, tlsConfig(p1, p0.Fingerprint(), false)).Handshake()
		b.Close()
	}()
	hello := make([]byte, 4096)
	n, _ := a.Read(hello)
	a.Close()
	f.Add(hello[:n])
	cfg := tlsConfig(p0, p1.Fingerprint(), true)
	o, _ := Options{HandshakeTimeout: 2 * time.Second}.normalize()
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		c, err := handshake(context.Background(), &byteConn{r: bytes.NewReader(data)}, cfg, o, true)
		if err == nil {
			c.Close()
			t.Fatal("a handshake without the key succeeded")
		}
		if rejectReason(err) == "" {
			t.Fatal("no reason")
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("handshake took %v", d)
		}
	})
}

// FuzzReadFirstRecord: whatever a new socket sends, the listener's reader
// of its first TLS record never panics, reads at most one header and 2^14
// bytes of body, returns a prefix of what was sent (for the TLS handshake
// to go on from), and counts as a ClientHello only a whole handshake record
// whose body starts with the ClientHello type.
func FuzzReadFirstRecord(f *testing.F) {
	f.Add([]byte{recordHandshake})
	f.Add([]byte{recordHandshake, 3, 1, 0, 4, handshakeHello, 0, 0, 0})
	f.Add([]byte{recordHandshake, 3, 1, 0xff, 0xff, 1, 2, 3})
	f.Add([]byte{recordHandshake, 3, 1, 0, 0})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, hello, err := readFirstRecord(bytes.NewReader(data))
		if err != nil {
			if b != nil {
				t.Fatalf("returned %d bytes with the error %v", len(b), err)
			}
			return
		}
		if len(b) > recordHeaderSize+maxPlaintextRecord || !bytes.HasPrefix(data, b) {
			t.Fatalf("returned %x, not a bounded prefix of %x", b, data)
		}
		want := len(b) > recordHeaderSize && data[0] == recordHandshake && data[1] == 3 &&
			int(binary.BigEndian.Uint16(data[3:5])) == len(b)-recordHeaderSize && b[recordHeaderSize] == handshakeHello
		if hello != want {
			t.Fatalf("hello %v for %x (read %x)", hello, data, b)
		}
	})
}

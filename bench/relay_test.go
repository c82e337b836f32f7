package bench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// TestRelayWaitsForTarget: a client relayed to a target that is not
// listening yet (a sharded run's worker dialling its peer worker before
// that one listens for the phase) is connected once the target listens,
// rather than having its accepted connection closed mid-handshake.
func TestRelayWaitsForTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reserve, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := reserve.Addr().String()
	reserve.Close() // not listening: a dial is refused
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Relay(ctx, ln, target, transport.NoLink, slog.New(slog.DiscardHandler)) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the relay's first dials are refused
	tl, err := net.Listen("tcp", target)
	if err != nil {
		t.Skipf("the reserved port was taken meanwhile: %v", err)
	}
	defer tl.Close()
	go func() {
		s, err := tl.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		_, _ = io.CopyN(s, s, 4) // echo
	}()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 4)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
		t.Fatalf("relayed to a target that listened late: %q, %v", got, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// ParseBandwidth reads a rate in bytes per second: a number with an
// optional unit (B, KB, MB, GB decimal; KiB, MiB, GiB binary; Kbit, Mbit,
// Gbit in bits) and an optional "/s".
func ParseBandwidth(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"Kbit", 1e3 / 8}, {"Mbit", 1e6 / 8}, {"Gbit", 1e9 / 8},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
	}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1e15 {
		return 0, fmt.Errorf("invalid bandwidth %q (want e.g. 100MB, 1GB, 800Mbit)", s)
	}
	return int64(v * mult), nil
}

// Relay accepts connections on ln until ctx ends, relaying each to target
// through the emulated link (transport.Emulate on both directions: the
// relay of the linkem command); it closes ln and waits for the relays. A
// relay is transparent to TLS: the peers still authenticate each other end
// to end. A target that refuses the connection (not listening yet) is
// dialled again every relayRedial for up to 30 s, as a peer dialling it
// directly would retry on the refusal; the relay has already accepted the
// client, so a refusal passed on at once would reach it as a connection
// closed mid-handshake instead.
func Relay(ctx context.Context, ln net.Listener, target string, prof transport.Profile, log *slog.Logger) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := relayConn(ctx, c, target, prof); err != nil {
				log.Warn("relay ended", "client", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// relayRedial is the pause before a relay dials a refusing target again.
const relayRedial = 50 * time.Millisecond

// relayConn forwards between client and a new connection to target, shaping
// both directions, until both directions have ended.
func relayConn(ctx context.Context, client net.Conn, target string, prof transport.Profile) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	server, err := d.DialContext(dctx, "tcp", target)
	for err != nil && errors.Is(err, syscall.ECONNREFUSED) {
		select {
		case <-dctx.Done():
		case <-time.After(relayRedial):
			server, err = d.DialContext(dctx, "tcp", target)
			continue
		}
		break
	}
	cancel()
	if err != nil {
		client.Close()
		return fmt.Errorf("dial target %s: %w", target, err)
	}
	for _, c := range []net.Conn{client, server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
	}
	toClient := transport.Emulate(client, prof) // shapes server -> client
	toServer := transport.Emulate(server, prof) // shapes client -> server
	stop := context.AfterFunc(ctx, func() { toClient.Close(); toServer.Close() })
	defer stop()
	errc := make(chan error, 2)
	pump := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		// Propagate the end of this direction as a half-close.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			if cerr := cw.CloseWrite(); err == nil {
				err = cerr
			}
		}
		errc <- err
	}
	go pump(toServer, client)
	go pump(toClient, server)
	err1 := <-errc
	if err1 != nil { // a failed direction aborts the other
		toClient.Close()
		toServer.Close()
	}
	err2 := <-errc
	toClient.Close()
	toServer.Close()
	if err := errors.Join(err1, err2); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

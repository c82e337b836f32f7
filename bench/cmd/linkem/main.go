// Command linkem is a TCP relay that emulates a network link between two
// peer processes: it listens, forwards each accepted connection to a target
// address, and applies a bandwidth cap and a one-way latency to both
// directions (see transport.Emulate). Run it next to one of the peers:
//
//	linkem -listen :9000 -target modelowner.example:9000 -profile paper-wan
//	linkem -listen 127.0.0.1:9100 -target 127.0.0.1:9000 -bandwidth 100MB -latency 50ms
//
// The relay is transparent to TLS: the peers still authenticate each other
// end to end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/selectformer/selectformer/transport"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stderr))
}

// summary is the first line of -h.
const summary = "linkem relays TCP connections to a target address, emulating a network link (bandwidth cap, one-way latency) in both directions."

// run parses args, listens and relays until ctx ends. It returns the exit
// status: 0 on a clean stop or -h, 2 on a usage error, 1 on another error.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("linkem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to listen on, e.g. :9000 (required)")
	target := fs.String("target", "", "address to forward to, e.g. peer:9000 (required)")
	profile := fs.String("profile", "", "link profile: "+strings.Join(transport.ProfileNames(), ", ")+" (or use -bandwidth/-latency)")
	bandwidth := fs.String("bandwidth", "", "bandwidth cap per direction, e.g. 100MB (bytes/s; units B, KB, MB, GB, KiB, MiB, GiB, or Mbit, Gbit); 0 = unlimited")
	latency := fs.Duration("latency", 0, "one-way latency, e.g. 50ms")
	fs.Usage = func() {
		fmt.Fprintln(stderr, summary)
		fmt.Fprintln(stderr, "\nusage: linkem -listen ADDR -target ADDR [-profile NAME | -bandwidth RATE -latency DUR]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	prof, err := parseProfile(fs, *listen, *target, *profile, *bandwidth, *latency)
	if err != nil {
		fmt.Fprintf(stderr, "linkem: %v\n", err)
		fs.Usage()
		return 2
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "linkem: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("linkem relaying", "listen", ln.Addr().String(), "target", *target, "profile", prof.String())
	if err := serve(ctx, ln, *target, prof, log); err != nil {
		log.Error("linkem stopped", "err", err)
		return 1
	}
	return 0
}

func parseProfile(fs *flag.FlagSet, listen, target, profile, bandwidth string, latency time.Duration) (transport.Profile, error) {
	if fs.NArg() > 0 {
		return transport.Profile{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if listen == "" || target == "" {
		return transport.Profile{}, errors.New("both -listen and -target are required")
	}
	custom := bandwidth != "" || latency != 0
	if profile != "" {
		if custom {
			return transport.Profile{}, errors.New("-profile cannot be combined with -bandwidth or -latency")
		}
		return transport.ProfileByName(profile)
	}
	if !custom {
		return transport.Profile{}, errors.New("give -profile or -bandwidth/-latency")
	}
	if latency < 0 {
		return transport.Profile{}, fmt.Errorf("negative -latency %v", latency)
	}
	p := transport.Profile{Name: "custom", Latency: latency}
	if bandwidth != "" {
		bw, err := parseBandwidth(bandwidth)
		if err != nil {
			return p, err
		}
		if bw != 0 && bw < 1000 {
			return p, fmt.Errorf("-bandwidth %q is below 1000 B/s", bandwidth)
		}
		p.Bandwidth = bw
	}
	return p, nil
}

// parseBandwidth reads a rate in bytes per second: a number with an
// optional unit (B, KB, MB, GB decimal; KiB, MiB, GiB binary; Kbit, Mbit,
// Gbit in bits) and an optional "/s".
func parseBandwidth(s string) (int64, error) {
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
		return 0, fmt.Errorf("invalid -bandwidth %q (want e.g. 100MB, 1GB, 800Mbit)", s)
	}
	return int64(v * mult), nil
}

// serve accepts connections on ln until ctx ends, relaying each to target
// through the emulated link; it closes ln and waits for the relays.
func serve(ctx context.Context, ln net.Listener, target string, prof transport.Profile, log *slog.Logger) error {
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
			if err := relay(ctx, c, target, prof); err != nil {
				log.Warn("relay ended", "client", c.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

// relay forwards between client and a new connection to target, shaping
// both directions, until both directions have ended.
func relay(ctx context.Context, client net.Conn, target string, prof transport.Profile) error {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	server, err := d.DialContext(dctx, "tcp", target)
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

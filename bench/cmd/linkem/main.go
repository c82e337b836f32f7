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
	"strings"
	"syscall"
	"time"

	"github.com/selectformer/selectformer/bench"
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
	if err := bench.Relay(ctx, ln, *target, prof, log); err != nil {
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
		bw, err := bench.ParseBandwidth(bandwidth)
		if err != nil {
			return p, fmt.Errorf("invalid -bandwidth %q (want e.g. 100MB, 1GB, 800Mbit)", bandwidth)
		}
		if bw != 0 && bw < 1000 {
			return p, fmt.Errorf("-bandwidth %q is below 1000 B/s", bandwidth)
		}
		p.Bandwidth = bw
	}
	return p, nil
}

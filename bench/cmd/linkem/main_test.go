package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/transport"
)

func TestRunUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "both -listen and -target are required"},
		{[]string{"-listen", ":0"}, "both -listen and -target are required"},
		{[]string{"-listen", ":0", "-target", "x:1"}, "give -profile or -bandwidth/-latency"},
		{[]string{"-listen", ":0", "-target", "x:1", "-profile", "moon"}, `unknown link profile "moon"`},
		{[]string{"-listen", ":0", "-target", "x:1", "-profile", "lan", "-latency", "1ms"}, "cannot be combined"},
		{[]string{"-listen", ":0", "-target", "x:1", "-bandwidth", "fast"}, `invalid -bandwidth "fast"`},
		{[]string{"-listen", ":0", "-target", "x:1", "-bandwidth", "10B"}, "below 1000 B/s"},
		{[]string{"-listen", ":0", "-target", "x:1", "-latency", "-5ms"}, "negative -latency"},
		{[]string{"-listen", ":0", "-target", "x:1", "-profile", "lan", "extra"}, "unexpected arguments"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		var stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || !strings.Contains(stderr.String(), "usage: linkem") {
			t.Errorf("run(%q) = %d, stderr %q; want 2 and %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// TestHelp checks that -h exits 0 and starts with one line saying what
// linkem does, then the usage and flags.
func TestHelp(t *testing.T) {
	for _, h := range []string{"-h", "--help"} {
		var stderr bytes.Buffer
		code := run(context.Background(), []string{h}, &stderr)
		first, rest, _ := strings.Cut(stderr.String(), "\n")
		if code != 0 || first != summary || !strings.HasPrefix(summary, "linkem ") || !strings.Contains(rest, "usage: linkem") || !strings.Contains(rest, "-profile") {
			t.Errorf("%s: exit %d, output\n%s", h, code, stderr.String())
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-target", "127.0.0.1:1", "-profile", "paper-wan"}, &stderr)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop")
	}
}

func TestParseBandwidth(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"100MB", 100_000_000, true},
		{"100MB/s", 100_000_000, true},
		{"1GB", 1_000_000_000, true},
		{"1.5 KiB", 1536, true},
		{"800Mbit", 100_000_000, true},
		{"12345", 12345, true},
		{"0", 0, true},
		{"-1MB", 0, false},
		{"MB", 0, false},
		{"1e30", 0, false},
	} {
		got, err := bench.ParseBandwidth(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBandwidth(%q) = %d, %v", tc.in, got, err)
		}
	}
}

// startRelay runs serve between a loopback listener and target.
func startRelay(t *testing.T, target string, prof transport.Profile) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- bench.Relay(ctx, ln, target, prof, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

func TestRelayEchoWithLatencyAndBandwidth(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	prof := transport.Profile{Name: "test", Bandwidth: 10_000_000, Latency: 20 * time.Millisecond}
	addr := startRelay(t, echo.Addr().String(), prof)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))

	// A small round trip crosses the latency twice.
	start := time.Now()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatal(string(buf), err)
	}
	if d := time.Since(start); d < 2*prof.Latency || d > 2*prof.Latency+5*time.Second {
		t.Errorf("round trip took %v, want about %v", d, 2*prof.Latency)
	}

	// 1 MB at 10 MB/s each way, pipelined: at least 100 ms + 2 latencies.
	msg := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 125_000)
	start = time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := c.Write(msg); err != nil {
			t.Error(err)
		}
	}()
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !bytes.Equal(got, msg) {
		t.Fatal("echo differs")
	}
	want := prof.TransferTime(int64(len(msg))) + prof.Latency
	if d := time.Since(start); d < want || d > want+5*time.Second {
		t.Errorf("1 MB echo took %v, want about %v", d, want)
	}
}

func TestRelayCarriesTransport(t *testing.T) {
	p0, _ := transport.GenerateIdentity("p0")
	p1, _ := transport.GenerateIdentity("p1")
	ln, err := transport.Listen("127.0.0.1:0", p0, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	prof := transport.Profile{Name: "test", Latency: 10 * time.Millisecond}
	addr := startRelay(t, ln.Addr().String(), prof)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx, p1.Fingerprint())
		if err != nil {
			srv <- err
			return
		}
		defer c.Close()
		w := make([]uint64, 1)
		for i := 0; i < 3; i++ { // echo
			if err := c.Stream(1).RecvWords(ctx, w); err != nil {
				srv <- err
				return
			}
			if err := c.Stream(1).SendWords(ctx, []uint64{w[0] + 1}); err != nil {
				srv <- err
				return
			}
		}
		srv <- nil
	}()
	c, err := transport.Dial(ctx, addr, p1, p0.Fingerprint(), transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	got := make([]uint64, 1)
	for i := uint64(0); i < 3; i++ {
		if err := c.Stream(1).SendWords(ctx, []uint64{i}); err != nil {
			t.Fatal(err)
		}
		if err := c.Stream(1).RecvWords(ctx, got); err != nil || got[0] != i+1 {
			t.Fatal(got, err)
		}
	}
	if d := time.Since(start); d < 6*prof.Latency {
		t.Errorf("3 round trips through the relay took %v, less than 6 latencies", d)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
}

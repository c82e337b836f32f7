package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

func identities(t *testing.T, n int) []*transport.Identity {
	t.Helper()
	ids := make([]*transport.Identity, n)
	for i := range ids {
		var err error
		if ids[i], err = transport.GenerateIdentity(fmt.Sprint("id", i)); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// stray is a connection that is not the pinned peer.
type stray struct {
	name string
	open func(t *testing.T, addr string)
}

// strays returns a silent socket, a garbage sender and (with stranger) a
// peer with the wrong key, each connecting to addr and leaving its socket
// for t's cleanup.
func strays(stranger *transport.Identity, serverFP string) []stray {
	dial := func(t *testing.T, addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return []stray{
		{"silent", func(t *testing.T, addr string) { dial(t, addr) }},
		{"garbage", func(t *testing.T, addr string) {
			if _, err := dial(t, addr).Write(bytes.Repeat([]byte("garbage!"), 64)); err != nil {
				t.Fatal(err)
			}
		}},
		{"wrong-key", func(t *testing.T, addr string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if c, err := transport.Dial(ctx, addr, stranger, serverFP, transport.Options{}); err == nil {
				c.Close()
				t.Error("the stranger was accepted")
			}
		}},
	}
}

// TestDealerServesPartiesPastStrays: a silent socket, a garbage sender and
// a stranger on a dealer's listeners do not hold up the real parties, which
// connect well within their 3-second timeout (the handshake timeout is 10 s),
// and the dealer logs the rejects.
func TestDealerServesPartiesPastStrays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := identities(t, 4) // dealer, p0, p1, stranger
	srv, err := dealer.NewServer(dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d := &Dealer{Server: srv, Fingerprints: [2]string{ids[1].Fingerprint(), ids[2].Fingerprint()}, Once: true, Log: log}
	if err := d.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[0], transport.Options{Log: log}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	for _, ln := range d.Listeners {
		for _, s := range strays(ids[3], ids[0].Fingerprint()) {
			s.open(t, ln.Addr().String())
		}
	}
	time.Sleep(50 * time.Millisecond) // the strays come first
	e := Endpoint{Timeout: 3 * time.Second}
	provs, conns := connectParties(ctx, t, d, ids, e, beaver.SessionID{1})
	var tr [2]beaver.Triple
	for p := range provs {
		if tr[p], err = (beaver.Typed{Provider: provs[p]}).Triples(ctx, 3, 5); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if (tr[0].A[i]+tr[1].A[i])*(tr[0].B[i]+tr[1].B[i]) != tr[0].C[i]+tr[1].C[i] {
			t.Fatalf("triple %d: a·b ≠ c", i)
		}
	}
	for _, reason := range []string{"not TLS", "wrong key"} {
		if n := strings.Count(logs.String(), `reason="`+reason+`"`); n != 2 {
			t.Errorf("%d warnings with reason %q, want one per listener; log:\n%s", n, reason, logs)
		}
	}
	waitOnceDealer(ctx, t, conns, done)
}

// TestEstablishListenWaitsForPinnedPeer: a listening party (the model
// owner) skips and logs strays and connects to the pinned peer that comes
// after them; with only strays it fails at its timeout with an ExitPeer
// error naming the last reject.
func TestEstablishListenWaitsForPinnedPeer(t *testing.T) {
	ids := identities(t, 3) // listener, pinned peer, stranger
	for _, tc := range []struct {
		name     string
		peer     bool // the pinned peer comes after the strays
		timeout  time.Duration
		wantWarn []string
	}{
		{"peer-after-strays", true, 10 * time.Second, []string{"not TLS", "wrong key"}},
		{"only-strays", false, time.Second, []string{"not TLS", "wrong key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			logs := &syncbuf.Buffer{}
			log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			addrc := make(chan string, 1)
			type result struct {
				c   *transport.Conn
				err error
			}
			res := make(chan result, 1)
			go func() {
				c, err := Establish(ctx, Endpoint{Listen: "127.0.0.1:0", Timeout: tc.timeout}, ids[0], ids[1].Fingerprint(),
					transport.Options{}, log, func(a net.Addr) { addrc <- a.String() })
				res <- result{c, err}
			}()
			addr := <-addrc
			for _, s := range strays(ids[2], ids[0].Fingerprint()) {
				s.open(t, addr)
			}
			time.Sleep(50 * time.Millisecond)
			if tc.peer {
				cc, err := transport.Dial(ctx, addr, ids[1], ids[0].Fingerprint(), transport.Options{})
				if err != nil {
					t.Fatalf("the pinned peer could not connect: %v", err)
				}
				defer cc.Close()
			}
			r := <-res
			if tc.peer {
				if r.err != nil {
					t.Fatalf("Establish: %v", r.err)
				}
				defer r.c.Close()
				if r.c.PeerFingerprint() != ids[1].Fingerprint() {
					t.Fatal("connected to the wrong peer")
				}
			} else {
				switch {
				case r.err == nil:
					r.c.Close()
					t.Fatal("connected to a stray")
				case Code(r.err) != ExitPeer || !errors.Is(r.err, context.DeadlineExceeded):
					t.Fatalf("error %v (code %d), want an ExitPeer timeout", r.err, Code(r.err))
				case !strings.Contains(r.err.Error(), "rejected 2 connection(s)"):
					t.Fatalf("error %v does not report the two rejects (the silent socket is still in its handshake)", r.err)
				}
			}
			for _, reason := range tc.wantWarn {
				if !strings.Contains(logs.String(), `reason="`+reason+`"`) {
					t.Errorf("no warning with reason %q; log:\n%s", reason, logs)
				}
			}
		})
	}
}

// relayFront listens on loopback and relays each connection to target,
// but for those that spoil (given the connection's index, from 0) takes
// and ends itself; it returns the front's address.
func relayFront(t *testing.T, target string, spoil func(i int, c net.Conn) bool) string {
	t.Helper()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { front.Close() })
	go func() {
		for i := 0; ; i++ {
			c, err := front.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if spoil(i, c) {
					return
				}
				b, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer b.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return front.Addr().String()
}

// acceptOnce runs ln.Accept for the pinned fingerprint in a goroutine.
func acceptOnce(ctx context.Context, ln *transport.Listener, fingerprint string) <-chan error {
	res := make(chan error, 1)
	go func() {
		c, err := ln.Accept(ctx, fingerprint)
		if err == nil {
			c.Close()
		}
		res <- err
	}()
	return res
}

// TestEstablishDialRetriesBusyListener: a listener that does not answer the
// dialling party's first handshakes (500 ms limit) is retried until it
// answers, and the party connects within its own timeout. The busy listener
// is a front that holds every connection of its first second silently (for
// 2 s) and then relays to a real one (a transport.Listener itself is no longer kept
// busy by strays: it evicts silent sockets for new ones).
func TestEstablishDialRetriesBusyListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ids := identities(t, 2)
	ln, err := transport.Listen("127.0.0.1:0", ids[0], transport.Options{Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	opens := time.Now().Add(time.Second)
	front := relayFront(t, ln.Addr().String(), func(_ int, c net.Conn) bool {
		if time.Until(opens) > 0 {
			time.Sleep(2 * time.Second) // busy: no answer within the dialler's limit
			return true
		}
		return false
	})
	res := acceptOnce(ctx, ln, ids[1].Fingerprint())
	start := time.Now()
	c, err := Establish(ctx, Endpoint{Connect: front, Timeout: 10 * time.Second}, ids[1], ids[0].Fingerprint(),
		transport.Options{HandshakeTimeout: 500 * time.Millisecond}, discard, nil)
	if err != nil {
		t.Fatalf("Establish: %v", err)
	}
	defer c.Close()
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Fatalf("connected after %v, before the listener answered", d)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
}

// TestEstablishDialRetriesFailedHandshakes (issue 36, item 1): a dialling
// party whose socket is closed or reset during the handshake, as a listener
// does to the sockets it evicts under a stranger's flood, dials again with
// back-off and connects within its timeout; before, it retried only a
// refused connection and a handshake timeout, and exited 3 at the first
// "TLS handshake: EOF". A key mismatch is not retried: it fails at once.
func TestEstablishDialRetriesFailedHandshakes(t *testing.T) {
	ids := identities(t, 3)
	for _, tc := range []struct {
		name  string
		spoil func(c net.Conn) // what the front does to the first connections
	}{
		{"closed-after-the-hello", func(c net.Conn) {
			_, _ = c.Read(make([]byte, 1))
		}},
		{"reset", func(c net.Conn) {
			_ = c.(*net.TCPConn).SetLinger(0)
		}},
		{"closed-at-once", func(net.Conn) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ln, err := transport.Listen("127.0.0.1:0", ids[0], transport.Options{Log: discard})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			const spoiled = 3
			front := relayFront(t, ln.Addr().String(), func(i int, c net.Conn) bool {
				if i < spoiled {
					tc.spoil(c)
					return true
				}
				return false
			})
			res := acceptOnce(ctx, ln, ids[1].Fingerprint())
			var log syncbuf.Buffer
			c, err := Establish(ctx, Endpoint{Connect: front, Timeout: 10 * time.Second}, ids[1], ids[0].Fingerprint(),
				transport.Options{}, slog.New(slog.NewTextHandler(&log, nil)), nil)
			if err != nil {
				t.Fatalf("Establish: %v", err)
			}
			defer c.Close()
			if err := <-res; err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(log.String(), "connection attempt failed; retrying"); n != spoiled {
				t.Fatalf("%d retries logged, want %d; log:\n%s", n, spoiled, log.String())
			}
		})
	}
	for _, tc := range []struct {
		name           string
		server, pinned *transport.Identity // the listener's key, and the key its Accept pins
		want           func(error) bool
	}{
		{"their-key-wrong-not-retried", ids[2], ids[1], func(err error) bool {
			var pe *transport.PinError
			return errors.As(err, &pe)
		}},
		{"our-key-refused-not-retried", ids[0], ids[2], func(err error) bool { return errors.Is(err, transport.ErrKeyRejected) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ln, err := transport.Listen("127.0.0.1:0", tc.server, transport.Options{Log: discard})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			acceptOnce(ctx, ln, tc.pinned.Fingerprint())
			start := time.Now()
			_, err = Establish(ctx, Endpoint{Connect: ln.Addr().String(), Timeout: 10 * time.Second}, ids[1], ids[0].Fingerprint(),
				transport.Options{}, discard, nil)
			if !tc.want(err) || Code(err) != ExitPeer {
				t.Fatalf("Establish: %v, want an ExitPeer key mismatch", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("a key mismatch took %v: it was retried", d)
			}
		})
	}
}

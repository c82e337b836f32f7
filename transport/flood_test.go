package transport

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// flooder opens sockets to addr that each send payload and then stay
// silent: rate a second, from the source addresses in turn, until stop is
// called. It keeps every socket open until stop.
type flooder struct {
	stop   func()
	mu     sync.Mutex
	socks  []net.Conn
	failed int
}

func startFlood(t *testing.T, addr string, sources []net.IP, rate int, payload []byte) *flooder {
	t.Helper()
	f := &flooder{}
	dialers := make([]net.Dialer, len(sources))
	for i, ip := range sources {
		dialers[i] = net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: time.Second}
		// Linux routes all of 127/8 to the loopback interface; elsewhere
		// the extra addresses may not exist.
		c, err := dialers[i].Dial("tcp", addr)
		if err != nil {
			t.Skipf("cannot dial from %v (loopback aliases missing?): %v", ip, err)
		}
		c.Close()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			c, err := dialers[i%len(dialers)].Dial("tcp", addr)
			if err == nil {
				_, err = c.Write(payload)
			}
			f.mu.Lock()
			if err != nil {
				f.failed++
			} else {
				f.socks = append(f.socks, c)
			}
			f.mu.Unlock()
		}
	}()
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			f.mu.Lock()
			defer f.mu.Unlock()
			for _, c := range f.socks {
				c.Close()
			}
		})
	}
	t.Cleanup(f.stop)
	return f
}

func (f *flooder) opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.socks)
}

func loopbackAddrs(first, n int) []net.IP {
	ips := make([]net.IP, n)
	for i := range ips {
		ips[i] = net.IPv4(127, 0, 0, byte(first+i))
	}
	return ips
}

// TestAcceptFloodDoesNotEvictPeer (issue 36, item 1): an outsider with
// no key opens sockets that each send one byte (0x16, the first byte of a
// TLS handshake record) and then stay silent,
// while the pinned peer dials from 127.0.0.1 over a link with 50 ms of
// one-way latency, so that its ClientHello arrives 50 ms after its socket is
// accepted. The listener counts a socket as having spoken only once a whole
// ClientHello record is in, so the flood's sockets stay silent; it evicts
// from the source with the most sockets pending, the oldest silent one, and
// never the youngest: the peer connects on (almost) every try. On the code
// before, one byte counted as spoken and the peer's fresh socket, the only
// silent one, was evicted: 0 of 20 tries connected under 100 sockets a
// second from 8 addresses, none under 50 a second from the peer's own
// address (a load balancer that rewrites sources). A stranger that sends
// whole ClientHellos and then stays silent holds its sockets for the
// handshake timeout as spoken, but its sources have more pending than the
// peer's: it still evicts only its own. Each try is one transport.Dial,
// without the retries of a party's dialler.
func TestAcceptFloodDoesNotEvictPeer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sources []net.IP // the flood's; the peer dials from 127.0.0.1
		rate    int      // the flood's sockets a second
		hello   bool     // each flood socket sends a whole ClientHello, not one byte
		tries   int
		want    int // tries that must connect
	}{
		{"8-sources-100/s", loopbackAddrs(2, 8), 100, false, 20, 19},
		{"peer-address-50/s", loopbackAddrs(1, 1), 50, false, 10, 9},
		{"hellos-8-sources-100/s", loopbackAddrs(2, 8), 100, true, 10, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each against its own listener; the wall time is mostly the dials' latency
			f := newAcceptFixture(t, Options{})
			ctx := testCtx(t, 60*time.Second)
			go func() {
				for {
					c, err := f.ln.Accept(ctx, f.p1.Fingerprint())
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			payload := []byte{recordHandshake}
			if tc.hello {
				payload = clientHello(t, f)
			}
			fl := startFlood(t, f.addr(), tc.sources, tc.rate, payload)
			// Wait until the flood fills the listener's bounds, so that
			// every further socket evicts one.
			for end := time.Now().Add(10 * time.Second); f.log.count("reason=evicted") == 0; {
				if time.Now().After(end) {
					t.Fatalf("no eviction after %d sockets of the flood; log:\n%s", fl.opened(), f.log)
				}
				time.Sleep(10 * time.Millisecond)
			}
			far := Options{Link: &Profile{Name: "50ms", Latency: 50 * time.Millisecond}}
			ok := 0
			var fails []error
			for range tc.tries {
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				c, err := Dial(dctx, f.addr(), f.p1, f.p0.Fingerprint(), far)
				cancel()
				if err != nil {
					fails = append(fails, err)
					continue
				}
				ok++
				c.Close()
			}
			fl.stop()
			t.Logf("%d of %d tries connected, %d flood sockets opened (%d failed to open), %d evictions logged",
				ok, tc.tries, fl.opened(), fl.failed, f.log.count("reason=evicted"))
			if ok < tc.want {
				t.Fatalf("the pinned peer connected in %d of %d tries under the flood, want at least %d; errors: %v",
					ok, tc.tries, tc.want, fmt.Sprint(fails))
			}
			if f.log.count("reason=evicted", "from=127.0.0.1:") > 0 && tc.sources[0].Equal(net.IPv4(127, 0, 0, 2)) {
				t.Fatalf("the listener evicted a socket of the peer's address, which had the fewest pending; log:\n%s", f.log)
			}
		})
	}
}

package dealer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/beavertest"
	"github.com/selectformer/selectformer/transport"
)

var _ beaver.Provider = (*Client)(nil)

// startServer serves both parties of srv over pipes and returns their
// clients, bound to a fresh session; everything stops at the end of the
// test.
func startServer(t *testing.T, srv *Server) (p0, p1 *Client, conns [2]*transport.Conn) {
	t.Helper()
	id, err := beaver.NewSessionID()
	if err != nil {
		t.Fatal(err)
	}
	return startSession(t, srv, id)
}

// startSession is startServer for session id.
func startSession(t *testing.T, srv *Server, id beaver.SessionID) (p0, p1 *Client, conns [2]*transport.Conn) {
	t.Helper()
	clients, conns, errs := connectBoth(t, srv, [2]beaver.SessionID{id, id})
	for p, err := range errs {
		if err != nil {
			t.Fatalf("party %d: %v", p, err)
		}
	}
	return clients[0], clients[1], conns
}

// connectBoth serves both parties of srv over pipes; party p connects and
// binds session ids[p] (concurrently: the dealer pairs the two). The
// servers and pipes stop at the end of the test.
func connectBoth(t *testing.T, srv *Server, ids [2]beaver.SessionID) (clients [2]*Client, conns [2]*transport.Conn, errs [2]error) {
	t.Helper()
	return connectBothWith(t, srv, ids, [2]ConnectOptions{})
}

// connectBothWith is connectBoth with party p connecting with opts[p].
func connectBothWith(t *testing.T, srv *Server, ids [2]beaver.SessionID, opts [2]ConnectOptions) (clients [2]*Client, conns [2]*transport.Conn, errs [2]error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	})
	var cwg sync.WaitGroup
	for party := range 2 {
		cs, cc := transport.Pipe(transport.Options{})
		conns[party] = cc
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cs.Close()
			_ = srv.Serve(ctx, cs, party)
		}()
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			c, err := ConnectWith(ctx, cc, party, opts[party])
			if err == nil {
				err = c.BindSession(ctx, ids[party])
			}
			clients[party], errs[party] = c, err
		}()
	}
	cwg.Wait()
	return clients, conns, errs
}

// newServer is NewServerWithSeeds that fails the test on error.
func newServer(t *testing.T, s0, s1 share.Seed, opt ServerOptions) *Server {
	t.Helper()
	srv, err := NewServerWithSeeds(s0, s1, opt)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// TestNetworkedMatchesInProcess: identical seeds give identical material
// from the in-process dealer and the networked one.
func TestNetworkedMatchesInProcess(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(5)
	id := beaver.SessionID{5, 5}
	ip0, ip1 := boundPair(t, NewWithSeeds(s0, s1), id)
	np0, np1, _ := startSession(t, newServer(t, s0, s1, ServerOptions{}), id)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		r := randomRequest(rng, uint32(i%3))
		a, err := beavertest.DrawEach(ctx, [2]beaver.Provider{ip0, ip1}, r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := beavertest.DrawEach(ctx, [2]beaver.Provider{np0, np1}, r)
		if err != nil {
			t.Fatal(err)
		}
		for p := range 2 {
			for j := range a[p].Parts {
				if !slices.Equal(a[p].Parts[j], b[p].Parts[j]) {
					t.Fatalf("%v: party %d part %d differs", r, p, j)
				}
			}
		}
		if err := checkRelation(r, b, func(id uint64, k, n int) []uint64 {
			m, _ := beaver.Typed{Provider: np0}.WeightMask(ctx, id, k, n)
			return m
		}); err != nil {
			t.Fatal(err)
		}
	}
	// Both parties draw dealer words (each those of the kinds dealt to it):
	// over the network each receives at least what the in-process dealer
	// counts (the words) and sends its requests.
	for p, np := range []*Client{np0, np1} {
		st, ip := np.Stats(), [2]beaver.Provider{ip0, ip1}[p].Stats()
		if st.Items != 200 || st.BytesSent == 0 || ip.BytesRecv == 0 || st.BytesRecv < ip.BytesRecv {
			t.Errorf("party %d: networked dealer stats %+v vs in-process %+v", p, st, ip)
		}
	}
}

// TestServerConcurrentStreams runs many streams against one server at once.
func TestServerConcurrentStreams(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(6)
	p0, p1, _ := startServer(t, newServer(t, s0, s1, ServerOptions{}))
	const streams, per = 16, 100
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(st), 3))
			for range per {
				r := randomRequest(rng, uint32(100+st))
				m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, r)
				if err == nil {
					err = checkRelation(r, m, func(id uint64, k, n int) []uint64 {
						w, _ := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
						return w
					})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestServerBadRequests sends malformed and abusive requests: each gets an
// error, the server keeps serving the good ones.
func TestServerBadRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(7)
	_, p1, conns := startServer(t, newServer(t, s0, s1, ServerOptions{}))
	if _, err := (beaver.Typed{Provider: p1}).Triples(ctx, 4, 10); err != nil { // opens transport stream 1 for provider stream 4
		t.Fatal(err)
	}
	st := conns[1].Stream(1)
	good, _ := beaver.Request{Kind: beaver.KindTriple, Stream: 4, Counter: 5, N: 3}.AppendBinary(nil)
	wrongStream, _ := beaver.Request{Kind: beaver.KindTriple, Stream: 5, Counter: 6, N: 3}.AppendBinary(nil)
	reuse, _ := beaver.Request{Kind: beaver.KindTriple, Stream: 4, Counter: 0, N: 3}.AppendBinary(nil)
	huge := slices.Clone(good)
	binary.LittleEndian.PutUint32(huge[36:], beaver.MaxItemWords+1)
	badKind := slices.Clone(good)
	badKind[1] = 99
	tests := []struct {
		name string
		msg  []byte
		ok   bool
	}{
		{"short", []byte{1, 2, 3}, false},
		{"bad kind", badKind, false},
		{"huge", huge, false},
		{"wrong stream", wrongStream, false},
		{"reused counter", reuse, false},
		{"good after bad", good, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.SendBytes(ctx, tc.msg); err != nil {
				t.Fatal(err)
			}
			status, err := st.RecvBytes(ctx, maxStatusMsg)
			if err != nil {
				t.Fatal(err)
			}
			if (status[0] == statusOK) != tc.ok {
				t.Fatalf("status %q, want ok=%v", status, tc.ok)
			}
			if tc.ok {
				if err := st.RecvWords(ctx, make([]uint64, 3)); err != nil {
					t.Fatal(err)
				}
			} else if !strings.Contains(string(status[1:]), "beaver") {
				t.Fatalf("error status %q", status[1:])
			}
		})
	}
	// The provider's own next request on stream 4 has counter 1 < 6: refused
	// as reuse (the raw request above moved the dealer's counter past it).
	if _, err := (beaver.Typed{Provider: p1}).Triples(ctx, 4, 1); err == nil || !strings.Contains(err.Error(), "reuses") {
		t.Fatalf("reused counter: %v", err)
	}
}

func TestServerHandshake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s0, s1 := beavertest.Seeds(8)
	srv := newServer(t, s0, s1, ServerOptions{})
	tests := []struct {
		name  string
		hello []byte
	}{
		{"garbage", []byte("hello")},
		{"bad party", append([]byte(helloMagic), helloVersion, 2)},
		{"bad version", append([]byte(helloMagic), 9, 1)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, cc := transport.Pipe(transport.Options{})
			defer cs.Close()
			defer cc.Close()
			if err := cc.Stream(0).SendBytes(ctx, tc.hello); err != nil {
				t.Fatal(err)
			}
			if err := srv.Serve(ctx, cs, 1); err == nil || !errors.Is(err, ErrRefused) {
				t.Fatalf("bad hello: %v", err)
			}
		})
	}
	t.Run("silent client", func(t *testing.T) {
		s0, s1 := beavertest.Seeds(9)
		s := newServer(t, s0, s1, ServerOptions{})
		s.opt.HandshakeTimeout = 50 * time.Millisecond
		cs, cc := transport.Pipe(transport.Options{})
		defer cs.Close()
		defer cc.Close()
		if err := s.Serve(ctx, cs, 0); err == nil {
			t.Fatal("no error for a silent client")
		}
	})
	// Both parties draw dealer words, so the dealer serves both
	// connections after the session and ends each once it idles.
	t.Run("idle parties", func(t *testing.T) {
		s0, s1 := beavertest.Seeds(9)
		s := newServer(t, s0, s1, ServerOptions{IdleTimeout: 100 * time.Millisecond})
		var done [2]chan error
		var clients [2]chan error
		for p := range 2 {
			cs, cc := transport.Pipe(transport.Options{})
			defer cs.Close()
			defer cc.Close()
			done[p], clients[p] = make(chan error, 1), make(chan error, 1)
			go func() { done[p] <- s.Serve(ctx, cs, p) }()
			go func() {
				c, err := Connect(ctx, cc, p)
				if err == nil {
					err = c.BindSession(ctx, beaver.SessionID{9})
				}
				clients[p] <- err
			}()
		}
		for p := range 2 {
			if err := <-clients[p]; err != nil {
				t.Fatalf("party %d: %v", p, err)
			}
		}
		for p := range 2 {
			select {
			case err := <-done[p]:
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("party %d idle", p)) {
					t.Fatalf("party %d idle: %v", p, err)
				}
			case <-ctx.Done():
				t.Fatalf("server did not end party %d's idle connection", p)
			}
		}
	})
}

func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []beaver.Request{
		{Kind: beaver.KindTriple, N: 3},
		{Kind: beaver.KindMatTriple, Stream: 2, Counter: 9, Batch: 2, M: 3, K: 4, N: 5},
		{Kind: beaver.KindMatTriple, Stream: 2, Counter: 9, Batch: 2, M: 3, K: 4, N: 5, RingBits: 54},
		{Kind: beaver.KindMatTriple, Batch: 1, M: 1, K: 1, N: 1, RingBits: 64}, // refused: 0 means 64
		{Kind: beaver.KindTriple, N: 3, RingBits: 40},                          // refused: no ring width for this kind
		{Kind: beaver.KindSquareProduct, N: 3, RingBits: 50},
		{Kind: beaver.KindWeightTriple, WeightID: 1 << 40, M: 1, K: 2, N: 3},
		{Kind: beaver.KindWrap, N: 10, FracBits: 16},
		{Kind: 10, WeightID: 3, K: 2, N: 2}, // refused: kind 10 was the weight mask's, no request kind
	} {
		b, err := r.AppendBinary(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := beaver.DecodeRequest(b)
		if err != nil {
			return
		}
		// A decoded request is valid and re-encodes to the same bytes.
		if err := r.Validate(); err != nil {
			t.Fatalf("decoded an invalid request: %v", err)
		}
		out, err := r.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out, b) {
			t.Fatalf("round trip: %x != %x", out, b)
		}
		if r.CorrectionWords(1) < 0 {
			t.Fatal("negative size")
		}
	})
}

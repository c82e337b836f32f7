package ot

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// recConn wraps a Conn and records every word message it sends and receives.
type recConn struct {
	Conn
	mu         sync.Mutex
	sent, recv []uint64
	msgs       [][]uint64 // every received message, in order
}

func (r *recConn) Exchange(ctx context.Context, send, recv []uint64) error {
	err := r.Conn.Exchange(ctx, send, recv)
	r.mu.Lock()
	r.sent = append(r.sent, send...)
	r.recv = append(r.recv, recv...)
	r.msgs = append(r.msgs, append([]uint64(nil), recv...))
	r.mu.Unlock()
	return err
}

func (r *recConn) SendWords(ctx context.Context, w []uint64) error {
	err := r.Conn.SendWords(ctx, w)
	r.mu.Lock()
	r.sent = append(r.sent, w...)
	r.mu.Unlock()
	return err
}

// takeMsgs returns the messages received since the last call.
func (r *recConn) takeMsgs() [][]uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

func (r *recConn) RecvWords(ctx context.Context, dst []uint64) error {
	err := r.Conn.RecvWords(ctx, dst)
	r.mu.Lock()
	r.recv = append(r.recv, dst...)
	r.msgs = append(r.msgs, append([]uint64(nil), dst...))
	r.mu.Unlock()
	return err
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// setupPair runs Setup for both parties over an in-memory transport pipe and
// returns the sessions and the two connections.
func setupPair(t testing.TB) (s0, s1 *Session, c0, c1 *transport.Conn) {
	t.Helper()
	return setupPairID(t, testSID)
}

// testSID is the session id of the tests.
var testSID = beaver.SessionID{1, 2, 3}

func setupPairID(t testing.TB, sid beaver.SessionID) (s0, s1 *Session, c0, c1 *transport.Conn) {
	t.Helper()
	c0, c1 = transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	ctx := testCtx(t)
	var e0, e1 error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s1, e1 = Setup(ctx, c1.Stream(1), 1, sid)
	}()
	s0, e0 = Setup(ctx, c0.Stream(1), 0, sid)
	wg.Wait()
	if e0 != nil || e1 != nil {
		t.Fatalf("setup: %v / %v", e0, e1)
	}
	return s0, s1, c0, c1
}

// genPair returns the generators of both parties for stream id 2, each
// recording its traffic.
func genPair(t testing.TB) (g0, g1 *Gen, r0, r1 *recConn) {
	t.Helper()
	s0, s1, c0, c1 := setupPair(t)
	return genPairOn(t, s0, s1, c0, c1, 2)
}

// genPairOn returns the generators of id of both parties' sessions, on
// stream id of their connections, each recording its traffic: a fresh pair
// (its own counters and traffic) without a new Setup, whose base OTs cost
// seconds under the race detector.
func genPairOn(t testing.TB, s0, s1 *Session, c0, c1 *transport.Conn, id uint32) (g0, g1 *Gen, r0, r1 *recConn) {
	t.Helper()
	r0, r1 = &recConn{Conn: c0.Stream(id)}, &recConn{Conn: c1.Stream(id)}
	var err error
	if g0, err = s0.NewGen(r0, id); err != nil {
		t.Fatal(err)
	}
	if g1, err = s1.NewGen(r1, id); err != nil {
		t.Fatal(err)
	}
	return g0, g1, r0, r1
}

// genPairRaw is genPair on the bare streams (no recording), for benchmarks.
func genPairRaw(t testing.TB) (g0, g1 *Gen) {
	t.Helper()
	s0, s1, c0, c1 := setupPair(t)
	var err error
	if g0, err = s0.NewGen(c0.Stream(2), 2); err != nil {
		t.Fatal(err)
	}
	if g1, err = s1.NewGen(c1.Stream(2), 2); err != nil {
		t.Fatal(err)
	}
	return g0, g1
}

// both runs f for party 0 and party 1 concurrently.
func both[T any](t testing.TB, f0, f1 func() (T, error)) (T, T) {
	t.Helper()
	var v1 T
	var e1 error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v1, e1 = f1()
	}()
	v0, e0 := f0()
	<-done
	if e0 != nil || e1 != nil {
		t.Fatalf("party 0: %v; party 1: %v", e0, e1)
	}
	return v0, v1
}

func add(a, b []uint64) []uint64 {
	out := make([]uint64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

func xor(a, b []uint64) []uint64 {
	out := make([]uint64, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// matmul is the plain reference product over Z_2^64.
func matmul(a, b []uint64, batch, m, k, n int) []uint64 {
	c := make([]uint64, batch*m*n)
	for bb := range batch {
		for i := range m {
			for l := range k {
				x := a[bb*m*k+i*k+l]
				for j := range n {
					c[bb*m*n+i*n+j] += x * b[bb*k*n+l*n+j]
				}
			}
		}
	}
	return c
}

// withLattice returns provider options whose weight masks are made by a
// Lattice with options lo (own gives each provider a Lattice of its own).
func withLattice(t testing.TB, lo LatticeOptions) ProviderOptions {
	t.Helper()
	l, err := NewLattice(lo)
	if err != nil {
		t.Fatal(err)
	}
	return ProviderOptions{WeightMasks: l}
}

// own returns o with a Lattice of its own where o has one (a Lattice
// serves one provider): a fresh one with the same parameters and
// compactness.
func own(t testing.TB, o ProviderOptions) ProviderOptions {
	t.Helper()
	if l, ok := o.WeightMasks.(*Lattice); ok {
		params := l.sc.Params()
		nl, err := NewLattice(LatticeOptions{Params: &params, Compact: l.compact})
		if err != nil {
			t.Fatal(err)
		}
		o.WeightMasks = nl
	}
	return o
}

// lat returns p's Lattice (nil if its weight masks are made otherwise).
func (p *Provider) lat() *Lattice {
	l, _ := p.masks.(*Lattice)
	return l
}

// cheatedCall runs r on both providers and returns party 0's material and
// error and party 1's error. Party 1's call is cancelled once party 0's
// fails: an aborting party 0 sends nothing more, so party 1 would wait.
func cheatedCall(ctx context.Context, p0, p1 *Provider, r beaver.Request) (m0 beaver.Material, err0, err1 error) {
	ctx1, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := p1.Material(ctx1, r)
		errs <- err
	}()
	m0, err0 = p0.Material(ctx, r)
	if err0 != nil {
		cancel()
	}
	return m0, err0, <-errs
}

package ot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/transport"
)

// providerPair returns both parties' providers on a fresh pipe, bound to
// testSID, with every stream's traffic of each party recorded.
func providerPair(t testing.TB, opts ...ProviderOptions) (p0, p1 *Provider, rec [2]*streamRec) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	var ps [2]*Provider
	for i, c := range []*transport.Conn{c0, c1} {
		rec[i] = &streamRec{conns: map[uint32]*recConn{}}
		var err error
		var o ProviderOptions
		if len(opts) > 0 {
			o = opts[0]
		}
		ps[i], err = newProvider(rec[i].opener(c), i, o)
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	both(t, func() (struct{}, error) { return struct{}{}, ps[0].BindSession(ctx, testSID) },
		func() (struct{}, error) { return struct{}{}, ps[1].BindSession(ctx, testSID) })
	return ps[0], ps[1], rec
}

// streamRec records the traffic of every transport stream a provider opens.
type streamRec struct {
	mu    sync.Mutex
	conns map[uint32]*recConn
}

func (s *streamRec) opener(c *transport.Conn) func(uint32) Conn {
	return func(id uint32) Conn {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := &recConn{Conn: c.Stream(id)}
		s.conns[id] = r
		return r
	}
}

// msgs returns the messages received on every stream but the base OTs'.
func (s *streamRec) msgs() [][]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]uint64
	for id, c := range s.conns {
		if id != DefaultStreamBase {
			out = append(out, c.takeMsgs()...)
		}
	}
	return out
}

// dropPoolIndices returns msgs without the words that are silent-OT pool
// indices (ferret_pool.go): the first index of a receiver's range is
// public, a multiple of 128 that both parties know from the call history
// (the view tests look at everything else). A uniform word is such an
// index with probability 2^−31, so the filter drops nothing of the rest in
// practice.
func dropPoolIndices(msgs [][]uint64) [][]uint64 {
	out := make([][]uint64, len(msgs))
	for i, m := range msgs {
		for _, w := range m {
			if w >= 1<<40 || w%128 != 0 {
				out[i] = append(out[i], w)
			}
		}
	}
	return out
}

// checkMaterial fails unless m0 and m1 are the two parties' parts of a
// correct correlation r; mask returns party 0's weight mask of an id.
func checkMaterial(t *testing.T, r beaver.Request, m0, m1 beaver.Material, mask func(id uint64, k, n int) []uint64) {
	t.Helper()
	for p, m := range []beaver.Material{m0, m1} {
		want := r.PartWords(p)
		if m.Kind != r.Kind || len(m.Parts) != len(want) {
			t.Fatalf("%v party %d: kind %v, %d parts", r, p, m.Kind, len(m.Parts))
		}
		for i, w := range want {
			if len(m.Parts[i]) != w {
				t.Fatalf("%v party %d: part %d has %d words, want %d", r, p, i, len(m.Parts[i]), w)
			}
		}
	}
	a, b := m0.Parts, m1.Parts
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf("%v: %s", r, fmt.Sprintf(format, args...)) }
	switch r.Kind {
	case beaver.KindTriple:
		A, B, C := add(a[0], b[0]), add(a[1], b[1]), add(a[2], b[2])
		for i := range C {
			if C[i] != A[i]*B[i] {
				fail("c ≠ a·b at %d", i)
			}
		}
	case beaver.KindSquare:
		A, A2 := add(a[0], b[0]), add(a[1], b[1])
		for i := range A {
			if A2[i] != A[i]*A[i] {
				fail("a2 ≠ a² at %d", i)
			}
		}
	case beaver.KindSquareProduct:
		A, A2, B, AB := add(a[0], b[0]), add(a[1], b[1]), add(a[2], b[2]), add(a[3], b[3])
		for i := range A {
			if A2[i] != A[i]*A[i] || AB[i] != A[i]*B[i] {
				fail("a2 ≠ a² or ab ≠ a·b at %d", i)
			}
		}
	case beaver.KindMatTriple:
		if !slices.Equal(add(a[2], b[2]), matmul(add(a[0], b[0]), add(a[1], b[1]), r.Batch, r.M, r.K, r.N)) {
			fail("C ≠ A·B")
		}
	case beaver.KindWeightTriple:
		if !slices.Equal(add(a[1], b[1]), matmul(b[0], mask(r.WeightID, r.K, r.N), 1, r.M, r.K, r.N)) {
			fail("C ≠ A·B")
		}
	case beaver.KindWeightVectorTriple:
		bm := mask(r.WeightID, 1, r.N)
		C := add(a[1], b[1])
		for i := range r.M {
			for j := range r.N {
				if C[i*r.N+j] != b[0][i*r.N+j]*bm[j] {
					fail("C ≠ A⊙b at %d,%d", i, j)
				}
			}
		}
	case beaver.KindAND:
		A, B, C := xor(a[0], b[0]), xor(a[1], b[1]), xor(a[2], b[2])
		for i := range C {
			if C[i] != A[i]&B[i] {
				fail("c ≠ a∧b at word %d", i)
			}
		}
	case beaver.KindCrossAND:
		C := xor(a[2], b[2])
		for i := range C {
			if C[i] != a[0][i]&b[1][i] {
				fail("c ≠ u∧v at word %d", i)
			}
		}
	case beaver.KindWrap:
		Z := add(a[2], b[2])
		for i := range r.N {
			uv := (a[0][i/64] & b[1][i/64]) >> (i % 64) & 1
			if Z[i] != uv<<(64-r.FracBits) {
				fail("wrap pair %d inconsistent", i)
			}
		}
	case beaver.KindBitPair:
		packed, arith, A, AR := xor(a[0], b[0]), add(a[1], b[1]), add(a[2], b[2]), add(a[3], b[3])
		for i := range r.N {
			bit := packed[i/64] >> (i % 64) & 1
			if arith[i] != bit || AR[i] != A[i]*bit {
				fail("bit %d inconsistent", i)
			}
		}
	case beaver.KindRowBitTriple:
		C := add(a[2], b[2])
		for i := range C {
			bit := b[1][i/r.N/64] >> (i / r.N % 64) & 1
			if C[i] != a[0][i]*bit {
				fail("row-bit triple %d inconsistent", i)
			}
		}
	default:
		fail("unchecked kind")
	}
}

// providerRequests is one request of every stream kind.
var providerRequests = []beaver.Request{
	{Kind: beaver.KindTriple, N: 37},
	{Kind: beaver.KindSquare, N: 5},
	{Kind: beaver.KindSquareProduct, N: 6},
	{Kind: beaver.KindMatTriple, Batch: 2, M: 3, K: 4, N: 5},
	{Kind: beaver.KindMatTriple, Batch: 1, M: 6, K: 2, N: 3},
	{Kind: beaver.KindWeightTriple, WeightID: 7, M: 2, K: 3, N: 4},
	{Kind: beaver.KindWeightTriple, WeightID: 7, M: 5, K: 3, N: 4},
	{Kind: beaver.KindWeightVectorTriple, WeightID: 8, M: 3, N: 4},
	{Kind: beaver.KindAND, N: 3},
	{Kind: beaver.KindCrossAND, N: 2},
	{Kind: beaver.KindWrap, N: 9, FracBits: 16},
	{Kind: beaver.KindBitPair, N: 70},
	{Kind: beaver.KindRowBitTriple, M: 70, N: 3},
}

// TestProviderCorrelations draws every kind through the provider, on two
// streams, and checks each correlation, the per-stream positions, the fixed
// weight masks and the traffic accounting.
func TestProviderCorrelations(t *testing.T) {
	p0, p1, _ := providerPair(t)
	ctx := testCtx(t)
	mask := func(id uint64, k, n int) []uint64 {
		m, err := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := mask(7, 3, 4)
	for _, stream := range []uint32{2, 16} {
		for i, r := range providerRequests {
			t.Run(fmt.Sprintf("stream%d/%v", stream, r.Kind), func(t *testing.T) {
				r.Stream = stream
				m0, m1 := both(t, func() (beaver.Material, error) { return p0.Material(ctx, r) },
					func() (beaver.Material, error) { return p1.Material(ctx, r) })
				checkMaterial(t, r, m0, m1, mask)
				for p, pr := range []*Provider{p0, p1} {
					if got := pr.Position(stream); got != uint64(i+1) {
						t.Fatalf("party %d: position %d after %d items", p, got, i+1)
					}
				}
			})
		}
	}
	if !slices.Equal(mask(7, 3, 4), first) {
		t.Fatal("weight mask of id 7 changed between requests")
	}
	if slices.Equal(mask(8, 3, 4), first) {
		t.Fatal("weight ids 7 and 8 share a mask")
	}
	s0, s1 := p0.Stats(), p1.Stats()
	if s0.BytesSent == 0 || s0.BytesSent != s1.BytesRecv || s1.BytesSent != s0.BytesRecv {
		t.Fatalf("OT traffic: party 0 %+v, party 1 %+v", s0, s1)
	}
	if want := int64(2 * len(providerRequests)); s0.Items != want || s1.Items != want {
		t.Fatalf("items %d / %d, want %d", s0.Items, s1.Items, want)
	}
	// The provider adds no message of its own: its traffic is the base OTs'
	// and the generators' exactly.
	for p, pr := range []*Provider{p0, p1} {
		o, s := pr.OTStats(), pr.Stats()
		if 8*o.WordsSent != s.BytesSent || 8*o.WordsRecv != s.BytesRecv {
			t.Fatalf("party %d: %d/%d bytes on the wire, generators and base OTs account for %d/%d", p, s.BytesSent, s.BytesRecv, 8*o.WordsSent, 8*o.WordsRecv)
		}
		if o.WordsSent*8 < 19520 || o.Rounds < 3 {
			t.Fatalf("party %d: OT stats %+v miss the base OTs", p, o)
		}
	}
}

// TestProviderConcurrentStreams runs requests on several streams at once,
// each party issuing every stream's requests from its own goroutine, in
// different interleavings on the two sides: every stream's messages stay on
// its own transport stream, so each correlation is correct.
func TestProviderConcurrentStreams(t *testing.T) {
	p0, p1, _ := providerPair(t)
	ctx := testCtx(t)
	const streams, per = 4, 6
	type out struct{ m [2][per]beaver.Material }
	res := make([]out, streams)
	var wg sync.WaitGroup
	errs := make(chan error, 2*streams)
	for party, pr := range []*Provider{p0, p1} {
		for s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					r := providerRequests[(s+i)%len(providerRequests)]
					r.Stream = uint32(20 + s)
					m, err := pr.Material(ctx, r)
					if err != nil {
						errs <- fmt.Errorf("party %d stream %d item %d: %w", party, s, i, err)
						return
					}
					res[s].m[party][i] = m
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mask := func(id uint64, k, n int) []uint64 {
		m, err := p0.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for s := range streams {
		for i := range per {
			r := providerRequests[(s+i)%len(providerRequests)]
			checkMaterial(t, r, res[s].m[0][i], res[s].m[1][i], mask)
		}
	}
}

// TestProviderErrors: misuse is an error, never a hang or a panic.
func TestProviderErrors(t *testing.T) {
	ctx := testCtx(t)
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	if _, err := NewProvider(c0, 2, ProviderOptions{}); err == nil {
		t.Fatal("party 2 accepted")
	}
	if _, err := NewProvider(nil, 0, ProviderOptions{}); err == nil {
		t.Fatal("nil connection accepted")
	}
	u0, err := NewProvider(c0, 0, ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u0.Material(ctx, beaver.Request{Kind: beaver.KindTriple, N: 1}); err == nil || !strings.Contains(err.Error(), "no session bound") {
		t.Fatalf("unbound provider: %v", err)
	}
	if err := u0.BindSession(ctx, beaver.SessionID{}); err == nil {
		t.Fatal("zero session id accepted")
	}
	if err := u0.Seek(3, 10); err != nil {
		t.Fatal(err)
	}
	if err := u0.Seek(3, 9); err == nil {
		t.Fatal("seek backwards accepted")
	}
	if u0.Position(3) != 10 {
		t.Fatalf("position %d after seek to 10", u0.Position(3))
	}
	// Parties binding different ids fail with ErrSessionMismatch and stay
	// unusable.
	u1, err := NewProvider(c1, 1, ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var e0, e1 error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); e1 = u1.BindSession(ctx, beaver.SessionID{9}) }()
	e0 = u0.BindSession(ctx, testSID)
	wg.Wait()
	if !errors.Is(e0, ErrSessionMismatch) || !errors.Is(e1, ErrSessionMismatch) {
		t.Fatalf("mismatched ids: %v / %v", e0, e1)
	}
	if err := u0.BindSession(ctx, testSID); err == nil {
		t.Fatal("bind after a failed setup accepted")
	}

	p0, p1, _ := providerPair(t)
	if err := p0.BindSession(ctx, testSID); err != nil {
		t.Fatalf("rebinding the same id: %v", err)
	}
	if err := p0.BindSession(ctx, beaver.SessionID{5}); err == nil {
		t.Fatal("rebinding another id accepted")
	}
	if id, ok := p1.Session(); !ok || id != testSID {
		t.Fatalf("session %v %v", id, ok)
	}
	cases := []struct {
		name string
		p    *Provider
		r    beaver.Request
	}{
		{"counter set", p0, beaver.Request{Kind: beaver.KindTriple, N: 1, Counter: 4}},
		{"bad size", p0, beaver.Request{Kind: beaver.KindTriple, N: -1}},
		{"stream past the base", p0, beaver.Request{Kind: beaver.KindTriple, N: 1, Stream: ^uint32(0) - 1}},
	}
	for _, c := range cases {
		if _, err := c.p.Material(ctx, c.r); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := p1.WeightMask(ctx, 1, 1, 1); err == nil {
		t.Error("mask for party 1: no error")
	}
	if _, err := p0.WeightMask(ctx, 1, -1, 1); err == nil {
		t.Error("mask of a negative size: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p0.Material(cctx, beaver.Request{Kind: beaver.KindTriple, N: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

// TestProviderPrefetch draws a script per stream ahead from both bound
// providers (protocol.Prefetch: the two parties' draws pair up per stream
// in script order), serves it to the online calls with correct material,
// and calls past the script still pair up.
func TestProviderPrefetch(t *testing.T) {
	p0, p1, _ := providerPair(t)
	ctx := testCtx(t)
	var sched []beaver.Request
	scripts := map[uint32]*protocol.Script{30: {}, 31: {}}
	for i, r := range providerRequests {
		r.Stream = uint32(30 + i%2)
		sched = append(sched, r)
		q := r
		q.Stream = 0
		scripts[r.Stream].Requests = append(scripts[r.Stream].Requests, q)
	}
	var pf [2]map[uint32]*protocol.Prefetch
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for p, pr := range []*Provider{p0, p1} {
		pf[p] = map[uint32]*protocol.Prefetch{}
		for st, sc := range scripts {
			f := protocol.NewPrefetch(*sc, st)
			pf[p][st] = f
			wg.Add(1)
			go func() { defer wg.Done(); errs <- f.Draw(ctx, pr) }()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p0.Stats().Items != int64(len(sched)) {
		t.Fatalf("nothing generated ahead: items %d", p0.Stats().Items)
	}
	mask := func(id uint64, k, n int) []uint64 {
		m, err := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, r := range sched {
		m0, m1 := both(t, func() (beaver.Material, error) { return pf[0][r.Stream].Material(ctx, r) },
			func() (beaver.Material, error) { return pf[1][r.Stream].Material(ctx, r) })
		checkMaterial(t, r, m0, m1, mask)
	}
	extra := beaver.Request{Kind: beaver.KindTriple, N: 4, Stream: 30}
	m0, m1 := both(t, func() (beaver.Material, error) { return p0.Material(ctx, extra) },
		func() (beaver.Material, error) { return p1.Material(ctx, extra) })
	checkMaterial(t, extra, m0, m1, mask)
}

// TestProviderView: what party 1 receives through the provider's request
// path for weight triples (the correlation the model owner's fixed mask
// enters; party 1 chooses, party 0 sends corrections of its mask) is uniform
// even when that mask is all zeros or all ones.
func TestProviderView(t *testing.T) {
	for _, silent := range []bool{false, true} {
		for _, c := range []uint64{0, ^uint64(0)} {
			t.Run(fmt.Sprintf("silent=%v/mask=%x", silent, c), func(t *testing.T) { providerView(t, silent, c) })
		}
	}
}

// providerView is TestProviderView's case of a mode and party 0's constant
// mask c.
func providerView(t *testing.T, silent bool, c uint64) {
	p0, p1, rec := providerPair(t, ProviderOptions{SilentOT: silent})
	p0.mask = func(_ beaver.SessionID, _ uint64, k, n int) []uint64 { return constWords(c)(k * n) }
	ctx := testCtx(t)
	for _, r := range []beaver.Request{
		{Kind: beaver.KindWeightTriple, Stream: 2, WeightID: 1, M: 4, K: 32, N: 32},
		{Kind: beaver.KindWeightVectorTriple, Stream: 2, WeightID: 2, M: 64, N: 128},
	} {
		both(t, func() (beaver.Material, error) { return p0.Material(ctx, r) },
			func() (beaver.Material, error) { return p1.Material(ctx, r) })
		msgs := dropPoolIndices(rec[1].msgs())
		// At least 2 kB (8 a byte value): with the silent OTs a receiver
		// sends one bit an OT, so the view is mostly the corrections.
		if x, n := chiSquareBytes(msgs); n < 1<<11 || x > chiLimit {
			t.Fatalf("%v: party 1's view: χ² = %.0f over %d bytes", r.Kind, x, n)
		}
	}
}

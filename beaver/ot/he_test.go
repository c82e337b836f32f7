package ot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/transport"
)

// hePair returns both parties' providers with options o0, o1 on a fresh
// pipe, every stream recorded, and their BindSession errors.
func hePair(t testing.TB, o0, o1 ProviderOptions) (ps [2]*Provider, rec [2]*streamRec, errs [2]error) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	for i, c := range []*transport.Conn{c0, c1} {
		rec[i] = &streamRec{conns: map[uint32]*recConn{}}
		var err error
		ps[i], err = newProvider(rec[i].opener(c), i, own(t, []ProviderOptions{o0, o1}[i]))
		if err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ps[i].BindSession(ctx, testSID)
		}()
	}
	wg.Wait()
	return ps, rec, errs
}

// heProviders returns a bound pair of providers with Lattice weight masks.
func heProviders(t testing.TB) (p0, p1 *Provider, rec [2]*streamRec) {
	t.Helper()
	return heProvidersWith(t, withLattice(t, LatticeOptions{}))
}

// heProvidersWith returns a bound pair of providers with options o.
func heProvidersWith(t testing.TB, o ProviderOptions) (p0, p1 *Provider, rec [2]*streamRec) {
	t.Helper()
	ps, rec, errs := hePair(t, o, o)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("bind: %v / %v", errs[0], errs[1])
	}
	return ps[0], ps[1], rec
}

// itemKeys returns the keys of the encryptions a Lattice item of r uses.
func itemKeys(t testing.TB, p *Provider, r beaver.Request) []heKey {
	t.Helper()
	it, err := p.lat().item(r)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]heKey, len(it.terms))
	for i, tm := range it.terms {
		keys[i] = tm.key
	}
	return keys
}

// heldSizes returns the memory party 1 holds for each key of r once
// loaded: he.WeightSizes' P1Compact with compact weights, P1 otherwise.
func heldSizes(t testing.TB, p *Provider, r beaver.Request) map[heKey]int64 {
	t.Helper()
	l := p.lat()
	it, err := l.item(r)
	if err != nil {
		t.Fatal(err)
	}
	out := map[heKey]int64{}
	for _, tm := range it.terms {
		ws := l.sc.WeightSizes(tm.rows, tm.cols, tm.t.Off, tm.l)
		out[tm.key] = ws.P1
		if l.compact {
			out[tm.key] = ws.P1Compact
		}
	}
	return out
}

// drawPair draws r from both providers at once.
func drawPair(t testing.TB, ctx context.Context, p0, p1 *Provider, r beaver.Request) (m0, m1 beaver.Material) {
	t.Helper()
	return both(t, func() (beaver.Material, error) { return p0.Material(ctx, r) },
		func() (beaver.Material, error) { return p1.Material(ctx, r) })
}

// edgeWords returns n words cycling through the edge words of Z_2^64 and
// a few others.
func edgeWords(n int) []uint64 {
	edges := []uint64{0, 1 << 63, ^uint64(0), 1, (1 << 63) - 1, (1 << 63) + 1, 0x0123456789abcdef, ^uint64(1)}
	w := make([]uint64, n)
	for i := range w {
		w[i] = edges[(i*7+i/len(edges))%len(edges)]
	}
	return w
}

// TestHEProviderCorrelations draws the weight-mask kinds (and an OT kind in
// between) from Lattice providers and checks every correlation
// C0 + C1 = A·B with B party 0's WeightMask of the id, over shapes with one
// and several output blocks, a row block cut short, and edge words in A
// and B; a second request of a weight whose layout has the same NW uploads
// nothing.
func TestHEProviderCorrelations(t *testing.T) {
	cases := []struct {
		name    string
		edges   bool
		compact bool // party 1 keeps compact weights
		uploads int
		reqs    []beaver.Request
	}{
		{"small", false, false, 3, []beaver.Request{
			{Kind: beaver.KindWeightTriple, WeightID: 7, M: 2, K: 3, N: 4},
			{Kind: beaver.KindTriple, N: 5},
			{Kind: beaver.KindWeightTriple, WeightID: 7, M: 2, K: 3, N: 4},
			// Another row count, the same NW: the weights are reused
			// with MW = 5.
			{Kind: beaver.KindWeightTriple, WeightID: 7, M: 5, K: 3, N: 4},
			{Kind: beaver.KindWeightVectorTriple, WeightID: 8, M: 3, N: 4},
			{Kind: beaver.KindWeightTriple, WeightID: 9, M: 1, K: 1, N: 1},
		}},
		// Tall products: the separate plan with a compressed check (B and
		// B·V uploaded per weight).
		{"blocks", false, false, 6, []beaver.Request{
			// ChooseLayout(300, 5, 24): NW = 32, MW = 256: 2 row blocks
			// (the last of 44 rows), 1 column block.
			{Kind: beaver.KindWeightTriple, WeightID: 1, M: 300, K: 5, N: 24},
			{Kind: beaver.KindWeightTriple, WeightID: 2, M: 130, K: 4, N: 9},
			{Kind: beaver.KindWeightVectorTriple, WeightID: 3, M: 70, N: 33},
		}},
		{"edge words", true, false, 2, []beaver.Request{
			{Kind: beaver.KindWeightTriple, WeightID: 4, M: 9, K: 16, N: 12},
			{Kind: beaver.KindWeightVectorTriple, WeightID: 5, M: 9, N: 16},
		}},
		// Both compressed (300 and 200 rows > CheckRows): B, B·V and V are
		// uploaded once and reused with the other row count.
		{"compact", false, true, 2, []beaver.Request{
			{Kind: beaver.KindWeightTriple, WeightID: 6, M: 300, K: 5, N: 24},
			{Kind: beaver.KindWeightTriple, WeightID: 6, M: 200, K: 5, N: 24},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.name == "blocks" {
				// 8 s under the race detector (which runs -short); the
				// compact case keeps a compressed check there.
				t.Skip("the tall products run in the full suite")
			}
			p0, p1, _ := heProvidersWith(t, withLattice(t, LatticeOptions{Compact: c.compact}))
			if p1.lat().compact != c.compact {
				t.Fatal("LatticeOptions.Compact not applied")
			}
			ctx := testCtx(t)
			if c.edges {
				p0.mask = func(_ beaver.SessionID, _ uint64, k, n int) []uint64 { return edgeWords(k * n) }
				p1.lat().draw = edgeWords
			}
			uploads := map[heKey]bool{}
			held := map[heKey]int64{} // each key's prepared bytes, by its shape
			for i, r := range c.reqs {
				r.Stream = uint32(i % 2)
				m0, m1 := drawPair(t, ctx, p0, p1, r)
				checkMaterial(t, r, m0, m1, func(id uint64, k, n int) []uint64 {
					w, err := p0.WeightMask(ctx, id, k, n)
					if err != nil {
						t.Fatal(err)
					}
					return w
				})
				if r.Kind == beaver.KindWeightTriple || r.Kind == beaver.KindWeightVectorTriple {
					for _, key := range itemKeys(t, p0, r) {
						uploads[key] = true
					}
					for key, b := range heldSizes(t, p1, r) {
						held[key] = b
					}
				}
			}
			var want int64
			for _, b := range held {
				want += b
			}
			// Party 1 holds each key once, compact (c0 only) or both
			// halves, and no more (issue 38: its peak memory).
			if st := p1.lat().Stats(); st.HeldBytes != want || st.PeakHeldBytes != want {
				t.Errorf("party 1 holds %d bytes of prepared encryptions (peak %d), want %d (compact %v)", st.HeldBytes, st.PeakHeldBytes, want, c.compact)
			}
			var weights, projs int64
			for key := range uploads {
				if key.matrix == he.MatrixProj {
					projs++
				} else {
					weights++
				}
			}
			if weights != int64(c.uploads) {
				t.Errorf("%d encrypted weight matrices, want %d", weights, c.uploads)
			}
			for p, pr := range []*Provider{p0, p1} {
				if st := pr.lat().Stats(); st.Uploads != weights || st.Projections != projs {
					t.Errorf("party %d: %d uploads and %d projections, want %d and %d (one per key)", p, st.Uploads, st.Projections, weights, projs)
				}
			}
		})
	}
}

// TestHEProviderSharedUpload: several streams drawing triples of the same
// weight at once upload it once, and every party's traffic is exactly
// what the protocol says: party 1 one request per encrypted matrix and per
// item its tagged, padded outputs and commitment; party 0 one reply header
// and the padded encryption per matrix.
func TestHEProviderSharedUpload(t *testing.T) {
	p0, p1, _ := heProviders(t)
	ctx := testCtx(t)
	const streams = 4
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 11, M: 8, K: 6, N: 40}
	it, err := p0.lat().item(r)
	if err != nil {
		t.Fatal(err)
	}
	sc := p0.lat().sc
	s0, s1 := p0.Stats(), p1.Stats()
	// Setup: base OTs and, from party 0, the public key.
	pk := 8 * int64(wordsFor(sc.Sizes(1, 1, 1, he.Layout{}).PublicKey))
	base := int64(19552)
	if s0.BytesSent != base+pk || s1.BytesSent != base || s0.BytesRecv != base || s1.BytesRecv != base+pk {
		t.Fatalf("setup bytes: party 0 sent %d recv %d, party 1 sent %d recv %d; want %d+%d public key", s0.BytesSent, s0.BytesRecv, s1.BytesSent, s1.BytesRecv, base, pk)
	}
	res := make([][2]beaver.Material, streams)
	var wg sync.WaitGroup
	errs := make(chan error, 2*streams)
	for party, pr := range []*Provider{p0, p1} {
		for s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rr := r
				rr.Stream = uint32(30 + s)
				m, err := pr.Material(ctx, rr)
				if err != nil {
					errs <- fmt.Errorf("party %d stream %d: %w", party, s, err)
					return
				}
				res[s][party] = m
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mask := func(id uint64, k, n int) []uint64 {
		w, err := p0.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for s := range streams {
		checkMaterial(t, r, res[s][0], res[s][1], mask)
	}
	// Party 0 sends each encryption of the plan once, after a reply
	// header; party 1 asks for each once and per item sends the tag word,
	// the padded outputs and the 32-byte commitment.
	var up, upBytes int64
	item := int64(8 + 8*heCommitWords)
	asks := int64(8 * heRequestWords * len(it.terms))
	for _, tm := range it.terms {
		b := sc.WeightSizes(tm.rows, tm.cols, tm.t.Off, tm.l).Bytes
		up += 8*heReplyWords + 8*int64(wordsFor(b))
		upBytes += b
	}
	for _, b := range it.out {
		item += 8 * int64(wordsFor(b))
	}
	d0, d1 := p0.Stats(), p1.Stats()
	if got := d0.BytesSent - s0.BytesSent; got != up {
		t.Errorf("party 0 sent %d bytes, want the plan's encryptions once, %d", got, up)
	}
	if got := d1.BytesSent - s1.BytesSent; got != asks+streams*item {
		t.Errorf("party 1 sent %d bytes, want %d of requests and %d items × %d (tag, he.OutputSizes %v padded, commitment)", got, asks, streams, item, it.out)
	}
	if d0.BytesRecv-s0.BytesRecv != d1.BytesSent-s1.BytesSent || d1.BytesRecv-s1.BytesRecv != d0.BytesSent-s0.BytesSent {
		t.Error("sent and received bytes do not mirror")
	}
	want := HEStats{Uploads: 1, Projections: 1, UploadBytes: upBytes, Items: streams}
	if st := p0.lat().Stats(); st != want {
		t.Errorf("party 0 HE stats %+v, want %+v", st, want)
	}
	want.Held = 1
	for _, b := range heldSizes(t, p1, r) {
		want.HeldBytes += b // the encryption and V's rows, held once
	}
	want.PeakHeldBytes = want.HeldBytes
	st := p1.lat().Stats()
	// One product per output of each item; products on the same weights
	// that waited together shared a pass (he's merge), as timing has it.
	if products := streams * int64(len(it.out)); st.Products != products || st.Passes < 1 || st.Passes > products {
		t.Errorf("party 1: %d HE products in %d passes, want %d products in 1 to %d passes", st.Products, st.Passes, products, products)
	}
	st.Products, st.Passes = 0, 0
	if st != want {
		t.Errorf("party 1 HE stats %+v, want %+v", st, want)
	}
	if d0.Items != streams || d1.Items != streams {
		t.Errorf("items %d / %d, want %d", d0.Items, d1.Items, streams)
	}
}

// TestHEReleaseWeights: ReleaseWeights drops party 1's encrypted weights of
// the ids in the range, and only those (HEStats counts them); party 0 keeps
// its record of the upload, so a released weight requested again is
// refused (ErrWeightResent), not uploaded twice.
func TestHEReleaseWeights(t *testing.T) {
	p0, p1, _ := heProviders(t)
	ctx := testCtx(t)
	in := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 1<<32 | 7, M: 2, K: 2, N: 3}
	out := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 2 << 32, M: 2, K: 2, N: 3}
	drawPair(t, ctx, p0, p1, in)
	drawPair(t, ctx, p0, p1, out)
	before := p1.lat().Stats()
	if before.Held != 2 || before.Released != 0 {
		t.Fatalf("before: %+v, want 2 held", before)
	}
	var rel beaver.WeightReleaser = p1
	rel.ReleaseWeights(1<<32, 2<<32) // phase 1's ids of epoch 0
	var freed int64
	for key, b := range heldSizes(t, p1, in) {
		if key.matrix != he.MatrixProj { // V's rows are kept for later phases
			freed += b
		}
	}
	if st := p1.lat().Stats(); st.Held != 1 || st.Released != 1 || st.HeldBytes != before.HeldBytes-freed || st.PeakHeldBytes != before.HeldBytes {
		t.Fatalf("after: %+v, want 1 held and 1 released, %d bytes fewer held (of %d), the peak kept", st, freed, before.HeldBytes)
	}
	p0.ReleaseWeights(0, 1<<40)   // party 0 holds no weights: nothing to drop
	drawPair(t, ctx, p0, p1, out) // still held: no upload
	if st := p0.lat().Stats(); st.Uploads != 2 {
		t.Fatalf("party 0 uploaded %d times, want 2", st.Uploads)
	}
	ctx1, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := p1.Material(ctx1, in)
		done <- err
	}()
	if _, err := p0.Material(ctx, in); !errors.Is(err, ErrWeightResent) {
		t.Fatalf("party 0 on a released weight: %v, want ErrWeightResent", err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("party 1 drew a released weight")
	}
}

// TestHEProviderRefusesResend: a party 1 that asks twice for the same
// encrypted weights (here: one that forgot them) makes party 0 fail with
// ErrWeightResent instead of uploading them again, and is told why.
func TestHEProviderRefusesResend(t *testing.T) {
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 3, M: 2, K: 2, N: 3}
	t.Run("resend", func(t *testing.T) {
		p0, p1, _ := heProviders(t)
		ctx := testCtx(t)
		drawPair(t, ctx, p0, p1, r)
		p1.lat().mu.Lock()
		clear(p1.lat().cache)
		p1.lat().mu.Unlock()
		ctx1, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := p1.Material(ctx1, r)
			done <- err
		}()
		_, err := p0.Material(ctx, r)
		if !errors.Is(err, ErrWeightResent) || !strings.Contains(err.Error(), "weight 3") {
			t.Fatalf("party 0: %v, want ErrWeightResent naming the weight", err)
		}
		if err := <-done; err == nil || !strings.Contains(err.Error(), "asked again") {
			t.Fatalf("party 1: %v, want the refusal's reason", err)
		}
		if st := p0.lat().Stats(); st.Uploads != 1 {
			t.Fatalf("party 0 uploaded %d times", st.Uploads)
		}
	})
}

// TestProviderDescribe: a provider describes its way by the peer
// binaries' -provider name and, for a Lattice, the digest of its HE
// parameters, so that selection's hello can refuse a difference before
// any session is bound (issue 39); beaver.Describe finds it through a
// wrapper.
func TestProviderDescribe(t *testing.T) {
	other := he.DefaultParams()
	other.FloodBits--
	describe := func(o ProviderOptions) beaver.Description {
		c0, _ := transport.Pipe(transport.Options{})
		defer c0.Close()
		p, err := NewProvider(c0, 0, o)
		if err != nil {
			t.Fatal(err)
		}
		return beaver.Describe(beaver.Typed{Provider: p})
	}
	ole, lat, lat2 := describe(ProviderOptions{}), describe(withLattice(t, LatticeOptions{})), describe(withLattice(t, LatticeOptions{Params: &other}))
	if ole != (beaver.Description{Source: "ot"}) {
		t.Errorf("VectorOLE: %+v", ole)
	}
	if lat.Source != "he" || len(lat.Params) != 62 || lat2.Source != "he" || lat2.Params == lat.Params {
		t.Errorf("Lattice: %+v; other parameters: %+v", lat, lat2)
	}
}

// TestHEProviderModeMismatch: parties whose weight masks are made
// differently (VectorOLE, Lattice, another way), or by Lattices with
// different parameters, both fail at BindSession with
// ErrModeMismatch, and the error says what differs.
func TestHEProviderModeMismatch(t *testing.T) {
	other := he.DefaultParams()
	other.FloodBits--
	cases := []struct {
		name   string
		o0, o1 ProviderOptions
		want   string
	}{
		{"he-ot", withLattice(t, LatticeOptions{}), ProviderOptions{}, "linear mode"},
		{"ot-he", ProviderOptions{}, withLattice(t, LatticeOptions{}), "linear mode"},
		{"params", withLattice(t, LatticeOptions{}), withLattice(t, LatticeOptions{Params: &other}), "other HE parameters"},
		{"foreign", ProviderOptions{WeightMasks: foreignMasks{}}, ProviderOptions{}, "linear mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, errs := hePair(t, c.o0, c.o1)
			for p, err := range errs {
				if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), c.want) {
					t.Errorf("party %d: %v, want ErrModeMismatch (%s)", p, err, c.want)
				}
			}
		})
	}
	if _, err := NewProvider(nil, 0, ProviderOptions{}); err == nil {
		t.Error("nil connection accepted")
	}
	bad := he.DefaultParams()
	bad.LogN = 3
	if _, err := NewLattice(LatticeOptions{Params: &bad}); err == nil {
		t.Error("a lattice with invalid parameters accepted")
	}
}

// foreignMasks is a WeightMaskGenerator of another way (9): its peer must
// refuse it.
type foreignMasks struct{ VectorOLE }

func (foreignMasks) Fingerprint() [32]byte { return [32]byte{9} }

// TestHEProviderView: what party 0 receives of a Lattice item (the message
// of outputs and commitment, its tag and the output's fixed 18-byte header
// left out) looks uniform whatever party 1's A, R and check
// masks: the χ² test of TestViews with party 1's randomness fixed to all
// zeros and to all ones. (What party 1 receives, the encrypted matrices, is
// pseudorandom by RLWE; beaver/he's view tests cover the ciphertexts and
// the check columns P0 decrypts.)
func TestHEProviderView(t *testing.T) {
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 1, M: 16, K: 8, N: 16}
	var views [2][]uint64
	for i, secret := range []uint64{0, ^uint64(0)} {
		p0, p1, rec := heProviders(t)
		ctx := testCtx(t)
		p1.lat().draw = constWords(secret)
		drawPair(t, ctx, p0, p1, r)
		it, err := p0.lat().item(r)
		if err != nil {
			t.Fatal(err)
		}
		if len(it.out) != 1 {
			t.Fatalf("plan with %d outputs, want the merged one", len(it.out))
		}
		var out []uint64
		for _, m := range rec[0].msgs() {
			if len(m) == 1+wordsFor(it.out[0])+heCommitWords {
				out = m
			}
		}
		if out == nil {
			t.Fatal("no output message received")
		}
		// Skip the tag and the header (3 words cover its 18 bytes).
		x, n := chiSquareBytes([][]uint64{out[4:]})
		if n < 4096 {
			t.Fatalf("only %d bytes", n)
		}
		if x > chiLimit {
			t.Fatalf("party 1's randomness %x: output bytes not uniform: χ² = %.0f over %d bytes", secret, x, n)
		}
		views[i] = out
	}
	if fmt.Sprint(views[0]) == fmt.Sprint(views[1]) {
		t.Fatal("equal views")
	}
}

// FuzzHEPeer plays a Lattice against a scripted peer whose messages are
// arbitrary bytes (cut at the lengths the receiver expects, as the
// transport guarantees): party 0 receives an item's outputs message on the
// item's stream (party 0) and requests on the session stream (party 2);
// party 1 receives replies and encryptions on the session stream, for the
// keys of an item it asked for (party 1). Each is refused with an error or
// accepted, never a panic or a hang.
func FuzzHEPeer(f *testing.F) {
	p0, p1, _ := heProviders(f)
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 5, M: 2, K: 2, N: 3}
	keys := itemKeys(f, p0, r)
	request := func(w0 uint64, key heKey) []byte {
		return wordsToBytes(append([]uint64{w0}, key.words()...))
	}
	f.Add(0, []byte{})
	f.Add(1, wordsToBytes(append([]uint64{heRefused, heRefuseResent}, keys[0].words()...)))
	f.Add(1, wordsToBytes(append([]uint64{heUpload, 0}, keys[0].words()...)))
	f.Add(2, request(heRequest, keys[0]))
	f.Add(2, append(request(heRequest, keys[0]), request(heRequest, keys[0])...))
	f.Add(2, request(heRequest+1, keys[0]))
	f.Add(2, wordsToBytes([]uint64{heRequest, 1 << 40}))
	// A real item's messages: party 1's outputs and requests, party 0's
	// replies and uploads.
	{
		pa, pb, rec := heProviders(f)
		drawPair(f, testCtx(f), pa, pb, r)
		var outs, asks, ups []byte
		for _, m := range rec[0].msgs() {
			outs = append(outs, wordsToBytes(m)...)
		}
		for _, m := range rec[0].conns[DefaultStreamBase].takeMsgs() {
			if len(m) == heRequestWords && m[0] == heRequest {
				asks = append(asks, wordsToBytes(m)...)
			}
		}
		replies := false
		for _, m := range rec[1].conns[DefaultStreamBase].takeMsgs() {
			replies = replies || len(m) == heReplyWords && m[0] == heUpload
			if replies {
				ups = append(ups, wordsToBytes(m)...)
			}
		}
		f.Add(0, outs) // what party 0 received of the item: the outputs
		f.Add(2, asks) // and on the session stream: the requests
		f.Add(1, ups)  // what party 1 received: the replies and uploads
	}
	gid := uint32(1000)
	f.Fuzz(func(t *testing.T, party int, data []byte) {
		ctx := testCtx(t)
		switch party & 3 {
		case 0:
			gid++
			g, err := p0.sess.NewGen(&scriptConn{data: data, limit: 4}, gid)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := p0.lat().Generate(ctx, g, p0.item(testSID, r))
			if err == nil && (len(ps) != 2 || len(ps[1]) != r.M*r.N) {
				t.Fatalf("accepted with parts %v", ps)
			}
		case 1:
			h := p1.lat()
			it, err := h.item(r)
			if err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			clear(h.cache)
			for _, tm := range it.terms {
				h.cache[tm.key] = &heEntry{done: make(chan struct{}), pending: true, sid: testSID, term: tm}
			}
			h.mu.Unlock()
			if err := h.replies(ctx, &scriptConn{data: data, limit: 6}); err == nil {
				t.Fatal("the replies ended without an error")
			}
		default:
			h, err := NewLattice(LatticeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			it, err := h.item(r)
			if err != nil {
				t.Fatal(err)
			}
			h.need(testSID, it, func(k, n int) []uint64 { return make([]uint64, k*n) })
			c := &scriptConn{data: data, limit: 8}
			for {
				w := make([]uint64, heRequestWords)
				if c.RecvWords(ctx, w) != nil || !h.request(w) {
					break
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.pending < 0 || h.pending > heMaxPending || len(h.queue) > len(it.terms) {
				t.Fatalf("%d pending, %d queued", h.pending, len(h.queue))
			}
		}
	})
}

// TestLatticeServesOneProvider: a Lattice holds one provider's session
// state (its key, its uploads), so a second Setup (a second provider, or
// a second session, given the same generator) is refused rather than
// mixing two sessions' keys.
func TestLatticeServesOneProvider(t *testing.T) {
	l, err := NewLattice(LatticeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if rounds, err := l.Setup(ctx, &scriptConn{}, 0, testSID); err != nil || rounds != 1 {
		t.Fatalf("first setup: %d rounds, %v", rounds, err)
	}
	if _, err := l.Setup(ctx, &scriptConn{}, 0, beaver.SessionID{9}); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("second setup: %v", err)
	}
	if fp, vfp := l.Fingerprint(), (VectorOLE{}).Fingerprint(); fp[0] != wayLattice || vfp != [32]byte{wayVectorOLE} {
		t.Fatalf("fingerprints %x, %x", fp[:4], vfp[:4])
	}
}

// TestHEProviderNoCrossStreamWait: party 1 starts items of one weight on
// two streams, A first, while party 0 has not reached A. The item on
// stream B must complete with party 0's half of it alone (party 0 sends
// the encryption once its own item on B needs it), whatever stream A
// does; A completes once party 0 draws it too. On d5bf317 party 1's item on
// B waited for the one on A, which loaded the encryption on stream A and
// so waited for party 0's item on A: B's pair stopped until the context
// ended (the mpcbench hang of issue 38, whose lanes reached A late). The
// items have different row counts whose plans share the encryptions: the
// one party 1 asked for (on A, MW 3) is the one party 0 made (on B, MW 4),
// which each multiplies with its own MW.
func TestHEProviderNoCrossStreamWait(t *testing.T) {
	p0, p1, _ := heProviders(t)
	ctx := testCtx(t)
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 21, M: 4, K: 6, N: 8}
	ra, rb := r, r
	ra.Stream, rb.Stream, ra.M = 40, 41, 3
	if ka, kb := itemKeys(t, p1, ra), itemKeys(t, p1, rb); !slices.Equal(ka, kb) {
		t.Fatalf("the items' plans use the keys %v and %v: not shared", ka, kb)
	}
	type drawn struct {
		m   beaver.Material
		err error
	}
	doneA := make(chan drawn, 1)
	go func() {
		m, err := p1.Material(ctx, ra)
		doneA <- drawn{m, err}
	}()
	keys := itemKeys(t, p1, ra)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		p1.lat().mu.Lock()
		n := len(p1.lat().cache)
		p1.lat().mu.Unlock()
		if n == len(keys) {
			break // party 1's item on A holds the keys' entries
		}
		if time.Now().After(deadline) {
			t.Fatal("party 1's item on stream A never started")
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m0, m1 := drawPair(t, bctx, p0, p1, rb)
	mask := func(id uint64, k, n int) []uint64 {
		w, err := p0.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	checkMaterial(t, rb, m0, m1, mask)
	m0, err := p0.Material(ctx, ra)
	if err != nil {
		t.Fatal(err)
	}
	a := <-doneA
	if a.err != nil {
		t.Fatal(a.err)
	}
	checkMaterial(t, ra, m0, a.m, mask)
}

// TestHEUploadRefusals: party 0 refuses a malformed request, a second
// request for a key, and more than heMaxPending requests for keys none of
// its items needed, each with its public reason, and queues a request for
// a key an item needed; party 1 stops at a refusal, naming the reason, and
// at an encryption it did not ask for.
func TestHEUploadRefusals(t *testing.T) {
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 5, M: 2, K: 2, N: 3}
	fresh := func(t *testing.T) (*Lattice, *heItem) {
		h, err := NewLattice(LatticeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		it, err := h.item(r)
		if err != nil {
			t.Fatal(err)
		}
		return h, it
	}
	ask := func(key heKey) []uint64 { return append([]uint64{heRequest}, key.words()...) }
	other := func(i int) heKey {
		return heKey{kind: beaver.KindWeightTriple, id: uint64(1000 + i), k: 2, n: 3, nw: 64, kw: 1}
	}
	cases := []struct {
		name string
		reqs func(it *heItem) [][]uint64
		code uint64
		err  error
	}{
		{"queued", func(it *heItem) [][]uint64 { return [][]uint64{ask(it.terms[0].key)} }, 0, nil},
		{"malformed", func(it *heItem) [][]uint64 {
			return [][]uint64{append([]uint64{heRequest + 1}, it.terms[0].key.words()...)}
		}, heRefuseMalformed, he.ErrMalformed},
		{"field out of range", func(it *heItem) [][]uint64 { return [][]uint64{{heRequest, 1, 1, 5, 1 << 40, 3, 0, 0, 0, 64, 1}} }, heRefuseMalformed, he.ErrMalformed},
		{"twice", func(it *heItem) [][]uint64 { return [][]uint64{ask(it.terms[0].key), ask(it.terms[0].key)} }, heRefuseResent, ErrWeightResent},
		{"too many", func(*heItem) [][]uint64 {
			var out [][]uint64
			for i := range heMaxPending + 1 {
				out = append(out, ask(other(i)))
			}
			return out
		}, heRefuseTooMany, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, it := fresh(t)
			h.need(testSID, it, func(k, n int) []uint64 { return make([]uint64, k*n) })
			reqs := c.reqs(it)
			for i, w := range reqs {
				if ok := h.request(w); ok != (i < len(reqs)-1 || c.code == 0) {
					t.Fatalf("request %d: serving on %v", i, ok)
				}
			}
			if h.refusal != c.code || c.code == 0 && (len(h.queue) != 1 || h.upErr != nil) {
				t.Fatalf("refusal %d (want %d), %d queued, %v", h.refusal, c.code, len(h.queue), h.upErr)
			}
			if c.code != 0 && (h.upErr == nil || c.err != nil && !errors.Is(h.upErr, c.err)) {
				t.Fatalf("service error %v, want one wrapping %v", h.upErr, c.err)
			}
		})
	}
	// Party 1: a refusal names its reason; an encryption it did not ask
	// for is refused.
	h, it := fresh(t)
	refusal := append([]uint64{heRefused, heRefuseResent}, it.terms[0].key.words()...)
	if err := h.replies(testCtx(t), &scriptConn{data: wordsToBytes(refusal), limit: 1}); err == nil || !strings.Contains(err.Error(), "asked again") {
		t.Fatalf("refusal: %v", err)
	}
	upload := append([]uint64{heUpload, 0}, it.terms[0].key.words()...)
	if err := h.replies(testCtx(t), &scriptConn{data: wordsToBytes(upload), limit: 1}); !errors.Is(err, he.ErrMalformed) || !strings.Contains(err.Error(), "not asked for") {
		t.Fatalf("an encryption not asked for: %v", err)
	}
}

package ot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

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
				}
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
// what the protocol says: party 0 the padded encrypted weights once,
// party 1 per item one header word and its padded output.
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
	if s0.BytesSent != 19552+pk || s1.BytesSent != 19552 || s0.BytesRecv != 19552 || s1.BytesRecv != 19552+pk {
		t.Fatalf("setup bytes: party 0 sent %d recv %d, party 1 sent %d recv %d; want 19552+%d public key", s0.BytesSent, s0.BytesRecv, s1.BytesSent, s1.BytesRecv, pk)
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
	// Party 0 sends each encryption of the plan once; party 1 per item one
	// header word per term, the padded outputs and the 32-byte commitment.
	var up, upBytes int64
	item := int64(8*len(it.terms) + 8*heCommitWords)
	for _, tm := range it.terms {
		b := sc.WeightSizes(tm.rows, tm.cols, tm.t.Off, tm.l).Bytes
		up += 8 * int64(wordsFor(b))
		upBytes += b
	}
	for _, b := range it.out {
		item += 8 * int64(wordsFor(b))
	}
	d0, d1 := p0.Stats(), p1.Stats()
	if got := d0.BytesSent - s0.BytesSent; got != up {
		t.Errorf("party 0 sent %d bytes, want the plan's encryptions once, %d", got, up)
	}
	if got := d1.BytesSent - s1.BytesSent; got != streams*item {
		t.Errorf("party 1 sent %d bytes, want %d items × %d (header words, he.OutputSizes %v padded, commitment)", got, streams, item, it.out)
	}
	if d0.BytesRecv-s0.BytesRecv != d1.BytesSent-s1.BytesSent || d1.BytesRecv-s1.BytesRecv != d0.BytesSent-s0.BytesSent {
		t.Error("sent and received bytes do not mirror")
	}
	want := HEStats{Uploads: 1, Projections: 1, UploadBytes: upBytes, Items: streams}
	if st := p0.lat().Stats(); st != want {
		t.Errorf("party 0 HE stats %+v, want %+v", st, want)
	}
	want.Held = 1
	if st := p1.lat().Stats(); st != want {
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
	if st := p1.lat().Stats(); st.Held != 2 || st.Released != 0 {
		t.Fatalf("before: %+v, want 2 held", st)
	}
	var rel beaver.WeightReleaser = p1
	rel.ReleaseWeights(1<<32, 2<<32) // phase 1's ids of epoch 0
	if st := p1.lat().Stats(); st.Held != 1 || st.Released != 1 {
		t.Fatalf("after: %+v, want 1 held and 1 released", st)
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
// ErrWeightResent instead of uploading them again; one that claims to hold
// weights it was never sent makes party 0 fail too.
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
		cancel()
		if err := <-done; err == nil {
			t.Fatal("party 1 succeeded")
		}
		if st := p0.lat().Stats(); st.Uploads != 1 {
			t.Fatalf("party 0 uploaded %d times", st.Uploads)
		}
	})
	t.Run("never sent", func(t *testing.T) {
		p0, p1, _ := heProviders(t)
		ctx := testCtx(t)
		// A party 1 that claims to hold the weights.
		e := &heEntry{done: make(chan struct{}), err: nil}
		close(e.done)
		for _, key := range itemKeys(t, p1, r) {
			p1.lat().cache[key] = e
		}
		ctx1, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := p1.Material(ctx1, r)
			done <- err
		}()
		_, err := p0.Material(ctx, r)
		if err == nil || !strings.Contains(err.Error(), "never sent") {
			t.Fatalf("party 0: %v, want a refusal of weights never sent", err)
		}
		cancel()
		<-done
	})
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

// TestHEProviderView: what party 0 receives of a Lattice item (the header
// words and the message of outputs and commitment, the output's fixed
// 18-byte header left out) looks uniform whatever party 1's A, R and check
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
			if len(m) == wordsFor(it.out[0])+heCommitWords {
				out = m
			}
		}
		if out == nil {
			t.Fatal("no output message received")
		}
		// Skip the header (3 words cover its 18 bytes) and the last word.
		x, n := chiSquareBytes([][]uint64{out[3:]})
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

// FuzzHEPeer plays one Lattice item against a scripted peer whose messages
// are arbitrary bytes (cut at the lengths the request implies, as the
// transport guarantees): party 0 receives a header word and an output
// message, party 1 encrypted weights. Each is refused with an error or
// accepted, never a panic or a hang.
func FuzzHEPeer(f *testing.F) {
	p0, p1, _ := heProviders(f)
	r := beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 5, M: 2, K: 2, N: 3}
	keys := itemKeys(f, p0, r)
	var have, need []byte
	for range keys {
		have = binary.LittleEndian.AppendUint64(have, heHave)
		need = binary.LittleEndian.AppendUint64(need, heNeed)
	}
	f.Add(0, have)
	f.Add(0, append(have, 1))
	f.Add(0, need)
	f.Add(0, append(have[:8], need[8:]...))
	f.Add(1, []byte{})
	f.Add(1, need)
	// A real item's messages: party 0's upload and party 1's outputs.
	{
		pa, pb, rec := heProviders(f)
		drawPair(f, testCtx(f), pa, pb, r)
		var b0, b1 []byte
		for _, m := range rec[0].msgs() {
			b0 = append(b0, wordsToBytes(m)...)
		}
		for _, m := range rec[1].msgs() {
			b1 = append(b1, wordsToBytes(m)...)
		}
		f.Add(0, b1) // what party 0 received: header and outputs
		f.Add(1, b0) // what party 1 received: the public key and uploads
	}
	gid := uint32(1000)
	f.Fuzz(func(t *testing.T, party int, data []byte) {
		p := []*Provider{p0, p1}[party&1]
		p.lat().mu.Lock()
		clear(p.lat().sent)
		clear(p.lat().cache)
		if len(data)%2 == 1 {
			for _, key := range keys {
				p.lat().sent[key] = true // party 0: the header "have" is then valid
			}
		}
		p.lat().mu.Unlock()
		gid++
		g, err := p.sess.NewGen(&scriptConn{data: data, limit: 4}, gid)
		if err != nil {
			t.Fatal(err)
		}
		ps, err := p.lat().Generate(testCtx(t), g, p.item(testSID, r))
		if err == nil && (len(ps) != 2 || len(ps[1]) != r.M*r.N) {
			t.Fatalf("accepted with parts %v", ps)
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

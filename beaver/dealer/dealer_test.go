package dealer

import (
	"context"
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
)

// boundPair returns d's providers of both parties bound to session id.
func boundPair(t *testing.T, d *Dealer, id beaver.SessionID) (beaver.Provider, beaver.Provider) {
	t.Helper()
	var ps [2]beaver.Provider
	for p := range 2 {
		ps[p], _ = d.Provider(p)
	}
	beavertest.BindBoth(t, ps, id)
	return ps[0], ps[1]
}

// checkRelation verifies that the two parties' material of r reconstructs to
// a valid correlation. w0 returns party 0's weight mask for an id and shape.
func checkRelation(r beaver.Request, m [2]beaver.Material, mask func(id uint64, k, n int) []uint64) error {
	add := func(a, b []uint64) []uint64 {
		out := make([]uint64, len(a))
		_ = share.AddVec(out, a, b)
		return out
	}
	xor := func(a, b []uint64) []uint64 {
		out := make([]uint64, len(a))
		for i := range a {
			out[i] = a[i] ^ b[i]
		}
		return out
	}
	p0, p1 := m[0].Parts, m[1].Parts
	switch r.Kind {
	case beaver.KindTriple:
		a, b, c := add(p0[0], p1[0]), add(p0[1], p1[1]), add(p0[2], p1[2])
		for i := range c {
			if c[i] != a[i]*b[i] {
				return fmt.Errorf("triple %d: c != a·b", i)
			}
		}
	case beaver.KindSquare:
		a, s := add(p0[0], p1[0]), add(p0[1], p1[1])
		for i := range s {
			if s[i] != a[i]*a[i] {
				return fmt.Errorf("square %d: a2 != a²", i)
			}
		}
	case beaver.KindSquareProduct:
		a, s, b, c := add(p0[0], p1[0]), add(p0[1], p1[1]), add(p0[2], p1[2]), add(p0[3], p1[3])
		for i := range s {
			if s[i] != a[i]*a[i] || c[i] != a[i]*b[i] {
				return fmt.Errorf("square product %d: a2 != a² or ab != a·b", i)
			}
		}
	case beaver.KindMatTriple:
		a, b, c := add(p0[0], p1[0]), add(p0[1], p1[1]), add(p0[2], p1[2])
		want := make([]uint64, len(c))
		if err := share.BatchMatMulInto(want, a, b, r.Batch, r.M, r.K, r.N); err != nil {
			return err
		}
		if !slices.Equal(c, want) {
			return fmt.Errorf("mat triple: C != A·B")
		}
	case beaver.KindWeightTriple, beaver.KindWeightVectorTriple:
		wantA := r.M * r.K
		if r.Kind == beaver.KindWeightVectorTriple {
			wantA = r.M * r.N
		}
		if p0[0] != nil || len(p1[0]) != wantA {
			return fmt.Errorf("weight triple: party 0 got a mask or party 1's mask has %d words, want %d", len(p1[0]), wantA)
		}
		c := add(p0[1], p1[1])
		want := make([]uint64, len(c))
		if r.Kind == beaver.KindWeightTriple {
			if err := share.MatMulInto(want, p1[0], mask(r.WeightID, r.K, r.N), r.M, r.K, r.N); err != nil {
				return err
			}
		} else {
			b := mask(r.WeightID, 1, r.N)
			for i := range want {
				want[i] = p1[0][i] * b[i%r.N]
			}
		}
		if !slices.Equal(c, want) {
			return fmt.Errorf("%v: C != A·B", r.Kind)
		}
	case beaver.KindAND:
		a, b, c := xor(p0[0], p1[0]), xor(p0[1], p1[1]), xor(p0[2], p1[2])
		for i := range c {
			if c[i] != a[i]&b[i] {
				return fmt.Errorf("and triple %d", i)
			}
		}
	case beaver.KindCrossAND:
		if p0[1] != nil || p1[0] != nil {
			return fmt.Errorf("cross and: party 0 got B or party 1 got A")
		}
		c := xor(p0[2], p1[2])
		for i := range c {
			if c[i] != p0[0][i]&p1[1][i] {
				return fmt.Errorf("cross and %d", i)
			}
		}
	case beaver.KindWrap:
		if p0[1] != nil || p1[0] != nil {
			return fmt.Errorf("wrap: party 0 got V or party 1 got U")
		}
		z := add(p0[2], p1[2])
		for i := range z {
			uv := (p0[0][i/64] & p1[1][i/64]) >> (i % 64) & 1
			if z[i] != uv<<(64-r.FracBits) {
				return fmt.Errorf("wrap pair %d", i)
			}
		}
	case beaver.KindBitPair:
		packed := xor(p0[0], p1[0])
		arith, a, ar := add(p0[1], p1[1]), add(p0[2], p1[2]), add(p0[3], p1[3])
		for i := range arith {
			bit := (packed[i/64] >> (i % 64)) & 1
			if arith[i] != bit || ar[i] != a[i]*bit {
				return fmt.Errorf("bit pair %d", i)
			}
		}
		if r.N%64 != 0 && packed[len(packed)-1]>>(r.N%64) != 0 {
			return fmt.Errorf("bit pair: tail bits set")
		}
	case beaver.KindRowBitTriple:
		if p0[1] != nil || p1[0] != nil {
			return fmt.Errorf("row-bit triple: party 0 got R or party 1 got A")
		}
		c := add(p0[2], p1[2])
		for i := range c {
			bit := p1[1][i/r.N/64] >> (i / r.N % 64) & 1
			if c[i] != p0[0][i]*bit {
				return fmt.Errorf("row-bit triple %d: c != r·a", i)
			}
		}
		if r.M%64 != 0 && p1[1][len(p1[1])-1]>>(r.M%64) != 0 {
			return fmt.Errorf("row-bit triple: tail bits set")
		}
	default:
		return fmt.Errorf("unknown kind %v", r.Kind)
	}
	return nil
}

// randomRequest returns a small random request of a built-in kind on
// stream.
func randomRequest(rng *rand.Rand, stream uint32) beaver.Request {
	kinds := []beaver.Kind{beaver.KindTriple, beaver.KindSquare, beaver.KindSquareProduct, beaver.KindMatTriple, beaver.KindWeightTriple, beaver.KindWeightVectorTriple, beaver.KindAND, beaver.KindCrossAND, beaver.KindWrap, beaver.KindBitPair, beaver.KindRowBitTriple}
	r := beaver.Request{Kind: kinds[rng.IntN(len(kinds))], Stream: stream}
	switch r.Kind {
	case beaver.KindMatTriple:
		r.Batch, r.M, r.K, r.N = 1+rng.IntN(2), 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3)
	case beaver.KindWeightTriple:
		r.WeightID = uint64(rng.IntN(3))
		r.M, r.K, r.N = 1+rng.IntN(3), 2+int(r.WeightID), 3
	case beaver.KindWeightVectorTriple:
		r.WeightID = uint64(10 + rng.IntN(3))
		r.M, r.N = 1+rng.IntN(3), 4
	case beaver.KindWrap:
		r.N = rng.IntN(70)
		r.FracBits = uint(1 + rng.IntN(62))
	case beaver.KindRowBitTriple:
		r.M, r.N = rng.IntN(70), 1+rng.IntN(3)
	default:
		r.N = rng.IntN(5)
	}
	return r
}

func TestDealerAllKinds(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(1)
	d := NewWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	mask := func(id uint64, k, n int) []uint64 {
		m, err := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []beaver.Request{
		{Kind: beaver.KindTriple, N: 100},
		{Kind: beaver.KindTriple, N: 0},
		{Kind: beaver.KindSquare, N: 33},
		{Kind: beaver.KindSquareProduct, N: 33},
		{Kind: beaver.KindSquareProduct, N: 0},
		{Kind: beaver.KindMatTriple, Batch: 3, M: 4, K: 5, N: 6},
		{Kind: beaver.KindWeightTriple, WeightID: 7, M: 9, K: 5, N: 4},
		{Kind: beaver.KindWeightTriple, WeightID: 7, M: 2, K: 5, N: 4},
		{Kind: beaver.KindWeightVectorTriple, WeightID: 8, M: 3, N: 5},
		{Kind: beaver.KindAND, N: 10},
		{Kind: beaver.KindCrossAND, N: 10},
		{Kind: beaver.KindWrap, N: 50, FracBits: 16},
		{Kind: beaver.KindWrap, N: 50, FracBits: 62},
		{Kind: beaver.KindWrap, N: 128, FracBits: 1},
		{Kind: beaver.KindBitPair, N: 100},
		{Kind: beaver.KindBitPair, N: 128},
		{Kind: beaver.KindRowBitTriple, M: 100, N: 3},
		{Kind: beaver.KindRowBitTriple, M: 64, N: 1},
		{Kind: beaver.KindRowBitTriple, M: 0, N: 4},
	}
	for _, r := range tests {
		t.Run(r.String(), func(t *testing.T) {
			m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRelation(r, m, mask); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := (beaver.Typed{Provider: p1}).WeightMask(ctx, 7, 5, 4); err == nil {
		t.Error("party 1 got a weight mask")
	}
	// Each party receives the dealer words of the kinds dealt to it and
	// sends a request for each such item: party 0 those of the weight
	// triples (9·4 + 2·4 words), the weight vector triple (15), the
	// cross-party AND triples (10) and the bit pairs (2·100 + 2·128), 525
	// words in 6 items; party 1 the rest, 279 words in 8, the square
	// products' 2·33 + 0 and the row-bit triples' C1 (100·3 + 64·1 + 0),
	// 709 words in 13.
	var want [2]beaver.DealerStats
	for _, r := range tests {
		for p := range 2 {
			if r.DealtTo(p) {
				want[p].BytesRecv += 8 * int64(r.CorrectionWords(p))
				want[p].BytesSent += beaver.RequestSize
			}
		}
	}
	if want[0].BytesRecv != 8*525 || want[1].BytesRecv != 8*709 || want[0].BytesSent != 6*beaver.RequestSize || want[1].BytesSent != 13*beaver.RequestSize {
		t.Errorf("the kinds' dealer words: %+v", want)
	}
	for p, prov := range []beaver.Provider{p0, p1} {
		want[p].Items = int64(len(tests))
		if st := prov.Stats(); st != want[p] {
			t.Errorf("party %d dealer stats %+v, want %+v", p, st, want[p])
		}
	}
	if ds := d.Stats(); ds.BytesRecv != want[0].BytesRecv+want[1].BytesRecv {
		t.Errorf("dealer sent %d bytes, the parties received %d and %d", ds.BytesRecv, want[0].BytesRecv, want[1].BytesRecv)
	}
}

func TestBadRequests(t *testing.T) {
	ctx := context.Background()
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := d.Provider(1)
	p0, _ := d.Provider(0)
	if _, err := d.Provider(2); err == nil {
		t.Error("provider for party 2")
	}
	tests := []struct {
		name string
		call func() error
	}{
		{"negative n", func() error { _, err := beaver.Typed{Provider: p1}.Triples(ctx, 0, -1); return err }},
		{"huge n", func() error { _, err := beaver.Typed{Provider: p1}.Triples(ctx, 0, beaver.MaxItemWords+1); return err }},
		{"huge matrix", func() error {
			_, err := beaver.Typed{Provider: p1}.MatTriples(ctx, 0, 1<<10, 1<<10, 1<<10, 1)
			return err
		}},
		{"wrap f=0", func() error { _, err := beaver.Typed{Provider: p1}.WrapPairs(ctx, 0, 3, 0); return err }},
		{"wrap f=63", func() error { _, err := beaver.Typed{Provider: p1}.WrapPairs(ctx, 0, 3, 63); return err }},
		{"weight mask party 1", func() error { _, err := beaver.Typed{Provider: p1}.WeightMask(ctx, 1, 2, 2); return err }},
		{"weight mask negative", func() error { _, err := beaver.Typed{Provider: p0}.WeightMask(ctx, 1, -2, 2); return err }},
		{"weight reshaped", func() error { // asked by party 0, which the weight triples are dealt to
			if _, err := (beaver.Typed{Provider: p0}).WeightTriple(ctx, 0, 5, 1, 2, 3); err != nil {
				return nil // first use must succeed: report no error to fail the test
			}
			_, err := beaver.Typed{Provider: p0}.WeightTriple(ctx, 0, 5, 1, 3, 3)
			return err
		}},
		{"canceled", func() error {
			c, cancel := context.WithCancel(ctx)
			cancel()
			_, err := beaver.Typed{Provider: p1}.Triples(c, 0, 1)
			return err
		}},
		{"seek back", func() error {
			if err := p1.Seek(9, 10); err != nil {
				return nil
			}
			return p1.Seek(9, 3)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestSeekPosition(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(2)
	d := NewWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	for range 5 {
		if _, err := (beaver.Typed{Provider: p0}).Triples(ctx, 3, 4); err != nil {
			t.Fatal(err)
		}
	}
	if got := p0.Position(3); got != 5 {
		t.Fatalf("position %d, want 5", got)
	}
	if got := p0.Position(4); got != 0 {
		t.Fatalf("untouched stream at %d", got)
	}
	// Party 1 resumes at 5 (as after a crash): its material matches party 0's
	// sixth item, and a fresh provider seeking to the same place gets the
	// same material again for party 0.
	if err := p1.Seek(3, 5); err != nil {
		t.Fatal(err)
	}
	t0, err := beaver.Typed{Provider: p0}.Triples(ctx, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	t1, err := beaver.Typed{Provider: p1}.Triples(ctx, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	r := beaver.Request{Kind: beaver.KindTriple, N: 4}
	m := [2]beaver.Material{{Kind: beaver.KindTriple, Parts: [][]uint64{t0.A, t0.B, t0.C}}, {Kind: beaver.KindTriple, Parts: [][]uint64{t1.A, t1.B, t1.C}}}
	if err := checkRelation(r, m, nil); err != nil {
		t.Fatal(err)
	}
	q0, _ := d.Provider(0)
	if err := q0.Seek(3, 5); err != nil {
		t.Fatal(err)
	}
	again, _ := beaver.Typed{Provider: q0}.Triples(ctx, 3, 4)
	if !slices.Equal(again.A, t0.A) {
		t.Fatal("seek: different material at the same position")
	}
	// A stale party 1 (position behind the dealer's) is refused reuse.
	q1, _ := d.Provider(1)
	if _, err := (beaver.Typed{Provider: q1}).Triples(ctx, 3, 4); err == nil {
		t.Fatal("dealer served a used counter again")
	}
}

// TestManyConcurrentRequests makes 10^5 mixed small requests on 8 streams
// concurrently and checks every reconstructed correlation.
func TestManyConcurrentRequests(t *testing.T) {
	total := 100_000
	if testing.Short() || raceEnabled {
		total = 10_000
	}
	const streams = 8
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(3)
	d := NewWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	maskOf := func(id uint64, k, n int) []uint64 {
		m, _ := beaver.Typed{Provider: p0}.WeightMask(ctx, id, k, n)
		return m
	}
	var wg sync.WaitGroup
	errs := make([]error, streams)
	for st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(st), 9))
			masks := map[[3]uint64][]uint64{}
			for range total / streams {
				r := randomRequest(rng, uint32(st))
				m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, r)
				if err != nil {
					errs[st] = err
					return
				}
				err = checkRelation(r, m, func(id uint64, k, n int) []uint64 {
					key := [3]uint64{id, uint64(k), uint64(n)}
					if masks[key] == nil {
						masks[key] = maskOf(id, k, n)
					}
					return masks[key]
				})
				if err != nil {
					errs[st] = fmt.Errorf("%v: %w", r, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := p1.Stats().Items; got != int64(total/streams*streams) {
		t.Fatalf("%d items", got)
	}
}

// TestExpandIntoDirtyBuffers checks that the dealer's expansions into
// recycled (dirty) scratch buffers give the words of a fresh expansion: the
// local parts of every kind and a weight mask, and hence valid material
// after scratch buffers of other requests have been reused.
func TestExpandIntoDirtyBuffers(t *testing.T) {
	var seed share.Seed
	seed[0] = 9
	keys := newKeyCache(seed, 1)
	for _, r := range []beaver.Request{
		{Kind: beaver.KindTriple, Stream: 1, Counter: 3, N: 2000},
		{Kind: beaver.KindMatTriple, Stream: 2, Batch: 2, M: 30, K: 20, N: 40},
		{Kind: beaver.KindBitPair, Stream: 3, N: 3000},
		{Kind: beaver.KindWrap, Stream: 4, N: 5000, FracBits: 16},
	} {
		want := expandLocal(keys, r)
		dirty := make([]uint64, localTotal(r, 1))
		for i := range dirty {
			dirty[i] = ^uint64(i)
		}
		got := expandLocalInto(dirty, keys, r)
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%v: part %d expanded into a dirty buffer differs", r, i)
			}
		}
	}
	want := weightMask(seed, 5, 40, 50)
	dirty := make([]uint64, 40*50)
	for i := range dirty {
		dirty[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	if !slices.Equal(weightMaskInto(dirty, seed, 5, 40, 50), want) {
		t.Error("weight mask expanded into a dirty buffer differs")
	}
}

// TestConcurrentSessionsPairByID: one dealer serving several sessions at
// once (a sharded selection's worker pairs) pairs each party's presentation
// with the other party's presentation of the same id, whatever the order of
// arrival: every data-owner presentation first, then the model owner's in
// reverse. (When presentations paired by arrival, each one superseded the
// last and the first model-owner one met a different id.) Each pair's
// material is its own session's: its triples reconstruct.
func TestConcurrentSessionsPairByID(t *testing.T) {
	const sessions = 8
	s0, s1 := beavertest.Seeds(41)
	d := NewWithSeeds(s0, s1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var provs [sessions][2]beaver.Provider
	var errs [sessions][2]error
	var wg sync.WaitGroup
	waiting := func() int {
		d.core.mu.Lock()
		defer d.core.mu.Unlock()
		return len(d.core.waiting)
	}
	for _, p := range []int{1, 0} {
		for j := range sessions {
			i := j
			if p == 0 {
				i = sessions - 1 - j
			}
			provs[i][p], _ = d.Provider(p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i][p] = provs[i][p].BindSession(ctx, beaver.SessionID{0xC0, byte(i)})
			}()
			if p == 1 {
				// Wait until this presentation waits: the order is the test's.
				for waiting() != j+1 {
					if ctx.Err() != nil {
						t.Fatalf("presentation %d of the data owner never waited", j)
					}
					time.Sleep(time.Millisecond)
				}
			}
		}
	}
	wg.Wait()
	for i := range sessions {
		for p := range 2 {
			if errs[i][p] != nil {
				t.Fatalf("session %d, party %d: %v", i, p, errs[i][p])
			}
		}
		var tr [2]beaver.Triple
		for p := range 2 {
			var err error
			if tr[p], err = (beaver.Typed{Provider: provs[i][p]}).Triples(ctx, 1, 4); err != nil {
				t.Fatalf("session %d, party %d: triples: %v", i, p, err)
			}
		}
		for k := range 4 {
			a, b, c := tr[0].A[k]+tr[1].A[k], tr[0].B[k]+tr[1].B[k], tr[0].C[k]+tr[1].C[k]
			if a*b != c {
				t.Fatalf("session %d: triple %d does not reconstruct: the parties were paired across sessions", i, k)
			}
		}
	}
	if n := waiting(); n != 0 {
		t.Fatalf("%d presentations still waiting", n)
	}
}

// TestSupersededPresentation: a party presenting the same session again
// (its reconnection) supersedes its earlier presentation, which is refused;
// the other party's presentation pairs with the newer one.
func TestSupersededPresentation(t *testing.T) {
	s0, s1 := beavertest.Seeds(42)
	d := NewWithSeeds(s0, s1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := beaver.SessionID{0x5E}
	first, _ := d.Provider(1)
	firstErr := make(chan error, 1)
	go func() { firstErr <- first.BindSession(ctx, id) }()
	for {
		d.core.mu.Lock()
		n := len(d.core.waiting)
		d.core.mu.Unlock()
		if n == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the first presentation never waited")
		}
		time.Sleep(time.Millisecond)
	}
	p1, _ := d.Provider(1)
	secondErr := make(chan error, 1)
	go func() { secondErr <- p1.BindSession(ctx, id) }()
	if err := <-firstErr; err == nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "superseded") {
		t.Fatalf("the earlier presentation: %v; want refused as superseded", err)
	}
	p0, _ := d.Provider(0)
	if err := p0.BindSession(ctx, id); err != nil {
		t.Fatalf("party 0: %v", err)
	}
	if err := <-secondErr; err != nil {
		t.Fatalf("the newer presentation: %v", err)
	}
	tr0, err := (beaver.Typed{Provider: p0}).Triples(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	tr1, err := (beaver.Typed{Provider: p1}).Triples(ctx, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if (tr0.A[0]+tr1.A[0])*(tr0.B[0]+tr1.B[0]) != tr0.C[0]+tr1.C[0] {
		t.Fatal("the newer presentation's triple does not reconstruct")
	}
}

// TestDealtWordsPadded: for every built-in kind, the parts the dealt party
// d lays out from its dealer words are padded by the other party's share
// of the same parts, which it expands from its own seed: that share is
// uniform (about half its bits set; a wrap pair's top f bits), so d's
// words, the relation minus that share, say nothing of the other party's
// masks. A kind that handed d the relation itself (the other party's
// share zero, Verify still holding) would let d unmask the other's
// opened values: a party 0 dealt C0 = A·B knows B and would recover A.
func TestDealtWordsPadded(t *testing.T) {
	ctx := context.Background()
	s0, s1 := beavertest.Seeds(48)
	d := NewWithSeeds(s0, s1)
	p0, _ := d.Provider(0)
	p1, _ := d.Provider(1)
	// The parts of each kind that the dealt party's dealer words make.
	for _, tc := range []struct {
		r     beaver.Request
		parts []int
	}{
		{beaver.Request{Kind: beaver.KindTriple, N: 512}, []int{2}},
		{beaver.Request{Kind: beaver.KindSquare, N: 512}, []int{1}},
		{beaver.Request{Kind: beaver.KindSquareProduct, N: 512}, []int{1, 3}},
		{beaver.Request{Kind: beaver.KindWrap, N: 512, FracBits: 16}, []int{2}},
		{beaver.Request{Kind: beaver.KindBitPair, N: 512}, []int{1, 3}},
		{beaver.Request{Kind: beaver.KindMatTriple, Batch: 2, M: 16, K: 3, N: 16}, []int{2}},
		{beaver.Request{Kind: beaver.KindWeightTriple, WeightID: 1, M: 16, K: 3, N: 32}, []int{1}},
		{beaver.Request{Kind: beaver.KindWeightVectorTriple, WeightID: 2, M: 16, N: 32}, []int{1}},
		{beaver.Request{Kind: beaver.KindAND, N: 512}, []int{2}},
		{beaver.Request{Kind: beaver.KindCrossAND, N: 512}, []int{2}},
		{beaver.Request{Kind: beaver.KindRowBitTriple, M: 128, N: 4}, []int{2}},
	} {
		t.Run(tc.r.Kind.String(), func(t *testing.T) {
			m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p0, p1}, tc.r)
			if err != nil {
				t.Fatal(err)
			}
			dealt := 1
			if tc.r.DealtTo(0) {
				dealt = 0
			}
			other := m[1-dealt]
			for _, i := range tc.parts {
				var ones, bits int
				for _, w := range other.Parts[i] {
					if tc.r.Kind == beaver.KindWrap {
						w >>= 64 - tc.r.FracBits // only the top f bits are shared
						bits += int(tc.r.FracBits)
					} else {
						bits += 64
					}
					for ; w != 0; w &= w - 1 {
						ones++
					}
				}
				if frac := float64(ones) / float64(bits); bits < 8192 || frac < 0.45 || frac > 0.55 {
					t.Errorf("%v: the %s's share of part %d (the pad of the %s's dealer words) has %d of %d bits set", tc.r, roleName(1-dealt), i, roleName(dealt), ones, bits)
				}
			}
		})
	}
}

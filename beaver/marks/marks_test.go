package marks

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/testharness/beavertest"
)

// defaultChunk is the marks' chunk with Options.ChunkBits 0.
const defaultChunk = 1 << 16

// markedPair returns both parties' providers of a fresh in-process dealer
// with seeds (s0, s1), each wrapped in a Provider on its file in dir, bound to
// session id: one "process lifetime" of the two parties.
func markedPair(t *testing.T, seed byte, dir string, id beaver.SessionID, opt Options) [2]*Provider {
	t.Helper()
	d := dealer.NewWithSeeds(beavertest.Seeds(seed))
	var out [2]*Provider
	for p := range 2 {
		inner, err := d.Provider(p)
		if err != nil {
			t.Fatal(err)
		}
		if out[p], err = New(inner, filepath.Join(dir, []string{"marks-p0.json", "marks-p1.json"}[p]), opt); err != nil {
			t.Fatal(err)
		}
	}
	beavertest.BindBoth(t, [2]beaver.Provider{out[0], out[1]}, id)
	return out
}

// TestMarkedNeverRedrawsAcrossRestart is the party-side counterpart of
// TestRestartedDealerRefusesServedPositions: a party whose provider expands
// its material locally (the model owner's triples and weight masks, never
// seen by the dealer) keeps a persistent high-water mark per stream and
// for weight ids, so that after a restart (a fresh dealer of the same
// seeds, a fresh provider, the same session) it refuses every position it
// may have drawn — by Seek, by Material at a stale position, by a sequence,
// by a weight mask of an old id — and what it draws above the marks shares
// no word with what it drew before (while a redraw at the old positions,
// without the marks, reproduces it exactly).
func TestMarkedNeverRedrawsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := beaver.SessionID{42}
	const stream, base = 5, 1000
	draw := func(p [2]*Provider) []uint64 {
		var all []uint64
		for _, r := range beavertest.Mix {
			r.Stream = stream
			m, err := beavertest.DrawEach(ctx, [2]beaver.Provider{p[0], p[1]}, r)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, beavertest.Words(m[0])...)
		}
		return all
	}

	first := markedPair(t, 1, dir, id, Options{})
	for _, p := range first {
		if err := p.Seek(stream, base); err != nil {
			t.Fatal(err)
		}
	}
	before := draw(first)
	mask, err := beaver.Typed{Provider: first[0]}.WeightMask(ctx, 7, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	before = append(before, mask...)
	// Within one lifetime: a weight mask once, no seek backwards.
	if _, err := (beaver.Typed{Provider: first[0]}).WeightMask(ctx, 7, 4, 4); !errors.Is(err, ErrReuse) {
		t.Fatalf("second mask of weight 7 in one lifetime: %v", err)
	}
	if err := first[0].Seek(stream, base); err == nil {
		t.Fatal("seek backwards accepted")
	}

	// Restart: a fresh dealer, fresh providers, the same session and files.
	again := markedPair(t, 1, dir, id, Options{})
	p0 := again[0]
	for _, pos := range []uint64{0, base, base + 3} {
		if err := p0.Seek(stream, pos); !errors.Is(err, ErrReuse) {
			t.Errorf("seek to %d below the mark: %v", pos, err)
		}
	}
	if _, err := (beaver.Typed{Provider: p0}).Triples(ctx, stream, 4); !errors.Is(err, ErrReuse) {
		t.Errorf("material at counter 0 of a marked stream: %v", err)
	}
	err = beaver.DrawSequence(ctx, p0, []beaver.Request{{Kind: beaver.KindTriple, Stream: stream, N: 4}}, func(int, beaver.Material) error { return nil })
	if !errors.Is(err, ErrReuse) {
		t.Errorf("sequence at counter 0 of a marked stream: %v", err)
	}
	for _, w := range []uint64{7, 8} { // 8: never drawn, but below the reserved mark
		if _, err := (beaver.Typed{Provider: p0}).WeightMask(ctx, w, 4, 4); !errors.Is(err, ErrReuse) {
			t.Errorf("weight mask %d below the mark: %v", w, err)
		}
	}
	// Above the marks (one defaultChunk): fine, and fresh.
	for _, p := range again {
		if err := p.Seek(stream, defaultChunk); err != nil {
			t.Fatal(err)
		}
	}
	after := draw(again)
	m2, err := beaver.Typed{Provider: p0}.WeightMask(ctx, defaultChunk, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	after = append(after, m2...)
	if s := beavertest.Shared(before, after); len(s) > 0 {
		t.Fatalf("the restarted party drew %d words it drew before", len(s))
	}

	// The comparison catches a redraw: the same positions without the
	// marks reproduce the first lifetime's material.
	d := dealer.NewWithSeeds(beavertest.Seeds(1))
	var raw [2]beaver.Provider
	for p := range raw {
		raw[p], _ = d.Provider(p)
	}
	beavertest.BindBoth(t, raw, id)
	for _, p := range raw {
		if err := p.Seek(stream, base); err != nil {
			t.Fatal(err)
		}
	}
	var redraw []uint64
	for _, r := range beavertest.Mix {
		r.Stream = stream
		m, err := beavertest.DrawEach(ctx, raw, r)
		if err != nil {
			t.Fatal(err)
		}
		redraw = append(redraw, beavertest.Words(m[0])...)
	}
	if s := beavertest.Shared(before, redraw); len(s) != len(redraw) {
		t.Fatalf("an unmarked redraw reproduced %d of %d words", len(s), len(redraw))
	}
}

// TestMarkedReservesBeforeDrawing: the mark on disk covers an item before
// the wrapped provider draws it, in chunks of 2^ChunkBits (so a provider
// that crashes right after drawing has it covered), and a sequence
// reserves its whole length.
func TestMarkedReservesBeforeDrawing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	id := beaver.SessionID{9}
	p := markedPair(t, 2, dir, id, Options{ChunkBits: 4})
	var seen [2]uint64
	probe := &probeProvider{Provider: p[0].Provider, before: func() {
		f, err := loadMarkFile(filepath.Join(dir, "marks-p0.json"))
		if err != nil || f == nil {
			t.Errorf("no mark file before the draw: %v", err)
			return
		}
		seen[0], seen[1] = f.sessions[id].marks[3], f.sessions[id].weights
	}}
	p[0].Provider = probe
	if _, err := (beaver.Typed{Provider: p[0]}).Triples(ctx, 3, 1); err != nil {
		t.Fatal(err)
	}
	if seen[0] != 16 {
		t.Fatalf("mark of stream 3 before drawing counter 0: %d, want 16", seen[0])
	}
	if err := p[0].Seek(3, 30); err != nil {
		t.Fatal(err)
	}
	rs := make([]beaver.Request, 5)
	for i := range rs {
		rs[i] = beaver.Request{Kind: beaver.KindTriple, Stream: 3, N: 1}
	}
	if err := beaver.DrawSequence(ctx, p[0], rs, func(int, beaver.Material) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if seen[0] != 48 { // counters 30..34 → rounded up past 34
		t.Fatalf("mark of stream 3 before a sequence at 30..34: %d, want 48", seen[0])
	}
	if _, err := (beaver.Typed{Provider: p[0]}).WeightMask(ctx, 33, 2, 2); err != nil {
		t.Fatal(err)
	}
	if seen[1] != 48 {
		t.Fatalf("weight mark before handing out weight 33: %d, want 48", seen[1])
	}
}

// probeProvider calls before ahead of every draw.
type probeProvider struct {
	beaver.Provider
	before func()
}

// Unwrap implements beaver.Wrapper.
func (p *probeProvider) Unwrap() beaver.Provider { return p.Provider }

func (p *probeProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	p.before()
	return p.Provider.Material(ctx, r)
}

func (p *probeProvider) WeightMask(ctx context.Context, id uint64, k, n int) ([]uint64, error) {
	p.before()
	return p.Provider.WeightMask(ctx, id, k, n)
}

func TestMarkedErrors(t *testing.T) {
	ctx := context.Background()
	d := dealer.NewWithSeeds(beavertest.Seeds(3))
	p0, _ := d.Provider(0)
	if _, err := New(nil, "", Options{}); err == nil {
		t.Error("nil provider accepted")
	}
	if _, err := New(p0, "", Options{ChunkBits: 64}); err == nil {
		t.Error("chunk of 2^64 accepted")
	}
	m, err := New(p0, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (beaver.Typed{Provider: m}).Triples(ctx, 1, 1); err == nil {
		t.Error("material drawn without a session")
	}
	if _, err := (beaver.Typed{Provider: m}).WeightMask(ctx, 1, 1, 1); err == nil {
		t.Error("weight mask drawn without a session")
	}
	if err := m.BindSession(ctx, beaver.SessionID{}); err == nil {
		t.Error("zero session id accepted")
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "marks.json")
	p1, _ := d.Provider(1)
	m1, err := New(p1, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m1.mu.Lock()
	m1.sess = &markedSession{id: beaver.SessionID{1}, rec: &markRecord{marks: map[uint32]uint64{}}}
	if err := m1.saveLocked(m1.sess); err != nil {
		t.Fatal(err)
	}
	m1.mu.Unlock()
	if _, err := New(p0, path, Options{}); !errors.Is(err, ErrBadFile) {
		t.Errorf("party 1's file for party 0: %v", err)
	}
	for name, content := range map[string]string{
		"garbage":         "{",
		"version":         `{"version":2,"party":0,"sessions":[]}`,
		"zero id":         `{"version":1,"party":0,"sessions":[{"id":"` + beaver.SessionID{}.String() + `","marks":{},"weights":0}]}`,
		"unknown field":   `{"version":1,"party":0,"sessions":[],"x":1}`,
		"trailing":        `{"version":1,"party":0,"sessions":[]}{}`,
		"negative mark":   `{"version":1,"party":0,"sessions":[{"id":"` + beaver.SessionID{1}.String() + `","marks":{"1":-1},"weights":0}]}`,
		"duplicate id":    `{"version":1,"party":0,"sessions":[{"id":"` + beaver.SessionID{1}.String() + `"},{"id":"` + beaver.SessionID{1}.String() + `"}]}`,
		"party 2":         `{"version":1,"party":2,"sessions":[]}`,
		"overflowed mark": `{"version":1,"party":0,"sessions":[{"id":"` + beaver.SessionID{1}.String() + `","marks":{"1":18446744073709551616}}]}`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := New(p0, path, Options{}); !errors.Is(err, ErrBadFile) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeMarkFile(f *testing.F) {
	mf := &markFile{party: 1, sessions: map[beaver.SessionID]*markRecord{
		{1}: {marks: map[uint32]uint64{2: defaultChunk, 16: 1 << 41}, weights: 3 << 40},
		{2}: {marks: map[uint32]uint64{}},
	}}
	b, err := mf.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"version":1,"party":0,"sessions":[]}`))
	f.Add([]byte(`{"version":1,"party":0,"sessions":null}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		mf, err := decodeMarkFile(b)
		if err != nil {
			if !errors.Is(err, ErrBadFile) {
				t.Fatalf("error %v does not wrap ErrBadFile", err)
			}
			return
		}
		e, err := mf.encode()
		if err != nil {
			t.Fatal(err)
		}
		mf2, err := decodeMarkFile(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, _ := mf2.encode()
		if !bytes.Equal(e, e2) {
			t.Fatalf("round trip: %s != %s", e, e2)
		}
	})
}

// releasing is a provider that records ReleaseWeights calls.
type releasing struct {
	beaver.Provider
	calls [][2]uint64
}

// Unwrap implements beaver.Wrapper.
func (r *releasing) Unwrap() beaver.Provider { return r.Provider }

func (r *releasing) ReleaseWeights(lo, hi uint64) { r.calls = append(r.calls, [2]uint64{lo, hi}) }

// TestMarkedReleasesWeights: selection finds the wrapped provider's
// ReleaseWeights through the marks (beaver.As, as it releases each phase's
// weights), and finds none where the wrapped provider holds no weights.
func TestMarkedReleasesWeights(t *testing.T) {
	d, err := dealer.New()
	if err != nil {
		t.Fatal(err)
	}
	p0, _ := d.Provider(0)
	inner := &releasing{Provider: p0}
	m, err := New(inner, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	wr, ok := beaver.As[beaver.WeightReleaser](beaver.Typed{Provider: m})
	if !ok {
		t.Fatal("the wrapped provider's ReleaseWeights is not found through the marks")
	}
	wr.ReleaseWeights(3, 9)
	if len(inner.calls) != 1 || inner.calls[0] != [2]uint64{3, 9} {
		t.Fatalf("wrapped provider saw %v, want [[3 9]]", inner.calls)
	}
	plain, err := New(p0, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := beaver.As[beaver.WeightReleaser](plain); ok {
		t.Fatal("a dealer provider holds no weights, but a WeightReleaser was found")
	}
}

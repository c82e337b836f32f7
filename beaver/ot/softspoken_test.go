package ot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// The k of every SoftSpokenOT test: IKNP (1), the divisors of 128 and two
// that leave a short last tree (3: 42 trees of 3 and one of 2; 5, 6).
var testKs = []int{1, 2, 3, 4, 5, 6, 8}

// fakePair returns two sessions with SoftSpokenOT's k whose base OTs are
// consistent, as Setup would leave them (seeds drawn from rng), without
// running the base OTs.
func fakePair(t testing.TB, k int, rng *rand.Rand) (s0, s1 *Session) {
	t.Helper()
	ext, err := newSpoken(k)
	if err != nil {
		t.Fatal(err)
	}
	var key [16]byte
	for i := range key {
		key[i] = byte(rng.Uint32())
	}
	ss := [2]*Session{}
	for p := range ss {
		ss[p] = &Session{party: p, sid: testSID, ext: ext, gens: make(map[uint32]bool),
			pi: newFixedAES(key), prg: newFixedAES([16]byte{key[0] ^ 1}),
			delta: Block{rng.Uint64(), rng.Uint64()}}
	}
	for p, s := range ss { // p is the extension sender, 1−p the receiver
		r := ss[1-p]
		for i := range baseCount {
			for c := range 2 {
				for j := range seedLen {
					r.recvSeeds[i][c][j] = byte(rng.Uint32())
				}
			}
			s.sendSeeds[i] = r.recvSeeds[i][bitOf(s.delta, i)]
		}
	}
	return ss[0], ss[1]
}

// fakeGens returns the two parties' generators with id on a fresh pipe.
func fakeGens(t testing.TB, s0, s1 *Session, id uint32) (g0, g1 *Gen, r0, r1 *recConn) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
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

// checkDelta checks T = Q ⊕ choice·Δ for every OT of one call.
func checkDelta(t *testing.T, s, r DeltaOT, n int) {
	t.Helper()
	if err := deltaErr(s, r, n); err != nil {
		t.Fatal(err)
	}
}

func deltaErr(s, r DeltaOT, n int) error {
	if len(s.Q) != n || len(r.T) != n || len(r.Choices) != (n+63)/64 {
		return fmt.Errorf("lengths %d %d %d for n = %d", len(s.Q), len(r.T), len(r.Choices), n)
	}
	for j := range n {
		want := s.Q[j]
		if r.Choices[j/64]>>(j%64)&1 == 1 {
			want = want.xor(s.Delta)
		}
		if r.T[j] != want {
			return fmt.Errorf("n=%d OT %d: T ≠ Q ⊕ c·Δ", n, j)
		}
	}
	return nil
}

// TestSoftSpokenCorrelation checks q_j = t_j ⊕ r_j·Δ for every k, both
// directions, sizes around the 128-OT blocks and across calls (the first
// call grows the trees, later ones reuse them at later counters), and
// Gilboa products cut into many chunks (corrections pipelined with the next
// chunk's matrix).
func TestSoftSpokenCorrelation(t *testing.T) {
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(1, uint64(len(testKs))))
	for _, k := range testKs {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			s0, s1 := fakePair(t, k, rng)
			g0, g1, _, _ := fakeGens(t, s0, s1, 3)
			gens := [2]*Gen{g0, g1}
			for _, n := range []int{1, 127, 128, 129, 1000, 3*128 + 5, 4096} {
				for sender := range 2 {
					d0, d1 := both(t,
						func() (DeltaOT, error) { return gens[0].DeltaOTs(ctx, n, sender) },
						func() (DeltaOT, error) { return gens[1].DeltaOTs(ctx, n, sender) })
					checkDelta(t, [2]DeltaOT{d0, d1}[sender], [2]DeltaOT{d0, d1}[1-sender], n)
				}
			}
			old := chunkTarget
			chunkTarget = 1024 // two groups of 64 products' OTs per chunk
			defer func() { chunkTarget = old }()
			n := 333
			t0, t1 := both(t, func() (beaver.Triple, error) { return g0.Triples(ctx, n) },
				func() (beaver.Triple, error) { return g1.Triples(ctx, n) })
			a, b, c := add(t0.A, t1.A), add(t0.B, t1.B), add(t0.C, t1.C)
			for i := range n {
				if c[i] != a[i]*b[i] {
					t.Fatalf("triple %d: c ≠ a·b", i)
				}
			}
		})
	}
}

// TestSoftSpokenParallelStreams runs generators of one session on several
// streams at once (run it with -race): each stream's OTs are correct, and
// streams get independent trees (no two generators' first messages share a
// tree block).
func TestSoftSpokenParallelStreams(t *testing.T) {
	ctx := testCtx(t)
	s0, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(2, 2)))
	const streams, calls = 4, 3
	size := func(st, it int) int { return 1000 + 300*st + it }
	var out [streams][calls][2]DeltaOT
	var errs [streams][2]error
	var recs [streams]*recConn
	var wg sync.WaitGroup
	for st := range streams {
		g0, g1, _, r1 := fakeGens(t, s0, s1, uint32(10+st))
		recs[st] = r1
		for p, g := range []*Gen{g0, g1} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := range calls {
					d, err := g.DeltaOTs(ctx, size(st, it), 0)
					if err != nil {
						errs[st][p] = err
						return
					}
					out[st][it][p] = d
				}
			}()
		}
	}
	wg.Wait()
	seen := map[Block]int{}
	for st := range streams {
		if err := errors.Join(errs[st][0], errs[st][1]); err != nil {
			t.Fatalf("stream %d: %v", st, err)
		}
		for it := range calls {
			if err := deltaErr(out[st][it][0], out[st][it][1], size(st, it)); err != nil {
				t.Fatalf("stream %d call %d: %v", st, it, err)
			}
		}
		f := recs[st].sent[:treeWords]
		for i := 0; i < len(f); i += 2 {
			b := Block{f[i], f[i+1]}
			if o, ok := seen[b]; ok {
				t.Fatalf("streams %d and %d share a tree-message block", o, st)
			}
			seen[b] = st
		}
	}
}

// TestPuncturedTrees checks the punctured PRF: the sender rebuilds every
// leaf but the one at its Δ bits α_b, in its order (slot y holds leaf
// y⊕α_b, slot 0 is zero), for every k; a wrong seed or generator id makes
// another tree.
func TestPuncturedTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, k := range testKs {
		s0, s1 := fakePair(t, k, rng)
		p := s0.ext
		roots := make([]Block, p.trees())
		for b := range roots {
			roots[b] = Block{rng.Uint64(), rng.Uint64()}
		}
		full, msg := p.growTrees(s1.prg, roots, &s1.recvSeeds, 7)
		got := p.puncture(s0.prg, msg, &s0.sendSeeds, s0.delta, 7)
		for b := range p.sizes {
			alpha := p.alpha(s0.delta, b)
			L := p.leafOff[b+1] - p.leafOff[b]
			fb, gb := full[p.leafOff[b]:p.leafOff[b+1]], got[p.leafOff[b]:p.leafOff[b+1]]
			if gb[0] != (Block{}) || fb[alpha] == (Block{}) {
				t.Fatalf("k=%d tree %d: punctured slot %v, leaf %v", k, b, gb[0], fb[alpha])
			}
			for y := 1; y < L; y++ {
				if gb[y] != fb[y^alpha] {
					t.Fatalf("k=%d tree %d: sender's slot %d ≠ leaf %d", k, b, y, y^alpha)
				}
			}
		}
		if other := p.puncture(s0.prg, msg, &s0.sendSeeds, s0.delta, 8); other[1] == got[1] {
			t.Fatalf("k=%d: another generator id opened the same tree", k)
		}
	}
}

// TestExtensionCost pins the extension's bytes per OT from its formula
// (matrixWords: one bit per tree) and the words a generator's calls send:
// the trees once per direction, then the corrections alone, each call's
// with the consistency check's (kos.go): 256 more OTs' corrections (1,024
// bytes at k = 4) and x, t (32 bytes).
func TestExtensionCost(t *testing.T) {
	for _, c := range []struct {
		k, trees, bytesPer128 int
	}{{1, 128, 2048}, {2, 64, 1024}, {4, 32, 512}, {5, 26, 416}, {6, 22, 352}, {8, 16, 256}} {
		p := mustSpoken(c.k)
		if p.trees() != c.trees || 8*p.matrixWords(128) != c.bytesPer128 {
			t.Errorf("k=%d: %d trees, %d bytes per 128 OTs; want %d, %d", c.k, p.trees(), 8*p.matrixWords(128), c.trees, c.bytesPer128)
		}
	}
	if p := mustSpoken(spokenK); 8*p.callWords(128, false) != 4*(128+256)+32 || p.callWords(0, true) != 0 {
		t.Fatalf("a call of 128 OTs sends %d bytes, want 4·(128+256)+32; an empty call %d words", 8*p.callWords(128, false), p.callWords(0, true))
	}
	if spokenK != 4 || 8*mustSpoken(spokenK).matrixWords(128) != 4*128 {
		t.Fatalf("spokenK = %d: the figures of doc.go and bench/TWOHOSTS.md say 4 bytes per OT at k = 4", spokenK)
	}
	ctx := testCtx(t)
	s0, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(5, 5)))
	g0, g1, _, _ := fakeGens(t, s0, s1, 6)
	var sent int64
	for call := range 2 {
		both(t, func() (DeltaOT, error) { return g0.DeltaOTs(ctx, 2000, 1) },
			func() (DeltaOT, error) { return g1.DeltaOTs(ctx, 2000, 1) })
		want := int64((2048+256)*4/8 + 4) // 2,000 OTs padded to 2,048, 256 for the check, 4 bytes each; x and t
		if call == 0 {
			want += treeWords
		}
		if got := g0.Stats().WordsSent - sent; got != want || g1.Stats().WordsSent != 0 {
			t.Fatalf("call %d: receiver sent %d words, want %d; sender %d, want 0", call, got, want, g1.Stats().WordsSent)
		}
		if st := g0.Stats(); st.ExtensionWords != st.WordsSent {
			t.Fatalf("call %d: the receiver's %d words are all extension, counted %d", call, st.WordsSent, st.ExtensionWords)
		}
		sent = g0.Stats().WordsSent
	}
}

// TestSetupExtensionMismatch: parties that run different extensions fail
// Setup with ErrModeMismatch naming them, and so does a peer of a version
// before SoftSpokenOT (IKNP), whose configuration block was the weight-mask
// generator's bare fingerprint (which the old version compared as a whole,
// so it fails too).
func TestSetupExtensionMismatch(t *testing.T) {
	ctx := testCtx(t)
	run := func(k0, k1 int) [2]error {
		c0, c1 := transport.Pipe(transport.Options{})
		defer c0.Close()
		defer c1.Close()
		var errs [2]error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[1] = setupK(ctx, c1.Stream(1), 1, testSID, VectorOLE{}.Fingerprint(), k1)
		}()
		_, errs[0] = setupK(ctx, c0.Stream(1), 0, testSID, VectorOLE{}.Fingerprint(), k0)
		wg.Wait()
		return errs
	}
	for p, err := range run(4, 8) {
		if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "OT extension SoftSpokenOT k=") {
			t.Errorf("party %d: %v, want ErrModeMismatch naming the extensions", p, err)
		}
	}
	// An IKNP peer's first message: sid ‖ VectorOLE's fingerprint ‖ nonce ‖ A.
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	go func() {
		old := append(append(testSID[:len(testSID):len(testSID)], make([]byte, setupConfigLen+setupNonceLen)...), make([]byte, baseMsgALen)...)
		c1.Stream(1).Exchange(ctx, bytesToWords(old), make([]uint64, msgAWords))
	}()
	if _, err := Setup(ctx, c0.Stream(1), 0, testSID); !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "IKNP") {
		t.Errorf("against an IKNP peer: %v, want ErrModeMismatch naming IKNP", err)
	}
	// A peer of the version before the consistency check: SoftSpokenOT at
	// the same k, configuration byte 0x80 | k.
	c2, c3 := transport.Pipe(transport.Options{})
	defer c2.Close()
	defer c3.Close()
	go func() {
		cfg := setupConfigID(VectorOLE{}.Fingerprint(), spokenUnchecked|spokenK)
		old := append(append(append(testSID[:len(testSID):len(testSID)], cfg[:]...), make([]byte, setupNonceLen)...), make([]byte, baseMsgALen)...)
		c3.Stream(1).Exchange(ctx, bytesToWords(old), make([]uint64, msgAWords))
	}()
	if _, err := Setup(ctx, c2.Stream(1), 0, testSID); !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "k=4 without the consistency check") {
		t.Errorf("against a peer without the check: %v, want ErrModeMismatch naming it", err)
	}
	ext := mustSpoken(spokenK)
	if extensionName(ext.id()) != "SoftSpokenOT k=4 with the consistency check" || extensionName(0x84) == extensionName(ext.id()) || extensionName(0xff) != "unknown (0xff)" {
		t.Errorf("extension names: %q, %q, %q", extensionName(ext.id()), extensionName(0x84), extensionName(0xff))
	}
	for _, fp := range [][32]byte{VectorOLE{}.Fingerprint(), {wayLattice, 1, 2, 3}} {
		if setupConfig(fp, ext) == fp {
			t.Errorf("configuration of %x equals the IKNP version's", fp[:4])
		}
	}
}

// FuzzPuncture rebuilds the sender's trees from arbitrary tree messages,
// Δ and k: any message is accepted (every word string is a valid one),
// never a panic, and the punctured slots stay zero.
func FuzzPuncture(f *testing.F) {
	f.Add(uint8(4), uint64(0), uint64(0), []byte{1, 2, 3})
	f.Add(uint8(8), ^uint64(0), uint64(5), []byte{})
	f.Add(uint8(5), uint64(7), ^uint64(0), []byte{0xff, 0})
	f.Fuzz(func(t *testing.T, k uint8, dlo, dhi uint64, data []byte) {
		p, err := newSpoken(int(k%maxSpokenK) + 1)
		if err != nil {
			t.Fatal(err)
		}
		sc := &scriptConn{data: data, limit: 1}
		msg := make([]uint64, treeWords)
		if err := sc.fill(msg); err != nil {
			t.Fatal(err)
		}
		var seeds [baseCount][seedLen]byte
		for i := range seeds {
			seeds[i][0] = byte(i)
		}
		leaves := p.puncture(newFixedAES([16]byte{9}), msg, &seeds, Block{dlo, dhi}, 1)
		for b := range p.sizes {
			if leaves[p.leafOff[b]] != (Block{}) {
				t.Fatalf("tree %d: punctured slot set", b)
			}
		}
	})
}

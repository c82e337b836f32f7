package ot

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/share"
)

// ferretTiny is the smallest sets the tests use: no setup, and a setup
// (16 trees of 2^5 into the main reserve) then the main set.
var (
	ferretTinyMain  = ferretParams{n: 1024, k: 200, t: 16, logBin: 6}
	ferretTinySetup = ferretParams{n: 512, k: 100, t: 16, logBin: 5}
	// ferretMedium is n = 2^18 with a setup set, for one larger run.
	ferretMedium = ferretConfig{
		setup: ferretParams{n: 20480, k: 2048, t: 40, logBin: 9},
		main:  ferretParams{n: 1 << 18, k: 16384, t: 64, logBin: 12},
	}
)

// ferretTestKeys returns public keys of a test instance.
func ferretTestKeys(tag byte) ferretKeys {
	return ferretKeys{
		prg:  newFixedAES([16]byte{0xf0, tag}),
		hash: newFixedAES([16]byte{0xf1, tag}),
		gen:  7,
		code: share.Seed{0xf2, tag},
	}
}

// ferretTestBase draws n base Δ-OTs: random Δ, Q and choices, T = Q ⊕
// choice·Δ; the sender's and the receiver's parts.
func ferretTestBase(n int, seed byte) (snd, rcv DeltaOT) {
	prg := share.NewPRG(share.Seed{0xb0, seed}, "ferret-test-base")
	var d [1]Block
	fillBlocks(prg, d[:])
	q := make([]Block, n)
	fillBlocks(prg, q)
	u := prg.Words(share.PackedWords(n))
	share.MaskTail(u, n)
	return DeltaOT{Delta: d[0], Q: q}, DeltaOT{Choices: u, T: cotT(d[0], q, u)}
}

// cotT returns T[j] = Q[j] ⊕ u_j·Δ.
func cotT(delta Block, q []Block, u []uint64) []Block {
	t := make([]Block, len(q))
	for j := range q {
		t[j] = q[j]
		if u[j>>6]>>(j&63)&1 == 1 {
			t[j] = t[j].xor(delta)
		}
	}
	return t
}

// ferretPipe is one party's end of an in-memory connection: it counts
// what it sends and refuses a received message over the bound.
type ferretPipe struct {
	out         chan<- []uint64
	in          <-chan []uint64
	words, msgs int
}

func ferretPipes() (a, b *ferretPipe) {
	x, y := make(chan []uint64, 4), make(chan []uint64, 4)
	return &ferretPipe{out: x, in: y}, &ferretPipe{out: y, in: x}
}

func (p *ferretPipe) send(ctx context.Context, msg []uint64) error {
	p.words += len(msg)
	p.msgs++
	select {
	case p.out <- append([]uint64(nil), msg...):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *ferretPipe) recv(ctx context.Context, maxWords int) ([]uint64, error) {
	select {
	case m := <-p.in:
		if len(m) > maxWords {
			return nil, fmt.Errorf("message of %d words over its bound of %d", len(m), maxWords)
		}
		return m, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func ferretCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// ferretPair starts both parties of cfg on fresh base COTs.
func ferretPair(t testing.TB, cfg ferretConfig, tag byte) (*ferretSender, *ferretReceiver) {
	t.Helper()
	bs, br := ferretTestBase(cfg.baseCOTs(), tag)
	keys := ferretTestKeys(tag)
	s, err := newFerretSender(cfg, keys, bs, share.Seed{0x50, tag})
	if err != nil {
		t.Fatal(err)
	}
	r, err := newFerretReceiver(cfg, keys, br, share.Seed{0x52, tag})
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// ferretOutput is one iteration's outputs of both parties.
type ferretOutput struct {
	q, tr []Block
	x     []uint64
}

// ferretRun runs one iteration of both parties over ps (sender) and pr.
func ferretRun(ctx context.Context, s *ferretSender, r *ferretReceiver, ps, pr ferretConn) (ferretOutput, error, error) {
	var out ferretOutput
	var errS error
	done := make(chan struct{})
	go func() {
		defer close(done)
		out.q, errS = s.extend(ctx, ps)
	}()
	var errR error
	out.x, out.tr, errR = r.extend(ctx, pr)
	<-done
	return out, errS, errR
}

// checkCOTs fails unless tr[j] = q[j] ⊕ x_j·Δ for every j.
func checkCOTs(t testing.TB, delta Block, o ferretOutput) {
	t.Helper()
	if len(o.q) != len(o.tr) || len(o.x) != share.PackedWords(len(o.q)) {
		t.Fatalf("lengths: q %d, t %d, choice words %d", len(o.q), len(o.tr), len(o.x))
	}
	want := cotT(delta, o.q, o.x)
	bad := 0
	for j := range want {
		if want[j] != o.tr[j] {
			bad++
		}
	}
	if bad != 0 {
		t.Fatalf("%d of %d COTs break T = Q ⊕ x·Δ", bad, len(want))
	}
}

func TestFerretParams(t *testing.T) {
	for _, c := range []struct {
		name string
		p    ferretParams
		ok   bool
	}{
		{"main", ferretMain, true},
		{"setup", ferretSetup, true},
		{"tiny", ferretTinyMain, true},
		{"n not t·2^h", ferretParams{n: 1000, k: 100, t: 16, logBin: 6}, false},
		{"k ≥ n", ferretParams{n: 1024, k: 1024, t: 16, logBin: 6}, false},
		{"k < d", ferretParams{n: 1024, k: ferretCodeWeight - 1, t: 16, logBin: 6}, false},
		{"reserve ≥ n", ferretParams{n: 1024, k: 1000, t: 16, logBin: 6}, false},
		{"no bins", ferretParams{n: 0, k: 10, t: 0, logBin: 6}, false},
		{"depth 0", ferretParams{n: 16, k: 10, t: 16, logBin: 0}, false},
	} {
		if err := c.p.check(); (err == nil) != c.ok {
			t.Errorf("%s: check() = %v, want ok %v", c.name, err, c.ok)
		}
	}
	if err := ferretB13.check(); err != nil {
		t.Fatal(err)
	}
	// The setup's output must cover the main reserve.
	if err := (ferretConfig{setup: ferretTinySetup, main: ferretParams{n: 4096, k: 600, t: 64, logBin: 6}}).check(); err == nil {
		t.Error("a setup that cannot fill the main reserve passed")
	}
	if got, want := ferretMain.reserve(), 452_000+1_280*13+ferretCheckOTs; got != want {
		t.Errorf("main reserve %d, want %d", got, want)
	}
	if got, want := ferretB13.baseCOTs(), 32_768+918*9+ferretCheckOTs; got != want {
		t.Errorf("base COTs %d, want %d", got, want)
	}
}

// spcotOnce runs a batch of SPCOTs in process and returns the sender's
// leaves, the receiver's and the reply.
func spcotOnce(p ferretParams, delta Block, alpha []int, roots []Block, seed byte) (v, w []Block, reply []uint64, err error) {
	_, br := ferretTestBase(p.treeOTs(), seed)
	q := cotT(delta, br.T, br.Choices) // Q = T ⊕ u·Δ: the receiver's side fixed
	keys := ferretTestKeys(seed)
	v = make([]Block, p.n)
	sp := growSPCOT(p, newFerretTrees(keys.prg, p.logBin), v, roots)
	sr, d := newSPCOTReceiver(p, alpha, br.Choices, br.T)
	d, err = decodeSPCOTBits(p, d)
	if err != nil {
		return nil, nil, nil, err
	}
	reply = sp.reply(newHasher(keys.hash, keys.gen), delta, q, d, 99)
	sums, corr, err := decodeSPCOTReply(p, reply)
	if err != nil {
		return nil, nil, nil, err
	}
	w = make([]Block, p.n)
	sr.finish(newFerretTrees(keys.prg, p.logBin), newHasher(keys.hash, keys.gen), w, sums, corr, 99)
	return v, w, reply, nil
}

func TestFerretSPCOT(t *testing.T) {
	delta := Block{0x0123456789abcdef, 0xfedcba9876543210}
	check := func(p ferretParams, alpha []int, v, w []Block) {
		t.Helper()
		for j := range v {
			want := v[j]
			if j%p.bin() == alpha[j/p.bin()] {
				want = want.xor(delta)
			}
			if w[j] != want {
				t.Fatalf("h=%d α=%v: leaf %d: w = %v, want %v", p.logBin, alpha, j, w[j], want)
			}
		}
	}
	// Exhaustive: one tree, every depth 1…6, every point.
	for h := 1; h <= 6; h++ {
		p := ferretParams{n: 1 << h, t: 1, logBin: h}
		for a := range 1 << h {
			roots := []Block{{uint64(a), uint64(h)}}
			v, w, _, err := spcotOnce(p, delta, []int{a}, roots, byte(h))
			if err != nil {
				t.Fatal(err)
			}
			check(p, []int{a}, v, w)
		}
	}
	// A batch of trees with points of every kind.
	p := ferretParams{n: 7 << 5, t: 7, logBin: 5}
	alpha := []int{0, 31, 1, 30, 16, 15, 9}
	roots := make([]Block, p.t)
	fillBlocks(share.NewPRG(share.Seed{1}, "roots"), roots)
	v, w, _, err := spcotOnce(p, delta, alpha, roots, 3)
	if err != nil {
		t.Fatal(err)
	}
	check(p, alpha, v, w)
}

// TestFerretSPCOTView: the receiver's view of the sender. With the
// receiver's inputs fixed, its leaves off the points do not depend on Δ,
// while every block the sender sends does; and no block sent is Δ, a
// leaf, or a leaf ⊕ Δ.
func TestFerretSPCOTView(t *testing.T) {
	p := ferretParams{n: 4 << 6, t: 4, logBin: 6}
	alpha := []int{5, 63, 0, 32}
	roots := []Block{{1, 2}, {3, 4}, {5, 6}, {7, 8}}
	d1, d2 := Block{11, 12}, Block{13, 14}
	v1, w1, m1, err := spcotOnce(p, d1, alpha, roots, 9)
	if err != nil {
		t.Fatal(err)
	}
	_, w2, m2, err := spcotOnce(p, d2, alpha, roots, 9)
	if err != nil {
		t.Fatal(err)
	}
	roots2 := []Block{{1, 2}, {3, 4}, {5, 6}, {7, 9}}
	_, _, m3, err := spcotOnce(p, d1, alpha, roots2, 9)
	if err != nil {
		t.Fatal(err)
	}
	for j := range w1 {
		onPoint := j%p.bin() == alpha[j/p.bin()]
		if (w1[j] == w2[j]) == onPoint {
			t.Fatalf("leaf %d (point %v): outputs under two Δ equal: %v", j, onPoint, w1[j] == w2[j])
		}
	}
	// Per level, the sum the receiver chose (¬α_l) is masked by H(T),
	// which Δ does not change, so it is the same block; the other sum is
	// masked by a hash of T ⊕ Δ and changes with Δ, as do the corrections.
	h := p.logBin
	blk := func(m []uint64, i int) Block { return Block{m[2*i], m[2*i+1]} }
	for b, a := range alpha {
		for l := 1; l <= h; l++ {
			i := b*h + l - 1
			c := 1 - a>>(h-l)&1
			if blk(m1, 2*i+c) != blk(m2, 2*i+c) {
				t.Errorf("tree %d level %d: the chosen sum depends on Δ", b, l)
			}
			if blk(m1, 2*i+1-c) == blk(m2, 2*i+1-c) {
				t.Errorf("tree %d level %d: the other sum does not depend on Δ", b, l)
			}
		}
		if blk(m1, 2*p.treeOTs()+b) == blk(m2, 2*p.treeOTs()+b) {
			t.Errorf("tree %d: the correction does not depend on Δ", b)
		}
	}
	// A new root changes its tree's blocks: the last tree's sums and its
	// correction.
	for l := range h {
		i := 4 * (3*h + l)
		if m1[i] == m3[i] || m1[i+2] == m3[i+2] {
			t.Errorf("tree 3 level %d: sums do not depend on the root", l+1)
		}
	}
	if m1[len(m1)-2] == m3[len(m3)-2] {
		t.Error("tree 3's correction does not depend on the root")
	}
	secret := map[Block]bool{d1: true}
	for _, x := range v1 {
		secret[x], secret[x.xor(d1)] = true, true
	}
	for i := 0; i < len(m1); i += 2 {
		if secret[Block{m1[i], m1[i+1]}] {
			t.Fatalf("reply block %d is Δ or a leaf in the clear", i/2)
		}
	}
}

func TestFerretLPNCode(t *testing.T) {
	for _, k := range []int{ferretCodeWeight, 11, 200, 452_000} {
		a, err := newLPNCode(share.Seed{4}, 3, k)
		if err != nil {
			t.Fatal(err)
		}
		idx := make([]uint32, lpnChunk*ferretCodeWeight)
		ks := make([]byte, lpnChunk*lpnRowBytes)
		a.rows(idx, lpnChunk, ks)
		for c := range lpnChunk {
			seen := map[uint32]bool{}
			for _, r := range idx[c*ferretCodeWeight : (c+1)*ferretCodeWeight] {
				if int(r) >= k || seen[r] {
					t.Fatalf("k=%d column %d: rows %v", k, c, idx[c*ferretCodeWeight:(c+1)*ferretCodeWeight])
				}
				seen[r] = true
			}
		}
		// The same rows again; another iteration's code differs.
		again := make([]uint32, len(idx))
		a.rows(again, lpnChunk, ks)
		b, _ := newLPNCode(share.Seed{4}, 4, k)
		other := make([]uint32, len(idx))
		b.rows(other, lpnChunk, ks)
		same := 0
		for i := range idx {
			if idx[i] != again[i] {
				t.Fatalf("k=%d: rows not reproducible", k)
			}
			if idx[i] == other[i] {
				same++
			}
		}
		if k > 100 && same > len(idx)/10 {
			t.Errorf("k=%d: the next iteration's code shares %d of %d rows", k, same, len(idx))
		}
	}
	// encode over two workers equals encode column by column.
	k, n := 300, 5*lpnChunk+17
	a, _ := newLPNCode(share.Seed{5}, 0, k)
	base := make([]Block, k)
	fillBlocks(share.NewPRG(share.Seed{6}, "base"), base)
	u := share.NewPRG(share.Seed{7}, "u").Words(share.PackedWords(k))
	z := make([]Block, n)
	x := make([]uint64, share.PackedWords(n))
	a.encode(z, base, x, u)
	idx := make([]uint32, lpnChunk*ferretCodeWeight)
	ks := make([]byte, lpnChunk*lpnRowBytes)
	for j := range n {
		c0 := j / lpnChunk * lpnChunk
		a.rows(idx, c0, ks)
		var want Block
		var bit uint64
		for _, r := range idx[(j-c0)*ferretCodeWeight : (j-c0+1)*ferretCodeWeight] {
			want = want.xor(base[r])
			bit ^= u[r>>6] >> (r & 63) & 1
		}
		if z[j] != want || x[j>>6]>>(j&63)&1 != bit {
			t.Fatalf("column %d: encoded %v/%d, want %v/%d", j, z[j], x[j>>6]>>(j&63)&1, want, bit)
		}
	}
}

func TestFerretIterations(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   ferretConfig
		iters int
	}{
		{"tiny", ferretConfig{main: ferretTinyMain}, 4},
		{"tiny setup", ferretConfig{setup: ferretTinySetup, main: ferretTinyMain}, 4},
		{"medium setup", ferretMedium, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ferretCtx(t)
			s, r := ferretPair(t, c.cfg, 1)
			for it := range c.iters {
				p := c.cfg.main
				if it == 0 {
					p = c.cfg.first()
				}
				ps, pr := ferretPipes()
				out, errS, errR := ferretRun(ctx, s, r, ps, pr)
				if errS != nil || errR != nil {
					t.Fatalf("iteration %d: %v, %v", it, errS, errR)
				}
				if want := p.n - c.cfg.main.reserve(); len(out.q) != want {
					t.Fatalf("iteration %d: %d COTs, want %d", it, len(out.q), want)
				}
				checkCOTs(t, s.delta, out)
				// The reserves are COTs too.
				checkCOTs(t, s.delta, ferretOutput{q: s.reserve, tr: r.reserveT, x: r.reserveU})
				// Two messages each way: the t·h bits up, 2h masked sums
				// and one correction per tree down; then the check's seed
				// and x′ (32 bytes) up, its SHA-256 hash down.
				tw := p.t * p.logBin
				if pr.msgs != 2 || ps.msgs != 2 {
					t.Errorf("iteration %d: %d messages up, %d down, want 2 and 2", it, pr.msgs, ps.msgs)
				}
				if got, want := 8*pr.words, 8*((tw+63)/64)+32; got != want {
					t.Errorf("iteration %d: receiver sent %d bytes, want %d", it, got, want)
				}
				if got, want := 8*ps.words, 16*(2*tw+p.t)+32; got != want {
					t.Errorf("iteration %d: sender sent %d bytes, want %d", it, got, want)
				}
			}
		})
	}
}

// TestFerretNoiseAndChoices: x ⊕ A·u is the noise, exactly one 1 per bin,
// and the choices are balanced.
func TestFerretNoiseAndChoices(t *testing.T) {
	cfg := ferretConfig{main: ferretMedium.main}
	p := cfg.main
	ctx := ferretCtx(t)
	s, r := ferretPair(t, cfg, 2)
	u := append([]uint64(nil), r.reserveU...)
	ps, pr := ferretPipes()
	out, errS, errR := ferretRun(ctx, s, r, ps, pr)
	if errS != nil || errR != nil {
		t.Fatal(errS, errR)
	}
	// The whole x: the usable choices, then the kept reserve's.
	m := p.outputs()
	x := make([]uint64, share.PackedWords(p.n))
	copy(x, out.x)
	for j := range p.reserve() {
		x[(m+j)>>6] |= (r.reserveU[j>>6] >> (j & 63) & 1) << ((m + j) & 63)
	}
	code, err := newLPNCode(ferretTestKeys(2).code, 0, p.k)
	if err != nil {
		t.Fatal(err)
	}
	code.encode(make([]Block, p.n), make([]Block, p.k), x, u) // x ⊕= A·u
	for b := range p.t {
		ones := 0
		for j := b * p.bin(); j < (b+1)*p.bin(); j++ {
			ones += int(x[j>>6] >> (j & 63) & 1)
		}
		if ones != 1 {
			t.Fatalf("bin %d has %d noise positions", b, ones)
		}
	}
	ones := 0
	for _, w := range out.x {
		ones += bits.OnesCount64(w)
	}
	if f := float64(ones) / float64(m); f < 0.49 || f > 0.51 {
		t.Errorf("%d of %d choices are 1 (%.4f)", ones, m, f)
	}
}

// ferretLiar is a connection whose received message number at (0: the
// next) is replaced by msg.
type ferretLiar struct {
	*ferretPipe
	msg    []uint64
	at, in int
}

func (l *ferretLiar) recv(ctx context.Context, maxWords int) ([]uint64, error) {
	if l.in++; l.in-1 != l.at {
		return l.ferretPipe.recv(ctx, maxWords)
	}
	if _, err := l.ferretPipe.recv(ctx, 1<<30); err != nil {
		return nil, err
	}
	return l.msg, nil // ignores the bound: the decoder must catch it
}

func TestFerretRefusesBadMessages(t *testing.T) {
	p := ferretTinyMain
	cfg := ferretConfig{main: p}
	up := spcotRoundWords(p)
	for _, c := range []struct {
		name string
		msg  []uint64
		want string
	}{
		{"long", make([]uint64, up+1), "want"},
		{"short", make([]uint64, up-1), "want"},
		{"tail bits", func() []uint64 { m := make([]uint64, up); m[up-1] = 1 << 63; return m }(), "past"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ferretCtx(t)
			s, _ := ferretPair(t, cfg, 3)
			a, b := ferretPipes()
			if err := b.send(ctx, []uint64{1}); err != nil {
				t.Fatal(err)
			}
			_, err := s.extend(ctx, &ferretLiar{ferretPipe: a, msg: c.msg})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one naming %q", err, c.want)
			}
			if _, err := s.extend(ctx, a); !errors.Is(err, errFerretBroken) {
				t.Fatalf("after a failed iteration: %v", err)
			}
		})
	}
	// The pipe's bound: an oversized reply is refused by recv, before
	// decoding.
	ctx := ferretCtx(t)
	_, r := ferretPair(t, cfg, 4)
	a, b := ferretPipes()
	if err := b.send(ctx, make([]uint64, spcotReplyWords(p)+2)); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.extend(ctx, a)
	if err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("oversized reply: %v", err)
	}
	// A short reply through a connection that ignores the bound.
	_, r = ferretPair(t, cfg, 5)
	a, b = ferretPipes()
	if err := b.send(ctx, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.extend(ctx, &ferretLiar{ferretPipe: a, msg: make([]uint64, 3)})
	if err == nil || !strings.Contains(err.Error(), "tree reply of 3 words") {
		t.Fatalf("short reply: %v", err)
	}
	// The check's messages, each party's second receive: a check
	// challenge or hash of the wrong size fails the party that gets it,
	// which then refuses further calls.
	for _, n := range []int{0, ferretCheckUpWords - 1, ferretCheckUpWords + 1} {
		s, r := ferretPair(t, cfg, 6)
		ps, pr := ferretPipes()
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, _, err := r.extend(cctx, pr) // waits for the hash until cancelled
			done <- err
		}()
		_, err := s.extend(cctx, &ferretLiar{ferretPipe: ps, msg: make([]uint64, n), at: 1})
		cancel()
		<-done
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("check challenge of %d words", n)) {
			t.Fatalf("check challenge of %d words: %v", n, err)
		}
		if _, err := s.extend(ctx, ps); !errors.Is(err, errFerretBroken) {
			t.Fatalf("after a failed check challenge: %v", err)
		}
	}
	for _, n := range []int{0, ferretCheckDownWords - 1, ferretCheckDownWords + 1} {
		s, r := ferretPair(t, cfg, 7)
		ps, pr := ferretPipes()
		_, errS, errR := ferretRun(ctx, s, r, ps, &ferretLiar{ferretPipe: pr, msg: make([]uint64, n), at: 1})
		if errS != nil {
			t.Fatal(errS)
		}
		if errR == nil || !strings.Contains(errR.Error(), fmt.Sprintf("check hash of %d words", n)) || errors.Is(errR, errFerretCheck) {
			t.Fatalf("check hash of %d words: %v", n, errR)
		}
		if _, _, err := r.extend(ctx, pr); !errors.Is(err, errFerretBroken) {
			t.Fatalf("after a failed check hash: %v", err)
		}
	}
}

func FuzzFerretDecode(f *testing.F) {
	p := ferretParams{n: 3 << 3, k: ferretCodeWeight, t: 3, logBin: 3}
	f.Add(make([]byte, 8*spcotRoundWords(p)))
	f.Add(make([]byte, 8*spcotReplyWords(p)))
	f.Add(make([]byte, 8*ferretCheckUpWords))
	f.Add(make([]byte, 8*ferretCheckDownWords+1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := make([]uint64, len(b)/8)
		for i := range w {
			for j := range 8 {
				w[i] |= uint64(b[8*i+j]) << (8 * j)
			}
		}
		if d, err := decodeSPCOTBits(p, w); err == nil && (len(d) != spcotRoundWords(p) || d[0]>>p.treeOTs() != 0) {
			t.Fatalf("accepted %d words with bits %x", len(d), d)
		}
		if sums, corr, err := decodeSPCOTReply(p, w); err == nil && (len(sums) != 2*p.treeOTs() || len(corr) != p.t) {
			t.Fatalf("accepted %d sums, %d corrections", len(sums), len(corr))
		}
		if seed, adj, err := decodeFerretCheckUp(w); err == nil && (len(w) != ferretCheckUpWords || seed != (Block{w[0], w[1]}) || adj != (Block{w[2], w[3]})) {
			t.Fatalf("accepted %d words as seed %v, x′ %v", len(w), seed, adj)
		} else if err != nil && len(w) == ferretCheckUpWords {
			t.Fatalf("refused a check challenge of the right size: %v", err)
		}
		if h, err := decodeFerretCheckDown(w); err == nil && len(h) != ferretCheckDownWords {
			t.Fatalf("accepted a check hash of %d words", len(h))
		} else if err != nil && len(w) == ferretCheckDownWords {
			t.Fatalf("refused a check hash of the right size: %v", err)
		}
	})
}

// BenchmarkFerretIteration runs main-set iterations of both parties in one
// process (so each COT is counted once, but costs both parties' work, on
// the same cores).
func BenchmarkFerretIteration(b *testing.B) {
	cfg := ferretB13
	ctx := ferretCtx(b)
	s, r := ferretPair(b, cfg, 6)
	// The setup iteration and one main iteration first, checked: they
	// bootstrap the main reserve from cfg.baseCOTs() base COTs and
	// allocate (and fault in) the reused output buffers, so that the
	// timed iterations are the steady state.
	for it, want := range []int{ferretSetup.n - ferretMain.reserve(), ferretMain.outputs()} {
		ps, pr := ferretPipes()
		out, errS, errR := ferretRun(ctx, s, r, ps, pr)
		if errS != nil || errR != nil {
			b.Fatal(errS, errR)
		}
		if len(out.q) != want {
			b.Fatalf("warm-up iteration %d: %d COTs, want %d", it, len(out.q), want)
		}
		checkCOTs(b, s.delta, out)
	}
	var up, down int
	cpu0, cpuOK := processCPUSeconds()
	b.ResetTimer()
	for range b.N {
		ps, pr := ferretPipes()
		_, errS, errR := ferretRun(ctx, s, r, ps, pr)
		if errS != nil || errR != nil {
			b.Fatal(errS, errR)
		}
		up, down = pr.words, ps.words
	}
	b.StopTimer()
	m := ferretMain.outputs()
	b.ReportMetric(float64(m)*float64(b.N)/b.Elapsed().Seconds(), "COTs/s")
	if cpu1, ok := processCPUSeconds(); ok && cpuOK {
		// Both parties' CPU time: the rate a core would give them, however
		// loaded the machine.
		b.ReportMetric(float64(m)*float64(b.N)/(cpu1-cpu0), "COTs/cpu-s")
	}
	b.ReportMetric(float64(8*(up+down)), "bytes/iter")
	b.ReportMetric(float64(64*(up+down))/float64(m), "bits/COT")
}

// BenchmarkLPNEncode times the LPN encoding of 2^20 columns of the main
// set's code (k = 452,000 base blocks, 7.2 MB) on one goroutine: drawing
// the rows alone, and the sender's and the receiver's encodings with them.
func BenchmarkLPNEncode(b *testing.B) {
	k, n := ferretMain.k, 1<<20
	a, err := newLPNCode(share.Seed{7}, 0, k)
	if err != nil {
		b.Fatal(err)
	}
	base := make([]Block, k)
	fillBlocks(share.NewPRG(share.Seed{6}, "base"), base)
	u := share.NewPRG(share.Seed{7}, "u").Words(share.PackedWords(k))
	z := make([]Block, n)
	bits := make([]uint64, share.PackedWords(n))
	perColumn := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/col")
	}
	b.Run("rows", func(b *testing.B) {
		idx := make([]uint32, lpnChunk*ferretCodeWeight)
		ks := make([]byte, lpnChunk*lpnRowBytes)
		for range b.N {
			for c0 := 0; c0 < n; c0 += lpnChunk {
				a.rows(idx, c0, ks)
			}
		}
		perColumn(b)
	})
	b.Run("sender", func(b *testing.B) {
		for range b.N {
			a.encodeRange(z, base, nil, nil, 0, n)
		}
		perColumn(b)
	})
	b.Run("receiver", func(b *testing.B) {
		for range b.N {
			a.encodeRange(z, base, bits, u, 0, n)
		}
		perColumn(b)
	})
}

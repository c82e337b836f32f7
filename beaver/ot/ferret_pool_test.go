package ot

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/transport"
)

// liarConn is party 1's end of a stream whose sends rewrite alters (the
// index of the send on the stream, the words; a copy).
type liarConn struct {
	Conn
	mu      sync.Mutex
	sends   int
	rewrite func(i int, w []uint64) []uint64
}

func (c *liarConn) SendWords(ctx context.Context, w []uint64) error {
	c.mu.Lock()
	i := c.sends
	c.sends++
	c.mu.Unlock()
	return c.Conn.SendWords(ctx, c.rewrite(i, append([]uint64(nil), w...)))
}

func (c *liarConn) Exchange(ctx context.Context, send, recv []uint64) error {
	c.mu.Lock()
	i := c.sends
	c.sends++
	c.mu.Unlock()
	return c.Conn.Exchange(ctx, c.rewrite(i, append([]uint64(nil), send...)), recv)
}

// liarPair returns an unbound pair of silent-OT providers whose party 1 sends on
// transport stream id through rewrite.
func liarPair(t *testing.T, id uint32, rewrite func(i int, w []uint64) []uint64) (p0, p1 *Provider) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	var err error
	silent := ProviderOptions{SilentOT: true}
	if p0, err = newProvider(func(s uint32) Conn { return c0.Stream(s) }, 0, silent); err != nil {
		t.Fatal(err)
	}
	open1 := func(s uint32) Conn {
		if s == id {
			return &liarConn{Conn: c1.Stream(s), rewrite: rewrite}
		}
		return c1.Stream(s)
	}
	if p1, err = newProvider(open1, 1, silent); err != nil {
		t.Fatal(err)
	}
	return p0, p1
}

// bindBoth binds both providers to testSID and returns party 0's error
// (party 1's context ends when party 0's bind does: an aborting party 0
// sends nothing more).
func bindBoth(t *testing.T, p0, p1 *Provider) error {
	ctx := testCtx(t)
	ctx1, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() { errs <- p1.BindSession(ctx1, testSID) }()
	err := p0.BindSession(ctx, testSID)
	if err != nil {
		cancel()
	}
	if err1 := <-errs; err == nil && err1 != nil {
		t.Fatalf("party 1's bind: %v", err1)
	}
	return err
}

// TestSilentBootstrapRefusesCheatingReceiver: the silent OTs' base COTs
// come from SoftSpokenOT with its consistency check: party 1's altered
// extension message in the bootstrap fails party 0's bind with
// ErrExtensionCheck, and the provider refuses every later bind.
func TestSilentBootstrapRefusesCheatingReceiver(t *testing.T) {
	words := mustSpoken(spokenK).callWords((ferretPoolConfig.baseCOTs()+127)&^127, true)
	altered := false
	p0, p1 := liarPair(t, DefaultStreamBase-1, func(_ int, w []uint64) []uint64 {
		if len(w) == words && !altered {
			w[len(w)-1] ^= 1 // the check's t
			altered = true
		}
		return w
	})
	err := bindBoth(t, p0, p1)
	if !altered {
		t.Fatal("nothing was altered")
	}
	if !errors.Is(err, ErrExtensionCheck) {
		t.Fatalf("model owner's bind: %v, want ErrExtensionCheck", err)
	}
	if err := p0.BindSession(testCtx(t), testSID); err == nil {
		t.Error("bind after a failed setup succeeded")
	}
}

// TestSilentPoolRefusesRanges: party 1 names silent OTs as receiver; a
// range it named before, or one past what the pool has made, fails party
// 0's generator with an error wrapping beaver.ErrCorrelationCheck, party 0
// returns no material, and its provider refuses every later bind. The
// honest second call names the range right after the first's.
func TestSilentPoolRefusesRanges(t *testing.T) {
	r := beaver.Request{Kind: beaver.KindTriple, N: 128, Stream: 5}
	for _, c := range []struct {
		name string
		j0   func(first, honest uint64) uint64
	}{
		{"honest", func(_, honest uint64) uint64 { return honest }},
		{"replayed", func(first, _ uint64) uint64 { return first }},
		{"overlapping", func(first, _ uint64) uint64 { return first + 128 }},
		{"not made", func(_, _ uint64) uint64 { return 1 << 40 }},
		{"unaligned", func(_, honest uint64) uint64 { return honest + 64 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var heads []uint64 // word 0 of each send
			perCall := -1
			p0, p1 := liarPair(t, DefaultStreamBase+1+r.Stream, func(i int, w []uint64) []uint64 {
				mu.Lock()
				defer mu.Unlock()
				if perCall > 0 && i == perCall && len(w) > 0 { // the second call's first send
					honest := w[0]
					w[0] = c.j0(heads[0], honest)
				}
				if len(w) > 0 {
					heads = append(heads, w[0])
				}
				return w
			})
			if err := bindBoth(t, p0, p1); err != nil {
				t.Fatal(err)
			}
			// The bind: base OTs, then the bootstrap's SoftSpokenOT message
			// of each party as receiver.
			// Party 0 receives the base COTs of party 1's two chains.
			want0, want1 := 19552+8*int64(silentBootWords(ferretPoolConfigs[1])), 19552+8*int64(silentBootWords(ferretPoolConfigs[0]))
			if p0.Stats().BytesSent != want0 || p1.Stats().BytesSent != want1 || want0 <= want1 {
				t.Fatalf("bind bytes: party 0 sent %d, party 1 %d; want %d and %d", p0.Stats().BytesSent, p1.Stats().BytesSent, want0, want1)
			}
			// Rounds: Setup's 3, then one bootstrap call a chain (one of
			// party 0's direction, two of party 1's).
			if p0.setup.Rounds != 3+3 || p1.setup.Rounds != 3+3 {
				t.Fatalf("bind rounds: %d and %d, want 6", p0.setup.Rounds, p1.setup.Rounds)
			}
			ctx := testCtx(t)
			m0, m1 := both(t, func() (beaver.Material, error) { return p0.Material(ctx, r) },
				func() (beaver.Material, error) { return p1.Material(ctx, r) })
			checkMaterial(t, r, m0, m1, nil)
			mu.Lock()
			perCall = len(heads)
			if heads[0]%128 != 0 || heads[0] >= 1<<40 {
				t.Fatalf("party 1's first word %#x is not a pool index", heads[0])
			}
			mu.Unlock()
			m0, err, err1 := cheatedCall(ctx, p0, p1, r)
			if c.name == "honest" {
				if err != nil || err1 != nil {
					t.Fatal(err, err1)
				}
				mu.Lock()
				defer mu.Unlock()
				if want := heads[0] + 64*uint64(r.N); heads[perCall] != want { // 64 OTs a triple a direction
					t.Fatalf("second range at %d, want %d", heads[perCall], want)
				}
				return
			}
			if !errors.Is(err, ErrSilentRange) || !errors.Is(err, beaver.ErrCorrelationCheck) || m0.Parts != nil {
				t.Fatalf("model owner: %v with %d parts, want a refused range and nothing", err, len(m0.Parts))
			}
			if err := p0.BindSession(ctx, testSID); !errors.Is(err, beaver.ErrCorrelationCheck) {
				t.Errorf("bind after a refused range: %v", err)
			}
		})
	}
}

// silentSessions returns two bound sessions whose silent-OT pools run
// with cfg in both directions over a pipe, and the test's context.
func silentSessions(t *testing.T, cfg ferretConfig, seed uint64) (s0, s1 *Session, ctx context.Context) {
	t.Helper()
	return silentSessionsWith(t, [2]ferretConfig{cfg, cfg}, seed)
}

// silentSessionsWith is silentSessions with the direction in which party d
// holds Δ on cfgs[d].
func silentSessionsWith(t testing.TB, cfgs [2]ferretConfig, seed uint64) (s0, s1 *Session, ctx context.Context) {
	t.Helper()
	return silentSessionsOver(t, cfgs, seed, transport.Options{})
}

// silentSessionsOver is silentSessionsWith over a pipe with options opt
// (a link to emulate).
func silentSessionsOver(t testing.TB, cfgs [2]ferretConfig, seed uint64, opt transport.Options) (s0, s1 *Session, ctx context.Context) {
	t.Helper()
	s0, s1 = fakePair(t, spokenK, rand.New(rand.NewPCG(seed, seed+1)))
	c0, c1 := transport.Pipe(opt)
	t.Cleanup(func() { c0.Close(); c1.Close() })
	ctx = testCtx(t)
	both(t, func() (struct{}, error) {
		return struct{}{}, s0.startSilentConfig(ctx, func(off uint32) Conn { return c0.Stream(off) }, cfgs)
	}, func() (struct{}, error) {
		return struct{}{}, s1.startSilentConfig(ctx, func(off uint32) Conn { return c1.Stream(off) }, cfgs)
	})
	return s0, s1, ctx
}

// TestSilentPoolDirections: a session's pools run the main set where party
// 0 holds Δ and the small set (emp-ot's setup set, every iteration,
// overlapped, two chains) where party 1, the data owner, does, on both
// parties' halves; COTs taken over three of the small set's iterations
// (party 0 choosing, party 1 holding Δ) are all correct, the receiver has
// begun the fourth before checking the third, the next take goes to the
// second chain (its index says so) and is correct too, a range naming a
// chain that does not exist is refused, and the steady bytes a COT follow
// each direction's set.
func TestSilentPoolDirections(t *testing.T) {
	s0, s1, ctx := silentSessionsWith(t, ferretPoolConfigs, 25)
	for _, c := range []struct {
		name   string
		got    []ferretConfig
		want   ferretConfig
		chains int
	}{
		{"party 0 as sender", senderConfigs(s0), ferretPoolConfig, 1},
		{"party 1 as receiver", receiverConfigs(s1), ferretPoolConfig, 1},
		{"party 1 as sender", senderConfigs(s1), ferretSmallPoolConfig, 2},
		{"party 0 as receiver", receiverConfigs(s0), ferretSmallPoolConfig, 2},
	} {
		if len(c.got) != c.chains {
			t.Errorf("%s: %d chains, want %d", c.name, len(c.got), c.chains)
		}
		for _, g := range c.got {
			if g != c.want {
				t.Errorf("%s: %+v, want %+v", c.name, g, c.want)
			}
		}
	}
	if ferretSmallPoolConfig.at(0) != ferretSetup || ferretSmallPoolConfig.at(1000) != ferretSetup || ferretPoolConfig.at(16) != ferretMain {
		t.Fatal("the sets of the pools' iterations changed")
	}
	n := 2*int(poolAligned(ferretSmallPoolConfig, 0)) + 1024
	msg, ch, tr, _, err := s0.silent.recvRandom(ctx, nil, n)
	if err != nil {
		t.Fatal(err)
	}
	if msg[0]>>poolChainShift != 0 {
		t.Fatalf("the first take went to chain %d", msg[0]>>poolChainShift)
	}
	q, _, err := s1.silent.sendTake(ctx, msg, n, false)
	if err != nil {
		t.Fatal(err)
	}
	checkPoolCOTs(t, q, tr, ch, s1.delta)
	// The small set's iterations overlap: party 0 has begun the fourth
	// (sent its trees' choices) before it checked the third, which party
	// 1 may already be running.
	if st, _ := s1.silent.snapshot(); st.Iterations != 3 && st.Iterations != 4 {
		t.Errorf("party 1 as sender ran %d iterations for %d COTs, want 3 of the small set (and the fourth begun)", st.Iterations, n)
	}
	up := spcotRoundWords(ferretSetup)
	if st, _ := s0.silent.snapshot(); st.WordsSent != int64(3*(up+ferretCheckUpWords)+up) {
		t.Errorf("party 0 as receiver sent %d words, want three iterations' and the fourth's choices, %d", st.WordsSent, 3*(up+ferretCheckUpWords)+up)
	}
	// The next take: the second chain, from its own index 0.
	msg, ch, tr, _, err = s0.silent.recvRandom(ctx, nil, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if msg[0] != 1<<poolChainShift {
		t.Fatalf("the second take named %#x, want chain 1's first COT", msg[0])
	}
	if q, _, err = s1.silent.sendTake(ctx, msg, 1024, false); err != nil {
		t.Fatal(err)
	}
	checkPoolCOTs(t, q, tr, ch, s1.delta)
	if _, _, err := s1.silent.sendTake(ctx, []uint64{2 << poolChainShift}, 128, false); !errors.Is(err, ErrSilentRange) {
		t.Errorf("a range of chain 2 (of two): %v, want a refusal", err)
	}
	perCOT := func(words int, p ferretParams) float64 { return 8 * float64(words) / float64(p.outputs()) }
	r0, s0b := SilentSteadyBytes(0)
	r1, s1b := SilentSteadyBytes(1)
	if want := perCOT(spcotRoundWords(ferretSetup)+ferretCheckUpWords, ferretSetup); r0 != want {
		t.Errorf("party 0's bytes as receiver %.4f a COT, want the small set's %.4f", r0, want)
	}
	if want := perCOT(spcotReplyWords(ferretMain)+ferretCheckDownWords, ferretMain); s0b != want {
		t.Errorf("party 0's bytes as sender %.4f a COT, want the main set's %.4f", s0b, want)
	}
	if want := perCOT(spcotRoundWords(ferretMain)+ferretCheckUpWords, ferretMain); r1 != want {
		t.Errorf("party 1's bytes as receiver %.4f a COT, want the main set's %.4f", r1, want)
	}
	if want := perCOT(spcotReplyWords(ferretSetup)+ferretCheckDownWords, ferretSetup); s1b != want {
		t.Errorf("party 1's bytes as sender %.4f a COT, want the small set's %.4f", s1b, want)
	}
}

// senderConfigs returns the configurations of s's sender chains.
func senderConfigs(s *Session) (cfgs []ferretConfig) {
	for _, p := range s.silent.send {
		cfgs = append(cfgs, p.inst.cfg)
	}
	return cfgs
}

// receiverConfigs returns the configurations of s's receiver chains.
func receiverConfigs(s *Session) (cfgs []ferretConfig) {
	for _, p := range s.silent.recv {
		cfgs = append(cfgs, p.inst.cfg)
	}
	return cfgs
}

// checkPoolCOTs fails the test unless every receiver row t[j] is the
// sender's q[j] ⊕ c_j·Δ, c the packed choices.
func checkPoolCOTs(t *testing.T, q, tr []Block, ch []uint64, delta Block) {
	t.Helper()
	for j := range q {
		want := q[j]
		if ch[j/64]>>(j%64)&1 == 1 {
			want = want.xor(delta)
		}
		if tr[j] != want {
			t.Fatalf("COT %d: t ≠ q ⊕ c·Δ", j)
		}
	}
}

// TestSilentPoolCOTs: the pools' COTs satisfy t = q ⊕ c·Δ for chosen and
// random choices, over takes that span iterations (a small configuration:
// the first iteration's 128-block tail and the next's head in one take),
// and the sender's view of the receiver's e is independent of the chosen
// bits.
func TestSilentPoolCOTs(t *testing.T) {
	cfg := ferretConfig{setup: ferretTinySetup, main: ferretTinyMain, warm: 2}
	s0, s1, ctx := silentSessions(t, cfg, 21)
	// Party 1 receives in party 0's direction.
	sizes := []int{128, 1024, int(poolAligned(cfg, 0)), 4096, 128}
	var next uint64
	for i, n := range sizes {
		t.Run(fmt.Sprint(i, n), func(t *testing.T) {
			choices := make([]uint64, n/64)
			for k := range choices {
				choices[k] = uint64(0x9e3779b97f4a7c15) * uint64(k+i+1)
			}
			chosen := i%2 == 0
			var msg, ch []uint64
			var tr []Block
			var err error
			if chosen {
				msg, tr, _, err = s1.silent.recvChosen(ctx, nil, choices, n)
				ch = choices
			} else {
				msg, ch, tr, _, err = s1.silent.recvRandom(ctx, nil, n)
			}
			if err != nil {
				t.Fatal(err)
			}
			if msg[0] != next {
				t.Fatalf("range at %d, want %d", msg[0], next)
			}
			next += uint64(n)
			q, _, err := s0.silent.sendTake(ctx, msg, n, chosen)
			if err != nil {
				t.Fatal(err)
			}
			checkPoolCOTs(t, q, tr, ch, s0.delta)
			if _, _, err := s0.silent.sendTake(ctx, msg, n, chosen); !errors.Is(err, ErrSilentRange) {
				t.Fatalf("the same range again: %v, want a refusal", err)
			}
		})
	}
}

// TestSilentPoolLaggingSender: a sender whose take of one early range lags
// while later iterations are made keeps that range's rows in a compact
// copy and reuses the iteration's buffer (not one buffer an iteration),
// and every COT still satisfies t = q ⊕ c·Δ; the lagging range taken again
// is refused.
func TestSilentPoolLaggingSender(t *testing.T) {
	cfg := ferretConfig{setup: ferretTinySetup, main: ferretTinyMain, warm: 1}
	s0, s1, ctx := silentSessions(t, cfg, 23)
	const n = 128
	type taken struct {
		msg, ch []uint64
		t       []Block
	}
	check := func(r taken) {
		t.Helper()
		q, _, err := s0.silent.sendTake(ctx, r.msg, n, false)
		if err != nil {
			t.Fatal(err)
		}
		checkPoolCOTs(t, q, r.t, r.ch, s0.delta)
	}
	// Six iterations' worth of ranges; the first one's take lags to the end.
	total := 0
	for i := range uint64(6) {
		total += int(poolAligned(cfg, i))
	}
	var lagging taken
	for k := 0; k < total/n; k++ {
		msg, ch, tr, _, err := s1.silent.recvRandom(ctx, nil, n)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			lagging = taken{msg, ch, tr}
			continue
		}
		check(taken{msg, ch, tr})
	}
	snd := s0.silent.send[0]
	snd.mu.Lock()
	held, compacted := len(snd.spares), false
	for _, it := range snd.iters {
		if it.buf != nil {
			held++
		}
		compacted = compacted || (it.lo == 0 && it.at != nil)
	}
	snd.mu.Unlock()
	// Waiting for the receiver to begin the next iteration, the sender
	// holds the spent iteration's buffer only: it picks the next one's
	// once the receiver begins it.
	if !compacted || held > 1 {
		t.Fatalf("sender holds %d iteration buffers (first iteration compacted: %v), want 1 and compacted", held, compacted)
	}
	check(lagging)
	if _, _, err := s0.silent.sendTake(ctx, lagging.msg, n, false); !errors.Is(err, ErrSilentRange) {
		t.Fatalf("the lagging range again: %v, want a refusal", err)
	}
}

// TestSilentModeMismatch: a provider with silent OTs and one without fail
// setup on both sides with ErrModeMismatch, naming the two extensions.
func TestSilentModeMismatch(t *testing.T) {
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	p0, err0 := newProvider(func(s uint32) Conn { return c0.Stream(s) }, 0, ProviderOptions{SilentOT: true})
	p1, err1 := newProvider(func(s uint32) Conn { return c1.Stream(s) }, 1, ProviderOptions{})
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	ctx := testCtx(t)
	errs := make(chan error, 1)
	go func() { errs <- p1.BindSession(ctx, testSID) }()
	err0 = p0.BindSession(ctx, testSID)
	err1 = <-errs
	for p, err := range []error{err0, err1} {
		if !errors.Is(err, ErrModeMismatch) || !strings.Contains(err.Error(), "Ferret") {
			t.Errorf("party %d: %v, want ErrModeMismatch naming Ferret", p, err)
		}
	}
}

// BenchmarkSilentPoolLink measures how fast one direction's chains of
// iterations hand out COTs over the paper's WAN (100 MB/s, 50 ms each
// way), taken 128 Ki at a time by four goroutines: the small set with and
// without overlapped iterations (one round trip an iteration against
// two), and in two chains.
func BenchmarkSilentPoolLink(b *testing.B) {
	wan := transport.PaperWAN
	for _, c := range []struct {
		name string
		cfg  ferretConfig
	}{
		{"small", ferretConfig{main: ferretSetup}},
		{"small overlapped", ferretConfig{main: ferretSetup, overlap: true}},
		{"small overlapped, two chains", ferretSmallPoolConfig},
	} {
		b.Run(c.name, func(b *testing.B) {
			s0, s1, ctx := silentSessionsOver(b, [2]ferretConfig{ferretPoolConfig, c.cfg}, 27, transport.Options{Link: &wan})
			const n = 128 << 10
			b.ResetTimer()
			var taken atomic.Int64
			var wg sync.WaitGroup
			for range 4 { // lanes taking side by side
				wg.Go(func() {
					for taken.Add(1) <= int64(b.N) {
						msg, _, _, _, err := s0.silent.recvRandom(ctx, nil, n)
						if err == nil {
							_, _, err = s1.silent.sendTake(ctx, msg, n, false)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "COTs/s")
		})
	}
}

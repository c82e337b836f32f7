package ot

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// cheat is how a test receiver deviates in one extension call: flip
// returns the choice bits e_j (64 per word, over the call's n + checkOTs
// OTs) that it adds to its choice vector on tree b only, by flipping those
// bits of tree b's corrections.
type cheat struct {
	name string
	b    int                           // the tree
	flip func(rng *rand.Rand) []uint64 // e, total/64 words
	call int                           // 0: the generator's first call (with the trees), 1: the next
}

// cheatCall runs call number c.call of a fresh generator pair (g0 the
// extension sender, holding Δ; g1 a receiver that deviates as c says on its
// last call) and, on that call, makes the receiver pass the check if its
// guess of tree b's Δ bits is right: it sends x honestly and
// t ⊕ (Σ e_j·χ_j)·G, G the guess placed at tree b's bits. It returns the
// sender's result and the receiver's rows and choices.
func cheatCall(t *testing.T, s0, s1 *Session, id uint32, c cheat, guess int, n int) (q []Block, err error, rows []Block, choices []uint64, e []uint64) {
	t.Helper()
	g0, err0 := s0.NewGen(nil, id)
	g1, err1 := s1.NewGen(nil, id)
	if err0 != nil || err1 != nil {
		t.Fatal(err0, err1)
	}
	rng := rand.New(rand.NewPCG(uint64(id), 9))
	for range c.call {
		msg, _, _ := g1.rcv.extend(g1.prg.Words(n/64), n)
		if _, _, err := g0.snd.extend(msg, n); err != nil {
			t.Fatalf("honest call before the cheat: %v", err)
		}
	}
	p := s1.ext
	choices = g1.prg.Words(n / 64)
	body, rows, all, j0 := g1.rcv.extendRows(nil, choices, n)
	total := len(rows)
	e = c.flip(rng)
	corr := body
	if c.call == 0 {
		corr = body[treeWords:]
	}
	T := p.trees()
	for blk := range total / 128 {
		corr[2*(blk*T+c.b)] ^= e[2*blk]
		corr[2*(blk*T+c.b)+1] ^= e[2*blk+1]
	}
	ch := newChallenge(g1.rcv.pi, g1.rcv.gen, j0, total, body)
	x, ts := checkReceiver(ch, rows, all)
	var se Block // Σ e_j·χ_j
	for blk := range total / 128 {
		chi := ch.block(blk)
		for i := range 128 {
			if e[2*blk+i/64]>>(i%64)&1 == 1 {
				se = se.xor(chi[i])
			}
		}
	}
	var G Block
	for j := range p.sizes[c.b] {
		if guess>>j&1 == 1 {
			G = G.xor(bitBlock(p.offs[c.b] + j))
		}
	}
	ts = ts.xor(gfMul(se, G))
	q, _, err = g0.snd.extend(append(body, x.Lo, x.Hi, ts.Lo, ts.Hi), n)
	return q, err, rows[:n], choices, e
}

// bitBlock returns the block with bit i set.
func bitBlock(i int) Block {
	if i < 64 {
		return Block{1 << i, 0}
	}
	return Block{0, 1 << (i - 64)}
}

// TestExtensionCheckCatchesCheatingReceiver: a receiver that uses another
// choice vector on one tree of Δ (one flipped correction bit, or a whole
// other vector) to learn that tree's Δ bits by selective failure is refused
// with ErrExtensionCheck unless its guess of the bits is right: over all
// 2^k guesses exactly one passes (the leak KOS accepts: k bits with
// probability 2^−k), and then its deviation really did shift the sender's
// rows by those Δ bits. Without the check every guess passes.
func TestExtensionCheckCatchesCheatingReceiver(t *testing.T) {
	const n = 1024
	total := n + checkOTs
	one := func(j int) func(*rand.Rand) []uint64 {
		return func(*rand.Rand) []uint64 {
			e := make([]uint64, total/64)
			e[j/64] = 1 << (j % 64)
			return e
		}
	}
	other := func(rng *rand.Rand) []uint64 { // another uniform choice vector on the tree
		e := make([]uint64, total/64)
		for i := range e {
			e[i] = rng.Uint64()
		}
		return e
	}
	s0, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(11, 12)))
	p := s0.ext
	cases := []cheat{
		{name: "one correction bit/first call/tree 0", b: 0, flip: one(5), call: 0},
		{name: "one correction bit/next call/last tree", b: p.trees() - 1, flip: one(700), call: 1},
		{name: "one extra OT's bit/tree 9", b: 9, flip: one(n + 3), call: 1},
		{name: "another choice vector/tree 17", b: 17, flip: other, call: 1},
	}
	id := uint32(1)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			alpha := p.alpha(s0.delta, c.b)
			passed := 0
			for guess := range 1 << p.sizes[c.b] {
				id++
				q, err, rows, choices, e := cheatCall(t, s0, s1, id, c, guess, n)
				if guess != alpha {
					if !errors.Is(err, ErrExtensionCheck) || !errors.Is(err, beaver.ErrCorrelationCheck) || q != nil {
						t.Fatalf("guess %d of tree %d (Δ bits %d): %v with %d rows, want ErrExtensionCheck and none", guess, c.b, alpha, err, len(q))
					}
					continue
				}
				if err != nil {
					t.Fatalf("the right guess %d was refused: %v", guess, err)
				}
				passed++
				// The deviation was real: q_j = t_j ⊕ r_j·Δ ⊕ e_j·Δ_b, Δ_b
				// Δ on tree b's bits.
				var db Block
				for j := range p.sizes[c.b] {
					db = db.xor(bitBlock(p.offs[c.b] + j))
				}
				db = Block{db.Lo & s0.delta.Lo, db.Hi & s0.delta.Hi}
				for j := range n {
					want := rows[j]
					if choices[j/64]>>(j%64)&1 == 1 {
						want = want.xor(s0.delta)
					}
					if e[j/64]>>(j%64)&1 == 1 {
						want = want.xor(db)
					}
					if q[j] != want {
						t.Fatalf("row %d: q ≠ t ⊕ r·Δ ⊕ e·Δ_b", j)
					}
				}
			}
			if passed != 1 {
				t.Fatalf("%d of %d guesses passed, want exactly the right one", passed, 1<<p.sizes[c.b])
			}
		})
	}
}

// TestExtensionCheckCatchesTamperedMessage: a receiver that alters its
// trees (both masked sums of a base OT, so the sender's sibling changes
// whatever its Δ bit), x or t, without adjusting the rest, is refused.
func TestExtensionCheckCatchesTamperedMessage(t *testing.T) {
	const n = 256
	s0, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(13, 14)))
	words := s0.ext.callWords(n, true)
	for i, c := range []struct {
		name  string
		alter func(msg []uint64)
	}{
		{"tree of base OT 37", func(m []uint64) { m[4*37] ^= 1; m[4*37+2] ^= 1 }},
		{"tree of base OT 0, both words", func(m []uint64) { m[1] ^= 1 << 40; m[3] ^= 1 << 40 }},
		{"x", func(m []uint64) { m[words-4] ^= 1 }},
		{"t", func(m []uint64) { m[words-1] ^= 1 << 63 }},
		{"none", func([]uint64) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g0, err0 := s0.NewGen(nil, uint32(100+i))
			g1, err1 := s1.NewGen(nil, uint32(100+i))
			if err0 != nil || err1 != nil {
				t.Fatal(err0, err1)
			}
			msg, _, _ := g1.rcv.extend(g1.prg.Words(n/64), n)
			if len(msg) != words {
				t.Fatalf("%d words, want %d", len(msg), words)
			}
			c.alter(msg)
			q, _, err := g0.snd.extend(msg, n)
			if c.name == "none" {
				if err != nil || len(q) != n {
					t.Fatalf("honest call: %v, %d rows", err, len(q))
				}
				return
			}
			if !errors.Is(err, ErrExtensionCheck) || q != nil {
				t.Fatalf("%v with %d rows, want ErrExtensionCheck and none", err, len(q))
			}
		})
	}
}

// TestOTProviderRefusesCheatingReceiver: through the Provider, party 1's
// altered extension message fails party 0's generator with an error
// wrapping beaver.ErrCorrelationCheck (selection's AbortCorrelation), party
// 0 returns no material, and its provider refuses every later bind.
func TestOTProviderRefusesCheatingReceiver(t *testing.T) {
	r := beaver.Request{Kind: beaver.KindWrap, N: 128, FracBits: 16}
	tc := &tamper{outWords: mustSpoken(spokenK).callWords(128, true)}
	tc.out = func(w []uint64) { w[len(w)-1] ^= 1 } // t's last bit
	p0, p1 := tamperPair(t, ProviderOptions{}, tc)
	ctx := testCtx(t)
	m0, err, _ := cheatedCall(ctx, p0, p1, r)
	if !tc.done {
		t.Fatal("nothing was altered")
	}
	if !errors.Is(err, ErrExtensionCheck) || !errors.Is(err, beaver.ErrCorrelationCheck) || m0.Parts != nil {
		t.Fatalf("model owner: %v with %d parts, want ErrExtensionCheck and nothing", err, len(m0.Parts))
	}
	if err := p0.BindSession(ctx, testSID); !errors.Is(err, beaver.ErrCorrelationCheck) {
		t.Errorf("bind after a failed check: %v", err)
	}
}

// TestExtensionCheckHidesChoices: the check's x = Σ r_j·χ_j is uniform
// whatever the receiver's choices, because of the checkOTs extra uniform
// choice bits: with all-zero choices it would otherwise be zero, with
// all-one choices the sum of the public χ. Over many calls of fixed
// choices the x words are uniform bytes, and x never repeats.
func TestExtensionCheckHidesChoices(t *testing.T) {
	_, s1 := fakePair(t, spokenK, rand.New(rand.NewPCG(15, 16)))
	for _, choice := range []uint64{0, ^uint64(0)} {
		g1, err := s1.NewGen(nil, uint32(200+choice&1))
		if err != nil {
			t.Fatal(err)
		}
		var xs []uint64
		seen := map[Block]bool{}
		for range 400 {
			msg, _, _ := g1.rcv.extend([]uint64{choice, choice}, 128)
			x := Block{msg[len(msg)-4], msg[len(msg)-3]}
			if seen[x] {
				t.Fatalf("choices %x: x repeats", choice)
			}
			seen[x] = true
			xs = append(xs, x.Lo, x.Hi)
		}
		if x, nb := chiSquareBytes([][]uint64{xs}); x > chiLimit {
			t.Fatalf("choices %x: x not uniform: χ² = %.0f over %d bytes", choice, x, nb)
		}
	}
}

package ot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestFerretCheckAlgebra: the pieces of the check against their
// definitions: χ_j one block of the stream wherever a fill starts, the
// chunked two-worker inner product against gfMul term by term (lengths
// off the chunk size), and the 128-COT VOLE z* = y* ⊕ x*·Δ.
func TestFerretCheckAlgebra(t *testing.T) {
	chi, err := newFerretChi(Block{1, 2}, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	other, err := newFerretChi(Block{1, 2}, 7, 4)
	if err != nil {
		t.Fatal(err)
	}
	all := make([]Block, 3*ferretChiChunk+5)
	chi.fill(all, 0)
	for _, j := range []int{0, 1, 63, 64, ferretChiChunk - 1, ferretChiChunk, len(all) - 1} {
		if chi.at(j) != all[j] {
			t.Fatalf("χ_%d: at %v, fill %v", j, chi.at(j), all[j])
		}
		if other.at(j) == all[j] {
			t.Fatalf("χ_%d is the same in the next iteration", j)
		}
	}
	for _, n := range []int{1, 7, ferretChiChunk, 2*ferretChiChunk + 1, 3*ferretChiChunk + 5} {
		v := make([]Block, n)
		fillBlocks(share.NewPRG(share.Seed{byte(n)}, "v"), v)
		var want Block
		for j := range v {
			want = want.xor(gfMul(all[j], v[j]))
		}
		if got := chi.dot(v); got != want {
			t.Fatalf("n=%d: dot %v, want %v", n, got, want)
		}
	}
	// 128 COTs with choices u pack into a VOLE on u as a field element;
	// with x′ = x* ⊕ u applied on the Q side, into a VOLE on x*.
	snd, rcv := ferretTestBase(ferretCheckOTs, 9)
	u := Block{rcv.Choices[0], rcv.Choices[1]}
	if gfPack(rcv.T) != gfPack(snd.Q).xor(gfMul(u, snd.Delta)) {
		t.Fatal("Σ T_i·X^i ≠ Σ Q_i·X^i ⊕ u·Δ")
	}
	// A one-leaf check, the leaf the point (w = v ⊕ Δ, x* = χ_0).
	w := []Block{{5, 6}}
	v := []Block{w[0].xor(snd.Delta)}
	c1, err := newFerretChi(Block{9, 9}, 7, 0)
	if err != nil {
		t.Fatal(err)
	}
	adj := c1.at(0).xor(u)
	V := checkSenderHash(c1, v, snd.Q, adj, snd.Delta, 7, 0)
	W := checkReceiverValue(c1, w, rcv.T)
	if !checkHashMatches(W, V, 7, 0) {
		t.Fatal("an honest one-leaf check fails")
	}
	if checkHashMatches(W, checkSenderHash(c1, v, snd.Q, adj.xor(Block{1, 0}), snd.Delta, 7, 0), 7, 0) {
		t.Fatal("a check with a wrong x′ passes")
	}
	if checkHashMatches(W, V, 7, 1) || checkHashMatches(W, V, 8, 0) {
		t.Fatal("the hash does not depend on the iteration and generator")
	}
}

// ferretTamper is a connection that records what it sends and alters its
// sent message number at (if alter is not nil).
type ferretTamper struct {
	*ferretPipe
	at    int
	alter func(msg []uint64)
	sent  [][]uint64
}

func (c *ferretTamper) send(ctx context.Context, msg []uint64) error {
	m := append([]uint64(nil), msg...)
	if len(c.sent) == c.at && c.alter != nil {
		c.alter(m)
	}
	c.sent = append(c.sent, m)
	return c.ferretPipe.send(ctx, m)
}

// TestFerretCheckCatchesSender: an active sender (or a message altered on
// the way) in an iteration after bootstrapping. Altering what the
// receiver uses makes its extend fail with errFerretCheck and return
// nothing, and the receiver refuses every later call; altering a level
// sum the receiver does not use (the other half of its choice) changes
// nothing it computes, and the check passes with correct COTs: that is
// the selective failure the check leaves, one bit of the points.
func TestFerretCheckCatchesSender(t *testing.T) {
	cfg := ferretConfig{setup: ferretTinySetup, main: ferretTinyMain}
	p := cfg.main
	h := p.logBin
	tw := p.treeOTs()
	flip := func(words ...int) func([]uint64) {
		return func(m []uint64) {
			for _, w := range words {
				m[w] ^= 1 << 17
			}
		}
	}
	// sum is the word of tree b's level l sum c in the reply.
	sum := func(b, l, c int) int { return 4*(b*h+l-1) + 2*c }
	for _, c := range []struct {
		name     string
		receiver bool // alter the receiver's message, else the sender's
		at       int  // which message of the party
		alter    func([]uint64)
		// uses, when not nil, says whether the receiver uses the altered
		// block given its choice bit for each tree OT; nil: always.
		uses func(choice func(i int) int) bool
	}{
		{"level sum 0, tree 3 level 2", false, 0, flip(sum(3, 2, 0)), func(ch func(int) int) bool { return ch(3*h+1) == 0 }},
		{"level sum 1, tree 3 level 2", false, 0, flip(sum(3, 2, 1) + 1), func(ch func(int) int) bool { return ch(3*h+1) == 1 }},
		{"level sum 0, tree 0 level 1", false, 0, flip(sum(0, 1, 0)), func(ch func(int) int) bool { return ch(0) == 0 }},
		{"level sum 1, last tree's leaves", false, 0, flip(sum(p.t-1, h, 1)), func(ch func(int) int) bool { return ch(tw-1) == 1 }},
		{"both sums, tree 9 level 4", false, 0, flip(sum(9, 4, 0), sum(9, 4, 1)), nil},
		{"leaf correction, tree 5", false, 0, flip(4*tw + 2*5 + 1), nil},
		{"leaf corrections, trees 0 and 1 alike", false, 0, flip(4*tw, 4*tw+2), nil},
		{"check hash", false, 1, flip(3), nil},
		{"receiver's x′ (sender adjusts wrongly)", true, 1, flip(2), nil},
		{"receiver's seed (sender's other χ)", true, 1, flip(0), nil},
		{"receiver's tree bits (sender masks the other sum)", true, 0, flip(0), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ferretCtx(t)
			s, r := ferretPair(t, cfg, 11)
			ps, pr := ferretPipes()
			if out, errS, errR := ferretRun(ctx, s, r, ps, pr); errS != nil || errR != nil {
				t.Fatal(errS, errR)
			} else {
				checkCOTs(t, s.delta, out)
			}
			u := append([]uint64(nil), r.reserveU...)
			ps, pr = ferretPipes()
			ts, tr := &ferretTamper{ferretPipe: ps, at: -1}, &ferretTamper{ferretPipe: pr, at: -1}
			if c.receiver {
				tr.at, tr.alter = c.at, c.alter
			} else {
				ts.at, ts.alter = c.at, c.alter
			}
			out, errS, errR := ferretRun(ctx, s, r, ts, tr)
			if errS != nil {
				t.Fatalf("sender: %v", errS)
			}
			// The receiver's choice for tree OT i: d_i ⊕ u_{k+i}, with d
			// as it sent it.
			d := tr.sent[0]
			choice := func(i int) int {
				return int((d[i>>6]>>(i&63) ^ u[(p.k+i)>>6]>>((p.k+i)&63)) & 1)
			}
			if c.uses != nil && !c.uses(choice) {
				if errR != nil {
					t.Fatalf("a block the receiver does not use: %v", errR)
				}
				checkCOTs(t, s.delta, out)
				t.Log("the receiver did not use the altered block: the check passed with correct COTs")
				return
			}
			if !errors.Is(errR, errFerretCheck) {
				t.Fatalf("receiver: %v, want the check's error", errR)
			}
			if msg := errR.Error(); !strings.Contains(msg, "inconsistent") {
				t.Errorf("error %q does not say the messages were inconsistent", msg)
			}
			if out.x != nil || out.tr != nil {
				t.Error("a failed check returned COTs")
			}
			ps, pr = ferretPipes()
			if _, _, err := r.extend(ctx, pr); !errors.Is(err, errFerretBroken) {
				t.Fatalf("after a failed check: %v", err)
			}
			if pr.msgs != 0 {
				t.Errorf("a broken receiver sent %d messages", pr.msgs)
			}
		})
	}
}

// TestFerretCheckSelectiveFailure: flipping level sum c of one tree level
// fails the check exactly when the receiver chose c there (its point's
// bit is ¬c), over many instances: both outcomes occur, and the fails
// match the choices.
func TestFerretCheckSelectiveFailure(t *testing.T) {
	cfg := ferretConfig{main: ferretTinyMain}
	p := cfg.main
	ctx := ferretCtx(t)
	fails := 0
	const runs = 16
	for tag := range runs {
		s, r := ferretPair(t, cfg, byte(40+tag))
		u := append([]uint64(nil), r.reserveU...)
		i := 2*p.logBin + 3 // tree 2, level 4
		ps, pr := ferretPipes()
		ts := &ferretTamper{ferretPipe: ps, at: 0, alter: func(m []uint64) { m[4*i] ^= 1 }}
		tr := &ferretTamper{ferretPipe: pr, at: -1}
		_, errS, errR := ferretRun(ctx, s, r, ts, tr)
		if errS != nil {
			t.Fatal(errS)
		}
		chose := (tr.sent[0][i>>6]>>(i&63) ^ u[(p.k+i)>>6]>>((p.k+i)&63)) & 1
		if failed := errors.Is(errR, errFerretCheck); failed != (chose == 0) {
			t.Fatalf("instance %d: receiver chose sum %d, check error %v", tag, chose, errR)
		} else if failed {
			fails++
		}
	}
	if fails == 0 || fails == runs {
		t.Errorf("%d of %d instances failed: the points did not vary", fails, runs)
	}
}

// BenchmarkFerretCheck times one party's inner product Σ_j χ_j·v_j over a
// main-set iteration's n leaves (χ's AES-CTR and the carry-less
// products), the check's CPU cost per party.
func BenchmarkFerretCheck(b *testing.B) {
	v := make([]Block, ferretMain.n)
	fillBlocks(share.NewPRG(share.Seed{3}, "leaves"), v)
	chi, err := newFerretChi(Block{1, 2}, 7, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(16 * len(v)))
	b.ResetTimer()
	for range b.N {
		chi.dot(v)
	}
}

// TestFerretCheckSetupIteration: the check guards the setup iteration
// too (its own set, on the caller's base COTs): an altered leaf
// correction there fails the receiver's first extend.
func TestFerretCheckSetupIteration(t *testing.T) {
	cfg := ferretConfig{setup: ferretTinySetup, main: ferretTinyMain}
	p := cfg.setup
	ctx := ferretCtx(t)
	for _, b := range []int{0, p.t - 1} {
		s, r := ferretPair(t, cfg, 12)
		ps, pr := ferretPipes()
		w := 4*p.treeOTs() + 2*b
		ts := &ferretTamper{ferretPipe: ps, at: 0, alter: func(m []uint64) { m[w] ^= 1 << 40 }}
		_, errS, errR := ferretRun(ctx, s, r, ts, pr)
		if errS != nil {
			t.Fatal(errS)
		}
		if !errors.Is(errR, errFerretCheck) {
			t.Fatalf("tree %d's correction altered in the setup iteration: %v", b, errR)
		}
	}
}

// TestFerretOverlap: with overlap the receiver sends each iteration's
// first message before it receives the last one's check hash, over one
// persistent connection: every iteration's COTs are correct, the receiver
// is one message ahead of the sender after each, and a check hash altered
// in a later iteration still fails that iteration's extend with
// errFerretCheck and no COTs, the next message (already sent) changing
// nothing.
func TestFerretOverlap(t *testing.T) {
	for _, alter := range []bool{false, true} {
		t.Run(fmt.Sprint("altered hash ", alter), func(t *testing.T) {
			cfg := ferretConfig{main: ferretTinyMain, overlap: true}
			ctx := ferretCtx(t)
			s, r := ferretPair(t, cfg, 13)
			ps, pr := ferretPipes()
			ts := &ferretTamper{ferretPipe: ps, at: -1}
			if alter {
				ts.at, ts.alter = 2*3+1, func(m []uint64) { m[0] ^= 1 } // the fourth iteration's hash
			}
			for it := range 5 {
				out, errS, errR := ferretRun(ctx, s, r, ts, pr)
				if errS != nil {
					t.Fatalf("iteration %d: sender: %v", it, errS)
				}
				if alter && it == 3 {
					if !errors.Is(errR, errFerretCheck) || out.x != nil || out.tr != nil {
						t.Fatalf("iteration %d with an altered hash: %v, %d COTs", it, errR, len(out.tr))
					}
					return
				}
				if errR != nil {
					t.Fatalf("iteration %d: receiver: %v", it, errR)
				}
				checkCOTs(t, s.delta, out)
				if pr.msgs != 2*(it+1)+1 || ps.msgs != 2*(it+1) {
					t.Fatalf("after iteration %d: receiver sent %d messages, sender %d; want %d and %d", it, pr.msgs, ps.msgs, 2*(it+1)+1, 2*(it+1))
				}
			}
		})
	}
}

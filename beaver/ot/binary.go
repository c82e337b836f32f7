package ot

import (
	"context"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// The binary kinds' generators: bit-packed AND triples.
func init() {
	Register(beaver.KindAND, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		t, err := g.ANDTriples(ctx, it.N)
		return parts(t.A, t.B, t.C), err
	})
	Register(beaver.KindCrossAND, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		t, err := g.CrossANDTriples(ctx, it.N)
		return parts(t.A, t.B, t.C), err
	})
}

// rotBits runs random OTs with one-bit messages: nSend as sender (m0, m1
// packed), nRecv as receiver (random choices, mc packed). One round.
func (g *Gen) rotBits(ctx context.Context, nSend, nRecv int) (m0, m1, choices, mc []uint64, err error) {
	ps, pr := (nSend+127)&^127, (nRecv+127)&^127
	var u []uint64
	var t []Block
	var tj0 uint64
	if pr > 0 {
		var err error
		u, choices, t, tj0, err = g.extendRecvRandom(ctx, getWords(g.extRecvWords(pr, false))[:0], pr)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		g.stats.OTsReceived += int64(pr)
		g.stats.ExtensionWords += int64(len(u))
	}
	in, err := g.exchange(ctx, u, g.extSendWords(ps, false))
	if err != nil {
		return nil, nil, nil, nil, err
	}
	putWords(u)
	if ps > 0 {
		q, j0, err := g.extendSend(ctx, in, ps, false)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		g.stats.OTsSent += int64(ps)
		h0, h1 := getWords(ps), getWords(ps)
		g.h.hash(h0, q, Block{}, j0, 1)
		g.h.hash(h1, q, g.snd.delta, j0, 1)
		putBlocks(q)
		m0, m1 = packLSB(h0, nSend), packLSB(h1, nSend)
		putWords(h0)
		putWords(h1)
	}
	putWords(in)
	if pr > 0 {
		h := getWords(pr)
		g.h.hash(h, t, Block{}, tj0, 1)
		putBlocks(t)
		mc = packLSB(h, nRecv)
		putWords(h)
		choices = choices[:share.PackedWords(nRecv)]
		share.MaskTail(choices, nRecv)
	}
	return m0, m1, choices, mc, nil
}

// packLSB packs the low bit of the first n words of h, 64 per word.
func packLSB(h []uint64, n int) []uint64 {
	out := make([]uint64, share.PackedWords(n))
	for j := range n {
		out[j/64] |= (h[j] & 1) << (j % 64)
	}
	return out
}

// ANDTriples returns XOR shares of words×64 AND triples, bit-packed. Two
// random OTs per triple, one per direction (ALSZ13 §5): in the OT where this
// party sends (messages m0, m1) it sets b = m0⊕m1 and u = m0, in the one
// where it receives with random choice a it gets v = m_a; then
// c = a∧b ⊕ u ⊕ v. No corrections: 256 bytes per word (4 per triple) of
// extension matrix from each party, one round.
func (g *Gen) ANDTriples(ctx context.Context, words int) (beaver.BitTriple, error) {
	n, err := checkSize("AND triples", words, 64)
	if err != nil {
		return beaver.BitTriple{}, err
	}
	if err := g.begin(ctx, "AND triples"); err != nil {
		return beaver.BitTriple{}, err
	}
	m0, m1, a, v, err := g.rotBits(ctx, n, n)
	if err != nil {
		return beaver.BitTriple{}, g.end("AND triples", err)
	}
	b := make([]uint64, words)
	c := make([]uint64, words)
	for i := range words {
		b[i] = m0[i] ^ m1[i]
		c[i] = a[i]&b[i] ^ m0[i] ^ v[i]
	}
	return beaver.BitTriple{A: a[:words:words], B: b, C: c}, g.end("AND triples", nil)
}

// CrossANDTriples returns AND triples for a bit u of party 0 times a bit v of
// party 1 (see beaver.BitTriple): one OT per triple with party 1 choosing v and a
// one-bit correction u from party 0. Party 1 sends 4 bytes of extension
// matrix per triple, party 0 one bit.
func (g *Gen) CrossANDTriples(ctx context.Context, words int) (beaver.BitTriple, error) {
	if _, err := checkSize("cross AND triples", words, 64); err != nil {
		return beaver.BitTriple{}, err
	}
	if err := g.begin(ctx, "cross AND triples"); err != nil {
		return beaver.BitTriple{}, err
	}
	mine := g.draw(words)
	c := make([]uint64, words)
	dir := cotDir{groups: words, width: 1, bits: &oneBit}
	var snd cotSend
	var rcv cotRecv
	if g.party == 0 {
		x := make([]uint64, 1)
		snd = cotSend{dir: dir,
			x: func(gi, t int) []uint64 {
				x[0] = mine[gi] >> t & 1
				return x
			},
			acc: func(gi, t int, a []uint64) { c[gi] |= (a[0] & 1) << t },
		}
	} else {
		rcv = cotRecv{dir: dir, choice: mine,
			acc: func(gi, t int, cv []uint64) { c[gi] |= (cv[0] & 1) << t },
		}
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return beaver.BitTriple{}, g.end("cross AND triples", err)
	}
	if g.party == 0 {
		return beaver.BitTriple{A: mine, C: c}, g.end("cross AND triples", nil)
	}
	return beaver.BitTriple{B: mine, C: c}, g.end("cross AND triples", nil)
}

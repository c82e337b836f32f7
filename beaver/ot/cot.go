package ot

import (
	"context"
	"fmt"
)

// The correlated-OT engine. A direction is a batch of OTs in groups of 64:
// OT (g, t) is position t of group g, its choice is bit t of the receiver's
// word g, and its correlation is a vector of width words given by the
// sender. Position t carries a correction of bits[t] bits per word, so its
// outputs are defined modulo 2^bits[t] (Gilboa's products need 64−t bits at
// bit position t; that is the short-string saving).
//
// For OT (g, t) with index j, the sender computes h0 = H_w(j, q_j) and
// h1 = H_w(j, q_j ⊕ Δ) and sends d = h0 + x − h1 mod 2^bits[t]; its output
// is a = h0. The receiver computes c = H_w(j, t_j) + r·d, so that
// c − a = r·x mod 2^bits[t]: additive shares (−a, c) of r·x.
//
// Both directions of a call run at once, chunk by chunk. Chunk i's
// extension message (softspoken.go: the trees in a generator's first call,
// then 4 bytes per OT, then the consistency check's 1,056 bytes, kos.go)
// travels in the same message as chunk i−1's corrections, and the sender
// checks it before it computes chunk i's corrections, so a call of C
// chunks takes C+1 rounds (2 for anything that fits in one chunk).

// cotDir is the public shape of one direction (both parties know it).
type cotDir struct {
	groups int
	width  int
	bits   *[64]uint8
}

// bitsPerGroup returns the correction bits of one group.
func (d cotDir) bitsPerGroup() int {
	s := 0
	for _, b := range d.bits {
		s += int(b)
	}
	return s * d.width
}

// chunkTarget bounds the bytes of one chunk's messages.
var chunkTarget = 8 << 20

// chunk is a range of groups.
type chunk struct{ g0, g1 int }

// ots returns the OTs of the chunk padded to a multiple of 128.
func (c chunk) ots() int { return (64*(c.g1-c.g0) + 127) &^ 127 }

// chunks splits the direction into chunks of about chunkTarget bytes, for an
// extension that sends extWords words a group.
func (d cotDir) chunks(extWords int) []chunk {
	if d.groups == 0 {
		return nil
	}
	per := max(2, chunkTarget/(8*extWords+d.bitsPerGroup()/8)) &^ 1
	var out []chunk
	for g := 0; g < d.groups; g += per {
		out = append(out, chunk{g, min(g+per, d.groups)})
	}
	return out
}

// corrWords returns the words of a chunk's packed corrections.
func (d cotDir) corrWords(c chunk) int {
	return ((c.g1-c.g0)*d.bitsPerGroup() + 63) / 64
}

// cotSend is this party's sender side of a direction.
type cotSend struct {
	dir cotDir
	// x returns the correlation of OT (g, t): width words (the slice is
	// only read until the next call).
	x func(g, t int) []uint64
	// acc receives the sender's value a of OT (g, t): its share of r·x is −a.
	acc func(g, t int, a []uint64)
}

// cotRecv is this party's receiver side of a direction.
type cotRecv struct {
	dir    cotDir
	choice []uint64 // one word per group
	// acc receives the receiver's value c of OT (g, t): its share of r·x.
	acc func(g, t int, c []uint64)
}

// mask returns the low L bits set (0 ≤ L ≤ 64; none for L = 0, so a
// position with no correction bits writes and reads nothing).
func mask(L uint8) uint64 { return ^uint64(0) >> (64 - L) }

// runCOT runs one call of the engine: snd is this party's sender direction
// (the peer's receiver direction), rcv its receiver direction; either may
// have zero groups. Both parties pass mirrored shapes.
func (g *Gen) runCOT(ctx context.Context, snd cotSend, rcv cotRecv) error {
	if len(rcv.choice) < rcv.dir.groups {
		return fmt.Errorf("internal: %d choice words for %d groups", len(rcv.choice), rcv.dir.groups)
	}
	sch, rch := snd.dir.chunks(g.extGroupWords()), rcv.dir.chunks(g.extGroupWords())
	rounds := max(len(sch), len(rch)) + 1
	if len(sch) == 0 && len(rch) == 0 {
		return nil
	}
	var pendD []uint64 // my corrections of sender chunk it−1
	var prevT []Block  // my rows of receiver chunk it−1
	var prevJ0 uint64
	// Every buffer of a round is scratch memory (scratch.go), handed back
	// once the round is done with it; on an error the call's are dropped.
	for it := range rounds {
		outW := len(pendD)
		if it < len(rch) {
			outW += g.extRecvWords(rch[it].ots(), true)
		}
		out := getWords(outW)[:0]
		var curT []Block
		var curJ0 uint64
		if it < len(rch) {
			c := rch[it]
			n := c.ots()
			ch := getWords(n / 64)
			copy(ch, rcv.choice[c.g0:c.g1])
			clear(ch[c.g1-c.g0:])
			k := len(out)
			var err error
			out, curT, curJ0, err = g.extendRecv(ctx, out, ch, n)
			putWords(ch)
			if err != nil {
				return fmt.Errorf("round %d of %d: %w", it+1, rounds, err)
			}
			g.stats.OTsReceived += int64(n)
			g.stats.ExtensionWords += int64(len(out) - k)
		}
		out = append(out, pendD...)
		putWords(pendD)
		inU := 0
		if it < len(sch) {
			inU = g.extSendWords(sch[it].ots(), true)
		}
		inD := 0
		if it >= 1 && it-1 < len(rch) {
			inD = rcv.dir.corrWords(rch[it-1])
		}
		in, err := g.exchange(ctx, out, inU+inD)
		if err != nil {
			return fmt.Errorf("round %d of %d: %w", it+1, rounds, err)
		}
		putWords(out) // sent: Exchange returns once the send is done
		pendD = nil
		if it < len(sch) {
			c := sch[it]
			q, j0, err := g.extendSend(ctx, in[:inU], c.ots(), true)
			if err != nil {
				return fmt.Errorf("round %d of %d: %w", it+1, rounds, err)
			}
			g.stats.OTsSent += int64(c.ots())
			pendD = g.cotSender(snd, c, q, j0)
			putBlocks(q)
		}
		if inD > 0 {
			if err := g.cotReceiver(rcv, rch[it-1], prevT, prevJ0, in[inU:]); err != nil {
				return err
			}
		}
		putWords(in)
		putBlocks(prevT)
		prevT, prevJ0 = curT, curJ0
	}
	return nil
}

// cotSender computes the corrections of chunk c and hands the sender's values
// to snd.acc.
func (g *Gen) cotSender(snd cotSend, c chunk, q []Block, j0 uint64) []uint64 {
	w := snd.dir.width
	bits := snd.dir.bits
	h0 := getWords(64 * w)
	h1 := getWords(64 * w)
	defer putWords(h0)
	defer putWords(h1)
	bw := bitWriter{buf: getWords(snd.dir.corrWords(c))[:0]}
	for gi := c.g0; gi < c.g1; gi++ {
		k := 64 * (gi - c.g0)
		rows := q[k : k+64]
		g.h.hash(h0, rows, Block{}, j0+uint64(k), w)
		g.h.hash(h1, rows, g.snd.delta, j0+uint64(k), w)
		for t := range 64 {
			L := bits[t]
			x := snd.x(gi, t)
			a := h0[t*w : (t+1)*w]
			b := h1[t*w : (t+1)*w]
			m := mask(L)
			for e := range w {
				bw.write((a[e]+x[e]-b[e])&m, L)
			}
			snd.acc(gi, t, a)
		}
	}
	return bw.flush()
}

// cotReceiver applies the peer's corrections d of chunk c and hands the
// receiver's values to rcv.acc.
func (g *Gen) cotReceiver(rcv cotRecv, c chunk, t []Block, j0 uint64, d []uint64) error {
	if len(d) != rcv.dir.corrWords(c) {
		return fmt.Errorf("corrections of %d words, want %d", len(d), rcv.dir.corrWords(c))
	}
	w := rcv.dir.width
	bits := rcv.dir.bits
	h := getWords(64 * w)
	defer putWords(h)
	br := bitReader{buf: d}
	for gi := c.g0; gi < c.g1; gi++ {
		k := 64 * (gi - c.g0)
		g.h.hash(h, t[k:k+64], Block{}, j0+uint64(k), w)
		ch := rcv.choice[gi]
		for tt := range 64 {
			L := bits[tt]
			r := -(ch >> tt & 1) // all ones when the choice is 1
			v := h[tt*w : (tt+1)*w]
			for e := range w {
				v[e] += br.read(L) & r
			}
			rcv.acc(gi, tt, v)
		}
	}
	if !br.ok() {
		return fmt.Errorf("corrections: read past %d words", len(d))
	}
	return nil
}

// bitWriter packs values of 0–64 bits, least significant first (a 0-bit
// value writes nothing).
type bitWriter struct {
	buf []uint64
	acc uint64
	n   uint8 // bits in acc, < 64
}

// write appends the low L bits of v (v < 2^L).
func (w *bitWriter) write(v uint64, L uint8) {
	w.acc |= v << w.n
	total := w.n + L
	if total >= 64 {
		w.buf = append(w.buf, w.acc)
		w.acc = v >> (64 - w.n) // zero when n == 0
		w.n = total - 64
	} else {
		w.n = total
	}
}

// flush returns the packed words (the last one zero-padded).
func (w *bitWriter) flush() []uint64 {
	if w.n > 0 {
		w.buf = append(w.buf, w.acc)
		w.acc, w.n = 0, 0
	}
	return w.buf
}

// bitReader unpacks what bitWriter packed. Reading past the end yields
// zeros and makes ok false (never a panic).
type bitReader struct {
	buf  []uint64
	pos  int
	acc  uint64
	n    uint8
	over bool
}

func (r *bitReader) read(L uint8) uint64 {
	if r.n >= L {
		v := r.acc & mask(L)
		if L == 64 {
			r.acc = 0
		} else {
			r.acc >>= L
		}
		r.n -= L
		return v
	}
	var next uint64
	if r.pos < len(r.buf) {
		next = r.buf[r.pos]
		r.pos++
	} else {
		r.over = true
	}
	v := (r.acc | next<<r.n) & mask(L)
	used := L - r.n
	if used == 64 {
		r.acc = 0
	} else {
		r.acc = next >> used
	}
	r.n = 64 - used
	return v
}

func (r *bitReader) ok() bool { return !r.over }

package ot

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// ROT is one party's part of random OTs with 128-bit messages: the sender
// gets M0 and M1, the receiver its random Choices (bit j of word j/64) and
// M[j] = M_{choice_j}[j].
type ROT struct {
	M0, M1  []Block // sender
	Choices []uint64
	M       []Block // receiver
}

// DeltaOT is one party's part of correlated OTs over GF(2)^128 (the raw IKNP
// output): the sender gets its Δ and Q, the receiver random Choices and
// T[j] = Q[j] ⊕ choice_j·Δ.
type DeltaOT struct {
	Delta   Block   // sender
	Q       []Block // sender
	Choices []uint64
	T       []Block // receiver
}

// MaxWords bounds every part of one request, as for the dealer.
const MaxWords = beaver.MaxItemWords

// checkSize validates a product of dimensions (at most MaxWords, as the
// dealer's beaver.Request.Validate bounds them).
func checkSize(what string, dims ...int) (int, error) {
	p, err := share.BoundedProduct(MaxWords, dims...)
	if err != nil {
		return 0, fmt.Errorf("ot: %s: %w", what, err)
	}
	return p, nil
}

var (
	// gilboaBits: the product bit t only needs the low 64−t bits.
	gilboaBits = func() (b [64]uint8) {
		for t := range b {
			b[t] = uint8(64 - t)
		}
		return
	}()
	fullBits = func() (b [64]uint8) {
		for t := range b {
			b[t] = 64
		}
		return
	}()
	oneBit = func() (b [64]uint8) {
		for t := range b {
			b[t] = 1
		}
		return
	}()
)

// matShape is one direction of batched Gilboa products L·R: L (batch×m×k) is
// the receiver's, its entries' bits the choices; R (batch×k×n) the sender's,
// row l of R the correlation of the 64 OTs of entry (i, l) of L.
type matShape struct{ batch, m, k, n int }

func (s matShape) groups() int {
	if s.n == 0 {
		return 0
	}
	return s.batch * s.m * s.k
}

func (s matShape) dir() cotDir { return cotDir{groups: s.groups(), width: s.n, bits: &gilboaBits} }

// crossMat returns shares of L·R in the direction where this party receives
// (rs, L) and of the peer's L'·R in the direction where it sends (ss, R).
// Gilboa: entry y of L times row x of R is Σ_t 2^t·y_t·x, one OT per bit.
func (g *Gen) crossMat(ctx context.Context, rs matShape, L []uint64, ss matShape, R []uint64) (recvOut, sendOut []uint64, err error) {
	recvOut = make([]uint64, rs.batch*rs.m*rs.n)
	sendOut = make([]uint64, ss.batch*ss.m*ss.n)
	snd := cotSend{
		dir: ss.dir(),
		x: func(gi, t int) []uint64 {
			b, l := gi/(ss.m*ss.k), gi%ss.k
			off := (b*ss.k + l) * ss.n
			return R[off : off+ss.n]
		},
		acc: func(gi, t int, a []uint64) {
			row := gi / ss.k
			o := sendOut[row*ss.n : (row+1)*ss.n]
			for e, v := range a {
				o[e] -= v << t
			}
		},
	}
	rcv := cotRecv{
		dir:    rs.dir(),
		choice: L,
		acc: func(gi, t int, c []uint64) {
			row := gi / rs.k
			o := recvOut[row*rs.n : (row+1)*rs.n]
			for e, v := range c {
				o[e] += v << t
			}
		},
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return nil, nil, err
	}
	return recvOut, sendOut, nil
}

// Triples returns this party's shares of n elementwise triples c = a·b over
// Z_2^64. Each party draws its shares of a and b; the cross products
// a0·b1 and a1·b0 are Gilboa products, 64 OTs each, one per direction.
// Cost per triple and party: 1,024 bytes of IKNP matrix and 260 bytes of
// corrections sent, 2 rounds in all (per 6,500 triples or so, one more).
func (g *Gen) Triples(ctx context.Context, n int) (beaver.Triple, error) {
	if _, err := checkSize("triples", n); err != nil {
		return beaver.Triple{}, err
	}
	if err := g.begin(ctx, "triples"); err != nil {
		return beaver.Triple{}, err
	}
	a, b := g.draw(n), g.draw(n)
	s := matShape{n, 1, 1, 1}
	ra, sa, err := g.crossMat(ctx, s, b, s, a)
	if err != nil {
		return beaver.Triple{}, g.end("triples", err)
	}
	c := make([]uint64, n)
	for i := range c {
		c[i] = a[i]*b[i] + ra[i] + sa[i]
	}
	return beaver.Triple{A: a, B: b, C: c}, g.end("triples", nil)
}

// SquarePairs returns shares of n square pairs (a, a²): a² = a0² + a1² +
// 2·a0·a1, one Gilboa product (party 1 chooses with a1, party 0's
// correlation is 2·a0). Party 1 sends 1,024 bytes per pair, party 0 260.
func (g *Gen) SquarePairs(ctx context.Context, n int) (beaver.SquarePair, error) {
	if _, err := checkSize("square pairs", n); err != nil {
		return beaver.SquarePair{}, err
	}
	if err := g.begin(ctx, "square pairs"); err != nil {
		return beaver.SquarePair{}, err
	}
	a := g.draw(n)
	var rs, ss matShape
	var L, R []uint64
	if g.party == 0 {
		ss = matShape{n, 1, 1, 1}
		R = make([]uint64, n)
		for i := range R {
			R[i] = 2 * a[i]
		}
	} else {
		rs, L = matShape{n, 1, 1, 1}, a
	}
	ro, so, err := g.crossMat(ctx, rs, L, ss, R)
	if err != nil {
		return beaver.SquarePair{}, g.end("square pairs", err)
	}
	a2 := make([]uint64, n)
	for i := range a2 {
		a2[i] = a[i] * a[i]
		if g.party == 0 {
			a2[i] += so[i]
		} else {
			a2[i] += ro[i]
		}
	}
	return beaver.SquarePair{A: a, A2: a2}, g.end("square pairs", nil)
}

// transposeBatch returns the batch of m×n matrices in x transposed (n×m).
func transposeBatch(x []uint64, batch, m, n int) []uint64 {
	out := make([]uint64, len(x))
	for b := range batch {
		src := x[b*m*n : (b+1)*m*n]
		dst := out[b*m*n : (b+1)*m*n]
		for i := range m {
			for j := range n {
				dst[j*m+i] = src[i*n+j]
			}
		}
	}
	return out
}

// MatTriples returns shares of batch matrix triples: A batch×m×k, B
// batch×k×n, C = A·B. The cross products A0·B1 and A1·B0 are Gilboa products
// with the smaller operand's entries as the choices: 64·batch·min(m,n)·k OTs
// and 260·batch·m·k·n bytes of corrections per direction.
func (g *Gen) MatTriples(ctx context.Context, batch, m, k, n int) (beaver.Triple, error) {
	na, err := checkSize("mat triples A", batch, m, k)
	if err != nil {
		return beaver.Triple{}, err
	}
	nb, err := checkSize("mat triples B", batch, k, n)
	if err != nil {
		return beaver.Triple{}, err
	}
	if _, err := checkSize("mat triples C", batch, m, n); err != nil {
		return beaver.Triple{}, err
	}
	if err := g.begin(ctx, "mat triples"); err != nil {
		return beaver.Triple{}, err
	}
	a, b := g.draw(na), g.draw(nb)
	c := make([]uint64, batch*m*n)
	if err := share.BatchMatMulInto(c, a, b, batch, m, k, n); err != nil {
		return beaver.Triple{}, g.end("mat triples", err)
	}
	var ro, so []uint64
	if m <= n {
		s := matShape{batch, m, k, n}
		ro, so, err = g.crossMat(ctx, s, a, s, b)
	} else {
		// (A·B)ᵀ = Bᵀ·Aᵀ: the B holder chooses, fewer OTs.
		s := matShape{batch, n, k, m}
		ro, so, err = g.crossMat(ctx, s, transposeBatch(b, batch, k, n), s, transposeBatch(a, batch, m, k))
		if err == nil {
			ro, so = transposeBatch(ro, batch, n, m), transposeBatch(so, batch, n, m)
		}
	}
	if err != nil {
		return beaver.Triple{}, g.end("mat triples", err)
	}
	for i := range c {
		c[i] += ro[i] + so[i]
	}
	return beaver.Triple{A: a, B: b, C: c}, g.end("mat triples", nil)
}

// WeightTriples returns this party's part of a weight-mask correlation for a
// product X·W with X m×k and W k×n: party 0 passes its mask B (k×n, reused
// for every call on one weight matrix), party 1 passes nil and receives a
// fresh uniform mask A (m×k). Both get shares C of A·B. When m ≤ n, party 1
// is the OT receiver choosing with the bits of A (64·m·k OTs) and party 0
// the sender whose correlation for entry (i, l) is row l of B; otherwise the
// roles swap (choices from B, 64·n·k OTs). Corrections: 260·m·k·n bytes.
func (g *Gen) WeightTriples(ctx context.Context, B []uint64, m, k, n int) (beaver.WeightTriple, error) {
	na, err := checkSize("weight triples A", m, k)
	if err != nil {
		return beaver.WeightTriple{}, err
	}
	if _, err := checkSize("weight triples B", k, n); err != nil {
		return beaver.WeightTriple{}, err
	}
	if _, err := checkSize("weight triples C", m, n); err != nil {
		return beaver.WeightTriple{}, err
	}
	switch {
	case g.party == 0 && len(B) != k*n:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight triples: mask B has %d words, want %d×%d", len(B), k, n)
	case g.party == 1 && B != nil:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight triples: party 1 passed a weight mask; only party 0 holds one")
	}
	if err := g.begin(ctx, "weight triples"); err != nil {
		return beaver.WeightTriple{}, err
	}
	var A []uint64
	if g.party == 1 {
		A = g.draw(na)
	}
	var out []uint64
	var none matShape
	if m <= n {
		s := matShape{1, m, k, n}
		if g.party == 1 {
			out, _, err = g.crossMat(ctx, s, A, none, nil)
		} else {
			_, out, err = g.crossMat(ctx, none, nil, s, B)
		}
	} else {
		s := matShape{1, n, k, m}
		if g.party == 0 {
			out, _, err = g.crossMat(ctx, s, transposeBatch(B, 1, k, n), none, nil)
		} else {
			_, out, err = g.crossMat(ctx, none, nil, s, transposeBatch(A, 1, m, k))
		}
		if err == nil {
			out = transposeBatch(out, 1, n, m)
		}
	}
	if err != nil {
		return beaver.WeightTriple{}, g.end("weight triples", err)
	}
	return beaver.WeightTriple{A: A, C: out}, g.end("weight triples", nil)
}

// WeightVectorTriples returns this party's part of the correlation for an
// elementwise product X ⊙ γ, X m×n, γ 1×n of party 0 broadcast over rows:
// party 0 passes its mask b (n words), party 1 passes nil and receives A
// (m×n); both get shares C of A ⊙ b. Party 0 chooses with the bits of b (64·n
// OTs), party 1's correlation for b_j is column j of A; corrections
// 260·m·n bytes.
func (g *Gen) WeightVectorTriples(ctx context.Context, b []uint64, m, n int) (beaver.WeightTriple, error) {
	na, err := checkSize("weight vector triples", m, n)
	if err != nil {
		return beaver.WeightTriple{}, err
	}
	switch {
	case g.party == 0 && len(b) != n:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight vector triples: mask has %d words, want %d", len(b), n)
	case g.party == 1 && b != nil:
		return beaver.WeightTriple{}, fmt.Errorf("ot: weight vector triples: party 1 passed a weight mask; only party 0 holds one")
	}
	if err := g.begin(ctx, "weight vector triples"); err != nil {
		return beaver.WeightTriple{}, err
	}
	var A, out []uint64
	var none matShape
	s := matShape{n, 1, 1, m} // batch j: b_j (1×1) · column j of A (1×m)
	if g.party == 0 {
		out, _, err = g.crossMat(ctx, s, b, none, nil)
	} else {
		A = g.draw(na)
		_, out, err = g.crossMat(ctx, none, nil, s, transposeBatch(A, 1, m, n))
	}
	if err != nil {
		return beaver.WeightTriple{}, g.end("weight vector triples", err)
	}
	return beaver.WeightTriple{A: A, C: transposeBatch(out, 1, n, m)}, g.end("weight vector triples", nil)
}

// rotBits runs random OTs with one-bit messages: nSend as sender (m0, m1
// packed), nRecv as receiver (random choices, mc packed). One round.
func (g *Gen) rotBits(ctx context.Context, nSend, nRecv int) (m0, m1, choices, mc []uint64, err error) {
	ps, pr := (nSend+127)&^127, (nRecv+127)&^127
	var u []uint64
	var t []Block
	var tj0 uint64
	if pr > 0 {
		choices = g.draw(pr / 64)
		u, t, tj0 = g.rcv.extend(choices, pr)
		g.stats.OTsReceived += int64(pr)
	}
	in, err := g.exchange(ctx, u, 2*ps)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if ps > 0 {
		q, j0 := g.snd.extend(in, ps)
		g.stats.OTsSent += int64(ps)
		h0, h1 := make([]uint64, ps), make([]uint64, ps)
		g.h.hash(h0, q, Block{}, j0, 1)
		g.h.hash(h1, q, g.snd.delta, j0, 1)
		m0, m1 = packLSB(h0, nSend), packLSB(h1, nSend)
	}
	if pr > 0 {
		h := make([]uint64, pr)
		g.h.hash(h, t, Block{}, tj0, 1)
		mc = packLSB(h, nRecv)
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
// c = a∧b ⊕ u ⊕ v. No corrections: 1,024 bytes per word (16 per triple) from
// each party, one round.
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
// one-bit correction u from party 0. Party 1 sends 16 bytes per triple,
// party 0 one bit.
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

// truncBits returns the correction widths for truncation by 2^f: the
// product bit z_t = ρ0_t·ρ1_t enters r with weight 2^(t+1), the shifted low
// part with 2^(t−f+1) (f ≤ t ≤ 62) and the top bit with 2 (t = 63), so it is
// needed modulo 2^(63−t), 2^(63−t+f) and 2^63 respectively.
func truncBits(f uint) (b [64]uint8) {
	for t := range 64 {
		switch {
		case t == 63:
			b[t] = 63
		case uint(t) < f:
			b[t] = uint8(63 - t)
		default:
			b[t] = uint8(63 - t + int(f))
		}
	}
	return b
}

// TruncPairs returns n truncation pairs for 2^fracBits (1 ≤ fracBits ≤ 62):
// each party draws a word ρ_p, r = ρ0 ⊕ ρ1, and each bit r_t = ρ0_t + ρ1_t −
// 2·ρ0_t·ρ1_t is made arithmetic with one correlated OT per bit (party 1
// choosing with ρ1_t, party 0's correlation ρ0_t), after which r, r>>63 and
// (r mod 2^63)>>f are linear in the shares. Party 1 sends 1,024 bytes per
// pair, party 0 the corrections (354 bytes for f = 16), 2 rounds.
func (g *Gen) TruncPairs(ctx context.Context, n int, fracBits uint) (beaver.TruncPair, error) {
	if _, err := checkSize("trunc pairs", n); err != nil {
		return beaver.TruncPair{}, err
	}
	if fracBits < 1 || fracBits > 62 {
		return beaver.TruncPair{}, fmt.Errorf("ot: trunc pairs: fracBits %d outside [1, 62]", fracBits)
	}
	if err := g.begin(ctx, "trunc pairs"); err != nil {
		return beaver.TruncPair{}, err
	}
	f := fracBits
	rho := g.draw(n)
	R := make([]uint64, n)
	msb := make([]uint64, n)
	low := make([]uint64, n)
	for i, x := range rho {
		R[i], msb[i], low[i] = x, x>>63, (x<<1)>>(f+1)
	}
	// s is this party's share of z_t (−a for the sender, c for the receiver).
	add := func(gi, t int, s uint64) {
		R[gi] -= s << (t + 1)
		if uint(t) >= f && t <= 62 {
			low[gi] -= s << (uint(t) - f + 1)
		}
		if t == 63 {
			msb[gi] -= s << 1
		}
	}
	bits := truncBits(f)
	dir := cotDir{groups: n, width: 1, bits: &bits}
	var snd cotSend
	var rcv cotRecv
	if g.party == 0 {
		x := make([]uint64, 1)
		snd = cotSend{dir: dir,
			x: func(gi, t int) []uint64 {
				x[0] = rho[gi] >> t & 1
				return x
			},
			acc: func(gi, t int, a []uint64) { add(gi, t, -a[0]) },
		}
	} else {
		rcv = cotRecv{dir: dir, choice: rho,
			acc: func(gi, t int, c []uint64) { add(gi, t, c[0]) },
		}
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return beaver.TruncPair{}, g.end("trunc pairs", err)
	}
	return beaver.TruncPair{R: R, MSB: msb, LowShifted: low}, g.end("trunc pairs", nil)
}

// BitPairs returns n random shared bits r = ρ0 ⊕ ρ1 (each party draws its
// ρ_p) with their multiplication pairs. With A = A0 + A1,
// A·r = A0ρ0 + A1ρ1 + ρ1·A0(1−2ρ0) + ρ0·A1(1−2ρ1): one OT per bit and
// direction, party 1 choosing with ρ1 against party 0's correlation
// (ρ0, A0(1−2ρ0)), party 0 choosing with ρ0 against A1(1−2ρ1). Per bit each
// party sends 16 bytes of IKNP matrix; party 0 16 and party 1 8 bytes of
// corrections; 2 rounds.
func (g *Gen) BitPairs(ctx context.Context, n int) (beaver.BitPair, error) {
	if _, err := checkSize("bit pairs", n); err != nil {
		return beaver.BitPair{}, err
	}
	if err := g.begin(ctx, "bit pairs"); err != nil {
		return beaver.BitPair{}, err
	}
	groups := share.PackedWords(n)
	rho := g.draw(groups)
	share.MaskTail(rho, n)
	A := g.draw(n)
	arith := make([]uint64, n)
	ar := make([]uint64, n)
	bit := func(p int) uint64 { return rho[p/64] >> (p % 64) & 1 }
	for p := range n {
		arith[p] = bit(p)
		ar[p] = A[p] * bit(p)
	}
	dir0 := cotDir{groups: groups, width: 2, bits: &fullBits} // party 0 sends
	dir1 := cotDir{groups: groups, width: 1, bits: &fullBits} // party 1 sends
	x := make([]uint64, 2)
	var snd cotSend
	var rcv cotRecv
	if g.party == 0 {
		snd = cotSend{dir: dir0,
			x: func(gi, t int) []uint64 {
				p := 64*gi + t
				x[0], x[1] = 0, 0
				if p < n {
					x[0] = bit(p)
					x[1] = A[p] * (1 - 2*bit(p))
				}
				return x
			},
			acc: func(gi, t int, a []uint64) {
				if p := 64*gi + t; p < n {
					arith[p] += 2 * a[0]
					ar[p] -= a[1]
				}
			},
		}
		rcv = cotRecv{dir: dir1, choice: rho,
			acc: func(gi, t int, c []uint64) {
				if p := 64*gi + t; p < n {
					ar[p] += c[0]
				}
			},
		}
	} else {
		snd = cotSend{dir: dir1,
			x: func(gi, t int) []uint64 {
				p := 64*gi + t
				x[0] = 0
				if p < n {
					x[0] = A[p] * (1 - 2*bit(p))
				}
				return x[:1]
			},
			acc: func(gi, t int, a []uint64) {
				if p := 64*gi + t; p < n {
					ar[p] -= a[0]
				}
			},
		}
		rcv = cotRecv{dir: dir0, choice: rho,
			acc: func(gi, t int, c []uint64) {
				if p := 64*gi + t; p < n {
					arith[p] -= 2 * c[0]
					ar[p] += c[1]
				}
			},
		}
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return beaver.BitPair{}, g.end("bit pairs", err)
	}
	return beaver.BitPair{Packed: rho, Arith: arith, A: A, AR: ar}, g.end("bit pairs", nil)
}

// RandomOTs runs n random OTs with 128-bit messages in which party sender is
// the sender: M0[j] = H(j, q_j), M1[j] = H(j, q_j ⊕ Δ), the receiver's
// M[j] = H(j, t_j). The receiver sends 16 bytes per OT, one round.
func (g *Gen) RandomOTs(ctx context.Context, n, sender int) (ROT, error) {
	var r ROT
	err := g.deltaOTs(ctx, n, sender, "random OTs", func(j0 uint64, d DeltaOT) {
		if g.party == sender {
			r.M0, r.M1 = make([]Block, n), make([]Block, n)
			g.h.hashBlocks(r.M0, d.Q, Block{}, j0)
			g.h.hashBlocks(r.M1, d.Q, d.Delta, j0)
			return
		}
		r.Choices, r.M = d.Choices, make([]Block, n)
		g.h.hashBlocks(r.M, d.T, Block{}, j0)
	})
	return r, err
}

// DeltaOTs runs n correlated OTs over GF(2)^128 with random choices in which
// party sender is the sender (see DeltaOT): the IKNP output without the
// hash. The receiver sends 16 bytes per OT, one round.
func (g *Gen) DeltaOTs(ctx context.Context, n, sender int) (DeltaOT, error) {
	var r DeltaOT
	err := g.deltaOTs(ctx, n, sender, "Δ-OTs", func(_ uint64, d DeltaOT) { r = d })
	return r, err
}

// deltaOTs runs the IKNP extension for n OTs in one direction and hands the
// index of the first OT and the result to done, under the generator's lock.
func (g *Gen) deltaOTs(ctx context.Context, n, sender int, what string, done func(uint64, DeltaOT)) error {
	if _, err := checkSize(what, n); err != nil {
		return err
	}
	if sender != 0 && sender != 1 {
		return fmt.Errorf("ot: %s: sender %d, want 0 or 1", what, sender)
	}
	if err := g.begin(ctx, what); err != nil {
		return err
	}
	p := (n + 127) &^ 127
	if g.party == sender {
		in, err := g.exchange(ctx, nil, 2*p)
		if err != nil {
			return g.end(what, err)
		}
		var q []Block
		var j0 uint64
		if p > 0 {
			q, j0 = g.snd.extend(in, p)
			g.stats.OTsSent += int64(p)
		}
		done(j0, DeltaOT{Delta: g.snd.delta, Q: q[:n:n]})
		return g.end(what, nil)
	}
	ch := g.draw(p / 64)
	var u []uint64
	var t []Block
	var j0 uint64
	if p > 0 {
		u, t, j0 = g.rcv.extend(ch, p)
		g.stats.OTsReceived += int64(p)
	}
	if _, err := g.exchange(ctx, u, 0); err != nil {
		return g.end(what, err)
	}
	ch = ch[:share.PackedWords(n)]
	share.MaskTail(ch, n)
	done(j0, DeltaOT{Choices: ch, T: t[:n:n]})
	return g.end(what, nil)
}

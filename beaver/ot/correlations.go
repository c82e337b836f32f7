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

// DeltaOT is one party's part of correlated OTs over GF(2)^128 (the raw
// extension output): the sender gets its Δ and Q, the receiver random Choices and
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
	// gilboaRing[ℓ]: Gilboa's products mod 2^ℓ, whose bit t needs the low
	// ℓ − t bits for t < ℓ and none for t ≥ ℓ (ℓ(ℓ+1)/2 bits in all);
	// gilboaRing[64] is gilboaBits.
	gilboaRing = func() (r [65][64]uint8) {
		for l := range r {
			for t := range l {
				r[l][t] = uint8(l - t)
			}
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

func (s matShape) dir(bits *[64]uint8) cotDir {
	return cotDir{groups: s.groups(), width: s.n, bits: bits}
}

// crossMat returns shares of L·R in the direction where this party receives
// (rs, L) and of the peer's L'·R in the direction where it sends (ss, R).
// Gilboa: entry y of L times row x of R is Σ_t 2^t·y_t·x, one OT per bit.
func (g *Gen) crossMat(ctx context.Context, rs matShape, L []uint64, ss matShape, R []uint64) (recvOut, sendOut []uint64, err error) {
	return g.crossMatBits(ctx, rs, L, ss, R, &gilboaBits)
}

// crossMatBits is crossMat with the correction bits of each product bit
// given (gilboaRing[ℓ] for products mod 2^ℓ, whose outputs are then defined
// mod 2^ℓ only: the caller reduces them). A product bit with no correction
// bits contributes only multiples of 2^ℓ.
func (g *Gen) crossMatBits(ctx context.Context, rs matShape, L []uint64, ss matShape, R []uint64, bits *[64]uint8) (recvOut, sendOut []uint64, err error) {
	recvOut = make([]uint64, rs.batch*rs.m*rs.n)
	sendOut = make([]uint64, ss.batch*ss.m*ss.n)
	snd := cotSend{
		dir: ss.dir(bits),
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
		dir:    rs.dir(bits),
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

// RandomOTs runs n random OTs with 128-bit messages in which party sender is
// the sender: M0[j] = H(j, q_j), M1[j] = H(j, q_j ⊕ Δ), the receiver's
// M[j] = H(j, t_j). The receiver sends 4 bytes per OT, one round.
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
// party sender is the sender (see DeltaOT): the extension's output without
// the hash. The receiver sends 4 bytes per OT, one round.
func (g *Gen) DeltaOTs(ctx context.Context, n, sender int) (DeltaOT, error) {
	var r DeltaOT
	err := g.deltaOTs(ctx, n, sender, "Δ-OTs", func(_ uint64, d DeltaOT) { r = d })
	return r, err
}

// deltaOTs runs the extension for n OTs in one direction and hands the
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
		in, err := g.exchange(ctx, nil, g.extSendWords(p, false))
		if err != nil {
			return g.end(what, err)
		}
		var q []Block
		var j0 uint64
		if p > 0 {
			if q, j0, err = g.extendSend(ctx, in, p, false); err != nil {
				return g.end(what, err)
			}
			g.stats.OTsSent += int64(p)
		}
		done(j0, DeltaOT{Delta: g.snd.delta, Q: q[:n:n]})
		return g.end(what, nil)
	}
	var u, ch []uint64
	var t []Block
	var j0 uint64
	if p > 0 {
		var err error
		if u, ch, t, j0, err = g.extendRecvRandom(ctx, nil, p); err != nil {
			return g.end(what, err)
		}
		g.stats.OTsReceived += int64(p)
		g.stats.ExtensionWords += int64(len(u))
	}
	if _, err := g.exchange(ctx, u, 0); err != nil {
		return g.end(what, err)
	}
	ch = ch[:share.PackedWords(n)]
	share.MaskTail(ch, n)
	done(j0, DeltaOT{Choices: ch, T: t[:n:n]})
	return g.end(what, nil)
}

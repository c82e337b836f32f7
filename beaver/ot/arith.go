package ot

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// The arithmetic kinds' generators: elementwise triples, square pairs,
// square-and-product quadruples, wrap pairs, shared random bits and row-bit
// triples.
func init() {
	Register(beaver.KindTriple, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		t, err := g.Triples(ctx, it.N)
		return parts(t.A, t.B, t.C), err
	})
	Register(beaver.KindSquare, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		s, err := g.SquarePairs(ctx, it.N)
		return parts(s.A, s.A2), err
	})
	Register(beaver.KindSquareProduct, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		s, err := g.SquareProductsRing(ctx, it.Ring(), it.N)
		return parts(s.A, s.A2, s.B, s.AB), err
	})
	Register(beaver.KindWrap, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		w, err := g.WrapPairs(ctx, it.N, it.FracBits)
		return parts(w.U, w.V, w.Z), err
	})
	Register(beaver.KindBitPair, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		b, err := g.BitPairs(ctx, it.N)
		return parts(b.Packed, b.Arith, b.A, b.AR), err
	})
	Register(beaver.KindRowBitTriple, func(ctx context.Context, g *Gen, it Item) ([][]uint64, error) {
		t, err := g.RowBitTriples(ctx, it.M, it.N)
		return parts(t.A, t.R, t.C), err
	})
}

// Triples returns this party's shares of n elementwise triples c = a·b over
// Z_2^64. Each party draws its shares of a and b; the cross products
// a0·b1 and a1·b0 are Gilboa products, 64 OTs each, one per direction.
// Cost per triple and party: 256 bytes of extension matrix (4 per OT,
// matrixWords) and 260 bytes of corrections sent, 2 rounds in all (per
// 16,000 triples or so, one more).
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
// correlation is 2·a0). Party 1 sends 256 bytes per pair, party 0 260.
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

// SquareProducts returns shares of n square-and-product quadruples
// (a, a², b, a·b) (beaver.SquareProduct). Each party draws its shares of a
// and b; with a = a0 + a1 and b = b0 + b1,
//
//	a² = a0² + a1² + 2·a0·a1,  a·b = a0·b0 + a1·b1 + a1·b0 + a0·b1,
//
// and the three cross products are two batches of Gilboa products: party 1
// chooses with the bits of a1 against party 0's two-word correlation
// (2·a0, b0), giving shares of 2·a0·a1 and a1·b0 from the same 64 OTs (a
// vector OLE), and party 0 chooses with a0 against party 1's b1. That is 128
// OTs per quadruple where a square pair and a triple take 192. Per quadruple
// each party sends 256 bytes of extension matrix; party 0 520 bytes of
// corrections and party 1 260 (776 and 516 bytes in all, where a square pair
// and a triple cost 776 and 772); 2 rounds, as a triple.
func (g *Gen) SquareProducts(ctx context.Context, n int) (beaver.SquareProduct, error) {
	return g.SquareProductsRing(ctx, 64, n)
}

// SquareProductsRing is SquareProducts in the ring Z_2^ℓ, ℓ = ringBits
// (2 ≤ ℓ ≤ 64; 0 also means 64): a and b drawn mod 2^ℓ (the same generator
// words, masked), a² and a·b mod 2^ℓ, every word below 2^ℓ. As in
// MatTriplesRing, Gilboa's product bit t needs only ℓ − t bits of
// correction for t < ℓ and none above, so each of the three cross products
// sends ℓ(ℓ+1)/2 bits instead of 2,080: party 0 ℓ(ℓ+1) bits of corrections
// per quadruple and party 1 ℓ(ℓ+1)/2 (318.75 and 159.375 bytes at ℓ = 50,
// against 520 and 260), with the same 128 OTs (the extension engine's groups
// are 64 wide). At ℓ = 64 the call is SquareProducts, byte for byte.
func (g *Gen) SquareProductsRing(ctx context.Context, ringBits uint, n int) (beaver.SquareProduct, error) {
	const what = "square products"
	if ringBits == 0 {
		ringBits = 64
	}
	if ringBits < 2 || ringBits > 64 {
		return beaver.SquareProduct{}, fmt.Errorf("ot: square products mod 2^%d: need 2 ≤ ℓ ≤ 64", ringBits)
	}
	if _, err := checkSize(what, n); err != nil {
		return beaver.SquareProduct{}, err
	}
	if err := g.begin(ctx, what); err != nil {
		return beaver.SquareProduct{}, err
	}
	a, b := g.draw(n), g.draw(n)
	ringMask := ^uint64(0) >> (64 - ringBits)
	if ringBits < 64 {
		maskWords(a, ringMask)
		maskWords(b, ringMask)
	}
	one, two := matShape{n, 1, 1, 1}, matShape{n, 1, 1, 2}
	var rs, ss matShape
	var L, R []uint64
	if g.party == 0 {
		// Receives a0·b1 (choosing with a0); sends the correlation (2·a0, b0)
		// to party 1's choices a1.
		rs, L, ss = one, a, two
		R = make([]uint64, 2*n)
		for i := range n {
			R[2*i], R[2*i+1] = 2*a[i], b[i]
		}
	} else {
		// Receives a1·(2·a0, b0) (choosing with a1); sends b1 to party 0's
		// choices a0.
		rs, L, ss, R = two, a, one, b
	}
	ro, so, err := g.crossMatBits(ctx, rs, L, ss, R, &gilboaRing[ringBits])
	if err != nil {
		return beaver.SquareProduct{}, g.end(what, err)
	}
	// cross2[i] and cross1[i]: this party's shares of 2·a0·a1 and of
	// a1·b0 + a0·b1 (mod 2^ℓ: reduced below).
	pair, single := so, ro // party 0: sent the pair, received the single
	if g.party == 1 {
		pair, single = ro, so
	}
	a2, ab := make([]uint64, n), make([]uint64, n)
	for i := range n {
		a2[i] = (a[i]*a[i] + pair[2*i]) & ringMask
		ab[i] = (a[i]*b[i] + pair[2*i+1] + single[i]) & ringMask
	}
	return beaver.SquareProduct{A: a, A2: a2, B: b, AB: ab}, g.end(what, nil)
}

// WrapPairs returns n wrap pairs for 2^fracBits (1 ≤ fracBits ≤ 62; see
// beaver.WrapPair): party 0 draws its bits u, party 1 its bits v, and one
// correlated OT per pair, party 1 choosing with v against party 0's
// correlation u, gives shares of u·v modulo 2^f, which both shift to the top
// f bits. Party 1 sends 4 bytes of extension matrix per pair, party 0 f
// bits of corrections (2 bytes at f = 16), 2 rounds.
func (g *Gen) WrapPairs(ctx context.Context, n int, fracBits uint) (beaver.WrapPair, error) {
	if _, err := checkSize("wrap pairs", n); err != nil {
		return beaver.WrapPair{}, err
	}
	if fracBits < 1 || fracBits > 62 {
		return beaver.WrapPair{}, fmt.Errorf("ot: wrap pairs: fracBits %d outside [1, 62]", fracBits)
	}
	if err := g.begin(ctx, "wrap pairs"); err != nil {
		return beaver.WrapPair{}, err
	}
	f := fracBits
	words := share.PackedWords(n)
	mine := g.draw(words)
	share.MaskTail(mine, n)
	z := make([]uint64, n)
	var bits [64]uint8
	for t := range bits {
		bits[t] = uint8(f)
	}
	dir := cotDir{groups: words, width: 1, bits: &bits}
	var snd cotSend
	var rcv cotRecv
	if g.party == 0 {
		x := make([]uint64, 1)
		snd = cotSend{dir: dir,
			x: func(gi, t int) []uint64 {
				x[0] = mine[gi] >> t & 1
				return x
			},
			acc: func(gi, t int, a []uint64) {
				if i := 64*gi + t; i < n {
					z[i] = -a[0] << (64 - f)
				}
			},
		}
	} else {
		rcv = cotRecv{dir: dir, choice: mine,
			acc: func(gi, t int, c []uint64) {
				if i := 64*gi + t; i < n {
					z[i] = c[0] << (64 - f)
				}
			},
		}
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return beaver.WrapPair{}, g.end("wrap pairs", err)
	}
	if g.party == 0 {
		return beaver.WrapPair{U: mine, Z: z}, g.end("wrap pairs", nil)
	}
	return beaver.WrapPair{V: mine, Z: z}, g.end("wrap pairs", nil)
}

// BitPairs returns n random shared bits r = ρ0 ⊕ ρ1 (each party draws its
// ρ_p) with their multiplication pairs. With A = A0 + A1,
// A·r = A0ρ0 + A1ρ1 + ρ1·A0(1−2ρ0) + ρ0·A1(1−2ρ1): one OT per bit and
// direction, party 1 choosing with ρ1 against party 0's correlation
// (ρ0, A0(1−2ρ0)), party 0 choosing with ρ0 against A1(1−2ρ1). Per bit each
// party sends 4 bytes of extension matrix; party 0 16 and party 1 8 bytes of
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

// RowBitTriples returns rows row-bit triples of width words (see
// beaver.RowBitTriple): party 1 draws its bits r, party 0 its rows A, and one
// correlated OT per row, party 1 choosing with r_i against party 0's
// correlation A_i (width words), gives shares of r_i·A_i. Party 1 sends 4
// bytes of extension matrix per row, party 0 8·width bytes of corrections
// per row (both counted over ⌈rows/64⌉·64 rows); 2 rounds.
func (g *Gen) RowBitTriples(ctx context.Context, rows, width int) (beaver.RowBitTriple, error) {
	n, err := checkSize("row-bit triples", rows, width)
	if err != nil {
		return beaver.RowBitTriple{}, err
	}
	if err := g.begin(ctx, "row-bit triples"); err != nil {
		return beaver.RowBitTriple{}, err
	}
	dir := cotDir{groups: share.PackedWords(rows), width: width, bits: &fullBits}
	if width == 0 {
		dir.groups = 0
	}
	c := make([]uint64, n)
	var a, r []uint64
	var snd cotSend
	var rcv cotRecv
	if g.party == 0 {
		a = g.draw(n)
		zero := make([]uint64, width)
		snd = cotSend{dir: dir,
			x: func(gi, t int) []uint64 {
				if i := 64*gi + t; i < rows {
					return a[i*width : (i+1)*width]
				}
				return zero
			},
			acc: func(gi, t int, h []uint64) {
				if i := 64*gi + t; i < rows {
					row := c[i*width : (i+1)*width]
					for j, v := range h {
						row[j] = -v
					}
				}
			},
		}
	} else {
		r = g.draw(share.PackedWords(rows))
		share.MaskTail(r, rows)
		rcv = cotRecv{dir: dir, choice: r,
			acc: func(gi, t int, h []uint64) {
				if i := 64*gi + t; i < rows {
					copy(c[i*width:(i+1)*width], h)
				}
			},
		}
	}
	if err := g.runCOT(ctx, snd, rcv); err != nil {
		return beaver.RowBitTriple{}, g.end("row-bit triples", err)
	}
	return beaver.RowBitTriple{A: a, R: r, C: c}, g.end("row-bit triples", nil)
}

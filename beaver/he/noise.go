package he

import (
	"encoding/binary"
	"io"
	"math"
	"math/big"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// The scheme's small polynomials — the secret key and the re-randomisation's
// u (uniform ternary), the errors (a discrete Gaussian) — are drawn here
// from a keyed stream (prngFor), one home for both distributions.
//
// lattigo's samplers, which this replaces, draw a ternary coefficient from
// a byte and a Gaussian one from a ziggurat in float64 with a rejection
// loop: 0.3–0.35 ms a polynomial of N = 8192 each, about 1.3 ms of the
// data owner's 5 ms output block (bench/TWOHOSTS.md step 24). Here a
// ternary coefficient takes a fifth of a byte (a byte below 3^5 = 243
// holds five), and a Gaussian one a table lookup on 64 random bits.

// ternaryBytes is how many stream bytes sampleTernary reads at a time.
const ternaryBytes = 2048

// ternaryDigits maps a byte below 243 to its five base-3 digits, each
// minus one: five coefficients uniform in {−1, 0, 1}.
var ternaryDigits = func() (t [243][5]int8) {
	for b := range 243 {
		v := b
		for i := range 5 {
			t[b][i] = int8(v%3) - 1
			v /= 3
		}
	}
	return t
}()

// sampleTernary writes to p (coefficient domain, every residue) N
// coefficients uniform in {−1, 0, 1}, read from prng, and returns them in
// coef when coef is not nil (len N). It is lattigo's ternary distribution
// with P = 2/3 (nonzero with probability 2/3, sign uniform).
func (s *Scheme) sampleTernary(prng io.Reader, p ring.Poly, coef []int8) {
	var buf [ternaryBytes]byte
	next, have := 0, 0
	Q := s.p.Q
	for x := 0; x < s.n; {
		if next == have {
			if _, err := io.ReadFull(prng, buf[:]); err != nil {
				panic(err) // the keyed stream does not fail
			}
			next, have = 0, len(buf)
		}
		b := buf[next]
		next++
		if b >= 243 {
			continue // rejection keeps the digits uniform
		}
		for _, d := range ternaryDigits[b][:min(5, s.n-x)] {
			for i, q := range Q {
				p.Coeffs[i][x] = smallMod(int64(d), q)
			}
			if coef != nil {
				coef[x] = d
			}
			x++
		}
	}
}

// smallMod returns v mod q for |v| < q, with no branch on v's sign (a
// random sign would mispredict half the time).
func smallMod(v int64, q uint64) uint64 {
	return uint64(v) + q&uint64(v>>63)
}

// gaussianTable is the cumulative distribution of |e| for the discrete
// Gaussian D_{Z,σ} truncated to |e| ≤ B, in units of 2^-63: |e| is the
// number of entries at or below a uniform 63-bit r. Entry k is
// ⌊2^63·P(|e| ≤ k)⌋ for k < B; P(|e| = 0) = ρ(0)/S and P(|e| = k) =
// 2ρ(k)/S, ρ(k) = exp(−k²/2σ²), S = Σ_{|k| ≤ B} ρ(k). Rounding the table
// to 63 bits moves each probability by under 2^-63.
func gaussianTable(sigma float64, bound uint64) []uint64 {
	if bound >= gaussianTableSize {
		panic("he: error bound beyond the table's 31") // NewScheme refuses it first
	}
	const prec = 200
	rho := func(k uint64) *big.Float {
		return new(big.Float).SetPrec(prec).SetFloat64(math.Exp(-float64(k*k) / (2 * sigma * sigma)))
	}
	sum := new(big.Float).SetPrec(prec)
	for k := range bound + 1 {
		w := rho(k)
		if k > 0 {
			w.Mul(w, big.NewFloat(2))
		}
		sum.Add(sum, w)
	}
	tab := make([]uint64, bound)
	cum := new(big.Float).SetPrec(prec)
	scale := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), 63)
	for k := range bound {
		w := rho(k)
		if k > 0 {
			w.Mul(w, big.NewFloat(2))
		}
		cum.Add(cum, w)
		v := new(big.Float).SetPrec(prec).Quo(cum, sum)
		v.Mul(v, scale)
		tab[k], _ = v.Uint64()
	}
	return tab
}

// gaussianChunk is how many errors addGaussian draws at a time.
const gaussianChunk = 512

// gaussianTableSize is gaussianTable's length padded for addGaussian's
// search: 32 entries, the bound's (up to 31) and then 2^63, which no
// 63-bit r reaches.
const gaussianTableSize = 32

// gaussian is the scheme's error distribution: the discrete Gaussian
// truncated to |e| ≤ bound, as gaussianTable's entries padded to
// gaussianTableSize with 2^63.
type gaussian struct{ tab [gaussianTableSize]uint64 }

// newGaussian returns the distribution of σ = sigma truncated at bound
// (< gaussianTableSize).
func newGaussian(sigma float64, bound uint64) *gaussian {
	g := new(gaussian)
	for i := copy(g.tab[:], gaussianTable(sigma, bound)); i < gaussianTableSize; i++ {
		g.tab[i] = 1 << 63
	}
	return g
}

// addGaussian adds to p (coefficient domain, every residue) N errors of
// the scheme's distribution (s.gauss).
func (s *Scheme) addGaussian(prng io.Reader, p ring.Poly, set bool) {
	s.gauss.add(prng, p, s.p.Q, set)
}

// add adds to p (coefficient domain, residues mod Q) one error of g for
// each coefficient, read from prng, 64 bits each: the low 63 pick |e| in
// the table (a search of five steps with no branch), the top bit its
// sign. With set, it writes the errors instead of adding them.
func (g *gaussian) add(prng io.Reader, p ring.Poly, Q []uint64, set bool) {
	var buf [8 * gaussianChunk]byte
	var es [gaussianChunk]int64
	t := &g.tab
	n := len(p.Coeffs[0])
	for x0 := 0; x0 < n; x0 += gaussianChunk {
		nx := min(gaussianChunk, n-x0)
		if _, err := io.ReadFull(prng, buf[:8*nx]); err != nil {
			panic(err) // the keyed stream does not fail
		}
		for j := range nx {
			r := binary.LittleEndian.Uint64(buf[8*j:])
			m := r & (1<<63 - 1)
			// i = the number of entries ≤ m: t[i+h−1] ≤ m adds h.
			i := 0
			i += 16 * int((t[i+15]-m-1)>>63) // both below 2^63: the top bit is t ≤ m
			i += 8 * int((t[i+7]-m-1)>>63)
			i += 4 * int((t[i+3]-m-1)>>63)
			i += 2 * int((t[i+1]-m-1)>>63)
			i += int((t[i] - m - 1) >> 63)
			sign := int64(r>>63) * -2 // 0 or −2
			es[j] = int64(i) * (1 + sign)
		}
		for k, q := range Q {
			c := p.Coeffs[k][x0 : x0+nx]
			if set {
				for j, e := range es[:nx] {
					c[j] = smallMod(e, q)
				}
				continue
			}
			for j, e := range es[:nx] {
				c[j] = addMod(c[j], smallMod(e, q), q)
			}
		}
	}
}

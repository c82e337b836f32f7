package he

import (
	"fmt"
	"io"
	"math/bits"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// Output is P1's per-candidate message: one ciphertext per output block
// (row block ib of MW rows, column block jb of NW columns, in row-major
// block order), each switched to the moduli 2^LogQ0 (c0, only the
// rows·cols coefficients that hold outputs) and 2^LogQ1 (c1, all N
// coefficients).
type Output struct {
	M, N   int
	Layout Layout
	blocks []outBlock
}

type outBlock struct {
	c0 []u128 // rows·cols, row-major within the block
	c1 []u128 // N
}

// MulMasked is P1's step for one candidate: with its A (m×k, row-major) and
// mask R (m×n), which becomes its share C1 := R, it returns encryptions of
// A·B − R under P0's key: the homomorphic product with the encrypted
// weights, minus R, re-randomised with a fresh encryption of zero under the
// public key, flooded and switched down. rnd supplies 32 bytes of key
// material for the re-randomisation and flood (crypto/rand when nil).
func (s *Scheme) MulMasked(w *Weights, A []uint64, m int, R []uint64, rnd io.Reader) (*Output, error) {
	out, _, err := s.mulMaskedRaw(w, A, m, R, rnd, true)
	return out, err
}

// rawBlock is an output ciphertext before the modulus switch (tests).
type rawBlock struct{ c0, c1 ring.Poly }

// mulMaskedRaw does MulMasked; with final false it also returns the output
// ciphertexts in R_Q before the switch (for the view tests).
func (s *Scheme) mulMaskedRaw(w *Weights, A []uint64, m int, R []uint64, rnd io.Reader, final bool) (*Output, []rawBlock, error) {
	if w == nil {
		return nil, nil, fmt.Errorf("he: mul masked: nil weights")
	}
	k, n, l := w.k, w.n, w.layout
	if m < 1 || m > 1<<24 || len(A) != m*k || len(R) != m*n {
		return nil, nil, fmt.Errorf("he: mul masked: A %d words, R %d words for %d×%d·%d×%d: %w", len(A), len(R), m, k, k, n, errShape)
	}
	key, err := keyFrom(rnd)
	if err != nil {
		return nil, nil, err
	}
	cb := w.cb
	rb := ceilDiv(m, l.MW)
	out := &Output{M: m, N: n, Layout: l, blocks: make([]outBlock, rb*cb)}
	var raws []rawBlock
	if !final {
		raws = make([]rawBlock, rb*cb)
	}
	L := len(s.p.Q)
	N := s.n
	parallel(rb, func(ib int) {
		rows := min(l.MW, m-ib*l.MW)
		// 128-bit accumulators [jb][comp][prime] of N words, lo and hi.
		lo := make([][][]uint64, cb*2)
		hi := make([][][]uint64, cb*2)
		for i := range lo {
			lo[i] = make([][]uint64, L)
			hi[i] = make([][]uint64, L)
			for p := range L {
				lo[i][p] = make([]uint64, N)
				hi[i][p] = make([]uint64, N)
			}
		}
		a := s.rq.NewPoly()
		for r := range k {
			a.Zero()
			for i := range rows {
				v := A[(ib*l.MW+i)*k+r]
				for p, q := range s.p.Q {
					a.Coeffs[p][i*l.NW] = liftCentered(v, q)
				}
			}
			s.rq.NTT(a, a)
			for jb := range cb {
				ct := r*cb + jb
				for p := range L {
					mac(lo[2*jb][p], hi[2*jb][p], a.Coeffs[p], w.c0[ct].Coeffs[p])
					mac(lo[2*jb+1][p], hi[2*jb+1][p], a.Coeffs[p], w.c1[ct].Coeffs[p])
				}
			}
		}
		c0, c1, u := s.rq.NewPoly(), s.rq.NewPoly(), s.rq.NewPoly()
		res := make([]uint64, L)
		for jb := range cb {
			bi := ib*cb + jb
			cols := min(l.NW, n-jb*l.NW)
			for p, q := range s.p.Q {
				reduce(c0.Coeffs[p], lo[2*jb][p], hi[2*jb][p], q)
				reduce(c1.Coeffs[p], lo[2*jb+1][p], hi[2*jb+1][p], q)
			}
			// Re-randomise: + (u·p0 + e0, u·p1 + e1).
			ts, err := ring.NewTernarySampler(prngFor(key, domMask, uint64(3*bi)), s.rq, ring.Ternary{P: 2.0 / 3}, false)
			if err != nil {
				panic(err) // fixed, valid distribution
			}
			ts.Read(u)
			s.rq.NTT(u, u)
			s.rq.MulCoeffsBarrettThenAdd(u, w.pk0, c0)
			s.rq.MulCoeffsBarrettThenAdd(u, w.pk1, c1)
			s.rq.INTT(c0, c0)
			s.rq.INTT(c1, c1)
			g := ring.NewGaussianSampler(prngFor(key, domMask, uint64(3*bi+1)), s.rq, s.gauss(), false)
			g.ReadAndAdd(c0)
			g.ReadAndAdd(c1)
			// − Δ·R and + flood on the coefficients that hold outputs.
			fl := prngFor(key, domMask, uint64(3*bi+2))
			var fb [24]byte
			for i := range rows {
				for x := range cols {
					pos := i*l.NW + x
					rv := R[(ib*l.MW+i)*n+jb*l.NW+x]
					var f [3]uint64
					if s.floodLog > 0 {
						if _, err := io.ReadFull(fl, fb[:]); err != nil {
							panic(err) // the keyed PRNG does not fail
						}
						f = floodWords(fb[:], s.floodLog+1)
					}
					for p, q := range s.p.Q {
						v := subMod(c0.Coeffs[p][pos], s.encode(rv, p), q)
						if s.floodLog > 0 {
							fv := addMod(addMod(f[0]%q, mulMod(f[1], s.pow64[p], q), q), mulMod(f[2], s.pow128[p], q), q)
							v = subMod(addMod(v, fv, q), s.powFlood[p], q)
						}
						c0.Coeffs[p][pos] = v
					}
				}
			}
			if !final {
				raws[bi] = rawBlock{*c0.CopyNew(), *c1.CopyNew()}
			}
			ob := outBlock{c0: make([]u128, rows*cols), c1: make([]u128, N)}
			for i := range rows {
				for x := range cols {
					for p := range L {
						res[p] = c0.Coeffs[p][i*l.NW+x]
					}
					ob.c0[i*cols+x] = s.modSwitch(&s.ms0, res)
				}
			}
			for x := range N {
				for p := range L {
					res[p] = c1.Coeffs[p][x]
				}
				ob.c1[x] = s.modSwitch(&s.ms1, res)
			}
			out.blocks[bi] = ob
		}
	})
	return out, raws, nil
}

// floodWords reads a uniform integer of nb bits (little-endian words) from b.
func floodWords(b []byte, nb int) [3]uint64 {
	var f [3]uint64
	for i := range 3 {
		for j := 7; j >= 0; j-- {
			f[i] = f[i]<<8 | uint64(b[8*i+j])
		}
		switch {
		case nb >= 64:
			nb -= 64
		case nb > 0:
			f[i] &= 1<<nb - 1
			nb = 0
		default:
			f[i] = 0
		}
	}
	return f
}

// mac accumulates a[x]·b[x] into the 128-bit accumulators (hi, lo).
func mac(lo, hi, a, b []uint64) {
	b = b[:len(a)]
	lo = lo[:len(a)]
	hi = hi[:len(a)]
	for x, av := range a {
		h, l := bits.Mul64(av, b[x])
		var c uint64
		lo[x], c = bits.Add64(lo[x], l, 0)
		hi[x] += h + c
	}
}

// reduce writes (hi, lo) mod q into dst.
func reduce(dst, lo, hi []uint64, q uint64) {
	for x := range dst {
		dst[x] = bits.Rem64(hi[x], lo[x], q)
	}
}

package he

import (
	"fmt"
	"math/bits"
)

// DecryptShares is P0's last step: it decrypts P1's output message for an
// m×n product with layout l and returns its share C0 = A·B − R (m×n,
// row-major), so that C0 + C1 = A·B mod 2^64 with P1's C1 = R. It checks the
// message's shape against (m, n, l), which P0 knows; a mismatch is an error.
func (s *Scheme) DecryptShares(sk *SecretKey, out *Output, m, n int, l Layout) ([]uint64, error) {
	x, err := s.phases(sk, out, m, n, l)
	if err != nil {
		return nil, err
	}
	L := max(s.p.LogQ0, s.p.LogQ1)
	half := u128{1, 0}.shl(L - 65)
	C := make([]uint64, len(x))
	for i, v := range x {
		C[i] = v.add(half).mask(L).shr(L - 64).lo
	}
	return C, nil
}

// phases returns, for each output word, the phase x = 2^L·(c0+c1·s)/Q
// mod 2^L (L = max(LogQ0, LogQ1)) that P0 computes from the switched
// ciphertexts; the share is round(x/2^(L−64)).
func (s *Scheme) phases(sk *SecretKey, out *Output, m, n int, l Layout) ([]u128, error) {
	if sk == nil || out == nil {
		return nil, fmt.Errorf("he: decrypt: nil input")
	}
	if sk.sc != s {
		return nil, errScheme
	}
	if out.M != m || out.N != n || out.Layout != l || m < 1 || n < 1 {
		return nil, fmt.Errorf("he: decrypt: message for %d×%d layout %v, want %d×%d layout %v: %w", out.M, out.N, out.Layout, m, n, l, errShape)
	}
	if err := s.checkLayout(l, 1); err != nil { // the shape: P1 checked the budget for its k
		return nil, err
	}
	cb, rb := ceilDiv(n, l.NW), ceilDiv(m, l.MW)
	if len(out.blocks) != rb*cb {
		return nil, fmt.Errorf("he: decrypt: %d blocks, want %d: %w", len(out.blocks), rb*cb, errShape)
	}
	for bi, b := range out.blocks {
		rows, cols := min(l.MW, m-bi/cb*l.MW), min(l.NW, n-bi%cb*l.NW)
		if len(b.c1) != s.n || len(b.c0) != rows*cols {
			return nil, fmt.Errorf("he: decrypt: block %d with %d+%d coefficients, want %d+%d: %w", bi, len(b.c0), len(b.c1), rows*cols, s.n, errShape)
		}
	}
	l0, l1 := s.p.LogQ0, s.p.LogQ1
	L := max(l0, l1)
	p0, p1 := decPrimes[0], decPrimes[1]
	hiP, loP := bits.Mul64(p0, p1)
	P := u128{loP, hiP}
	halfP := P.shr(1)
	C := make([]u128, m*n)
	parallel(rb*cb, func(bi int) {
		ib, jb := bi/cb, bi%cb
		rows, cols := min(l.MW, m-ib*l.MW), min(l.NW, n-jb*l.NW)
		b := out.blocks[bi]
		// z = c1'·s exactly, in the auxiliary ring (|z| < N·2^l1 < P/2).
		z := s.rd.NewPoly()
		for p, q := range decPrimes {
			for x, v := range b.c1 {
				z.Coeffs[p][x] = bits.Rem64(v.hi, v.lo, q)
			}
		}
		s.rd.NTT(z, z)
		s.rd.MulCoeffsBarrett(z, sk.sD, z)
		s.rd.INTT(z, z)
		for i := range rows {
			for x := range cols {
				pos := i*l.stride() + x
				z0, z1 := z.Coeffs[0][pos], z.Coeffs[1][pos]
				h := mulMod(subMod(z1, z0%p1, p1), s.d0Inv, p1)
				hh, hl := bits.Mul64(p0, h)
				Z := u128{hl, hh}.add(u128{z0, 0})
				if Z.cmp(halfP) > 0 {
					Z = Z.sub(P) // negative, two's complement mod 2^128
				}
				v := b.c0[i*cols+x].shl(L - l0).add(Z.mask(l1).shl(L - l1))
				C[(ib*l.MW+i)*n+jb*l.NW+x] = v.mask(L)
			}
		}
	})
	return C, nil
}

// cmp compares a and b as unsigned integers.
func (a u128) cmp(b u128) int {
	switch {
	case a.hi != b.hi:
		if a.hi < b.hi {
			return -1
		}
		return 1
	case a.lo < b.lo:
		return -1
	case a.lo > b.lo:
		return 1
	}
	return 0
}

package he

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/selectformer/selectformer/share"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// EncryptedWeights is P0's message carrying its encrypted weight mask B
// (k×n): k·ceil(n/NW) seeded ciphertexts, ciphertext (r, j) encrypting
// B[r][j·NW : (j+1)·NW] as the polynomial Σ_x B[r][j·NW+x]·X^x (with
// Layout.KW > 1, ceil(k/KW)·ceil(n/NW), ciphertext (rb, j) holding the KW
// rows rb·KW+t at X^(t·NW+x)). Only c0
// crosses (in the NTT domain); c1 is expanded from Seed and the ciphertext's
// index. It is sent once per weight matrix and reused for every candidate.
//
// With an offset Off > 0 (EncryptWeightsAt) B's columns are the columns
// [Off, Off+n) of a wider product: its ciphertexts are those of the column
// blocks jb = floor(Off/NW) … floor((Off+n−1)/NW) of the product, block jb
// holding B[r][jb·NW+x−Off] at X^x, zero where no column of B falls
// (ColumnBlocks counts them). A product sums such weights into one output
// (MulMaskedSum); the check of party 1's outputs (CheckedPlan) places its
// check columns this way.
type EncryptedWeights struct {
	K, N   int            // shape of B
	Off    int            // the product's column of B's first column
	Layout Layout         // packing (NW is used here; MW by MulMasked)
	Seed   [SeedSize]byte // public seed of the c1 halves
	C0     []ring.Poly    // ceil(k/KW)·cb polynomials (cb = ColumnBlocks), index rb·cb+j, NTT domain
	s      *Scheme
}

// ColumnBlocks returns the column blocks of NW columns that the columns
// [off, off+n) of a product touch: the first, jb0 = floor(off/nw), and
// their number cb (the ciphertexts per row of weights placed there).
func ColumnBlocks(off, n, nw int) (jb0, cb int) {
	jb0 = off / nw
	return jb0, (off+n-1)/nw - jb0 + 1
}

// EncryptWeights is P0's encryption of its weight mask B (k×n, row-major)
// under sk with layout l (see ChooseLayout). rnd supplies 64 bytes of key
// material (crypto/rand when nil): the public seed and the key of the
// errors.
func (s *Scheme) EncryptWeights(sk *SecretKey, B []uint64, k, n int, l Layout, rnd io.Reader) (*EncryptedWeights, error) {
	seed, err := keyFrom(rnd)
	if err != nil {
		return nil, err
	}
	return s.EncryptWeightsAt(sk, B, k, n, 0, l, [SeedSize]byte(seed), rnd)
}

// EncryptWeightsAt is EncryptWeights of B (k×n) placed at the columns
// [off, off+n) of a product (see EncryptedWeights), with the public seed
// seed of the ciphertexts' c1 halves (a seed both parties derive, so that
// P0 does not choose them). rnd supplies 32 bytes of key material for the
// errors (crypto/rand when nil).
func (s *Scheme) EncryptWeightsAt(sk *SecretKey, B []uint64, k, n, off int, l Layout, seed [SeedSize]byte, rnd io.Reader) (*EncryptedWeights, error) {
	enc, err := s.weightEncrypter(sk, B, k, n, off, l, seed, rnd)
	if err != nil {
		return nil, err
	}
	ew := &EncryptedWeights{K: k, N: n, Off: off, Layout: l, Seed: seed, C0: make([]ring.Poly, enc.count()), s: s}
	parallel(len(ew.C0), func(idx int) { ew.C0[idx] = enc.block(idx) })
	return ew, nil
}

// WriteEncryptedWeights writes to w the encoding of EncryptWeightsAt's
// result for the same arguments (EncryptedWeights.AppendBinary, byte for
// byte with the same rnd), encrypting and encoding weightStreamGroup
// ciphertexts at a time: what it holds is one group's polynomials and
// bytes, never the whole matrix (hundreds of MB for a 768×1536 weight,
// twice that as polynomials). It returns the bytes written.
func (s *Scheme) WriteEncryptedWeights(w io.Writer, sk *SecretKey, B []uint64, k, n, off int, l Layout, seed [SeedSize]byte, rnd io.Reader) (int64, error) {
	enc, err := s.weightEncrypter(sk, B, k, n, off, l, seed, rnd)
	if err != nil {
		return 0, err
	}
	b := appendHeader(nil, tagWeights, k, n, l)
	b = binary.LittleEndian.AppendUint32(b, uint32(off))
	b = append(b, seed[:]...)
	total := int64(0)
	group := make([]ring.Poly, weightStreamGroup)
	bw := &bitWriter{buf: b}
	for g0 := 0; g0 < enc.count(); g0 += weightStreamGroup {
		g1 := min(enc.count(), g0+weightStreamGroup)
		parallel(g1-g0, func(i int) { group[i] = enc.block(g0 + i) })
		for i := range g1 - g0 {
			s.appendPoly(bw, group[i])
			bw.flush() // each ciphertext starts on a byte
		}
		nw, err := w.Write(bw.buf)
		total += int64(nw)
		if err != nil {
			return total, err
		}
		bw.buf = bw.buf[:0]
	}
	return total, nil
}

// weightStreamGroup is the number of ciphertexts WriteEncryptedWeights
// encrypts at a time (8 MiB of polynomials with the default parameters).
const weightStreamGroup = 32

// weightEncrypter makes the ciphertexts of one weight encryption (see
// EncryptWeightsAt), each on its own.
type weightEncrypter struct {
	s               *Scheme
	sk              *SecretKey
	B               []uint64
	k, n, off       int
	l               Layout
	jb0, cb, kb, kw int
	seedKey, errKey *share.AESKey
}

// weightEncrypter checks the arguments of EncryptWeightsAt and draws its
// key material.
func (s *Scheme) weightEncrypter(sk *SecretKey, B []uint64, k, n, off int, l Layout, seed [SeedSize]byte, rnd io.Reader) (*weightEncrypter, error) {
	if sk == nil || sk.sc != s {
		return nil, errScheme
	}
	if k < 1 || k > s.p.MaxInner || n < 1 || off < 0 || off > maxDim-n || len(B) != k*n {
		return nil, fmt.Errorf("he: encrypt weights %d×%d at column %d (MaxInner %d) from %d words: %w", k, n, off, s.p.MaxInner, len(B), errShape)
	}
	if err := s.checkLayout(l, k); err != nil {
		return nil, err
	}
	ekey, err := keyFrom(rnd)
	if err != nil {
		return nil, err
	}
	e := &weightEncrypter{s: s, sk: sk, B: B, k: k, n: n, off: off, l: l, kb: l.innerBlocks(k), kw: l.kw(),
		seedKey: publicSeedKey(&seed), errKey: expandKey(ekey)}
	e.jb0, e.cb = ColumnBlocks(off, n, l.NW)
	return e, nil
}

// count is the number of ciphertexts, ceil(k/KW)·cb.
func (e *weightEncrypter) count() int { return e.kb * e.cb }

// block returns ciphertext idx (index rb·cb+j): its c0 in the NTT domain.
func (e *weightEncrypter) block(idx int) ring.Poly {
	s, l := e.s, e.l
	rb, j := idx/e.cb, idx%e.cb
	a := s.rq.NewPoly()
	s.seeded(e.seedKey, domWeights, uint64(idx), a)
	c := s.rq.NewPoly()
	s.addGaussian(streamFor(e.errKey, domErr, uint64(idx)), c, true)
	// Block jb0+j covers the product's columns [(jb0+j)·NW, (jb0+j+1)·NW);
	// row rb·KW+t of B sits at X^(t·NW).
	lo := (e.jb0 + j) * l.NW
	x0, x1 := max(e.off, lo)-lo, min(e.off+e.n, lo+l.NW)-lo
	for t := range min(e.kw, e.k-rb*e.kw) {
		r := rb*e.kw + t
		row := e.B[r*e.n+lo+x0-e.off : r*e.n+lo+x1-e.off]
		for i, q := range s.p.Q {
			cc := c.Coeffs[i][t*l.NW+x0 : t*l.NW+x1]
			for x, v := range row {
				cc[x] = addMod(cc[x], s.encode(v, i), q)
			}
		}
	}
	s.rq.NTT(c, c)
	s.rq.MulCoeffsBarrett(a, e.sk.sQ, a)
	s.rq.Sub(c, a, c) // c0 = Δb + e − a·s
	return c
}

// Weights is P1's prepared form of P0's encrypted weights and public key:
// both components of every weight ciphertext in the NTT domain (memory:
// Sizes.P1Weights), ready for MulMasked. It is read-only after LoadWeights
// and may serve concurrent MulMasked calls.
type Weights struct {
	k, n, cb int
	off, jb0 int // columns [off, off+n) of the product, from block jb0
	layout   Layout
	c0, c1   []ring.Poly   // c1 nil: regenerated from seed (LoadWeightsCompact)
	seedKey  *share.AESKey // the expanded key of the c1 halves' public seed
	sc       *Scheme
	pk       *PublicKey // the key the weights were loaded with
	pk0, pk1 ring.Poly
	plan     *evalPlan
}

// K returns the number of rows of B (the inner dimension).
func (w *Weights) K() int { return w.k }

// N returns the number of columns of B.
func (w *Weights) N() int { return w.n }

// Off returns the product's column of B's first column.
func (w *Weights) Off() int { return w.off }

// Layout returns the layout the weights were encrypted with.
func (w *Weights) Layout() Layout { return w.layout }

// Bytes returns the memory of the prepared ciphertexts, 8 bytes per
// residue: WeightSizes.P1 after LoadWeights, P1Compact after
// LoadWeightsCompact.
func (w *Weights) Bytes() int64 {
	return int64(len(w.c0)+len(w.c1)) * int64(len(w.sc.p.Q)) * int64(w.sc.n) * 8
}

// LoadWeights is P1's preparation of P0's public key and encrypted weights:
// it checks their shapes against s and expands the seeded components. ew's
// polynomials are kept, not copied; the caller must not modify ew afterwards.
func (s *Scheme) LoadWeights(pk *PublicKey, ew *EncryptedWeights) (*Weights, error) {
	return s.loadWeights(pk, ew, true)
}

// LoadWeightsCompact is LoadWeights without expanding the seeded halves:
// P1 keeps half the memory (Sizes.P1WeightsCompact) and MulMasked
// regenerates them for every candidate (AES-CTR, about a fifth more work).
// Its outputs are those of LoadWeights' for the same inputs and randomness.
func (s *Scheme) LoadWeightsCompact(pk *PublicKey, ew *EncryptedWeights) (*Weights, error) {
	return s.loadWeights(pk, ew, false)
}

func (s *Scheme) loadWeights(pk *PublicKey, ew *EncryptedWeights, expand bool) (*Weights, error) {
	if pk == nil || ew == nil {
		return nil, fmt.Errorf("he: load weights: nil input")
	}
	if err := s.checkLayout(ew.Layout, ew.K); err != nil {
		return nil, err
	}
	if ew.K < 1 || ew.K > s.p.MaxInner || ew.N < 1 || ew.Off < 0 || ew.Off > maxDim-ew.N {
		return nil, fmt.Errorf("he: load weights %d×%d at column %d: %w", ew.K, ew.N, ew.Off, errShape)
	}
	jb0, cb := ColumnBlocks(ew.Off, ew.N, ew.Layout.NW)
	if len(ew.C0) != ew.Layout.innerBlocks(ew.K)*cb {
		return nil, fmt.Errorf("he: load weights %d×%d with %d ciphertexts: %w", ew.K, ew.N, len(ew.C0), errShape)
	}
	if err := s.checkPoly(pk.P0); err != nil {
		return nil, fmt.Errorf("he: public key: %w", err)
	}
	for _, c := range ew.C0 {
		if err := s.checkPoly(c); err != nil {
			return nil, fmt.Errorf("he: weights: %w", err)
		}
	}
	plan, err := s.newEvalPlan(ew.Layout.NW)
	if err != nil {
		return nil, err
	}
	w := &Weights{sc: s, plan: plan, k: ew.K, n: ew.N, cb: cb, off: ew.Off, jb0: jb0, layout: ew.Layout, c0: ew.C0, pk: pk, pk0: pk.P0, pk1: s.pkP1(pk), seedKey: publicSeedKey(&ew.Seed)}
	if !expand {
		return w, nil
	}
	w.c1 = make([]ring.Poly, len(ew.C0))
	parallel(len(ew.C0), func(idx int) {
		p := s.rq.NewPoly()
		s.seeded(w.seedKey, domWeights, uint64(idx), p)
		w.c1[idx] = p
	})
	return w, nil
}

// checkPoly reports whether p is a polynomial of R_Q with reduced residues.
func (s *Scheme) checkPoly(p ring.Poly) error {
	if len(p.Coeffs) != len(s.p.Q) {
		return fmt.Errorf("polynomial with %d residue rows, want %d: %w", len(p.Coeffs), len(s.p.Q), errShape)
	}
	for i, q := range s.p.Q {
		if len(p.Coeffs[i]) != s.n {
			return fmt.Errorf("polynomial of degree %d, want %d: %w", len(p.Coeffs[i]), s.n, errShape)
		}
		for _, v := range p.Coeffs[i] {
			if v >= q {
				return fmt.Errorf("residue %d ≥ modulus %d: %w", v, q, errShape)
			}
		}
	}
	return nil
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	next := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

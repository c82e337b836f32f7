package he

import (
	"crypto/aes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"unsafe"

	"github.com/selectformer/selectformer/share"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// SeedSize is the size of the public seeds from which the second component
// of seeded ciphertexts is expanded.
const SeedSize = 32

// SecretKey is P0's secret key: a uniform ternary polynomial s. It never
// leaves P0.
type SecretKey struct {
	coef []int8    // coefficients in {−1, 0, 1}
	sQ   ring.Poly // s in R_Q, NTT domain
	sD   ring.Poly // s in the auxiliary decryption ring, NTT domain
	sc   *Scheme
}

// errScheme reports a key or message made by another Scheme.
var errScheme = errors.New("he: key or message of another Scheme")

// PublicKey is P0's public key (p0, p1) = (−p1·s + e, p1), p1 expanded from
// Seed. P1 adds a fresh encryption of zero under it to every output
// ciphertext, so that the ciphertext's c1, which P0 receives, does not
// reveal A.
type PublicKey struct {
	Seed [SeedSize]byte // public seed of p1
	P0   ring.Poly      // p0, NTT domain
	s    *Scheme
}

// keyFrom reads a fresh 32-byte key from rnd (crypto/rand when nil).
func keyFrom(rnd io.Reader) ([]byte, error) {
	if rnd == nil {
		rnd = rand.Reader
	}
	k := make([]byte, SeedSize)
	if _, err := io.ReadFull(rnd, k); err != nil {
		return nil, fmt.Errorf("he: randomness: %w", err)
	}
	return k, nil
}

// prngFor returns the keyed PRNG of the stream (key, domain, idx): AES-256
// in counter mode with key and the 16-byte block domain ‖ idx ‖ 0^7 as the
// initial counter, so the streams of one key never overlap (2^56 blocks
// each). It replaces lattigo's BLAKE2b KeyedPRNG, which made the seed
// expansion of the sst2 weights 4.4 s on 2 cores; the samplers (noise.go)
// read from it. The stream is crypto/cipher's CTR byte
// for byte, made by share.AESCTR: with 256-bit VAES where the CPU has it,
// 2–3× crypto/aes's speed on the AMD EPYC Zen 3 (the data owner
// regenerates the compact weights' seeded halves from it for every batch).
func prngFor(key []byte, domain byte, idx uint64) sampling.PRNG {
	return streamFor(expandKey(key), domain, idx)
}

// expandKey expands a 32-byte PRNG key (16 for a public seed's,
// publicSeedKey) once, for streamFor: a caller that
// reads many streams of one key (a weight matrix's seeded halves, one
// stream per ciphertext) expands it once, not per stream (1.3 µs a key).
func expandKey(key []byte) *share.AESKey {
	k, err := share.NewAESKey(key)
	if err != nil {
		panic(err) // only on an invalid key length, which cannot happen here
	}
	return k
}

// publicSeedKey expands a public seed — of the weight ciphertexts' c1
// halves, or of the public key's p1 — for its seeded expansion (seeded):
// AES-128 under the seed's first 16 bytes. The expansion only has to look
// uniform to someone who knows the seed, which AES-128-CTR gives at the
// scheme's 128-bit level; it takes 10 rounds to AES-256's 14, and the data
// owner regenerates the weights' halves for every product (about 6% of its
// CPU at sst2's defaults, bench/TWOHOSTS.md step 24). Private streams
// (prngFor: secret key, errors, masks, floods) stay AES-256.
func publicSeedKey(seed *[SeedSize]byte) *share.AESKey {
	return expandKey(seed[:16])
}

// streamFor is prngFor with the key already expanded.
func streamFor(k *share.AESKey, domain byte, idx uint64) sampling.PRNG {
	var iv [aes.BlockSize]byte
	iv[0] = domain
	binary.BigEndian.PutUint64(iv[1:9], idx)
	return ctrPRNG{k.CTR(iv)}
}

// ctrPRNG reads an AES-CTR key stream.
type ctrPRNG struct{ s *share.AESCTR }

// Read fills p with key stream.
func (c ctrPRNG) Read(p []byte) (int, error) {
	c.s.KeyStream(p)
	return len(p), nil
}

// PRNG domains.
const (
	domPK      = 'p' // public key's p1 (public)
	domWeights = 'w' // weight ciphertexts' c1 (public)
	domSecret  = 's' // secret key
	domErr     = 'e' // errors (private)
	domMask    = 'm' // P1's re-randomisation and flood (private)
)

// KeyGen is P0's key generation: a secret key and the public key to send to
// P1 (message size Sizes.PublicKey). rnd supplies 64 bytes of key material
// (crypto/rand when nil).
func (s *Scheme) KeyGen(rnd io.Reader) (*SecretKey, *PublicKey, error) {
	key, err := keyFrom(rnd)
	if err != nil {
		return nil, nil, err
	}
	seed, err := keyFrom(rnd)
	if err != nil {
		return nil, nil, err
	}
	return s.keyGen(key, [SeedSize]byte(seed))
}

// KeyGenWithSeed is KeyGen with the public key's seed given: a seed both
// parties derive (from their joint session id), so that P0 cannot choose
// p1, which P1's re-randomisation multiplies (P1 refuses a public key with
// another seed). rnd supplies 32 bytes of key material (crypto/rand when
// nil).
func (s *Scheme) KeyGenWithSeed(seed [SeedSize]byte, rnd io.Reader) (*SecretKey, *PublicKey, error) {
	key, err := keyFrom(rnd)
	if err != nil {
		return nil, nil, err
	}
	return s.keyGen(key, seed)
}

func (s *Scheme) keyGen(key []byte, seed [SeedSize]byte) (*SecretKey, *PublicKey, error) {
	sQ := s.rq.NewPoly()
	sk := &SecretKey{coef: make([]int8, s.n), sQ: sQ, sD: s.rd.NewPoly(), sc: s}
	s.sampleTernary(prngFor(key, domSecret, 0), sQ, sk.coef)
	s.rq.NTT(sQ, sQ)
	s.liftSmall(sk.coef, s.rd, sk.sD)
	s.rd.NTT(sk.sD, sk.sD)

	pk := &PublicKey{Seed: seed, P0: s.rq.NewPoly(), s: s}
	p1 := s.pkP1(pk)
	e := s.rq.NewPoly()
	s.addGaussian(prngFor(key, domErr, 0), e, true)
	s.rq.NTT(e, e)
	s.rq.MulCoeffsBarrett(p1, sQ, pk.P0)
	s.rq.Sub(e, pk.P0, pk.P0)
	return sk, pk, nil
}

// pkP1 expands the public key's p1 (NTT domain) from its seed.
func (s *Scheme) pkP1(pk *PublicKey) ring.Poly {
	p1 := s.rq.NewPoly()
	s.seeded(publicSeedKey(&pk.Seed), domPK, 0, p1)
	return p1
}

// useMaskAVX512 selects maskBelowAVX512 (a variable so tests run both).
var useMaskAVX512 = haveMacAVX512

// maskAllBelow replaces every word of c by its bits under mask and reports
// whether all of them are then below q (mask < 2^63), with no branch per
// word: v ≥ q exactly when q−1−v wraps, setting its top bit; in AVX-512
// (maskBelowAVX512) eight words a compare where the CPU has it. Masking twice
// changes nothing, so uniformRow's loop may run over c afterwards.
func maskAllBelow(c []uint64, mask, q uint64) bool {
	var over uint64
	i := 0
	if useMaskAVX512 && len(c) >= 8 {
		i = len(c) &^ 7
		if maskBelowAVX512(&c[0], i, mask, q) {
			over = 1 << 63
		}
	}
	for ; i+4 <= len(c); i += 4 {
		w := c[i : i+4 : i+4]
		v0, v1, v2, v3 := w[0]&mask, w[1]&mask, w[2]&mask, w[3]&mask
		w[0], w[1], w[2], w[3] = v0, v1, v2, v3
		over |= (q - 1 - v0) | (q - 1 - v1) | (q - 1 - v2) | (q - 1 - v3)
	}
	for ; i < len(c); i++ {
		c[i] &= mask
		over |= q - 1 - c[i]
	}
	return over>>63 == 0
}

// seededRow fills dst with the residues mod q at positions pos0, pos0+1, …
// of the seeded expansion (k, dom, idx), the public halves of the weight
// ciphertexts: position pos takes word pos of the stream streamFor(k, dom,
// idx) (little-endian), masked to q's bit length, when that is below q, and
// otherwise the first such word of a stream of its own (retryRow). Any part
// of a row is made without the rest, so that party 1 regenerates a
// compact weight ciphertext's half a tile at a time, where its sum reads it
// (bench/TWOHOSTS.md, step 15). Residue row p of a polynomial is positions
// [p·N, (p+1)·N). pos0 is even (words are taken 16-byte blocks at a time).
// With the default moduli, a word is refused about once in 10^10.
func seededRow(k *share.AESKey, dom byte, idx, pos0 uint64, q uint64, dst []uint64) {
	if len(dst) == 0 {
		return
	}
	var iv [aes.BlockSize]byte
	iv[0] = dom
	binary.BigEndian.PutUint64(iv[1:9], idx)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 8*len(dst))
	k.KeyStreamAt(iv, pos0/2, b)
	if !share.HostLittleEndian() {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
	mask := uint64(1)<<bits.Len64(q-1) - 1
	if maskAllBelow(dst, mask, q) {
		return
	}
	for i, v := range dst {
		if v >= q {
			dst[i] = retryRow(k, dom, idx, pos0+uint64(i), q, mask)
		}
	}
}

// retryRow is the residue of position pos of the seeded expansion (k, dom,
// idx) whose first word was refused: the first word below q, masked, of the
// stream from the counter block dom|0x80 ‖ idx ‖ pos (32 bits) ‖ 0, which
// no expansion's main stream reaches (their first byte is a domain, below
// 0x80). pos fits 32 bits: NewScheme takes N ≤ 2^13 and at most maxPrimes
// = 16 rows, so pos < 2^17.
func retryRow(k *share.AESKey, dom byte, idx, pos, q, mask uint64) uint64 {
	var iv [aes.BlockSize]byte
	iv[0] = dom | 0x80
	binary.BigEndian.PutUint64(iv[1:9], idx)
	binary.BigEndian.PutUint32(iv[9:13], uint32(pos))
	var w [64]byte
	for blk := uint64(0); ; blk += uint64(len(w)) / aes.BlockSize {
		k.KeyStreamAt(iv, blk, w[:])
		for i := 0; i < len(w); i += 8 {
			if v := binary.LittleEndian.Uint64(w[i:]) & mask; v < q {
				return v
			}
		}
	}
}

// seeded fills p with the seeded polynomial idx of key k in domain dom:
// seededRow over each residue row.
func (s *Scheme) seeded(k *share.AESKey, dom byte, idx uint64, p ring.Poly) {
	for i, q := range s.p.Q {
		seededRow(k, dom, idx, uint64(i*s.n), q, p.Coeffs[i])
	}
}

// liftSmall writes the small signed coefficients v into p (coefficient
// domain) over ring r.
func (s *Scheme) liftSmall(v []int8, r *ring.Ring, p ring.Poly) {
	for i, sr := range r.SubRings {
		q := sr.Modulus
		c := p.Coeffs[i]
		for j, x := range v {
			switch {
			case x >= 0:
				c[j] = uint64(x)
			default:
				c[j] = q - uint64(-x)
			}
		}
	}
}

package beaver

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/selectformer/selectformer/share"
)

// Material derivation. The dealer shares seed0 with party 0 and seed1 with
// party 1. Every item's local part for party p is the AES-128-CTR stream of a
// key derived (HKDF, share.Seed.Derive) from seed_p for (party, kind, stream),
// started at the counter block counter‖0^64: items of one stream never overlap
// (an item would need 2^64 blocks to reach the next counter), and streams and
// kinds have independent keys. Party 0's material is entirely local; party 1's
// masks are local and only the words that make the relation hold (e.g.
// C1 = a·b − C0) come from the dealer, who expands both parties' streams
// itself to compute them.

// keyCache holds the AES keys of one seed, derived on first use.
type keyCache struct {
	seed  share.Seed
	party int
	mu    sync.Mutex
	keys  map[keyID]cipher.Block
}

type keyID struct {
	kind   Kind
	stream uint32
}

// maxCachedKeys bounds a key cache; past it the cache starts afresh (keys are
// re-derived on demand, so this only costs time).
const maxCachedKeys = 1 << 14

func newKeyCache(seed share.Seed, party int) *keyCache {
	return &keyCache{seed: seed, party: party, keys: make(map[keyID]cipher.Block)}
}

func blockFor(seed share.Seed, label string) cipher.Block {
	k := seed.Derive(label)
	b, err := aes.NewCipher(k[:16])
	if err != nil { // a 16-byte key is always valid
		panic("beaver: aes: " + err.Error())
	}
	return b
}

func (c *keyCache) block(kind Kind, stream uint32) cipher.Block {
	id := keyID{kind, stream}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.keys[id]; ok {
		return b
	}
	if len(c.keys) >= maxCachedKeys {
		clear(c.keys)
	}
	b := blockFor(c.seed, fmt.Sprintf("beaver/party=%d/%v/stream=%d", c.party, kind, stream))
	c.keys[id] = b
	return b
}

// fillCTR overwrites dst with the AES-CTR stream of block from the counter
// block hi‖0, writing it straight into dst (share.KeyStream: no zeroing
// pass first).
func fillCTR(dst []uint64, block cipher.Block, hi uint64) {
	if len(dst) == 0 {
		return
	}
	var iv [16]byte
	binary.BigEndian.PutUint64(iv[:8], hi)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)*8)
	share.KeyStream(b, cipher.NewCTR(block, iv[:]))
	if !littleEndian {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// weightMask expands the model owner's mask of weight id (k×n) from seed0.
func weightMask(seed0 share.Seed, id uint64, k, n int) []uint64 {
	return weightMaskInto(make([]uint64, k*n), seed0, id, k, n)
}

// weightMaskInto expands the mask of weight id (k×n) into dst (k·n words,
// whatever they held) and returns it.
func weightMaskInto(dst []uint64, seed0 share.Seed, id uint64, k, n int) []uint64 {
	b := blockFor(seed0, fmt.Sprintf("beaver/party=0/weightmask/id=%d/k=%d/n=%d", id, k, n))
	fillCTR(dst, b, 0)
	return dst
}

// localTotal returns the number of words of party's local parts of r.
func localTotal(r Request, party int) int {
	total := 0
	for _, s := range r.localWords(party) {
		total += s
	}
	return total
}

// expandLocal returns party's locally derived parts of a valid request.
func expandLocal(keys *keyCache, r Request) [][]uint64 {
	return expandLocalInto(make([]uint64, localTotal(r, keys.party)), keys, r)
}

// expandLocalInto is expandLocal into all (localTotal words, whatever they
// held): the parts are consecutive slices of all.
func expandLocalInto(all []uint64, keys *keyCache, r Request) [][]uint64 {
	sizes := r.localWords(keys.party)
	fillCTR(all, keys.block(r.Kind, r.Stream), r.Counter)
	parts := make([][]uint64, len(sizes))
	off := 0
	for i, s := range sizes {
		parts[i] = all[off : off+s : off+s]
		off += s
	}
	if r.Kind == KindBitPair {
		share.MaskTail(parts[0], r.N)
	}
	return parts
}

// correction computes the dealer's words for party 1 from both parties' local
// parts (p0, p1) and, for weight kinds, the mask B of the weight.
func correction(r Request, p0, p1 [][]uint64, mask []uint64) ([]uint64, error) {
	out := make([]uint64, r.CorrectionWords())
	switch r.Kind {
	case KindTriple:
		a0, b0, c0, a1, b1 := p0[0], p0[1], p0[2], p1[0], p1[1]
		for i := range out {
			out[i] = (a0[i]+a1[i])*(b0[i]+b1[i]) - c0[i]
		}
	case KindSquare:
		a0, s0, a1 := p0[0], p0[1], p1[0]
		for i := range out {
			a := a0[i] + a1[i]
			out[i] = a*a - s0[i]
		}
	case KindMatTriple:
		a, b := share.GetWords(len(p0[0])), share.GetWords(len(p0[1]))
		defer share.PutWords(a)
		defer share.PutWords(b)
		_ = share.AddVec(a, p0[0], p1[0])
		_ = share.AddVec(b, p0[1], p1[1])
		if err := share.BatchMatMulInto(out, a, b, r.Batch, r.M, r.K, r.N); err != nil {
			return nil, fmt.Errorf("beaver: %v: %w", r, err)
		}
		_ = share.SubVec(out, out, p0[2])
	case KindWeightTriple:
		if err := share.MatMulInto(out, p1[0], mask, r.M, r.K, r.N); err != nil {
			return nil, fmt.Errorf("beaver: %v: %w", r, err)
		}
		_ = share.SubVec(out, out, p0[0])
	case KindWeightVectorTriple:
		a, c0 := p1[0], p0[0]
		for i := 0; i < r.M; i++ {
			row := i * r.N
			for j := 0; j < r.N; j++ {
				out[row+j] = a[row+j]*mask[j] - c0[row+j]
			}
		}
	case KindAND:
		a0, b0, c0, a1, b1 := p0[0], p0[1], p0[2], p1[0], p1[1]
		for i := range out {
			out[i] = ((a0[i] ^ a1[i]) & (b0[i] ^ b1[i])) ^ c0[i]
		}
	case KindCrossAND:
		u, c0, v := p0[0], p0[1], p1[0]
		for i := range out {
			out[i] = (u[i] & v[i]) ^ c0[i]
		}
	case KindTrunc:
		n := r.N
		r0, msb0, low0, r1 := p0[0], p0[1], p0[2], p1[0]
		f := r.FracBits
		for i := 0; i < n; i++ {
			x := r0[i] + r1[i]
			out[i] = x>>63 - msb0[i]
			out[n+i] = (x<<1)>>(1+f) - low0[i]
		}
	case KindBitPair:
		n := r.N
		pk0, ar0, a0, x0 := p0[0], p0[1], p0[2], p0[3]
		pk1, a1 := p1[0], p1[1]
		for i := 0; i < n; i++ {
			bit := ((pk0[i/64] ^ pk1[i/64]) >> (i % 64)) & 1
			out[i] = bit - ar0[i]
			out[n+i] = (a0[i]+a1[i])*bit - x0[i]
		}
	default:
		return nil, fmt.Errorf("beaver: correction for %v", r)
	}
	return out, nil
}

// assemble builds party's material from its local parts and, for party 1,
// the dealer's correction words.
func assemble(party int, r Request, local [][]uint64, corr []uint64) Material {
	m := Material{Kind: r.Kind}
	n := r.N
	switch r.Kind {
	case KindTriple, KindMatTriple, KindAND:
		if party == 0 {
			m.Parts = local
		} else {
			m.Parts = [][]uint64{local[0], local[1], corr}
		}
	case KindSquare:
		if party == 0 {
			m.Parts = local
		} else {
			m.Parts = [][]uint64{local[0], corr}
		}
	case KindWeightTriple, KindWeightVectorTriple:
		if party == 0 {
			m.Parts = [][]uint64{nil, local[0]}
		} else {
			m.Parts = [][]uint64{local[0], corr}
		}
	case KindCrossAND:
		if party == 0 {
			m.Parts = [][]uint64{local[0], nil, local[1]}
		} else {
			m.Parts = [][]uint64{nil, local[0], corr}
		}
	case KindTrunc:
		if party == 0 {
			m.Parts = local
		} else {
			m.Parts = [][]uint64{local[0], corr[:n:n], corr[n:]}
		}
	case KindBitPair:
		if party == 0 {
			m.Parts = local
		} else {
			m.Parts = [][]uint64{local[0], corr[:n:n], local[1], corr[n:]}
		}
	}
	return m
}

package dealer

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
)

// Material derivation. The dealer shares seed0 with party 0 and seed1 with
// party 1. Every item's local part for party p is the AES-128-CTR stream of a
// key derived (HKDF, share.Seed.Derive) from seed_p for (party, kind, stream),
// started at the counter block counter‖0^64: items of one stream never overlap
// (an item would need 2^64 blocks to reach the next counter), and streams and
// kinds have independent keys. A party's masks are local and only the words
// that make the relation hold (e.g. C1 = a·b − C0) come from the dealer, who
// expands both parties' streams itself to compute them (beaver.Correlation.Deal);
// each built-in kind deals its words to one party (beaver.Correlation.DealtTo:
// party 0 for some kinds, party 1 for the others), whose other party's
// material of the kind is entirely local.

// keyCache holds the expanded AES keys of one seed, derived on first use.
type keyCache struct {
	seed  share.Seed
	party int
	mu    sync.Mutex
	keys  map[keyID]*share.AESKey
}

type keyID struct {
	kind   beaver.Kind
	stream uint32
}

// maxCachedKeys bounds a key cache; past it the cache starts afresh (keys are
// re-derived on demand, so this only costs time).
const maxCachedKeys = 1 << 14

func newKeyCache(seed share.Seed, party int) *keyCache {
	return &keyCache{seed: seed, party: party, keys: make(map[keyID]*share.AESKey)}
}

func blockFor(seed share.Seed, label string) *share.AESKey {
	k := seed.Derive(label)
	b, err := share.NewAESKey(k[:16])
	if err != nil { // a 16-byte key is always valid
		panic("beaver: " + err.Error())
	}
	return b
}

func (c *keyCache) block(kind beaver.Kind, stream uint32) *share.AESKey {
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

// fillCTR overwrites dst with the AES-CTR stream of key from the counter
// block hi‖0, writing it straight into dst (share.AESCTR: no zeroing pass
// first; VAES where the CPU has it).
func fillCTR(dst []uint64, key *share.AESKey, hi uint64) {
	if len(dst) == 0 {
		return
	}
	var iv [16]byte
	binary.BigEndian.PutUint64(iv[:8], hi)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), len(dst)*8)
	key.CTR(iv).KeyStream(b)
	if !share.HostLittleEndian() {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
}

// localTotal returns the number of words of party's local parts of r.
func localTotal(r beaver.Request, party int) int {
	total := 0
	for _, s := range r.LocalWords(party) {
		total += s
	}
	return total
}

// expandLocal returns party's locally derived parts of a valid request.
func expandLocal(keys *keyCache, r beaver.Request) [][]uint64 {
	return expandLocalInto(make([]uint64, localTotal(r, keys.party)), keys, r)
}

// expandLocalInto is expandLocal into all (localTotal words, whatever they
// held): the parts are consecutive slices of all.
func expandLocalInto(all []uint64, keys *keyCache, r beaver.Request) [][]uint64 {
	sizes := r.LocalWords(keys.party)
	fillCTR(all, keys.block(r.Kind, r.Stream), r.Counter)
	parts := make([][]uint64, len(sizes))
	off := 0
	for i, s := range sizes {
		parts[i] = all[off : off+s : off+s]
		off += s
	}
	return parts
}

// deal computes both parties' dealer words of a valid request r (out[p]
// has r.CorrectionWords(p) words) from their local parts and, for a kind
// with a Mask, the model owner's weight mask.
func deal(r beaver.Request, x beaver.Expansion) ([2][]uint64, error) {
	var out [2][]uint64
	c, ok := beaver.Lookup(r.Kind)
	if !ok {
		return out, fmt.Errorf("beaver: dealer words for %v: unknown kind", r)
	}
	for p := range out {
		out[p] = make([]uint64, r.CorrectionWords(p))
	}
	if err := c.Deal(r, x, out); err != nil {
		return out, err
	}
	return out, nil
}

// assemble builds party's material of a valid request r from its local
// parts and its dealer words (see beaver.Correlation.Assemble).
func assemble(party int, r beaver.Request, local [][]uint64, dealt []uint64) beaver.Material {
	c, _ := beaver.Lookup(r.Kind) // known: r is valid
	return beaver.Material{Kind: r.Kind, Parts: c.Assemble(r, party, local, dealt)}
}

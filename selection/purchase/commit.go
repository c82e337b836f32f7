package purchase

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"runtime"
	"sync"
)

// Size of a salt, a hash and a seed (bytes).
const (
	HashSize = sha256.Size
	SaltSize = 32
	SeedSize = 32
)

// Bounds of what a commitment covers.
const (
	// MaxPool bounds the candidates of a committed pool: positions are
	// 40-bit, and a path holds at most 40 hashes.
	MaxPool = 1 << 40
	// MaxItemBytes bounds one candidate's canonical bytes: the largest
	// item of a pool file (a 4096 × 4096 image of 4 channels; package
	// selection/pool).
	MaxItemBytes = 64 << 20
	// maxPath is the longest path of a pool of at most MaxPool candidates.
	maxPath = 40
)

// Domain separation of the hashes: RFC 6962 §2.1's leaf (0x00) and inner
// node (0x01) prefixes, and the root's own label.
const (
	leafPrefix  = 0x00
	innerPrefix = 0x01
	rootLabel   = "selectformer/purchase/pool-root/v1"
	saltLabel   = "selectformer/purchase/salt-key/v1"
)

// Items are a pool's candidates as canonical bytes: what the data owner
// commits to, sends with the bootstrap and delivers. Package selection/pool
// defines them for its pool files (pool.Pool), as the bytes mkpool writes.
type Items interface {
	// Len is the number of candidates.
	Len() int
	// AppendItem appends candidate i's canonical bytes (at most
	// MaxItemBytes) to dst and returns the extended slice.
	AppendItem(dst []byte, i int) ([]byte, error)
}

// ByteItems are Items held as byte slices, candidate i at position i.
type ByteItems [][]byte

// Len returns the number of candidates.
func (b ByteItems) Len() int { return len(b) }

// AppendItem appends candidate i's bytes to dst.
func (b ByteItems) AppendItem(dst []byte, i int) ([]byte, error) {
	if i < 0 || i >= len(b) {
		return dst, fmt.Errorf("purchase: candidate %d of %d", i, len(b))
	}
	return append(dst, b[i]...), nil
}

// Seed is the data owner's secret of a commitment: every salt is derived
// from it. It never leaves the data owner's host; losing it makes the
// purchase undeliverable (the salts cannot be recomputed).
type Seed [SeedSize]byte

// NewSeed draws a fresh seed from crypto/rand.
func NewSeed() (Seed, error) {
	var s Seed
	if _, err := io.ReadFull(rand.Reader, s[:]); err != nil {
		return s, fmt.Errorf("purchase: seed: %w", err)
	}
	return s, nil
}

// Root is a commitment to a pool: the head of the Merkle tree of its salted
// candidates, bound to the pool size (see the package documentation).
type Root [HashSize]byte

// String returns the root as 64 lower-case hex digits.
func (r Root) String() string { return hex.EncodeToString(r[:]) }

// IsZero reports whether r is the zero value (no commitment).
func (r Root) IsZero() bool { return r == Root{} }

// MarshalText encodes the root as hex.
func (r Root) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText decodes 64 hex digits.
func (r *Root) UnmarshalText(b []byte) error {
	v, err := ParseRoot(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRoot decodes a root from 64 hex digits.
func ParseRoot(s string) (Root, error) {
	var r Root
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != HashSize {
		return r, fmt.Errorf("purchase: root %.70q: not 64 hex digits", s)
	}
	copy(r[:], b)
	return r, nil
}

// salter derives the salts of a seed: salt_i is AES-256 (key SHA-256 of
// saltLabel and the seed) of the counter blocks 2i and 2i + 1 (128-bit
// big-endian), that is bytes 32i to 32i + 31 of the key's CTR key stream
// from IV 0: a PRF of the seed, so revealing some salts tells nothing
// about the others.
type salter struct{ b cipher.Block }

func newSalter(seed Seed) salter {
	h := sha256.New()
	h.Write([]byte(saltLabel))
	h.Write(seed[:])
	b, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		panic(err) // unreachable: a 32-byte key
	}
	return salter{b}
}

// salt returns candidate i's salt.
func (s salter) salt(i int) [SaltSize]byte {
	var out [SaltSize]byte
	s.fill(out[:], i)
	return out
}

// fill writes the salts of candidates lo, lo+1, … into dst (32 bytes each)
// from the CTR key stream at block 2·lo.
func (s salter) fill(dst []byte, lo int) {
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], 2*uint64(lo))
	clear(dst)
	cipher.NewCTR(s.b, iv[:]).XORKeyStream(dst, dst)
}

// leafHash is SHA-256(0x00 ‖ salt ‖ item), streamed (no copy of the
// item); Commit hashes its leaves in one buffer instead.
func leafHash(salt [SaltSize]byte, item []byte) [HashSize]byte {
	h := sha256.New()
	var pre [1 + SaltSize]byte
	pre[0] = leafPrefix
	copy(pre[1:], salt[:])
	h.Write(pre[:])
	h.Write(item)
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

// innerHash is SHA-256(0x01 ‖ left ‖ right).
func innerHash(l, r [HashSize]byte) [HashSize]byte {
	var b [1 + 2*HashSize]byte
	b[0] = innerPrefix
	copy(b[1:], l[:])
	copy(b[1+HashSize:], r[:])
	return sha256.Sum256(b[:])
}

// rootOf binds the tree's head to the pool size n.
func rootOf(n int, head [HashSize]byte) Root {
	h := sha256.New()
	h.Write([]byte(rootLabel))
	var nb [8]byte
	binary.LittleEndian.PutUint64(nb[:], uint64(n))
	h.Write(nb[:])
	h.Write(head[:])
	var r Root
	h.Sum(r[:0])
	return r
}

// Tree is the data owner's commitment to its pool: the Merkle tree of its
// salted candidates. It keeps the levels above the leaves (32 bytes per
// candidate in all); a leaf is recomputed from its item when an opening
// needs it.
type Tree struct {
	items  Items
	salts  salter
	n      int
	levels [][][HashSize]byte // levels[0]: the parents of the leaves; the last holds the head
	head   [HashSize]byte
	root   Root
}

// Commit builds the commitment to items with the salts of seed, hashing
// the leaves on all of the machine's cores. Cost, for n candidates of b
// bytes: n leaf hashes of 33 + b bytes and n − 1 inner hashes of 65 bytes;
// 32·n bytes of memory (BenchmarkCommit measures it).
func Commit(items Items, seed Seed) (*Tree, error) {
	n := items.Len()
	if n <= 0 || n > MaxPool {
		return nil, fmt.Errorf("purchase: commit: a pool of %d candidates (1..%d)", n, MaxPool)
	}
	t := &Tree{items: items, salts: newSalter(seed), n: n}
	leaves, err := t.leafLevel()
	if err != nil {
		return nil, err
	}
	if n == 1 {
		t.head = leaves[0]
	} else {
		level := parents(leaves)
		for {
			t.levels = append(t.levels, level)
			if len(level) == 1 {
				break
			}
			level = parents(level)
		}
		t.head = level[0]
	}
	t.root = rootOf(n, t.head)
	return t, nil
}

// leafLevel hashes every leaf, in parallel chunks. The result is garbage
// once the parents are built.
func (t *Tree) leafLevel() ([][HashSize]byte, error) {
	leaves := make([][HashSize]byte, t.n)
	workers := min(runtime.GOMAXPROCS(0), max(1, t.n/1024))
	chunk := (t.n + workers - 1) / workers
	errs := make([]error, workers)
	s := t.salts
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, t.n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The salts come a batch at a time from the key stream; the
			// item is appended after the prefix: one hash call and no
			// allocation per leaf.
			const batch = 1024
			salts := make([]byte, batch*SaltSize)
			var buf []byte
			for i := lo; i < hi; i++ {
				if (i-lo)%batch == 0 {
					s.fill(salts, i)
				}
				j := (i - lo) % batch * SaltSize
				buf = append(append(buf[:0], leafPrefix), salts[j:j+SaltSize]...)
				var err error
				if buf, err = t.item(buf, i); err != nil {
					errs[w] = err
					return
				}
				leaves[i] = sha256.Sum256(buf)
			}
		}()
	}
	wg.Wait()
	return leaves, errors.Join(errs...)
}

// item appends candidate i's bytes to dst, bounded (dst may hold a prefix).
func (t *Tree) item(dst []byte, i int) ([]byte, error) {
	b, err := t.items.AppendItem(dst, i)
	if err != nil {
		return nil, fmt.Errorf("purchase: candidate %d: %w", i, err)
	}
	if len(b)-len(dst) > MaxItemBytes {
		return nil, fmt.Errorf("purchase: candidate %d has %d bytes (at most %d)", i, len(b)-len(dst), MaxItemBytes)
	}
	return b, nil
}

// parents hashes a level's pairs, on all cores for a large level; an odd
// last node is carried up unchanged (as RFC 6962's tree of a size that is
// not a power of two).
func parents(level [][HashSize]byte) [][HashSize]byte {
	out := make([][HashSize]byte, (len(level)+1)/2)
	pairs := len(level) / 2
	workers := min(runtime.GOMAXPROCS(0), max(1, pairs/4096))
	chunk := (pairs + workers - 1) / workers
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*chunk, min((w+1)*chunk, pairs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				out[i] = innerHash(level[2*i], level[2*i+1])
			}
		}()
	}
	wg.Wait()
	if len(level)%2 == 1 {
		out[len(out)-1] = level[len(level)-1]
	}
	return out
}

// Root returns the commitment's root.
func (t *Tree) Root() Root { return t.root }

// Len returns the number of candidates.
func (t *Tree) Len() int { return t.n }

// Opening is the proof that a candidate is the committed pool's candidate
// Index: its canonical bytes, its salt and the sibling hashes from its leaf
// to the head (PathLen(Index, n) of them, leaf level first).
type Opening struct {
	Index int
	Item  []byte
	Salt  [SaltSize]byte
	Path  [][HashSize]byte
}

// Open returns the opening of candidate i.
func (t *Tree) Open(i int) (Opening, error) {
	if i < 0 || i >= t.n {
		return Opening{}, fmt.Errorf("purchase: open candidate %d of %d", i, t.n)
	}
	item, err := t.item(nil, i)
	if err != nil {
		return Opening{}, err
	}
	op := Opening{Index: i, Item: item, Salt: t.salts.salt(i)}
	// The leaf level's sibling, recomputed from its item.
	if sib := i ^ 1; sib < t.n {
		b, err := t.item(nil, sib)
		if err != nil {
			return Opening{}, err
		}
		op.Path = append(op.Path, leafHash(t.salts.salt(sib), b))
	}
	pos := i / 2
	for _, level := range t.levels[:max(len(t.levels)-1, 0)] {
		if sib := pos ^ 1; sib < len(level) {
			op.Path = append(op.Path, level[sib])
		}
		pos /= 2
	}
	return op, nil
}

// PathLen returns the number of hashes on the path of candidate i of a
// pool of n: one per level where its node has a sibling.
func PathLen(i, n int) int {
	l := 0
	for w := n; w > 1; w = (w + 1) / 2 {
		if i^1 < w {
			l++
		}
		i /= 2
	}
	return l
}

// ErrOpening is wrapped by every error of an opening that does not prove
// its candidate against a root.
var ErrOpening = errors.New("the opening does not match the commitment")

// VerifyOpening checks that op proves candidate op.Index of the pool of n
// candidates committed to by root: the index in range, the path of the
// length the index and n give, and the hashes from its salted leaf to
// root. Its error wraps ErrOpening when the opening is well formed but
// proves another pool or item.
func VerifyOpening(root Root, n int, op Opening) error {
	if n <= 0 || n > MaxPool {
		return fmt.Errorf("purchase: a pool of %d candidates (1..%d)", n, MaxPool)
	}
	if op.Index < 0 || op.Index >= n {
		return fmt.Errorf("purchase: candidate %d of a pool of %d", op.Index, n)
	}
	if len(op.Item) > MaxItemBytes {
		return fmt.Errorf("purchase: candidate %d has %d bytes (at most %d)", op.Index, len(op.Item), MaxItemBytes)
	}
	if want := PathLen(op.Index, n); len(op.Path) != want {
		return fmt.Errorf("purchase: candidate %d: a path of %d hashes (a pool of %d has %d)", op.Index, len(op.Path), n, want)
	}
	node := leafHash(op.Salt, op.Item)
	i, k := op.Index, 0
	for w := n; w > 1; w = (w + 1) / 2 {
		if sib := i ^ 1; sib < w {
			if i%2 == 0 {
				node = innerHash(node, op.Path[k])
			} else {
				node = innerHash(op.Path[k], node)
			}
			k++
		}
		i /= 2
	}
	got := rootOf(n, node)
	if subtle.ConstantTimeCompare(got[:], root[:]) != 1 {
		return fmt.Errorf("purchase: candidate %d: %w", op.Index, ErrOpening)
	}
	return nil
}

// pathBound is the longest path of a pool of n: ⌈log2 n⌉.
func pathBound(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

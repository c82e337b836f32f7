package purchase

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// randomItems returns n items of 1..maxLen random bytes.
func randomItems(n, maxLen int, seed uint64) ByteItems {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make(ByteItems, n)
	for i := range out {
		b := make([]byte, 1+rng.IntN(maxLen))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out[i] = b
	}
	return out
}

func seedOf(b byte) Seed {
	var s Seed
	s[0] = b
	return s
}

// mth is RFC 6962 §2.1's Merkle Tree Hash of the leaf hashes, split at the
// largest power of two below n.
func mth(leaves [][HashSize]byte) [HashSize]byte {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1 << (bits.Len(uint(len(leaves)-1)) - 1)
	return innerHash(mth(leaves[:k]), mth(leaves[k:]))
}

// TestCommitOpenVerify commits pools of 1..70 candidates and 1,000: the
// head is RFC 6962's Merkle Tree Hash of the salted leaves, every
// candidate's opening verifies with a path of PathLen hashes (at most
// ⌈log2 n⌉), and an opening with its item, salt, a path hash or its index
// altered, or checked against another pool size or root, does not.
func TestCommitOpenVerify(t *testing.T) {
	for _, n := range append(seq(1, 70), 1000) {
		items := randomItems(n, 40, uint64(n))
		tr, err := Commit(items, seedOf(1))
		if err != nil {
			t.Fatal(err)
		}
		s := newSalter(seedOf(1))
		leaves := make([][HashSize]byte, n)
		for i := range leaves {
			leaves[i] = leafHash(s.salt(i), items[i])
		}
		if tr.head != mth(leaves) {
			t.Fatalf("n=%d: the head is not RFC 6962's Merkle Tree Hash", n)
		}
		for i := range n {
			op, err := tr.Open(i)
			if err != nil {
				t.Fatal(err)
			}
			if len(op.Path) != PathLen(i, n) || len(op.Path) > pathBound(n) {
				t.Fatalf("n=%d i=%d: path of %d, PathLen %d, bound %d", n, i, len(op.Path), PathLen(i, n), pathBound(n))
			}
			if err := VerifyOpening(tr.Root(), n, op); err != nil {
				t.Fatalf("n=%d i=%d: %v", n, i, err)
			}
			bad := []struct {
				name string
				op   Opening
				n    int
				root Root
			}{
				{"item", withItem(op, append(append([]byte(nil), op.Item...), 0)), n, tr.Root()},
				{"salt", withSalt(op), n, tr.Root()},
				{"root", op, n, Root{1}},
				{"pool size", op, n + 1, tr.Root()},
			}
			if len(op.Path) > 0 {
				bad = append(bad, struct {
					name string
					op   Opening
					n    int
					root Root
				}{"path", withPath(op), n, tr.Root()})
			}
			if n > 1 {
				o := op.clone()
				o.Index = (i + 1) % n
				if len(o.Path) == PathLen(o.Index, n) {
					bad = append(bad, struct {
						name string
						op   Opening
						n    int
						root Root
					}{"index", o, n, tr.Root()})
				}
			}
			for _, b := range bad {
				if err := VerifyOpening(b.root, b.n, b.op); err == nil {
					t.Fatalf("n=%d i=%d: an opening with its %s altered verifies", n, i, b.name)
				}
			}
		}
	}
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func withItem(op Opening, item []byte) Opening { o := op.clone(); o.Item = item; return o }
func withSalt(op Opening) Opening              { o := op.clone(); o.Salt[3] ^= 1; return o }
func withPath(op Opening) Opening {
	o := op.clone()
	o.Path[len(o.Path)-1][0] ^= 1
	return o
}

// TestRootDependsOnSeedAndEveryItem: the same pool under two seeds gives
// unrelated roots (the salts hide the items: a model owner cannot test a
// guess of the pool against the root without the seed), and changing any
// one item or the pool's size changes the root.
func TestRootDependsOnSeedAndEveryItem(t *testing.T) {
	items := randomItems(33, 20, 5)
	root := func(it ByteItems, s Seed) Root {
		tr, err := Commit(it, s)
		if err != nil {
			t.Fatal(err)
		}
		return tr.Root()
	}
	r := root(items, seedOf(1))
	if root(items, seedOf(2)) == r {
		t.Fatal("two seeds give the same root")
	}
	for i := range items {
		alt := append(ByteItems(nil), items...)
		alt[i] = append([]byte{0xff}, alt[i]...)
		if root(alt, seedOf(1)) == r {
			t.Fatalf("changing item %d keeps the root", i)
		}
	}
	if root(items[:32], seedOf(1)) == r {
		t.Fatal("dropping the last item keeps the root")
	}
}

// TestCommitRefuses: an empty pool, an item beyond MaxItemBytes and an
// item that cannot be read are refused.
func TestCommitRefuses(t *testing.T) {
	if _, err := Commit(ByteItems{}, seedOf(1)); err == nil {
		t.Error("an empty pool commits")
	}
	if _, err := Commit(failingItems{n: 3000, fail: 2500}, seedOf(1)); err == nil {
		t.Error("an unreadable item commits")
	}
	if _, err := Commit(hugeItems{}, seedOf(1)); err == nil {
		t.Error("an item beyond MaxItemBytes commits")
	}
}

type failingItems struct{ n, fail int }

func (f failingItems) Len() int { return f.n }
func (f failingItems) AppendItem(dst []byte, i int) ([]byte, error) {
	if i == f.fail {
		return nil, errors.New("unreadable")
	}
	return append(dst, byte(i)), nil
}

type hugeItems struct{}

func (hugeItems) Len() int { return 2 }
func (hugeItems) AppendItem(dst []byte, i int) ([]byte, error) {
	return append(dst, make([]byte, MaxItemBytes+i)...), nil
}

// TestDecodeOpenings round-trips the openings of a sample and refuses a
// count, an index, a path length, an item length or a total beyond what
// the sample allows, and trailing bytes.
func TestDecodeOpenings(t *testing.T) {
	items := randomItems(50, 30, 9)
	tr, _ := Commit(items, seedOf(3))
	idx := []int{2, 7, 31, 49}
	var ops []Opening
	for _, i := range idx {
		op, _ := tr.Open(i)
		ops = append(ops, op)
	}
	b := EncodeOpenings(ops)
	got, err := DecodeOpenings(b, idx, 50, 30)
	if err != nil {
		t.Fatal(err)
	}
	for k := range got {
		if got[k].Index != idx[k] || !bytes.Equal(got[k].Item, ops[k].Item) || got[k].Salt != ops[k].Salt || fmt.Sprint(got[k].Path) != fmt.Sprint(ops[k].Path) {
			t.Fatalf("opening %d differs after the round trip", k)
		}
		if err := VerifyOpening(tr.Root(), 50, got[k]); err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]struct {
		b       []byte
		idx     []int
		maxItem int
	}{
		"fewer":        {b, idx[:3], 30},
		"other index":  {b, []int{2, 7, 30, 49}, 30},
		"item bound":   {b, idx, 3},
		"trailing":     {append(append([]byte(nil), b...), 0), idx, 30},
		"cut":          {b[:len(b)-1], idx, 30},
		"empty":        {nil, nil, 30},
		"count only":   {b[:4], idx, 30},
		"huge maxItem": {b, idx, MaxItemBytes + 1},
	} {
		if _, err := DecodeOpenings(c.b, c.idx, 50, c.maxItem); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	// A path one hash short.
	short := ops[0].clone()
	short.Path = short.Path[:len(short.Path)-1]
	if _, err := DecodeOpenings(EncodeOpenings([]Opening{short}), idx[:1], 50, 30); err == nil {
		t.Error("a short path decodes")
	}
}

package share

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// eachCTRPath runs f once per key-stream implementation (crypto/aes, and
// 256- and 512-bit VAES), with keys made under that path; a path this host
// cannot run (ctrPaths) is a skipped subtest that says what it needs.
func eachCTRPath(t *testing.T, f func(t *testing.T)) {
	saved := ctrPath
	defer func() { ctrPath = saved }()
	needs := [...]string{
		ctrVAES2: "VAES and AVX2 with the OS saving YMM state, in a build with assembly (amd64, not purego)",
		ctrVAES4: "AVX-512 F and BW and VAES with the OS saving ZMM state, in a build with assembly (amd64, not purego); GODEBUG=cpu.avx512f=off masks it",
	}
	for _, p := range []int{ctrStd, ctrVAES2, ctrVAES4} {
		t.Run(ctrPathNames[p], func(t *testing.T) {
			if !slices.Contains(ctrPaths(), p) {
				t.Skipf("this host cannot run the %s path: it needs %s", ctrPathNames[p], needs[p])
			}
			ctrPath = p
			f(t)
		})
	}
}

// TestAESCTRMatchesCryptoCTR checks that AESCTR's key stream is
// crypto/cipher's AES-128-CTR and AES-256-CTR stream byte for byte: random keys, counter
// blocks whose low word wraps within the stream (the carry into the high
// word: the test checks that it did wrap), and calls of every awkward
// length, before and after whole groups.
func TestAESCTRMatchesCryptoCTR(t *testing.T) {
	lengths := []int{0, 1, 15, 16, 17, 63, 64, 65, 100, 511, 512, 513, 2048 + 7, 20000, 3, 40}
	ivs := []struct {
		name   string
		hi, lo uint64
	}{
		{"zero", 0, 0},
		{"random", 0x0123456789abcdef, 0xfedcba9876543210},
		{"low word wraps early", 7, ^uint64(0) - 2},
		{"low word wraps late", 9, ^uint64(0) - 1000}, // in the 20,000-byte call
		{"both words wrap", ^uint64(0), ^uint64(0) - 40},
	}
	eachCTRPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(27, 1))
		for _, c := range ivs {
			for _, keyLen := range []int{16, 32} {
				t.Run(fmt.Sprintf("%s/AES-%d", c.name, 8*keyLen), func(t *testing.T) {
					key := make([]byte, keyLen)
					for i := 0; i < keyLen; i += 8 {
						binary.LittleEndian.PutUint64(key[i:], rng.Uint64())
					}
					var iv [16]byte
					binary.BigEndian.PutUint64(iv[:8], c.hi)
					binary.BigEndian.PutUint64(iv[8:], c.lo)
					k, err := NewAESKey(key[:])
					if err != nil {
						t.Fatal(err)
					}
					blk, _ := aes.NewCipher(key[:])
					ref := cipher.NewCTR(blk, iv[:])
					got := k.CTR(iv)
					for i, n := range lengths {
						want := make([]byte, n)
						ref.XORKeyStream(want, want)
						dst := bytes.Repeat([]byte{0xa5}, n) // stale contents are overwritten
						if i%3 == 2 {
							// cipher.Stream use, in place.
							src := bytes.Repeat([]byte{0x5a}, n)
							dst = append([]byte(nil), src...)
							got.XORKeyStream(dst, dst)
							for j := range dst {
								dst[j] ^= src[j]
							}
						} else {
							got.KeyStream(dst)
						}
						if !bytes.Equal(dst, want) {
							t.Fatalf("call %d (%d bytes): key stream differs from crypto/cipher's CTR", i, n)
						}
					}
					// The case tests the carry only if its stream does cross
					// the wrap: ceil(total/16) blocks from lo.
					total := uint64(0)
					for _, n := range lengths {
						total += uint64(n)
					}
					if _, carry := bits.Add64(c.lo, (total+15)/16-1, 0); strings.Contains(c.name, "wraps") && carry == 0 {
						t.Fatalf("case %q: the low word never wraps in %d bytes", c.name, total)
					}
				})
			}
		}
	})
}

// TestAESKeyStreamAt: a part of a stream taken by KeyStreamAt is the
// same bytes as crypto/cipher's CTR stream from iv hands out after blocks·16
// bytes, on every path this host runs, for both key sizes, offsets inside
// and across a group, and a start past the wrap of the low counter word
// (the 128-bit sum carries into the high word).
func TestAESKeyStreamAt(t *testing.T) {
	eachCTRPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(31, 7))
		for _, keyLen := range []int{16, 32} {
			key := make([]byte, keyLen)
			for i := 0; i < keyLen; i += 8 {
				binary.LittleEndian.PutUint64(key[i:], rng.Uint64())
			}
			k, err := NewAESKey(key)
			if err != nil {
				t.Fatal(err)
			}
			blk, _ := aes.NewCipher(key)
			for _, c := range []struct {
				hi, lo uint64
				blocks uint64
				n      int
			}{
				{0, 0, 0, 64}, {0, 0, 1, 16}, {0, 0, 3, 100}, {0, 0, 4, 2048}, {5, 1 << 56, 1000, 2048 + 8},
				{7, ^uint64(0) - 3, 10, 512}, // starts past the wrap
				{7, ^uint64(0) - 3, 2, 512},  // wraps inside
				{1, 2, 0, 0},
			} {
				var iv [16]byte
				binary.BigEndian.PutUint64(iv[:8], c.hi)
				binary.BigEndian.PutUint64(iv[8:], c.lo)
				want := make([]byte, int(c.blocks)*16+c.n)
				cipher.NewCTR(blk, iv[:]).XORKeyStream(want, want)
				got := bytes.Repeat([]byte{0xa5}, c.n)
				k.KeyStreamAt(iv, c.blocks, got)
				if !bytes.Equal(got, want[c.blocks*16:]) {
					t.Fatalf("AES-%d, iv %#x‖%#x, from block %d, %d bytes: differs from crypto/cipher's CTR", 8*keyLen, c.hi, c.lo, c.blocks, c.n)
				}
			}
			// The vector paths allocate nothing for whole groups: the HE
			// sum calls this for every tile of every weight row.
			if ctrPath != ctrStd {
				buf := make([]byte, 2048)
				var iv [16]byte
				if a := testing.AllocsPerRun(20, func() { k.KeyStreamAt(iv, 5, buf) }); a != 0 {
					t.Errorf("AES-%d: %v allocations a call, want 0", 8*keyLen, a)
				}
			}
		}
	})
}

// TestAESCTRWrapInLongCall: one KeyStream call of 4 MiB whose low counter
// word wraps inside it, at a block inside a group and at a group boundary
// (and with the high word wrapping too), matches crypto/cipher's CTR byte
// for byte on every path this host runs: the vector code stops before the
// wrap, the straddling group carries block by block, and the vector code
// resumes after it. crypto/cipher's stream is first checked against AES of
// the explicit 128-bit big-endian counter blocks around the wrap, so the
// reference has the semantics AESCTR documents.
func TestAESCTRWrapInLongCall(t *testing.T) {
	for _, keyLen := range []int{16, 32} {
		t.Run(fmt.Sprintf("AES-%d", 8*keyLen), func(t *testing.T) { wrapInLongCall(t, keyLen) })
	}
}

// wrapInLongCall is TestAESCTRWrapInLongCall with a random key of keyLen
// bytes.
func wrapInLongCall(t *testing.T, keyLen int) {
	const size = 4<<20 + 48 // one call; not a whole number of groups
	const prefix = 23       // a first call that leaves part of a group made ahead
	cases := []struct {
		name   string
		hi, lo uint64
	}{
		{"wrap inside a group", 0x0123456789abcdef, ^uint64(0) - 100_002}, // 2^64 − 100,003
		{"wrap at a group boundary", 0x0123456789abcdef, ^uint64(0) - 100_003},
		{"both words wrap", ^uint64(0), ^uint64(0) - 200_000},
	}
	key := make([]byte, keyLen)
	rng := rand.New(rand.NewPCG(38, uint64(keyLen)))
	for i := 0; i < keyLen; i += 8 {
		binary.LittleEndian.PutUint64(key[i:], rng.Uint64())
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(cases))
	for i, c := range cases {
		var iv [16]byte
		binary.BigEndian.PutUint64(iv[:8], c.hi)
		binary.BigEndian.PutUint64(iv[8:], c.lo)
		want[i] = make([]byte, prefix+size)
		cipher.NewCTR(blk, iv[:]).XORKeyStream(want[i], want[i])
		// The reference: block j is AES(hi‖lo + j), 128-bit.
		skip := -c.lo
		for j := skip - 3; j < skip+3; j++ {
			var ctr, ks [16]byte
			lo, carry := bits.Add64(c.lo, j, 0)
			binary.BigEndian.PutUint64(ctr[:8], c.hi+carry)
			binary.BigEndian.PutUint64(ctr[8:], lo)
			blk.Encrypt(ks[:], ctr[:])
			if !bytes.Equal(want[i][16*j:16*j+16], ks[:]) {
				t.Fatalf("%s: crypto/cipher's CTR block %d is not AES of the 128-bit counter %#x‖%#x", c.name, j, c.hi+carry, lo)
			}
		}
	}
	for _, c := range cases {
		// The wrap is inside the long call, past the prefix's group.
		if w := -c.lo; w*16 <= prefix+ctrGroup || w*16 >= prefix+size-ctrGroup {
			t.Fatalf("%s: the low word wraps at block %d, not inside the long call", c.name, w)
		}
	}
	eachCTRPath(t, func(t *testing.T) {
		k, err := NewAESKey(key)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cases {
			var iv [16]byte
			binary.BigEndian.PutUint64(iv[:8], c.hi)
			binary.BigEndian.PutUint64(iv[8:], c.lo)
			s := k.CTR(iv)
			got := make([]byte, prefix+size)
			s.KeyStream(got[:prefix])
			s.KeyStream(got[prefix:])
			if j := firstDiff(got, want[i]); j >= 0 {
				t.Errorf("%s: the %d-byte call differs from crypto/cipher's CTR from byte %d (block %d; the low word wraps at block %d)",
					c.name, size, j, j/16, -c.lo)
			}
		}
	})
}

// TestNewAESKeyLength checks that keys other than 16 and 32 bytes are
// refused (AES-192 included: nothing uses it).
func TestNewAESKeyLength(t *testing.T) {
	for _, n := range []int{0, 15, 17, 24, 31, 33} {
		if _, err := NewAESKey(make([]byte, n)); err == nil {
			t.Errorf("NewAESKey(%d bytes): no error", n)
		}
	}
}

// BenchmarkKeyStreamAt: AESKey.KeyStreamAt on each code path for calls of
// 512 bytes to 64 KiB; 2 KiB is a seeded weight half's row of a sum tile
// (beaver/he's regeneration, 256 words a call), where a fixed cost per call
// shows (a legacy SSE instruction among the VAES path's AVX-512 ones cost
// about 200 ns a call on an Intel Xeon: 5.2 GB/s at 2 KiB against 12.2
// after, testharness/layering's TestAsmVectorEncodings).
func BenchmarkKeyStreamAt(b *testing.B) {
	saved := ctrPath
	defer func() { ctrPath = saved }()
	k, _ := NewAESKey(make([]byte, 16))
	for _, p := range ctrPaths() {
		ctrPath = p
		for _, n := range []int{512, 2 << 10, 64 << 10} {
			dst := make([]byte, n)
			b.Run(fmt.Sprintf("%s/%d", ctrPathNames[p], n), func(b *testing.B) {
				b.SetBytes(int64(n))
				var at uint64
				for b.Loop() {
					k.KeyStreamAt([16]byte{1}, at, dst)
					at += 1 << 20
				}
			})
		}
	}
}

// BenchmarkAESCTR times the key stream into a 64 KiB buffer on each path,
// with AES-128 and AES-256 keys.
func BenchmarkAESCTR(b *testing.B) {
	saved := ctrPath
	defer func() { ctrPath = saved }()
	for _, p := range ctrPaths() {
		ctrPath = p
		for _, keyLen := range []int{16, 32} {
			k, _ := NewAESKey(make([]byte, keyLen))
			b.Run(fmt.Sprintf("%s/AES-%d", ctrPathNames[p], 8*keyLen), func(b *testing.B) {
				s := k.CTR([16]byte{})
				dst := make([]byte, 64<<10)
				b.SetBytes(int64(len(dst)))
				for b.Loop() {
					s.KeyStream(dst)
				}
			})
		}
	}
}

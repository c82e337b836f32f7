package share

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// eachCTRPath runs f once per key-stream implementation this host can
// run (ctrPaths: crypto/aes, and 256- and 512-bit VAES where the CPU has
// them), with keys made under that path.
func eachCTRPath(t *testing.T, f func(t *testing.T)) {
	saved := ctrPath
	defer func() { ctrPath = saved }()
	paths := ctrPaths()
	if len(paths) == 1 {
		t.Log("no VAES on this CPU: only the crypto/aes path is tested")
	}
	for _, p := range paths {
		ctrPath = p
		t.Run(ctrPathNames[p], f)
	}
}

// TestAESCTRMatchesCryptoCTR checks that AESCTR's key stream is
// crypto/cipher's AES-128-CTR stream byte for byte: random keys, counter
// blocks whose low word wraps within the stream (the carry into the high
// word), and calls of every awkward length, before and after whole groups.
func TestAESCTRMatchesCryptoCTR(t *testing.T) {
	lengths := []int{0, 1, 15, 16, 17, 63, 64, 65, 100, 511, 512, 513, 2048 + 7, 20000, 3, 40}
	ivs := []struct {
		name   string
		hi, lo uint64
	}{
		{"zero", 0, 0},
		{"random", 0x0123456789abcdef, 0xfedcba9876543210},
		{"low word wraps early", 7, ^uint64(0) - 2},
		{"low word wraps late", 9, ^uint64(0) - 1500},
		{"both words wrap", ^uint64(0), ^uint64(0) - 40},
	}
	eachCTRPath(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(27, 1))
		for _, c := range ivs {
			t.Run(c.name, func(t *testing.T) {
				var key [16]byte
				binary.LittleEndian.PutUint64(key[:8], rng.Uint64())
				binary.LittleEndian.PutUint64(key[8:], rng.Uint64())
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
			})
		}
	})
}

// TestNewAESKeyLength checks that keys other than 16 bytes are refused.
func TestNewAESKeyLength(t *testing.T) {
	for _, n := range []int{0, 15, 17, 24, 32} {
		if _, err := NewAESKey(make([]byte, n)); err == nil {
			t.Errorf("NewAESKey(%d bytes): no error", n)
		}
	}
}

// BenchmarkAESCTR times the key stream into a 64 KiB buffer on each path.
func BenchmarkAESCTR(b *testing.B) {
	saved := ctrPath
	defer func() { ctrPath = saved }()
	for _, p := range ctrPaths() {
		ctrPath = p
		k, _ := NewAESKey(make([]byte, 16))
		b.Run(ctrPathNames[p], func(b *testing.B) {
			s := k.CTR([16]byte{})
			dst := make([]byte, 64<<10)
			b.SetBytes(int64(len(dst)))
			for b.Loop() {
				s.KeyStream(dst)
			}
		})
	}
}

package dealer

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestFillCTRMatchesSpec pins the material expansion to its documented
// construction: the AES-128-CTR stream (crypto/cipher's) of the key derived
// for the label, from the counter block counter‖0^64, read as
// little-endian words, for lengths around the key stream's block groups.
func TestFillCTRMatchesSpec(t *testing.T) {
	seed := share.Seed{27, 1}
	for _, c := range []struct {
		words   int
		counter uint64
	}{{1, 0}, {2, 5}, {7, 1 << 40}, {8, 3}, {9, ^uint64(0)}, {64, 2}, {1000, 17}, {4099, 9}} {
		t.Run(fmt.Sprintf("%d words at %d", c.words, c.counter), func(t *testing.T) {
			label := "beaver/party=1/test/stream=3"
			k := seed.Derive(label)
			blk, err := aes.NewCipher(k[:16])
			if err != nil {
				t.Fatal(err)
			}
			var iv [16]byte
			binary.BigEndian.PutUint64(iv[:8], c.counter)
			ks := make([]byte, 8*c.words)
			cipher.NewCTR(blk, iv[:]).XORKeyStream(ks, ks)
			got := make([]uint64, c.words)
			for i := range got {
				got[i] = 0xdeadbeef // overwritten
			}
			fillCTR(got, blockFor(seed, label), c.counter)
			for i, w := range got {
				if want := binary.LittleEndian.Uint64(ks[8*i:]); w != want {
					t.Fatalf("word %d = %#x, want %#x", i, w, want)
				}
			}
		})
	}
}

package share

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"unsafe"
)

// SeedSize is the size in bytes of a PRG seed.
const SeedSize = 32

// Seed is a 32-byte secret from which a PRG stream is expanded.
type Seed [SeedSize]byte

// NewSeed returns a fresh uniformly random seed from crypto/rand.
func NewSeed() (Seed, error) {
	var s Seed
	if _, err := rand.Read(s[:]); err != nil {
		return s, fmt.Errorf("share: new seed: %w", err)
	}
	return s, nil
}

// String returns the first bytes of the seed's SHA-256 in hex, for logs; it
// never prints the seed.
func (s Seed) String() string {
	h := sha256.Sum256(s[:])
	return "seed:" + hex.EncodeToString(h[:4])
}

// Derive returns the child seed for label: HKDF-SHA256 with the seed as input
// keying material and label as info. Children of one seed for distinct labels
// are independent, and a child reveals nothing about its parent.
func (s Seed) Derive(label string) Seed {
	var out Seed
	k, err := hkdf.Key(sha256.New, s[:], nil, "selectformer/seed/"+label, SeedSize)
	if err != nil { // only possible for absurd output lengths
		panic("share: hkdf: " + err.Error())
	}
	copy(out[:], k)
	return out
}

// PRG expands a seed into a stream of uniformly random ring words with
// AES-128 in counter mode (AESCTR: 512- or 256-bit VAES where the CPU has
// it, else AES-NI on amd64 and arm64). Streams for distinct
// (seed, domain) pairs are independent; the same pair always yields the same
// stream, on every host (words are read little-endian).
// A PRG is not safe for concurrent use.
//
// Words and bytes are taken from one byte stream in order, whichever method
// asks for them: Uint64 draws from a small buffer of key stream made ahead,
// and Fill and Read use up that buffer before expanding further, so mixing
// the calls yields exactly the words a single Fill would.
type PRG struct {
	stream *AESCTR
	// buf[off:] is key stream made ahead and not yet handed out.
	buf [prgBufSize]byte
	off int
}

// prgBufSize is the size of the key stream Uint64 makes ahead.
const prgBufSize = 512

// NewPRG returns the stream for (seed, domain). The AES key and counter block
// are derived from the seed with HKDF-SHA256, the domain being the info string.
func NewPRG(seed Seed, domain string) *PRG {
	km, err := hkdf.Key(sha256.New, seed[:], nil, "selectformer/prg/aes128ctr/"+domain, 32)
	if err != nil {
		panic("share: hkdf: " + err.Error())
	}
	key, err := NewAESKey(km[:16])
	if err != nil { // a 16-byte key is always valid
		panic(err.Error())
	}
	return &PRG{stream: key.CTR([16]byte(km[16:32])), off: prgBufSize}
}

// littleEndian is true on hosts whose native byte order is little-endian, where
// a []uint64 can be filled through its bytes directly.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// HostLittleEndian reports whether this host stores words little-endian, so
// that a []uint64 filled through its bytes (a key stream written into the
// words' memory) holds the little-endian words of those bytes without a
// byte swap: the one test of the byte order for every package that does so.
func HostLittleEndian() bool { return littleEndian }

// wordBytes returns the memory of w as bytes (native order).
func wordBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// Fill overwrites dst with the next len(dst) words of the stream.
func (p *PRG) Fill(dst []uint64) {
	b := wordBytes(dst)
	p.fillBytes(b)
	if !littleEndian {
		for i := range dst {
			dst[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	}
}

// Words returns the next n words of the stream in a new slice.
func (p *PRG) Words(n int) []uint64 {
	w := make([]uint64, n)
	p.Fill(w)
	return w
}

// Uint64 returns the next word of the stream.
func (p *PRG) Uint64() uint64 {
	if prgBufSize-p.off < 8 {
		// Keep the few bytes left and make the rest of the buffer anew.
		r := copy(p.buf[:], p.buf[p.off:])
		p.stream.KeyStream(p.buf[r:])
		p.off = 0
	}
	v := binary.LittleEndian.Uint64(p.buf[p.off:])
	p.off += 8
	return v
}

// fillBytes overwrites b with the next len(b) bytes of the stream: first the
// bytes buffered by Uint64, then fresh key stream.
func (p *PRG) fillBytes(b []byte) {
	n := copy(b, p.buf[p.off:])
	p.off += n
	p.stream.KeyStream(b[n:])
}

// zeroBlock is the read-only source of KeyStream: key stream XORed with
// zeros is the key stream itself. Small enough to stay in the L1 cache.
var zeroBlock [8 << 10]byte

// KeyStream overwrites dst with the next len(dst) bytes of the key stream of
// s, whatever dst held before: it XORs the key stream into dst from a small
// block of zeros, so dst is written once (no clearing pass before the
// cipher, no read of dst's old contents).
func KeyStream(dst []byte, s cipher.Stream) {
	for len(dst) > 0 {
		n := min(len(dst), len(zeroBlock))
		s.XORKeyStream(dst[:n], zeroBlock[:n])
		dst = dst[n:]
	}
}

// Read fills b with the next len(b) bytes of the stream; it never fails.
// It makes a PRG an io.Reader, e.g. for math/rand/v2 sources or key generation in tests.
func (p *PRG) Read(b []byte) (int, error) {
	p.fillBytes(b)
	return len(b), nil
}

// Intn returns a uniform integer in [0, n) by rejection sampling. Like
// math/rand's Intn it panics if n ≤ 0, a programming error.
func (p *PRG) Intn(n int) int {
	if n <= 0 {
		panic("share: PRG.Intn: n must be positive")
	}
	bound := uint64(n)
	limit := ^uint64(0) - (^uint64(0)%bound+1)%bound
	for {
		v := p.Uint64()
		if v <= limit {
			return int(v % bound)
		}
	}
}

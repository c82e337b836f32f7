package share

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"math/bits"
)

// AESCTR is an AES-128 or AES-256 counter-mode key stream: the stream of
// crypto/cipher.NewCTR(aes.NewCipher(key), iv), byte for byte (the counter
// block is a 128-bit big-endian integer incremented per block), made with
// 512-bit vector AES (VAES, AVX-512) thirty-two blocks at a time where the
// CPU has it, with 256-bit VAES and AVX2 sixteen blocks at a time where it
// has those but no AVX-512 (and for AES-256 keys wherever it has VAES), and
// by crypto/aes (AES-NI) otherwise. The PRG and the beaver
// package's material expansion use it. An AESCTR is not safe for concurrent
// use; its key (NewAESKey) is, and may start any number of streams.
type AESCTR struct {
	key *AESKey
	// hi‖lo is the counter block of the next whole block of stream.
	hi, lo uint64
	// ks[kOff:] is key stream made ahead (the rest of a partly used block
	// group) and not yet handed out.
	ks   [ctrGroup]byte
	kOff int
	// std is crypto/cipher's stream, used where there is no VAES.
	std cipher.Stream
}

// AESKey is an expanded AES-128 or AES-256 key for AESCTR streams.
type AESKey struct {
	// rk holds the round keys, FIPS-197 byte order, as AESENC takes them:
	// 11 (AES-128) or 15 (AES-256).
	rk [240]byte
	// rounds is 10 (AES-128) or 14 (AES-256).
	rounds int
	// rk2 holds each round key twice, a 256-bit operand for the AVX2
	// path's VAESENC.
	rk2   [480]byte
	block cipher.Block
}

// The key-stream implementations (ctrPath).
const (
	ctrStd   = iota // crypto/cipher's CTR (AES-NI)
	ctrVAES2        // 256-bit VAES with AVX2
	ctrVAES4        // 512-bit VAES with AVX-512
)

// ctrPathNames names the implementations for tests and benchmarks.
var ctrPathNames = [...]string{ctrStd: "crypto-aes", ctrVAES2: "vaes256", ctrVAES4: "vaes512"}

// ctrGroup is the number of key-stream bytes the vector code makes per
// register: four 16-byte blocks.
const ctrGroup = 64

// ctrGroupBlocks is the number of 16-byte counter blocks in a group.
const ctrGroupBlocks = ctrGroup / 16

// NewAESKey expands a 16-byte AES-128 or a 32-byte AES-256 key. Other
// lengths are refused.
func NewAESKey(key []byte) (*AESKey, error) {
	if len(key) != 16 && len(key) != 32 {
		return nil, fmt.Errorf("share: AES key of %d bytes, want 16 (AES-128) or 32 (AES-256)", len(key))
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("share: aes: %w", err)
	}
	k := &AESKey{block: b}
	if len(key) == 16 {
		rk := AES128RoundKeys([16]byte(key))
		copy(k.rk[:], rk[:])
		k.rounds = 10
	} else {
		k.rk = AES256RoundKeys([32]byte(key))
		k.rounds = 14
	}
	for r := range k.rounds + 1 { // rk2 whichever path runs now: tests switch paths
		copy(k.rk2[32*r:], k.rk[16*r:16*r+16])
		copy(k.rk2[32*r+16:], k.rk[16*r:16*r+16])
	}
	return k, nil
}

// Block returns the key's crypto/aes block cipher.
func (k *AESKey) Block() cipher.Block { return k.block }

// CTR returns the key stream of k from the counter block iv.
func (k *AESKey) CTR(iv [16]byte) *AESCTR {
	s := &AESCTR{key: k, hi: binary.BigEndian.Uint64(iv[:8]), lo: binary.BigEndian.Uint64(iv[8:]), kOff: ctrGroup}
	if ctrPath == ctrStd {
		s.std = cipher.NewCTR(k.block, iv[:])
	}
	return s
}

// KeyStreamAt overwrites dst with the key stream of k from the counter
// block iv + blocks (a 128-bit sum, as the stream itself counts): the bytes
// a stream from iv hands out after blocks·16 of them. It allocates nothing
// where the CPU has VAES and len(dst) is a multiple of 64, so that a
// caller can take any part of a long stream, a tile at a time, without
// expanding the rest (crypto/aes's path allocates a stream per call).
func (k *AESKey) KeyStreamAt(iv [16]byte, blocks uint64, dst []byte) {
	hi, lo := binary.BigEndian.Uint64(iv[:8]), binary.BigEndian.Uint64(iv[8:])
	var c uint64
	lo, c = bits.Add64(lo, blocks, 0)
	hi += c
	if ctrPath == ctrStd {
		start := make([]byte, 16)
		binary.BigEndian.PutUint64(start[:8], hi)
		binary.BigEndian.PutUint64(start[8:], lo)
		KeyStream(dst, cipher.NewCTR(k.block, start))
		return
	}
	// Whole groups straight into dst; a partial last group through a
	// buffer of its own (AESCTR's own buffer would move s to the heap).
	s := AESCTR{key: k, hi: hi, lo: lo}
	g := len(dst) / ctrGroup * ctrGroup
	s.groups(dst[:g])
	if g < len(dst) {
		var tail [ctrGroup]byte
		s.groups(tail[:])
		copy(dst[g:], tail[:])
	}
}

// KeyStream overwrites dst with the next len(dst) bytes of the stream,
// whatever dst held (it is written, never read).
func (s *AESCTR) KeyStream(dst []byte) {
	if s.std != nil {
		KeyStream(dst, s.std)
		return
	}
	n := copy(dst, s.ks[s.kOff:])
	s.kOff += n
	dst = dst[n:]
	if g := len(dst) / ctrGroup; g > 0 {
		s.groups(dst[:g*ctrGroup])
		dst = dst[g*ctrGroup:]
	}
	if len(dst) > 0 {
		s.groups(s.ks[:])
		s.kOff = copy(dst, s.ks[:])
	}
}

// XORKeyStream XORs src with the next len(src) bytes of the stream into
// dst (cipher.Stream). dst and src overlap entirely or not at all.
func (s *AESCTR) XORKeyStream(dst, src []byte) {
	if len(dst) < len(src) {
		panic("share: AESCTR.XORKeyStream: output smaller than input")
	}
	var buf [512]byte
	for len(src) > 0 {
		n := min(len(src), len(buf))
		s.KeyStream(buf[:n])
		for i, v := range src[:n] {
			dst[i] = v ^ buf[i]
		}
		dst, src = dst[n:], src[n:]
	}
}

// groups writes the key stream of the next len(b)/ctrGroup block groups
// into b (a multiple of ctrGroup bytes) and advances the counter. The
// vector code adds to the low counter word without carrying, so a call is
// cut where the low word wraps: whole groups before it and after it go
// through the vector code, and the one group that straddles it (when the
// wrap is not at a group boundary) block by block, carrying into hi.
func (s *AESCTR) groups(b []byte) {
	for len(b) > 0 {
		g := uint64(len(b) / ctrGroup)
		// Whole groups before the low word wraps: 2^64 − lo blocks remain
		// (none to wrap when lo is 0).
		if left := -s.lo / ctrGroupBlocks; s.lo != 0 && left < g {
			g = left
		}
		if g == 0 {
			s.blocksGeneric(b[:ctrGroup])
			b = b[ctrGroup:]
			continue
		}
		if ctrPath == ctrVAES4 {
			ctrVAES(&s.key.rk, s.key.rounds, &b[0], int(g), s.hi, s.lo)
		} else {
			ctrVAES256(&s.key.rk2, s.key.rounds, &b[0], int(g), s.hi, s.lo)
		}
		s.lo += g * ctrGroupBlocks
		if s.lo == 0 {
			s.hi++
		}
		b = b[g*ctrGroup:]
	}
}

// blocksGeneric writes len(b)/16 blocks of key stream with crypto/aes, one
// block at a time, carrying into hi where lo wraps.
func (s *AESCTR) blocksGeneric(b []byte) {
	for ; len(b) >= 16; b = b[16:] {
		binary.BigEndian.PutUint64(b[:8], s.hi)
		binary.BigEndian.PutUint64(b[8:16], s.lo)
		s.key.block.Encrypt(b[:16], b[:16])
		s.lo++
		if s.lo == 0 {
			s.hi++
		}
	}
}

// aesSbox is the AES S-box, computed from its definition (multiplicative
// inverse in GF(2^8), then the affine map).
var aesSbox = func() (s [256]byte) {
	mul := func(a, b byte) byte {
		var p byte
		for b != 0 {
			if b&1 != 0 {
				p ^= a
			}
			hi := a & 0x80
			a <<= 1
			if hi != 0 {
				a ^= 0x1b
			}
			b >>= 1
		}
		return p
	}
	rotl := func(x byte, n uint) byte { return x<<n | x>>(8-n) }
	for x := 0; x < 256; x++ {
		inv, p := byte(1), byte(x) // inverse = x^254
		for e := 254; e > 0; e >>= 1 {
			if e&1 != 0 {
				inv = mul(inv, p)
			}
			p = mul(p, p)
		}
		if x == 0 {
			inv = 0
		}
		s[x] = inv ^ rotl(inv, 1) ^ rotl(inv, 2) ^ rotl(inv, 3) ^ rotl(inv, 4) ^ 0x63
	}
	return s
}()

// AES128RoundKeys is the AES-128 key schedule (FIPS-197 §5.2): the 11
// round keys in order, as AESENC expects them. With AES256RoundKeys it is
// the one key schedule of the module's AES assembly (AESKey here,
// beaver/ot's fixed-key hash).
func AES128RoundKeys(key [16]byte) (rk [176]byte) {
	expandKey(key[:], rk[:])
	return rk
}

// AES256RoundKeys is the AES-256 key schedule (FIPS-197 §5.2, Nk = 8): the
// 15 round keys in order, as AESENC expects them.
func AES256RoundKeys(key [32]byte) (rk [240]byte) {
	expandKey(key[:], rk[:])
	return rk
}

// expandKey writes the round keys of key (16 or 32 bytes) into rk (176 or
// 240 bytes): FIPS-197's KeyExpansion with Nk = len(key)/4 words.
func expandKey(key, rk []byte) {
	nk := len(key)
	copy(rk[:nk], key)
	rcon := byte(1)
	for i := nk; i < len(rk); i += 4 {
		var t [4]byte
		copy(t[:], rk[i-4:i])
		switch {
		case i%nk == 0: // RotWord, SubWord, Rcon
			t = [4]byte{aesSbox[t[1]] ^ rcon, aesSbox[t[2]], aesSbox[t[3]], aesSbox[t[0]]}
			rcon = rcon<<1 ^ (rcon>>7)*0x1b
		case nk > 24 && i%nk == 16: // SubWord only (Nk > 6)
			t = [4]byte{aesSbox[t[0]], aesSbox[t[1]], aesSbox[t[2]], aesSbox[t[3]]}
		}
		for j := range 4 {
			rk[i+j] = rk[i-nk+j] ^ t[j]
		}
	}
}

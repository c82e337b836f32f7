package ot

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"unsafe"

	"github.com/selectformer/selectformer/share"
)

// Block is a 128-bit string: Lo holds bits 0–63, Hi bits 64–127. Its byte
// form (the AES input) is Lo then Hi, each little-endian, which is also its
// memory layout on little-endian hosts.
type Block struct{ Lo, Hi uint64 }

func (b Block) xor(c Block) Block { return Block{b.Lo ^ c.Lo, b.Hi ^ c.Hi} }

// blockBytes returns the memory of b as bytes (valid on any host; the byte
// order is the host's).
func blockBytes(b []Block) []byte {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*16)
}

// wordBytes returns the memory of w as bytes.
func wordBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}

// fixedAES is AES-128 under one public key, used as the random permutation π
// of the correlation-robust hash. encrypt works on whole slices of blocks so
// that the assembly implementation can keep eight blocks in flight.
type fixedAES struct {
	rk  [176]byte    // expanded key, FIPS-197 byte order (11 round keys)
	blk cipher.Block // portable implementation
}

func newFixedAES(key [16]byte) *fixedAES {
	f := &fixedAES{}
	f.rk = share.AES128RoundKeys(key)
	b, err := aes.NewCipher(key[:])
	if err != nil { // a 16-byte key is always valid
		panic("ot: aes: " + err.Error())
	}
	f.blk = b
	return f
}

// encrypt sets dst[i] = π(src[i]); dst and src may be the same slice and
// must have the same length.
func (f *fixedAES) encrypt(dst, src []Block) {
	if len(src) == 0 {
		return
	}
	if useAESNI && share.HostLittleEndian() {
		encryptBlocksAsm(&f.rk, &dst[0], &src[0], len(src))
		return
	}
	f.encryptGeneric(dst, src)
}

// encryptTweaked sets dst[i] = π(src[i] ⊕ tw); dst and src may be the same
// slice and must have the same length. The assembly path folds tw into the
// first round key (AES starts by xoring it into the block), so the tweak
// costs no pass over the data.
func (f *fixedAES) encryptTweaked(dst, src []Block, tw Block) {
	if len(src) == 0 {
		return
	}
	if useAESNI && share.HostLittleEndian() {
		rk := f.rk
		binary.LittleEndian.PutUint64(rk[:8], binary.LittleEndian.Uint64(rk[:8])^tw.Lo)
		binary.LittleEndian.PutUint64(rk[8:16], binary.LittleEndian.Uint64(rk[8:16])^tw.Hi)
		encryptBlocksAsm(&rk, &dst[0], &src[0], len(src))
		return
	}
	for i, s := range src {
		dst[i] = s.xor(tw)
	}
	f.encryptGeneric(dst, dst)
}

// encryptGeneric is the portable path: one crypto/aes call per block.
func (f *fixedAES) encryptGeneric(dst, src []Block) {
	var buf [16]byte
	for i, s := range src {
		binary.LittleEndian.PutUint64(buf[:8], s.Lo)
		binary.LittleEndian.PutUint64(buf[8:], s.Hi)
		f.blk.Encrypt(buf[:], buf[:])
		dst[i] = Block{binary.LittleEndian.Uint64(buf[:8]), binary.LittleEndian.Uint64(buf[8:])}
	}
}

// hasher is the tweakable circular correlation-robust hash of Guo, Katz,
// Wang and Yu (S&P 2020, §7.4), H(τ, x) = π(π(x) ⊕ τ) ⊕ π(x), with π fixed-key
// AES-128 under the session's public hash key. Outputs longer than one block
// (a width of w words) are the blocks H_b for b = 0, 1, …, ⌈w/2⌉−1 with the
// tweaks τ_b = (ot index, generator id ‖ b): every (tweak, Δ) pair is used at
// most once per session, which is what tweakable correlation robustness
// needs.
type hasher struct {
	pi  *fixedAES
	gen uint32
	// scratch
	y, z []Block
}

func newHasher(pi *fixedAES, gen uint32) *hasher { return &hasher{pi: pi, gen: gen} }

func (h *hasher) tweak(j uint64, b int) Block {
	return Block{j, uint64(h.gen)<<32 | uint64(uint32(b))}
}

func grow(b []Block, n int) []Block {
	if cap(b) < n {
		return make([]Block, n)
	}
	return b[:n]
}

// hash sets out[k*w:(k+1)*w] to the first w words of H(·, rows[k] ⊕ off) for
// the OT index j0+k, k < len(rows). len(out) must be len(rows)*w.
func (h *hasher) hash(out []uint64, rows []Block, off Block, j0 uint64, w int) {
	if len(rows) == 0 || w == 0 {
		return
	}
	if w <= 2 && useVAES512 && share.HostLittleEndian() && len(rows) >= 32 {
		// One block of hash a row: both passes in registers (aes_amd64.s).
		m := len(rows) &^ 31
		_ = out[m*w-1] // the kernel writes m·w words: bounds-checked here
		hashRowsVAES512(&h.pi.rk, &out[0], &rows[0], m, &off, j0, uint64(h.gen)<<32, w)
		out, rows, j0 = out[m*w:], rows[m:], j0+uint64(m)
		if len(rows) == 0 {
			return
		}
	}
	if w%8 == 0 && useVAES512 && share.HostLittleEndian() && len(rows) >= 8 {
		// Four hash blocks of one row a register (aes_amd64.s).
		m := len(rows) &^ 7
		h.hashWide(out[:m*w], rows[:m], off, j0, w)
		out, rows, j0 = out[m*w:], rows[m:], j0+uint64(m)
		if len(rows) == 0 {
			return
		}
	}
	nb := (w + 1) / 2
	per := max(1, hashScratchBlocks/(1+nb))
	for len(rows) > per {
		h.hashPass(out[:per*w], rows[:per], off, j0, w, nb)
		out, rows, j0 = out[per*w:], rows[per:], j0+uint64(per)
	}
	h.hashPass(out, rows, off, j0, w, nb)
}

// hashWide is hash for a multiple of 8 rows of w = 8·c words in 512-bit
// VAES: the first pass y = π(rows ⊕ off) as hashPass's, then each row's c
// groups of four blocks, y and the group's first tweak laid out a group at
// a time for hashWideVAES512, within hashScratchBlocks of scratch.
func (h *hasher) hashWide(out []uint64, rows []Block, off Block, j0 uint64, w int) {
	c := w / 8
	per := max(8, (hashScratchBlocks/(1+2*c))&^7)
	for len(rows) > 0 {
		n := min(per, len(rows))
		h.y = grow(h.y, n)
		y := h.y
		for k, r := range rows[:n] {
			y[k] = r.xor(off)
		}
		h.pi.encrypt(y, y)
		g := n * c
		h.z = grow(h.z, 2*g)
		ys, tw := h.z[:g], h.z[g:]
		for k := range n {
			for s := range c {
				ys[k*c+s] = y[k]
				tw[k*c+s] = h.tweak(j0+uint64(k), 4*s)
			}
		}
		_ = out[n*w-1] // the kernel writes n·w words: bounds-checked here
		hashWideVAES512(&h.pi.rk, &out[0], &ys[0], &tw[0], g)
		out, rows, j0 = out[n*w:], rows[n:], j0+uint64(n)
	}
}

// hashScratchBlocks bounds a hasher's scratch (y and z): hash and
// hashBlocks take their rows in passes of at most this many blocks of
// scratch, 512 KiB (issue 38: scratch as large as a call's rows, kept by
// every generator, held 193 MB of a dealer-free data owner's heap at
// sst2's defaults). The passes only split the rows: the hashes are the
// same.
const hashScratchBlocks = 1 << 15

// hashPass is hash for rows that fit the scratch bound, nb = ⌈w/2⌉.
func (h *hasher) hashPass(out []uint64, rows []Block, off Block, j0 uint64, w, nb int) {
	n := len(rows)
	h.y = grow(h.y, n)
	y := h.y
	for k, r := range rows {
		y[k] = r.xor(off)
	}
	h.pi.encrypt(y, y)
	h.z = grow(h.z, n*nb)
	z := h.z
	for k := range n {
		for b := range nb {
			z[k*nb+b] = y[k].xor(h.tweak(j0+uint64(k), b))
		}
	}
	h.pi.encrypt(z, z)
	for k := range n {
		o := out[k*w : (k+1)*w]
		for b := range nb {
			v := z[k*nb+b].xor(y[k])
			o[2*b] = v.Lo
			if 2*b+1 < w {
				o[2*b+1] = v.Hi
			}
		}
	}
}

// hashBlocks sets out[k] = H((j0+k, gen‖0), rows[k] ⊕ off): the 128-bit
// hash of each row (width 2).
func (h *hasher) hashBlocks(out []Block, rows []Block, off Block, j0 uint64) {
	for len(rows) > hashScratchBlocks {
		h.hashBlocksPass(out[:hashScratchBlocks], rows[:hashScratchBlocks], off, j0)
		out, rows, j0 = out[hashScratchBlocks:], rows[hashScratchBlocks:], j0+hashScratchBlocks
	}
	h.hashBlocksPass(out, rows, off, j0)
}

// hashBlocksPass is hashBlocks for at most hashScratchBlocks rows.
func (h *hasher) hashBlocksPass(out []Block, rows []Block, off Block, j0 uint64) {
	n := len(rows)
	h.y = grow(h.y, n)
	y := h.y
	for k, r := range rows {
		y[k] = r.xor(off)
	}
	h.pi.encrypt(y, y)
	for k := range n {
		out[k] = y[k].xor(h.tweak(j0+uint64(k), 0))
	}
	h.pi.encrypt(out, out)
	for k := range n {
		out[k] = out[k].xor(y[k])
	}
}

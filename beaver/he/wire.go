package he

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// Message tags and version.
const (
	tagPublicKey = 'K'
	tagWeights   = 'W'
	tagOutput    = 'O'
	wireVersion  = 2 // 2: the weights' column offset

	pkHeader      = 2 + SeedSize
	weightsHeader = 2 + 16 + 4 + SeedSize
	outHeader     = 2 + 16
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("he: malformed message")

var errNoScheme = errors.New("he: message not made by a Scheme (use its constructors or decoders)")

// maxDim bounds every dimension a message header may carry, whatever bound
// the caller gives (so sizes computed from headers cannot overflow).
const maxDim = 1 << 24

// bitWriter appends values of up to 64 bits, least significant bit first.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint
}

func (w *bitWriter) write32(v uint64, width uint) {
	w.acc |= (v & (1<<width - 1)) << w.n
	w.n += width
	for w.n >= 8 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.n -= 8
	}
}

func (w *bitWriter) write(v uint64, width uint) {
	if width > 32 {
		w.write32(v&0xffffffff, 32)
		v >>= 32
		width -= 32
	}
	w.write32(v, width)
}

func (w *bitWriter) write128(v u128, width uint) {
	if width > 64 {
		w.write(v.lo, 64)
		w.write(v.hi, width-64)
		return
	}
	w.write(v.lo, width)
}

func (w *bitWriter) flush() []byte {
	if w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc, w.n = 0, 0
	}
	return w.buf
}

// bitReader reads what bitWriter wrote; the caller has checked the length.
type bitReader struct {
	buf []byte
	pos int
	acc uint64
	n   uint
}

func (r *bitReader) read32(width uint) uint64 {
	for r.n < width {
		var b byte
		if r.pos < len(r.buf) {
			b = r.buf[r.pos]
		}
		r.pos++
		r.acc |= uint64(b) << r.n
		r.n += 8
	}
	v := r.acc & (1<<width - 1)
	r.acc >>= width
	r.n -= width
	return v
}

func (r *bitReader) read(width uint) uint64 {
	if width > 32 {
		lo := r.read32(32)
		return lo | r.read32(width-32)<<32
	}
	return r.read32(width)
}

func (r *bitReader) read128(width uint) u128 {
	if width > 64 {
		lo := r.read(64)
		return u128{lo, r.read(width - 64)}
	}
	return u128{r.read(width), 0}
}

// done reports whether exactly the whole buffer was read and the padding
// bits are zero.
func (r *bitReader) done() bool {
	return r.pos == len(r.buf) && r.acc == 0
}

func (s *Scheme) appendPoly(w *bitWriter, p ring.Poly) {
	for i, q := range s.p.Q {
		width := uint(bits.Len64(q - 1))
		for _, v := range p.Coeffs[i] {
			w.write(v, width)
		}
	}
}

func (s *Scheme) readPoly(r *bitReader, p ring.Poly) error {
	for i, q := range s.p.Q {
		width := uint(bits.Len64(q - 1))
		c := p.Coeffs[i]
		if r.n == 0 && width <= 56 && len(c)*int(width)%8 == 0 {
			// Byte-aligned (every limb of N residues is: N is a multiple
			// of 8): unpack from the buffer directly.
			end := r.pos + len(c)*int(width)/8
			if end > len(r.buf) {
				return fmt.Errorf("residues past the message's end: %w", ErrMalformed)
			}
			if !unpackBelow(c, r.buf[r.pos:end], width, q) {
				return fmt.Errorf("residue ≥ modulus: %w", ErrMalformed)
			}
			r.pos = end
			continue
		}
		for x := range c {
			v := r.read(width)
			if v >= q {
				return fmt.Errorf("residue ≥ modulus: %w", ErrMalformed)
			}
			c[x] = v
		}
	}
	return nil
}

// unpackBelow sets dst to the len(dst) values of width bits (≤ 56) packed
// least significant bit first in src (exactly len(dst)·width bits) and
// reports whether all are below q. It reads one unaligned 64-bit word per
// value, the last few from a padded copy so that it never reads past src.
func unpackBelow(dst []uint64, src []byte, width uint, q uint64) bool {
	mask := uint64(1)<<width - 1
	ok := true
	bit := 0
	// Values whose 8-byte window fits in src.
	fast := 0
	if len(src) >= 8 {
		fast = min(len(dst), ((len(src)-8)*8)/int(width)+1)
	}
	for x := range dst[:fast] {
		v := binary.LittleEndian.Uint64(src[bit>>3:]) >> (bit & 7) & mask
		ok = ok && v < q
		dst[x] = v
		bit += int(width)
	}
	if fast < len(dst) {
		var tail [16]byte
		copy(tail[:], src[bit>>3:])
		base := bit &^ 7
		for x := fast; x < len(dst); x++ {
			b := bit - base
			v := binary.LittleEndian.Uint64(tail[b>>3:]) >> (b & 7) & mask
			ok = ok && v < q
			dst[x] = v
			bit += int(width)
		}
	}
	return ok
}

func (s *Scheme) polyBytes() int64 { return int64(ceilDiv(s.n*s.residueBits(), 8)) }

// AppendBinary appends the public key's encoding (Sizes.PublicKey bytes).
func (pk *PublicKey) AppendBinary(b []byte) ([]byte, error) {
	s := pk.s
	if s == nil {
		return nil, errNoScheme
	}
	if err := s.checkPoly(pk.P0); err != nil {
		return nil, fmt.Errorf("he: public key: %w", err)
	}
	b = append(b, tagPublicKey, wireVersion)
	b = append(b, pk.Seed[:]...)
	w := &bitWriter{buf: b}
	s.appendPoly(w, pk.P0)
	return w.flush(), nil
}

// DecodePublicKey decodes a public key; its size is fixed by s.
func (s *Scheme) DecodePublicKey(data []byte) (*PublicKey, error) {
	if int64(len(data)) != pkHeader+s.polyBytes() || data[0] != tagPublicKey || data[1] != wireVersion {
		return nil, fmt.Errorf("he: public key of %d bytes, want %d: %w", len(data), pkHeader+s.polyBytes(), ErrMalformed)
	}
	pk := &PublicKey{P0: s.rq.NewPoly(), s: s}
	copy(pk.Seed[:], data[2:pkHeader])
	r := &bitReader{buf: data[pkHeader:]}
	if err := s.readPoly(r, pk.P0); err != nil {
		return nil, fmt.Errorf("he: public key: %w", err)
	}
	if !r.done() {
		return nil, fmt.Errorf("he: public key: nonzero padding: %w", ErrMalformed)
	}
	return pk, nil
}

func appendHeader(b []byte, tag byte, d0, d1 int, l Layout) []byte {
	b = append(b, tag, wireVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(d0))
	b = binary.LittleEndian.AppendUint32(b, uint32(d1))
	b = binary.LittleEndian.AppendUint32(b, uint32(l.MW))
	return binary.LittleEndian.AppendUint32(b, uint32(l.NW)|uint32(l.KW)<<16) // NW < 2^16, KW ≤ 2^13
}

// readHeader reads a header of tag with two dimensions bounded by max0 and
// max1 (and maxDim) and a layout valid for s.
func (s *Scheme) readHeader(data []byte, tag byte, max0, max1 int) (d0, d1 int, l Layout, err error) {
	if len(data) < 18 || data[0] != tag || data[1] != wireVersion {
		return 0, 0, l, fmt.Errorf("he: bad header: %w", ErrMalformed)
	}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(data[2+4*i:])) }
	d0, d1, l = u(0), u(1), Layout{MW: u(2), NW: u(3) & 0xffff, KW: u(3) >> 16}
	if d0 < 1 || d1 < 1 || d0 > min(max0, maxDim) || d1 > min(max1, maxDim) {
		return 0, 0, l, fmt.Errorf("he: dimensions %d×%d outside 1..%d×1..%d: %w", d0, d1, min(max0, maxDim), min(max1, maxDim), ErrMalformed)
	}
	if err := s.checkLayout(l, 1); err != nil { // the shape; a weights' row budget is checked with its k
		return 0, 0, l, fmt.Errorf("%w: %w", err, ErrMalformed)
	}
	return d0, d1, l, nil
}

// AppendBinary appends the encoding of ew (Sizes.Weights bytes).
func (ew *EncryptedWeights) AppendBinary(b []byte) ([]byte, error) {
	s := ew.s
	if s == nil {
		return nil, errNoScheme
	}
	if err := s.checkLayout(ew.Layout, ew.K); err != nil {
		return nil, err
	}
	if ew.K < 1 || ew.N < 1 || ew.K > maxDim || ew.N > maxDim || ew.Off < 0 || ew.Off > maxDim-ew.N {
		return nil, fmt.Errorf("he: encode weights %d×%d at column %d: %w", ew.K, ew.N, ew.Off, errShape)
	}
	if _, cb := ColumnBlocks(ew.Off, ew.N, ew.Layout.NW); len(ew.C0) != ew.Layout.innerBlocks(ew.K)*cb {
		return nil, fmt.Errorf("he: encode weights %d×%d with %d ciphertexts: %w", ew.K, ew.N, len(ew.C0), errShape)
	}
	for _, c := range ew.C0 {
		if err := s.checkPoly(c); err != nil {
			return nil, fmt.Errorf("he: encode weights: %w", err)
		}
	}
	b = appendHeader(b, tagWeights, ew.K, ew.N, ew.Layout)
	b = binary.LittleEndian.AppendUint32(b, uint32(ew.Off))
	b = append(b, ew.Seed[:]...)
	w := &bitWriter{buf: b}
	for _, c := range ew.C0 {
		s.appendPoly(w, c)
		w.flush() // each ciphertext starts on a byte
	}
	return w.buf, nil
}

// DecodeEncryptedWeights decodes P0's encrypted weights, refusing (before
// allocating anything) more than maxK rows (and MaxInner) or maxN columns,
// an offset beyond 2^24 columns, and any length other than the one the
// header implies.
func (s *Scheme) DecodeEncryptedWeights(data []byte, maxK, maxN int) (*EncryptedWeights, error) {
	return s.DecodeEncryptedWeightsFrom(bytes.NewReader(data), int64(len(data)), maxK, maxN)
}

// DecodeEncryptedWeightsFrom is DecodeEncryptedWeights of a message of
// size bytes read from r one ciphertext at a time: besides the decoded
// polynomials it holds one ciphertext's bytes, never the whole message
// (hundreds of MB for a large weight matrix). It checks the header and
// size before allocating, and reads exactly size bytes from r unless it
// fails.
func (s *Scheme) DecodeEncryptedWeightsFrom(r io.Reader, size int64, maxK, maxN int) (*EncryptedWeights, error) {
	if size < weightsHeader {
		return nil, fmt.Errorf("he: weights: %d bytes, shorter than the header: %w", size, ErrMalformed)
	}
	var head [weightsHeader]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, fmt.Errorf("he: weights: header: %w", err)
	}
	k, n, l, err := s.readHeader(head[:], tagWeights, min(maxK, s.p.MaxInner), maxN)
	if err != nil {
		return nil, fmt.Errorf("he: weights: %w", err)
	}
	off := int(binary.LittleEndian.Uint32(head[18:]))
	if off > maxDim-n {
		return nil, fmt.Errorf("he: weights %d×%d at column %d beyond 2^24: %w", k, n, off, ErrMalformed)
	}
	_, cb := ColumnBlocks(off, n, l.NW)
	cts := int64(l.innerBlocks(k)) * int64(cb)
	per := s.polyBytes()
	if cts != (size-weightsHeader)/per || (size-weightsHeader)%per != 0 {
		return nil, fmt.Errorf("he: weights %d×%d: %d bytes, want %d: %w", k, n, size, weightsHeader+cts*per, ErrMalformed)
	}
	ew := &EncryptedWeights{K: k, N: n, Off: off, Layout: l, C0: make([]ring.Poly, cts), s: s}
	copy(ew.Seed[:], head[22:weightsHeader])
	buf := make([]byte, per)
	for i := range ew.C0 {
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("he: weights ciphertext %d: %w", i, err)
		}
		br := &bitReader{buf: buf}
		ew.C0[i] = s.rq.NewPoly()
		if err := s.readPoly(br, ew.C0[i]); err != nil {
			return nil, fmt.Errorf("he: weights ciphertext %d: %w", i, err)
		}
		if !br.done() {
			return nil, fmt.Errorf("he: weights ciphertext %d: nonzero padding: %w", i, ErrMalformed)
		}
	}
	return ew, nil
}

// AppendBinary appends the encoding of out (Sizes.Output bytes).
func (out *Output) AppendBinary(b []byte) ([]byte, error) {
	s := out.s
	if s == nil {
		return nil, errNoScheme
	}
	if err := s.checkLayout(out.Layout, 1); err != nil {
		return nil, err
	}
	m, n, l := out.M, out.N, out.Layout
	if m < 1 || n < 1 || m > maxDim || n > maxDim {
		return nil, fmt.Errorf("he: encode output %d×%d: %w", m, n, errShape)
	}
	cb, rb := ceilDiv(n, l.NW), ceilDiv(m, l.MW)
	if len(out.blocks) != rb*cb {
		return nil, fmt.Errorf("he: encode output: %d blocks, want %d: %w", len(out.blocks), rb*cb, errShape)
	}
	b = appendHeader(b, tagOutput, m, n, l)
	w := &bitWriter{buf: b}
	for bi, blk := range out.blocks {
		rows, cols := min(l.MW, m-bi/cb*l.MW), min(l.NW, n-bi%cb*l.NW)
		if len(blk.c0) != rows*cols || len(blk.c1) != s.n {
			return nil, fmt.Errorf("he: encode output block %d: %w", bi, errShape)
		}
		for _, v := range blk.c0 {
			w.write128(v, uint(s.p.LogQ0))
		}
		for _, v := range blk.c1 {
			w.write128(v, uint(s.p.LogQ1))
		}
	}
	return w.flush(), nil
}

// DecodeOutput decodes P1's output message, refusing (before allocating
// anything) more than maxM rows or maxN columns and any length other than
// the one the header implies.
func (s *Scheme) DecodeOutput(data []byte, maxM, maxN int) (*Output, error) {
	m, n, l, err := s.readHeader(data, tagOutput, maxM, maxN)
	if err != nil {
		return nil, fmt.Errorf("he: output: %w", err)
	}
	cb, rb := ceilDiv(n, l.NW), ceilDiv(m, l.MW)
	nbits := int64(m)*int64(n)*int64(s.p.LogQ0) + int64(rb*cb)*int64(s.n)*int64(s.p.LogQ1)
	if want := outHeader + ceilDiv64(nbits, 8); int64(len(data)) != want {
		return nil, fmt.Errorf("he: output %d×%d: %d bytes, want %d: %w", m, n, len(data), want, ErrMalformed)
	}
	out := &Output{M: m, N: n, Layout: l, blocks: make([]outBlock, rb*cb), s: s}
	r := &bitReader{buf: data[outHeader:]}
	for bi := range out.blocks {
		rows, cols := min(l.MW, m-bi/cb*l.MW), min(l.NW, n-bi%cb*l.NW)
		blk := outBlock{c0: make([]u128, rows*cols), c1: make([]u128, s.n)}
		for i := range blk.c0 {
			blk.c0[i] = r.read128(uint(s.p.LogQ0))
		}
		for i := range blk.c1 {
			blk.c1[i] = r.read128(uint(s.p.LogQ1))
		}
		out.blocks[bi] = blk
	}
	if !r.done() {
		return nil, fmt.Errorf("he: output: nonzero padding: %w", ErrMalformed)
	}
	return out, nil
}

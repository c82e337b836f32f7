package ot

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/selectformer/selectformer/share"
)

// The primal LPN encoding of Ferret with a local linear code: a public
// k×n matrix A over F2 with exactly d = ferretCodeWeight nonzero rows per
// column. The sender sets z[j] = s[j] ⊕ ⊕_{i∈col j} Q_base[i], the
// receiver z'[j] = r[j] ⊕ ⊕_{i∈col j} T_base[i] and x[j] = e[j] ⊕
// ⊕_{i∈col j} u[i], where s, r and e are the MPCOT's outputs (r[j] =
// s[j] ⊕ e[j]·Δ) and T_base = Q_base ⊕ u·Δ; so z'[j] = z[j] ⊕ x[j]·Δ.
//
// Column j's rows are the 32-bit words 10j … 10j+9 of the AES-128-CTR key
// stream of the code key, each mapped to [0, k) by ⌊w·k/2^32⌋; a row equal
// to one drawn before it in the column moves to the next row (mod k) until
// it is new, so that every column has exactly d distinct rows. Both
// parties derive the same key (lpnCode), so A is public and never sent.

// lpnChunk is the columns the encoder draws rows for at a time: 40 KiB of
// key stream, a multiple of the 64-byte groups the vector AES-CTR makes
// without allocating.
const lpnChunk = 1024

// lpnRowBytes is the key stream per column: d 32-bit words.
const lpnRowBytes = 4 * ferretCodeWeight

// rows' pairwise test below is written out for d = 10.
var _ = [1]struct{}{}[ferretCodeWeight-10]

// lpnCode is the public matrix A of one iteration, given by its key.
type lpnCode struct {
	key *share.AESKey
	iv  [16]byte
	k   int
}

// newLPNCode derives iteration iter's code from the public code seed.
func newLPNCode(seed share.Seed, iter uint64, k int) (*lpnCode, error) {
	s := seed.Derive(fmt.Sprintf("ot/ferret/lpn/%d", iter))
	key, err := share.NewAESKey(s[:16])
	if err != nil {
		return nil, fmt.Errorf("ot: ferret: code key: %w", err)
	}
	return &lpnCode{key: key, iv: [16]byte(s[16:32]), k: k}, nil
}

// rows fills idx[c·d : (c+1)·d] with the rows of column col0+c for c <
// len(idx)/d; col0 is a multiple of lpnChunk and len(idx) at most
// lpnChunk·d; ks is lpnChunk·lpnRowBytes bytes of scratch.
func (a *lpnCode) rows(idx []uint32, col0 int, ks []byte) {
	a.key.KeyStreamAt(a.iv, uint64(col0)*lpnRowBytes/16, ks)
	cols := len(idx) / ferretCodeWeight
	if !useLPNAsm || cols == 0 {
		a.rowsGeneric(idx, ks)
		return
	}
	if cols > lpnChunk || len(ks) < cols*lpnRowBytes {
		panic("ot: lpn: more columns than a chunk or than the key stream holds")
	}
	var dup [lpnChunk / 64]uint64
	lpnRowsAVX512(&idx[0], &ks[0], cols, uint64(a.k), &dup[0])
	for w, m := range dup {
		for ; m != 0; m &= m - 1 {
			c := w*64 + bits.TrailingZeros64(m)
			distinctRows((*[ferretCodeWeight]uint32)(idx[c*ferretCodeWeight:]), a.k)
		}
	}
}

// rowsGeneric is rows' mapping and distinctness test in Go, for the key
// stream ks already drawn.
func (a *lpnCode) rowsGeneric(idx []uint32, ks []byte) {
	k := uint64(a.k)
	for c := 0; c < len(idx); c += ferretCodeWeight {
		var col [ferretCodeWeight]uint32
		for r := range col {
			col[r] = uint32(uint64(binary.LittleEndian.Uint32(ks[4*(c+r):])) * k >> 32)
		}
		// Almost every column has distinct rows: test all pairs without
		// branching (x − 1 for a 32-bit x ≥ 0 has bit 63 set exactly when
		// x = 0, i.e. when two rows are equal), and fix the rare column row
		// by row.
		c0, c1, c2, c3, c4 := col[0], col[1], col[2], col[3], col[4]
		c5, c6, c7, c8, c9 := col[5], col[6], col[7], col[8], col[9]
		z1 := (uint64(c0^c1) - 1)
		z2 := (uint64(c0^c2) - 1) | (uint64(c1^c2) - 1)
		z3 := (uint64(c0^c3) - 1) | (uint64(c1^c3) - 1) | (uint64(c2^c3) - 1)
		z4 := (uint64(c0^c4) - 1) | (uint64(c1^c4) - 1) | (uint64(c2^c4) - 1) | (uint64(c3^c4) - 1)
		z5 := (uint64(c0^c5) - 1) | (uint64(c1^c5) - 1) | (uint64(c2^c5) - 1) | (uint64(c3^c5) - 1) | (uint64(c4^c5) - 1)
		z6 := (uint64(c0^c6) - 1) | (uint64(c1^c6) - 1) | (uint64(c2^c6) - 1) | (uint64(c3^c6) - 1) | (uint64(c4^c6) - 1) | (uint64(c5^c6) - 1)
		z7 := (uint64(c0^c7) - 1) | (uint64(c1^c7) - 1) | (uint64(c2^c7) - 1) | (uint64(c3^c7) - 1) | (uint64(c4^c7) - 1) | (uint64(c5^c7) - 1) | (uint64(c6^c7) - 1)
		z8 := (uint64(c0^c8) - 1) | (uint64(c1^c8) - 1) | (uint64(c2^c8) - 1) | (uint64(c3^c8) - 1) | (uint64(c4^c8) - 1) | (uint64(c5^c8) - 1) | (uint64(c6^c8) - 1) | (uint64(c7^c8) - 1)
		z9 := (uint64(c0^c9) - 1) | (uint64(c1^c9) - 1) | (uint64(c2^c9) - 1) | (uint64(c3^c9) - 1) | (uint64(c4^c9) - 1) | (uint64(c5^c9) - 1) | (uint64(c6^c9) - 1) | (uint64(c7^c9) - 1) | (uint64(c8^c9) - 1)
		zero := (z1 | z2 | z3 | z4 | z5 | z6 | z7 | z8 | z9) >> 63
		if zero != 0 {
			distinctRows(&col, a.k)
		}
		copy(idx[c:c+ferretCodeWeight], col[:])
	}
}

// distinctRows moves each row of col equal to one before it to the next
// row mod k until it is new.
func distinctRows(col *[ferretCodeWeight]uint32, k int) {
	for r := 1; r < ferretCodeWeight; r++ {
		for again := true; again; {
			again = false
			for _, p := range col[:r] {
				if p == col[r] {
					col[r] = uint32((int(col[r]) + 1) % k)
					again = true
					break
				}
			}
		}
	}
}

// lpnWorkers returns the goroutines the encoding splits its columns over.
func lpnWorkers(n int) int {
	return max(1, min(2, runtime.GOMAXPROCS(0), n/lpnChunk))
}

// encode sets z[j] ^= ⊕_{i∈col j} base[i] for every column j < len(z),
// and, when bits is not nil, bit j of bits ^= ⊕_{i∈col j} bit i of u
// (the receiver's choices). base holds k blocks, u k bits.
func (a *lpnCode) encode(z, base []Block, bits, u []uint64) {
	n := len(z)
	w := lpnWorkers(n)
	per := (n/w + lpnChunk - 1) / lpnChunk * lpnChunk
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		hi := min(n, lo+per)
		wg.Go(func() { a.encodeRange(z, base, bits, u, lo, hi) })
	}
	wg.Wait()
}

// encodeRange is encode for columns lo … hi−1 (lo a multiple of
// lpnChunk).
func (a *lpnCode) encodeRange(z, base []Block, bits, u []uint64, lo, hi int) {
	idx := make([]uint32, lpnChunk*ferretCodeWeight)
	ks := make([]byte, lpnChunk*lpnRowBytes)
	base = base[:a.k]
	z = z[:hi]
	if bits != nil {
		// The assembly reads u and writes bits without bounds checks.
		_, _ = u[share.PackedWords(a.k)-1], bits[share.PackedWords(hi)-1]
	}
	for c0 := lo; c0 < hi; c0 += lpnChunk {
		cols := min(lpnChunk, hi-c0)
		a.rows(idx[:cols*ferretCodeWeight], c0, ks)
		switch {
		case !useLPNAsm:
			gatherGeneric(z[c0:c0+cols], base, idx, bits, u, c0)
		case bits != nil:
			lpnGatherBitsAsm(&z[c0], &base[0], &idx[0], cols, &u[0], &bits[c0>>6])
		default:
			lpnGatherAsm(&z[c0], &base[0], &idx[0], cols)
		}
	}
}

// gatherGeneric is the encoding's sums in Go for the columns c0 … c0 +
// len(z) − 1 whose rows idx holds (z the columns' outputs): z[c] ^= the d
// rows' blocks of base, and when bits is not nil, bit c0 + c of bits ^=
// the parity of the rows' bits of u.
func gatherGeneric(z, base []Block, idx []uint32, bits, u []uint64, c0 int) {
	for c := range z {
		r := idx[c*ferretCodeWeight : (c+1)*ferretCodeWeight : (c+1)*ferretCodeWeight]
		b0, b1, b2, b3, b4 := base[r[0]], base[r[1]], base[r[2]], base[r[3]], base[r[4]]
		b5, b6, b7, b8, b9 := base[r[5]], base[r[6]], base[r[7]], base[r[8]], base[r[9]]
		z[c] = Block{
			z[c].Lo ^ b0.Lo ^ b1.Lo ^ b2.Lo ^ b3.Lo ^ b4.Lo ^ b5.Lo ^ b6.Lo ^ b7.Lo ^ b8.Lo ^ b9.Lo,
			z[c].Hi ^ b0.Hi ^ b1.Hi ^ b2.Hi ^ b3.Hi ^ b4.Hi ^ b5.Hi ^ b6.Hi ^ b7.Hi ^ b8.Hi ^ b9.Hi,
		}
		if bits != nil {
			var x uint64
			for _, i := range r {
				x ^= u[i>>6] >> (i & 63)
			}
			j := c0 + c
			bits[j>>6] ^= (x & 1) << (j & 63)
		}
	}
}

package share

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Ring GEMM: C = A·B over Z_2^64, row-major, the local work of every matrix
// product protocol. The public entry points validate shapes and split the work
// over all cores; gemmSerial runs one block on one core in the BLIS manner:
// panels of B and A are packed into contiguous, zero-padded buffers and a
// register-blocked micro-kernel (gemmImpl.micro) computes one mr×nr tile of C
// at a time. The micro-kernel is pure Go by default; architecture files add
// assembly ones, and gemm_kernel.go picks one at run time (activeKernel).

// gemmImpl is a micro-kernel and its register-block shape.
type gemmImpl struct {
	// name identifies the kernel in benchmarks and tests.
	name string
	// mr and nr are the rows and columns of the C tile one call computes.
	mr, nr int
	// kc is the depth of the k blocks (at most gemmKC): the packed panels of
	// one block, kc·(mr+nr)·words words, should fit in L1.
	kc int
	// split, when not splitNone, makes the packed panels hold two words per
	// element: the word itself and a second word derived from it
	// (splitWords), which the kernel multiplies as limbs.
	split splitKind
	// micro adds Ap·Bp to the mr×nr tile of c at c[0], rows ldc words apart
	// (or, when add is false, overwrites the tile with Ap·Bp).
	// Ap holds kc groups of mr·words words (column p of the A panel at
	// Ap[p*mr*words:]: the mr words, then for split kernels their mr second
	// words), Bp kc groups of nr·words words (row p of the B panel likewise).
	micro func(kc int, ap, bp, c []uint64, ldc int, add bool)
	// direct, if set, is micro with B read in place: row p of the nr-column
	// block at b[p*ldb:], not a packed panel (a kernel of one word per
	// element only). gemmSerial uses it for row-major B when A has at most
	// directRows rows, so that each B word would serve too few products to
	// repay packing it.
	direct     func(kc int, ap, b []uint64, ldb int, c []uint64, ldc int, add bool)
	directRows int
}

// splitKind names the second word that split kernels pack beside each word.
type splitKind int

const (
	// splitNone packs the words alone.
	splitNone splitKind = iota
	// splitHigh32 packs x>>32 beside x: the high 32-bit limb, for kernels
	// built on 32×32→64-bit multiplies (VPMULUDQ reads the low 32 bits).
	splitHigh32
	// splitIFMA packs (x mod 2^12) | (x>>52)<<32 beside x: the low 12 bits
	// and the top 12 bits of x, for kernels built on 52-bit multiply-adds
	// (see gemm_amd64.s, gemmMicro4x16IFMA).
	splitIFMA
)

// words returns how many words the kernel packs per element.
func (impl *gemmImpl) words() int {
	if impl.split == splitNone {
		return 1
	}
	return 2
}

// ifmaAux is the second word splitIFMA packs beside x: its low 12 bits, and
// its top 12 bits moved to bits 32–43.
func ifmaAux(x uint64) uint64 { return x&0xfff | x>>52<<32 }

// packASplit is packA for a kernel that packs two words per element
// (split): panel t holds, for each p < kc, the mr words a(t·mr+r, p), then
// their mr second words. Full 4-row panels of a row-major block are written
// in one pass; other panels are packed as one word per element and split in
// place.
func packASplit(dst []uint64, a matView, mcb, kc, mr int, split splitKind) {
	for i0 := 0; i0 < mcb; i0 += mr {
		pan := dst[2*i0*kc : 2*(i0+mr)*kc]
		h := min(mr, mcb-i0)
		if h == 4 && mr == 4 && a.cs == 1 {
			d := a.data[i0*a.rs:]
			r0, r1, r2, r3 := d[:kc], d[a.rs:][:kc], d[2*a.rs:][:kc], d[3*a.rs:][:kc]
			if split == splitHigh32 {
				for p := range kc {
					col := pan[p*8 : p*8+8 : p*8+8]
					x0, x1, x2, x3 := r0[p], r1[p], r2[p], r3[p]
					col[0], col[1], col[2], col[3] = x0, x1, x2, x3
					col[4], col[5], col[6], col[7] = x0>>32, x1>>32, x2>>32, x3>>32
				}
			} else {
				for p := range kc {
					col := pan[p*8 : p*8+8 : p*8+8]
					x0, x1, x2, x3 := r0[p], r1[p], r2[p], r3[p]
					col[0], col[1], col[2], col[3] = x0, x1, x2, x3
					col[4], col[5], col[6], col[7] = ifmaAux(x0), ifmaAux(x1), ifmaAux(x2), ifmaAux(x3)
				}
			}
			continue
		}
		packA(pan[:mr*kc], a.sub(i0, 0), h, kc, mr)
		splitWords(pan, mr*kc, mr, split)
	}
}

// packBSplit is packB for a kernel that packs two words per element
// (split): panel t holds, for each p < kc, the nr words b(p, t·nr+j), then
// their nr second words. Full 16-column panels of a row-major block are
// written in one pass; other panels are packed as one word per element and
// split in place.
func packBSplit(dst []uint64, b matView, kc, nc, nr int, split splitKind) {
	for j0 := 0; j0 < nc; j0 += nr {
		pan := dst[2*j0*kc : 2*(j0+nr)*kc]
		w := min(nr, nc-j0)
		if b.cs == 1 && w == 16 && nr == 16 {
			splitRows16(pan, b.data[j0:], b.rs, kc, split)
			continue
		}
		packB(pan[:nr*kc], b.sub(0, j0), kc, w, nr)
		splitWords(pan, nr*kc, nr, split)
	}
}

// splitRows16Generic writes kc rows of a full 16-column split B panel: for
// each p < kc, the 16 words at src[p*rs:], then their second words, at
// dst[32p:].
func splitRows16Generic(dst, src []uint64, rs, kc int, split splitKind) {
	if split == splitHigh32 {
		for p := range kc {
			s := (*[16]uint64)(src[p*rs:])
			row := (*[32]uint64)(dst[p*32:])
			for j, x := range s {
				row[j] = x
				row[16+j] = x >> 32
			}
		}
		return
	}
	for p := range kc {
		s := (*[16]uint64)(src[p*rs:])
		row := (*[32]uint64)(dst[p*32:])
		for j, x := range s {
			row[j] = x
			row[16+j] = ifmaAux(x)
		}
	}
}

// splitWords rewrites the first n words of buf, packed panels of groups of r
// words, into groups of 2r words: each group's r words, then the second
// word of each (split). buf must hold 2n words. It works from the end, so
// no word is overwritten before it is read.
func splitWords(buf []uint64, n, r int, split splitKind) {
	if n == 0 {
		return
	}
	_ = buf[2*n-1]
	for g := n/r - 1; g >= 0; g-- {
		src := buf[g*r : g*r+r]
		dst := buf[2*g*r : 2*g*r+2*r]
		switch split {
		case splitHigh32:
			for i := r - 1; i >= 0; i-- {
				x := src[i]
				dst[r+i] = x >> 32
				dst[i] = x
			}
		case splitIFMA:
			for i := r - 1; i >= 0; i-- {
				x := src[i]
				dst[r+i] = ifmaAux(x)
				dst[i] = x
			}
		}
	}
}

// genericKernel is the portable micro-kernel, the reference every other
// kernel is tested against.
var genericKernel = &gemmImpl{name: "generic", mr: 2, nr: 4, kc: gemmKC, micro: microGeneric2x4}

// Cache blocking: a kc×nr panel of B and an mr×kc panel of A stay in L1, an
// mc×kc block of A in L2 and a kc×nc block of B in L2/L3.
const (
	gemmKC = 256
	gemmMC = 128
	gemmNC = 2048
)

// gemmParallelMin is the number of multiply-adds below which a product runs on
// one core: below it, starting goroutines costs more than it saves.
const gemmParallelMin = 1 << 17

// matView is a read-only strided matrix: element (i, j) is data[i*rs+j*cs].
// A view of a PackedMatrix has packed set instead: its words are already in
// kernel panels, and col0 (a multiple of nr) is its first column.
type matView struct {
	data   []uint64
	rs, cs int
	packed *PackedMatrix
	col0   int
}

// sub returns the view starting at element (i, j); a packed view can only
// move right, by whole tiles.
func (v matView) sub(i, j int) matView {
	if v.packed != nil {
		v.col0 += j
		return v
	}
	off := i*v.rs + j*v.cs
	if off >= len(v.data) {
		return matView{rs: v.rs, cs: v.cs}
	}
	return matView{data: v.data[off:], rs: v.rs, cs: v.cs}
}

// MatMulInto sets c = a·b where a is m×k, b is k×n and c is m×n, all row-major
// flat slices. c must not alias a or b.
func MatMulInto(c, a, b []uint64, m, k, n int) error {
	if !sizeIs(len(a), m, k) || !sizeIs(len(b), k, n) || !sizeIs(len(c), m, n) {
		return fmt.Errorf("share: matmul %d×%d · %d×%d into %d words: operands have %d and %d words", m, k, k, n, len(c), len(a), len(b))
	}
	gemmParallel(activeKernel(), c, n, matView{data: a, rs: k, cs: 1}, matView{data: b, rs: n, cs: 1}, m, k, n)
	return nil
}

// MatMulTransBInto sets c = a·bᵀ where a is m×k, b is n×k and c is m×n. This
// is the layout of Q·Kᵀ and of Hugging Face [out, in] weights. b is read in
// place (its panels are transposed while packing); c must not alias a or b.
func MatMulTransBInto(c, a, b []uint64, m, k, n int) error {
	if !sizeIs(len(a), m, k) || !sizeIs(len(b), n, k) || !sizeIs(len(c), m, n) {
		return fmt.Errorf("share: matmul %d×%d · (%d×%d)ᵀ into %d words: operands have %d and %d words", m, k, n, k, len(c), len(a), len(b))
	}
	gemmParallel(activeKernel(), c, n, matView{data: a, rs: k, cs: 1}, matView{data: b, rs: 1, cs: k}, m, k, n)
	return nil
}

// MatMul returns a·b for a of shape [..., m, k] and b of shape [k, n] (one
// matrix for every leading index of a) or [..., k, n] with the same leading
// dims as a (a batched product, e.g. per-head attention).
func MatMul(a, b *Tensor) (*Tensor, error) {
	if err := checkNil("matmul", a, b); err != nil {
		return nil, err
	}
	ra, rb := a.Rank(), b.Rank()
	if ra < 2 || rb < 2 {
		return nil, fmt.Errorf("share: matmul of %v and %v: need rank ≥ 2", a.Shape, b.Shape)
	}
	m, k := a.Shape[ra-2], a.Shape[ra-1]
	k2, n := b.Shape[rb-2], b.Shape[rb-1]
	if k != k2 {
		return nil, fmt.Errorf("share: matmul of %v and %v: inner dimensions %d and %d differ", a.Shape, b.Shape, k, k2)
	}
	if rb > 2 && (ra != rb || !slices.Equal(a.Shape[:ra-2], b.Shape[:rb-2])) {
		return nil, fmt.Errorf("share: batched matmul of %v and %v: leading dimensions differ", a.Shape, b.Shape)
	}
	batch := 1
	for _, d := range a.Shape[:ra-2] {
		batch *= d
	}
	shape := append(slices.Clone(a.Shape[:ra-1]), n)
	out, err := NewTensor(shape...)
	if err != nil {
		return nil, fmt.Errorf("share: matmul of %v and %v: %w", a.Shape, b.Shape, err)
	}
	if rb == 2 {
		// Every leading index of a shares b: one big (batch·m)×k·k×n product.
		err = MatMulInto(out.Data, a.Data, b.Data, batch*m, k, n)
	} else {
		err = BatchMatMulInto(out.Data, a.Data, b.Data, batch, m, k, n)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PackedMatrix is a k×n ring matrix stored in the panel layout of the GEMM
// kernel, for a right-hand operand that many products reuse (a layer's
// weights, or the masked weights F = W − B of the weight-mask protocol):
// MatMulPackedInto then skips packing it on every call. It is read-only and
// safe for concurrent use.
type PackedMatrix struct {
	k, n int
	// npad is n rounded up to whole tiles of impl.nr columns.
	npad int
	impl *gemmImpl
	// data holds, for each block of up to impl.kc rows starting at row p0,
	// the panels of that block at data[p0*npad*w:], panel t (columns
	// t·nr … t·nr+nr−1, zero-padded) at offset t·nr·kc·w within the block,
	// w = impl.words().
	data []uint64
}

// PackMatrix returns the row-major k×n matrix b in the layout of the GEMM
// kernel (a copy; b may change afterwards).
func PackMatrix(b []uint64, k, n int) (*PackedMatrix, error) {
	if !sizeIs(len(b), k, n) {
		return nil, fmt.Errorf("share: pack %d×%d matrix from %d words", k, n, len(b))
	}
	return packMatrix(activeKernel(), matView{data: b, rs: n, cs: 1}, k, n), nil
}

// PackMatrixTransposed returns bᵀ in the layout of the GEMM kernel for b
// given row-major as n×k (the [out, in] layout of Hugging Face weights), so
// that MatMulPackedInto computes a·bᵀ.
func PackMatrixTransposed(b []uint64, n, k int) (*PackedMatrix, error) {
	if !sizeIs(len(b), n, k) {
		return nil, fmt.Errorf("share: pack transposed %d×%d matrix from %d words", n, k, len(b))
	}
	return packMatrix(activeKernel(), matView{data: b, rs: 1, cs: k}, k, n), nil
}

// packMatrix packs the k×n view b for impl.
func packMatrix(impl *gemmImpl, b matView, k, n int) *PackedMatrix {
	npad := roundUp(n, impl.nr)
	w := impl.words()
	pm := &PackedMatrix{k: k, n: n, npad: npad, impl: impl, data: make([]uint64, k*npad*w)}
	if n == 0 {
		return pm
	}
	for p0 := 0; p0 < k; p0 += impl.kc {
		kc := min(impl.kc, k-p0)
		blk := pm.data[p0*npad*w : (p0+kc)*npad*w]
		if w == 2 {
			packBSplit(blk, b.sub(p0, 0), kc, n, impl.nr, impl.split)
		} else {
			packB(blk, b.sub(p0, 0), kc, n, impl.nr)
		}
	}
	return pm
}

// Dims returns the shape k×n of the packed matrix.
func (pm *PackedMatrix) Dims() (k, n int) { return pm.k, pm.n }

// MatMulPackedInto sets c = a·b where a is m×k row-major, b a packed k×n
// matrix and c is m×n row-major. c must not alias a.
func MatMulPackedInto(c, a []uint64, m int, b *PackedMatrix) error {
	if b == nil {
		return fmt.Errorf("share: matmul with a nil packed matrix")
	}
	if !sizeIs(len(a), m, b.k) || !sizeIs(len(c), m, b.n) {
		return fmt.Errorf("share: matmul %d×%d · packed %d×%d into %d words: a has %d words", m, b.k, b.k, b.n, len(c), len(a))
	}
	gemmParallel(b.impl, c, b.n, matView{data: a, rs: b.k, cs: 1}, matView{packed: b}, m, b.k, b.n)
	return nil
}

// BatchMatMulInto sets c[i] = a[i]·b[i] for i < batch, each a[i] m×k, b[i] k×n.
func BatchMatMulInto(c, a, b []uint64, batch, m, k, n int) error {
	if !sizeIs(len(a), batch, m, k) || !sizeIs(len(b), batch, k, n) || !sizeIs(len(c), batch, m, n) {
		return fmt.Errorf("share: batched matmul %d×(%d×%d · %d×%d): operands have %d, %d, %d words", batch, m, k, k, n, len(a), len(b), len(c))
	}
	batchGemm(c, a, b, batch, m, k, n, false)
	return nil
}

// BatchMatMulTransBInto sets c[i] = a[i]·b[i]ᵀ for i < batch, each a[i] m×k
// and b[i] n×k: per-head attention scores Q·Kᵀ without transposing K first.
func BatchMatMulTransBInto(c, a, b []uint64, batch, m, k, n int) error {
	if !sizeIs(len(a), batch, m, k) || !sizeIs(len(b), batch, n, k) || !sizeIs(len(c), batch, m, n) {
		return fmt.Errorf("share: batched matmul %d×(%d×%d · (%d×%d)ᵀ): operands have %d, %d, %d words", batch, m, k, n, k, len(a), len(b), len(c))
	}
	batchGemm(c, a, b, batch, m, k, n, true)
	return nil
}

// batchGemm runs batch products of validated operands, one contiguous range
// of them per core when there are enough, else each split over the cores.
func batchGemm(c, a, b []uint64, batch, m, k, n int, transB bool) {
	impl := activeKernel()
	one := func(i int, parallel bool) {
		cv := c[i*m*n : (i+1)*m*n]
		av := matView{data: a[i*m*k : (i+1)*m*k], rs: k, cs: 1}
		bv := matView{data: b[i*k*n : (i+1)*k*n], rs: n, cs: 1}
		if transB {
			bv = matView{data: bv.data, rs: 1, cs: k}
		}
		if parallel {
			gemmParallel(impl, cv, n, av, bv, m, k, n)
		} else {
			gemmSerial(impl, cv, n, av, bv, m, k, n)
		}
	}
	workers := runtime.GOMAXPROCS(0)
	if batch < workers || batch*m*k*n < gemmParallelMin {
		for i := range batch {
			one(i, true)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		i0, i1 := w*batch/workers, (w+1)*batch/workers
		wg.Go(func() {
			for i := i0; i < i1; i++ {
				one(i, false)
			}
		})
	}
	wg.Wait()
}

// gemmParallel sets the m×n block of c (rows ldc apart) to a·b on all cores.
// It cuts the columns of c (or, for tall products, the rows) into a few
// chunks per core, aligned to whole tiles, that the cores take in turn: each
// chunk packs only its part of the larger operand, and a core slowed by other
// work takes fewer chunks instead of holding up the product.
func gemmParallel(impl *gemmImpl, c []uint64, ldc int, a, b matView, m, k, n int) {
	workers := runtime.GOMAXPROCS(0)
	if workers <= 1 || m*k*n < gemmParallelMin {
		gemmSerial(impl, c, ldc, a, b, m, k, n)
		return
	}
	byCols := n >= m
	tiles := (m + impl.mr - 1) / impl.mr
	step := impl.mr
	if byCols {
		tiles, step = (n+impl.nr-1)/impl.nr, impl.nr
	}
	chunks := min(tiles, workers*gemmChunksPerCore)
	workers = min(workers, chunks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				ch := int(next.Add(1) - 1)
				if ch >= chunks {
					return
				}
				lo, hi := ch*tiles/chunks*step, (ch+1)*tiles/chunks*step
				if byCols {
					hi = min(hi, n)
					gemmSerial(impl, c[lo:], ldc, a, b.sub(0, lo), m, k, hi-lo)
				} else {
					hi = min(hi, m)
					gemmSerial(impl, c[lo*ldc:], ldc, a.sub(lo, 0), b, hi-lo, k, n)
				}
			}
		})
	}
	wg.Wait()
}

// gemmChunksPerCore is how many chunks gemmParallel cuts per core.
const gemmChunksPerCore = 2

// gemmBufPool recycles packing buffers (one mc×kc block of A and one kc×nc
// block of B, padded to whole tiles).
var gemmBufPool sync.Pool

// gemmSerial sets the m×n block of c (rows ldc apart) to a·b on the calling
// goroutine.
func gemmSerial(impl *gemmImpl, c []uint64, ldc int, a, b matView, m, k, n int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		for i := range m {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	mr, nr, w := impl.mr, impl.nr, impl.words()
	mcMax := min(roundUp(gemmMC, mr), roundUp(m, mr))
	ncMax := min(roundUp(gemmNC, nr), roundUp(n, nr))
	kcMax := min(impl.kc, k)
	bSize := kcMax * ncMax * w
	if b.packed != nil {
		bSize = 0
	}
	aSize := mcMax * kcMax * w
	need := aSize + bSize + mr*nr
	var buf []uint64
	if p, ok := gemmBufPool.Get().(*[]uint64); ok && cap(*p) >= need {
		buf = (*p)[:need]
	} else {
		buf = make([]uint64, need)
	}
	ap, bBuf, tile := buf[:aSize], buf[aSize:aSize+bSize], buf[need-mr*nr:]
	direct := impl.direct != nil && w == 1 && b.packed == nil && b.cs == 1 && m <= impl.directRows
	for j0 := 0; j0 < n; j0 += ncMax {
		nc := min(ncMax, n-j0)
		for p0 := 0; p0 < k; p0 += kcMax {
			kc := min(kcMax, k-p0)
			add := p0 > 0 // the first k block writes c, later ones add to it
			bp := bBuf
			switch last := nc / nr * nr; {
			case b.packed != nil:
				bp = b.packed.data[(p0*b.packed.npad+(b.col0+j0)*kc)*w:][:roundUp(nc, nr)*kc*w]
			case direct:
				// Full panels are read in place; only a partial last one
				// is packed (zero-padded), at its usual offset.
				if last < nc {
					packB(bp[last*kc:], b.sub(p0, j0+last), kc, nc-last, nr)
				}
			case w == 2:
				packBSplit(bp, b.sub(p0, j0), kc, nc, nr, impl.split)
			default:
				packB(bp, b.sub(p0, j0), kc, nc, nr)
			}
			for i0 := 0; i0 < m; i0 += mcMax {
				mcb := min(mcMax, m-i0)
				if w == 2 {
					packASplit(ap, a.sub(i0, p0), mcb, kc, mr, impl.split)
				} else {
					packA(ap, a.sub(i0, p0), mcb, kc, mr)
				}
				for jr := 0; jr < nc; jr += nr {
					bpan := bp[jr*kc*w : (jr+nr)*kc*w]
					wd := min(nr, nc-jr)
					var bsrc []uint64 // B in place (direct, full panel)
					if direct && wd == nr {
						bsrc = b.data[p0*b.rs+j0+jr:]
					}
					for ir := 0; ir < mcb; ir += mr {
						apan := ap[ir*kc*w : (ir+mr)*kc*w]
						h := min(mr, mcb-ir)
						off := (i0+ir)*ldc + j0 + jr
						if h == mr && wd == nr {
							if bsrc != nil {
								impl.direct(kc, apan, bsrc, b.rs, c[off:], ldc, add)
							} else {
								impl.micro(kc, apan, bpan, c[off:], ldc, add)
							}
							continue
						}
						// Edge tile: compute the whole padded tile aside and
						// store only the part inside c.
						if bsrc != nil {
							impl.direct(kc, apan, bsrc, b.rs, tile, nr, false)
						} else {
							impl.micro(kc, apan, bpan, tile, nr, false)
						}
						for i := range h {
							crow := c[off+i*ldc : off+i*ldc+wd]
							trow := tile[i*nr : i*nr+wd]
							if !add {
								copy(crow, trow)
								continue
							}
							for j := range crow {
								crow[j] += trow[j]
							}
						}
					}
				}
			}
		}
	}
	gemmBufPool.Put(&buf)
}

// sizeIs reports whether the dims are non-negative and their product, computed
// without overflow, is size.
func sizeIs(size int, dims ...int) bool {
	p := uint64(1)
	for _, d := range dims {
		if d < 0 {
			return false
		}
		hi, lo := bits.Mul64(p, uint64(d))
		if hi != 0 || lo > math.MaxInt {
			return false
		}
		p = lo
	}
	return p == uint64(size)
}

// roundUp returns x rounded up to a multiple of q.
func roundUp(x, q int) int { return (x + q - 1) / q * q }

// packA copies the mcb×kc block of a into dst as panels of mr rows: panel t
// holds, for each p < kc, the words a(t·mr+r, p) for r < mr, zero past mcb.
func packA(dst []uint64, a matView, mcb, kc, mr int) {
	for i0 := 0; i0 < mcb; i0 += mr {
		pan := dst[i0*kc : (i0+mr)*kc]
		h := min(mr, mcb-i0)
		if h < mr {
			clear(pan)
		}
		if h == 8 && mr == 8 && a.cs == 1 {
			// Full 8-row panel of a row-major block: gather one column of
			// eight words at a time, so each write fills one cache line.
			d := a.data[i0*a.rs:]
			r0, r1, r2, r3 := d[:kc], d[a.rs:][:kc], d[2*a.rs:][:kc], d[3*a.rs:][:kc]
			r4, r5, r6, r7 := d[4*a.rs:][:kc], d[5*a.rs:][:kc], d[6*a.rs:][:kc], d[7*a.rs:][:kc]
			for p := range kc {
				col := pan[p*8 : p*8+8 : p*8+8]
				col[0], col[1], col[2], col[3] = r0[p], r1[p], r2[p], r3[p]
				col[4], col[5], col[6], col[7] = r4[p], r5[p], r6[p], r7[p]
			}
			continue
		}
		if h == 3 && mr == 3 && a.cs == 1 {
			// Full 3-row panel of a row-major block (the AVX2 kernel's):
			// one column of three words at a time.
			d := a.data[i0*a.rs:]
			r0, r1, r2 := d[:kc], d[a.rs:][:kc], d[2*a.rs:][:kc]
			for p := range kc {
				col := pan[p*3 : p*3+3 : p*3+3]
				col[0], col[1], col[2] = r0[p], r1[p], r2[p]
			}
			continue
		}
		for r := range h {
			row := a.data[(i0+r)*a.rs:]
			if a.cs == 1 {
				row = row[:kc]
				for p, v := range row {
					pan[p*mr+r] = v
				}
				continue
			}
			for p := range kc {
				pan[p*mr+r] = row[p*a.cs]
			}
		}
	}
}

// packB copies the kc×nc block of b into dst as panels of nr columns: panel t
// holds, for each p < kc, the words b(p, t·nr+j) for j < nr, zero past nc.
func packB(dst []uint64, b matView, kc, nc, nr int) {
	for j0 := 0; j0 < nc; j0 += nr {
		pan := dst[j0*kc : (j0+nr)*kc]
		w := min(nr, nc-j0)
		if w < nr {
			clear(pan)
		}
		if b.cs == 1 && w == 16 && nr == 16 {
			// Whole 16-word rows: fixed-size copies compile to inline
			// vector moves instead of a memmove call per row.
			for p := range kc {
				*(*[16]uint64)(pan[p*16:]) = *(*[16]uint64)(b.data[p*b.rs+j0:])
			}
			continue
		}
		if b.cs == 1 {
			for p := range kc {
				copy(pan[p*nr:p*nr+w], b.data[p*b.rs+j0:])
			}
			continue
		}
		// Transposed source: column j of the panel is a contiguous run of b.
		if b.rs == 1 && w%8 == 0 {
			// Eight columns at a time, so each write fills one cache line.
			for j := 0; j < w; j += 8 {
				d := b.data[(j0+j)*b.cs:]
				c0, c1, c2, c3 := d[:kc], d[b.cs:][:kc], d[2*b.cs:][:kc], d[3*b.cs:][:kc]
				c4, c5, c6, c7 := d[4*b.cs:][:kc], d[5*b.cs:][:kc], d[6*b.cs:][:kc], d[7*b.cs:][:kc]
				for p := range kc {
					row := pan[p*nr+j : p*nr+j+8 : p*nr+j+8]
					row[0], row[1], row[2], row[3] = c0[p], c1[p], c2[p], c3[p]
					row[4], row[5], row[6], row[7] = c4[p], c5[p], c6[p], c7[p]
				}
			}
			continue
		}
		for j := range w {
			col := b.data[(j0+j)*b.cs:]
			if b.rs == 1 {
				col = col[:kc]
				for p, v := range col {
					pan[p*nr+j] = v
				}
				continue
			}
			for p := range kc {
				pan[p*nr+j] = col[p*b.rs]
			}
		}
	}
}

// microGeneric2x4 is the portable micro-kernel: c[2×4] (+)= ap·bp with eight
// accumulators that stay in registers across the whole kc loop (larger
// blocks spill on amd64 and run slower).
func microGeneric2x4(kc int, ap, bp, c []uint64, ldc int, add bool) {
	var c00, c01, c02, c03, c10, c11, c12, c13 uint64
	ap = ap[:kc*2]
	bp = bp[:kc*4]
	for p := range kc {
		a := ap[2*p : 2*p+2 : 2*p+2]
		b := bp[4*p : 4*p+4 : 4*p+4]
		a0, a1 := a[0], a[1]
		c00 += a0 * b[0]
		c01 += a0 * b[1]
		c02 += a0 * b[2]
		c03 += a0 * b[3]
		c10 += a1 * b[0]
		c11 += a1 * b[1]
		c12 += a1 * b[2]
		c13 += a1 * b[3]
	}
	r, s := c[0:4:4], c[ldc:ldc+4:ldc+4]
	if !add {
		r[0], r[1], r[2], r[3] = c00, c01, c02, c03
		s[0], s[1], s[2], s[3] = c10, c11, c12, c13
		return
	}
	r[0] += c00
	r[1] += c01
	r[2] += c02
	r[3] += c03
	s[0] += c10
	s[1] += c11
	s[2] += c12
	s[3] += c13
}

// clearTile zeroes the mr×nr tile at c unless add is set (an empty product).
func clearTile(c []uint64, mr, nr, ldc int, add bool) {
	if add {
		return
	}
	for i := range mr {
		clear(c[i*ldc : i*ldc+nr])
	}
}

// addFlag is add as the assembly kernels take it.
func addFlag(add bool) int {
	if add {
		return 1
	}
	return 0
}

// gemmGeneric sets c = a·b for row-major m×k · k×n with the portable kernel
// on the calling goroutine; the reference for accelerated kernels.
func gemmGeneric(c, a, b []uint64, m, k, n int) {
	gemmSerial(genericKernel, c, n, matView{data: a, rs: k, cs: 1}, matView{data: b, rs: n, cs: 1}, m, k, n)
}

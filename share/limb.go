package share

import (
	"fmt"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// The exact limb method: a ring GEMM over Z_2^64 computed with float64
// GEMMs, for hardware whose fast matrix units are floating-point (GPUs).
//
// Every word splits into four 16-bit limbs, a = Σ_i a_i·2^(16i). Modulo 2^64,
//
//	A·B = Σ_{i+j<4} (A_i·B_j)·2^(16(i+j)),
//
// because the products with i+j ≥ 4 are multiples of 2^64: only 10 of the
// 16 limb products reach the low 64 bits. The products of one shift
// s = i+j are summed by ONE float GEMM with inner dimension (s+1)·k: the
// left operand holds the limbs side by side, [A_0 A_1 A_2 A_3] (m×4k), the
// right one stacked in reverse, [B_3; B_2; B_1; B_0] (4k×n), so that
//
//	P_s = [A_0 … A_s]·[B_s; …; B_0]   (the first (s+1)·k columns of the left
//	                                   operand, the last (s+1)·k rows of the
//	                                   right one)
//
// Each limb product is below 2^32, so every partial sum of P_s (all terms are
// non-negative integers) is at most (s+1)·k·(2^16−1)² and float64 holds it
// exactly while that is at most 2^53: for every s ≤ 3 when k ≤ 2^19
// (limbMaxK), whatever order the GEMM sums in (blocked, split-k, FMA).
// Longer inner dimensions are cut into chunks of at most limbMaxK, each
// chunk's result recombined into the ring separately. Recombination,
// C = Σ_s uint64(P_s)·2^(16s) with wrap-around, is exact because each P_s
// is an exact integer below 2^53.
//
// The method is written once: splitLeft, splitRight, limbProducts and
// recombine are shared by the CPU reference (GonumLimbGEMM, tested bit-exact
// against the ring GEMM) and the cuda backend, which runs limbProducts with
// cuBLAS on device buffers.

const (
	// limbBits is the width of one limb; limbCount limbs make a word.
	limbBits  = 16
	limbCount = 64 / limbBits
	// limbMaxK is the longest inner dimension one chunk may have: the
	// largest sum, P_3 = 4·k·(2^16−1)², stays ≤ 2^53 for k ≤ 2^19.
	limbMaxK = 1 << 19
	// limbRowBlock is how many rows of the left operand the CPU driver
	// splits and multiplies at a time (bounds its float64 buffers).
	limbRowBlock = 512
)

// FloatGEMM sets c = a·b for row-major float64 matrices: a is m×k with rows
// lda apart, b k×n with rows ldb apart, c m×n with rows ldc apart (c is
// overwritten). The limb method calls it with integer-valued operands whose
// every partial sum is an exact float64, so any IEEE double GEMM gives the
// exact result. It returns an error rather than panicking.
type FloatGEMM func(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error

// GonumFloatGEMM is a FloatGEMM on gonum's blas64.Gemm (pure Go on all
// cores unless blas64.Use installed another implementation).
func GonumFloatGEMM(m, n, k int, a []float64, lda int, b []float64, ldb int, c []float64, ldc int) error {
	if m < 0 || n < 0 || k < 0 || lda < max(1, k) || ldb < max(1, n) || ldc < max(1, n) ||
		!spans(len(a), m, k, lda) || !spans(len(b), k, n, ldb) || !spans(len(c), m, n, ldc) {
		return fmt.Errorf("share: float GEMM %d×%d·%d×%d with strides %d, %d, %d on %d, %d, %d floats", m, k, k, n, lda, ldb, ldc, len(a), len(b), len(c))
	}
	if m == 0 || n == 0 {
		return nil
	}
	blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
		blas64.General{Rows: m, Cols: k, Stride: lda, Data: a},
		blas64.General{Rows: k, Cols: n, Stride: ldb, Data: b},
		0, blas64.General{Rows: m, Cols: n, Stride: ldc, Data: c})
	return nil
}

// spans reports whether size elements hold a rows×cols matrix with rows ld
// apart.
func spans(size, rows, cols, ld int) bool {
	if rows == 0 || cols == 0 {
		return true
	}
	return size >= cols && ld > 0 && rows-1 <= (size-cols)/ld
}

// floatGEMMOn is a FloatGEMM on buffers of type Buf (host slices, device
// pointers) at element offsets: the form limbProducts needs.
type floatGEMMOn[Buf any] func(m, n, k int, a Buf, aOff, lda int, b Buf, bOff, ldb int, c Buf, cOff, ldc int) error

// splitLeft writes the limbs of columns k0 … k0+kc−1 of rows r0 … r0+rows−1
// of the matrix a (rows lda words apart) into dst, rows×(4·kc) row-major:
// row r holds A_0[r, ·], A_1[r, ·], A_2[r, ·], A_3[r, ·], kc floats each.
func splitLeft(dst []float64, a []uint64, lda, r0, rows, k0, kc int) {
	w := limbCount * kc
	for r := range rows {
		src := a[(r0+r)*lda+k0:][:kc]
		d := dst[r*w:][:w]
		d0, d1, d2, d3 := d[:kc], d[kc:2*kc], d[2*kc:3*kc], d[3*kc:]
		for p, v := range src {
			d0[p] = float64(uint16(v))
			d1[p] = float64(uint16(v >> 16))
			d2[p] = float64(uint16(v >> 32))
			d3[p] = float64(v >> 48)
		}
	}
}

// splitRight writes the limbs of rows k0 … k0+kc−1 of the k×n matrix b into
// dst, (4·kc)×n row-major: B_3, B_2, B_1, B_0 stacked, kc rows each.
func splitRight(dst []float64, b []uint64, n, k0, kc int) {
	blk := kc * n
	d3, d2, d1, d0 := dst[:blk], dst[blk:2*blk], dst[2*blk:3*blk], dst[3*blk:4*blk]
	for p := range kc {
		src := b[(k0+p)*n:][:n]
		o := p * n
		r0, r1, r2, r3 := d0[o:o+n], d1[o:o+n], d2[o:o+n], d3[o:o+n]
		for j, v := range src {
			r0[j] = float64(uint16(v))
			r1[j] = float64(uint16(v >> 16))
			r2[j] = float64(uint16(v >> 32))
			r3[j] = float64(v >> 48)
		}
	}
}

// limbProducts runs the four float GEMMs of one chunk: planes holds P_s, m×n
// row-major, at offset s·m·n, for left = splitLeft's m×(4·kc) and right =
// splitRight's (4·kc)×n. The only place the shifts, offsets and inner
// dimensions of the method are written down.
func limbProducts[Buf any](gemm floatGEMMOn[Buf], m, n, kc int, left, right, planes Buf) error {
	for s := range limbCount {
		kk := (s + 1) * kc
		if err := gemm(m, n, kk, left, 0, limbCount*kc, right, (limbCount-1-s)*kc*n, n, planes, s*m*n, n); err != nil {
			return fmt.Errorf("share: limb product of shift %d (%d×%d·%d×%d): %w", s, m, kk, kk, n, err)
		}
	}
	return nil
}

// recombine sets (add false) or adds to (add true) rows lo … hi−1 of the
// m×n result the ring value Σ_s P_s·2^(16s) of the planes limbProducts wrote
// (each P_s an exact integer below 2^53); row lo goes to c[0:], the next
// rows ldc words apart.
func recombine(c []uint64, ldc int, planes []float64, m, n, lo, hi int, add bool) {
	mn := m * n
	p0, p1, p2, p3 := planes[:mn], planes[mn:2*mn], planes[2*mn:3*mn], planes[3*mn:4*mn]
	for r := lo; r < hi; r++ {
		o := r * n
		q0, q1, q2, q3 := p0[o:o+n], p1[o:o+n], p2[o:o+n], p3[o:o+n]
		crow := c[(r-lo)*ldc:][:n]
		for j := range crow {
			v := uint64(q0[j]) + uint64(q1[j])<<16 + uint64(q2[j])<<32 + uint64(q3[j])<<48
			if add {
				crow[j] += v
			} else {
				crow[j] = v
			}
		}
	}
}

// LimbGEMM returns a GEMM backend that computes every ring product by the
// exact limb method on the float GEMM f, on the calling goroutine (f may use
// more cores). With GonumFloatGEMM it is the reference that proves the
// method bit-exact against the ring GEMM without a GPU.
func LimbGEMM(name string, f FloatGEMM) GEMMBackend {
	return &limbGEMM{name: name, f: f, chunk: limbMaxK}
}

// GonumLimbGEMM is LimbGEMM on GonumFloatGEMM, named "limb-gonum".
func GonumLimbGEMM() GEMMBackend { return LimbGEMM("limb-gonum", GonumFloatGEMM) }

// limbGEMM is the CPU driver of the limb method.
type limbGEMM struct {
	name string
	f    FloatGEMM
	// chunk is the longest inner dimension of one chunk: limbMaxK, except in
	// tests that probe the bound.
	chunk int
}

func (l *limbGEMM) Name() string { return l.name }

func (l *limbGEMM) MulWeights(c, a []uint64, batch, m int, w *WeightMatrix) error {
	if err := checkMulWeights(c, a, batch, m, w); err != nil {
		return err
	}
	return l.matMul(c, a, w.data, batch*m, w.k, w.n)
}

func (l *limbGEMM) BatchMatMul(c, a, b []uint64, batch, m, k, n int) error {
	if err := checkBatchMatMul(c, a, b, batch, m, k, n); err != nil {
		return err
	}
	for i := range batch {
		if err := l.matMul(c[i*m*n:(i+1)*m*n], a[i*m*k:(i+1)*m*k], b[i*k*n:(i+1)*k*n], m, k, n); err != nil {
			return fmt.Errorf("share: batched matmul, product %d: %w", i, err)
		}
	}
	return nil
}

// limbBufPool recycles the float64 buffers of limbGEMM.matMul.
var limbBufPool sync.Pool

// matMul sets c = a·b for validated row-major m×k · k×n operands.
func (l *limbGEMM) matMul(c, a, b []uint64, m, k, n int) error {
	if m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		clear(c)
		return nil
	}
	host := func(m, n, k int, a []float64, aOff, lda int, b []float64, bOff, ldb int, c []float64, cOff, ldc int) error {
		return l.f(m, n, k, a[aOff:], lda, b[bOff:], ldb, c[cOff:], ldc)
	}
	kcMax := min(k, l.chunk)
	rbMax := min(m, limbRowBlock)
	need := limbCount*kcMax*n + rbMax*limbCount*kcMax + limbCount*rbMax*n
	var buf []float64
	if p, ok := limbBufPool.Get().(*[]float64); ok && cap(*p) >= need {
		buf = (*p)[:need]
	} else {
		buf = make([]float64, need)
	}
	defer limbBufPool.Put(&buf)
	for k0 := 0; k0 < k; k0 += kcMax {
		kc := min(kcMax, k-k0)
		right := buf[:limbCount*kc*n]
		splitRight(right, b, n, k0, kc)
		for r0 := 0; r0 < m; r0 += rbMax {
			rows := min(rbMax, m-r0)
			left := buf[limbCount*kcMax*n:][:rows*limbCount*kc]
			planes := buf[limbCount*kcMax*n+rbMax*limbCount*kcMax:][:limbCount*rows*n]
			parallelRows(rows, limbCount*kc, func(lo, hi int) {
				splitLeft(left[lo*limbCount*kc:], a, k, r0+lo, hi-lo, k0, kc)
			})
			if err := limbProducts(host, rows, n, kc, left, right, planes); err != nil {
				return err
			}
			parallelRows(rows, limbCount*n, func(lo, hi int) {
				recombine(c[(r0+lo)*n:], n, planes, rows, n, lo, hi, k0 > 0)
			})
		}
	}
	return nil
}

// parallelRows runs f over row ranges [lo, hi) of rows rows on all cores when
// there is enough work (rows·cost elements), else on the caller.
func parallelRows(rows, cost int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), rows)
	if workers <= 1 || rows*cost < 1<<16 {
		f(0, rows)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*rows/workers, (w+1)*rows/workers
		wg.Go(func() { f(lo, hi) })
	}
	wg.Wait()
}

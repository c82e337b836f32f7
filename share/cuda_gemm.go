//go:build cuda

package share

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	gblas "gonum.org/v1/gonum/blas"
	cu "gorgonia.org/cu"
	cublas "gorgonia.org/cu/blas"

	"github.com/selectformer/selectformer/share/internal/cudadrv"
)

// The cuda backend: the exact limb method of limb.go with cuBLAS Dgemm as its
// float GEMM, through gorgonia.org/cu. One goroutine, locked to an OS thread
// that holds the device's primary context, makes every driver call. A
// product streams its left operand through two slots of page-locked host
// buffers and device buffers: while the GPU multiplies one block of rows,
// the host splits the next block into limbs and its copy engine uploads it,
// and the previous block's planes come back and are recombined into the ring.
// The weights' limbs stay on the device, one entry per WeightMatrix, until the
// matrix is garbage-collected or the cache needs the room.

func init() {
	gemmOpeners["cuda"] = openCUDA
	gemmAuto = []string{"cuda", "cpu"}
}

const (
	// cudaMinMACs is the product size below which the cuda backend runs the
	// CPU ring GEMM: below it, launches and transfers cost more than the CPU.
	cudaMinMACs = 1 << 24
	// cudaSlotBytes is the target size of one pipeline slot's buffers (on the
	// host, and again on the device).
	cudaSlotBytes = 32 << 20
)

var cudaOpen = sync.OnceValues(newCUDAGEMM)

// openCUDA returns the process's cuda backend, opening it on first use. A
// host without a driver or device gets an error wrapping ErrGEMMUnavailable.
func openCUDA() (GEMMBackend, error) {
	g, err := cudaOpen()
	if err != nil {
		return nil, err
	}
	return g, nil
}

// cudaGEMM is the cuda backend.
type cudaGEMM struct {
	device string
	reqs   chan func()

	// released receives the ids of collected WeightMatrix values whose
	// device limbs the worker should free.
	relMu    sync.Mutex
	released []uint64

	// Worker state: touched only on the worker thread.
	ctx      cu.CUContext
	blas     *cublas.Standard
	in, out  cu.Stream
	slots    [2]cudaSlot
	tmpRight cudaDevBuf // right limbs of BatchMatMul's per-product operand
	cache    map[uint64]*cudaWeights
	cached   int64 // bytes of device memory the cache holds
	limit    int64 // most bytes the cache may hold
	tick     uint64
	stats    cudaStats
	broken   error // a cuBLAS error: the handle refuses every later call
}

// cudaStats counts what the worker did, for tests and benchmarks.
type cudaStats struct {
	uploads, hits, evictions, frees, products int
}

// cudaDevBuf is a device buffer of float64s.
type cudaDevBuf struct {
	p cu.DevicePtr
	n int
}

// ensure makes b hold at least n floats (its contents are lost on growth).
func (b *cudaDevBuf) ensure(n int) error {
	if b.n >= n {
		return nil
	}
	if err := b.free(); err != nil {
		return err
	}
	p, err := cu.MemAlloc(int64(8 * n))
	if err != nil {
		return fmt.Errorf("device buffer of %d bytes: %w", 8*n, err)
	}
	b.p, b.n = p, n
	return nil
}

func (b *cudaDevBuf) free() error {
	if b.n == 0 {
		return nil
	}
	err := cu.MemFree(b.p)
	*b = cudaDevBuf{}
	return err
}

// cudaSlot is one stage of the pipeline: buffers for a block of rows and the
// events that order its copies and products.
type cudaSlot struct {
	hostLeft, hostPlanes cudadrv.Pinned
	devLeft, devPlanes   cudaDevBuf
	evIn, evGemm, evOut  cu.Event
	// The block in flight, if any: its rows r0 … r0+rows−1 of c.
	busy     bool
	c        []uint64
	r0, rows int
	n        int
	add      bool
}

// cudaWeights is a weight matrix's right-operand limbs on the device, one
// buffer per inner-dimension chunk.
type cudaWeights struct {
	chunks []cudaDevBuf
	bytes  int64
	used   uint64
}

// newCUDAGEMM opens device 0 (CUDA_VISIBLE_DEVICES picks it) and starts the
// worker.
func newCUDAGEMM() (*cudaGEMM, error) {
	if err := cudadrv.InitError(); err != nil {
		return nil, fmt.Errorf("cuda: %w: %w", err, ErrGEMMUnavailable)
	}
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w: %w", err, ErrGEMMUnavailable)
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: no CUDA device: %w", ErrGEMMUnavailable)
	}
	dev, err := cu.GetDevice(0)
	if err != nil {
		return nil, fmt.Errorf("cuda: device 0: %w: %w", err, ErrGEMMUnavailable)
	}
	name, err := dev.Name()
	if err != nil {
		name = "device 0"
	}
	g := &cudaGEMM{device: name, reqs: make(chan func()), cache: make(map[uint64]*cudaWeights)}
	started := make(chan error, 1)
	go g.work(dev, started)
	if err := <-started; err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	return g, nil
}

// work is the worker: it sets up the context, cuBLAS, streams and events on
// its locked thread, then runs requests until the process ends.
func (g *cudaGEMM) work(dev cu.Device, started chan<- error) {
	runtime.LockOSThread()
	err := g.setup(dev)
	started <- err
	if err != nil {
		return
	}
	for f := range g.reqs {
		f()
	}
}

func (g *cudaGEMM) setup(dev cu.Device) error {
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return fmt.Errorf("retain primary context: %w", err)
	}
	if err := cu.SetCurrentContext(ctx); err != nil {
		return fmt.Errorf("set context: %w", err)
	}
	g.ctx = ctx
	g.blas = new(cublas.Standard)
	if err := g.blas.Init(); err != nil {
		return fmt.Errorf("cuBLAS: %w", err)
	}
	// Copies run on two non-blocking streams; cuBLAS runs on the legacy
	// default stream; events order them (non-blocking streams do not
	// synchronise with the default stream by themselves).
	if g.in, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	if g.out, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	for i := range g.slots {
		s := &g.slots[i]
		for _, ev := range []*cu.Event{&s.evIn, &s.evGemm, &s.evOut} {
			if *ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
				return fmt.Errorf("event: %w", err)
			}
		}
	}
	free, _, err := cu.MemInfo()
	if err != nil {
		return fmt.Errorf("memory info: %w", err)
	}
	g.limit = free / 2
	return nil
}

// do runs f on the worker thread and returns its error.
func (g *cudaGEMM) do(f func() error) error {
	done := make(chan error, 1)
	g.reqs <- func() { done <- f() }
	return <-done
}

func (g *cudaGEMM) Name() string { return "cuda" }

// String names the backend and its device.
func (g *cudaGEMM) String() string { return "cuda (" + g.device + ")" }

func (g *cudaGEMM) MulWeights(c, a []uint64, batch, m int, w *WeightMatrix) error {
	if err := checkMulWeights(c, a, batch, m, w); err != nil {
		return err
	}
	rows := batch * m
	if rows*w.k*w.n < cudaMinMACs {
		return MatMulInto(c, a, w.data, rows, w.k, w.n)
	}
	return g.mulWeightsDevice(c, a, rows, w)
}

func (g *cudaGEMM) BatchMatMul(c, a, b []uint64, batch, m, k, n int) error {
	if err := checkBatchMatMul(c, a, b, batch, m, k, n); err != nil {
		return err
	}
	// Each product of the batch has its own right operand, uploaded and
	// multiplied on its own: only products large enough by themselves go to
	// the device. The attention products (candidates × heads of 128×64 ·
	// 64×128) stay on the CPU ring GEMM; a strided-batched device GEMM
	// for them is not written yet.
	if m*k*n < cudaMinMACs {
		return BatchMatMulInto(c, a, b, batch, m, k, n)
	}
	return g.batchMatMulDevice(c, a, b, batch, m, k, n)
}

// mulWeightsDevice computes c = a·W (rows×k · k×n) on the device whatever its
// size.
func (g *cudaGEMM) mulWeightsDevice(c, a []uint64, rows int, w *WeightMatrix) error {
	if rows == 0 || w.n == 0 {
		return nil
	}
	if w.k == 0 {
		clear(c)
		return nil
	}
	return g.do(func() error {
		if err := g.begin(); err != nil {
			return err
		}
		dw, err := g.weights(w)
		if err != nil {
			return g.fail(err)
		}
		kcMax := min(w.k, limbMaxK)
		for ci, k0 := 0, 0; k0 < w.k; ci, k0 = ci+1, k0+kcMax {
			right := dw.chunks[ci]
			if err := g.product(c, a, rows, w.k, w.n, k0, min(kcMax, w.k-k0), right.p); err != nil {
				return g.fail(err)
			}
		}
		g.stats.products++
		return nil
	})
}

// batchMatMulDevice computes c[i] = a[i]·b[i] on the device, one product
// after the other, each right operand split and uploaded once.
func (g *cudaGEMM) batchMatMulDevice(c, a, b []uint64, batch, m, k, n int) error {
	if batch == 0 || m == 0 || n == 0 {
		return nil
	}
	if k == 0 {
		clear(c)
		return nil
	}
	return g.do(func() error {
		if err := g.begin(); err != nil {
			return err
		}
		kcMax := min(k, limbMaxK)
		stage := make([]float64, limbCount*kcMax*n)
		if err := g.tmpRight.ensure(len(stage)); err != nil {
			return g.fail(err)
		}
		for i := range batch {
			ci, ai, bi := c[i*m*n:(i+1)*m*n], a[i*m*k:(i+1)*m*k], b[i*k*n:(i+1)*k*n]
			for k0 := 0; k0 < k; k0 += kcMax {
				kc := min(kcMax, k-k0)
				// product drained the pipeline, so nothing reads tmpRight.
				splitRight(stage, bi, n, k0, kc)
				if err := cu.MemcpyHtoD(g.tmpRight.p, unsafe.Pointer(&stage[0]), int64(8*limbCount*kc*n)); err != nil {
					return g.fail(fmt.Errorf("upload right limbs: %w", err))
				}
				if err := g.product(ci, ai, m, k, n, k0, kc, g.tmpRight.p); err != nil {
					return g.fail(err)
				}
			}
			g.stats.products++
		}
		return nil
	})
}

// begin refuses work after a cuBLAS error and frees the device limbs of
// collected weight matrices.
func (g *cudaGEMM) begin() error {
	if g.broken != nil {
		return fmt.Errorf("cuda: disabled by an earlier cuBLAS error: %w", g.broken)
	}
	g.relMu.Lock()
	ids := g.released
	g.released = nil
	g.relMu.Unlock()
	for _, id := range ids {
		if dw, ok := g.cache[id]; ok {
			g.drop(id, dw)
			g.stats.frees++
		}
	}
	return nil
}

// fail waits for the device to finish what was queued, forgets the blocks in
// flight and returns err with context; a cuBLAS error disables the backend.
func (g *cudaGEMM) fail(err error) error {
	_ = cu.Synchronize()
	for i := range g.slots {
		g.slots[i].busy = false
	}
	if e := g.blas.Err(); e != nil {
		g.broken = e
	}
	return fmt.Errorf("cuda: %w", err)
}

// weights returns w's right-operand limbs on the device, uploading them on
// first use (evicting the least recently used matrices if the cache is full).
func (g *cudaGEMM) weights(w *WeightMatrix) (*cudaWeights, error) {
	g.tick++
	if dw, ok := g.cache[w.id]; ok {
		dw.used = g.tick
		g.stats.hits++
		return dw, nil
	}
	kcMax := min(w.k, limbMaxK)
	bytes := int64(8 * limbCount * w.k * w.n)
	g.evict(bytes)
	dw := &cudaWeights{used: g.tick, bytes: bytes}
	stage := make([]float64, limbCount*kcMax*w.n)
	for k0 := 0; k0 < w.k; k0 += kcMax {
		kc := min(kcMax, w.k-k0)
		var buf cudaDevBuf
		if err := buf.ensure(limbCount * kc * w.n); err != nil {
			g.freeChunks(dw)
			return nil, fmt.Errorf("weights %d×%d: %w", w.k, w.n, err)
		}
		dw.chunks = append(dw.chunks, buf)
		splitRight(stage, w.data, w.n, k0, kc)
		if err := cu.MemcpyHtoD(buf.p, unsafe.Pointer(&stage[0]), int64(8*limbCount*kc*w.n)); err != nil {
			g.freeChunks(dw)
			return nil, fmt.Errorf("upload weights %d×%d: %w", w.k, w.n, err)
		}
	}
	g.cache[w.id] = dw
	g.cached += bytes
	g.stats.uploads++
	// The cleanup must not keep w alive: it gets the id only.
	runtime.AddCleanup(w, g.release, w.id)
	return dw, nil
}

// release queues the device limbs of a collected weight matrix for freeing
// (cleanups run on their own goroutine, without the CUDA context).
func (g *cudaGEMM) release(id uint64) {
	g.relMu.Lock()
	g.released = append(g.released, id)
	g.relMu.Unlock()
}

// evict drops least recently used entries until need more bytes fit.
func (g *cudaGEMM) evict(need int64) {
	for g.cached+need > g.limit && len(g.cache) > 0 {
		var oldID uint64
		var old *cudaWeights
		for id, dw := range g.cache {
			if old == nil || dw.used < old.used {
				oldID, old = id, dw
			}
		}
		g.drop(oldID, old)
		g.stats.evictions++
	}
}

func (g *cudaGEMM) drop(id uint64, dw *cudaWeights) {
	g.freeChunks(dw)
	g.cached -= dw.bytes
	delete(g.cache, id)
}

func (g *cudaGEMM) freeChunks(dw *cudaWeights) {
	for i := range dw.chunks {
		_ = dw.chunks[i].free()
	}
	dw.chunks = nil
}

// devGEMM is the float GEMM of the limb method on device buffers: row-major
// c = a·b at float offsets. cuBLAS is column-major, so it computes
// cᵀ = bᵀ·aᵀ, which has the same memory layout.
func (g *cudaGEMM) devGEMM(m, n, k int, a cu.DevicePtr, aOff, lda int, b cu.DevicePtr, bOff, ldb int, c cu.DevicePtr, cOff, ldc int) error {
	av := cudadrv.DeviceFloats(a+cu.DevicePtr(8*aOff), (m-1)*lda+k)
	bv := cudadrv.DeviceFloats(b+cu.DevicePtr(8*bOff), (k-1)*ldb+n)
	cv := cudadrv.DeviceFloats(c+cu.DevicePtr(8*cOff), (m-1)*ldc+n)
	g.blas.Dgemm(gblas.NoTrans, gblas.NoTrans, n, m, k, 1, bv, ldb, av, lda, 0, cv, ldc)
	if err := g.blas.Err(); err != nil {
		return fmt.Errorf("cublasDgemm %d×%d·%d×%d: %w", m, k, k, n, err)
	}
	return nil
}

// product sets (k0 = 0) or adds to (k0 > 0) c, rows×n, the product of
// columns k0 … k0+kc−1 of a (rows×k) with the chunk's right limbs on the
// device, streaming blocks of rows through the two slots; it returns when
// every block is recombined into c.
func (g *cudaGEMM) product(c, a []uint64, rows, k, n, k0, kc int, right cu.DevicePtr) error {
	block := max(1, min(rows, cudaSlotBytes/(8*limbCount*(kc+n))))
	for i := range g.slots {
		if err := g.slots[i].ensure(block, kc, n); err != nil {
			return err
		}
	}
	for j, r0 := 0, 0; r0 < rows; j, r0 = j+1, r0+block {
		s := &g.slots[j%2]
		if err := g.finish(s); err != nil { // the block two steps back
			return err
		}
		nr := min(block, rows-r0)
		left := s.hostLeft.F[:nr*limbCount*kc]
		parallelRows(nr, limbCount*kc, func(lo, hi int) {
			splitLeft(left[lo*limbCount*kc:], a, k, r0+lo, hi-lo, k0, kc)
		})
		if err := cu.MemcpyHtoDAsync(s.devLeft.p, s.hostLeft.P, int64(8*len(left)), g.in); err != nil {
			return fmt.Errorf("upload left limbs: %w", err)
		}
		if err := s.evIn.Record(g.in); err != nil {
			return fmt.Errorf("record event: %w", err)
		}
		if err := cu.NoStream.Wait(s.evIn, 0); err != nil {
			return fmt.Errorf("wait event: %w", err)
		}
		if err := limbProducts(g.devGEMM, nr, n, kc, s.devLeft.p, right, s.devPlanes.p); err != nil {
			return err
		}
		if err := s.evGemm.Record(cu.NoStream); err != nil {
			return fmt.Errorf("record event: %w", err)
		}
		if err := g.out.Wait(s.evGemm, 0); err != nil {
			return fmt.Errorf("wait event: %w", err)
		}
		if err := cu.MemcpyDtoHAsync(s.hostPlanes.P, s.devPlanes.p, int64(8*limbCount*nr*n), g.out); err != nil {
			return fmt.Errorf("download planes: %w", err)
		}
		if err := s.evOut.Record(g.out); err != nil {
			return fmt.Errorf("record event: %w", err)
		}
		s.busy, s.c, s.r0, s.rows, s.n, s.add = true, c, r0, nr, n, k0 > 0
	}
	// Drain in issue order: the older block is in the other slot when the
	// number of blocks is even.
	blocks := (rows + block - 1) / block
	for i := range g.slots {
		if err := g.finish(&g.slots[(blocks+i)%2]); err != nil {
			return err
		}
	}
	return nil
}

// finish waits for the slot's block, if any, and recombines it into c.
func (g *cudaGEMM) finish(s *cudaSlot) error {
	if !s.busy {
		return nil
	}
	if err := s.evOut.Synchronize(); err != nil {
		return fmt.Errorf("wait for block: %w", err)
	}
	s.busy = false
	planes := s.hostPlanes.F[:limbCount*s.rows*s.n]
	parallelRows(s.rows, limbCount*s.n, func(lo, hi int) {
		recombine(s.c[(s.r0+lo)*s.n:], s.n, planes, s.rows, s.n, lo, hi, s.add)
	})
	s.c = nil
	return nil
}

// ensure sizes the slot's buffers for blocks of rows rows.
func (s *cudaSlot) ensure(rows, kc, n int) error {
	nl, np := rows*limbCount*kc, limbCount*rows*n
	if len(s.hostLeft.F) < nl {
		if err := s.hostLeft.Free(); err != nil {
			return err
		}
		var err error
		if s.hostLeft, err = cudadrv.AllocPinned(nl); err != nil {
			return err
		}
	}
	if len(s.hostPlanes.F) < np {
		if err := s.hostPlanes.Free(); err != nil {
			return err
		}
		var err error
		if s.hostPlanes, err = cudadrv.AllocPinned(np); err != nil {
			return err
		}
	}
	return errors.Join(s.devLeft.ensure(nl), s.devPlanes.ensure(np))
}

// statsNow returns the worker's counters.
func (g *cudaGEMM) statsNow() cudaStats {
	var st cudaStats
	_ = g.do(func() error { st = g.stats; return nil })
	return st
}

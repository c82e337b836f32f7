package share

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The GEMM backend seam: the whole-product grain at which the linear layers'
// ring GEMMs can leave the CPU. The protocols call GEMM() for a backend and
// hand it whole batched products; the backend decides where they run (the
// CPU ring GEMM of this package, or a GPU through the exact limb method of
// limb.go). The micro-kernel hook of gemm.go (gemmImpl, activeKernel) stays the CPU
// backend's business.

// GEMMEnv is the environment variable that forces a GEMM backend by name:
// "cpu", "cuda" (only in builds with the cuda tag) or "limb-gonum" (the
// limb method on gonum's float64 GEMM, a slow CPU reference). Unset or empty
// chooses automatically: cuda when it is compiled in and a device opens, else
// cpu. Forcing a backend that cannot open makes GEMM() return the error.
const GEMMEnv = "SELECTFORMER_GEMM"

// GEMMBackend runs batched ring products over Z_2^64 on row-major uint64
// matrices. Every method is safe for concurrent use, validates its operands
// (an error, never a panic, on inconsistent sizes) and leaves its operands
// unchanged; c must not alias a or b.
type GEMMBackend interface {
	// Name identifies the backend: "cpu", "cuda", "limb-gonum".
	Name() string
	// MulWeights sets c[i] = a[i]·W for i < batch: each a[i] is m×k, W the
	// k×n matrix w, each c[i] m×n (the batch's blocks are contiguous).
	MulWeights(c, a []uint64, batch, m int, w *WeightMatrix) error
	// BatchMatMul sets c[i] = a[i]·b[i] for i < batch: each a[i] m×k, b[i]
	// k×n, c[i] m×n.
	BatchMatMul(c, a, b []uint64, batch, m, k, n int) error
}

// weightMatrixIDs numbers WeightMatrix values for the backends' caches.
var weightMatrixIDs atomic.Uint64

// WeightMatrix is a k×n ring matrix that many products use as their right
// operand (a layer's weights, or the masked weights F = W − B of the
// weight-mask protocol). It is immutable, so a backend may keep a prepared
// form of it for as long as the matrix lives (the cuda backend keeps its
// limbs in device memory, keyed by the matrix). Safe for concurrent use.
type WeightMatrix struct {
	id   uint64
	k, n int
	data []uint64
}

// NewWeightMatrix returns the row-major k×n matrix w as a WeightMatrix (a
// copy: w may change afterwards).
func NewWeightMatrix(w []uint64, k, n int) (*WeightMatrix, error) {
	if !sizeIs(len(w), k, n) {
		return nil, fmt.Errorf("share: weight matrix %d×%d from %d words", k, n, len(w))
	}
	return &WeightMatrix{id: weightMatrixIDs.Add(1), k: k, n: n, data: slices.Clone(w)}, nil
}

// Dims returns the shape k×n of the matrix.
func (w *WeightMatrix) Dims() (k, n int) { return w.k, w.n }

// checkMulWeights validates the operands of GEMMBackend.MulWeights.
func checkMulWeights(c, a []uint64, batch, m int, w *WeightMatrix) error {
	if w == nil {
		return fmt.Errorf("share: multiply by a nil weight matrix")
	}
	if !sizeIs(len(a), batch, m, w.k) || !sizeIs(len(c), batch, m, w.n) {
		return fmt.Errorf("share: batched matmul %d×(%d×%d) · weights %d×%d: operands have %d and %d words", batch, m, w.k, w.k, w.n, len(a), len(c))
	}
	return nil
}

// checkBatchMatMul validates the operands of GEMMBackend.BatchMatMul.
func checkBatchMatMul(c, a, b []uint64, batch, m, k, n int) error {
	if !sizeIs(len(a), batch, m, k) || !sizeIs(len(b), batch, k, n) || !sizeIs(len(c), batch, m, n) {
		return fmt.Errorf("share: batched matmul %d×(%d×%d · %d×%d): operands have %d, %d, %d words", batch, m, k, k, n, len(a), len(b), len(c))
	}
	return nil
}

// CPUGEMM returns the CPU backend: this package's ring GEMM (the micro-kernel
// RingKernel names) on all cores, the same code MatMulInto and
// BatchMatMulInto run. Unlike OpenGEMM("cpu") it opens even when
// RingKernelEnv was rejected.
func CPUGEMM() GEMMBackend { return cpuGEMM{} }

// cpuGEMM is the CPU backend.
type cpuGEMM struct{}

func (cpuGEMM) Name() string { return "cpu" }

func (cpuGEMM) MulWeights(c, a []uint64, batch, m int, w *WeightMatrix) error {
	if err := checkMulWeights(c, a, batch, m, w); err != nil {
		return err
	}
	// The batch's blocks are contiguous: one (batch·m)×k · k×n product.
	return MatMulInto(c, a, w.data, batch*m, w.k, w.n)
}

func (cpuGEMM) BatchMatMul(c, a, b []uint64, batch, m, k, n int) error {
	return BatchMatMulInto(c, a, b, batch, m, k, n)
}

// gemmOpeners holds the backends compiled in, by name. Files behind build
// tags add theirs in an init.
var gemmOpeners = map[string]func() (GEMMBackend, error){
	"cpu":        openCPUGEMM,
	"limb-gonum": func() (GEMMBackend, error) { return GonumLimbGEMM(), nil },
}

// openCPUGEMM opens the CPU backend, or fails with the error of a rejected
// RingKernelEnv (a forced kernel this CPU cannot run, or a misspelt one):
// products would otherwise run, and be timed, on a kernel nobody asked for.
func openCPUGEMM() (GEMMBackend, error) {
	if ringKernelErr != nil {
		return nil, ringKernelErr
	}
	return cpuGEMM{}, nil
}

// gemmAuto lists the backends tried, in order, when GEMMEnv is unset; the
// first that opens wins. cpu, the last, opens unless RingKernelEnv was
// rejected.
var gemmAuto = []string{"cpu"}

// ErrGEMMUnavailable is wrapped by the error of a backend that is not
// compiled in or finds no device.
var ErrGEMMUnavailable = errors.New("GEMM backend unavailable")

// GEMMBackends returns the names of the backends compiled in, sorted.
func GEMMBackends() []string {
	names := make([]string, 0, len(gemmOpeners))
	for name := range gemmOpeners {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// OpenGEMM opens the backend called name. A name that is not compiled in
// (cuda without the cuda build tag) or a backend without its device is an
// error wrapping ErrGEMMUnavailable.
func OpenGEMM(name string) (GEMMBackend, error) {
	b, err := openGEMM(name)
	if err != nil {
		return nil, fmt.Errorf("share: %w", err)
	}
	return b, nil
}

// openGEMM is OpenGEMM with errors not yet prefixed by the package name.
func openGEMM(name string) (GEMMBackend, error) {
	open, ok := gemmOpeners[name]
	if !ok {
		hint := ""
		if name == "cuda" {
			hint = " (build with -tags cuda, see bench/scripts/cuda-build.sh)"
		}
		return nil, fmt.Errorf("GEMM backend %q is not compiled in%s; have %s: %w", name, hint, strings.Join(GEMMBackends(), ", "), ErrGEMMUnavailable)
	}
	b, err := open()
	if err != nil {
		return nil, fmt.Errorf("open GEMM backend %q: %w", name, err)
	}
	return b, nil
}

// resolveGEMM picks the backend for the value env of GEMMEnv.
func resolveGEMM(env string) (GEMMBackend, error) {
	env = strings.TrimSpace(env)
	if env != "" {
		b, err := openGEMM(env)
		if err != nil {
			return nil, fmt.Errorf("share: %s=%s: %w", GEMMEnv, env, err)
		}
		return b, nil
	}
	var last error
	for _, name := range gemmAuto {
		b, err := openGEMM(name)
		if err == nil {
			return b, nil
		}
		last = err
	}
	return nil, fmt.Errorf("share: no GEMM backend opens: %w", last)
}

// gemmChoice is the process-wide backend, or the error of choosing it.
type gemmChoice struct {
	b   GEMMBackend
	err error
}

var (
	gemmCurrent atomic.Pointer[gemmChoice]
	gemmEnvOnce sync.Once
)

// GEMM returns the process-wide GEMM backend: the one SetGEMM installed, or
// else the one GEMMEnv names (resolved once, on the first call), or the
// automatic choice. A forced backend that cannot open is returned as an
// error on every call, so each product reports it; so is a rejected
// RingKernelEnv when the choice falls to the cpu backend.
func GEMM() (GEMMBackend, error) {
	gemmEnvOnce.Do(func() {
		b, err := resolveGEMM(os.Getenv(GEMMEnv))
		gemmCurrent.CompareAndSwap(nil, &gemmChoice{b: b, err: err})
	})
	c := gemmCurrent.Load()
	return c.b, c.err
}

// SetGEMM installs b as the process-wide backend (nil restores the automatic
// choice of GEMMEnv) and returns the previous one (nil if none was chosen
// yet). For programs that pick a backend from a flag, and for tests.
func SetGEMM(b GEMMBackend) GEMMBackend {
	gemmEnvOnce.Do(func() {}) // an explicit choice overrides the environment
	next := &gemmChoice{b: b}
	if b == nil {
		rb, err := resolveGEMM(os.Getenv(GEMMEnv))
		next = &gemmChoice{b: rb, err: err}
	}
	prev := gemmCurrent.Swap(next)
	if prev == nil {
		return nil
	}
	return prev.b
}

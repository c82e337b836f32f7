package share

import (
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// RingKernelEnv is the environment variable that forces the micro-kernel of
// the CPU ring GEMM by name (see RingKernels): "generic" (portable Go, every
// CPU), "avx512-vpmullq" (AVX-512 F+DQ, 64-bit lane multiplies),
// "avx512-vpmuludq" (AVX-512 F, 32×32→64-bit limb multiplies),
// "avx512-ifma" (AVX-512 IFMA, 52-bit multiply-adds), "avx2-vpmulld" (AVX2,
// 32-bit lane multiplies) or "arm64-madd" (arm64, scalar multiply-adds).
// Unset, empty or "auto" chooses by CPU (see RingKernel). It is read once,
// when the package is initialised; a name that is unknown, or that this CPU
// cannot run, leaves the automatic choice in place, is logged at the first
// product, and makes the cpu GEMM backend (GEMM, OpenGEMM("cpu")) return
// the error.
const RingKernelEnv = "SELECTFORMER_RING_KERNEL"

// cpuInfo is what the automatic kernel choice looks at.
type cpuInfo struct {
	// vendor is CPUID's vendor string ("GenuineIntel", "AuthenticAMD", …;
	// "" off x86).
	vendor string
	// family and model are CPUID's display family and model (0 off x86).
	family, model int
	// avx2 is AVX2 (false where the OS does not enable the YMM state).
	avx2 bool
	// avx512F, avx512DQ and avx512IFMA are the CPU's AVX-512 subsets (false
	// where the OS does not enable the ZMM state).
	avx512F, avx512DQ, avx512IFMA bool
}

// String describes the CPU for logs: "GenuineIntel family 6 model 207,
// AVX2, AVX-512 F DQ IFMA".
func (c cpuInfo) String() string {
	v := c.vendor
	if v == "" {
		v = "unknown vendor"
	}
	s := fmt.Sprintf("%s family %d model %d", v, c.family, c.model)
	if c.avx2 {
		s += ", AVX2"
	}
	var ext []string
	for _, f := range []struct {
		has  bool
		name string
	}{{c.avx512F, "F"}, {c.avx512DQ, "DQ"}, {c.avx512IFMA, "IFMA"}} {
		if f.has {
			ext = append(ext, f.name)
		}
	}
	if len(ext) == 0 {
		return s + ", no AVX-512"
	}
	return s + ", AVX-512 " + strings.Join(ext, " ")
}

// ringKernel is a kernel and what the CPU needs to run it.
type ringKernel struct {
	impl *gemmImpl
	// runs reports whether a CPU can run the kernel.
	runs func(cpuInfo) bool
}

// ringKernelTable lists the kernels compiled in, in the order RingKernels
// reports them: the generic one, then the architecture file's (archKernels).
var ringKernelTable = append([]ringKernel{
	{impl: genericKernel, runs: func(cpuInfo) bool { return true }},
}, archKernels()...)

// autoKernelName is the automatic choice for a CPU, among the kernels
// compiled in:
//   - AMD (and Hygon) with AVX-512 F+DQ: avx512-vpmullq. Zen 4 and Zen 5 run
//     VPMULLQ as one µop, so one multiply and one add per eight products
//     beat every limb scheme.
//   - Intel and other vendors: avx512-ifma with AVX-512 IFMA (three µops,
//     VPMADD52LUQ/HUQ, per eight products against VPMULLQ's three µops plus
//     the add), else avx512-vpmullq with F+DQ: its four µops per eight
//     products stay below the limb kernel's six (three VPMULUDQ, three
//     VPADDQ), so avx512-vpmuludq is never the automatic choice (bench/
//     RESULTS.md, "Ring GEMM kernels", has the counts).
//   - avx2-vpmulld without AVX-512 F+DQ but with AVX2: two multiplies and
//     two adds per four products (VPMULUDQ and VPMULLD), against scalar
//     IMUL's one product per cycle at best.
//   - arm64-madd on arm64: one MADD per product, a 4×4 tile in registers.
//   - generic otherwise.
func autoKernelName(c cpuInfo) string {
	amd := c.vendor == "AuthenticAMD" || c.vendor == "HygonGenuine"
	var want []string
	if !amd {
		want = append(want, "avx512-ifma")
	}
	want = append(want, "avx512-vpmullq", "avx2-vpmulld", "arm64-madd", "generic")
	for _, name := range want {
		if k, ok := findRingKernel(name); ok && k.runs(c) {
			return name
		}
	}
	return "generic"
}

// findRingKernel returns the kernel compiled in under name.
func findRingKernel(name string) (ringKernel, bool) {
	for _, k := range ringKernelTable {
		if k.impl.name == name {
			return k, true
		}
	}
	return ringKernel{}, false
}

// ringKernelNames lists the kernels compiled in that c can run.
func ringKernelNames(c cpuInfo) []string {
	var names []string
	for _, k := range ringKernelTable {
		if k.runs(c) {
			names = append(names, k.impl.name)
		}
	}
	return names
}

// resolveRingKernel returns the kernel for the value env of RingKernelEnv on
// CPU c: the named one, or the automatic choice when env is empty or
// "auto". A name that is not compiled in or that c cannot run is an error,
// returned with the automatic choice.
func resolveRingKernel(env string, c cpuInfo) (*gemmImpl, error) {
	auto, _ := findRingKernel(autoKernelName(c))
	name := strings.ToLower(strings.TrimSpace(env))
	if name == "" || name == "auto" {
		return auto.impl, nil
	}
	k, ok := findRingKernel(name)
	if !ok {
		var all []string
		for _, k := range ringKernelTable {
			all = append(all, k.impl.name)
		}
		return auto.impl, fmt.Errorf("share: %s=%q: no such ring GEMM kernel (have auto, %s)", RingKernelEnv, env, strings.Join(all, ", "))
	}
	if !k.runs(c) {
		return auto.impl, fmt.Errorf("share: %s=%q: this CPU (%v) cannot run that kernel (it can run %s)", RingKernelEnv, env, c, strings.Join(ringKernelNames(c), ", "))
	}
	return k.impl, nil
}

var (
	// thisCPU describes the CPU this process runs on (set by init).
	thisCPU cpuInfo
	// activeImpl is the kernel every product runs (set by init).
	activeImpl atomic.Pointer[gemmImpl]
	// ringKernelErr is the error of resolving RingKernelEnv, if any.
	ringKernelErr error
	// ringKernelLog logs ringKernelErr once, at the first product.
	ringKernelLog sync.Once
)

func init() {
	thisCPU = detectCPU()
	impl, err := resolveRingKernel(os.Getenv(RingKernelEnv), thisCPU)
	activeImpl.Store(impl)
	ringKernelErr = err
}

// activeKernel returns the kernel every product runs, logging a rejected
// RingKernelEnv the first time.
func activeKernel() *gemmImpl {
	if ringKernelErr != nil {
		ringKernelLog.Do(func() {
			log.Printf("%v; ring products outside the GEMM backend use %s, and the cpu GEMM backend refuses to open", ringKernelErr, activeImpl.Load().name)
		})
	}
	return activeImpl.Load()
}

// RingKernel returns the name of the micro-kernel the CPU ring GEMM runs in
// this process ("avx512-vpmullq", "avx512-ifma", "avx512-vpmuludq",
// "avx2-vpmulld", "arm64-madd" or "generic"), for logs and benchmark
// reports: the same product takes different times with different kernels
// (the results are bit-identical).
func RingKernel() string { return activeImpl.Load().name }

// RingKernels returns the names of the ring GEMM kernels this CPU can run,
// the values RingKernelEnv accepts besides "auto".
func RingKernels() []string { return slices.Clone(ringKernelNames(thisCPU)) }

// RingKernelCPU describes the CPU as the kernel choice saw it: CPUID vendor,
// family and model, AVX2, and its AVX-512 subsets.
func RingKernelCPU() string { return thisCPU.String() }

// setRingKernel makes the kernel called name ("" or "auto": the automatic
// choice) the one every product runs, for tests and benchmarks, and returns a
// function that restores the previous one.
func setRingKernel(name string) (restore func(), err error) {
	impl, err := resolveRingKernel(name, thisCPU)
	if err != nil {
		return nil, err
	}
	prev := activeImpl.Swap(impl)
	return func() { activeImpl.Store(prev) }, nil
}

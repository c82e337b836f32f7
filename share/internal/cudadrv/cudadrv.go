//go:build cuda

package cudadrv

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <cuda.h>

static CUresult sfInitResult = CUDA_ERROR_NOT_INITIALIZED;
static int sfInitCalled = 0;

// cuInit stands in for the driver's. gorgonia.org/cu calls cuInit in its
// package initialisation and exits the process when it fails (no device, no
// driver), before any code of this program runs. This definition, linked
// into the executable, takes precedence over libcuda's: it calls the real
// cuInit, records its result for the cuda backend to report as an error, and
// returns success so that the process lives on and falls back to the CPU.
// The cuda backend makes no other driver call unless the real cuInit
// succeeded.
CUresult CUDAAPI cuInit(unsigned int flags) {
	CUresult (*real)(unsigned int) = (CUresult (*)(unsigned int))dlsym(RTLD_NEXT, "cuInit");
	CUresult r = real ? real(flags) : CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
	if (!sfInitCalled || r == CUDA_SUCCESS) {
		sfInitResult = r;
	}
	sfInitCalled = 1;
	return CUDA_SUCCESS;
}

// sfCUDAInit returns the real cuInit's result (calling it if nobody did).
static CUresult sfCUDAInit(void) {
	if (!sfInitCalled) {
		cuInit(0);
	}
	return sfInitResult;
}

// sfErrorText writes the driver's name and description of r.
static void sfErrorText(CUresult r, const char **name, const char **text) {
	if (cuGetErrorName(r, name) != CUDA_SUCCESS) {
		*name = "CUDA_ERROR_UNKNOWN_CODE";
	}
	if (cuGetErrorString(r, text) != CUDA_SUCCESS) {
		*text = "unknown error code";
	}
}

// sfHostAlloc allocates page-locked host memory visible to every context.
static CUresult sfHostAlloc(void **p, size_t bytes) {
	return cuMemHostAlloc(p, bytes, CU_MEMHOSTALLOC_PORTABLE);
}

// sfDevicePointer returns the device address p as a double pointer: the
// form cuBLAS takes through gorgonia.org/cu/blas.
static double *sfDevicePointer(uintptr_t p) { return (double *)p; }
*/
import "C"

import (
	"fmt"
	"unsafe"

	cu "gorgonia.org/cu"
)

// resultError describes a CUDA driver result code.
func resultError(r C.CUresult) error {
	var name, text *C.char
	C.sfErrorText(r, &name, &text)
	return fmt.Errorf("%s (%d): %s", C.GoString(name), int(r), C.GoString(text))
}

// InitError returns nil when the CUDA driver initialised (the real cuInit
// succeeded), else the driver's error, e.g. CUDA_ERROR_NO_DEVICE.
func InitError() error {
	if r := C.sfCUDAInit(); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuInit: %w", resultError(r))
	}
	return nil
}

// Pinned is a page-locked host buffer of float64s: copies between it and the
// device run asynchronously, at full bus speed.
type Pinned struct {
	// P is the buffer's address, for cu.MemcpyHtoDAsync and friends.
	P unsafe.Pointer
	// F is the buffer as a slice.
	F []float64
}

// AllocPinned allocates n page-locked float64s; a context must be current
// on the calling thread.
func AllocPinned(n int) (Pinned, error) {
	var p unsafe.Pointer
	if r := C.sfHostAlloc(&p, C.size_t(8*n)); r != C.CUDA_SUCCESS {
		return Pinned{}, fmt.Errorf("pinned host buffer of %d bytes: %w", 8*n, resultError(r))
	}
	return Pinned{P: p, F: unsafe.Slice((*float64)(p), n)}, nil
}

// Free releases the buffer (a no-op on the zero value).
func (b *Pinned) Free() error {
	if b.P == nil {
		return nil
	}
	err := cu.MemFreeHost(b.P)
	*b = Pinned{}
	return err
}

// DeviceFloats views n float64s of device memory at p as a slice, the type
// gorgonia.org/cu/blas takes; it passes &s[0] to cuBLAS and never reads or
// writes the slice from Go, and neither may the caller.
func DeviceFloats(p cu.DevicePtr, n int) []float64 {
	return unsafe.Slice((*float64)(unsafe.Pointer(C.sfDevicePointer(C.uintptr_t(p)))), max(n, 1))
}

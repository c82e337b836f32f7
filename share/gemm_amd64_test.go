//go:build !purego

package share

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestAVX512Selected checks that the assembly kernel is installed exactly
// when the CPU has AVX-512 F and DQ.
func TestAVX512Selected(t *testing.T) {
	want := cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ
	if got := gemmKernel == avx512Kernel; got != want {
		t.Fatalf("AVX-512 kernel installed: %v, CPU has AVX-512 F+DQ: %v", got, want)
	}
	if !want {
		t.Skip("CPU lacks AVX-512 F+DQ: the assembly kernel is not tested here")
	}
}

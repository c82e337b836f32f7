//go:build !purego

package share

import (
	"os"
	"testing"
)

// TestARM64KernelSelected checks that arm64 builds choose arm64-madd
// automatically (unless RingKernelEnv forces a kernel), on any arm64 CPU
// and under qemu-user (TestARM64KernelUnderQEMU).
func TestARM64KernelSelected(t *testing.T) {
	if env := os.Getenv(RingKernelEnv); env != "" && env != "auto" {
		t.Skipf("%s=%s forces the kernel", RingKernelEnv, env)
	}
	if got := RingKernel(); got != "arm64-madd" {
		t.Fatalf("kernel %s installed on arm64, want arm64-madd", got)
	}
	if got := autoKernelName(cpuInfo{}); got != "arm64-madd" {
		t.Fatalf("automatic choice %s on arm64, want arm64-madd", got)
	}
}

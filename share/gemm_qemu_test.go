package share

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestARM64KernelUnderQEMU cross-compiles this package's tests for arm64
// and runs the kernel tests under qemu-user (Debian's qemu-user-static),
// so the arm64 assembly kernel is checked bit-exact against the naive
// product on an amd64 host: every depth and edge word of TestMicroKernels,
// the blocked products of TestGEMMKernels, the public products, and the
// automatic choice. It skips where qemu-aarch64 is not installed, on arm64
// itself (the tests run natively there) and with -short (a cold cross
// build compiles the standard library for arm64: about 40 CPU-seconds).
func TestARM64KernelUnderQEMU(t *testing.T) {
	if runtime.GOARCH == "arm64" {
		t.Skip("native arm64: the kernel tests run directly")
	}
	if testing.Short() {
		t.Skip("-short: no cross build")
	}
	var qemu string
	for _, name := range []string{"qemu-aarch64-static", "qemu-aarch64"} {
		if p, err := exec.LookPath(name); err == nil {
			qemu = p
			break
		}
	}
	if qemu == "" {
		t.Skip("qemu-aarch64 not installed (apt-get install qemu-user-static)")
	}
	bin := filepath.Join(t.TempDir(), "share-arm64.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".") // go test puts its GOROOT/bin first on PATH
	build.Env = append(os.Environ(), "GOARCH=arm64", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("cross-compiling the tests for arm64: %v\n%s", err, out)
	}
	run := exec.Command(qemu, bin, "-test.v", "-test.run",
		"^(TestMicroKernels|TestGEMMKernels|TestRingKernelSelectorPublicAPI|TestRingKernelPackedKeepsItsKernel|TestARM64KernelSelected)$")
	run.Env = append(os.Environ(), RingKernelEnv+"=")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("arm64 kernel tests under %s: %v\n%s", qemu, err, tail(out, 4000))
	}
	for _, want := range []string{
		"--- PASS: TestMicroKernels/arm64-madd/kc600/ones",
		"--- PASS: TestGEMMKernels/arm64-madd/",
		"--- PASS: TestRingKernelSelectorPublicAPI/arm64-madd",
		"--- PASS: TestARM64KernelSelected",
	} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("arm64 run under qemu lacks %q\n%s", want, tail(out, 4000))
		}
	}
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

package bench

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestCurrentMachineNamesRingKernel checks that the CPU every report names
// carries the ring GEMM kernel the process runs.
func TestCurrentMachineNamesRingKernel(t *testing.T) {
	m := CurrentMachine()
	if want := ", ring kernel " + share.RingKernel(); !strings.HasSuffix(m.CPU, want) {
		t.Fatalf("CPU %q does not end with %q", m.CPU, want)
	}
}

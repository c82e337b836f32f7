package bench

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/share"
)

// TestCurrentMachineNamesRingKernel checks that the CPU every report names
// carries the ring GEMM kernel and the HE kernel the process runs.
func TestCurrentMachineNamesRingKernel(t *testing.T) {
	m := CurrentMachine()
	if want := ", ring kernel " + share.RingKernel() + ", HE kernel " + he.MacKernel(); !strings.HasSuffix(m.CPU, want) {
		t.Fatalf("CPU %q does not end with %q", m.CPU, want)
	}
}

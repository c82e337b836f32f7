package peer

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/selectformer/selectformer/beaver/source"
)

// TestDealerFreeMemoryLimit: a party of a dealer-free source keeps the soft
// memory limit at DealerFreeMemoryTarget while its source is open (issue
// 38: a data owner of -provider he stayed under 4 GB with it, 8.6 GB
// without), and closing the source restores the limit before; a dealer
// source leaves the limit alone.
func TestDealerFreeMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(math.MaxInt64) // no limit, as a process starts
	defer debug.SetMemoryLimit(before)
	before = math.MaxInt64
	for _, name := range source.Names() {
		src, _ := source.ByName(name)
		c := limitMemory(src, nil)
		got := debug.SetMemoryLimit(-1)
		switch {
		case src.DealerFree && (got < DealerFreeMemoryTarget || got == before):
			t.Errorf("-provider %s: soft memory limit %d, want the live heap's or %d", name, got, int64(DealerFreeMemoryTarget))
		case !src.DealerFree && got != before:
			t.Errorf("-provider %s (with a dealer): soft memory limit changed to %d", name, got)
		}
		if c != nil {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("-provider %s: the limit after closing is %d, want %d", name, got, before)
		}
	}
}

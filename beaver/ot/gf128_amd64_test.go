//go:build !purego

package ot

import "testing"

// setPCLMUL switches the assembly path of gfSum.mulAdd for a benchmark.
func setPCLMUL(tb testing.TB, on bool) {
	old := usePCLMUL
	usePCLMUL = on && old
	tb.Cleanup(func() { usePCLMUL = old })
}

//go:build !purego

package ot

import "testing"

func setUseAESNI(tb testing.TB, on bool) {
	old := useAESNI
	useAESNI = on && old
	tb.Cleanup(func() { useAESNI = old })
}

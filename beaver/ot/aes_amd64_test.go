//go:build !purego

package ot

import "testing"

func setUseAESNI(tb testing.TB, on bool) {
	old := useAESNI
	useAESNI = on && old
	tb.Cleanup(func() { useAESNI = old })
}

func setUseVAES512(tb testing.TB, on bool) {
	old := useVAES512
	useVAES512 = on && old
	tb.Cleanup(func() { useVAES512 = old })
}

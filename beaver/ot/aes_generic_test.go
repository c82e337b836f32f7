//go:build !amd64 || purego

package ot

import "testing"

func setUseAESNI(tb testing.TB, on bool) {}

func setUseVAES512(tb testing.TB, on bool) {}

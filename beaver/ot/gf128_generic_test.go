//go:build !amd64 || purego

package ot

import "testing"

func setPCLMUL(tb testing.TB, on bool) {}

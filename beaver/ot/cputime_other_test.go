//go:build !linux

package ot

// threadCPUSeconds reports no per-thread CPU clock off Linux.
func threadCPUSeconds() (float64, bool) { return 0, false }

// processCPUSeconds reports no process CPU clock off Linux.
func processCPUSeconds() (float64, bool) { return 0, false }

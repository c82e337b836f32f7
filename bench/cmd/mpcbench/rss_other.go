//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// peakRSS is only implemented on Linux.
func peakRSS() (uint64, error) {
	return 0, errors.New("peak RSS is only measured on Linux")
}

// setParentDeath is a no-op off Linux (the parent kills its children on
// failure).
func setParentDeath(*exec.Cmd) {}

// kernelCPU is only measured on Linux.
func kernelCPU() (seconds float64, minorFaults int64) { return 0, 0 }

//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"syscall"
)

// peakRSS returns the process's peak resident set size in bytes.
func peakRSS() (uint64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return uint64(ru.Maxrss) * 1024, nil // KiB on Linux
}

// setParentDeath makes the child die with the parent.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// startPinned starts cmd; pinning it to CPUs needs Linux.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) > 0 {
		return errors.New("pinning a process to CPUs is only done on Linux")
	}
	return cmd.Start()
}

// hostCPUs is only known on Linux.
func hostCPUs() ([]int, error) {
	return nil, errors.New("the CPUs of this host are only read on Linux (--two-hosts)")
}

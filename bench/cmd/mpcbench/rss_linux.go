//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// peakRSS returns the process's peak resident set size in bytes: VmHWM of
// /proc/self/status, the high-water mark of this program's own address
// space. (getrusage's ru_maxrss would not do for a child: Linux carries the
// parent's maximum across fork and exec.)
func peakRSS() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("peak RSS: VmHWM %q: %w", v, err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("peak RSS: %w", err)
	}
	return 0, fmt.Errorf("peak RSS: no VmHWM in /proc/self/status")
}

// setParentDeath makes the child die with the parent.
func setParentDeath(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// kernelCPU returns the system CPU seconds this process has used and its
// minor page faults (getrusage): under a hypervisor a fault of a fresh
// page can cost several microseconds, and a heap that churns through
// pages returned to the OS pays it for every page.
func kernelCPU() (seconds float64, minorFaults int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return float64(ru.Stime.Nano()) / 1e9, ru.Minflt
}

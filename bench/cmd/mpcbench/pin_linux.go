//go:build linux

package main

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// startPinned starts cmd on the CPUs cpus (all of this process's when
// empty). A child inherits the CPU affinity of the thread that forks it, so
// a locked thread sets the mask, starts cmd and restores its own mask
// before it goes back to the runtime. The thread must outlive the call: a
// child asks for SIGKILL when the thread that forked it exits
// (setParentDeath), so a thread that failed to restore its mask kills the
// child too and reports the failure. The child's Go runtime sizes
// GOMAXPROCS by its mask.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		var was, set unix.CPUSet
		if err := unix.SchedGetaffinity(0, &was); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("the CPUs of this thread: %w", err)
			return
		}
		for _, c := range cpus {
			set.Set(c)
		}
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("pin to CPUs %v: %w", cpus, err)
			return
		}
		err := cmd.Start()
		if rerr := unix.SchedSetaffinity(0, &was); rerr != nil {
			// Still locked: the thread ends with this goroutine.
			if err == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
			errc <- fmt.Errorf("restore this thread's CPUs after starting a pinned process: %w", rerr)
			return
		}
		runtime.UnlockOSThread()
		errc <- err
	}()
	return <-errc
}

// hostCPUs returns the CPUs this process may run on, ascending.
func hostCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("the CPUs this process may run on: %w", err)
	}
	var cpus []int
	for c := 0; len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

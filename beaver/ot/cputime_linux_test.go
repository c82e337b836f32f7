package ot

import "golang.org/x/sys/unix"

// threadCPUSeconds returns the CPU time the calling OS thread has used: a
// benchmark locked to its thread divides its work by it for a per-core rate
// that other processes sharing the cores do not lower.
func threadCPUSeconds() (float64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9, true
}

// processCPUSeconds returns the CPU time the whole process has used (user
// and system, every thread): for a benchmark whose work spans goroutines,
// a rate that other processes sharing the cores do not lower.
func processCPUSeconds() (float64, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6, true
}

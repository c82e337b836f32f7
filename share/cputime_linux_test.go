package share

import "golang.org/x/sys/unix"

// threadCPUSeconds returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID): a benchmark locked to its thread divides work
// by it to get a per-core rate that time shared with other processes does
// not lower.
func threadCPUSeconds() (float64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9, true
}

// processCPUSeconds returns the CPU time (user + system) of the whole
// process: work spread over every core divided by it is a rate per core.
func processCPUSeconds() (float64, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	sec := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime), true
}

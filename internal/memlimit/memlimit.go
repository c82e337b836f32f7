// Package memlimit keeps a process's Go heap near a memory target: a soft
// limit (runtime/debug.SetMemoryLimit) that follows the live heap, so that
// the garbage collector's slack stays small when the live heap is large
// (a dealer-free party's prepared encryptions, GBs that live a whole
// phase) without making it run without end when the live heap outgrows
// the target.
package memlimit

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// Limit returns the soft limit for a live heap of live bytes and a target
// of target bytes: the target, or live plus a thirty-second once live·33/32
// exceeds it (the collector then runs about every live/32 bytes
// allocated, instead of thrashing at a limit below the live heap). A
// thirty-second is cheap where the live heap is mostly large pointer-free
// arrays, a party's ciphertexts and shares, whose contents marking skips
// (issue 38: the collector took under 1% of a dealer-free party 1's CPU
// with an eighth; with a sixteenth a data owner's phase 3 peaked at 4.03
// GB of RSS at sst2's defaults).
func Limit(target, live int64) int64 {
	return max(target, live+live/32)
}

// Start sets the process's soft memory limit to Limit(target, live) and
// keeps it so, reading the live heap every interval (250 ms when ≤ 0: a
// party's uploads can add GBs of live heap within seconds),
// until stop is called; stop restores the limit in force before. With
// GOMEMLIMIT set in the environment, or a target ≤ 0, it does nothing: the
// user's limit stands.
func Start(target int64, interval time.Duration) (stop func()) {
	if target <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	before := debug.SetMemoryLimit(target)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				live := min(s[0].Value.Uint64(), math.MaxInt64/2)
				debug.SetMemoryLimit(Limit(target, int64(live)))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-finished
			debug.SetMemoryLimit(before)
		})
	}
}

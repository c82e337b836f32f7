package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/selectformer/selectformer/bench"
)

// heapProfileEnv names the environment variable of a hidden diagnostic of
// select --processes: set to a directory, each party's process writes
// there, per phase, a pprof heap profile taken when its Go heap in use
// reached a new high (heap-ROLE-phaseN.pprof, rewritten at each new high
// of ≥ 5%), a line per phase with its peak RSS and heap in use
// (mem-ROLE.txt), and a CPU profile of the whole run (cpu-ROLE.pprof).
const heapProfileEnv = "MPCBENCH_HEAPPROFILE"

// heapProfiler writes the profiles of heapProfileEnv.
type heapProfiler struct {
	dir, role string
	mu        sync.Mutex
	phase     int
	best      uint64   // heap in use of the phase's last profile
	maxRSS    uint64   // the largest phase's peak RSS
	cpu       *os.File // the CPU profile, nil if it could not start
	stop      chan struct{}
	done      chan struct{}
}

// startHeapProfiler starts the diagnostic when heapProfileEnv is set; it
// returns nil otherwise.
func startHeapProfiler(role string) *heapProfiler {
	dir := os.Getenv(heapProfileEnv)
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil
	}
	h := &heapProfiler{dir: dir, role: role, stop: make(chan struct{}), done: make(chan struct{})}
	if f, err := os.Create(filepath.Join(dir, "cpu-"+role+".pprof")); err == nil {
		if pprof.StartCPUProfile(f) == nil {
			h.cpu = f
		} else {
			f.Close()
		}
	}
	go func() {
		defer close(h.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.sample()
			}
		}
	}()
	return h
}

func (h *heapProfiler) sample() {
	inUse := bench.HeapInUse()
	h.mu.Lock()
	defer h.mu.Unlock()
	if inUse < h.best+h.best/20 || inUse < 64<<20 {
		return
	}
	h.best = inUse
	f, err := os.Create(filepath.Join(h.dir, fmt.Sprintf("heap-%s-phase%d.pprof", h.role, h.phase+1)))
	if err != nil {
		return
	}
	defer f.Close()
	runtime.GC() // the profile's in-use figures are those of the last GC
	_ = pprof.Lookup("heap").WriteTo(f, 0)
}

// setPhase ends the current phase's record (its peak RSS, then reset: the
// kernel's clear_refs 5) and starts phase i's.
func (h *heapProfiler) setPhase(i int) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if i <= h.phase {
		return
	}
	h.record()
	h.phase, h.best = i, 0
}

// record appends the phase's peak RSS to mem-ROLE.txt and resets the
// kernel's high-water mark.
func (h *heapProfiler) record() {
	rss, _ := peakRSS()
	h.maxRSS = max(h.maxRSS, rss)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if f, err := os.OpenFile(filepath.Join(h.dir, "mem-"+h.role+".txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		kernel, faults := kernelCPU()
		fmt.Fprintf(f, "%s phase %d: peak RSS %.2f GB, last profiled heap in use %.2f GB, now heap in use %.2f GB, sys %.2f GB, CPU %.1f s (kernel %.1f s, %d minor page faults), %d GCs, %s\n",
			h.role, h.phase+1, float64(rss)/1e9, float64(h.best)/1e9, float64(ms.HeapInuse)/1e9, float64(ms.Sys)/1e9, bench.ProcessCPUSeconds(),
			kernel, faults, ms.NumGC, time.Now().Format(time.TimeOnly))
		f.Close()
	}
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// finish records the last phase, stops, and returns the peak RSS of the
// whole run (the largest phase's: each phase reset the kernel's mark).
func (h *heapProfiler) finish() uint64 {
	if h == nil {
		return 0
	}
	close(h.stop)
	<-h.done
	if h.cpu != nil {
		pprof.StopCPUProfile()
		h.cpu.Close()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.record()
	return h.maxRSS
}

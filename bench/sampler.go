package bench

import (
	"runtime/metrics"
	"sync"
	"time"
)

// heapInUseMetrics are the runtime metrics whose sum is
// runtime.MemStats.HeapInuse: the bytes of in-use heap spans.
var heapInUseMetrics = [...]string{"/memory/classes/heap/objects:bytes", "/memory/classes/heap/unused:bytes"}

// HeapInUse returns the bytes of this process's in-use heap spans
// (runtime.MemStats.HeapInuse) from runtime/metrics, which, unlike
// runtime.ReadMemStats, does not stop the world: a sampler that read
// MemStats every 20 ms stopped a dealer-free party's every goroutine 50
// times a second, and the preemptions (runtime.asyncPreempt) were 4% of
// the data owner's profile, a cost the peer binaries do not have.
func HeapInUse() uint64 {
	var s [len(heapInUseMetrics)]metrics.Sample
	for i, name := range heapInUseMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	var sum uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			sum += v.Value.Uint64()
		}
	}
	return sum
}

// HeapSampler records the peak Go heap in use (HeapInUse) of this
// process, sampled periodically, per phase: SetPhase moves the
// samples that follow to a phase's bucket. It is safe for concurrent use.
type HeapSampler struct {
	mu    sync.Mutex
	phase int
	peaks []uint64
	stop  chan struct{}
	done  chan struct{}
}

// StartHeapSampler starts sampling every interval (20 ms when ≤ 0) into
// phase 0's bucket.
func StartHeapSampler(interval time.Duration) *HeapSampler {
	if interval <= 0 {
		interval = 20 * time.Millisecond
	}
	h := &HeapSampler{peaks: []uint64{0}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			h.sample()
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *HeapSampler) sample() {
	inUse := HeapInUse()
	h.mu.Lock()
	h.peaks[h.phase] = max(h.peaks[h.phase], inUse)
	h.mu.Unlock()
}

// SetPhase sends the following samples to phase i's bucket; phases only
// move forward (a smaller i is ignored), so that both parties of one process
// may report their phase.
func (h *HeapSampler) SetPhase(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i <= h.phase {
		return
	}
	for len(h.peaks) <= i {
		h.peaks = append(h.peaks, 0)
	}
	h.phase = i
}

// Stop stops sampling (after a last sample) and returns each phase's peak;
// it may be called once.
func (h *HeapSampler) Stop() []uint64 {
	close(h.stop)
	<-h.done
	h.sample()
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint64(nil), h.peaks...)
}

// Peak returns the largest of peaks.
func Peak(peaks []uint64) uint64 {
	var m uint64
	for _, p := range peaks {
		m = max(m, p)
	}
	return m
}

package purchase

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkCommit commits to 10^6 candidates of 784 bytes (an MNIST image)
// and of 128 bytes (a short text), and reports the CPU time of a
// commitment (cpu-s/op, all cores: on a loaded machine the wall time says
// little), the heap the commitment keeps (kept-MB: its levels, 32 bytes a
// candidate) and all it allocated while it was built (alloc-MB, a bound on
// its peak). The pool itself is not counted: it is the data owner's
// already.
//
//	go test ./selection/purchase -run XXX -bench Commit -benchtime 3x
func BenchmarkCommit(b *testing.B) {
	for _, size := range []int{784, 128} {
		b.Run(fmt.Sprintf("n=1e6/bytes=%d", size), func(b *testing.B) {
			const n = 1_000_000
			items := make(ByteItems, n)
			backing := make([]byte, n*size)
			for i := range items {
				items[i] = backing[i*size : (i+1)*size]
				items[i][0], items[i][1], items[i][2] = byte(i), byte(i>>8), byte(i>>16)
			}
			b.SetBytes(int64(n * size))
			var kept, peak uint64
			var cpu float64
			runs := 0
			for b.Loop() {
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				c0 := cpuSeconds()
				t, err := Commit(items, Seed{1})
				if err != nil {
					b.Fatal(err)
				}
				cpu += cpuSeconds() - c0
				runs++
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				peak = max(peak, after.TotalAlloc-before.TotalAlloc)
				runtime.GC()
				runtime.ReadMemStats(&after)
				kept = max(kept, after.HeapAlloc-before.HeapAlloc)
				runtime.KeepAlive(t)
			}
			b.ReportMetric(cpu/float64(runs), "cpu-s/op")
			b.ReportMetric(float64(kept)/1e6, "kept-MB")
			b.ReportMetric(float64(peak)/1e6, "alloc-MB")
		})
	}
}

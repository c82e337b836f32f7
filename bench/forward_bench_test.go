package bench

import (
	"context"
	"fmt"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// BenchmarkForward times the steady state of the secure forward of a
// 1-layer, 12-head DistilBERT proxy (d = 16, seq 128) with both parties and
// the dealer in this process: the weights are shared and one warm-up batch
// runs before the timer starts, then every iteration is one Forward of a
// whole batch. Besides ns/op (per batch) and -benchmem's allocations (both
// parties and the dealer), it reports
//
//	ns/candidate  wall time per candidate
//	cores         process CPU time (user + system) / wall time: how many of
//	              the machine's cores the run kept busy
//	gc-%          the Go runtime's estimate of the CPU spent in the garbage
//	              collector, in percent of all CPU time
//	B/candidate   bytes both parties sent per candidate
//	dealerB/cand  bytes of dealer material both parties received per candidate
//
// Run: go test -run '^$' -bench Forward -benchmem -benchtime 3x ./bench/
func BenchmarkForward(b *testing.B) {
	for _, batch := range []int{16, 64} {
		cfg := ForwardConfig{Shape: "distilbert", Layers: 1, Heads: 12, MLPHidden: 16, Seq: 128, Batch: batch, Seed: 1}
		b.Run(fmt.Sprintf("distilbert-L1-h12-d16/batch=%d", batch), func(b *testing.B) { benchForward(b, cfg) })
	}
}

// cpuSample is the process's CPU time and the runtime's GC and total CPU
// estimates at one instant.
type cpuSample struct {
	wall      time.Time
	rusage    time.Duration
	gc, total float64
}

func sampleCPU() cpuSample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	ms := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(ms)
	return cpuSample{
		wall:   time.Now(),
		rusage: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		gc:     ms[0].Value.Float64(),
		total:  ms[1].Value.Float64(),
	}
}

func benchForward(b *testing.B, cfg ForwardConfig) {
	a, err := forwardArch(cfg)
	if err != nil {
		b.Fatal(err)
	}
	nw, err := secure.RandomNet(a, cfg.Seed+1)
	if err != nil {
		b.Fatal(err)
	}
	xs, mask := forwardInputs(a, cfg)
	var start cpuSample
	r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (Cost, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return Cost{}, err
		}
		var net *secure.Net
		in := &secure.Batch{X: xs, Mask: mask}
		if p.ID == 0 {
			net, in = nw, nil
		}
		prep, err := secure.Prepare(ctx, s, a, net, cfg.Options)
		if err != nil {
			return Cost{}, err
		}
		if _, err := prep.Forward(ctx, s, cfg.Batch, in); err != nil { // warm-up
			return Cost{}, err
		}
		if err := p.Barrier(ctx); err != nil {
			return Cost{}, err
		}
		if p.ID == 0 {
			b.ResetTimer()
			start = sampleCPU()
		}
		m := NewMeter(s)
		for range b.N {
			if _, err := prep.Forward(ctx, s, cfg.Batch, in); err != nil {
				return Cost{}, err
			}
		}
		return m.Since(), nil
	})
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	end := sampleCPU()
	n := float64(b.N * cfg.Batch)
	wall := end.wall.Sub(start.wall)
	b.ReportMetric(float64(wall.Nanoseconds())/n, "ns/candidate")
	b.ReportMetric(float64(end.rusage-start.rusage)/float64(wall), "cores")
	if d := end.total - start.total; d > 0 {
		b.ReportMetric(100*(end.gc-start.gc)/d, "gc-%")
	}
	sent := r.Out[0].Stream.BytesSent + r.Out[1].Stream.BytesSent
	b.ReportMetric(float64(sent)/n, "B/candidate")
	dealer := r.Out[0].Dealer.BytesRecv + r.Out[1].Dealer.BytesRecv
	b.ReportMetric(float64(dealer)/n, "dealerB/cand")
}

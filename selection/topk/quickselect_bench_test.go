package topk

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// paperWAN is the emulated paper link of bench/RESULTS.md: 50 ms each way
// (a round costs 100 ms) and 100 MB/s.
const (
	paperWANRound     = 0.1
	paperWANBandwidth = 100e6
)

// topKRun is one secure TopK of n random values keeping k, measured on
// party 0.
type topKRun struct {
	st      Stats
	bytes   int64 // bytes party 0 sent during TopK
	seconds float64
}

// runTopK shares n random values from seed and runs TopK on them in
// process; the time covers TopK only (both parties start it together), the
// dealer's material included (it is made on demand).
func runTopK(tb testing.TB, n, k int, seed uint64) topKRun {
	tb.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = rng.Float64()*8 - 4
	}
	enc, err := share.DefaultFixedPoint.EncodeTensor(vals, n)
	if err != nil {
		tb.Fatal(err)
	}
	var out topKRun
	_, err = twoparty.Run(context.Background(), twoparty.Config{Seeds: [2]share.Seed{{1}, {2}}}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(5), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		x, err := shareFromDataOwner(s, enc, n)
		if err != nil {
			return struct{}{}, err
		}
		if err := p.Barrier(ctx); err != nil {
			return struct{}{}, err
		}
		c0, t0 := s.Stream().Stats(), time.Now()
		_, st, err := TopK(ctx, s, x, nil, k, share.NewPRG(share.Seed{byte(seed)}, "bench/pivots"))
		if err != nil {
			return struct{}{}, err
		}
		if p.ID == 0 {
			out = topKRun{st: st, bytes: s.Stream().Stats().Sub(c0).BytesSent, seconds: time.Since(t0).Seconds()}
		}
		return struct{}{}, nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkTopK measures TopK in process on the quickstart's two phases
// (500 → 200, 200 → 60) and on n = 1,000, 10,000 and 42,000 keeping 20%,
// and reports, per call: rounds, steps, comparisons per value, bytes party
// 0 sent, the in-process seconds, and the paper-WAN delay as rounds ×
// 100 ms (wan-latency-s) and with the bytes at 100 MB/s added
// (wan-model-s).
//
//	go test -run '^$' -bench TopK -benchtime 3x ./selection/topk/
func BenchmarkTopK(b *testing.B) {
	for _, c := range []struct{ n, k int }{{200, 60}, {500, 200}, {1000, 200}, {10000, 2000}, {42000, 8400}} {
		n := c.n
		b.Run(fmt.Sprintf("n=%d/k=%d", n, c.k), func(b *testing.B) {
			var sum topKRun
			for i := 0; i < b.N; i++ {
				r := runTopK(b, n, c.k, uint64(i))
				sum.st = sum.st.Add(r.st)
				sum.bytes += r.bytes
				sum.seconds += r.seconds
			}
			f := float64(b.N)
			b.ReportMetric(float64(sum.st.Rounds)/f, "rounds")
			b.ReportMetric(float64(sum.st.Steps)/f, "steps")
			b.ReportMetric(float64(sum.st.Comparisons)/f/float64(n), "cmp/n")
			b.ReportMetric(float64(sum.bytes)/f, "B-sent")
			b.ReportMetric(sum.seconds/f, "topk-s")
			b.ReportMetric(float64(sum.st.Rounds)/f*paperWANRound, "wan-latency-s")
			b.ReportMetric((float64(sum.st.Rounds)*paperWANRound+float64(sum.bytes)/paperWANBandwidth)/f, "wan-model-s")
		})
	}
}

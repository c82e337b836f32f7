package ot_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// BenchmarkDealerFreeForward estimates the dealer-free cost per candidate of
// the sst2-distilbert phase proxies ⟨1L,12H,d⟩ at seq 128: it records the
// correlated randomness one candidate's secure forward draws (dealer mode,
// bench.RunForwardParty, batch 1), then runs every distinct request kind and
// shape through a pair of ot.Providers on a scaled-down sample (at most 2
// rows of a weight or matrix product, 65,536 elements of an elementwise
// kind; the generators' traffic is linear in the scaled dimension) and
// scales bytes and seconds back up. Seconds are both parties' generation in
// this process (their sum of CPU on the machine's cores, not a two-host wall
// time). Run with -bench DealerFree -benchtime 1x.
func BenchmarkDealerFreeForward(b *testing.B) {
	for _, d := range []int{2, 8, 16} {
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			for range b.N {
				dealerFreeForward(b, d)
			}
		})
	}
}

// recorder records the requests drawn through it (weight masks are no
// requests: they go to the Provider's WeightMask).
type recorder struct {
	beaver.Provider
	mu   sync.Mutex
	reqs []beaver.Request
}

// Unwrap implements beaver.Wrapper.
func (r *recorder) Unwrap() beaver.Provider { return r.Provider }

func (r *recorder) Material(ctx context.Context, q beaver.Request) (beaver.Material, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, q)
	r.mu.Unlock()
	return r.Provider.Material(ctx, q)
}

type kindCost struct {
	items          int
	dealer         int64 // dealer bytes to both parties (each kind's go to one)
	bytes0, bytes1 float64
	seconds        float64
}

func dealerFreeForward(b *testing.B, d int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	cfg := bench.ForwardConfig{Shape: "distilbert", Layers: 1, Heads: 12, MLPHidden: d, Seq: 128, Batch: 1, Seed: 1}
	var sched []beaver.Request
	var dealerTotal atomic.Int64 // both parties' dealer words
	_, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		rec := &recorder{Provider: p.Provider}
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), rec, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		o, err := bench.RunForwardParty(ctx, s, cfg)
		if err != nil {
			return struct{}{}, err
		}
		dealerTotal.Add(o.Forward.Dealer.BytesRecv + o.Prepare.Dealer.BytesRecv)
		if p.ID == 1 {
			sched = rec.reqs
		}
		return struct{}{}, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	// A pair of providers for the samples.
	var prov [2]*ot.Provider
	sid := beaver.SessionID{7}
	var provErr error
	done := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
			pr, err := ot.NewProvider(p.Conn, p.ID, ot.ProviderOptions{})
			if err == nil {
				err = pr.BindSession(ctx, sid)
			}
			if err != nil {
				provErr = err
			}
			prov[p.ID] = pr
			if err := p.Barrier(ctx); err != nil {
				return struct{}{}, err
			}
			if p.ID == 0 {
				close(done)
			}
			<-stop
			return struct{}{}, nil
		})
	}()
	<-done
	defer close(stop)
	if provErr != nil {
		b.Fatal(provErr)
	}
	type key struct {
		kind                 beaver.Kind
		batch, m, k, n, frac int
	}
	groups := map[key]int{}
	for _, r := range sched {
		groups[key{r.Kind, r.Batch, r.M, r.K, r.N, int(r.FracBits)}]++
	}
	costs := map[beaver.Kind]*kindCost{}
	for g, count := range groups {
		r := beaver.Request{Kind: g.kind, Batch: g.batch, M: g.m, K: g.k, N: g.n, FracBits: uint(g.frac), Stream: 3}
		if g.kind == beaver.KindWeightTriple || g.kind == beaver.KindWeightVectorTriple {
			r.WeightID = 1
		}
		sample, scale := scaled(r)
		s0, s1 := prov[0].Stats(), prov[1].Stats()
		t0 := time.Now()
		errs := make(chan error, 1)
		go func() { _, err := prov[1].Material(ctx, sample); errs <- err }()
		if _, err := prov[0].Material(ctx, sample); err != nil {
			b.Fatalf("%v: %v", sample, err)
		}
		if err := <-errs; err != nil {
			b.Fatalf("%v: %v", sample, err)
		}
		sec := time.Since(t0).Seconds()
		e0, e1 := prov[0].Stats(), prov[1].Stats()
		c := costs[g.kind]
		if c == nil {
			c = &kindCost{}
			costs[g.kind] = c
		}
		c.items += count
		c.dealer += int64(count) * 8 * int64(r.CorrectionWords(0)+r.CorrectionWords(1))
		c.bytes0 += float64(count) * scale * float64(e0.BytesSent-s0.BytesSent)
		c.bytes1 += float64(count) * scale * float64(e1.BytesSent-s1.BytesSent)
		c.seconds += float64(count) * scale * sec
	}
	kinds := make([]beaver.Kind, 0, len(costs))
	for k := range costs {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		return costs[kinds[i]].bytes0+costs[kinds[i]].bytes1 > costs[kinds[j]].bytes0+costs[kinds[j]].bytes1
	})
	var tb0, tb1, ts float64
	b.Logf("⟨1L,12H,d%d⟩ seq 128, one candidate: dealer sends the parties %d bytes of dealer words", d, dealerTotal.Load())
	for _, k := range kinds {
		c := costs[k]
		b.Logf("%-20v items %5d  dealer %10d B  OT P0 sent %14.0f B  P1 sent %14.0f B  %10.2f s", k, c.items, c.dealer, c.bytes0, c.bytes1, c.seconds)
		tb0, tb1, ts = tb0+c.bytes0, tb1+c.bytes1, ts+c.seconds
	}
	b.Logf("total OT: P0 sent %.3g B, P1 sent %.3g B, %.1f s", tb0, tb1, ts)
	b.ReportMetric(tb0+tb1, "OTbytes/candidate")
	b.ReportMetric(ts, "OTs/candidate")
	b.ReportMetric(float64(dealerTotal.Load()), "dealerbytes/candidate")
}

// scaled returns a sample of r whose cost times scale estimates r's.
func scaled(r beaver.Request) (beaver.Request, float64) {
	const rows, elems = 2, 1 << 16
	s := r
	switch r.Kind {
	case beaver.KindWeightTriple:
		// Traffic is linear in min(m, n) (the chooser's rows).
		if r.M <= r.N && r.M > rows {
			s.M = rows
			return s, float64(r.M) / rows
		}
		if r.N < r.M && r.N > rows {
			s.N = rows
			return s, float64(r.N) / rows
		}
	case beaver.KindMatTriple:
		scale := float64(r.Batch)
		s.Batch = 1
		if r.M <= r.N && r.M > rows {
			s.M = rows
			scale *= float64(r.M) / rows
		} else if r.N < r.M && r.N > rows {
			s.N = rows
			scale *= float64(r.N) / rows
		}
		return s, scale
	case beaver.KindRowBitTriple:
		// Traffic is linear in the rows' groups of 64 (one OT a row).
		if r.M > 64 {
			s.M = 64
			return s, float64(share.PackedWords(r.M))
		}
	case beaver.KindWeightVectorTriple:
		if r.M > rows {
			s.M = rows
			return s, float64(r.M) / rows
		}
	case beaver.KindAND, beaver.KindCrossAND:
		if r.N > elems/64 {
			s.N = elems / 64
			return s, float64(r.N) / float64(s.N)
		}
	default:
		if r.N > elems {
			s.N = elems
			return s, float64(r.N) / elems
		}
	}
	return s, 1
}

package bench

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// LocalConfig configures RunLocal; the zero value is usable.
type LocalConfig struct {
	// FixedPoint is the encoding (share.DefaultFixedPoint when zero).
	FixedPoint share.FixedPoint
	// Link, if set, emulates a link between the parties.
	Link *transport.Profile
	// Seeds, if non-zero, make the dealer deterministic.
	Seeds [2]share.Seed
	// Stream is the stream id of the sessions (1 when 0).
	Stream uint32
	// MeasureMemory samples the Go heap while f runs (see LocalRun.PeakHeap).
	MeasureMemory bool
	// Wrap, if set, wraps each party's provider before its session opens
	// (a counting or recording wrapper, say).
	Wrap func(party int, p beaver.Provider) beaver.Provider
}

// Cost is what one party observed over a span of a run: its stream's
// transport statistics and its dealer traffic.
type Cost struct {
	// Stream holds bytes sent/received and rounds on the party's stream.
	Stream transport.Stats
	// Dealer holds the dealer traffic of the party's provider.
	Dealer beaver.DealerStats
}

// Meter snapshots a session's costs; Since returns the cost since the snapshot.
type Meter struct{ m *twoparty.Meter }

// NewMeter starts measuring s.
func NewMeter(s *protocol.Session) *Meter { return &Meter{twoparty.NewMeter(s)} }

// Since returns the cost since NewMeter.
func (m *Meter) Since() Cost { return Cost(m.m.Since()) }

// LocalRun is the outcome of RunLocal.
type LocalRun[T any] struct {
	// Out holds each party's result.
	Out [2]T
	// Cost holds each party's cost while f ran (session setup excluded).
	Cost [2]Cost
	// Seconds is the wall time of the run (both parties concurrently,
	// session setup included).
	Seconds float64
	// PeakHeap is the largest Go heap in use sampled every 20 ms while f ran
	// (both parties and the dealer in one process), with
	// LocalConfig.MeasureMemory.
	PeakHeap uint64
}

// RunLocal runs f as party 0 and party 1 concurrently in this process: two
// sessions over a transport.Pipe (optionally link-emulated) and an in-process
// dealer. When one party fails, the other is cancelled and the error names
// the failing party first. Real deployments run each party in its own
// process over transport.Dial.
func RunLocal[T any](ctx context.Context, cfg LocalConfig, f func(ctx context.Context, s *protocol.Session) (T, error)) (*LocalRun[T], error) {
	if cfg.FixedPoint == (share.FixedPoint{}) {
		cfg.FixedPoint = share.DefaultFixedPoint
	}
	if cfg.Stream == 0 {
		cfg.Stream = 1
	}
	var sampler *HeapSampler
	if cfg.MeasureMemory {
		sampler = StartHeapSampler(0)
	}
	type out struct {
		v    T
		cost Cost
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Seeds: cfg.Seeds, Transport: transport.Options{Link: cfg.Link}},
		func(ctx context.Context, p *twoparty.Party) (out, error) {
			prov := p.Provider
			if cfg.Wrap != nil {
				prov = cfg.Wrap(p.ID, prov)
			}
			s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(cfg.Stream), prov, cfg.FixedPoint)
			if err != nil {
				return out{}, err
			}
			m := NewMeter(s)
			v, err := f(ctx, s)
			return out{v, m.Since()}, err
		})
	var peak uint64
	if sampler != nil {
		peak = Peak(sampler.Stop())
	}
	if err != nil {
		return nil, fmt.Errorf("bench: run local: %w", err)
	}
	res := &LocalRun[T]{Seconds: r.Seconds, PeakHeap: peak}
	for p := range 2 {
		res.Out[p], res.Cost[p] = r.Out[p].v, r.Out[p].cost
	}
	return res, nil
}

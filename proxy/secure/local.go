package secure

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// LocalConfig configures RunLocal.
type LocalConfig struct {
	// FixedPoint is the encoding (share.DefaultFixedPoint when zero).
	FixedPoint share.FixedPoint
	// Link, if set, emulates a link between the parties.
	Link *transport.Profile
	// Seeds, if non-zero, make the dealer deterministic.
	Seeds [2]share.Seed
	// Stream is the stream id (1 when 0).
	Stream uint32
	// MeasureMemory samples the Go heap while f runs (see LocalRun.PeakHeap).
	MeasureMemory bool
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
type Meter struct {
	s      *protocol.Session
	stream transport.Stats
	dealer beaver.DealerStats
}

// NewMeter starts measuring s.
func NewMeter(s *protocol.Session) *Meter {
	return &Meter{s: s, stream: s.Stream().Stats(), dealer: s.Provider().Stats()}
}

// Since returns the cost since NewMeter.
func (m *Meter) Since() Cost {
	d := m.s.Provider().Stats()
	return Cost{Stream: m.s.Stream().Stats().Sub(m.stream),
		Dealer: beaver.DealerStats{BytesRecv: d.BytesRecv - m.dealer.BytesRecv, BytesSent: d.BytesSent - m.dealer.BytesSent, Items: d.Items - m.dealer.Items}}
}

// LocalRun is the outcome of RunLocal.
type LocalRun[T any] struct {
	// Out holds each party's result.
	Out [2]T
	// Cost holds each party's cost while f ran (session setup excluded).
	Cost [2]Cost
	// Seconds is the wall time of f (both parties concurrently).
	Seconds float64
	// PeakHeap is the largest Go heap in use sampled while f ran (both parties
	// and the dealer in one process), with LocalConfig.MeasureMemory.
	PeakHeap uint64
}

// RunLocal runs f as party 0 and party 1 concurrently in this process: two
// sessions over a transport.Pipe (optionally link-emulated) and an in-process
// dealer. It is the harness of the tests and of `mpcbench forward`; real
// deployments run each party in its own process over transport.Dial.
func RunLocal[T any](ctx context.Context, cfg LocalConfig, f func(ctx context.Context, s *protocol.Session) (T, error)) (*LocalRun[T], error) {
	if cfg.FixedPoint == (share.FixedPoint{}) {
		cfg.FixedPoint = share.DefaultFixedPoint
	}
	if cfg.Stream == 0 {
		cfg.Stream = 1
	}
	var dealer *beaver.Dealer
	if cfg.Seeds != [2]share.Seed{} {
		dealer = beaver.NewDealerWithSeeds(cfg.Seeds[0], cfg.Seeds[1])
	} else {
		var err error
		if dealer, err = beaver.NewDealer(); err != nil {
			return nil, fmt.Errorf("secure: run local: %w", err)
		}
	}
	c0, c1 := transport.Pipe(transport.Options{Link: cfg.Link})
	defer c0.Close()
	defer c1.Close()
	conns := [2]*transport.Conn{c0, c1}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var peak atomic.Uint64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	if cfg.MeasureMemory {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			var ms runtime.MemStats
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for {
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
	}
	res := &LocalRun[T]{}
	var errs [2]error
	var wg sync.WaitGroup
	start := time.Now()
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if errs[p] != nil {
					cancel()
				}
			}()
			prov, err := dealer.Provider(p)
			if err != nil {
				errs[p] = err
				return
			}
			s, err := protocol.NewSession(ctx, p, conns[p].Stream(cfg.Stream), prov, cfg.FixedPoint)
			if err != nil {
				errs[p] = err
				return
			}
			m := NewMeter(s)
			res.Out[p], errs[p] = f(ctx, s)
			res.Cost[p] = m.Since()
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	close(stop)
	sampler.Wait()
	res.PeakHeap = peak.Load()
	// Report the cause: a party that failed first cancels the other, whose
	// error then only says so.
	for _, p := range []int{0, 1} {
		if errs[p] != nil && (!errors.Is(errs[p], context.Canceled) || errs[1-p] == nil) {
			return nil, fmt.Errorf("secure: party %d: %w", p, errs[p])
		}
	}
	for p, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("secure: party %d: %w", p, err)
		}
	}
	return res, nil
}

// Embed computes the data owner's public part of the forward pass: the
// frozen embeddings of m (token, position, type and embedding LayerNorm, or
// ViT's patch projection, class token and positions) of a batch, in
// evaluation mode, as a Batch for Forward. Text inputs must already be padded
// to one length; their Mask (nil = no padding) is carried over.
func Embed(m *model.Model, in model.Input) (*Batch, error) {
	if m == nil {
		return nil, fmt.Errorf("secure: embed with a nil model")
	}
	m.SetTraining(false)
	x, _, err := m.Embed(in)
	if err != nil {
		return nil, fmt.Errorf("secure: embed: %w", err)
	}
	return &Batch{X: x.Data, Mask: in.Mask}, nil
}

// Reveal opens shared fixed-point values to both parties (for tests and
// measurements: in selection, entropies are never revealed).
func Reveal(ctx context.Context, s *protocol.Session, x *share.Tensor) ([]float64, error) {
	v, err := s.Reveal(ctx, x)
	if err != nil {
		return nil, err
	}
	return s.FixedPoint().DecodeTensor(v), nil
}

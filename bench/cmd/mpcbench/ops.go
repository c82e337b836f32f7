package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// Scale selects the problem sizes: Full for the reported figures, Tiny for
// tests.
type Scale int

const (
	// Full is the reported size: n = 100000 elements, 128×768·768×768 matmuls,
	// 12×128×128 softmax.
	Full Scale = iota
	// Tiny is a small size for tests.
	Tiny
)

// Elems returns the element count of elementwise ops: 100000 or 256.
func (sc Scale) Elems() int { return sc.Pick(100_000, 256) }

// Pick returns full at Full scale and tiny at Tiny scale.
func (sc Scale) Pick(full, tiny int) int {
	if sc == Tiny {
		return tiny
	}
	return full
}

// Op is one benchmarked operation. Register ops from init functions with
// register; they are reported in the order of opOrder, then by name.
type Op struct {
	// Name is the op's name in the report, e.g. "mul".
	Name string
	// Shape returns the shape description and the number of elements or
	// outputs n at a scale.
	Shape func(sc Scale) (shape string, n int)
	// Prepare runs on each party's session before timing (input sharing,
	// weight sharing) and returns the online step to time.
	Prepare func(ctx context.Context, s *protocol.Session, sc Scale) (func(ctx context.Context) error, error)
}

var (
	registryMu sync.Mutex
	registry   = map[string]Op{}
)

// opOrder is the report order of the ops the spec names.
var opOrder = []string{"mul", "matmul", "matmul_weights", "trunc", "ltz", "relu", "trunc_relu", "b2a", "exp", "reciprocal", "inv_sqrt", "log", "softmax", "entropy"}

// register adds op to the registry; a duplicate or incomplete op panics at
// init time (a programming error).
func register(op Op) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if op.Name == "" || op.Shape == nil || op.Prepare == nil {
		panic(fmt.Sprintf("mpcbench: incomplete op %q", op.Name))
	}
	if _, dup := registry[op.Name]; dup {
		panic("mpcbench: op registered twice: " + op.Name)
	}
	registry[op.Name] = op
}

// ops returns the registered ops in report order.
func ops() []Op {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Op, 0, len(registry))
	for _, op := range registry {
		out = append(out, op)
	}
	rank := func(name string) int {
		if i := slices.Index(opOrder, name); i >= 0 {
			return i
		}
		return len(opOrder)
	}
	slices.SortFunc(out, func(a, b Op) int {
		if ra, rb := rank(a.Name), rank(b.Name); ra != rb {
			return ra - rb
		}
		if a.Name < b.Name {
			return -1
		}
		return 1
	})
	return out
}

// randomInput returns this party's share of a tensor of uniform reals in
// [lo, hi) chosen by party 0 (fixed seed) and shared without communication.
func randomInput(s *protocol.Session, lo, hi float64, shape ...int) (*share.Tensor, error) {
	if s.Party() != 0 {
		return s.ShareInput(0, nil, shape...)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	rng := rand.New(rand.NewPCG(uint64(n), 17))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = lo + (hi-lo)*rng.Float64()
	}
	x, err := s.FixedPoint().EncodeTensor(xs, shape...)
	if err != nil {
		return nil, err
	}
	return s.ShareInput(0, x, shape...)
}

// randomWeights returns party 0's clear k×n fixed-point weights in [−1, 1)
// (nil for party 1).
func randomWeights(s *protocol.Session, k, n int) (*share.Tensor, error) {
	if s.Party() != 0 {
		return nil, nil
	}
	rng := rand.New(rand.NewPCG(uint64(k*n), 23))
	xs := make([]float64, k*n)
	for i := range xs {
		xs[i] = 2*rng.Float64() - 1
	}
	return s.FixedPoint().EncodeTensor(xs, k, n)
}

// Result is one op's measurement (one JSON object of `ops --json`).
type Result struct {
	Op             string  `json:"op"`
	Shape          string  `json:"shape"`
	N              int     `json:"n"`
	Rounds         int64   `json:"rounds"`
	BytesP0        int64   `json:"bytes_p0"`
	BytesP1        int64   `json:"bytes_p1"`
	DealerBytes    int64   `json:"dealer_bytes"`
	Seconds        float64 `json:"seconds"`
	OfflineSeconds float64 `json:"offline_seconds"`
	Link           string  `json:"link,omitempty"`
	// Provider is where the correlated randomness came from: "dealer" (the
	// in-process dealer; DealerBytes is its traffic), "ot" (no dealer:
	// the parties' OT generation, whose traffic in both directions
	// DealerBytes then counts, base OTs included; OfflineSeconds includes
	// the generation) or "he" (as "ot", with the weight-mask correlations
	// by lattice encryption, uploads of encrypted weights included).
	Provider string `json:"provider"`
	// LinkModelSeconds is rounds × latency + busiest direction / bandwidth:
	// what the link alone costs (reported with --link).
	LinkModelSeconds float64 `json:"link_model_seconds,omitempty"`
}

// benchStream is the stream id of the benchmarked session.
const benchStream = 1

// partyRun is one party's observations of one run.
type partyRun struct {
	stats   transport.Stats
	dealer  beaver.DealerStats
	offline time.Duration
	elapsed time.Duration
}

// runOp runs op once as both parties (twoparty.Run: a fresh transport.Pipe,
// with link emulation on both directions when link is set) on the provider
// src opens: a fresh in-process dealer's, or for a dealer-free source
// (ot, he) one on the pipe whose session binding (the base OTs) counts as
// offline time. With a script per party (rehearse), all material
// is drawn ahead by a protocol.Prefetch (offline phase, timed apart). Both
// parties start the timed step together.
func runOp(ctx context.Context, op Op, sc Scale, link *transport.Profile, prefetch bool, src source.Source) ([2]partyRun, error) {
	free := src.DealerFree // the parties make the material: binding runs the base OTs
	sid, err := beaver.NewSessionID()
	if err != nil {
		return [2]partyRun{}, err
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Transport: transport.Options{Link: link}}, func(ctx context.Context, p *twoparty.Party) (partyRun, error) {
		var out partyRun
		t0 := time.Now()
		opened, err := src.Open(ctx, source.InProcess(p.ID, p.Conn, p.Provider))
		if err != nil {
			return out, err
		}
		base := opened.Provider
		if free {
			if err := base.BindSession(ctx, sid); err != nil {
				return out, err
			}
			out.offline = time.Since(t0)
		}
		prov := base
		var pf *protocol.Prefetch
		if prefetch {
			// The rehearsal draws what a run on this provider draws
			// (RehearseFor: with -provider he no weight triple, made
			// inside the computation).
			script, err := protocol.Rehearse(ctx, p.ID, benchStream, share.DefaultFixedPoint, func(ctx context.Context, s *protocol.Session) error {
				run, err := op.Prepare(ctx, s, sc)
				if err != nil {
					return fmt.Errorf("prepare: %w", err)
				}
				return run(ctx)
			}, protocol.RehearseFor(base)...)
			if err != nil {
				return out, fmt.Errorf("rehearsal: %w", err)
			}
			t0 := time.Now()
			pf = protocol.NewPrefetch(script, benchStream)
			if err := pf.Draw(ctx, base); err != nil {
				return out, err
			}
			out.offline += time.Since(t0)
			prov = pf.Wrap(base)
		}
		st := p.Conn.Stream(benchStream)
		s, err := protocol.NewSession(ctx, p.ID, st, prov, share.DefaultFixedPoint)
		if err != nil {
			return out, err
		}
		run, err := op.Prepare(ctx, s, sc)
		if err != nil {
			return out, fmt.Errorf("prepare: %w", err)
		}
		before, dBefore := st.Stats(), base.Stats()
		if err := p.Barrier(ctx); err != nil {
			return out, err
		}
		t1 := time.Now()
		if err := run(ctx); err != nil {
			return out, err
		}
		out.elapsed = time.Since(t1)
		if pf != nil && pf.Served() != pf.Len() {
			return out, fmt.Errorf("drew %d of the %d items its rehearsal drew ahead", pf.Served(), pf.Len())
		}
		out.stats = st.Stats().Sub(before)
		d := base.Stats()
		switch {
		case free && prefetch:
			out.dealer = d // base OTs and all material were made ahead
		case free:
			out.dealer = beaver.DealerStats{BytesRecv: d.BytesRecv, Items: d.Items - dBefore.Items} // base OTs included
		case prefetch:
			out.dealer = d // all material was made ahead
		default:
			out.dealer = beaver.DealerStats{BytesRecv: d.BytesRecv - dBefore.BytesRecv, Items: d.Items - dBefore.Items}
		}
		return out, nil
	})
	if err != nil {
		return r.Out, fmt.Errorf("%s: %w", op.Name, err)
	}
	return r.Out, nil
}

// measure runs op and returns its Result. With prefetch, each party first
// rehearses op (protocol.Rehearse: no peer, no dealer) to learn the
// requests it draws, and the measured run draws all that material ahead
// (offline_seconds) so seconds is the online phase alone. provider is
// "dealer", "ot" or "he" (the requests do not depend on the provider, but
// for he's products with weights, whose triples are made inside the
// computation: its rehearsal draws none, protocol.RehearseFor).
func measure(ctx context.Context, op Op, sc Scale, link *transport.Profile, prefetch bool, src source.Source) (Result, error) {
	shape, n := op.Shape(sc)
	res := Result{Op: op.Name, Shape: shape, N: n, Provider: src.Name}

	runs, err := runOp(ctx, op, sc, link, prefetch, src)
	if err != nil {
		return res, err
	}
	res.Rounds = max(runs[0].stats.Rounds, runs[1].stats.Rounds)
	res.BytesP0, res.BytesP1 = runs[0].stats.BytesSent, runs[1].stats.BytesSent
	res.DealerBytes = runs[0].dealer.BytesRecv + runs[1].dealer.BytesRecv
	res.Seconds = max(runs[0].elapsed, runs[1].elapsed).Seconds()
	res.OfflineSeconds = max(runs[0].offline, runs[1].offline).Seconds()
	if link != nil {
		res.Link = link.Name
		busiest := max(res.BytesP0, res.BytesP1)
		model := time.Duration(res.Rounds) * link.Latency
		if link.Bandwidth > 0 {
			model += time.Duration(float64(busiest) / float64(link.Bandwidth) * float64(time.Second))
		}
		res.LinkModelSeconds = model.Seconds()
	}
	return res, nil
}

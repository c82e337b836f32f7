// Package twoparty runs both parties of a two-party computation in one
// process: two ends of an in-memory transport.Pipe (optionally with link
// emulation), an in-process dealer.Dealer (or, with Config.DealerLinks, a
// networked dealer.Server behind link-emulated pipes of its own: the dealer
// as a third host), or each party's end opened by Config.Open (a source of
// beaver/source over loopback TLS: the quickstart, bench/quality), and one
// goroutine per party. When
// one party fails, the run cancels the other: the failing party's connection
// closes at once, as that of a peer process that exits would (the other
// party still reads what was sent before, then sees the connection end), and
// the other party's context is cancelled shortly after (Config.CancelGrace).
// A failure therefore never leaves the other party blocked, and the failing
// party's error is reported first.
//
// It is the one in-process runner of the module: the tests of protocol,
// proxy/secure and selection, the bench harness (bench.RunLocal,
// bench/quality) and the quickstart use it. It imports transport, share and
// the beaver packages only, so protocol's own tests can use it; callers
// open their protocol.Session on Party.Conn and Party.Provider. Real deployments run each party in its own process over
// transport.Dial and a networked dealer (dealer.Connect).
package twoparty

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Config configures Run; the zero value runs over an unemulated pipe with a
// dealer of fresh random seeds.
type Config struct {
	// Seeds, if not both zero, make the dealer deterministic
	// (dealer.NewWithSeeds); otherwise the dealer draws fresh seeds.
	Seeds [2]share.Seed
	// Transport configures both ends of the pipe; Transport.Link emulates
	// a link in both directions.
	Transport transport.Options
	// CancelGrace is how long after a party fails (and its connection
	// closes) the other party's context is cancelled: time for it to fail
	// on the closed connection with its own error, e.g. after reading the
	// failing party's last message. 0 means DefaultCancelGrace; negative,
	// at once.
	CancelGrace time.Duration
	// DealerLinks, when either is set, puts the dealer behind links of its
	// own, as a third host: the run serves the correlated randomness from a
	// networked dealer (dealer.Server, with Seeds where set) over one
	// in-memory pipe per party, emulating DealerLinks[p] on party p's
	// (nil: an unemulated pipe), so that every dealer word and request
	// crosses a link as it would between hosts. Party.Provider is then a
	// *dealer.Client, which hands out nothing before
	// BindSession: selection binds its sessions; other callers must. With
	// both nil the dealer is in process and its words are function calls.
	DealerLinks [2]*transport.Profile
	// Open, if set, opens each party's end itself, in the party's
	// goroutine, instead of the run's pipe and dealer (Seeds, Transport and
	// DealerLinks are then unused): its connection to the other party (over
	// loopback TLS, say) and its provider, opened from a source of package
	// beaver/source. The run closes both (the connection, then
	// Opened.Closer) once both parties are done, and a party's connection
	// at once when it fails, as with the pipe.
	Open func(ctx context.Context, party int) (source.Opened, error)
}

// DefaultCancelGrace is the default Config.CancelGrace.
const DefaultCancelGrace = time.Second

// Party is one party's end of a Run: its identity, its connection to the
// other party and its dealer provider.
type Party struct {
	// ID is 0 (model owner) or 1 (data owner).
	ID int
	// Conn is this party's end of the pipe; open streams on it
	// (Conn.Stream) for sessions.
	Conn *transport.Conn
	// Provider serves this party's correlated randomness from the run's
	// in-process dealer.
	Provider beaver.Provider

	sync *rendezvous
}

// Barrier blocks until both parties have called it (once each), the other
// party has failed, or ctx ends.
// Benchmarks call it after their untimed setup so that both parties start
// the timed part together.
func (p *Party) Barrier(ctx context.Context) error {
	return p.sync.wait(ctx)
}

// rendezvous is a one-shot two-party barrier.
type rendezvous struct {
	mu      sync.Mutex
	arrived int
	both    chan struct{}
	failed  chan struct{} // closed when a party fails
}

func (r *rendezvous) wait(ctx context.Context) error {
	r.mu.Lock()
	r.arrived++
	switch {
	case r.arrived == 2:
		close(r.both)
	case r.arrived > 2:
		r.mu.Unlock()
		return errors.New("twoparty: barrier used more than once per party")
	}
	r.mu.Unlock()
	select {
	case <-r.both:
		return nil
	case <-r.failed:
		return errors.New("twoparty: barrier: the other party failed")
	case <-ctx.Done():
		return fmt.Errorf("twoparty: barrier: %w", ctx.Err())
	}
}

// Result is what Run observed.
type Result[T any] struct {
	// Out holds what each party's f returned (also where it failed).
	Out [2]T
	// Err holds each party's own error (nil where it succeeded).
	Err [2]error
	// Seconds is the wall time of the run (both parties concurrently,
	// dealer and pipe setup excluded).
	Seconds float64
}

// Run runs f as party 0 and party 1 concurrently and waits for both. The
// returned Result is never nil. The error is nil when both succeeded;
// otherwise it names the party that failed first with its error, followed
// (errors.Join) by the other party's error if it failed too, which is then
// usually the consequence: its context was cancelled or its peer's
// connection closed.
//
// f must return once its connection has ended or ctx is done (every
// protocol read does): ctx is cancelled Config.CancelGrace after the other
// party fails, and when the parent ctx ends.
func Run[T any](ctx context.Context, cfg Config, f func(ctx context.Context, p *Party) (T, error)) (*Result[T], error) {
	res := &Result[T]{}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	open := cfg.Open
	if open == nil {
		var stop func()
		var err error
		if open, stop, err = pipeAndDealer(ctx, cfg); err != nil {
			res.Err = [2]error{err, err}
			return res, err
		}
		defer stop()
	}
	var (
		conns  [2]*transport.Conn // each set by its party before it can fail
		closed [2]io.Closer       // each party's Opened.Closer
	)
	defer func() {
		for id := range 2 {
			if conns[id] != nil {
				conns[id].Close()
			}
			if closed[id] != nil {
				closed[id].Close()
			}
		}
	}()

	grace := cfg.CancelGrace
	if grace == 0 {
		grace = DefaultCancelGrace
	}
	meet := &rendezvous{both: make(chan struct{}), failed: make(chan struct{})}
	var (
		mu     sync.Mutex
		failed []int // parties in the order they failed
		wg     sync.WaitGroup
		timer  *time.Timer
	)
	start := time.Now()
	for id := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			defer func() {
				if err == nil {
					return
				}
				res.Err[id] = err
				// Record the failure before the other party can see it,
				// so that the order of failed is the causal one.
				mu.Lock()
				failed = append(failed, id)
				if len(failed) == 1 {
					close(meet.failed)
					if grace < 0 {
						cancel()
					} else {
						timer = time.AfterFunc(grace, cancel)
					}
				}
				mu.Unlock()
				// Unblock the other party: end the connection, as a
				// failing peer process would (its context is cancelled
				// after the grace).
				if conns[id] != nil {
					conns[id].Close()
				}
			}()
			op, oerr := open(ctx, id)
			if oerr != nil {
				err = fmt.Errorf("twoparty: %w", oerr)
				return
			}
			conns[id], closed[id] = op.Conn, op.Closer
			p := &Party{ID: id, Conn: op.Conn, Provider: op.Provider, sync: meet}
			res.Out[id], err = f(ctx, p)
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	if timer != nil {
		timer.Stop()
	}
	if len(failed) == 0 {
		return res, nil
	}
	errs := make([]error, len(failed))
	for i, id := range failed {
		errs[i] = fmt.Errorf("party %d: %w", id, res.Err[id])
	}
	return res, errors.Join(errs...)
}

// pipeAndDealer returns the open of a run without Config.Open: each
// party's end of one transport.Pipe and its provider from the run's
// dealer (startDealer); stop ends the dealer.
func pipeAndDealer(ctx context.Context, cfg Config) (open func(context.Context, int) (source.Opened, error), stop func(), err error) {
	provider, stopDealer, err := startDealer(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("twoparty: dealer: %w", err)
	}
	c0, c1 := transport.Pipe(cfg.Transport)
	conns := [2]*transport.Conn{c0, c1}
	stop = func() {
		c0.Close() // Run closes them first; a failed open leaves them to stop
		c1.Close()
		stopDealer()
	}
	open = func(_ context.Context, id int) (source.Opened, error) {
		prov, err := provider(id)
		if err != nil {
			return source.Opened{}, fmt.Errorf("provider: %w", err)
		}
		return source.Opened{Provider: prov, Conn: conns[id], Closer: nopCloser{}}, nil
	}
	return open, stop, nil
}

// startDealer starts the run's dealer: in process, or (Config.DealerLinks)
// a networked server over one link-emulated pipe per party, both parties
// connected. provider returns party p's provider; stop ends the server's
// connections and waits for it.
func startDealer(ctx context.Context, cfg Config) (provider func(p int) (beaver.Provider, error), stop func(), err error) {
	seeded := cfg.Seeds != ([2]share.Seed{})
	if cfg.DealerLinks == [2]*transport.Profile{} {
		var d *dealer.Dealer
		if seeded {
			d = dealer.NewWithSeeds(cfg.Seeds[0], cfg.Seeds[1])
		} else if d, err = dealer.New(); err != nil {
			return nil, nil, err
		}
		return d.Provider, func() {}, nil
	}
	opt := dealer.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var srv *dealer.Server
	if seeded {
		srv, err = dealer.NewServerWithSeeds(cfg.Seeds[0], cfg.Seeds[1], opt)
	} else {
		srv, err = dealer.NewServer(opt)
	}
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var conns []*transport.Conn
	stop = func() {
		cancel()
		for _, c := range conns {
			c.Close()
		}
		wg.Wait()
	}
	var clients [2]*dealer.Client
	for p := range 2 {
		cs, cc := transport.Pipe(transport.Options{Link: cfg.DealerLinks[p]})
		conns = append(conns, cs, cc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = srv.Serve(sctx, cs, p)
		}()
		if clients[p], err = dealer.Connect(sctx, cc, p); err != nil {
			stop()
			return nil, nil, fmt.Errorf("party %d: %w", p, err)
		}
	}
	provider = func(p int) (beaver.Provider, error) {
		if p != 0 && p != 1 {
			return nil, fmt.Errorf("provider for party %d", p)
		}
		return clients[p], nil
	}
	return provider, stop, nil
}

// Cost is what one party observed over a span of a run: its stream's
// transport statistics and its dealer traffic.
type Cost struct {
	// Stream holds the bytes sent and received and the rounds on the stream.
	Stream transport.Stats
	// Dealer holds the traffic of the party's provider with the dealer.
	Dealer beaver.DealerStats
}

// Metered is what a Meter reads; *protocol.Session satisfies it.
type Metered interface {
	Stream() *transport.Stream
	Provider() beaver.Typed
}

// Meter snapshots a session's costs; Since returns the cost since the
// snapshot.
type Meter struct {
	s      Metered
	stream transport.Stats
	dealer beaver.DealerStats
}

// NewMeter starts measuring s.
func NewMeter(s Metered) *Meter {
	return &Meter{s: s, stream: s.Stream().Stats(), dealer: s.Provider().Stats()}
}

// Since returns the cost since NewMeter.
func (m *Meter) Since() Cost {
	d := m.s.Provider().Stats()
	return Cost{Stream: m.s.Stream().Stats().Sub(m.stream),
		Dealer: beaver.DealerStats{BytesRecv: d.BytesRecv - m.dealer.BytesRecv, BytesSent: d.BytesSent - m.dealer.BytesSent, Items: d.Items - m.dealer.Items}}
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

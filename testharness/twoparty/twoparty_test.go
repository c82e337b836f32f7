package twoparty_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// within fails t if f does not return within d (a hang).
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("run did not return within %v", d)
	}
}

// TestRunBothSucceed multiplies a secret of each party over real sessions:
// both outputs come back, no error, and the costs of the product are those
// of one Beaver multiplication and one truncation.
func TestRunBothSucceed(t *testing.T) {
	fp := share.DefaultFixedPoint
	inputs := [2]float64{1.5, -2.25}
	for _, cfg := range []twoparty.Config{
		{},
		{Seeds: [2]share.Seed{{1}, {2}}},
		{Transport: transport.Options{Link: &transport.Profile{Name: "test", Latency: time.Millisecond}}},
	} {
		type out struct {
			v    float64
			cost twoparty.Cost
		}
		r, err := twoparty.Run(context.Background(), cfg, func(ctx context.Context, p *twoparty.Party) (out, error) {
			s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, fp)
			if err != nil {
				return out{}, err
			}
			mine, err := fp.EncodeTensor([]float64{inputs[p.ID]}, 1)
			if err != nil {
				return out{}, err
			}
			x, y := mine, (*share.Tensor)(nil)
			if p.ID == 1 {
				x, y = nil, mine
			}
			xs, err := s.ShareInput(0, x, 1)
			if err != nil {
				return out{}, err
			}
			ys, err := s.ShareInput(1, y, 1)
			if err != nil {
				return out{}, err
			}
			m := twoparty.NewMeter(s)
			z, err := s.MulFixed(ctx, xs, ys)
			if err != nil {
				return out{}, err
			}
			c := m.Since()
			open, err := s.Reveal(ctx, z)
			if err != nil {
				return out{}, err
			}
			return out{fp.Decode(open.Data[0]), c}, nil
		})
		if err != nil || r.Err != [2]error{} {
			t.Fatalf("%+v: %v (%v)", cfg, err, r.Err)
		}
		for id := range 2 {
			if got := r.Out[id].v; got != -3.375 {
				t.Errorf("%+v: party %d got %v, want -3.375", cfg, id, got)
			}
			if c := r.Out[id].cost; c.Stream.Rounds != 2 || c.Stream.BytesSent <= 0 || c.Dealer.Items <= 0 {
				t.Errorf("%+v: party %d cost %+v, want 2 rounds, bytes and dealer items", cfg, id, c)
			}
		}
		if r.Seconds <= 0 {
			t.Errorf("%+v: seconds %v", cfg, r.Seconds)
		}
	}
}

// TestRunDeterministicDealer checks that fixed seeds give the same
// correlated randomness in two runs and fresh seeds do not.
func TestRunDeterministicDealer(t *testing.T) {
	draw := func(cfg twoparty.Config) [2]uint64 {
		r, err := twoparty.Run(context.Background(), cfg, func(ctx context.Context, p *twoparty.Party) (uint64, error) {
			tr, err := beaver.Typed{Provider: p.Provider}.Triples(ctx, 1, 1)
			if err != nil {
				return 0, err
			}
			return tr.A[0], nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.Out
	}
	seeded := twoparty.Config{Seeds: [2]share.Seed{{7}, {8}}}
	if a, b := draw(seeded), draw(seeded); a != b {
		t.Errorf("seeded runs differ: %v, %v", a, b)
	}
	if a, b := draw(twoparty.Config{}), draw(twoparty.Config{}); a == b {
		t.Errorf("unseeded runs agree: %v", a)
	}
}

var errBoom = errors.New("boom")

// TestRunOneFails makes one party fail while the other waits in various
// ways, with the default grace and with an immediate cancellation: the run
// returns within seconds (the waiting party sees the connection end or is
// cancelled), the error names the failing party first, wraps its error, and
// Result.Err holds each party's own error.
func TestRunOneFails(t *testing.T) {
	waits := []struct {
		name string
		wait func(ctx context.Context, p *twoparty.Party) error
	}{
		{"context", func(ctx context.Context, p *twoparty.Party) error {
			<-ctx.Done()
			return ctx.Err()
		}},
		{"peer read", func(ctx context.Context, p *twoparty.Party) error {
			_, err := p.Conn.Stream(1).RecvBytes(ctx, 1<<10)
			return err
		}},
		// A party that ignores its context is still released: the failing
		// party's connection closes.
		{"read without context", func(_ context.Context, p *twoparty.Party) error {
			_, err := p.Conn.Stream(1).RecvBytes(context.Background(), 1<<10)
			return err
		}},
		{"barrier", func(ctx context.Context, p *twoparty.Party) error {
			return p.Barrier(ctx)
		}},
		{"session setup", func(ctx context.Context, p *twoparty.Party) error {
			_, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, share.DefaultFixedPoint)
			return err
		}},
	}
	for _, grace := range []time.Duration{0, -1} {
		for _, w := range waits {
			for failing := range 2 {
				name := fmt.Sprintf("grace%v/%s/party%d", grace, w.name, failing)
				t.Run(name, func(t *testing.T) {
					oneFails(t, twoparty.Config{CancelGrace: grace}, failing, w.wait)
				})
			}
		}
	}
}

func oneFails(t *testing.T, cfg twoparty.Config, failing int, wait func(ctx context.Context, p *twoparty.Party) error) {
	var r *twoparty.Result[int]
	var err error
	within(t, 10*time.Second, func() {
		r, err = twoparty.Run(context.Background(), cfg, func(ctx context.Context, p *twoparty.Party) (int, error) {
			if p.ID == failing {
				time.Sleep(10 * time.Millisecond) // let the other party start waiting
				return 0, errBoom
			}
			return 1, wait(ctx, p)
		})
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("error %v, want one wrapping %v", err, errBoom)
	}
	if want := fmt.Sprintf("party %d: boom", failing); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}
	if r.Err[failing] != errBoom || r.Err[1-failing] == nil {
		t.Errorf("party errors %v: want boom from party %d and the other ended", r.Err, failing)
	}
}

// TestRunDrainsBeforeCancel checks the order of a failure's effects: the
// other party still receives what the failing party sent before it failed
// (its own outcome does not depend on scheduling), then sees the connection
// end; with the default grace its context is still live meanwhile.
func TestRunDrainsBeforeCancel(t *testing.T) {
	r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (string, error) {
		st := p.Conn.Stream(1)
		if p.ID == 0 {
			if err := st.SendBytes(ctx, []byte("last words")); err != nil {
				return "", err
			}
			return "", errBoom
		}
		time.Sleep(100 * time.Millisecond) // party 0 has failed by now
		if ctx.Err() != nil {
			return "", fmt.Errorf("cancelled within the grace: %w", ctx.Err())
		}
		b, err := st.RecvBytes(ctx, 1<<10)
		if err != nil {
			return "", err
		}
		if _, err := st.RecvBytes(ctx, 1<<10); err == nil || errors.Is(err, context.Canceled) {
			return string(b), fmt.Errorf("second receive: %v, want the connection's end", err)
		}
		return string(b), nil
	})
	if !errors.Is(err, errBoom) || r.Err[1] != nil || r.Out[1] != "last words" {
		t.Fatalf("error %v, party 1: %q, %v", err, r.Out[1], r.Err[1])
	}
}

// TestRunBothFailOrder checks that when both parties fail on their own, the
// one that failed first leads the error and the other follows.
func TestRunBothFailOrder(t *testing.T) {
	errLate := errors.New("late")
	_, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (int, error) {
		if p.ID == 1 {
			return 0, errBoom
		}
		<-ctx.Done()
		return 0, errLate
	})
	if err == nil || !strings.HasPrefix(err.Error(), "party 1: boom\nparty 0: late") || !errors.Is(err, errLate) {
		t.Fatalf("error %q", err)
	}
}

// TestRunParentCancelled checks that cancelling the caller's context ends
// both parties.
func TestRunParentCancelled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	within(t, 10*time.Second, func() {
		r, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (int, error) {
			_, err := p.Conn.Stream(1).RecvBytes(ctx, 1<<10) // neither party sends
			return 0, err
		})
		if !errors.Is(err, context.DeadlineExceeded) || r.Err[0] == nil || r.Err[1] == nil {
			t.Errorf("error %v, party errors %v", err, r.Err)
		}
	})
}

// TestBarrier checks that Barrier releases both parties only once both
// arrived, and refuses a second call.
func TestBarrier(t *testing.T) {
	r, err := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (time.Time, error) {
		if p.ID == 0 {
			time.Sleep(200 * time.Millisecond)
		}
		if err := p.Barrier(ctx); err != nil {
			return time.Time{}, err
		}
		return time.Now(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Out[1].Sub(r.Out[0]).Abs(); d > 100*time.Millisecond {
		t.Errorf("parties left the barrier %v apart", d)
	}
	_, err = twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (int, error) {
		if err := p.Barrier(ctx); err != nil {
			return 0, err
		}
		return 0, p.Barrier(ctx)
	})
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("second barrier: %v", err)
	}
}

// TestRunDealerLinks puts the dealer behind links of its own: the parties
// bind a session, multiply over real sessions, and the product is right;
// the dealer's words reach each party over its own link (counted as
// received bytes, with its requests as sent bytes): a triple's to party 1,
// a cross-party AND triple's to party 0, and the link's latency shows in
// the time of each party's draws. The same seeds give the same material
// as the in-process dealer.
func TestRunDealerLinks(t *testing.T) {
	lat := 20 * time.Millisecond
	slow := &transport.Profile{Name: "test-dealer", Latency: lat}
	seeds := [2]share.Seed{{3}, {4}}
	id := beaver.SessionID{9}
	type out struct {
		a, c  uint64
		stats beaver.DealerStats
		took  time.Duration
	}
	draw := func(cfg twoparty.Config) [2]out {
		r, err := twoparty.Run(context.Background(), cfg, func(ctx context.Context, p *twoparty.Party) (out, error) {
			if err := p.Provider.BindSession(ctx, id); err != nil {
				return out{}, err
			}
			start := time.Now()
			tr, err := beaver.Typed{Provider: p.Provider}.Triples(ctx, 1, 4)
			if err != nil {
				return out{}, err
			}
			ca, err := beaver.Typed{Provider: p.Provider}.CrossANDTriples(ctx, 1, 4)
			if err != nil {
				return out{}, err
			}
			return out{tr.A[0], ca.C[0], p.Provider.Stats(), time.Since(start)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return r.Out
	}
	local := draw(twoparty.Config{Seeds: seeds})
	linked := draw(twoparty.Config{Seeds: seeds, DealerLinks: [2]*transport.Profile{slow, slow}})
	for p := range 2 {
		if local[p].a != linked[p].a || local[p].c != linked[p].c {
			t.Errorf("party %d: material differs between the in-process and the networked dealer", p)
		}
	}
	for p := range 2 {
		if s := linked[p].stats; s.BytesRecv <= 8*4 || s.BytesSent <= 0 || s.Items != 2 {
			t.Errorf("party %d's dealer traffic over the link %+v, want more than its 4 dealer words received and a request sent", p, s)
		}
		if linked[p].took < 2*lat {
			t.Errorf("party %d's draws over a %v link took %v, want at least a round trip", p, lat, linked[p].took)
		}
	}
}

// countCloser counts its Close calls.
type countCloser struct{ n *atomic.Int64 }

func (c countCloser) Close() error { c.n.Add(1); return nil }

// TestRunOpen: with Config.Open each party opens its own end (here the
// dealer source of beaver/source over loopback TLS and an in-process
// dealer, as the quickstart and bench/quality do): the parties compute on
// it, and the run closes what they opened once both are done; a party that
// cannot open fails the run with its error, and the other is cancelled.
func TestRunOpen(t *testing.T) {
	ctx := context.Background()
	ids := [2]*transport.Identity{}
	for p := range ids {
		var err error
		if ids[p], err = transport.GenerateIdentity(fmt.Sprint("party", p)); err != nil {
			t.Fatal(err)
		}
	}
	lb, err := twoparty.NewLoopback(ids, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	d, err := dealer.New()
	if err != nil {
		t.Fatal(err)
	}
	var closes atomic.Int64
	src, _ := source.ByName("dealer")
	open := func(ctx context.Context, p int) (source.Opened, error) {
		return src.Open(ctx, source.Env{
			Party: p,
			Peer:  lb.Peer(p),
			Dealer: func(context.Context) (beaver.Provider, io.Closer, error) {
				prov, err := d.Provider(p)
				return prov, countCloser{&closes}, err
			},
		})
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Open: open}, func(ctx context.Context, p *twoparty.Party) (uint64, error) {
		s, err := protocol.NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return 0, err
		}
		x, err := share.NewTensor(1)
		if err != nil {
			return 0, err
		}
		x.Data[0] = uint64(3 + p.ID) // shares 3 and 4 of 7
		y, err := s.Mul(ctx, x, x)
		if err != nil {
			return 0, err
		}
		return y.Data[0], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Out[0] + r.Out[1]; got != 49 {
		t.Fatalf("(3+4)² over TLS = %d", got)
	}
	if closes.Load() != 2 {
		t.Fatalf("closed %d of the parties' dealer connections, want 2", closes.Load())
	}

	refused := errors.New("no dealer today")
	_, err = twoparty.Run(ctx, twoparty.Config{CancelGrace: -1, Open: func(ctx context.Context, p int) (source.Opened, error) {
		if p == 1 {
			return source.Opened{}, refused
		}
		<-ctx.Done() // party 0 waits for a peer that never comes
		return source.Opened{}, ctx.Err()
	}}, func(ctx context.Context, p *twoparty.Party) (int, error) { return 0, nil })
	if !errors.Is(err, refused) || !strings.HasPrefix(err.Error(), "party 1: twoparty: ") {
		t.Fatalf("open failure: %v", err)
	}
}

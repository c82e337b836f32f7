package protocol

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// spyProvider records the stream-kind requests a computation draws.
type spyProvider struct {
	beaver.Provider
	mu   sync.Mutex
	reqs []beaver.Request
}

// Unwrap implements beaver.Wrapper.
func (s *spyProvider) Unwrap() beaver.Provider { return s.Provider }

func (p *spyProvider) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, r)
	p.mu.Unlock()
	return p.Provider.Material(ctx, r)
}

// aheadOps are computations run on shares of fixed inputs; each returns
// this party's output words.
func aheadOps(t *testing.T) map[string]func(ctx context.Context, s *Session) ([]uint64, error) {
	fp := share.DefaultFixedPoint
	rng := rand.New(rand.NewPCG(3, 4))
	vals := make([]float64, 6*17)
	for i := range vals {
		vals[i] = 8 * (rng.Float64() - 0.5)
	}
	x := splitTensor(encodeT(t, fp, vals, 6, 17), 1)
	y := splitTensor(encodeT(t, fp, vals[:17*6], 17, 6), 2)
	return map[string]func(ctx context.Context, s *Session) ([]uint64, error){
		"matmul": func(ctx context.Context, s *Session) ([]uint64, error) {
			z, err := s.MatMulFixed(ctx, x[s.Party()], y[s.Party()])
			if err != nil {
				return nil, err
			}
			return z.Data, nil
		},
		"relu": func(ctx context.Context, s *Session) ([]uint64, error) {
			z, err := s.ReLU(ctx, x[s.Party()])
			if err != nil {
				return nil, err
			}
			return z.Data, nil
		},
		"softmax": func(ctx context.Context, s *Session) ([]uint64, error) {
			z, err := s.Softmax(ctx, x[s.Party()])
			if err != nil {
				return nil, err
			}
			return z.Data, nil
		},
		"compare-reveal": func(ctx context.Context, s *Session) ([]uint64, error) {
			bits, err := s.CompareReveal(ctx, x[s.Party()], x[1-s.Party()])
			if err != nil {
				return nil, err
			}
			out := make([]uint64, len(bits))
			for i, b := range bits {
				if b {
					out[i] = 1
				}
			}
			return out, nil
		},
	}
}

// TestRehearsalDrawsWhatTheRunDraws: a rehearsal of a computation draws
// exactly the sequence of items the real two-party run draws, without a
// peer.
func TestRehearsalDrawsWhatTheRunDraws(t *testing.T) {
	for name, op := range aheadOps(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) ([]beaver.Request, error) {
				spy := &spyProvider{Provider: p.Provider}
				s, err := NewSession(ctx, p.ID, p.Conn.Stream(5), spy, share.DefaultFixedPoint)
				if err != nil {
					return nil, err
				}
				if _, err := op(ctx, s); err != nil {
					return nil, err
				}
				return spy.reqs, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for p := range 2 {
				dry, err := NewRehearsal(p, 5, share.DefaultFixedPoint)
				if err != nil {
					t.Fatal(err)
				}
				if dry.Stream() != nil || dry.StreamID() != 5 || !dry.Rehearsal() {
					t.Fatalf("rehearsal session: stream %v, id %d", dry.Stream(), dry.StreamID())
				}
				sc, err := Rehearse(ctx, p, 5, share.DefaultFixedPoint, func(ctx context.Context, s *Session) error {
					_, err := op(ctx, s)
					return err
				})
				if err != nil {
					t.Fatalf("party %d rehearsal: %v", p, err)
				}
				want := r.Out[p]
				got := NewPrefetch(sc, 5).reqs
				if !slices.Equal(got, want) || len(want) == 0 {
					t.Errorf("party %d: rehearsal drew %d items %v, the run %d %v", p, len(got), got, len(want), want)
				}
				var bytes int64
				for _, q := range want {
					for _, w := range q.PartWords(p) {
						bytes += 8 * int64(w)
					}
				}
				if sc.Bytes != bytes {
					t.Errorf("party %d: script of %d bytes, its material %d", p, sc.Bytes, bytes)
				}
			}
		})
	}
}

// TestAheadMatchesDirect: drawing a computation's items ahead changes
// neither its results (bit for bit, on the same dealer seeds), nor its
// rounds and bytes, nor the items drawn.
func TestAheadMatchesDirect(t *testing.T) {
	for name, op := range aheadOps(t) {
		t.Run(name, func(t *testing.T) {
			cfg := pairConfig{Seed: 9}
			direct := runPairWith(t, cfg, op)
			ahead := runPairWith(t, cfg, func(ctx context.Context, s *Session) ([]uint64, error) {
				var out []uint64
				err := s.Ahead(ctx, func(ctx context.Context, s *Session) error {
					var err error
					out, err = op(ctx, s)
					return err
				})
				return out, err
			})
			for p := range 2 {
				if !slices.Equal(direct.Out[p], ahead.Out[p]) {
					t.Errorf("party %d: output differs when drawn ahead", p)
				}
				if direct.Stats[p] != ahead.Stats[p] {
					t.Errorf("party %d: stream cost %v direct, %v ahead", p, direct.Stats[p], ahead.Stats[p])
				}
				if direct.Dealer[p].Items != ahead.Dealer[p].Items {
					t.Errorf("party %d: %d dealer items direct, %d ahead", p, direct.Dealer[p].Items, ahead.Dealer[p].Items)
				}
			}
		})
	}
}

// TestAheadRefusesDivergence: an op whose real run draws other items than
// its rehearsal fails with an error naming the rehearsal (both parties, no
// hang), rather than consuming material out of step.
func TestAheadRefusesDivergence(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, _ := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, p *twoparty.Party) (struct{}, error) {
		s, err := NewSession(ctx, p.ID, p.Conn.Stream(1), p.Provider, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		n := 10
		return struct{}{}, s.Ahead(ctx, func(ctx context.Context, s *Session) error {
			x, _ := share.NewTensor(n)
			n++ // the real run is one element longer
			_, err := s.ReLU(ctx, x)
			return err
		})
	})
	for p, err := range r.Err {
		if err == nil || !strings.Contains(err.Error(), "rehearsal") {
			t.Errorf("party %d: error %v, want one naming the rehearsal", p, err)
		}
	}
}

// TestAheadOnRehearsal: on a rehearsal session Ahead runs op once.
func TestAheadOnRehearsal(t *testing.T) {
	dry, err := NewRehearsal(0, 1, share.DefaultFixedPoint)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	if err := dry.Ahead(context.Background(), func(context.Context, *Session) error { runs++; return nil }); err != nil || runs != 1 {
		t.Errorf("ran %d times, error %v", runs, err)
	}
}

// TestNewRehearsalErrors: bad parameters are errors.
func TestNewRehearsalErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		party int
		fp    share.FixedPoint
	}{
		{"party", 2, share.DefaultFixedPoint},
		{"fixed point", 0, share.FixedPoint{FracBits: 70}},
	} {
		if _, err := NewRehearsal(tc.party, 1, tc.fp); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
		if _, err := Rehearse(context.Background(), tc.party, 1, tc.fp, func(context.Context, *Session) error { return nil }); err == nil {
			t.Errorf("%s: Rehearse: no error", tc.name)
		}
	}
}

// TestPrefetchServes: a Prefetch serves its script's items, the same as
// drawing them one by one from the same position, and refuses a request
// that departs from the script, one past its end, and every request after
// its drawing failed.
func TestPrefetchServes(t *testing.T) {
	ctx := context.Background()
	sc := Script{Requests: []beaver.Request{{Kind: beaver.KindTriple, N: 4}, {Kind: beaver.KindWrap, N: 3, FracBits: 16}}}
	const stream = 7
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		abort error            // Abort instead of Draw
		reqs  []beaver.Request // asked, in order
		fail  int              // index of the first failing request (-1: none)
		want  string           // in its error
	}{
		{"in order", nil, nil, -1, ""},
		{"departs", nil, []beaver.Request{{Kind: beaver.KindTriple, Stream: stream, N: 5}}, 0, "rehearsal drew"},
		{"past the end", nil, nil, 2, "more dealer items"},
		{"aborted", boom, nil, 0, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := dealer.New()
			if err != nil {
				t.Fatal(err)
			}
			prov, err := d.Provider(0)
			if err != nil {
				t.Fatal(err)
			}
			direct, err := d.Provider(0)
			if err != nil {
				t.Fatal(err)
			}
			pf := NewPrefetch(sc, stream)
			if tc.abort != nil {
				pf.Abort(tc.abort)
			} else if err := pf.Draw(ctx, prov); err != nil {
				t.Fatal(err)
			}
			reqs := tc.reqs
			if reqs == nil {
				reqs = slices.Clone(pf.reqs)
				if tc.fail == len(reqs) {
					reqs = append(reqs, reqs[0])
				}
			}
			for i, r := range reqs {
				m, err := pf.Material(ctx, r)
				if tc.fail >= 0 && i >= tc.fail {
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("request %d: error %v, want one with %q", i, err, tc.want)
					}
					if tc.abort != nil && !errors.Is(err, tc.abort) || tc.abort == nil && !errors.Is(err, ErrOffScript) {
						t.Fatalf("request %d: error %v wraps neither the abort's nor ErrOffScript", i, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				w, err := direct.Material(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(m, w) {
					t.Fatalf("request %d: prefetched material differs from the direct draw", i)
				}
			}
			if want := min(len(reqs), max(tc.fail, 0)); tc.fail >= 0 && pf.Served() != want || tc.fail < 0 && pf.Served() != pf.Len() {
				t.Errorf("served %d of %d", pf.Served(), pf.Len())
			}
		})
	}
}

// TestPrefetchWrap: the provider Wrap returns serves only the script's
// stream from the Prefetch; weight masks and other streams pass straight
// to the base provider without consuming the script.
func TestPrefetchWrap(t *testing.T) {
	ctx := context.Background()
	d := dealer.NewWithSeeds(share.Seed{3}, share.Seed{4})
	base, err := d.Provider(0)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := dealer.NewWithSeeds(share.Seed{3}, share.Seed{4}).Provider(0)
	if err != nil {
		t.Fatal(err)
	}
	pf := NewPrefetch(Script{Requests: []beaver.Request{{Kind: beaver.KindTriple, N: 2}}}, 7)
	if err := pf.Draw(ctx, base); err != nil {
		t.Fatal(err)
	}
	w := beaver.Typed{Provider: pf.Wrap(base)}
	mask, err := w.WeightMask(ctx, 1, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := (beaver.Typed{Provider: direct}).WeightMask(ctx, 1, 2, 2); !slices.Equal(mask, want) {
		t.Error("a weight mask through Wrap differs from the base provider's")
	}
	if _, err := w.Triples(ctx, 8, 3); err != nil || base.Position(8) != 1 {
		t.Errorf("another stream's request: %v, base position %d", err, base.Position(8))
	}
	if pf.Served() != 0 {
		t.Fatalf("served %d before the script's stream was asked", pf.Served())
	}
	if _, err := w.Triples(ctx, 7, 2); err != nil || pf.Served() != 1 {
		t.Errorf("the script's request: %v, served %d", err, pf.Served())
	}
}

// seqCounter is a Sequencer over a provider that counts the sequences
// asked of it and, when each is asked, the bytes of party 0's material
// asked for but not yet served by pf (set once pf exists).
type seqCounter struct {
	beaver.Provider
	mu       sync.Mutex
	seqs     int
	asked    int64
	pf       *Prefetch
	maxAhead int64
}

// Unwrap implements beaver.Wrapper.
func (s *seqCounter) Unwrap() beaver.Provider { return s.Provider }

func (c *seqCounter) MaterialSeq(ctx context.Context, rs []beaver.Request, deliver func(int, beaver.Material) error) error {
	c.mu.Lock()
	c.seqs++
	for _, r := range rs {
		c.asked += itemBytes(r, 0)
	}
	var served int64
	for _, r := range c.pf.reqs[:c.pf.Served()] {
		served += itemBytes(r, 0)
	}
	c.maxAhead = max(c.maxAhead, c.asked-served)
	c.mu.Unlock()
	for i, r := range rs {
		m, err := c.Provider.Material(ctx, r)
		if err != nil {
			return err
		}
		if err := deliver(i, m); err != nil {
			return err
		}
	}
	return nil
}

// TestPrefetchWindow: a windowed Prefetch serves the same material as an
// unbounded one, asks for it in chunks of at most half its window (one
// sequence each), and never has more than the window asked for and not yet
// served, however slowly the computation takes it; a window smaller than an
// item still passes the item alone; a cancelled draw ends.
func TestPrefetchWindow(t *testing.T) {
	ctx := context.Background()
	var sc Script
	for range 10 {
		sc.Requests = append(sc.Requests, beaver.Request{Kind: beaver.KindTriple, N: 100})
	}
	item := itemBytes(sc.Requests[0], 0) // 2,400 bytes
	const stream = 3
	for _, tc := range []struct {
		name     string
		window   int64
		wantSeqs int
	}{
		{"two items a chunk", 4 * item, 5},
		{"one item a chunk", 2 * item, 10},
		{"window below an item", item / 2, 10},
		{"all at once", 100 * item, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seeds := [2]share.Seed{{5}, {6}}
			base, _ := dealer.NewWithSeeds(seeds[0], seeds[1]).Provider(0)
			ref, _ := dealer.NewWithSeeds(seeds[0], seeds[1]).Provider(0)
			pf := NewPrefetchWindow(sc, stream, 0, tc.window)
			c := &seqCounter{Provider: base, pf: pf}
			want := NewPrefetch(sc, stream)
			if err := want.Draw(ctx, ref); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- pf.Draw(ctx, c) }()
			for _, r := range pf.reqs {
				time.Sleep(2 * time.Millisecond) // a slow computation
				m, err := pf.Material(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				w, err := want.Material(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(m, w) {
					t.Fatal("windowed material differs from the unbounded draw's")
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if c.seqs != tc.wantSeqs {
				t.Errorf("%d sequences, want %d", c.seqs, tc.wantSeqs)
			}
			if limit := max(tc.window, item); c.maxAhead > limit {
				t.Errorf("%d bytes asked ahead of the computation, window %d", c.maxAhead, limit)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		base, _ := dealer.NewWithSeeds(share.Seed{7}, share.Seed{8}).Provider(0)
		pf := NewPrefetchWindow(sc, stream, 0, 2*item)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- pf.Draw(cctx, base) }()
		time.Sleep(20 * time.Millisecond) // the drawer waits for room
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("draw ended with %v, want the cancellation", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a cancelled draw kept waiting for room")
		}
	})
}

// TestPrefetchServedWhileWaiting: Served answers at once while Material
// waits for an item not drawn yet. It waited for Material's lock, so a
// drawer that asked it (as TestPrefetchWindow's provider does) while the
// computation waited for that drawer deadlocked, depending on which of
// the two goroutines came first (it hung the suite once).
func TestPrefetchServedWhileWaiting(t *testing.T) {
	var sc Script
	sc.Requests = append(sc.Requests, beaver.Request{Kind: beaver.KindTriple, N: 4})
	pf := NewPrefetch(sc, 3)
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := pf.Material(ctx, pf.reqs[0])
		waited <- err
	}()
	// Until Material holds the consumer's lock (it waits for the item).
	for pf.mu.TryLock() {
		pf.mu.Unlock()
		runtime.Gosched()
	}
	served := make(chan int, 1)
	go func() { served <- pf.Served() }()
	select {
	case n := <-served:
		if n != 0 {
			t.Errorf("served %d before any item was drawn", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Served waited for a Material call in progress")
	}
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Material: %v", err)
	}
}

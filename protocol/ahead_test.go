package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/twoparty"
	"github.com/selectformer/selectformer/share"
)

// spyProvider records the stream-kind requests a computation draws.
type spyProvider struct {
	beaver.Provider
	mu   sync.Mutex
	reqs []beaver.Request
}

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
				rec := beaver.NewRehearsal(p)
				dry, err := NewRehearsal(p, 5, rec, share.DefaultFixedPoint)
				if err != nil {
					t.Fatal(err)
				}
				if dry.Stream() != nil || dry.StreamID() != 5 || !dry.Rehearsal() {
					t.Fatalf("rehearsal session: stream %v, id %d", dry.Stream(), dry.StreamID())
				}
				if _, err := op(ctx, dry); err != nil {
					t.Fatalf("party %d rehearsal: %v", p, err)
				}
				if got, want := rec.Requests(), r.Out[p]; !slices.Equal(got, want) || len(want) == 0 {
					t.Errorf("party %d: rehearsal drew %d items %v, the run %d %v", p, len(got), got, len(want), want)
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
	dry, err := NewRehearsal(0, 1, beaver.NewRehearsal(0), share.DefaultFixedPoint)
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
		prov  beaver.Provider
		fp    share.FixedPoint
	}{
		{"party", 2, beaver.NewRehearsal(0), share.DefaultFixedPoint},
		{"provider of the other party", 0, beaver.NewRehearsal(1), share.DefaultFixedPoint},
		{"nil provider", 0, nil, share.DefaultFixedPoint},
		{"fixed point", 0, beaver.NewRehearsal(0), share.FixedPoint{FracBits: 70}},
	} {
		if _, err := NewRehearsal(tc.party, 1, tc.prov, tc.fp); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

package beaver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/ot"
)

// A toy correlation kind, all of it in this file: what adding a kind takes.
// "toysquare" gives each party a share R of a random r and a share S of
// r², where — unlike every built-in kind — both parties get dealer words:
// party 0 expands u0, v0, party 1 u1, w1 (r = u0 + u1); the dealer sends
// party 0 w1 and party 1 r² − v0 − w1; party 0's S is v0 + w1, party 1's
// the words it got. The OT provider makes it as a square pair.
const (
	kindToy  beaver.Kind = 200
	toyName              = "toysquare"
	kindNoOT beaver.Kind = 201 // the toy again, with no OT generator
)

func toyCorrelation() beaver.Correlation {
	n := func(r beaver.Request, _ int) []int { return []int{r.N, r.N} }
	return beaver.Correlation{
		Kind: kindToy, Name: toyName, Fields: beaver.FieldN,
		Dims:    func(r beaver.Request) [][]int { return [][]int{{r.N}} },
		Format:  func(r beaver.Request) string { return fmt.Sprintf("n=%d", r.N) },
		Local:   n, // party 0: u0, v0; party 1: u1, w1
		Parts:   n, // R, S
		DealtTo: [2]bool{true, true},
		Dealt:   func(r beaver.Request, _ int) int { return r.N },
		Deal: func(r beaver.Request, x beaver.Expansion, out [2][]uint64) error {
			u0, v0, u1, w1 := x.Local[0][0], x.Local[0][1], x.Local[1][0], x.Local[1][1]
			for i := range r.N {
				v := u0[i] + u1[i]
				out[0][i] = w1[i]
				out[1][i] = v*v - v0[i] - w1[i]
			}
			return nil
		},
		Assemble: func(r beaver.Request, party int, local [][]uint64, dealt []uint64) [][]uint64 {
			if party == 1 {
				return [][]uint64{local[0], dealt}
			}
			for i := range dealt {
				local[1][i] += dealt[i]
			}
			return local
		},
		Verify: func(r beaver.Request, _ []uint64, m0, m1 [][]uint64) error {
			for i := range r.N {
				v := m0[0][i] + m1[0][i]
				if v*v != m0[1][i]+m1[1][i] {
					return fmt.Errorf("%v: S ≠ R² at %d", r, i)
				}
			}
			return nil
		},
		Sample: beaver.Request{Kind: kindToy, N: 6},
	}
}

func init() {
	beaver.Register(toyCorrelation())
	ot.Register(kindToy, func(ctx context.Context, g *ot.Gen, it ot.Item) ([][]uint64, error) {
		s, err := g.SquarePairs(ctx, it.N)
		return [][]uint64{s.A, s.A2}, err
	})
	noOT := toyCorrelation()
	noOT.Kind, noOT.Name, noOT.Sample.Kind = kindNoOT, "toynoot", kindNoOT
	beaver.Register(noOT)
}

// TestToyKind: the in-process dealer, the networked dealer and the OT
// provider serve the toy kind; both parties' material satisfies it, and
// with a dealer both parties received dealer words.
func TestToyKind(t *testing.T) {
	for _, pk := range providerKinds {
		t.Run(pk.name, func(t *testing.T) {
			ps := pk.pair(t, beaver.SessionID{9})
			for _, n := range []int{1, 64, 1000} {
				for stream := range uint32(3) {
					checkItem(t, ps, beaver.Request{Kind: kindToy, Stream: stream, N: n})
				}
			}
			checkSequence(t, ps, []beaver.Request{{Kind: kindToy, Stream: 5, N: 3}, {Kind: kindToy, Stream: 5, N: 70}, {Kind: kindToy, Stream: 5, N: 1}})
			if pk.name == "networked dealer" {
				for p := range 2 {
					if st := ps[p].Stats(); st.BytesRecv < 8*3*(1+64+1000) {
						t.Errorf("party %d received %d bytes of dealer words", p, st.BytesRecv)
					}
				}
			}
			if r := (beaver.Request{Kind: kindToy, N: 5}); r.String() != "toysquare n=5 stream 0 #0" || r.CorrectionWords(0) != 5 || r.CorrectionWords(1) != 5 {
				t.Errorf("%v: %d and %d dealer words", r, r.CorrectionWords(0), r.CorrectionWords(1))
			}
		})
	}
}

// checkSequence draws rs (one stream) from both providers with
// DrawSequence (pipelined by a networked dealer's clients) and checks every
// item.
func checkSequence(t *testing.T, ps [2]beaver.Provider, rs []beaver.Request) {
	t.Helper()
	var got [2][]beaver.Material
	var errs [2]error
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = beaver.DrawSequence(context.Background(), ps[p], rs, func(_ int, m beaver.Material) error {
				got[p] = append(got[p], m)
				return nil
			})
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("party %d: sequence: %v", p, err)
		}
	}
	c, _ := beaver.Lookup(rs[0].Kind)
	for i, r := range rs {
		if err := c.Verify(r, nil, got[0][i].Parts, got[1][i].Parts); err != nil {
			t.Fatalf("sequence item %d: %v", i, err)
		}
	}
}

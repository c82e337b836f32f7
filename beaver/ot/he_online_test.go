package ot

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// onlineStream is the protocol stream of the tests' sessions (the
// providers' own streams start at DefaultStreamBase).
const onlineStream = 5

// onlineSessions returns both parties' protocol sessions on a fresh pipe,
// with bound providers whose weight masks are Lattices; wrap, when set,
// gives party 1's session another provider around its own.
func onlineSessions(t *testing.T, wrap func(*Provider) beaver.Provider) (ps [2]*Provider, ss [2]*protocol.Session) {
	t.Helper()
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	conns := [2]*transport.Conn{c0, c1}
	for i, c := range conns {
		var err error
		if ps[i], err = NewProvider(c, i, own(t, withLattice(t, LatticeOptions{}))); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var errs [2]error
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = ps[i].BindSession(ctx, testSID); errs[i] != nil {
				return
			}
			var prov beaver.Provider = ps[i]
			if i == 1 && wrap != nil {
				prov = wrap(ps[i])
			}
			ss[i], errs[i] = protocol.NewSession(ctx, i, conns[i].Stream(onlineStream), prov, share.DefaultFixedPoint)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("setup: %v / %v", errs[0], errs[1])
	}
	return ps, ss
}

// onlineProducts are the products of the online tests: a batch of two
// 3×k blocks and a single row, by two weights, in one MatMulWeightsMany.
var onlineProducts = []struct {
	id      uint64
	shape   []int // x's
	k, n    int
	batch   int
	rows, m int
}{
	{id: 11, shape: []int{2, 3, 6}, k: 6, n: 5, batch: 2, rows: 3, m: 6},
	{id: 12, shape: []int{1, 4}, k: 4, n: 7, batch: 1, rows: 1, m: 1},
}

// runOnline shares the weights, splits random operands between the
// parties and runs one MatMulWeightsMany at both; it returns the clear
// operands and weights, both parties' results and errors, and each
// session's traffic during the product.
func runOnline(t *testing.T, ss [2]*protocol.Session) (xs, ws [][]uint64, outs [2][]*share.Tensor, errs [2]error, cost [2]transport.Stats) {
	t.Helper()
	ctx := testCtx(t)
	prg := share.NewPRG(share.Seed{7}, "online test")
	var weights [2][]*protocol.Weight
	var shares [2][]*share.Tensor
	for _, p := range onlineProducts {
		w := prg.Words(p.k * p.n)
		x := prg.Words(p.m * p.k)
		x0 := prg.Words(len(x))
		ws, xs = append(ws, w), append(xs, x)
		shares[0] = append(shares[0], &share.Tensor{Shape: p.shape, Data: x0})
		x1 := make([]uint64, len(x))
		for i := range x {
			x1[i] = x[i] - x0[i]
		}
		shares[1] = append(shares[1], &share.Tensor{Shape: p.shape, Data: x1})
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, p := range onlineProducts {
				var wt *share.Tensor
				if i == 0 {
					wt = &share.Tensor{Shape: []int{p.k, p.n}, Data: ws[j]}
				}
				w, err := ss[i].ShareWeight(ctx, p.id, wt, p.k, p.n)
				if err != nil {
					errs[i] = err
					return
				}
				weights[i] = append(weights[i], w)
			}
			before := ss[i].Stream().Stats()
			outs[i], errs[i] = ss[i].MatMulWeightsMany(ctx, shares[i], weights[i])
			cost[i] = ss[i].Stream().Stats().Sub(before)
		}()
	}
	wg.Wait()
	return xs, ws, outs, errs, cost
}

// TestWeightsOnline: with a Lattice the products with the model owner's
// weights take their weight triples inside the computation, party 1's mask
// being its own share: the shares add up to X·W exactly; party 1 sends one
// message of exactly the items' outputs (no masked operand), party 0
// nothing; no weight triple is drawn, and a rehearsal on such a provider
// draws none either.
func TestWeightsOnline(t *testing.T) {
	ps, ss := onlineSessions(t, nil)
	if beaver.WeightsOnline(ss[1].Provider()) == nil {
		t.Fatal("a Lattice provider does not make weight triples inside the computation")
	}
	xs, ws, outs, errs, cost := runOnline(t, ss)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("party 0: %v; party 1: %v", errs[0], errs[1])
	}
	words := 0
	for j, p := range onlineProducts {
		want := matmul(xs[j], append([]uint64(nil), ws[j]...), 1, p.m, p.k, p.n)
		got := add(outs[0][j].Data, outs[1][j].Data)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("product %d word %d: %#x, want %#x", j, i, got[i], want[i])
			}
		}
		it, err := ps[0].lat().item(beaver.Request{Kind: beaver.KindWeightTriple, WeightID: p.id, M: p.m, K: p.k, N: p.n})
		if err != nil {
			t.Fatal(err)
		}
		words += it.words()
	}
	if want := protocol.MessageBytes(words); cost[1].BytesSent != want || cost[1].Rounds != 1 || cost[0].BytesSent != 0 || cost[0].Rounds != 1 {
		t.Errorf("party 1 sent %d bytes in %d rounds, party 0 %d in %d; want %d (%d words of outputs) and nothing, one round each",
			cost[1].BytesSent, cost[1].Rounds, cost[0].BytesSent, cost[0].Rounds, want, words)
	}
	for i, p := range ps {
		if n := p.Stats().Items; n != int64(len(onlineProducts)) {
			t.Errorf("party %d's provider served %d items, want the %d products'", i, n, len(onlineProducts))
		}
		if s := p.OTStats(); s.OTsSent+s.OTsReceived != 0 {
			t.Errorf("party %d's provider ran OTs (%+v): a weight triple was drawn from a stream", i, s)
		}
	}

	// The rehearsal of the same product on such a provider draws nothing;
	// on another provider one weight triple.
	op := func(ctx context.Context, s *protocol.Session) error {
		w, err := s.ShareWeight(ctx, 3, nil, 4, 2)
		if err != nil {
			return err
		}
		_, err = s.MatMulWeights(ctx, &share.Tensor{Shape: []int{2, 4}, Data: make([]uint64, 8)}, w)
		return err
	}
	for _, c := range []struct {
		name string
		opts []protocol.RehearsalOption
		want int
	}{{"lattice", protocol.RehearseFor(ps[1]), 0}, {"dealer", nil, 1}} {
		sc, err := protocol.Rehearse(testCtx(t), 1, onlineStream, share.DefaultFixedPoint, op, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if len(sc.Requests) != c.want {
			t.Errorf("%s: the rehearsal drew %v, want %d weight triple(s)", c.name, sc.Requests, c.want)
		}
	}
}

// tamperedProducer is party 1's provider that alters a word of its
// outputs of the first product before it sends them: a data owner that
// adds to what the model owner decrypts.
type tamperedProducer struct {
	*Provider
	word int
}

func (p *tamperedProducer) WeightProduct(ctx context.Context, r beaver.Request) (beaver.WeightProduct, error) {
	w, err := p.Provider.WeightProduct(ctx, r)
	if err != nil || r.WeightID != onlineProducts[0].id {
		return w, err
	}
	return &tamperedProduct{WeightProduct: w, word: p.word}, nil
}

type tamperedProduct struct {
	beaver.WeightProduct
	word int
}

func (p *tamperedProduct) Outputs(ctx context.Context, a []uint64) ([]uint64, []uint64, error) {
	msg, c, err := p.WeightProduct.Outputs(ctx, a)
	if err == nil {
		msg[p.word] ^= 1 << 3
	}
	return msg, c, err
}

// TestWeightsOnlineTampered: a data owner that alters its outputs (a word
// of the last output's ciphertext, or of its commitment) is caught by the
// model owner's check: the product fails with ErrCorrelationCheck and the
// provider binds no session after it.
func TestWeightsOnlineTampered(t *testing.T) {
	for _, c := range []struct {
		name string
		word int
	}{{"output", -heCommitWords - 9}, {"commitment", -1}} {
		t.Run(c.name, func(t *testing.T) {
			ps, ss := onlineSessions(t, func(p *Provider) beaver.Provider {
				it, err := p.lat().item(beaver.Request{Kind: beaver.KindWeightTriple, WeightID: onlineProducts[0].id,
					M: onlineProducts[0].m, K: onlineProducts[0].k, N: onlineProducts[0].n})
				if err != nil {
					t.Fatal(err)
				}
				return &tamperedProducer{Provider: p, word: it.words() + c.word}
			})
			_, _, _, errs, _ := runOnline(t, ss)
			if !errors.Is(errs[0], beaver.ErrCorrelationCheck) {
				t.Fatalf("party 0 accepted altered outputs: %v", errs[0])
			}
			if err := ps[0].BindSession(testCtx(t), beaver.SessionID{9}); !errors.Is(err, beaver.ErrCorrelationCheck) {
				t.Errorf("party 0's provider binds again after a failed check: %v", err)
			}
		})
	}
}

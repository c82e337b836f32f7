package selection

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// netOwners runs mo and do over a Pipe, each with a client of a networked
// dealer srv (over its own Pipe) connected with opts[party]; stopAfter > 0
// closes the data owner's connection after that many batches of phase 1 (a
// dropped link). It returns both errors and the data owner's client, still
// connected (closed at the test's end).
func netOwners(t *testing.T, srv *dealer.Server, mo *ModelOwner, do *DataOwner, opts [2]dealer.ConnectOptions, stopAfter int) ([2]*Result, [2]error, *dealer.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c0, c1 := transport.Pipe(transport.Options{})
	conns := [2]*transport.Conn{c0, c1}
	var clients [2]*dealer.Client
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	for party := range 2 {
		ds, dc := transport.Pipe(transport.Options{})
		t.Cleanup(func() { dc.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ds.Close()
			_ = srv.Serve(ctx, ds, party)
		}()
		cl, err := dealer.ConnectWith(ctx, dc, party, opts[party])
		if err != nil {
			t.Fatalf("party %d: connect to the dealer: %v", party, err)
		}
		clients[party] = cl
	}
	do.OnProgress = nil
	if stopAfter > 0 {
		var once sync.Once
		do.OnProgress = func(pr Progress) {
			if pr.Phase == 1 && pr.Done >= stopAfter {
				once.Do(func() { conns[1].Close() })
			}
		}
	}
	var res [2]*Result
	var errs [2]error
	var run sync.WaitGroup
	for party := range 2 {
		run.Add(1)
		go func() {
			defer run.Done()
			if party == 0 {
				res[0], errs[0] = mo.Run(ctx, conns[0], clients[0])
			} else {
				res[1], errs[1] = do.Run(ctx, conns[1], clients[1])
			}
		}()
	}
	// A failing Run closes its connection itself; a finished one leaves it
	// open until the peer has read its last message.
	run.Wait()
	conns[0].Close()
	conns[1].Close()
	return res, errs, clients[1]
}

// TestDealerBudgetHonestSelection runs the real pipeline (proxies generated
// from a tiny ViT inside the run, the secure forward, QuickSelect) against
// a networked dealer: the model owner announces the budget of its proxies'
// shapes (DealerBudget, derived before the proxies exist), the selection
// completes within it, and the bound is not loose: the dealer's recorded
// spend lies between a tenth of the budget and the budget. The budget is
// the one DealerBudget gives for the generated proxies' own architectures.
// Before the model owner announced a budget, the session's budget was the
// dealer's default, 2^50.
func TestDealerBudgetHonestSelection(t *testing.T) {
	f := newSecureFixture(t)
	mo, do := f.owners([2]string{})
	srv, err := dealer.NewServerWithSeeds(share.Seed{51}, share.Seed{52}, dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, errs, cl := netOwners(t, srv, mo, do, [2]dealer.ConnectOptions{}, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if len(res[0].Selected) != f.p.Budget-f.p.Bootstrap {
		t.Fatalf("selected %d", len(res[0].Selected))
	}
	id, _ := cl.Session()
	spent, budget, ok := srv.SessionWork(id)
	if !ok {
		t.Fatal("the dealer does not know the session")
	}
	ratio := float64(spent) / float64(budget)
	t.Logf("dealer work: %d of a budget of %d (%.3f)", spent, budget, ratio)
	if budget >= dealer.DefaultSessionBudget || spent > budget || spent*10 < budget {
		t.Fatalf("dealer work %d, session budget %d: want the budget within 10× of the work", spent, budget)
	}
	archs := make([]secure.Arch, len(mo.Proxies))
	for i, p := range mo.Proxies {
		if archs[i], err = secure.ArchOfProxy(p, f.target.Config.NumPatches()+1); err != nil {
			t.Fatal(err)
		}
	}
	want, err := DealerBudget(context.Background(), f.p, archs)
	if err != nil {
		t.Fatal(err)
	}
	if budget != want {
		t.Fatalf("announced budget %d, DealerBudget of the generated proxies %d", budget, want)
	}
}

// TestDealerBudgetCoversResume: a selection whose link drops in its last
// phase resumes from the parties' state directories against the same
// networked dealer, whose session keeps what it spent, and completes within
// the budget the model owner announced (the room DealerBudgetFactor leaves
// for resumes); the resumed model owner, which reloads its saved proxies,
// announces the same budget.
func TestDealerBudgetCoversResume(t *testing.T) {
	f := newSecureFixture(t)
	dirs := [2]string{t.TempDir(), t.TempDir()}
	srv, err := dealer.NewServerWithSeeds(share.Seed{55}, share.Seed{56}, dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mo, do := f.owners(dirs)
	_, errs, cl := netOwners(t, srv, mo, do, [2]dealer.ConnectOptions{}, 1)
	if errs[0] == nil && errs[1] == nil {
		t.Fatal("the interrupted run completed")
	}
	id, _ := cl.Session()
	first, announced, _ := srv.SessionWork(id)
	mo, do = f.owners(dirs)
	res, errs, cl := netOwners(t, srv, mo, do, [2]dealer.ConnectOptions{}, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if again, _ := cl.Session(); again != id || res[0].Epoch != 2 {
		t.Fatalf("resumed in another session or epoch %d", res[0].Epoch)
	}
	spent, budget, _ := srv.SessionWork(id)
	t.Logf("dealer work: %d before the drop, %d in all, of a budget of %d (%.3f)", first, spent, budget, float64(spent)/float64(budget))
	if spent > budget || budget >= dealer.DefaultSessionBudget || budget != announced {
		t.Fatalf("dealer work %d, budget %d (first run's %d)", spent, budget, announced)
	}
}

// TestDealerBudgetStopsGreedyDataOwner: a data owner that keeps drawing
// from the dealer after an honest selection (announcing a huge budget
// itself) is refused as soon as its draws would pass the budget the model
// owner announced from the selection's shapes, with a budget error. It
// used to be served up to the dealer's default of 2^50 work units.
func TestDealerBudgetStopsGreedyDataOwner(t *testing.T) {
	p := testParams()
	mk := func(party int) *valueEvaluator {
		return &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint, square: true}
	}
	mo := &ModelOwner{Params: p, Evaluator: mk(0), EmbeddingHash: "emb", Logger: quiet()}
	do := &DataOwner{Params: p, Evaluator: mk(1), EmbeddingHash: "emb", Logger: quiet()}
	srv, err := dealer.NewServerWithSeeds(share.Seed{53}, share.Seed{54}, dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, errs, cl := netOwners(t, srv, mo, do, [2]dealer.ConnectOptions{{}, {Budget: 1 << 60}}, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	want, err := dealerBudget(context.Background(), p, mk(0), make([]secure.Arch, len(p.Schedule)))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := cl.Session()
	spent, _, _ := srv.SessionWork(id)
	if spent == 0 || spent > want {
		t.Fatalf("the honest selection drew %d work units, the model owner's budget is %d", spent, want)
	}
	// Draw large triples on a stream of its own until refused: at most
	// what is left of the model owner's budget, plus the refused item.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	item := beaver.Request{Kind: beaver.KindTriple, Stream: 1 << 30, N: 1 << 14}
	limit := (want-spent)/item.DealerWork() + 1
	var drawn uint64
	var refusal error
	for range limit + 1 {
		if _, err := cl.Material(ctx, item); err != nil {
			refusal = err
			break
		}
		drawn++
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "budget exhausted") {
		t.Fatalf("after %d extra items (%d work units over an honest %d, announced %d): %v", drawn, drawn*item.DealerWork(), spent, want, refusal)
	}
	after, budget, _ := srv.SessionWork(id)
	if budget != want || after > want {
		t.Fatalf("session budget %d (model owner's %d), %d spent", budget, want, after)
	}
	t.Logf("honest selection %d work units, budget %d, greedy data owner refused after %d extra items (%d spent)", spent, want, drawn, after)
}

// workCounter is a Provider that sums the DealerWork of every request it
// serves (weight masks aside: the dealer never serves them).
type workCounter struct {
	beaver.Provider
	work atomic.Uint64
}

// Unwrap implements beaver.Wrapper.
func (w *workCounter) Unwrap() beaver.Provider { return w.Provider }

func (w *workCounter) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	w.work.Add(r.DealerWork())
	return w.Provider.Material(ctx, r)
}

// TestDealerBudgetShapes checks DealerBudget on two shapes (a two-phase ViT
// schedule without appraisal; a one-phase BERT with the threshold
// appraisal) and on exact modules with an FFN (the target's own blocks): the rehearsed work of preparing each phase's proxy and of one
// full batch equals what a real two-party run of them draws from a dealer,
// and the budget is DealerBudgetFactor times the sum of the documented
// terms.
func TestDealerBudgetShapes(t *testing.T) {
	vit := secure.Arch{Family: model.ViT, Layers: 2, Heads: 2, HeadDim: 8, Hidden: 16, Seq: 17, Labels: 10, MLPHidden: 8, Eps: 1e-12}
	vit1 := vit
	vit1.Layers = 1
	bert := secure.Arch{Family: model.BERT, Layers: 1, Heads: 2, HeadDim: 4, Hidden: 8, Seq: 12, Labels: 3, MLPHidden: 4, EntropyHidden: 16, SqrtEntropy: true,
		Ablation: proxy.Ablation{ExactLayerNorm: true}, Eps: 1e-12}
	exact := secure.Arch{Family: model.DistilBERT, Layers: 2, Heads: 2, HeadDim: 4, Hidden: 8, Seq: 6, Labels: 2, Intermediate: 16, Act: "gelu",
		Ablation: proxy.NoApprox, Eps: 1e-12}
	cases := []struct {
		name  string
		p     Params
		archs []secure.Arch
	}{
		{"vit two phases", Params{PoolSize: 96, Budget: 40, Bootstrap: 24, BatchSize: 16, Workers: 2,
			Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 2, MLPHidden: 8}}}},
			[]secure.Arch{vit1, vit}},
		{"bert threshold", Params{PoolSize: 1000, Budget: 120, Bootstrap: 20, BatchSize: 8, Appraisal: AppraiseThreshold,
			Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 4}}}},
			[]secure.Arch{bert}},
		{"exact modules and FFN, mean", Params{PoolSize: 50, Budget: 20, Bootstrap: 5, BatchSize: 4, Appraisal: AppraiseMean,
			Schedule: []Phase{{Keep: 0.6}, {}}},
			[]secure.Arch{exact, exact}},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.p.WithDefaults()
			perCmp, err := compareBlockWork(ctx, p.FixedPoint)
			if err != nil {
				t.Fatal(err)
			}
			var sum uint64
			n := p.PoolSize - p.Bootstrap
			for i, a := range c.archs {
				prep, batch, err := phaseWork(ctx, p, archEvaluator{}, i, a)
				if err != nil {
					t.Fatal(err)
				}
				realPrep, realBatch := realPhaseWork(t, a, p.BatchSize, uint64(i)<<32)
				if prep != realPrep || batch != realBatch || batch == 0 {
					t.Fatalf("phase %d: rehearsed work %d to prepare, %d a batch; a real run draws %d and %d", i, prep, batch, realPrep, realBatch)
				}
				nb := uint64((n + p.BatchSize - 1) / p.BatchSize)
				sum += prep + nb*batch + topKWork(n, p.keep(i), perCmp)
				n = p.keep(i)
			}
			if p.Appraisal != AppraiseNone {
				a, err := appraisalWork(ctx, p, n)
				if err != nil || a == 0 {
					t.Fatalf("appraisal work %d: %v", a, err)
				}
				sum += a
			}
			got, err := DealerBudget(ctx, c.p, c.archs)
			if err != nil {
				t.Fatal(err)
			}
			if got != DealerBudgetFactor*sum {
				t.Fatalf("DealerBudget %d, want %d·%d", got, DealerBudgetFactor, sum)
			}
			t.Logf("budget %d work units", got)
		})
	}
	if _, err := DealerBudget(ctx, cases[0].p, cases[0].archs[:1]); err == nil {
		t.Fatal("one architecture for two phases accepted")
	}
}

// realPhaseWork runs Prepare of a random network of arch and one batch of
// its forward between two parties on an in-process dealer and returns the
// dealer work each drew (the data owner's requests, which the model owner
// mirrors).
func realPhaseWork(t *testing.T, a secure.Arch, batch int, weightBase uint64) (prep, fwd uint64) {
	t.Helper()
	var works [2]uint64
	_, err := twoparty.Run(context.Background(), twoparty.Config{Seeds: [2]share.Seed{{3}, {4}}}, func(ctx context.Context, pt *twoparty.Party) (struct{}, error) {
		wc := &workCounter{Provider: pt.Provider}
		s, err := protocol.NewSession(ctx, pt.ID, pt.Conn.Stream(5), wc, share.DefaultFixedPoint)
		if err != nil {
			return struct{}{}, err
		}
		var net *secure.Net
		if pt.ID == 0 {
			if net, err = secure.RandomNet(a, 1); err != nil {
				return struct{}{}, err
			}
		}
		pr, err := secure.Prepare(ctx, s, a, net, secure.Options{WeightBase: weightBase})
		if err != nil {
			return struct{}{}, err
		}
		w0 := wc.work.Load()
		var in *secure.Batch
		if pt.ID == 1 {
			in = &secure.Batch{X: make([]float64, batch*a.Seq*a.Hidden), Mask: make([][]int, batch)}
			for b := range in.Mask {
				in.Mask[b] = make([]int, a.Seq)
				for j := range in.Mask[b] {
					in.Mask[b][j] = 1
				}
			}
		}
		if _, err := pr.Forward(ctx, s, batch, in); err != nil {
			return struct{}{}, err
		}
		if pt.ID == 1 {
			works = [2]uint64{w0, wc.work.Load() - w0}
		}
		return struct{}{}, nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return works[0], works[1]
}

// TestDealerBudgetCompareBlocks checks topKWork's premise: a comparison
// step of 64·j comparisons draws at most j times the work of one of 64.
func TestDealerBudgetCompareBlocks(t *testing.T) {
	ctx := context.Background()
	for _, fp := range []share.FixedPoint{share.DefaultFixedPoint, {FracBits: 20, IntBits: 20}} {
		per, err := compareBlockWork(ctx, fp)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []int{1, 63, 64, 65, 200, 1000} {
			w, err := compareWork(ctx, fp, m)
			if err != nil {
				t.Fatal(err)
			}
			if j := uint64((m + 63) / 64); w > j*per || w == 0 {
				t.Fatalf("f=%d: %d comparisons draw %d work units, more than %d·%d", fp.FracBits, m, w, j, per)
			}
		}
	}
}

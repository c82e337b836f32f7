package selection

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection/pool"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/transport"
)

// valueItems are n candidates' canonical bytes that name their index
// (8 bytes) and pool (tag), so that two pools of equal sizes and shapes
// differ in every candidate.
func valueItems(n int, tag byte) purchase.ByteItems {
	out := make(purchase.ByteItems, n)
	for i := range out {
		b := binary.LittleEndian.AppendUint64(nil, uint64(i))
		out[i] = append(b, tag, byte(i*7), byte(i*13))
	}
	return out
}

// valueScore is the audit's plaintext score of valueItems under testValue
// (the value the substitute forward shared).
func valueScore(phase int, items [][]byte) ([]float64, error) {
	out := make([]float64, len(items))
	for j, b := range items {
		if len(b) < 8 {
			return nil, errors.New("short item")
		}
		out[j] = testValue(phase, int(binary.LittleEndian.Uint64(b)))
	}
	return out, nil
}

// valueAudit audits valueItems against the revealed orders, with the
// tolerance of the substitute forward: twice the encoding's rounding.
func valueAudit(orders []purchase.PhaseOrder) *purchase.Audit {
	tol := make([]float64, len(orders))
	for i := range tol {
		tol[i] = 2 * share.DefaultFixedPoint.Decode(1)
	}
	return &purchase.Audit{Phases: orders, Score: valueScore, Tolerance: tol}
}

// deliverAndVerify delivers the data owner's bundle (from its state
// directory) and verifies it against the model owner's checkpoint, with
// the audit; edit, if set, rewrites the bundle's records first.
func deliverAndVerify(t *testing.T, dirs [2]string, items purchase.Items, edit func(purchase.Opening) purchase.Opening) *purchase.Report {
	t.Helper()
	var b bytes.Buffer
	do := &DataOwner{StateDir: dirs[1], Items: items}
	if err := do.Deliver(&b, purchase.Format{}); err != nil {
		t.Fatal(err)
	}
	bundle := b.Bytes()
	if edit != nil {
		bundle = sessiontest.RewriteBundle(t, bundle, edit)
	}
	res, err := ReadPurchase(dirs[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	want, orders, err := res.Purchase()
	if err != nil {
		t.Fatal(err)
	}
	rep, err := purchase.Verify(bytes.NewReader(bundle), want, valueAudit(orders))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// revealedOutcomes counts, from the model owner's checkpoint, the order
// relations the audit of rep's candidates should check: per phase, each
// ordered pair of its audited candidates that survived the phase in
// different tiers.
func revealedOutcomes(t *testing.T, dir string, rep *purchase.Report) int {
	t.Helper()
	res, err := ReadPurchase(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, orders, err := res.Purchase()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range orders {
		var tiers []int
		for _, it := range rep.Items {
			if j, ok := slices.BinarySearch(o.Survivors, it.Index); ok && it.Audit != nil {
				tiers = append(tiers, o.Tiers[j])
			}
		}
		for _, a := range tiers {
			for _, b := range tiers {
				if a != b {
					n++
				}
			}
		}
	}
	return n
}

// flagged returns the pool indices the report's audit flags.
func flagged(rep *purchase.Report) []int {
	var out []int
	for _, it := range rep.Items {
		if it.Audit != nil && it.Audit.Flagged() {
			out = append(out, it.Index)
		}
	}
	return out
}

// suspects returns the pool indices the report's audit suspects.
func suspects(rep *purchase.Report) []int {
	var out []int
	for _, it := range rep.Items {
		if it.Audit != nil && it.Audit.Suspect {
			out = append(out, it.Index)
		}
	}
	return out
}

// failing returns the pool indices of the report's items with a problem.
func failing(rep *purchase.Report) []int {
	var out []int
	for _, it := range rep.Items {
		if it.Problem != "" {
			out = append(out, it.Index)
		}
	}
	return out
}

// TestPurchaseDeliverVerify: a data owner with Items commits to its pool
// in the handshake; both parties record the same root, the data owner's
// bundle of the purchase (bootstrap and selected, from its state
// directory) verifies against the model owner's checkpoint, and the audit
// checks every selected candidate against the revealed order and flags
// none; a bundle whose items of two selected candidates come from another
// pool of the same sizes fails on exactly those two.
func TestPurchaseDeliverVerify(t *testing.T) {
	p := testParams()
	items := valueItems(p.PoolSize, 'A')
	dirs := [2]string{t.TempDir(), t.TempDir()}
	// A fixed coin: with some coins (about 1 run in 460) every purchased
	// candidate shares one tier in every phase and the audit has no
	// outcome to check.
	coins := [2][]byte{bytes.Repeat([]byte{5}, 32), bytes.Repeat([]byte{6}, 32)}
	res, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, items: items, coins: coins})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	c0, c1 := res[0].Commitment, res[1].Commitment
	if c0 == nil || c1 == nil || *c0 != *c1 || c0.PoolSize != p.PoolSize {
		t.Fatalf("commitments %+v and %+v", c0, c1)
	}
	if !slices.Equal(res[0].Tiers[1], res[1].Tiers[1]) || len(res[0].Tiers[1]) != len(res[0].Selected) {
		t.Fatalf("tiers %v and %v for %d selected", res[0].Tiers, res[1].Tiers, len(res[0].Selected))
	}
	if res[0].OpeningBytes == 0 || res[0].OpeningBytes != res[1].OpeningBytes {
		t.Fatalf("opening bytes %d and %d", res[0].OpeningBytes, res[1].OpeningBytes)
	}
	rep := deliverAndVerify(t, dirs, items, nil)
	if !rep.OK() || rep.Verified != p.Budget || rep.Audited != len(res[0].Selected) {
		t.Fatalf("honest delivery: %+v", rep)
	}
	outcomes := 0
	for _, it := range rep.Items {
		if it.Audit != nil {
			outcomes += it.Audit.Outcomes
		}
	}
	if want := revealedOutcomes(t, dirs[0], rep); outcomes != want || want == 0 {
		t.Fatalf("the audit checked %d outcomes, the revealed tiers hold %d", outcomes, want)
	}
	poolB := valueItems(p.PoolSize, 'B')
	swapped := []int{res[0].Selected[1], res[0].Selected[4]}
	rep = deliverAndVerify(t, dirs, items, func(op purchase.Opening) purchase.Opening {
		if slices.Contains(swapped, op.Index) {
			op.Item = poolB[op.Index]
		}
		return op
	})
	if got := failing(rep); !slices.Equal(got, swapped) || rep.OK() {
		t.Fatalf("pool B's items for %v: failing %v", swapped, got)
	}
	// The data owner refuses to deliver from another pool than it
	// committed to.
	if err := (&DataOwner{StateDir: dirs[1], Items: poolB}).Deliver(io.Discard, purchase.Format{}); err == nil {
		t.Fatal("a delivery from another pool was written")
	}
}

// TestAuditFlagsShiftedShares: a data owner that adds an offset to its
// share of some candidates' scores in every phase buys them a place in the
// selection; the audit of the delivery (honest data, the committed pool)
// flags each of them, where an honest run's audit flags none. Lifted here
// are the three candidates of lowest value, so every honest purchased
// candidate revealed behind them contradicts it: README.md's "The
// purchase" gives the probability for candidates lifted at random. Without
// the audit the delivery verifies: the commitment alone cannot see it.
func TestAuditFlagsShiftedShares(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"two phases", testParams()},
		{"one sort step", Params{PoolSize: 60, Budget: 24, Bootstrap: 4, BatchSize: 16, Workers: 2,
			Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 1, MLPHidden: 2}}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			items := valueItems(p.PoolSize, 'A')
			// The three candidates of lowest value in every phase.
			order := make([]int, p.PoolSize)
			for i := range order {
				order[i] = i
			}
			slices.SortFunc(order, func(a, b int) int {
				va, vb := testValue(0, a)+testValue(1, a), testValue(0, b)+testValue(1, b)
				if va < vb {
					return -1
				}
				return 1
			})
			var lifted []int
			coins := [2][]byte{bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)}
			boot := sampleBootstrap(coinSeed(coins[0], coins[1]), p.PoolSize, p.Bootstrap)
			for _, i := range order {
				if len(lifted) < 3 && !slices.Contains(boot, i) {
					lifted = append(lifted, i)
				}
			}
			slices.Sort(lifted)
			for _, shift := range []bool{false, true} {
				dirs := [2]string{t.TempDir(), t.TempDir()}
				cfg := runCfg{p: [2]Params{p, p}, dirs: dirs, items: items, coins: coins}
				if shift {
					cfg.shareOffset = func(phase, idx int) float64 {
						if slices.Contains(lifted, idx) {
							return 20
						}
						return 0
					}
				}
				res, errs := runSelection(t, cfg)
				if errs[0] != nil || errs[1] != nil {
					t.Fatal(errs)
				}
				rep := deliverAndVerify(t, dirs, items, nil)
				if rep.Failed != 0 {
					t.Fatalf("shift %v: the delivery fails verification: %v", shift, failing(rep))
				}
				got := flagged(rep)
				if !shift {
					if len(got) != 0 {
						t.Fatalf("an honest run: the audit flags %v", got)
					}
					continue
				}
				for _, i := range lifted {
					if !slices.Contains(res[0].Selected, i) {
						t.Fatalf("lifted candidate %d not selected", i)
					}
					if !slices.Contains(got, i) {
						t.Errorf("lifted candidate %d not flagged (flagged %v)", i, got)
					}
				}
				if s := suspects(rep); !slices.Equal(s, lifted) {
					t.Errorf("suspects %v, want the lifted %v (flagged %v)", s, lifted, got)
				}
			}
		})
	}
}

// TestResumeWithAnotherRootRefused: a session's root is recorded by both
// parties; a data owner that comes back with a fresh state directory (a new
// seed, so a new root) is refused by the model owner in the handshake (a
// "pool_root" mismatch, before the coin), and one that comes back with its
// state but another pool refuses itself before saying anything. A model
// owner that requires a commitment (ItemInput) refuses a data owner
// without one.
func TestResumeWithAnotherRootRefused(t *testing.T) {
	p := testParams()
	items := valueItems(p.PoolSize, 'A')
	dirs := [2]string{t.TempDir(), t.TempDir()}
	if _, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, items: items}); errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: [2]string{dirs[0], t.TempDir()}, items: items})
	var me, me1 *MismatchError
	var pa *PeerAbortError
	if !errors.As(errs[0], &me) || me.Field != "pool_root" || !errors.As(errs[1], &me1) || me1.Field != "pool_root" {
		t.Fatalf("a new root on resume: %v / %v", errs[0], errs[1])
	}
	_, errs = runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, items: valueItems(p.PoolSize, 'B')})
	if !errors.As(errs[0], &pa) || pa.Code != AbortInput {
		t.Fatalf("another pool on resume: %v / %v", errs[0], errs[1])
	}
	_, errs = runSelection(t, runCfg{p: [2]Params{p, p}, itemInput: func([][]byte, int) (model.Input, error) { return model.Input{}, nil }})
	if !errors.As(errs[0], &me) || me.Field != "pool_root" {
		t.Fatalf("no commitment to a model owner that requires one: %v / %v", errs[0], errs[1])
	}
}

// TestBootstrapOpeningRefused: the model owner checks every bootstrap
// point against the data owner's commitment before it labels anything. A
// data owner whose bootstrap points are not the candidates it committed
// to (pool A committed, pool B's inputs sent and its items opened with
// pool A's salts and paths: only the openings' check sees it, with or
// without ItemInput), or whose bootstrap inputs are not those of the
// candidates it opens (only the inputs' comparison sees it), is refused
// with AbortOpening, and the Label function is never called; the honest
// data owner's bootstrap is labelled from the committed candidates.
// Each dishonest case fails if its check in receiveOpenings is removed.
func TestBootstrapOpeningRefused(t *testing.T) {
	const n = 48
	both, _, target := sessiontest.TinyViT(t, 2*n)
	poolA, _ := both.Select(seqInts(0, n))
	poolB, _ := both.Select(seqInts(n, 2*n))
	pa, pb := imagePool(poolA, target.Config), imagePool(poolB, target.Config)
	input := func(p *pool.Pool) model.Input {
		return model.NormalizeImages(p.Images.Pixels, target.Config.NumChannels)
	}
	itemInput := imageItemInput(target.Config)
	params := Params{PoolSize: n, Budget: 20, Bootstrap: 8, BatchSize: 16, Workers: 2,
		Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 1, MLPHidden: 4}}}}
	for _, c := range []struct {
		name  string
		items purchase.Items
		rows  model.Input
		// noItemInput: the model owner cannot turn items into inputs
		// (a text target without a tokenizer); it checks the openings
		// only.
		noItemInput bool
		code        AbortCode
	}{
		{"points of another pool than committed", &switchItems{a: pa, b: pb}, input(pb), false, AbortOpening},
		{"points of another pool, no ItemInput", &switchItems{a: pa, b: pb}, input(pa), true, AbortOpening},
		{"items switched after the commitment", &switchItems{a: pa, b: pb}, input(pa), false, AbortOpening},
		{"inputs of another pool", pa, input(pb), false, AbortOpening},
		{"honest", pa, input(pa), false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			labelled := false
			stop := errors.New("stop after the label")
			errs := pair(t, [2]share.Seed{{3}, {4}}, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
				if party == 0 {
					mo := &ModelOwner{Params: params, Target: target, ItemInput: itemInput, RequireCommitment: true, Logger: quiet(), Generate: sessiontest.PlainGeneration(quiet()),
						Label: func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
							labelled = true
							if want, _ := input(pa).Select(idx); !sameInput(in, want) {
								t.Error("the labelled inputs are not the committed candidates'")
							}
							return nil, stop // no proxies needed: the bootstrap check is done
						}}
					if c.noItemInput {
						mo.ItemInput = nil
					}
					_, err := mo.Run(ctx, conn, prov)
					return err
				}
				do := &DataOwner{Params: params, Pool: c.rows, Embedding: target, Items: c.items, Logger: quiet()}
				_, err := do.Run(ctx, conn, prov)
				return err
			})
			if c.code == 0 {
				if !labelled {
					t.Fatalf("the honest bootstrap was not labelled: %v", errs)
				}
				return
			}
			var pe *PeerAbortError
			if labelled || !errors.As(errs[1], &pe) || pe.Code != c.code {
				t.Fatalf("labelled %v; errors %v / %v", labelled, errs[0], errs[1])
			}
		})
	}
}

// switchItems are pool a's candidates at their first read (the
// commitment), pool b's afterwards (the openings).
type switchItems struct {
	a, b  *pool.Pool
	mu    sync.Mutex
	reads map[int]int
}

func (s *switchItems) Len() int { return s.a.Len() }
func (s *switchItems) AppendItem(dst []byte, i int) ([]byte, error) {
	s.mu.Lock()
	if s.reads == nil {
		s.reads = map[int]int{}
	}
	s.reads[i]++
	again := s.reads[i] > 1
	s.mu.Unlock()
	if again {
		return s.b.AppendItem(dst, i)
	}
	return s.a.AppendItem(dst, i)
}

// imagePool is the pool of grey images whose model input (of a ViT of
// configuration cfg) is in: the pixels quantised to bytes, as a pool file
// holds them.
func imagePool(in model.Input, cfg model.Config) *pool.Pool {
	px := make([][]float64, in.Len())
	for i, row := range in.Pixels {
		px[i] = make([]float64, len(row)/cfg.NumChannels)
		for j := range px[i] {
			px[i][j] = float64(uint8((row[j]+1)/2*255+0.5)) / 255
		}
	}
	return &pool.Pool{Images: &pool.Images{Width: cfg.ImageSize, Height: cfg.ImageSize, Pixels: px}}
}

// imageItemInput is the model owner's ItemInput for a ViT of
// configuration cfg: the committed images as its input.
func imageItemInput(cfg model.Config) func(items [][]byte, seq int) (model.Input, error) {
	return func(items [][]byte, seq int) (model.Input, error) {
		p, err := pool.FromItems(pool.KindImages, cfg.ImageSize, cfg.ImageSize, items)
		if err != nil {
			return model.Input{}, err
		}
		return p.Input(cfg, nil, 0)
	}
}

// checkProxyDelivery delivers the purchase of the data owner do (its
// StateDir, or its last Run) and verifies it against the model owner's
// result res with the audit of the proxies' plaintext scores at the
// documented tolerance: every purchased candidate verifies, every selected
// one is audited, none is flagged.
func checkProxyDelivery(t *testing.T, do *DataOwner, res *Result, proxies []*proxy.Proxy, cfg model.Config) {
	t.Helper()
	var b bytes.Buffer
	if err := do.Deliver(&b, purchase.Format{Kind: purchase.KindImages, Width: cfg.ImageSize, Height: cfg.ImageSize, Channels: 1}); err != nil {
		t.Fatal(err)
	}
	want, orders, err := res.Purchase()
	if err != nil {
		t.Fatal(err)
	}
	seq := res.Commitment.Seq
	in := imageItemInput(cfg)
	a := &purchase.Audit{Phases: orders, Score: purchase.ProxyScorer(proxies, func(items [][]byte) (model.Input, error) { return in(items, seq) })}
	for _, p := range proxies {
		tol, err := purchase.ProxyTolerance(p, seq)
		if err != nil {
			t.Fatal(err)
		}
		a.Tolerance = append(a.Tolerance, tol)
	}
	rep, err := purchase.Verify(&b, want, a)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := 0
	for _, it := range rep.Items {
		if it.Audit != nil {
			outcomes += it.Audit.Outcomes
		}
	}
	if !rep.OK() || rep.Verified != len(want.Indices) || rep.Audited != len(res.Selected) || outcomes == 0 {
		t.Fatalf("an honest delivery: verified %d of %d, failed %d, audited %d of %d in %d outcomes, flagged %d (%v)",
			rep.Verified, len(want.Indices), rep.Failed, rep.Audited, len(res.Selected), outcomes/2, rep.Flagged, flagged(rep))
	}
	t.Logf("delivery of %d candidates verified; audit: %d selected checked in %d outcomes at tolerances %v, none flagged", rep.Verified, rep.Audited, outcomes/2, a.Tolerance)
}

func seqInts(lo, hi int) []int {
	out := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// TestPurchaseSharded: in a sharded selection the coordinators keep the
// commitment (the root is over the whole pool, the workers never see it)
// and the revealed order, so the delivery of a sharded run verifies and
// audits as an unsharded one's.
func TestPurchaseSharded(t *testing.T) {
	p := testParams()
	items := valueItems(p.PoolSize, 'A')
	dirs := [2]string{t.TempDir(), t.TempDir()}
	runner := phaseRunner{k: 2, f: clearShares}
	res, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, items: items, shards: [2]ShardRunner{runner, runner}})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if res[0].Commitment == nil || *res[0].Commitment != *res[1].Commitment {
		t.Fatalf("commitments %+v, %+v", res[0].Commitment, res[1].Commitment)
	}
	if rep := deliverAndVerify(t, dirs, items, nil); !rep.OK() || rep.Audited != len(res[0].Selected) {
		t.Fatalf("sharded delivery: %+v", rep)
	}
}

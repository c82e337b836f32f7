package selection

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection/pool"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/transport"
)

// TestSecureSelectionMatchesPlaintext runs the real pipeline: a tiny ViT
// target, proxies generated from the bootstrap inside the run, the secure
// forward, QuickSelect; the choice must equal the plaintext pipeline's on the
// same proxies except for candidates whose plaintext entropies lie within the
// secure forward's error of the selection boundary.
// secureFixture is a tiny ViT target (untrained: its entropies are all
// near ln 10, many near-ties) with 96 MNIST candidates.
type secureFixture struct {
	pool model.Input
	// items are the pool's images as the data owner commits to them.
	items  *pool.Pool
	labels []int
	target *model.Model
	p      Params
	gen    proxy.Config
	ctrl   [2]transport.Stats // each party's control-stream traffic in the last run
}

func newSecureFixture(t *testing.T) *secureFixture {
	t.Helper()
	pool, labels, target := sessiontest.TinyViT(t, 96)
	return &secureFixture{pool: pool, labels: labels, target: target, items: imagePool(pool, target.Config),
		p: Params{PoolSize: pool.Len(), Budget: 40, Bootstrap: 24, BatchSize: 16, Workers: 2,
			Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 2, MLPHidden: 8}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 2, MLPHidden: 8}}}},
		gen: sessiontest.PlainGeneration(quiet())}
}

func (f *secureFixture) owners(dirs [2]string) (*ModelOwner, *DataOwner) {
	mo := &ModelOwner{Params: f.p, Target: f.target, Generate: f.gen, Logger: quiet(), StateDir: dirs[0],
		Label: sessiontest.Labels(f.labels), ItemInput: imageItemInput(f.target.Config)}
	do := &DataOwner{Params: f.p, Pool: f.pool, Embedding: f.target, Logger: quiet(), StateDir: dirs[1], Items: f.items}
	return mo, do
}

// run runs both owners; stopAfter > 0 closes the data owner's connection
// after that many batches (a dropped link).
func (f *secureFixture) run(t *testing.T, mo *ModelOwner, do *DataOwner, stopAfter int) ([2]*Result, [2]error) {
	t.Helper()
	var res [2]*Result
	errs := pair(t, [2]share.Seed{{5}, {6}}, func(ctx context.Context, party int, c *transport.Conn, prov beaver.Provider) error {
		var err error
		defer func() { f.ctrl[party] = c.Stream(StreamControl).Stats() }()
		if party == 0 {
			res[0], err = mo.Run(ctx, c, prov)
		} else {
			if stopAfter > 0 {
				var once sync.Once
				do.OnProgress = func(pr Progress) {
					if pr.Phase == 1 && pr.Done >= stopAfter {
						once.Do(func() { c.Close() })
					}
				}
			}
			res[1], err = do.Run(ctx, c, prov)
		}
		return err
	})
	return res, errs
}

// TestSecureSelectionMatchesPlaintext runs the real pipeline: a tiny ViT
// target, proxies generated from the bootstrap inside the run, the secure
// forward, QuickSelect; the choice must equal the plaintext pipeline's on the
// same proxies except for candidates whose plaintext entropies lie within the
// secure forward's error of the selection boundary.
func TestSecureSelectionMatchesPlaintext(t *testing.T) {
	start := time.Now()
	f := newSecureFixture(t)
	mo, do := f.owners([2]string{})
	res, errs := f.run(t, mo, do, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if !slices.Equal(res[0].Selected, res[1].Selected) {
		t.Fatal("parties disagree")
	}
	checkPlain(t, mo.Proxies, f.pool, f.p, res[0])
	// The purchase, from this data owner's memory (no state directory).
	checkProxyDelivery(t, do, res[0], mo.Proxies, f.target.Config)
	// The bootstrap inputs travel uncompressed on the control stream: the
	// length of a compressed bootstrap would depend on the data owner's
	// private points.
	boot, err := f.pool.Select(res[0].Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := json.Marshal(boot)
	if err != nil {
		t.Fatal(err)
	}
	if sent := f.ctrl[1].BytesSent; sent < int64(len(plain)) {
		t.Errorf("data owner sent %d control bytes for a %d-byte bootstrap message: compressed", sent, len(plain))
	}
	t.Logf("control stream: data owner sent %d bytes (bootstrap JSON %d bytes); total %v", f.ctrl[1].BytesSent, len(plain), time.Since(start).Round(time.Millisecond))
}

// TestSecureResume drops the link in phase 1, then restarts both parties
// from their state directories with the SAME dealer seeds: the model owner
// reloads its saved proxies (its Label would now fail), finished batches are
// not redone, and the result is the plaintext pipeline's (near-ties apart).
func TestSecureResume(t *testing.T) {
	f := newSecureFixture(t)
	// Directories the parties create (owner-only, checked at the end).
	dirs := [2]string{filepath.Join(t.TempDir(), "mo"), filepath.Join(t.TempDir(), "do")}
	mo, do := f.owners(dirs)
	if _, errs := f.run(t, mo, do, 1); errs[0] == nil || errs[1] == nil {
		t.Fatalf("interrupted run: %v", errs)
	}
	mo, do = f.owners(dirs)
	mo.Label = func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
		return nil, fmt.Errorf("labelled again")
	}
	res, errs := f.run(t, mo, do, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if !slices.Equal(res[0].Selected, res[1].Selected) {
		t.Fatal("parties disagree")
	}
	if res[0].Phases[0].Batches != res[0].Phases[0].Resumed || res[0].Phases[0].Comparisons != 0 {
		t.Fatalf("phase 0 redone: %+v", res[0].Phases[0])
	}
	if res[0].Phases[1].Resumed == 0 {
		t.Fatalf("phase 1 resumed nothing: %+v", res[0].Phases[1])
	}
	checkPlain(t, mo.Proxies, f.pool, f.p, res[0])
	// State, batch shares and the saved proxies are owner-only.
	checkPrivateModes(t, dirs[0])
	checkPrivateModes(t, dirs[1])
}

// TestLabelsNeverAskedTwice: the data owner vanishes while the model owner
// generates the proxies, after the bootstrap was labelled; restarted with
// their state directories, both meet on the same coin, the data owner
// re-sends the same points, and the model owner reuses the labels its
// checkpoint recorded the moment they existed: Label is called once in
// all (issue 39: a restart asked the annotators again; fails on the old
// code, where the second run calls Label).
func TestLabelsNeverAskedTwice(t *testing.T) {
	f := newSecureFixture(t)
	dirs := [2]string{filepath.Join(t.TempDir(), "mo"), filepath.Join(t.TempDir(), "do")}
	var calls atomic.Int32
	counting := func(drop func()) Labeler {
		return func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
			calls.Add(1)
			labels, err := sessiontest.Labels(f.labels)(ctx, idx, in)
			if drop != nil {
				drop() // the data owner dies as generation starts
			}
			return labels, err
		}
	}
	mo, do := f.owners(dirs)
	var doConn atomic.Pointer[transport.Conn]
	mo.Label = counting(func() { doConn.Load().Close() })
	errs := pair(t, [2]share.Seed{{5}, {6}}, func(ctx context.Context, party int, c *transport.Conn, prov beaver.Provider) error {
		if party == 0 {
			_, err := mo.Run(ctx, c, prov)
			return err
		}
		doConn.Store(c)
		_, err := do.Run(ctx, c, prov)
		return err
	})
	if errs[0] == nil {
		t.Fatal("the model owner finished although its peer vanished during generation")
	}
	b, err := os.ReadFile(StateFile(dirs[0], 0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.BootstrapDone || st.Labelled == nil || len(st.Labelled.Labels) != f.p.Bootstrap {
		t.Fatalf("after the interrupted generation: bootstrap done %v, labels %+v; want the labels recorded, the bootstrap not done", st.BootstrapDone, st.Labelled)
	}
	mo, do = f.owners(dirs)
	mo.Label = counting(nil)
	res, errs := f.run(t, mo, do, 0)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("Label called %d times; want once", n)
	}
	if !slices.Equal(res[0].Bootstrap, st.Labelled.Bootstrap) || !slices.Equal(res[0].Selected, res[1].Selected) {
		t.Fatalf("bootstrap %v (labelled %v), selected %v / %v", res[0].Bootstrap, st.Labelled.Bootstrap, res[0].Selected, res[1].Selected)
	}
}

// checkPlain compares a secure selection with the plaintext pipeline on the
// same proxies, phase by phase from the run's own candidates: every
// difference must be a candidate whose plaintext entropy lies within
// sessiontest.SecureScoreTol of the phase's boundary (a near-tie the secure
// forward's fixed-point error may order either way).
func checkPlain(t *testing.T, proxies []*proxy.Proxy, pool model.Input, p Params, res *Result) {
	t.Helper()
	scores := sessiontest.ProxyScores(proxies, pool)
	cand := candidates(pool.Len(), res.Bootstrap)
	for i := range proxies {
		ent, err := scores(i, cand)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for _, q := range plainTopK(ent, cand, p.keep(i)) {
			want = append(want, cand[q])
		}
		got := res.Survivors[i]
		diff, err := sessiontest.NearTies(cand, ent, want, got, sessiontest.SecureScoreTol)
		if err != nil {
			t.Errorf("phase %d: the secure survivors against the plaintext: %v", i, err)
		}
		t.Logf("phase %d: %d in, %d out, %d differ from plaintext (near-ties); stats %+v", i, len(cand), len(got), diff, res.Phases[i])
		cand = got
	}
}

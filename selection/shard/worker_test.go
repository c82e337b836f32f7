package shard

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/internal/testhook"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// shardRig runs sharded selections in one process: the two coordinators
// over a pipe, each with a Workers of K workers attached over pipes of
// their own, the worker pairs meeting through per-shard channels (a new
// pipe for every attempt), with the in-process dealer or, free, the
// dealer-free ot.Provider on each pair's connection.
type shardRig struct {
	t     *testing.T
	K     int
	free  bool
	p     selection.Params
	dirs  [2]string
	wdirs [2][]string
	// dealer serves the worker pairs (free false).
	dealer  *dealer.Dealer
	workers [2]*Workers
	pairs   []chan *transport.Conn

	mu sync.Mutex
	// words[p][k] holds the words worker (p, k) drew, one list per life.
	words [2][][][]uint64
	// calls[p][k] counts the real forwards per life of worker (p, k).
	calls [2][][]int
	// kill, if set, is asked before each forward of worker (p, k) in its
	// life; true kills the worker (its process "dies") and restarts it.
	kill func(p, k, life, call int) bool
	// secure, if set, runs the real secure forward: the fixture's owners
	// with the given proxies, real workers (the model owner's with the
	// jobs' proxies, the data owner's with its pool and embedding).
	secure  *secureFixture
	proxies []*proxy.Proxy
	// pairConns[p] holds every pair connection party p's workers opened,
	// pairPhases[p] the phase of each; ctrl[p] is the coordinators' clear
	// control stream's figures.
	pairConns  [2][]*transport.Conn
	pairPhases [2][]int
	ctrl       [2]transport.Stats
	coord      [2]*transport.Conn
	// server, if set, serves the worker pairs as a networked dealer (each
	// attempt a client of its own, unwrapped).
	server *dealer.Server
	// jobs counts the jobs each coordinator sent, by party and phase;
	// sent holds them.
	jobs [2]map[int]int
	sent [2][]*Job
	// stopAfter > 0 makes the data owner's coordinator drop the
	// coordinators' connection once that many batches of phase 1 are
	// recorded (both coordinators fail: a coordinator crash), then calls
	// onStop if set.
	stopAfter int
	onStop    func()
	// gate, if set, is called before each batch a worker evaluates (party,
	// shard, phase): a test holds a shard back with it.
	gate func(p, k, phase int)
	// floors holds the Floor of each job each coordinator sent, as sent
	// (sent's order).
	floors [2][]uint64
	// onRestart, if set, is called before a killed worker (p, k) is
	// restarted (a test wipes its directory: a replaced pod).
	onRestart func(p, k int)
	// forge, if set, is party p's workers' forgeEpoch (a lying worker).
	forge [2]func(uint64) uint64
}

// killWorker00 is a kill that ends worker (0, 0)'s first life at its
// fourth batch of phase 1, once that life has drawn at least minWords
// words: the batches before the fourth run beside it (Params.Workers), and
// under load (2 cores, the race detector) the fourth could start before
// the second had drawn its words, and the life drew too few for a test to
// tell its words apart. It waits up to 10 s for them, then kills anyway.
func (r *shardRig) killWorker00(minWords int) func(p, k, life, call int) bool {
	return func(p, k, life, call int) bool {
		if p != 0 || k != 0 || life != 0 || call != 4 {
			return false
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			r.mu.Lock()
			n := len(r.words[0][0][0])
			r.mu.Unlock()
			if n >= minWords {
				break
			}
		}
		return true
	}
}

// countingRunner counts the jobs a coordinator sends.
type countingRunner struct {
	*Workers
	r *shardRig
	p int
}

func (c countingRunner) RunPhase(ctx context.Context, ph *selection.ShardedPhase) error {
	return runPhase(ctx, ph, c.Workers.Shards(), func(ctx context.Context, job *Job) (*Result, error) {
		c.r.mu.Lock()
		if c.r.jobs[c.p] == nil {
			c.r.jobs[c.p] = map[int]int{}
		}
		c.r.jobs[c.p][job.Phase]++
		c.r.sent[c.p] = append(c.r.sent[c.p], job)
		c.r.floors[c.p] = append(c.r.floors[c.p], job.Floor)
		c.r.mu.Unlock()
		return c.Workers.runJob(ctx, job)
	})
}

// counting is party p's Workers, its jobs counted.
func (r *shardRig) counting(p int) selection.ShardRunner {
	return countingRunner{Workers: r.workers[p], r: r, p: p}
}

// resetWorkers gives both coordinators new Workers (a restarted
// coordinator's).
func (r *shardRig) resetWorkers() {
	for p := range 2 {
		r.workers[p], _ = NewWorkers(p, r.K)
		r.workers[p].Wait, r.workers[p].Logger = 5*time.Second, quiet()
	}
}

func newShardRig(t *testing.T, K int, free bool) *shardRig {
	r := &shardRig{t: t, K: K, free: free, p: testParams(), dealer: dealer.NewWithSeeds(share.Seed{5}, share.Seed{6})}
	r.dirs = [2]string{filepath.Join(t.TempDir(), "mo"), filepath.Join(t.TempDir(), "do")}
	for p := range 2 {
		r.workers[p], _ = NewWorkers(p, K)
		r.workers[p].Wait, r.workers[p].Logger = 5*time.Second, quiet()
		r.words[p] = make([][][]uint64, K)
		r.calls[p] = make([][]int, K)
		for range K {
			r.wdirs[p] = append(r.wdirs[p], filepath.Join(t.TempDir(), "w"))
		}
	}
	for range K {
		r.pairs = append(r.pairs, make(chan *transport.Conn))
	}
	return r
}

// pairFunc is worker (p, k)'s PairFunc in its life: a new pipe per
// attempt, and a recorder of its words around its provider.
func (r *shardRig) pairFunc(p, k, life int) PairFunc {
	return func(ctx context.Context, job *Job) (*transport.Conn, beaver.Provider, error) {
		var c *transport.Conn
		if p == 0 {
			a, b := transport.Pipe(transport.Options{})
			select {
			case r.pairs[k] <- b:
				c = a
			case <-ctx.Done():
				a.Close()
				b.Close()
				return nil, nil, ctx.Err()
			}
		} else {
			select {
			case c = <-r.pairs[k]:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		var prov beaver.Provider
		var err error
		if r.server != nil {
			ds, dc := transport.Pipe(transport.Options{})
			go func() { _ = r.server.Serve(context.WithoutCancel(ctx), ds, p); ds.Close() }()
			go func() { <-c.Done(); dc.Close() }()
			cl, err := dealer.Connect(ctx, dc, p)
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			r.mu.Lock()
			r.pairConns[p] = append(r.pairConns[p], c)
			r.pairPhases[p] = append(r.pairPhases[p], job.Phase)
			r.mu.Unlock()
			return c, cl, nil
		}
		if r.free {
			prov, err = ot.NewProvider(c, p, ot.ProviderOptions{})
		} else {
			prov, err = r.dealer.Provider(p)
		}
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		r.mu.Lock()
		r.pairConns[p] = append(r.pairConns[p], c)
		r.pairPhases[p] = append(r.pairPhases[p], job.Phase)
		r.mu.Unlock()
		return c, &wordSink{Provider: prov, add: func(w []uint64) {
			r.mu.Lock()
			r.words[p][k][life] = append(r.words[p][k][life], w...)
			r.mu.Unlock()
		}}, nil
	}
}

// wordSink is a recorder that hands its words to add.
type wordSink struct {
	beaver.Provider
	add func([]uint64)
}

// Unwrap implements beaver.Wrapper.
func (w *wordSink) Unwrap() beaver.Provider { return w.Provider }

func (s *wordSink) Material(ctx context.Context, q beaver.Request) (beaver.Material, error) {
	m, err := s.Provider.Material(ctx, q)
	if err != nil {
		return m, err
	}
	randomWords(q, m, s.add)
	return m, nil
}

// startWorker runs worker (p, k) until it finishes (nil), fails or is
// killed; a killed worker is restarted, as an orchestrator would.
func (r *shardRig) startWorker(ctx context.Context, wg *sync.WaitGroup, errs *[2][]error, p, k int) {
	r.mu.Lock()
	life := len(r.calls[p][k])
	r.calls[p][k] = append(r.calls[p][k], 0)
	r.words[p][k] = append(r.words[p][k], nil)
	r.mu.Unlock()
	wctx, kill := context.WithCancel(ctx)
	ev := &valueEvaluator{party: p, value: shifted, square: true, fp: share.DefaultFixedPoint}
	var killed atomic.Bool
	ev.delay = func(phase int, idx []int) time.Duration {
		if r.gate != nil {
			r.gate(p, k, phase)
		}
		r.mu.Lock()
		r.calls[p][k][life]++
		n := r.calls[p][k][life]
		r.mu.Unlock()
		if r.kill != nil && r.kill(p, k, life, n) && !killed.Swap(true) {
			kill()
			return time.Hour // the batch never ends: the process is gone
		}
		return 0
	}
	w := &Worker{Party: p, Shard: k, Evaluator: weightEvaluator{ev}, StateDir: r.wdirs[p][k], Logger: quiet(), Backoff: 10 * time.Millisecond,
		forgeEpoch: r.forge[p]}
	if p == 1 {
		w.EmbeddingHash = "emb"
	}
	if r.secure != nil {
		w.Evaluator, w.EmbeddingHash = nil, ""
		if p == 1 {
			w.Pool, w.Embedding = r.secure.pool, r.secure.target
		}
	}
	a, b := transport.Pipe(transport.Options{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		go func() { _ = r.workers[p].Attach(ctx, a) }()
		err := w.Serve(wctx, b, r.pairFunc(p, k, life))
		b.Close() // the process is gone: its connections close
		if wctx.Err() != nil && ctx.Err() == nil {
			// The orchestrator restarts the worker once the coordinator
			// has seen its old connection close: restarted sooner, under
			// load (the race detector's), it was refused as a second live
			// worker of its index (Attach), and the coordinator's wait
			// for it ran out.
			select {
			case <-a.Done():
			case <-ctx.Done():
			}
			if r.onRestart != nil {
				r.onRestart(p, k)
			}
			r.startWorker(ctx, wg, errs, p, k)
			return
		}
		if err != nil {
			kill() // its coordinator is gone: this worker stops too
		}
		r.mu.Lock()
		errs[p][k] = err
		r.mu.Unlock()
	}()
}

// interruptPhase1 runs a selection that both coordinators abandon in
// phase 1 (the data owner's drops their connection: a coordinator crash)
// once both have recorded shard 1 and nothing of shard 2 (otherwise each
// could have recorded a different shard first, and they would share
// none): shard 2's workers wait at their first batch until the
// coordinators stop, and shard 1's until shard 2's have got there (so
// that shard 2's pair agreed on an epoch before the crash). The gate and
// the stop are cleared afterwards.
func (r *shardRig) interruptPhase1() {
	r.t.Helper()
	release := make(chan struct{})
	arrived := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var once [2]sync.Once
	r.gate = func(p, k, phase int) {
		if phase != 0 {
			return
		}
		wait := arrived[p]
		if k == 1 {
			once[p].Do(func() { close(arrived[p]) })
			wait = release
		}
		select {
		case <-wait:
		case <-time.After(30 * time.Second):
		}
	}
	r.stopAfter, r.onStop = 1, func() { close(release) }
	if _, errs, _ := r.run(); errs[0] == nil || errs[1] == nil {
		r.t.Fatalf("the interrupted run: %v", errs)
	}
	r.gate, r.onStop, r.stopAfter = nil, nil, 0
}

// run runs a sharded selection (the coin fixed) and returns the results
// and the workers' errors.
func (r *shardRig) run() ([2]*selection.Result, [2]error, [2][]error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	werrs := [2][]error{make([]error, r.K), make([]error, r.K)}
	for p := range 2 {
		for k := range r.K {
			r.startWorker(ctx, &wg, &werrs, p, k)
		}
	}
	var res [2]*selection.Result
	coins := fixedCoins()
	// stop(p) is coordinator p's OnProgress with stopAfter: once both
	// coordinators recorded stopAfter batches of phase 1, the data owner's
	// connection closes.
	var (
		stopMu   sync.Mutex
		recorded [2]int
		doConn   *transport.Conn
		stopOnce sync.Once
	)
	stop := func(p int) func(selection.Progress) {
		return func(pr selection.Progress) {
			stopMu.Lock()
			defer stopMu.Unlock()
			if pr.Phase == 0 {
				recorded[p] = pr.Done
			}
			if recorded[0] >= r.stopAfter && recorded[1] >= r.stopAfter && doConn != nil {
				stopOnce.Do(func() {
					doConn.Close()
					if r.onStop != nil {
						r.onStop()
					}
				})
			}
		}
	}
	f := func(ctx context.Context, p int, conn *transport.Conn, prov beaver.Provider) (err error) {
		if p == 1 {
			stopMu.Lock()
			doConn = conn
			stopMu.Unlock()
		}
		defer func() {
			if err == nil {
				r.workers[p].Done(ctx) // the workers exit
			} else {
				r.workers[p].Close()
			}
		}()
		defer func() { r.ctrl[p], r.coord[p] = conn.Stream(selection.StreamControl).Stats(), conn }()
		ev := weightEvaluator{&valueEvaluator{party: p, value: shifted, square: true, fp: share.DefaultFixedPoint}}
		if r.secure != nil {
			mo, do := r.secure.owners(r.dirs)
			mo.Proxies, mo.Shards, do.Shards = r.proxies, r.workers[0], r.workers[1]
			if p == 0 {
				res[0], err = mo.Run(ctx, conn, prov)
			} else {
				res[1], err = do.Run(ctx, conn, prov)
			}
			return err
		}
		if p == 0 {
			mo := &selection.ModelOwner{Params: r.p, Evaluator: ev, EmbeddingHash: "emb", StateDir: r.dirs[0], Logger: quiet(), Shards: r.counting(0)}
			testhook.SetCoinSource(mo, coins[0])
			if r.stopAfter > 0 {
				mo.OnProgress = stop(0)
			}
			res[0], err = mo.Run(ctx, conn, prov)
		} else {
			do := &selection.DataOwner{Params: r.p, Evaluator: ev, EmbeddingHash: "emb", StateDir: r.dirs[1], Logger: quiet(), Shards: r.counting(1)}
			testhook.SetCoinSource(do, coins[1])
			if r.stopAfter > 0 {
				do.OnProgress = stop(1)
			}
			res[1], err = do.Run(ctx, conn, prov)
		}
		return err
	}
	var errs [2]error
	if !r.free {
		errs = pair(r.t, [2]share.Seed{{3}, {4}}, f)
	} else {
		tr, _ := twoparty.Run(ctx, twoparty.Config{}, func(ctx context.Context, tp *twoparty.Party) (struct{}, error) {
			prov, err := ot.NewProvider(tp.Conn, tp.ID, ot.ProviderOptions{})
			if err != nil {
				return struct{}{}, err
			}
			return struct{}{}, f(ctx, tp.ID, tp.Conn, prov)
		})
		errs = tr.Err
	}
	wg.Wait()
	return res, errs, werrs
}

// unshardedRef is the same selection on one pair (Shards nil).
func unshardedRef(t *testing.T, p selection.Params) [2]*selection.Result {
	t.Helper()
	res, _ := unshardedRefCtrl(t, p)
	return res
}

// unshardedRefCtrl is unshardedRef, with each party's figures of the
// clear control stream.
func unshardedRefCtrl(t *testing.T, p selection.Params) ([2]*selection.Result, [2]transport.Stats) {
	t.Helper()
	return unshardedRefStats(t, p, func(conn *transport.Conn) transport.Stats { return conn.Stream(selection.StreamControl).Stats() })
}

// unshardedRefStats is unshardedRef, with stats(conn) of each party's
// connection taken at the end of its run.
func unshardedRefStats(t *testing.T, p selection.Params, stats func(*transport.Conn) transport.Stats) ([2]*selection.Result, [2]transport.Stats) {
	t.Helper()
	var figs [2]transport.Stats
	var res [2]*selection.Result
	coins := fixedCoins()
	dirs := [2]string{t.TempDir(), t.TempDir()}
	errs := pair(t, [2]share.Seed{{3}, {4}}, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
		ev := weightEvaluator{&valueEvaluator{party: party, value: shifted, square: true, fp: share.DefaultFixedPoint}}
		defer func() { figs[party] = stats(conn) }()
		var err error
		if party == 0 {
			mo := &selection.ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[0], Logger: quiet()}
			testhook.SetCoinSource(mo, coins[0])
			res[0], err = mo.Run(ctx, conn, prov)
		} else {
			do := &selection.DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[1], Logger: quiet()}
			testhook.SetCoinSource(do, coins[1])
			res[1], err = do.Run(ctx, conn, prov)
		}
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	return res, figs
}

// checkSame checks that a sharded run succeeded and selected what the
// unsharded one did, phase by phase.
func checkSame(t *testing.T, ref, got [2]*selection.Result, errs [2]error, werrs [2][]error) {
	t.Helper()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("coordinators: %v (workers: %v)", errs, werrs)
	}
	for p := range 2 {
		for k, err := range werrs[p] {
			if err != nil {
				t.Fatalf("worker %d of party %d: %v", k, p, err)
			}
		}
	}
	for p := range 2 {
		if !slices.Equal(got[p].Bootstrap, ref[0].Bootstrap) || !slices.Equal(got[p].Selected, ref[0].Selected) {
			t.Fatalf("party %d: sharded selected %v, unsharded %v", p, got[p].Selected, ref[0].Selected)
		}
		for i := range ref[0].Survivors {
			if !slices.Equal(got[p].Survivors[i], ref[0].Survivors[i]) {
				t.Fatalf("party %d phase %d: sharded survivors differ", p, i+1)
			}
		}
	}
}

// TestShardedSelectsAsUnsharded: K = 2 worker pairs per party, with the
// in-process dealer and with the dealer-free ot.Provider on each pair's
// connection, select what one pair selects on the same coin, which is the
// plaintext selection (the forward's squares are exact here); every
// worker pair draws its own words (none in common with another pair's or
// with the coordinators'). With phases in batches of their own sizes (8
// and 32; the run's 16) each worker runs its shard's batches of its
// phase's size, and the selection is the same.
func TestShardedSelectsAsUnsharded(t *testing.T) {
	p := testParams()
	p.Appraisal = selection.AppraiseMean // over the shares the workers returned
	ref := unshardedRef(t, p)
	want := plainSchedule(p, ref[0].Bootstrap, squared)
	for i := range want {
		if !slices.Equal(ref[0].Survivors[i], want[i]) {
			t.Fatalf("unsharded phase %d differs from the plaintext", i+1)
		}
	}
	sized := p
	sized.Schedule = slices.Clone(p.Schedule)
	sized.Schedule[0].BatchSize, sized.Schedule[1].BatchSize = 8, 32
	for _, tc := range []struct {
		name string
		free bool
		p    selection.Params
	}{{"dealer", false, p}, {"dealer-free", true, p}, {"dealer, phase batch sizes", false, sized}} {
		free := tc.free
		t.Run(tc.name, func(t *testing.T) {
			r := newShardRig(t, 2, free)
			r.p = tc.p
			got, errs, werrs := r.run()
			checkSame(t, ref, got, errs, werrs)
			for q := range 2 {
				if got[q].Appraisal == nil || math.Abs(got[q].Appraisal.Mean-ref[0].Appraisal.Mean) > 1e-3 {
					t.Errorf("party %d: appraisal %+v, unsharded %+v", q, got[q].Appraisal, ref[0].Appraisal)
				}
			}
			// Each worker ran one job per phase: its batches of the shard.
			for q := range 2 {
				for k := range 2 {
					n := 0
					for i, in := range append([][]int{candidates(r.p.PoolSize, ref[0].Bootstrap)}, ref[0].Survivors...)[:len(r.p.Schedule)] {
						bs := r.p.PhaseBatchSize(i)
						lo, hi := Span(len(in), bs, 2, k)
						n += (hi - lo + bs - 1) / bs
					}
					if r.calls[q][k][0] != n {
						t.Errorf("worker (%d, %d) ran %d batches, its shards have %d", q, k, r.calls[q][k][0], n)
					}
				}
			}
			if free {
				return // ot.Provider's words are the parties' own OT outputs
			}
			a, b := slices.Concat(r.words[0][0]...), slices.Concat(r.words[0][1]...)
			if len(a) < 100 || len(b) < 100 {
				t.Fatalf("workers drew %d and %d words", len(a), len(b))
			}
			if n := common(a, b); n != 0 {
				t.Errorf("the model owner's two workers drew %d words in common", n)
			}
		})
	}
}

// TestShardWorkerKilledResumes: the model owner's worker 0 is killed in
// the middle of phase 1 (its context cancelled, its connections closed)
// and restarted; the data owner's worker 0 retries its job on a new pair
// connection, both resume from their checkpoints, and the selection is
// the unsharded one. The restarted worker redoes none of the batches
// kept from its first life (counted) and draws none of the words it drew
// then.
func TestShardWorkerKilledResumes(t *testing.T) {
	ref := unshardedRef(t, testParams())
	r := newShardRig(t, 2, false)
	r.kill = r.killWorker00(50)
	got, errs, werrs := r.run()
	checkSame(t, ref, got, errs, werrs)
	if len(r.calls[0][0]) != 2 {
		t.Fatalf("worker (0, 0) ran %d lives, want 2 (killed once)", len(r.calls[0][0]))
	}
	// The first job's checkpoint: batches kept from the first life (epoch
	// 1) were not redone.
	ents, _ := filepath.Glob(filepath.Join(r.wdirs[0][0], "job-*"))
	kept, total := 0, 0
	for _, dir := range ents {
		st := loadState(t, dir, 0)
		if len(st.Phases[0].Batches) != 7 {
			continue // phase 2's job
		}
		total = 7
		for _, b := range st.Phases[0].Batches {
			if b.Epoch == 1 {
				kept++
			}
		}
	}
	if total != 7 {
		t.Fatalf("no job checkpoint of phase 1's shard 0 (7 batches)")
	}
	if kept < 1 {
		t.Fatalf("no batch of the first life kept")
	}
	// Life 2 ran phase 1's remaining batches, then its phase-2 job.
	lo, hi := Span(len(ref[0].Survivors[0]), r.p.BatchSize, 2, 0)
	phase2 := (hi - lo + r.p.BatchSize - 1) / r.p.BatchSize
	if got := r.calls[0][0][1]; got != 7-kept+phase2 {
		t.Errorf("the restarted worker ran %d batches; want %d (7 − %d kept, + %d of phase 2)", got, 7-kept+phase2, kept, phase2)
	}
	if n := common(r.words[0][0][0], r.words[0][0][1]); n != 0 {
		t.Errorf("the restarted worker drew %d words of its first life again", n)
	}
}

// TestWorkersRefuses: a worker index ≥ K, a second live worker of an
// index, and another party's worker are refused.
func TestWorkersRefuses(t *testing.T) {
	coord, _ := NewWorkers(0, 2)
	ctx := context.Background()
	// attach connects worker (party, k) and returns its Serve's error
	// channel; the worker stays attached until the test ends.
	attach := func(party, k int) chan error {
		a, b := transport.Pipe(transport.Options{})
		cctx, cancel := context.WithCancel(ctx)
		t.Cleanup(func() { cancel(); a.Close(); b.Close() })
		go func() { _ = coord.Attach(ctx, a) }()
		errc := make(chan error, 1)
		go func() { errc <- (&Worker{Party: party, Shard: k, StateDir: t.TempDir()}).Serve(cctx, b, nil) }()
		return errc
	}
	refused := func(what string, errc chan error) {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrWorkerRefused) {
				t.Errorf("%s: %v, want refused", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: not refused in 10 s", what)
		}
	}
	attach(0, 0)
	waitAttached(t, coord, 0)
	refused("worker index 2 of 2", attach(0, 2))
	refused("the data owner's worker", attach(1, 1))
	// Worker 1 attaches; a second worker 1 while it lives is refused.
	attach(0, 1)
	waitAttached(t, coord, 1)
	refused("a second worker 1", attach(0, 1))
}

// TestSecureSharded runs the real secure forward sharded: the model
// owner's workers receive each phase's proxy in their jobs
// (proxy.Proxy.Marshal), the data owner's embed their own copy of the
// coord; K = 2 selects what one pair selects on the same coin and proxies,
// up to the fixed-point near-ties (as TestSecurePipelineOnOff compares).
func TestSecureSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("two secure selections")
	}
	f := newSecureFixture(t)
	mo, do := f.owners([2]string{})
	var ref [2]*selection.Result
	errs := pair(t, [2]share.Seed{{5}, {6}}, func(ctx context.Context, party int, c *transport.Conn, prov beaver.Provider) (err error) {
		if party == 0 {
			ref[0], err = mo.Run(ctx, c, prov)
		} else {
			ref[1], err = do.Run(ctx, c, prov)
		}
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	for i, px := range mo.Proxies {
		b, err := px.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := proxy.Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		for j, q := range back.Params() {
			if !slices.Equal(q.Value.Data, px.Params()[j].Value.Data) {
				t.Fatalf("phase %d proxy: parameter %s differs after Marshal/Unmarshal", i+1, q.Name)
			}
		}
	}
	r := newShardRig(t, 2, false)
	r.secure, r.proxies, r.p = f, mo.Proxies, f.p
	got, errs, werrs := r.run()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("coordinators: %v (workers: %v)", errs, werrs)
	}
	a, b := ref[0], got[0]
	last := len(a.Survivors) - 1
	if !slices.Equal(a.Bootstrap, b.Bootstrap) || !slices.Equal(got[0].Selected, got[1].Selected) ||
		!slices.Equal(a.Selected, a.Survivors[last]) || !slices.Equal(b.Selected, b.Survivors[last]) {
		t.Fatalf("unsharded: bootstrap %v, selected %v; sharded: %v, %v / %v", a.Bootstrap, a.Selected, b.Bootstrap, got[0].Selected, got[1].Selected)
	}
	// The survivors of every phase, near-ties apart: a candidate kept by
	// one run only must lie within sessiontest.SecureScoreTol of the
	// phase's boundary on the proxies' plaintext entropies.
	swaps, err := sessiontest.PhaseNearTies(candidates(f.p.PoolSize, a.Bootstrap), a.Survivors, b.Survivors,
		sessiontest.ProxyScores(mo.Proxies, f.pool), sessiontest.SecureScoreTol)
	if err != nil {
		t.Fatalf("unsharded selected %v, sharded %v: %v", a.Selected, b.Selected, err)
	}
	t.Logf("sharded selection: near-tie swaps by phase %v of %d selected", swaps, len(a.Selected))
}

// TestShardedTranscript: what crosses between the parties in a sharded run
// is what crosses in an unsharded one. On the coordinators' connection the
// clear control stream carries the same messages as one pair's run from
// the same coin (hello, coin, bootstrap, architectures), the hellos longer
// by the announced K alone; every other stream of it is a protocol
// session's (QuickSelect and the appraisal). On each worker pair's
// connection the clear control stream carries exactly the pair hello and
// "done" each way (public facts: hashes of the session, candidates, arch
// and parameters, the phase, k, K, epoch and the checkpoint's batch
// numbers), and everything else runs on the streams of a run's secure
// forward (selection.StreamSession and the batch lanes: masked words, whose views
// proxy/secure's TestViewIndependentOfPeerSecret checks); no other stream
// carries a byte, and the shares the workers return to their
// coordinators never cross (they travel on the party's own connection).
func TestShardedTranscript(t *testing.T) {
	ref, refCtrl := unshardedRefCtrl(t, testParams())
	r := newShardRig(t, 2, false)
	got, errs, werrs := r.run()
	checkSame(t, ref, got, errs, werrs)
	shardsField := int64(len(`,"shards":2`))
	for p := range 2 {
		a, b := refCtrl[p], r.ctrl[p]
		if a.MsgsSent != b.MsgsSent || a.MsgsRecv != b.MsgsRecv || b.BytesSent-a.BytesSent != shardsField || b.BytesRecv-a.BytesRecv != shardsField {
			t.Errorf("party %d: coordinators' control stream %+v, one pair's %+v (want the same messages, hellos longer by %d bytes)", p, b, a, shardsField)
		}
		// The coordinators' connection: the control stream, the abort
		// stream (silent) and the protocol sessions' streams only.
		c := r.coord[p]
		known := c.Stream(selection.StreamControl).Stats().Add(c.Stream(selection.StreamSession).Stats()).Add(c.Stream(selection.StreamAbort).Stats())
		for w := range r.p.Workers {
			known = known.Add(c.Stream(selection.StreamSlotBase + uint32(w)).Stats())
		}
		if all := c.Stats(); all.BytesSent != known.BytesSent || c.Stream(selection.StreamAbort).Stats().BytesSent != 0 {
			t.Errorf("party %d: coordinators' connection: %d bytes sent, %d on the known streams", p, all.BytesSent, known.BytesSent)
		}
	}
	helloBound := transport.MessageBytes(4 << 10)
	for p := range 2 {
		if len(r.pairConns[p]) != 2*len(r.p.Schedule) {
			t.Errorf("party %d: %d pair connections, want one per shard and phase", p, len(r.pairConns[p]))
		}
		for _, c := range r.pairConns[p] {
			ctl := c.Stream(selection.StreamControl).Stats()
			if ctl.MsgsSent != 2 || ctl.MsgsRecv != 2 || ctl.BytesSent > helloBound+transport.MessageBytes(len(`"done"`)) {
				t.Errorf("party %d: a pair's clear control stream %+v: want its hello and \"done\" each way", p, ctl)
			}
			known := ctl.Add(c.Stream(selection.StreamSession).Stats()).Add(c.Stream(selection.StreamAbort).Stats())
			for w := range r.p.Workers {
				known = known.Add(c.Stream(selection.StreamSlotBase + uint32(w)).Stats())
			}
			if all := c.Stats(); all.BytesSent != known.BytesSent || all.BytesRecv != known.BytesRecv {
				t.Errorf("party %d: a pair connection sent %d bytes, %d on a run's streams", p, all.BytesSent, known.BytesSent)
			}
		}
	}
}

// TestShardCoordinatorRestartResumes: both coordinators fail in phase 1
// after a shard was recorded (the data owner's drops their connection),
// and restart with their state directories, new Workers and the same
// workers' state directories: the phase resumes (the recorded batches are
// not sent to the workers again) and the selection is the unsharded one.
func TestShardCoordinatorRestartResumes(t *testing.T) {
	ref := unshardedRef(t, testParams())
	r := newShardRig(t, 2, false)
	r.interruptPhase1()
	first := [2][]int{}
	for p := range 2 {
		for k := range 2 {
			first[p] = append(first[p], len(r.calls[p][k]))
		}
	}
	r.resetWorkers()
	r.jobs = [2]map[int]int{}
	got, errs, werrs := r.run()
	checkSame(t, ref, got, errs, werrs)
	for p := range 2 {
		if got[p].Phases[0].Resumed == 0 || got[p].Epoch < 2 {
			t.Errorf("party %d: phase 1 resumed %d batches in epoch %d; want the recorded shard resumed", p, got[p].Phases[0].Resumed, got[p].Epoch)
		}
	}
	// The restarted run's workers ran at most the batches the coordinators
	// did not resume (a shard recorded before the crash is not sent again;
	// a re-sent one resumes from the workers' own checkpoints).
	ran := 0
	for k := range 2 {
		for _, n := range r.calls[0][k][first[0][k]:] {
			ran += n
		}
	}
	ph := got[0].Phases
	if most := ph[0].Batches - ph[0].Resumed + ph[1].Batches; ran > most {
		t.Errorf("the restarted run's workers ran %d batches, at most %d were left", ran, most)
	}
	// A shard both coordinators recorded is not sent again: shard 1 of 2
	// is phase 1's batches 0..6, shard 2 its batches 7..14.
	for p := range 2 {
		if got[p].Phases[0].Resumed != 7 || r.jobs[p][0] != 1 {
			t.Errorf("party %d: %d of phase 1's batches resumed, %d jobs sent; want shard 1's 7 batches resumed and only shard 2 sent", p, got[p].Phases[0].Resumed, r.jobs[p][0])
		}
	}
	t.Logf("phase 1: %d batches resumed, %d jobs sent again", got[0].Phases[0].Resumed, r.jobs[0][0])
}

// TestShardFinishedJobSentAgain: a job the worker pair finished (both
// said "done") and that is sent again to one worker only (its coordinator
// restarted, or the worker died, before the coordinator had the result,
// while the peer's coordinator had the peer's) is answered from the
// worker's checkpoint, the coordinator's recorded shares, without a pair
// connection: the peer worker does not run the job again, so waiting for
// it held the phase until the retries ran out. A job not finished still
// needs the peer.
func TestShardFinishedJobSentAgain(t *testing.T) {
	r := newShardRig(t, 2, false)
	got, errs, werrs := r.run()
	checkSame(t, unshardedRef(t, testParams()), got, errs, werrs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noPeer := func(context.Context, *Job) (*transport.Conn, beaver.Provider, error) {
		return nil, nil, errors.New("no peer worker runs this job")
	}
	for p := range 2 {
		st := loadState(t, r.dirs[p], p)
		recorded := map[[2]int]selection.BatchShares{}
		for i, ph := range st.Phases {
			for _, b := range ph.Batches {
				recorded[[2]int{i, b.Batch}] = b
			}
		}
		if len(r.sent[p]) == 0 {
			t.Fatalf("party %d's coordinator sent no job", p)
		}
		for _, job := range r.sent[p] {
			w := &Worker{Party: p, Shard: job.Shard, Evaluator: weightEvaluator{&valueEvaluator{party: p, value: shifted, square: true, fp: share.DefaultFixedPoint}},
				StateDir: r.wdirs[p][job.Shard], Logger: quiet(), Retries: -1}
			if p == 1 {
				w.EmbeddingHash = "emb"
			}
			res, err := w.RunJob(ctx, job, noPeer)
			if err != nil {
				t.Fatalf("party %d, phase %d shard %d sent again: %v", p, job.Phase+1, job.Shard+1, err)
			}
			if res.Stats.Attempts != 0 || res.Stats.Resumed != len(res.Batches) {
				t.Errorf("party %d, phase %d shard %d: %d attempts, %d of %d batches resumed; want 0 attempts, all resumed", p, job.Phase+1, job.Shard+1,
					res.Stats.Attempts, res.Stats.Resumed, len(res.Batches))
			}
			for _, b := range res.Batches {
				want, ok := recorded[[2]int{job.Phase, b.Batch}]
				if !ok || want.Epoch != b.Epoch || !slices.Equal(want.Shares, b.Shares) {
					t.Errorf("party %d, phase %d batch %d: epoch %d, not the coordinator's recorded batch (epoch %d, %v)", p, job.Phase+1, b.Batch, b.Epoch, want.Epoch, ok)
				}
			}
			// Without its finished marker the job needs the peer.
			if err := os.Remove(selection.FinishedFile(JobDir(w.StateDir, job), p)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.RunJob(ctx, job, noPeer); err == nil {
				t.Fatalf("party %d, phase %d shard %d: ran without its finished marker and without the peer", p, job.Phase+1, job.Shard+1)
			}
		}
	}
}

// TestShardsMismatch: coordinators of different K are refused in the
// handshake (selection.MismatchError of field "shards"), before any job.
func TestShardsMismatch(t *testing.T) {
	r := newShardRig(t, 2, false)
	r.workers[1], _ = NewWorkers(1, 3)
	r.workers[1].Wait, r.workers[1].Logger = time.Second, quiet()
	_, errs, _ := r.run()
	var me *selection.MismatchError
	if !errors.As(errs[0], &me) && !errors.As(errs[1], &me) || me == nil || me.Field != "shards" {
		t.Fatalf("%v, want a shards mismatch", errs)
	}
	for p := range 2 {
		for k := range 2 {
			if r.calls[p][k][0] != 0 {
				t.Errorf("worker (%d, %d) ran a batch", p, k)
			}
		}
	}
}

// TestShardDealerBudget: with a networked dealer, the model owner's worker
// announces its shard's dealer budget (the phase's preparation and the
// shard's batches, rehearsed, times selection.DealerBudgetFactor) when it binds the
// shard's session, so the dealer serves each shard session no more than
// that; an honest pair draws within it.
func TestShardDealerBudget(t *testing.T) {
	srv, err := dealer.NewServerWithSeeds(share.Seed{9}, share.Seed{10}, dealer.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := unshardedRef(t, testParams())
	r := newShardRig(t, 2, false)
	r.server = srv
	got, errs, werrs := r.run()
	checkSame(t, ref, got, errs, werrs)
	b, err := os.ReadFile(selection.StateFile(r.dirs[0], 0))
	if err != nil {
		t.Fatal(err)
	}
	st, err := selection.DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	var seed share.Seed
	if n, err := hex.Decode(seed[:], []byte(st.Seed)); err != nil || n != len(seed) {
		t.Fatalf("the coin %q: %v", st.Seed, err)
	}
	for i := range r.p.Schedule {
		for k := range 2 {
			spent, budget, ok := srv.SessionWork(jobSession(seed, i, k, 2))
			if !ok || spent == 0 || budget == 0 || budget >= dealer.DefaultSessionBudget || spent > budget {
				t.Errorf("phase %d shard %d: spent %d of a budget of %d (%v); want an announced budget, drawn within", i+1, k, spent, budget, ok)
			}
		}
	}
}

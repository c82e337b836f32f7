package selection

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// recorder is a Provider that keeps every uniformly random word of material
// it hands out (all of it but the cleared tail bits of packed bit pairs).
type recorder struct {
	beaver.Provider
	mu    sync.Mutex
	words []uint64
}

// Unwrap implements beaver.Wrapper.
func (r *recorder) Unwrap() beaver.Provider { return r.Provider }

func (r *recorder) Material(ctx context.Context, q beaver.Request) (beaver.Material, error) {
	m, err := r.Provider.Material(ctx, q)
	if err != nil {
		return m, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	randomWords(q, m, func(w []uint64) { r.words = append(r.words, w...) })
	return m, nil
}

// netRun runs one selection between the two parties over a Pipe, each with
// a networked dealer client of srv (over its own Pipe) wrapped in a
// recorder.
func netRun(t *testing.T, srv *dealer.Server, p Params, dirs [2]string, failAfter [2]int) ([2]*Result, [2]error, [2]*recorder) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c0, c1 := transport.Pipe(transport.Options{})
	conns := [2]*transport.Conn{c0, c1}
	var res [2]*Result
	var errs [2]error
	var recs [2]*recorder
	var dcs [2]*transport.Conn
	var wg sync.WaitGroup
	for party := range 2 {
		ds, dc := transport.Pipe(transport.Options{})
		dcs[party] = dc
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ds.Close()
			_ = srv.Serve(ctx, ds, party)
		}()
		cl, err := dealer.Connect(ctx, dc, party)
		if err != nil {
			t.Fatalf("party %d: connect to the dealer: %v", party, err)
		}
		recs[party] = &recorder{Provider: cl}
	}
	for party := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint, failAfter: failAfter[party]}
			if party == 0 {
				res[0], errs[0] = (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[0], Logger: quiet()}).Run(ctx, conns[0], recs[0])
			} else {
				res[1], errs[1] = (&DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[1], Logger: quiet()}).Run(ctx, conns[1], recs[1])
			}
			conns[party].Close()
			dcs[party].Close()
		}()
	}
	wg.Wait()
	return res, errs, recs
}

// TestSelectionsNeverShareDealerMaterial is the regression test of the
// reuse attack at the API level: two selections with fresh state
// directories against a dealer restarted with the same seeds used to run
// as epoch 1 at the same counters and receive the same correlated
// randomness. Now each binds the dealer session drawn from its joint coin:
// both parties present the same id, the two selections' ids differ, and no
// 64-bit word of material of one occurs in the other.
func TestSelectionsNeverShareDealerMaterial(t *testing.T) {
	p := testParams()
	seeds := [2]share.Seed{{7}, {8}}
	var words [2][]uint64
	var ids [2]beaver.SessionID
	for run := range 2 {
		srv, err := dealer.NewServerWithSeeds(seeds[0], seeds[1], dealer.ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		res, errs, recs := netRun(t, srv, p, [2]string{t.TempDir(), t.TempDir()}, [2]int{})
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("run %d: %v", run, errs)
		}
		if res[0].Epoch != 1 || !slices.Equal(res[0].Selected, res[1].Selected) {
			t.Fatalf("run %d: epoch %d, parties agree %v", run, res[0].Epoch, slices.Equal(res[0].Selected, res[1].Selected))
		}
		id0, ok0 := recs[0].Session()
		id1, ok1 := recs[1].Session()
		if !ok0 || !ok1 || id0 != id1 {
			t.Fatalf("run %d: parties bound sessions %x (%v) and %x (%v)", run, id0[:4], ok0, id1[:4], ok1)
		}
		ids[run] = id0
		words[run] = append(recs[0].words, recs[1].words...)
	}
	if ids[0] == ids[1] {
		t.Fatal("two selections got the same dealer session")
	}
	if len(words[0]) < 1000 || len(words[1]) < 1000 {
		t.Fatalf("only %d and %d words of material recorded", len(words[0]), len(words[1]))
	}
	seen := make(map[uint64]bool, len(words[0]))
	for _, w := range words[0] {
		seen[w] = true
	}
	common := 0
	for _, w := range words[1] {
		if seen[w] {
			common++
		}
	}
	if common > 0 {
		t.Fatalf("the two selections share %d of %d words of correlated randomness", common, len(words[1]))
	}
}

// TestResumeAgainstRestartedDealer: a selection interrupted mid phase
// resumes against a dealer restarted from its seeds and state file: the
// same session (same coin), a new epoch whose counters lie above every
// persisted high-water mark, and the uninterrupted run's result.
func TestResumeAgainstRestartedDealer(t *testing.T) {
	p := testParams()
	seeds := [2]share.Seed{{9}, {10}}
	opt := dealer.ServerOptions{StateFile: t.TempDir() + "/dealer.seeds.state"}
	dirs := [2]string{t.TempDir(), t.TempDir()}
	srv, err := dealer.NewServerWithSeeds(seeds[0], seeds[1], opt)
	if err != nil {
		t.Fatal(err)
	}
	_, errs, recs := netRun(t, srv, p, dirs, [2]int{20, 0}) // model owner fails in phase 1
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("interrupted run: %v", errs)
	}
	first, _ := recs[0].Session()
	srv, err = dealer.NewServerWithSeeds(seeds[0], seeds[1], opt)
	if err != nil {
		t.Fatal(err)
	}
	res, errs, recs := netRun(t, srv, p, dirs, [2]int{})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if again, _ := recs[1].Session(); again != first {
		t.Fatal("the resumed selection has another dealer session")
	}
	resumed := 0
	for _, ps := range res[1].Phases {
		resumed += ps.Resumed
	}
	if res[0].Epoch != 2 || resumed == 0 {
		t.Fatalf("epoch %d, %d batches resumed", res[0].Epoch, resumed)
	}
	want := plainSchedule(p, res[0].Bootstrap, testValue)
	if !slices.Equal(res[0].Selected, want[len(want)-1]) || !slices.Equal(res[1].Selected, res[0].Selected) {
		t.Fatalf("resumed %v / %v, uninterrupted %v", res[0].Selected, res[1].Selected, want[len(want)-1])
	}
}

// TestDealerSessionDependsOnBothContributions: the session id comes from
// the joint coin, so a party that always sends the same contribution (to
// replay an old session's material) still gets a fresh id each time, as
// long as the honest party's contribution is fresh; and the id is a
// function of both contributions.
func TestDealerSessionDependsOnBothContributions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	commit := func(r []byte) []byte {
		h := sha256.New()
		h.Write([]byte("selectformer/selection/coin-commit/v1"))
		h.Write(r)
		return h.Sum(nil)
	}
	coin := func(r0, r1 []byte) share.Seed {
		h := sha256.New()
		h.Write([]byte("selectformer/selection/coin-seed/v1"))
		h.Write(r0)
		h.Write(r1)
		var s share.Seed
		copy(s[:], h.Sum(nil))
		return s
	}
	fixed := make([]byte, 32)
	for i := range fixed {
		fixed[i] = 0x42
	}
	// The adversary plays party 1−honest with the fixed contribution.
	toss := func(honest int) (beaver.SessionID, beaver.SessionID) {
		c0, c1 := transport.Pipe(transport.Options{})
		defer c0.Close()
		defer c1.Close()
		mine, theirs := c0.Stream(9), c1.Stream(9)
		if honest == 1 {
			mine, theirs = theirs, mine
		}
		type out struct {
			seed share.Seed
			err  error
		}
		done := make(chan out, 1)
		go func() {
			s, err := coinToss(ctx, mine, honest)
			done <- out{s, err}
		}()
		var advView share.Seed // what the adversary computes from both contributions
		if honest == 1 {
			if err := theirs.SendBytes(ctx, commit(fixed)); err != nil {
				t.Fatal(err)
			}
			r1, err := theirs.RecvBytes(ctx, maxCoinMessage)
			if err != nil {
				t.Fatal(err)
			}
			if err := theirs.SendBytes(ctx, fixed); err != nil {
				t.Fatal(err)
			}
			advView = coin(fixed, r1)
		} else {
			c, err := theirs.RecvBytes(ctx, maxCoinMessage)
			if err != nil {
				t.Fatal(err)
			}
			if err := theirs.SendBytes(ctx, fixed); err != nil {
				t.Fatal(err)
			}
			r0, err := theirs.RecvBytes(ctx, maxCoinMessage)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(commit(r0), c) {
				t.Fatal("honest model owner's opening does not match")
			}
			advView = coin(r0, fixed)
		}
		o := <-done
		if o.err != nil {
			t.Fatal(o.err)
		}
		return dealerSession(o.seed), dealerSession(advView)
	}
	for honest := range 2 {
		a, aView := toss(honest)
		b, bView := toss(honest)
		if a != aView || b != bView {
			t.Fatalf("honest party %d: the id is not the function of both contributions", honest)
		}
		if a == b {
			t.Fatalf("a party %d that repeats its contribution forced the same session id twice", 1-honest)
		}
	}
	// Either contribution changes the id.
	r := make([]byte, 32)
	base := dealerSession(coin(fixed, r))
	r2 := slices.Clone(r)
	r2[31] ^= 1
	if dealerSession(coin(fixed, r2)) == base || dealerSession(coin(r2, r)) == base {
		t.Fatal("the session id ignores a contribution")
	}
}

package selection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection/lanes"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/syncbuf"
	"github.com/selectformer/selectformer/transport"
)

// testValue is a per-phase "entropy" with well separated values (no two
// within 1e-3), so fixed-point selection equals the plaintext one.
func testValue(phase, idx int) float64 {
	return math.Mod(float64(idx*37+phase*11)*0.6180339887, 7)
}

func testParams() Params {
	return Params{PoolSize: 240, Budget: 40, Bootstrap: 10, BatchSize: 16, Workers: 3,
		Schedule: []Phase{{Proxy: proxy.Shape{Layers: 1, Heads: 1, MLPHidden: 2}, Keep: 0.5}, {Proxy: proxy.Shape{Layers: 2, Heads: 1, MLPHidden: 4}}}}
}

type runCfg struct {
	p           [2]Params
	dirs        [2]string
	embHash     [2]string
	failAfter   [2]int
	threshold   float64
	seeds       [2]share.Seed
	cancelAfter int
	onProgress  func(Progress)
	// logger, if set, is both parties' Logger (quiet() otherwise).
	logger *slog.Logger
	// squared: the forward returns the shared square of shifted (drawing
	// dealer material and exchanging, so the parties' batches finish
	// together) instead of testValue shared as it is.
	squared bool
	// sqrtScores: the proxies' architectures announce √H scores
	// (secure.Arch.SqrtEntropy), which the appraisal squares.
	sqrtScores bool
	// shards, if set, are the parties' ShardRunners.
	shards [2]ShardRunner
	// items are the data owner's Items (its commitment); itemInput the
	// model owner's ItemInput; shareOffset the data owner's shift of its
	// shares (all unset: none). dataOwner, if set, receives the data
	// owner before it runs.
	items       purchase.Items
	itemInput   func(items [][]byte, seq int) (model.Input, error)
	shareOffset func(phase, idx int) float64
	dataOwner   func(*DataOwner)
	// coins, if set, are the parties' contributions to the coin toss.
	coins [2][]byte
}

func runSelection(t *testing.T, c runCfg) ([2]*Result, [2]error) {
	t.Helper()
	var res [2]*Result
	if c.seeds == ([2]share.Seed{}) {
		c.seeds = [2]share.Seed{{3}, {4}}
	}
	errs := pair(t, c.seeds, func(ctx context.Context, p int, conn *transport.Conn, prov beaver.Provider) error {
		ev := &valueEvaluator{party: p, value: testValue, fp: share.DefaultFixedPoint, failAfter: c.failAfter[p], sqrtScores: c.sqrtScores}
		if c.squared {
			ev.value, ev.square = shifted, true
		}
		h := c.embHash[p]
		if h == "" {
			h = "emb"
		}
		var err error
		log := c.logger
		if log == nil {
			log = quiet()
		}
		if p == 0 {
			mo := &ModelOwner{Params: c.p[0], Evaluator: ev, EmbeddingHash: h, StateDir: c.dirs[0], Logger: log, Threshold: c.threshold, Shards: c.shards[0],
				ItemInput: c.itemInput}
			if c.coins[0] != nil {
				mo.coinSource = bytes.NewReader(c.coins[0])
			}
			res[0], err = mo.Run(ctx, conn, prov)
		} else {
			do := &DataOwner{Params: c.p[1], Evaluator: ev, EmbeddingHash: h, StateDir: c.dirs[1], Logger: log, OnProgress: c.onProgress, Shards: c.shards[1],
				Items: c.items, shareOffset: c.shareOffset}
			if c.coins[1] != nil {
				do.coinSource = bytes.NewReader(c.coins[1])
			}
			if c.dataOwner != nil {
				c.dataOwner(do)
			}
			res[1], err = do.Run(ctx, conn, prov)
		}
		return err
	})
	return res, errs
}

func TestRunMatchesPlaintext(t *testing.T) {
	for _, c := range []struct {
		mode AppraisalMode
		// sqrt: the scores are √H, and the appraisal is of their squares.
		sqrt bool
	}{{AppraiseNone, false}, {AppraiseMean, false}, {AppraiseThreshold, false}, {AppraiseMean, true}, {AppraiseThreshold, true}} {
		mode := c.mode
		name := string(mode) + "appraisal"
		if c.sqrt {
			name += "-sqrt"
		}
		t.Run(name, func(t *testing.T) {
			p := testParams()
			p.Appraisal = mode
			threshold := 3.0
			if c.sqrt {
				threshold = 10
			}
			res, errs := runSelection(t, runCfg{p: [2]Params{p, p}, threshold: threshold, sqrtScores: c.sqrt})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("party %d: %v", i, err)
				}
			}
			if !slices.Equal(res[0].Selected, res[1].Selected) || !slices.Equal(res[0].Bootstrap, res[1].Bootstrap) {
				t.Fatal("parties disagree")
			}
			want := plainSchedule(p, res[0].Bootstrap, testValue)
			for i := range want {
				if !slices.Equal(res[0].Survivors[i], want[i]) {
					t.Fatalf("phase %d: got %v, want %v", i, res[0].Survivors[i], want[i])
				}
			}
			if len(res[0].Selected) != p.Budget-p.Bootstrap || len(res[0].Bootstrap) != p.Bootstrap {
				t.Fatalf("selected %d, bootstrap %d", len(res[0].Selected), len(res[0].Bootstrap))
			}
			for _, b := range res[0].Bootstrap {
				if _, ok := slices.BinarySearch(res[0].Selected, b); ok {
					t.Fatalf("bootstrap point %d selected again", b)
				}
			}
			var sum, scoreSum float64
			for _, i := range res[0].Selected {
				v := quantize(share.DefaultFixedPoint, testValue(1, i))
				scoreSum += v
				if c.sqrt {
					v *= v
				}
				sum += v
			}
			mean, meanScore := sum/float64(len(res[0].Selected)), scoreSum/float64(len(res[0].Selected))
			if c.sqrt && !(meanScore < threshold && threshold < mean) {
				// The threshold must sit between the mean score and the
				// mean entropy, so that a missed squaring fails the test.
				t.Fatalf("threshold %v outside (%v, %v)", threshold, meanScore, mean)
			}
			switch mode {
			case AppraiseMean:
				if math.Abs(res[0].Appraisal.Mean-mean) > 1e-3*max(1, mean) || res[0].Appraisal.Mean != res[1].Appraisal.Mean {
					t.Fatalf("appraisal %v / %v, want %v", res[0].Appraisal.Mean, res[1].Appraisal.Mean, mean)
				}
			case AppraiseThreshold:
				if res[0].Appraisal.Exceeds != (mean > threshold) || res[1].Appraisal.Exceeds != res[0].Appraisal.Exceeds {
					t.Fatalf("exceeds %v, mean %v", res[0].Appraisal.Exceeds, mean)
				}
			}
			for i, ps := range res[0].Phases {
				t.Logf("phase %d: %+v", i, ps)
				if ps.Comparisons == 0 || ps.SelectRounds != int64(6*ps.Steps) || ps.BytesSent == 0 {
					t.Errorf("phase %d stats %+v", i, ps)
				}
			}
		})
	}
}

func TestHandshakeMismatch(t *testing.T) {
	base := testParams()
	cases := []struct {
		field  string
		modify func(p *Params, h *string)
	}{
		{"fixed_point.frac_bits", func(p *Params, h *string) { p.FixedPoint = share.FixedPoint{FracBits: 14, IntBits: 15} }},
		{"fixed_point.int_bits", func(p *Params, h *string) { p.FixedPoint = share.FixedPoint{FracBits: 16, IntBits: 14} }},
		{"pool_size", func(p *Params, h *string) { p.PoolSize = 241 }},
		{"budget", func(p *Params, h *string) { p.Budget = 41 }},
		{"bootstrap", func(p *Params, h *string) { p.Bootstrap = 11 }},
		{"schedule", func(p *Params, h *string) {
			p.Schedule = slices.Clone(p.Schedule)
			p.Schedule[0].Keep = 0.4
		}},
		{"schedule", func(p *Params, h *string) {
			// A phase's own lanes are part of the schedule.
			p.Schedule = slices.Clone(p.Schedule)
			p.Schedule[0].Workers = 5
		}},
		{"schedule", func(p *Params, h *string) {
			// So is a phase's own batch size.
			p.Schedule = slices.Clone(p.Schedule)
			p.Schedule[1].BatchSize = 8
		}},
		{"batch_size", func(p *Params, h *string) { p.BatchSize = 8 }},
		{"workers", func(p *Params, h *string) { p.Workers = 1 }},
		{"appraisal", func(p *Params, h *string) { p.Appraisal = AppraiseMean }},
		{"embedding_hash", func(p *Params, h *string) { *h = "other" }},
	}
	for _, c := range cases {
		t.Run(c.field, func(t *testing.T) {
			p1 := base
			h := "emb"
			c.modify(&p1, &h)
			_, errs := runSelection(t, runCfg{p: [2]Params{base, p1}, embHash: [2]string{"emb", h}})
			for i, err := range errs {
				var me *MismatchError
				if !errors.As(err, &me) || me.Field != c.field || me.Local == me.Peer || !slices.Contains(MismatchFields, me.Field) {
					t.Fatalf("party %d: %v (want a %s mismatch, a field of MismatchFields)", i, err, c.field)
				}
				if !strings.Contains(err.Error(), c.field) {
					t.Fatalf("error %q does not name %s", err, c.field)
				}
			}
		})
	}
}

func TestParamsValidate(t *testing.T) {
	ok := testParams()
	cases := []struct {
		name string
		mod  func(p *Params)
	}{
		{"pool", func(p *Params) { p.PoolSize = 0 }},
		{"bootstrap", func(p *Params) { p.Bootstrap = -1 }},
		{"budget small", func(p *Params) { p.Budget = p.Bootstrap }},
		{"budget large", func(p *Params) { p.Budget = p.PoolSize + 1 }},
		{"empty schedule", func(p *Params) { p.Schedule = nil }},
		{"keep", func(p *Params) { p.Schedule = []Phase{{Keep: 0}, {}} }},
		{"keep too small", func(p *Params) { p.Schedule = []Phase{{Keep: 0.01}, {}} }},
		{"workers", func(p *Params) { p.Workers = MaxWorkers + 1 }},
		{"phase workers", func(p *Params) { p.Schedule = slices.Clone(p.Schedule); p.Schedule[0].Workers = MaxWorkers + 1 }},
		{"negative phase workers", func(p *Params) { p.Schedule = slices.Clone(p.Schedule); p.Schedule[1].Workers = -1 }},
		{"batch size", func(p *Params) { p.BatchSize = MaxBatchSize + 1 }},
		{"negative batch size", func(p *Params) { p.BatchSize = -1 }},
		{"phase batch size", func(p *Params) { p.Schedule = slices.Clone(p.Schedule); p.Schedule[0].BatchSize = MaxBatchSize + 1 }},
		{"negative phase batch size", func(p *Params) { p.Schedule = slices.Clone(p.Schedule); p.Schedule[1].BatchSize = -1 }},
		{"appraisal", func(p *Params) { p.Appraisal = "x" }},
		{"pipeline", func(p *Params) { p.Pipeline = "maybe" }},
		{"phases", func(p *Params) { p.Schedule = make([]Phase, lanes.MaxPhases+1) }},
		{"fixed point", func(p *Params) { p.FixedPoint = share.FixedPoint{FracBits: 40, IntBits: 40} }},
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		p := ok
		c.mod(&p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	// More batches on a lane than its dealer counters hold: refused by
	// Run's checks (Validate accepts a placeholder pool size).
	big := ok
	big.PoolSize, big.BatchSize, big.Workers = 1<<30, 1, 1
	big.Budget = ok.Budget
	if err := big.CheckLanes(); err == nil {
		t.Error("lanes: no error")
	}
	if err := ok.CheckLanes(); err != nil {
		t.Error(err)
	}
	// Per phase, on the phase's own lanes: enough lanes in phase 1 and
	// too few in the last, which the run's own Workers would hold.
	perPhase := ok
	perPhase.PoolSize, perPhase.BatchSize, perPhase.Workers = 1_000_010, 1, MaxWorkers // phase 1: 15,625 batches a lane
	perPhase.Schedule = slices.Clone(ok.Schedule)
	perPhase.Schedule[len(perPhase.Schedule)-1].Workers = 1 // 500,000
	if err := perPhase.CheckLanes(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("phase %d", len(perPhase.Schedule))) {
		t.Errorf("the last phase on 1 lane: %v", err)
	}
	if perPhase.Schedule[len(perPhase.Schedule)-1].Workers = 0; perPhase.CheckLanes() != nil {
		t.Errorf("every phase on %d lanes: %v", MaxWorkers, perPhase.CheckLanes())
	}
	// And in the phase's own batch size: batches of MaxBatchSize on one
	// lane fill its counters exactly; phase 1's own batches of 1 do not fit.
	sized := big
	sized.BatchSize = MaxBatchSize
	sized.Schedule = slices.Clone(ok.Schedule)
	if err := sized.CheckLanes(); err != nil {
		t.Errorf("batches of %d: %v", MaxBatchSize, err)
	}
	if sized.Schedule[0].BatchSize = 1; sized.CheckLanes() == nil || !strings.Contains(sized.CheckLanes().Error(), "phase 1") {
		t.Errorf("phase 1 in batches of 1: %v", sized.CheckLanes())
	}
}

func TestResume(t *testing.T) {
	p := testParams()
	cases := []struct {
		name      string
		failAfter [2]int
	}{
		{"data owner fails mid phase 0", [2]int{0, 4}},
		{"model owner fails mid phase 1", [2]int{20, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			// Squared: a forward that exchanges, so the model owner has
			// finished (and checkpointed) the batches the data owner did
			// before it fails; with a forward that never talks, the data
			// owner could fail before the model owner finished any batch,
			// and only the batches both finished are resumed.
			_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, failAfter: c.failAfter, squared: true})
			if errs[0] == nil || errs[1] == nil {
				t.Fatalf("interrupted run: %v", errs)
			}
			// Restart with the same dealer seeds: the new epoch keeps the
			// correlated randomness apart.
			res, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, squared: true})
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			if res[0].Epoch != 2 || res[1].Epoch != 2 {
				t.Fatalf("epochs %d %d", res[0].Epoch, res[1].Epoch)
			}
			resumed := 0
			for _, ps := range res[1].Phases {
				resumed += ps.Resumed
			}
			if resumed == 0 {
				t.Fatal("nothing resumed")
			}
			// The coin (hence the bootstrap) comes from the interrupted run;
			// an uninterrupted run with that coin selects the plaintext
			// schedule's choice (TestRunMatchesPlaintext).
			want := plainSchedule(p, res[0].Bootstrap, squared)
			if !slices.Equal(res[0].Selected, want[len(want)-1]) || !slices.Equal(res[1].Selected, want[len(want)-1]) {
				t.Fatalf("resumed %v, uninterrupted %v", res[0].Selected, want[len(want)-1])
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	p := testParams()
	t.Run("malformed state file", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		if err := os.WriteFile(StateFile(dirs[1], 1), []byte("{garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs})
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "state") || errs[0] == nil {
			t.Fatalf("errors %v", errs)
		}
	})
	t.Run("malformed batch file", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		if _, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, failAfter: [2]int{0, 3}}); errs[1] == nil {
			t.Fatal("no failure")
		}
		ents, err := os.ReadDir(phaseDir(dirs[1], 1, 0))
		if err != nil || len(ents) == 0 {
			t.Fatalf("no batch files: %v", err)
		}
		path := filepath.Join(phaseDir(dirs[1], 1, 0), ents[0].Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-5] ^= 0xff
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs})
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "checksum") {
			t.Fatalf("errors %v", errs)
		}
	})
	t.Run("state of other params", func(t *testing.T) {
		dirs := [2]string{t.TempDir(), t.TempDir()}
		if _, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs}); errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		q := p
		q.Budget = 30
		_, errs := runSelection(t, runCfg{p: [2]Params{q, q}, dirs: dirs})
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "other parameters") {
			t.Fatalf("errors %v", errs)
		}
	})
	t.Run("peer disconnects mid phase", func(t *testing.T) {
		done := make(chan struct{})
		errs := pair(t, [2]share.Seed{{1}, {2}}, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
			ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint}
			if party == 0 {
				_, err := (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "e", Logger: quiet()}).Run(ctx, conn, prov)
				return err
			}
			var once sync.Once
			do := &DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "e", Logger: quiet(), OnProgress: func(pr Progress) {
				if pr.Done >= 2 {
					once.Do(func() { conn.Close(); close(done) })
				}
			}}
			_, err := do.Run(ctx, conn, prov)
			return err
		})
		<-done
		if errs[0] == nil || errs[1] == nil {
			t.Fatalf("errors %v", errs)
		}
		t.Logf("model owner: %v", errs[0])
	})
	t.Run("wrong provider", func(t *testing.T) {
		d := dealer.NewWithSeeds(share.Seed{1}, share.Seed{2})
		c0, c1 := transport.Pipe(transport.Options{})
		defer c0.Close()
		defer c1.Close()
		prov, _ := d.Provider(1)
		mo := &ModelOwner{Params: p, Evaluator: &valueEvaluator{}, Logger: quiet()}
		if _, err := mo.Run(context.Background(), c0, prov); err == nil || !strings.Contains(err.Error(), "provider") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("model owner without proxies", func(t *testing.T) {
		mo := &ModelOwner{Params: p}
		if _, err := mo.Run(context.Background(), nil, nil); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("data owner without embedding", func(t *testing.T) {
		do := &DataOwner{Params: p}
		if _, err := do.Run(context.Background(), nil, nil); err == nil {
			t.Fatal("no error")
		}
	})
}

// TestCompareHelloFields: every field both parties must agree on is
// compared, named, and reported with both values in the syntax it is
// parsed from (a schedule as ParseSchedule reads it, not wire JSON); the
// sequence length only when both parties announce one (issue 39).
func TestCompareHelloFields(t *testing.T) {
	p := testParams().WithDefaults()
	ot := beaver.Description{Source: "ot"}
	base := newHello(0, p, "emb", 0, ot, 1, summary{})
	peer := newHello(1, p, "emb", 0, ot, 1, summary{})
	if err := compareHello(base, peer); err != nil {
		t.Fatal(err)
	}
	otherSched := slices.Clone(p.Schedule)
	otherSched[0].Keep = 0.25
	otherLanes := slices.Clone(p.Schedule)
	otherLanes[0].Workers = 64
	otherSizes := slices.Clone(p.Schedule)
	otherSizes[1].BatchSize = 4
	cases := []struct {
		field       string
		mod         func(h *hello)
		local, peer string // "" skips the check of the values
	}{
		{"version", func(h *hello) { h.Version++ }, "", ""},
		{"party", func(h *hello) { h.Party = 0 }, "", ""},
		{"provider", func(h *hello) { h.Provider = "he" }, "ot", "he"},
		{"provider", func(h *hello) { h.Provider = "" }, "ot", "(none)"},
		{"provider_params", func(h *hello) { h.ProviderParams = "00112233445566778899" }, "(none)", "001122334455…"},
		{"budget", func(h *hello) { h.Budget++ }, fmt.Sprint(p.Budget), fmt.Sprint(p.Budget + 1)},
		{"schedule", func(h *hello) { h.Schedule = otherSched }, FormatSchedule(p.Schedule), FormatSchedule(otherSched)},
		{"schedule", func(h *hello) { h.Schedule = otherLanes }, FormatSchedule(p.Schedule), FormatSchedule(otherLanes)},
		{"schedule", func(h *hello) { h.Schedule = otherSizes }, FormatSchedule(p.Schedule), "1:1:2@0.5,2:1:4@0/x4"},
		{"batch_size", func(h *hello) { h.BatchSize++ }, fmt.Sprint(p.BatchSize), fmt.Sprint(p.BatchSize + 1)},
		{"workers", func(h *hello) { h.Workers++ }, "", ""},
		{"appraisal", func(h *hello) { h.Appraisal = "mean" }, "(none)", "mean"},
		{"embedding_hash", func(h *hello) { h.EmbeddingHash = "other" }, "", ""},
		{"view_hash", func(h *hello) { h.ViewHash = "x" }, "", ""},
		{"shards", func(h *hello) { h.Shards = 2 }, "0", "2"},
	}
	for _, c := range cases {
		h := peer
		c.mod(&h)
		var me *MismatchError
		if err := compareHello(base, h); !errors.As(err, &me) || me.Field != c.field || !slices.Contains(MismatchFields, me.Field) {
			t.Errorf("%s: %v", c.field, err)
			continue
		}
		if c.local != "" && (me.Local != c.local || me.Peer != c.peer) {
			t.Errorf("%s: values %q, %q; want %q, %q", c.field, me.Local, me.Peer, c.local, c.peer)
		}
	}
	if !strings.Contains(FormatSchedule(p.Schedule), ":") {
		t.Fatalf("schedule formatted as %q", FormatSchedule(p.Schedule))
	}
	// A phase's own lanes are in the view hash (a checkpoint's too); a
	// schedule without them hashes as before they existed.
	lanesP := p
	lanesP.Schedule = otherLanes
	if viewHash(lanesP, "emb") == base.ViewHash {
		t.Error("the view hash ignores a phase's own lanes")
	}
	if b, _ := json.Marshal(p.Schedule); strings.Contains(string(b), "workers") {
		t.Errorf("a schedule without lanes of its own encodes them: %s", b)
	}
	// So is a phase's own batch size; a schedule without one encodes
	// byte for byte as a Phase did before it existed.
	sizesP := p
	sizesP.Schedule = otherSizes
	if viewHash(sizesP, "emb") == base.ViewHash {
		t.Error("the view hash ignores a phase's own batch size")
	}
	type phaseBefore struct {
		Proxy   proxy.Shape `json:"proxy"`
		Keep    float64     `json:"keep"`
		Workers int         `json:"workers,omitempty"`
	}
	for _, sched := range [][]Phase{p.Schedule, otherLanes} {
		before := make([]phaseBefore, len(sched))
		for i, ph := range sched {
			before[i] = phaseBefore{ph.Proxy, ph.Keep, ph.Workers}
		}
		now, _ := json.Marshal(sched)
		then, _ := json.Marshal(before)
		if !bytes.Equal(now, then) {
			t.Errorf("a schedule without batch sizes of its own encodes as %s, before as %s", now, then)
		}
	}
	// The sequence length: compared when both announce one.
	for _, tc := range []struct {
		local, peer int
		differs     bool
	}{{0, 32, false}, {16, 0, false}, {32, 32, false}, {16, 32, true}} {
		l, h := base, peer
		l.Seq, h.Seq = tc.local, tc.peer
		var me *MismatchError
		err := compareHello(l, h)
		if got := errors.As(err, &me) && me.Field == "seq"; got != tc.differs || tc.differs && (me.Local != fmt.Sprint(tc.local) || me.Peer != fmt.Sprint(tc.peer)) {
			t.Errorf("seq %d vs %d: %v", tc.local, tc.peer, err)
		}
	}
}

func TestCoinToss(t *testing.T) {
	c0, c1 := transport.Pipe(transport.Options{})
	defer c0.Close()
	defer c1.Close()
	ctx := context.Background()
	var seeds [2]share.Seed
	var errs [2]error
	var wg sync.WaitGroup
	for p, c := range []*transport.Conn{c0, c1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seeds[p], errs[p] = coinToss(ctx, c.Stream(9), p)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || seeds[0] != seeds[1] || seeds[0] == (share.Seed{}) {
		t.Fatalf("coin: %v %v %x %x", errs[0], errs[1], seeds[0], seeds[1])
	}
	// A model owner that opens something else than it committed to is caught.
	st := c0.Stream(10)
	go func() {
		st.SendBytes(ctx, make([]byte, 32)) // not a commitment of what follows
		st.RecvBytes(ctx, maxCoinMessage)
		st.SendBytes(ctx, make([]byte, 32))
	}()
	if _, err := coinToss(ctx, c1.Stream(10), 1); err == nil || !strings.Contains(err.Error(), "commitment") {
		t.Fatalf("cheating opening: %v", err)
	}
}

func TestProgressCallback(t *testing.T) {
	p := testParams()
	var mu sync.Mutex
	last, first := map[int]Progress{}, map[int]Progress{}
	_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, onProgress: func(pr Progress) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := first[pr.Phase]; !ok {
			first[pr.Phase] = pr
		}
		if prev, ok := last[pr.Phase]; ok && pr.Done <= prev.Done {
			t.Errorf("progress went from %d to %d", prev.Done, pr.Done)
		}
		last[pr.Phase] = pr
	}})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	// 230 candidates in batches of 16, then 115.
	for phase, want := range []int{15, 8} {
		if pr := last[phase]; pr.Done != want || pr.Total != want || pr.ETA != 0 || pr.Rate <= 0 {
			t.Errorf("phase %d final progress %+v", phase, pr)
		}
		// Each phase is reported as it starts, before its first batch
		// ends (issue 30: the bar showed only once a phase was done).
		if pr := first[phase]; pr.Done != 0 || pr.Total != want {
			t.Errorf("phase %d first progress %+v, want 0 of %d batches", phase, pr, want)
		}
	}
}

// TestPhasesNumberedFromOne: the log attributes and errors number phases
// from 1, as the summary, the progress lines and ParseSchedule do (issue 30:
// the log said phase=0 for the summary's phase 1).
func TestPhasesNumberedFromOne(t *testing.T) {
	p := testParams()
	var logs syncbuf.Buffer
	_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	out := logs.String()
	for _, want := range []string{`msg="selection: phase done" party=0 phase=1 `, `msg="selection: phase done" party=1 phase=2 `,
		`msg="selection: progress" party=0 phase=1 done=1 `} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the log:\n%s", want, out)
		}
	}
	if strings.Contains(out, "phase=0") || strings.Contains(out, "phase=3") {
		t.Errorf("a phase numbered from 0 in the log:\n%s", out)
	}
	// A failure in the first phase names phase 1.
	_, errs = runSelection(t, runCfg{p: [2]Params{p, p}, failAfter: [2]int{0, 2}})
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "selection: phase 1 batch") {
		t.Fatalf("failure in the first phase: %v", errs[1])
	}
}

// TestEmbeddingMismatchHint: parties whose embedding tables differ get an
// error that shows both hashes short and says what to do (load the same
// checkpoint, freeze the embeddings when fine-tuning), on both sides.
func TestEmbeddingMismatchHint(t *testing.T) {
	p := testParams()
	h0 := strings.Repeat("ab", 32)
	h1 := strings.Repeat("cd", 32)
	_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, embHash: [2]string{h0, h1}})
	for i, err := range errs {
		var me *MismatchError
		if !errors.As(err, &me) || me.Field != "embedding_hash" {
			t.Fatalf("party %d: %v (want an embedding_hash mismatch)", i, err)
		}
		mine, theirs := h0, h1
		if i == 1 {
			mine, theirs = h1, h0
		}
		if me.Local != mine[:12]+"…" || me.Peer != theirs[:12]+"…" {
			t.Errorf("party %d: hashes shown as %q, %q", i, me.Local, me.Peer)
		}
		for _, want := range []string{"same checkpoint", "freeze its embeddings", "FreezeEmbeddings"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("party %d: error %q lacks the hint %q", i, err, want)
			}
		}
	}
}

// TestShortHashes: hashes are shown by 12 hex digits, more when needed to
// tell them apart; short values stay whole and an empty one is "(none)".
func TestShortHashes(t *testing.T) {
	a64, b64 := strings.Repeat("a", 64), strings.Repeat("b", 64)
	same20 := strings.Repeat("a", 20)
	cases := []struct{ a, b, wa, wb string }{
		{"emb", "other", "emb", "other"},
		{a64, b64, a64[:12] + "…", b64[:12] + "…"},
		{same20 + "x" + a64[:43], same20 + "y" + a64[:43], same20 + "xaaa…", same20 + "yaaa…"},
		{"", "abc", "(none)", "abc"},
	}
	for _, c := range cases {
		a, b := shortHashes(c.a, c.b)
		if a != c.wa || b != c.wb {
			t.Errorf("shortHashes(%q, %q) = %q, %q; want %q, %q", c.a, c.b, a, b, c.wa, c.wb)
		}
	}
}

// TestMeanEntropyCost pins the appraisal's mean: MulPublicScalar on the sum
// (1 round, one word of truncation bits: 8 + 10 bytes), and with √H scores
// SquareFixed before it (2 rounds, msg(n) = 8n + 10 bytes and its
// truncation's msg(⌈n/64⌉)); the value is the mean of the squares.
func TestMeanEntropyCost(t *testing.T) {
	fp := share.DefaultFixedPoint
	vals := []float64{0.5, 1.25, 2, 0.75, 1.5}
	n := len(vals)
	for _, c := range []struct {
		name   string
		sqrt   bool
		rounds int64
		bytes  int64
		want   float64
	}{
		{"entropies", false, 1, 8 + 10, 1.2},
		{"√H scores", true, 3, 8 + 10 + (8*int64(n) + 10) + (8 + 10), (0.25 + 1.5625 + 4 + 0.5625 + 2.25) / 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			sessionPair(t, func(ctx context.Context, s *protocol.Session) error {
				enc := make([]uint64, n)
				for i, v := range vals {
					e, err := fp.Encode(v)
					if err != nil {
						return err
					}
					enc[i] = e
				}
				x, err := share.FromData(enc, n)
				if err != nil {
					return err
				}
				if x, err = shareFromDataOwner(s, x, n); err != nil {
					return err
				}
				c0 := s.Stream().Stats()
				m, err := meanEntropy(ctx, s, x, c.sqrt)
				if err != nil {
					return err
				}
				d := s.Stream().Stats().Sub(c0)
				if d.Rounds != c.rounds || d.BytesSent != c.bytes {
					t.Errorf("party %d: %d rounds, %d bytes; want %d, %d", s.Party(), d.Rounds, d.BytesSent, c.rounds, c.bytes)
				}
				v, err := s.Reveal(ctx, m)
				if err != nil {
					return err
				}
				if got := fp.Decode(v.Data[0]); math.Abs(got-c.want) > 1e-3 || len(m.Shape) != 1 {
					t.Errorf("mean %v (shape %v), want %v", got, m.Shape, c.want)
				}
				return nil
			})
		})
	}
	sessionPair(t, func(ctx context.Context, s *protocol.Session) error {
		if _, err := meanEntropy(ctx, s, &share.Tensor{Shape: []int{0}}, false); err == nil {
			t.Error("mean of no scores: no error")
		}
		return nil
	})
}

// TestPartialBatchPadded: a phase's last, partial batch runs as a full one
// (its candidates padded with repeats of its first), so that it draws what
// the others draw (without a dealer: the same HE packings, not a second
// set held beside them); the padding's entropies are dropped, and the
// selection is that of the plaintext schedule. testParams leaves a partial
// batch in both phases (230 = 14·16 + 6, 115 = 7·16 + 3).
func TestPartialBatchPadded(t *testing.T) {
	p := testParams()
	var mu sync.Mutex
	sizes := map[int]int{} // candidates of a batch → batches, both parties
	var res [2]*Result
	errs := pairNoClose(t, 60*time.Second, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
		ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint, batch: func(_ int, idx []int) {
			mu.Lock()
			sizes[len(idx)]++
			mu.Unlock()
		}}
		var err error
		if party == 0 {
			res[0], err = (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
		} else {
			res[1], err = (&DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", Logger: quiet()}).Run(ctx, conn, prov)
		}
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if want := map[int]int{p.BatchSize: 2 * (15 + 8)}; !maps.Equal(sizes, want) {
		t.Fatalf("batches by size %v, want %v (every batch full)", sizes, want)
	}
	want := plainSchedule(p, res[0].Bootstrap, testValue)
	if !slices.Equal(res[0].Selected, want[len(want)-1]) || !slices.Equal(res[1].Selected, res[0].Selected) {
		t.Fatalf("selected %v and %v, the plaintext schedule %v", res[0].Selected, res[1].Selected, want[len(want)-1])
	}
}

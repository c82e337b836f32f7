package selection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// revealStep is one run of a restart sequence.
type revealStep struct {
	// before alters the state directories before the run (a restart with an
	// empty or edited directory).
	before func(t *testing.T, dirs [2]string)
	// params overrides both parties' parameters (zero: the test's).
	params Params
	// failAfter makes a party's forward fail after that many batches (a crash
	// mid phase); crashOnBootstrap makes the model owner fail right after
	// receiving the bootstrap (before it checkpoints it).
	failAfter        [2]int
	crashOnBootstrap bool
	// check judges the two errors.
	check func(t *testing.T, errs [2]error, res [2]*Result)
}

// revealRun runs one step. The data owner's pool holds candidate i as the
// one-token input [i], so the bootstrap messages the model owner receives
// tell exactly which pool points it saw; seen accumulates them.
func revealRun(t *testing.T, p Params, dirs [2]string, do *DataOwner, st revealStep, seen map[int]bool) ([2]*Result, [2]error) {
	t.Helper()
	if st.params.PoolSize != 0 {
		p = st.params
	}
	var mu sync.Mutex
	var res [2]*Result
	errs := pair(t, [2]share.Seed{{3}, {4}}, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
		ev := &valueEvaluator{party: party, value: testValue, fp: share.DefaultFixedPoint, failAfter: st.failAfter[party]}
		var err error
		if party == 0 {
			mo := &ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[0], Logger: quiet()}
			mo.onBootstrap = func(b []byte) error {
				var in model.Input
				if err := json.Unmarshal(b, &in); err != nil {
					return err
				}
				mu.Lock()
				for _, row := range in.IDs {
					seen[row[0]] = true
				}
				mu.Unlock()
				if st.crashOnBootstrap {
					return fmt.Errorf("model owner crashed after receiving the bootstrap")
				}
				return nil
			}
			res[0], err = mo.Run(ctx, conn, prov)
		} else {
			d := do
			if d == nil {
				d = &DataOwner{StateDir: dirs[1]}
			}
			d.Params, d.Evaluator, d.EmbeddingHash, d.Logger = p, ev, "emb", quiet()
			d.Pool = model.Input{IDs: make([][]int, p.PoolSize)}
			for i := range d.Pool.IDs {
				d.Pool.IDs[i] = []int{i}
			}
			res[1], err = d.Run(ctx, conn, prov)
		}
		return err
	})
	return res, errs
}

func wipe(party int) func(t *testing.T, dirs [2]string) {
	return func(t *testing.T, dirs [2]string) {
		if err := os.RemoveAll(dirs[party]); err != nil {
			t.Fatal(err)
		}
	}
}

// editState rewrites party's state file with f.
func editState(party int, f func(s *State)) func(t *testing.T, dirs [2]string) {
	return func(t *testing.T, dirs [2]string) {
		path := StateFile(dirs[party], party)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := DecodeState(b)
		if err != nil {
			t.Fatal(err)
		}
		f(s)
		if b, err = json.Marshal(s); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func wantBothFail(t *testing.T, errs [2]error, _ [2]*Result) {
	t.Helper()
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("want both to fail: %v", errs)
	}
}

func wantSuccess(t *testing.T, errs [2]error, res [2]*Result) {
	t.Helper()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("want success: %v", errs)
	}
	if !slices.Equal(res[0].Selected, res[1].Selected) {
		t.Fatal("parties disagree")
	}
}

// wantRefused: the data owner refuses a second bootstrap and the model
// owner learns why.
func wantRefused(t *testing.T, errs [2]error, _ [2]*Result) {
	t.Helper()
	var pa *PeerAbortError
	if !errors.Is(errs[1], ErrBootstrapRevealed) {
		t.Fatalf("data owner: %v, want ErrBootstrapRevealed", errs[1])
	}
	if !errors.As(errs[0], &pa) || pa.Party != 1 || !strings.Contains(pa.Reason, "already sent the bootstrap") {
		t.Fatalf("model owner: %v, want the data owner's refusal", errs[0])
	}
}

// TestRestartRevealsNoSecondBootstrap runs sequences of crashes and
// restarts of either party, with empty, edited or intact state directories,
// and counts the distinct pool points the model owner received in the
// clear over the whole sequence: never more than one uninterrupted run
// reveals (Params.Bootstrap). On the old code, a model owner restarted with
// an empty or edited state directory made the data owner toss a new coin
// and send a second, different sample.
func TestRestartRevealsNoSecondBootstrap(t *testing.T) {
	p := testParams()
	crashMO := revealStep{failAfter: [2]int{3, 0}, check: wantBothFail}
	cases := []struct {
		name string
		// inMemory: the data owner runs without a StateDir, one DataOwner value
		// for the whole sequence.
		inMemory bool
		steps    []revealStep
	}{
		{"model owner restarts with an empty state directory", false, []revealStep{
			crashMO,
			{before: wipe(0), check: wantRefused},
			{before: wipe(0), check: wantRefused},
		}},
		{"model owner restarts with another coin", false, []revealStep{
			crashMO,
			{before: editState(0, func(s *State) { s.Seed = strings.Repeat("ab", 32) }), check: wantRefused},
		}},
		{"model owner forgets the bootstrap but keeps the coin", false, []revealStep{
			crashMO,
			{before: editState(0, func(s *State) { s.BootstrapDone, s.Bootstrap, s.Phases = false, nil, nil }), check: wantSuccess},
		}},
		{"model owner crashes after receiving the bootstrap", false, []revealStep{
			{crashOnBootstrap: true, check: wantBothFail},
			{check: wantSuccess},
		}},
		{"both restart with other parameters", false, []revealStep{
			crashMO,
			{before: wipe(0), params: func() Params { q := p; q.Budget = 30; return q }(), check: func(t *testing.T, errs [2]error, _ [2]*Result) {
				var se *StateError
				var pa *PeerAbortError
				if !errors.As(errs[1], &se) || !strings.Contains(se.Error(), "other parameters") {
					t.Fatalf("data owner: %v", errs[1])
				}
				if !errors.As(errs[0], &pa) || !strings.Contains(pa.Reason, "other parameters") {
					t.Fatalf("model owner: %v", errs[0])
				}
			}},
		}},
		{"data owner restarts", false, []revealStep{
			{failAfter: [2]int{0, 3}, check: wantBothFail},
			{check: wantSuccess},
		}},
		{"both restart twice, then the model owner with an empty directory", false, []revealStep{
			{failAfter: [2]int{0, 3}, check: wantBothFail},
			{failAfter: [2]int{5, 0}, check: wantBothFail},
			{check: wantSuccess},
			{before: wipe(0), check: wantRefused},
		}},
		{"data owner without a state directory, model owner restarts empty", true, []revealStep{
			crashMO,
			{before: wipe(0), check: wantRefused},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			var do *DataOwner
			if c.inMemory {
				dirs[1] = ""
				do = &DataOwner{}
			}
			seen := map[int]bool{}
			var boot []int
			for i, st := range c.steps {
				if st.before != nil {
					st.before(t, dirs)
				}
				res, errs := revealRun(t, p, dirs, do, st, seen)
				t.Logf("step %d: %v; %d distinct points seen so far", i, errs, len(seen))
				if len(seen) > p.Bootstrap {
					t.Fatalf("step %d: the model owner has seen %d distinct pool points in the clear; one run reveals %d", i, len(seen), p.Bootstrap)
				}
				st.check(t, errs, res)
				if res[0] != nil {
					if boot != nil && !slices.Equal(boot, res[0].Bootstrap) {
						t.Fatalf("step %d: bootstrap %v, earlier %v", i, res[0].Bootstrap, boot)
					}
					boot = res[0].Bootstrap
					want := plainSchedule(p, boot, testValue)
					if !slices.Equal(res[0].Selected, want[len(want)-1]) {
						t.Fatalf("step %d: selected %v, uninterrupted run %v", i, res[0].Selected, want[len(want)-1])
					}
				}
			}
			if len(seen) != p.Bootstrap {
				t.Fatalf("the model owner saw %d distinct pool points in the clear; one run reveals %d", len(seen), p.Bootstrap)
			}
		})
	}
}

// TestFailureTellsPeer: whichever way a party's run fails, before or during
// the session, both Run calls return within seconds, even though the caller
// never closes the connections; the failing party's error names the cause,
// and the peer's is a *PeerAbortError carrying the public reason code of
// that cause, never its text (which names settings, files, candidates).
func TestFailureTellsPeer(t *testing.T) {
	f := newSecureFixture(t)
	nanTarget := cloneModel(t, f.target)
	nanTarget.Params()[3].Value.Data[1] = nanValue()
	cases := []struct {
		name    string
		failing int // the party whose run fails
		edit    func(mo *ModelOwner, do *DataOwner)
		cause   string    // in the failing party's error only
		code    AbortCode // the peer's reason
		// revealed: the data owner sent its bootstrap before the failure.
		revealed bool
	}{
		{"bad proxy settings", 0, func(mo *ModelOwner, do *DataOwner) { mo.Generate.Tune.LR = -1 }, "learning rate -1", AbortInput, false},
		{"missing labeller", 0, func(mo *ModelOwner, do *DataOwner) { mo.Label = nil }, "Label function", AbortInput, false},
		{"NaN checkpoint", 0, func(mo *ModelOwner, do *DataOwner) { mo.Target = nanTarget }, "non-finite", AbortInput, false},
		{"proxy phase too deep", 0, func(mo *ModelOwner, do *DataOwner) { mo.Params.Schedule[1].Proxy.Layers = 5; do.Params = mo.Params }, "does not fit a target", AbortInput, false},
		{"too few labels", 0, func(mo *ModelOwner, do *DataOwner) {
			mo.Label = func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
				return make([]int, len(idx)-1), nil
			}
		}, "labels for", AbortInput, true},
		{"labeller fails", 0, func(mo *ModelOwner, do *DataOwner) {
			mo.Label = func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
				return nil, errors.New("annotators on strike")
			}
		}, "annotators on strike", AbortInput, true},
		{"pool smaller than PoolSize", 1, func(mo *ModelOwner, do *DataOwner) {
			do.Pool = model.Input{Pixels: do.Pool.Pixels[:len(do.Pool.Pixels)-1]}
		}, "pool holds 95 candidates", AbortInput, false},
		{"pool image of another size", 1, func(mo *ModelOwner, do *DataOwner) {
			px := slices.Clone(do.Pool.Pixels)
			px[7] = px[7][:10]
			do.Pool = model.Input{Pixels: px}
		}, "candidate 7 has 10 pixel values", AbortInput, false},
		{"corrupt data-owner state", 1, func(mo *ModelOwner, do *DataOwner) {
			do.StateDir = t.TempDir()
			if err := os.WriteFile(StateFile(do.StateDir, 1), []byte(`{"version":1,"party":1,"seed":"zz"`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "state-p1.json", AbortState, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mo, do := f.owners([2]string{})
			mo.Params.Schedule = slices.Clone(mo.Params.Schedule)
			do.Params = mo.Params
			c.edit(mo, do)
			start := time.Now()
			var ctrl [2]transport.Stats
			errs := pairNoClose(t, 60*time.Second, func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
				defer func() { ctrl[party] = conn.Stream(StreamControl).Stats() }()
				if party == 0 {
					_, err := mo.Run(ctx, conn, prov)
					return err
				}
				_, err := do.Run(ctx, conn, prov)
				return err
			})
			el := time.Since(start)
			t.Logf("%v: model owner: %v; data owner: %v", el.Round(time.Millisecond), errs[0], errs[1])
			if el > 10*time.Second {
				t.Errorf("took %v", el)
			}
			if err := errs[c.failing]; err == nil || !strings.Contains(err.Error(), c.cause) {
				t.Errorf("party %d: %v, want an error naming %q", c.failing, err, c.cause)
			}
			var pa *PeerAbortError
			if err := errs[1-c.failing]; !errors.As(err, &pa) || pa.Party != c.failing || pa.Code != c.code || strings.Contains(err.Error(), c.cause) {
				t.Errorf("party %d: %v, want the peer's abort with code %d (%s) and not its cause", 1-c.failing, err, c.code, c.code)
			}
			// A failure that can be seen before the session fails before the data
			// owner sends anything but its hello.
			if !c.revealed && ctrl[1].MsgsSent > 1 {
				t.Errorf("the data owner sent %d control messages (%d bytes) before the failure", ctrl[1].MsgsSent, ctrl[1].BytesSent)
			}
		})
	}
}

// pairNoClose runs f as both parties like pair, but never closes the
// connections itself: Run must end the session on its own. It fails the
// test if the parties have not both returned within limit.
func pairNoClose(t *testing.T, limit time.Duration, f func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error) [2]error {
	t.Helper()
	d := dealer.NewWithSeeds(share.Seed{7}, share.Seed{8})
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	conns := [2]*transport.Conn{c0, c1}
	var errs [2]error
	done := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov, err := d.Provider(p)
			if err != nil {
				errs[p] = err
				return
			}
			errs[p] = f(context.Background(), p, conns[p], prov)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("the parties still wait after %v: %v", limit, errs)
	}
	return errs
}

func nanValue() float64 {
	var z float64
	return z / z
}

// cloneModel returns a deep copy of m (same config and weights).
func cloneModel(t *testing.T, m *model.Model) *model.Model {
	t.Helper()
	c, err := model.New(m.Config, 1)
	if err != nil {
		t.Fatal(err)
	}
	src := m.Params()
	for i, p := range c.Params() {
		copy(p.Value.Data, src[i].Value.Data)
	}
	return c
}

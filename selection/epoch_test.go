package selection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/marks"
	"github.com/selectformer/selectformer/beaver/ot"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/sessiontest"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// weightEvaluator is a valueEvaluator whose Prepare also shares a vector of
// the model owner's under the phase's weight base, so that a run draws
// weight masks (the items whose reuse reveals weights) as well as triples,
// square and wrap pairs.
type weightEvaluator struct{ *valueEvaluator }

func (w weightEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, wb uint64) (Forwarder, error) {
	if err := sessiontest.ShareWeights(ctx, s, wb); err != nil {
		return nil, err
	}
	return w.valueEvaluator.Prepare(ctx, s, phase, arch, wb)
}

// epochRun runs one selection of testParams with a forward that draws
// material (squares) and shares weights, both parties on the same dealer
// seeds (a fresh in-process dealer, as after a restart of everyone), with
// the model owner's provider wrapped in a recorder, which it returns.
// setup, if set, configures the data owner.
func epochRun(t *testing.T, dirs [2]string, failAfter [2]int, setup func(*DataOwner)) ([2]*Result, [2]error, *recorder) {
	t.Helper()
	return epochRunOn(t, false, dirs, failAfter, setup)
}

// epochRunOn is epochRun with the parties' correlated randomness from the
// in-process dealer (free false) or made by the parties themselves with no
// dealer (free true: ot.Provider, every kind by OT).
func epochRunOn(t *testing.T, free bool, dirs [2]string, failAfter [2]int, setup func(*DataOwner)) ([2]*Result, [2]error, *recorder) {
	t.Helper()
	p := testParams()
	var res [2]*Result
	rec := &recorder{}
	run := func(f func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error) [2]error {
		if !free {
			return pair(t, [2]share.Seed{{3}, {4}}, f)
		}
		r, _ := twoparty.Run(context.Background(), twoparty.Config{}, func(ctx context.Context, tp *twoparty.Party) (struct{}, error) {
			prov, err := ot.NewProvider(tp.Conn, tp.ID, ot.ProviderOptions{})
			if err != nil {
				return struct{}{}, err
			}
			return struct{}{}, f(ctx, tp.ID, tp.Conn, prov)
		})
		return r.Err
	}
	errs := run(func(ctx context.Context, party int, conn *transport.Conn, prov beaver.Provider) error {
		ev := weightEvaluator{&valueEvaluator{party: party, value: shifted, square: true, fp: share.DefaultFixedPoint, failAfter: failAfter[party]}}
		var err error
		if party == 0 {
			rec.Provider = prov
			res[0], err = (&ModelOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[0], Logger: quiet()}).Run(ctx, conn, rec)
			return err
		}
		do := &DataOwner{Params: p, Evaluator: ev, EmbeddingHash: "emb", StateDir: dirs[1], Logger: quiet()}
		if setup != nil {
			setup(do)
		}
		res[1], err = do.Run(ctx, conn, prov)
		return err
	})
	return res, errs, rec
}

// stateEpoch reads party's checkpointed epoch in dirs.
func stateEpoch(t *testing.T, dirs [2]string, party int) uint64 {
	t.Helper()
	b, err := os.ReadFile(StateFile(dirs[party], party))
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	return s.Epoch
}

// interruptedRun is the first run of the forged-epoch tests: the model
// owner fails in phase 1, after drawing material (and weight masks) in
// both phases; it returns the words it drew.
func interruptedRun(t *testing.T, dirs [2]string) []uint64 {
	t.Helper()
	_, errs, rec := epochRun(t, dirs, [2]int{20, 0}, nil)
	if errs[0] == nil || errs[1] == nil {
		t.Fatalf("interrupted run: %v", errs)
	}
	if len(rec.words) < 100 {
		t.Fatalf("the model owner drew only %d words", len(rec.words))
	}
	return append([]uint64(nil), rec.words...)
}

// forgeDataOwner is the attack of issue 24 (hole 1) done to the data
// owner's checkpoint: its epoch 2^24 − 1 ahead (16777216 after a run of
// epoch 1), so that the next run's epoch, one more, wraps (e<<EpochShift)
// onto the epoch both parties ran last, and its batch files removed, so
// that the model owner redoes its batches at the counters of that run.
func forgeDataOwner(t *testing.T, dirs [2]string) {
	t.Helper()
	editState(1, func(s *State) { s.Epoch += 1<<24 - 1 })(t, dirs)
	if err := os.RemoveAll(filepath.Join(dirs[1], "batches-p1")); err != nil {
		t.Fatal(err)
	}
}

// TestForgedEpochStateRefused is the attack of issue 24 (hole 1) with
// unmodified party code: after a run of epoch 1, the data owner writes
// epoch 2^24 into its own state file, deletes its batch files and resumes. The model owner used to
// adopt the epoch, whose counters wrap onto its previous run's, and draw
// every item of that run again, byte-identical (from which the data owner
// recovers the weights). Now the data owner's own checkpoint is refused
// (an epoch of 2^24 or more is out of range), the model owner learns it
// from the abort, and it draws no word it drew before.
func TestForgedEpochStateRefused(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	first := interruptedRun(t, dirs)
	forgeDataOwner(t, dirs)
	_, errs, rec := epochRun(t, dirs, [2]int{}, nil)
	if n := common(first, rec.words); n > 0 {
		t.Errorf("the resumed model owner drew %d of its %d words of the first run again (of %d it drew)", n, len(first), len(rec.words))
	}
	var se *StateError
	if !errors.As(errs[1], &se) || !strings.Contains(se.Error(), "epoch") {
		t.Errorf("data owner with a forged epoch: %v, want a *StateError about the epoch", errs[1])
	}
	if errs[0] == nil {
		t.Error("the model owner accepted the resume")
	}
	if e := stateEpoch(t, dirs, 0); e >= 1<<24 {
		t.Errorf("the model owner's epoch is %d", e)
	}
}

// TestModelOwnerRefusesForgedEpoch: the same attack by a data owner that
// announces the forged epoch whatever its own checks say (forgeEpoch plays
// the modified code): the model owner refuses the handshake with an
// *EpochError, keeps its own epoch, and draws no word it drew before.
func TestModelOwnerRefusesForgedEpoch(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	first := interruptedRun(t, dirs)
	forged := uint64(0)
	_, errs, rec := epochRun(t, dirs, [2]int{}, func(d *DataOwner) {
		// Its run's epoch (2) plus 2^24 − 1: wraps onto epoch 1, the
		// first run's.
		d.forgeEpoch = func(e uint64) uint64 { forged = e + 1<<24 - 1; return forged }
		if err := os.RemoveAll(filepath.Join(dirs[1], "batches-p1")); err != nil {
			t.Fatal(err)
		}
	})
	if n := common(first, rec.words); n > 0 {
		t.Errorf("the resumed model owner drew %d of its %d words of the first run again (of %d it drew)", n, len(first), len(rec.words))
	}
	var ee *EpochError
	if !errors.As(errs[0], &ee) || ee.Peer != forged || ee.Local != 2 {
		t.Fatalf("model owner: %v, want an *EpochError (peer %d, local 2)", errs[0], forged)
	}
	// The lying data owner ends either on the model owner's abort about
	// the epoch or, when its own lanes refuse the forged epoch (outside
	// the epoch bound) before that abort arrives, on that refusal.
	var pe *PeerAbortError
	told := errors.As(errs[1], &pe) && pe.Code == AbortResume && strings.Contains(pe.Reason, "epoch")
	if own := errs[1] != nil && strings.Contains(errs[1].Error(), fmt.Sprintf("start epoch %d", forged)); !told && !own {
		t.Errorf("data owner: %v, want the model owner's abort about the epoch (or its own refusal of epoch %d)", errs[1], forged)
	}
	if e := stateEpoch(t, dirs, 0); e != 2 {
		t.Errorf("the model owner's epoch is %d, want 2", e)
	}
}

// saveStates returns both parties' state files in dirs (a backup).
func saveStates(t *testing.T, dirs [2]string) [2][]byte {
	t.Helper()
	var saved [2][]byte
	for party := range 2 {
		b, err := os.ReadFile(StateFile(dirs[party], party))
		if err != nil {
			t.Fatal(err)
		}
		saved[party] = b
	}
	return saved
}

// rollBack restores both parties' state files from saved (a restore from
// the backup) and removes their batch files.
func rollBack(t *testing.T, dirs [2]string, saved [2][]byte) {
	t.Helper()
	for party := range 2 {
		if err := os.WriteFile(StateFile(dirs[party], party), saved[party], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(dirs[party], []string{"batches-p0", "batches-p1"}[party])); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMarksRefuseRolledBackState: the persistent high-water marks hold
// even when the handshake accepts the epochs. Both parties' state files
// are rolled back to an earlier copy (epoch 1, as after a restore from a
// backup) after a second run at epoch 2: the third run agrees on epoch 2
// again, within every epoch bound, but the marks of the second run
// (MarksFile) refuse its counters before anything is drawn: no word of the
// second run is drawn again.
func TestMarksRefuseRolledBackState(t *testing.T) {
	dirs := [2]string{t.TempDir(), t.TempDir()}
	interruptedRun(t, dirs)
	saved := saveStates(t, dirs)
	res, errs, rec := epochRun(t, dirs, [2]int{}, nil)
	if errs[0] != nil || errs[1] != nil || res[0].Epoch != 2 {
		t.Fatalf("second run: %v (epoch %v)", errs, res[0])
	}
	second := append([]uint64(nil), rec.words...)
	rollBack(t, dirs, saved)
	_, errs, rec = epochRun(t, dirs, [2]int{}, nil)
	if n := common(second, rec.words); n > 0 {
		t.Errorf("the rolled-back model owner drew %d words of the second run again (of %d it drew)", n, len(rec.words))
	}
	var pe *PeerAbortError
	if !errors.Is(errs[0], marks.ErrReuse) && !(errors.As(errs[0], &pe) && pe.Code == AbortResume) {
		t.Errorf("model owner: %v, want a refusal wrapping marks.ErrReuse, or the data owner's AbortResume", errs[0])
	}
	if errs[1] == nil {
		t.Error("data owner: the run went through")
	}
}

// TestEpochAttacksDealerFree plays issue 24's epoch attacks against
// parties with no dealer (ot.Provider): the bounds hold whatever makes the
// correlated randomness, because the handshake checks the epochs and
// selection wraps every provider in the persistent high-water marks. A data
// owner that forges its epoch 2^24 − 1 ahead is refused by the model owner
// before anything is drawn (*EpochError, the data owner told AbortResume);
// both parties rolled back to an earlier checkpoint are refused by their
// marks (marks.ErrReuse) or by the peer's.
func TestEpochAttacksDealerFree(t *testing.T) {
	for _, c := range []struct {
		name   string
		attack func(t *testing.T, dirs [2]string) (setup func(*DataOwner), check func(t *testing.T, errs [2]error))
	}{
		{"forged epoch", func(t *testing.T, dirs [2]string) (func(*DataOwner), func(*testing.T, [2]error)) {
			forged := uint64(0)
			setup := func(d *DataOwner) {
				d.forgeEpoch = func(e uint64) uint64 { forged = e + 1<<24 - 1; return forged }
				if err := os.RemoveAll(filepath.Join(dirs[1], "batches-p1")); err != nil {
					t.Fatal(err)
				}
			}
			return setup, func(t *testing.T, errs [2]error) {
				var ee *EpochError
				if !errors.As(errs[0], &ee) || ee.Peer != forged {
					t.Fatalf("model owner: %v, want an *EpochError (peer %d)", errs[0], forged)
				}
				// The lying data owner adopts its own forged epoch too: its
				// lanes refuse to start there, and under load that can come
				// before the model owner's abort arrives.
				var pe *PeerAbortError
				own := errs[1] != nil && strings.Contains(errs[1].Error(), fmt.Sprintf("start epoch %d: outside", forged))
				if !own && (!errors.As(errs[1], &pe) || pe.Code != AbortResume) {
					t.Errorf("data owner: %v, want the model owner's AbortResume (or its own lanes' refusal of epoch %d)", errs[1], forged)
				}
			}
		}},
		{"rolled back", func(t *testing.T, dirs [2]string) (func(*DataOwner), func(*testing.T, [2]error)) {
			saved := saveStates(t, dirs)
			if _, errs, _ := epochRunOn(t, true, dirs, [2]int{}, nil); errs[0] != nil || errs[1] != nil {
				t.Fatalf("second run: %v", errs)
			}
			rollBack(t, dirs, saved)
			return nil, func(t *testing.T, errs [2]error) {
				var pe *PeerAbortError
				if !errors.Is(errs[0], marks.ErrReuse) && !(errors.As(errs[0], &pe) && pe.Code == AbortResume) {
					t.Errorf("model owner: %v, want a refusal wrapping marks.ErrReuse, or the data owner's AbortResume", errs[0])
				}
				if errs[1] == nil {
					t.Error("data owner: the rolled-back run went through")
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dirs := [2]string{t.TempDir(), t.TempDir()}
			if _, errs, _ := epochRunOn(t, true, dirs, [2]int{20, 0}, nil); errs[0] == nil || errs[1] == nil {
				t.Fatalf("interrupted run: %v", errs)
			}
			setup, check := c.attack(t, dirs)
			_, errs, _ := epochRunOn(t, true, dirs, [2]int{}, setup)
			check(t, errs)
		})
	}
}

func TestCheckEpoch(t *testing.T) {
	for _, c := range []struct {
		mine, peer uint64
		ok         bool
	}{
		{1, 1, true},
		{1, 2, true},
		{7, 3, true},
		{1, 1 + MaxEpochLead, true},
		{1, 2 + MaxEpochLead, false},
		{1, 0, false},
		{1, MaxEpoch, false},
		{2, 1<<24 + 2, false},
		{MaxEpoch - 1, MaxEpoch - 1, true},
		{MaxEpoch - 2, MaxEpoch - 1, true},
		{5, 1<<64 - 1, false},
	} {
		err := checkEpoch(c.mine, c.peer)
		if (err == nil) != c.ok {
			t.Errorf("mine %d, peer %d: %v", c.mine, c.peer, err)
		}
		var ee *EpochError
		if err != nil && (!errors.As(err, &ee) || ee.Local != c.mine || ee.Peer != c.peer) {
			t.Errorf("mine %d, peer %d: %v is not the EpochError", c.mine, c.peer, err)
		}
	}
}

// TestCheckPeerHello: the numbers of a peer's hello that become positions,
// sizes or loop bounds (epoch, sequence length, the resume summary's
// phases, batch numbers and epochs) are refused out of range.
func TestCheckPeerHello(t *testing.T) {
	p := testParams().WithDefaults() // 230 candidates in batches of 16: 15 batches
	base := func() hello {
		return hello{Epoch: 3, Seq: 16, Resume: summary{SeedHash: "x", BootstrapDone: true,
			Phases: []phaseSummary{{Done: true}, {Batches: []int{0, 3, 14}, Epochs: []uint64{1, 2, 2}}}}}
	}
	mine := hello{Epoch: 3}
	if err := checkPeerHello(mine, base(), p); err != nil {
		t.Fatalf("honest hello refused: %v", err)
	}
	for _, c := range []struct {
		name string
		f    func(h *hello)
	}{
		{"epoch wraps", func(h *hello) { h.Epoch = 1<<24 + 3 }},
		{"epoch leads too far", func(h *hello) { h.Epoch = 3 + MaxEpochLead + 1 }},
		{"epoch zero", func(h *hello) { h.Epoch = 0 }},
		{"negative seq", func(h *hello) { h.Seq = -1 }},
		{"huge seq", func(h *hello) { h.Seq = secure.MaxWidth + 1 }},
		{"more phases than the schedule", func(h *hello) { h.Resume.Phases = append(h.Resume.Phases, phaseSummary{}) }},
		{"phases before the bootstrap", func(h *hello) { h.Resume.BootstrapDone = false }},
		{"batch beyond the pool", func(h *hello) { h.Resume.Phases[1].Batches[2] = 15 }},
		{"negative batch", func(h *hello) { h.Resume.Phases[1].Batches[0] = -1 }},
		{"batches out of order", func(h *hello) { h.Resume.Phases[1].Batches[1] = 0 }},
		{"epochs missing", func(h *hello) { h.Resume.Phases[1].Epochs = h.Resume.Phases[1].Epochs[:2] }},
		{"batch of epoch zero", func(h *hello) { h.Resume.Phases[1].Epochs[0] = 0 }},
		{"batch of a wrapping epoch", func(h *hello) { h.Resume.Phases[1].Epochs[0] = MaxEpoch }},
		{"too many batches", func(h *hello) {
			h.Resume.Phases[1].Batches = make([]int, 16)
			h.Resume.Phases[1].Epochs = make([]uint64, 16)
		}},
	} {
		h := base()
		c.f(&h)
		if err := checkPeerHello(mine, h, p); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	// Batch numbers are bounded by the phase's own batch size: in batches
	// of 32, phase 2 has at most 8 batches, so batch 14 is refused there,
	// and 7 accepted.
	sized := p
	sized.Schedule = slices.Clone(p.Schedule)
	sized.Schedule[1].BatchSize = 32
	if err := checkPeerHello(mine, base(), sized); err == nil {
		t.Error("batch 14 of a phase in batches of 32 (8 batches): accepted")
	}
	h := base()
	h.Resume.Phases[1].Batches[2] = 7
	if err := checkPeerHello(mine, h, sized); err != nil {
		t.Errorf("batch 7 of a phase in batches of 32: %v", err)
	}
}

// TestEpochSpaceExhausted: a checkpoint at the last epoch runs no more
// (its next epoch would wrap), and one beyond it does not decode.
func TestEpochSpaceExhausted(t *testing.T) {
	r := &runner{store: &checkpointStore{}}
	if err := r.beginEpoch(&State{Version: stateVersion, Epoch: MaxEpoch - 1}); err == nil {
		t.Error("a run beyond the last epoch began")
	}
	if _, err := DecodeState([]byte(`{"version":1,"party":0,"view_hash":"","epoch":16777216,"phases":null}`)); err == nil {
		t.Error("a state of epoch 2^24 decoded")
	}
	if _, err := DecodeState([]byte(`{"version":1,"party":0,"view_hash":"","epoch":16777215,"phases":null}`)); err != nil {
		t.Errorf("a state of epoch 2^24−1: %v", err)
	}
}

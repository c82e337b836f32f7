package selection

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
)

// phaseRunner is a ShardRunner that runs f on each phase.
type phaseRunner struct {
	k int
	f func(ctx context.Context, ph *ShardedPhase) error
}

func (r phaseRunner) Shards() int                                          { return r.k }
func (r phaseRunner) RunPhase(ctx context.Context, ph *ShardedPhase) error { return r.f(ctx, ph) }

// clearShares records every pending batch of ph with this party's shares
// of testValue in the clear (the data owner's the values, the model
// owner's zeros), at epoch 3.
func clearShares(ctx context.Context, ph *ShardedPhase) error {
	bs := ph.Params.BatchSize
	for b := range ph.Batches() {
		if ph.Recorded(b) {
			continue
		}
		idx := ph.Candidates[b*bs : min((b+1)*bs, len(ph.Candidates))]
		sh := make([]uint64, len(idx))
		for j, i := range idx {
			if ph.Party == 1 {
				sh[j], _ = ph.Params.FixedPoint.Encode(testValue(ph.Phase, i))
			}
		}
		if err := ph.Record(ctx, BatchShares{Batch: b, Epoch: 3, Shares: sh}); err != nil {
			return err
		}
	}
	return nil
}

// TestShardedPhaseHooks: a ShardRunner reaches the coordinator only through
// its ShardedPhase. A runner that records every batch (here the plaintext
// values as shares), raises a floor and adds its figures gives the
// plaintext selection, with the floor in the checkpoint and the figures in
// the phase's; one that records a batch of another number or size or of an
// epoch outside 1..MaxEpoch−1, raises a floor to MaxEpoch, reports figures
// out of bounds, or leaves a batch unrecorded, fails the run (the batch
// checks as an AbortProtocol error told to the peer).
func TestShardedPhaseHooks(t *testing.T) {
	p := testParams()
	sess := beaver.SessionID{1, 2, 3}
	good := func(ctx context.Context, ph *ShardedPhase) error {
		if err := ph.RaiseFloor(sess, uint64(5+ph.Phase)); err != nil {
			return err
		}
		if err := ph.RaiseFloor(sess, 1); err != nil || ph.Floor(sess) != uint64(5+ph.Phase) {
			t.Errorf("phase %d: floor %d after raising it to %d and then 1 (%v)", ph.Phase+1, ph.Floor(sess), 5+ph.Phase, err)
		}
		if err := clearShares(ctx, ph); err != nil {
			return err
		}
		return ph.AddStats(ShardStats{Shard: 0, Batches: ph.Batches(), Attempts: 1, ForwardRounds: 7, BytesSent: 100, BytesRecv: 90, RandomnessBytes: 10, Seconds: 1})
	}
	dirs := [2]string{t.TempDir(), t.TempDir()}
	runner := phaseRunner{k: 2, f: good}
	res, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: dirs, shards: [2]ShardRunner{runner, runner}})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	want := plainSchedule(p, res[0].Bootstrap, testValue)
	for q := range 2 {
		for i := range want {
			if !slices.Equal(res[q].Survivors[i], want[i]) {
				t.Fatalf("party %d phase %d: survivors differ from the plaintext", q, i+1)
			}
			if s := res[q].Phases[i].Shards; len(s) != 1 || s[0].BytesSent != 100 || res[q].Phases[i].ForwardRounds != 7 {
				t.Errorf("party %d phase %d: %+v; want the runner's figures added", q, i+1, res[q].Phases[i])
			}
		}
		st, err := (&checkpointStore{dir: dirs[q], party: q}).load()
		if err != nil {
			t.Fatal(err)
		}
		if f := st.ShardFloors[hex.EncodeToString(sess[:])]; f != uint64(5+len(p.Schedule)-1) {
			t.Errorf("party %d: the checkpoint's floor %d, want %d", q, f, 5+len(p.Schedule)-1)
		}
	}

	bad := []struct {
		name string
		f    func(ctx context.Context, ph *ShardedPhase) error
		want string
		code AbortCode // of the hook's error
	}{
		{"a batch beyond the phase", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.Record(ctx, BatchShares{Batch: ph.Batches(), Epoch: 3, Shares: make([]uint64, 1)})
		}, "batch 15 of 15", AbortProtocol},
		{"a short batch", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.Record(ctx, BatchShares{Batch: 0, Epoch: 3, Shares: make([]uint64, ph.Params.BatchSize-1)})
		}, "15 shares", AbortProtocol},
		{"epoch 0", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.Record(ctx, BatchShares{Batch: 0, Shares: make([]uint64, ph.Params.BatchSize)})
		}, "of epoch 0", AbortProtocol},
		{"epoch MaxEpoch", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.Record(ctx, BatchShares{Batch: 0, Epoch: MaxEpoch, Shares: make([]uint64, ph.Params.BatchSize)})
		}, "of epoch 16777216", AbortProtocol},
		{"a floor at MaxEpoch", func(ctx context.Context, ph *ShardedPhase) error { return ph.RaiseFloor(sess, MaxEpoch) }, "shard floor epoch", AbortInternal},
		{"negative figures", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.AddStats(ShardStats{Batches: 1, Attempts: 1, BytesSent: -1})
		}, "traffic of -1", AbortProtocol},
		{"NaN seconds", func(ctx context.Context, ph *ShardedPhase) error {
			return ph.AddStats(ShardStats{Batches: 1, Attempts: 1, Seconds: math.NaN()})
		}, "wall time", AbortProtocol},
		{"a batch left unrecorded", func(ctx context.Context, ph *ShardedPhase) error {
			return clearShares(ctx, phaseWithout(ph, ph.Batches()-1))
		}, "left batch 14 unrecorded", AbortInternal},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			var ran [2]bool
			runners := [2]ShardRunner{}
			for q := range 2 {
				runners[q] = phaseRunner{k: 2, f: func(ctx context.Context, ph *ShardedPhase) error {
					ran[q] = true
					return c.f(ctx, ph)
				}}
			}
			_, errs := runSelection(t, runCfg{p: [2]Params{p, p}, dirs: [2]string{t.TempDir(), t.TempDir()}, shards: runners})
			// Each party fails with its own error, or with the peer's abort
			// of that error's code (whichever came first); one with its own.
			own := false
			for q := range 2 {
				var pa *PeerAbortError
				switch {
				case errs[q] == nil:
					t.Errorf("party %d: the run succeeded", q)
				case errors.As(errs[q], &pa):
					if pa.Code != c.code {
						t.Errorf("party %d: the peer's abort %v, want code %d", q, pa, c.code)
					}
				case !ran[q] || !strings.Contains(errs[q].Error(), c.want) || AbortCodeOf(errs[q]) != c.code:
					t.Errorf("party %d (runner ran: %v): %v (abort code %d), want an error saying %q, of code %d", q, ran[q], errs[q], AbortCodeOf(errs[q]), c.want, c.code)
				default:
					own = true
				}
			}
			if !own {
				t.Errorf("neither party failed with its own error: %v", errs)
			}
		})
	}
}

// phaseWithout is ph, whose Batches leave out its last batches from n on
// (a runner that forgets them).
func phaseWithout(ph *ShardedPhase, n int) *ShardedPhase {
	c := *ph
	c.Candidates = c.Candidates[:n*c.Params.BatchSize]
	return &c
}

// TestDecodeStateShardFloors: a checkpoint's shard floors are a session's
// 64 lowercase hex digits to an epoch in 1..MaxEpoch−1.
func TestDecodeStateShardFloors(t *testing.T) {
	key := strings.Repeat("ab", 32)
	for _, c := range []struct {
		floors string
		ok     bool
	}{
		{`{"` + key + `":3}`, true},
		{`{"` + key + `":0}`, false},
		{`{"` + key + `":16777216}`, false},
		{`{"` + strings.ToUpper(key) + `":3}`, false},
		{`{"` + key[:62] + `":3}`, false},
		{`{"not hex":3}`, false},
		{`{"` + key + `":-1}`, false},
	} {
		_, err := DecodeState([]byte(`{"version":1,"party":0,"view_hash":"","epoch":2,"phases":null,"shard_floors":` + c.floors + `}`))
		if (err == nil) != c.ok {
			t.Errorf("shard floors %s: %v", c.floors, err)
		}
	}
}

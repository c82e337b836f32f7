package shard

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// coordFloors reads the shard floors of party's coordinator checkpoint in
// dir (State.ShardFloors).
func coordFloors(t *testing.T, dir string, party int) map[string]uint64 {
	t.Helper()
	return loadState(t, dir, party).ShardFloors
}

// sentJob returns the job of phase and shard that party's coordinator
// sent, with its Floor as sent.
func (r *shardRig) sentJob(t *testing.T, party, phase, shard int) (*Job, uint64) {
	t.Helper()
	for i, j := range r.sent[party] {
		if j.Phase == phase && j.Shard == shard {
			return j, r.floors[party][i]
		}
	}
	t.Fatalf("party %d's coordinator sent no job of phase %d shard %d", party, phase+1, shard+1)
	return nil, 0
}

// TestShardWorkerEmptyDirDrawsNothingTwice is issue 36's item 3: the model
// owner's worker 0 is killed in the middle of phase 1 and comes back with
// an empty directory (a replacement pod on another node, a lost volume, a
// state deleted after exit 4), and its coordinator sends it the same job
// (the same dealer session) again; the data owner's worker 0 loses its
// directory as well (its checkpoint and high-water marks: a replaced pod,
// or a lying data owner that deletes them). The model owner's worker used
// to start at epoch 1 again, the data owner's too, and the pair ran epoch
// 1 again: the second life drew the first life's words again, word for
// word, and every process finished with no error. Now each coordinator has
// recorded every epoch its worker reached before the worker drew there
// (Job.Reached) and sends the job again with that floor (Job.Floor): the
// worker runs above it, the pair adopts the larger epoch, the second life
// draws no word of the first, and the selection is the unsharded one;
// also when the data owner's worker announces epoch 1 whatever its floor.
func TestShardWorkerEmptyDirDrawsNothingTwice(t *testing.T) {
	ref := unshardedRef(t, testParams())
	for _, c := range []struct {
		name string
		// forge is the data owner's workers' epoch in every pair hello.
		forge func(uint64) uint64
	}{
		{"both workers lose their directories", nil},
		{"the data owner's worker announces epoch 1", func(uint64) uint64 { return 1 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newShardRig(t, 2, false)
			r.kill = r.killWorker00(50)
			r.onRestart = func(_, k int) {
				for q := range 2 {
					if err := os.RemoveAll(r.wdirs[q][k]); err != nil {
						t.Error(err)
					}
				}
			}
			r.forge[1] = c.forge
			got, errs, werrs := r.run()
			checkSame(t, ref, got, errs, werrs)
			lives := r.words[0][0]
			var drew []int
			for _, w := range lives {
				drew = append(drew, len(w))
			}
			if len(lives) != 2 || slices.Min(drew) < 50 {
				t.Fatalf("worker (0, 0) drew %v words in its lives; want 2 lives, each drawing at least 50", drew)
			}
			if n := common(lives[0], lives[1]); n != 0 {
				t.Errorf("the worker back with an empty directory drew %d words of its first life again (of %d it drew)", n, len(lives[1]))
			}
			// The job went out at floor 0 and came back with its first
			// life's epoch; the coordinator's checkpoint holds the epoch
			// of the second life, above it.
			job, sent := r.sentJob(t, 0, 0, 0)
			floor := coordFloors(t, r.dirs[0], 0)[hex.EncodeToString(job.Session[:])]
			if sent != 0 || job.Floor < 2 || floor != job.Floor {
				t.Errorf("phase 1 shard 1: sent at floor %d, raised to %d, recorded %d; want 0, then at least 2, recorded", sent, job.Floor, floor)
			}
		})
	}
}

// TestShardCoordinatorRestartKeepsFloors: the floors live in the
// coordinators' checkpoints. Both coordinators fail in phase 1 while shard
// 2's pair runs (interruptPhase1, as in
// TestShardCoordinatorRestartResumes), and both of shard 2's workers lose
// their directories before the coordinators restart: the restarted
// coordinators read the floors back, send shard 2's job with them, and
// the model owner's worker 2 draws no word it drew before the restart.
func TestShardCoordinatorRestartKeepsFloors(t *testing.T) {
	ref := unshardedRef(t, testParams())
	r := newShardRig(t, 2, false)
	r.interruptPhase1()
	job, _ := r.sentJob(t, 0, 0, 1)
	key := hex.EncodeToString(job.Session[:])
	var recorded [2]uint64
	for p := range 2 {
		if recorded[p] = coordFloors(t, r.dirs[p], p)[key]; recorded[p] < 1 {
			t.Fatalf("party %d's coordinator recorded floor %d for phase 1 shard 2", p, recorded[p])
		}
		if err := os.RemoveAll(r.wdirs[p][1]); err != nil {
			t.Fatal(err)
		}
	}
	before := slices.Concat(r.words[0][1]...)
	if len(before) < 100 {
		t.Fatalf("worker (0, 2) drew %d words before the restart", len(before))
	}
	lives := len(r.words[0][1])
	r.resetWorkers()
	r.jobs, r.sent, r.floors = [2]map[int]int{}, [2][]*Job{}, [2][]uint64{}
	got, errs, werrs := r.run()
	checkSame(t, ref, got, errs, werrs)
	for p := range 2 {
		if _, sent := r.sentJob(t, p, 0, 1); sent != recorded[p] {
			t.Errorf("party %d: the restarted coordinator sent phase 1 shard 2 at floor %d, its checkpoint holds %d", p, sent, recorded[p])
		}
	}
	after := slices.Concat(r.words[0][1][lives:]...)
	if n := common(before, after); n != 0 {
		t.Errorf("worker (0, 2) drew %d words of before the restart again (of %d it drew)", n, len(after))
	}
}

// TestEpochReportRefusals: the coordinator's side of the epoch reports
// (decodeEpochReport) and Job.Reached refuse an epoch outside 1..MaxEpoch−1
// and a report of another size; a floor a job's worker could not run above
// is refused when the job is decoded.
func TestEpochReportRefusals(t *testing.T) {
	report := func(e uint64) []byte { return binary.LittleEndian.AppendUint64([]byte{'P'}, e) }
	if e, err := decodeEpochReport(report(7)); err != nil || e != 7 {
		t.Fatalf("epoch 7: %d, %v", e, err)
	}
	for _, b := range [][]byte{report(0), report(selection.MaxEpoch), report(1<<64 - 1), report(7)[:8], append(report(7), 0), append([]byte{'R'}, report(7)[1:]...)} {
		if _, err := decodeEpochReport(b); err == nil {
			t.Errorf("report %x accepted", b)
		}
	}
	j := testJob()
	for _, e := range []uint64{0, selection.MaxEpoch} {
		if err := j.Reached(context.Background(), e); err == nil || j.Floor != 0 {
			t.Errorf("Reached(%d): %v, floor %d", e, err, j.Floor)
		}
	}
	if err := j.Reached(context.Background(), 5); err != nil || j.Floor != 5 {
		t.Errorf("Reached(5): %v, floor %d", err, j.Floor)
	}
	if err := j.Reached(context.Background(), 3); err != nil || j.Floor != 5 {
		t.Errorf("Reached(3) after 5: %v, floor %d (a floor is never lowered)", err, j.Floor)
	}
	for _, f := range []struct {
		floor uint64
		ok    bool
	}{{0, true}, {selection.MaxEpoch - 2, true}, {selection.MaxEpoch - 1, false}, {1<<64 - 1, false}} {
		j := testJob()
		j.Floor = f.floor
		b, err := EncodeJob(j)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeJob(b)
		if (err == nil) != f.ok || err == nil && got.Floor != f.floor {
			t.Errorf("a job of floor %d: %v", f.floor, err)
		}
	}
}

// TestWorkersRefusesOldWorker: a worker that does not report its epochs
// (its announcement "SFW1") is refused with a message saying so.
func TestWorkersRefusesOldWorker(t *testing.T) {
	coord, _ := NewWorkers(0, 2)
	a, b := transport.Pipe(transport.Options{})
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- coord.Attach(ctx, a) }()
	st := b.Stream(StreamWorker)
	if err := st.SendBytes(ctx, binary.LittleEndian.AppendUint32([]byte("SFW1\x00"), 1)); err != nil {
		t.Fatal(err)
	}
	ans, err := st.RecvBytes(ctx, maxWorkerReply)
	if err != nil || !strings.Contains(string(ans), "older version") {
		t.Errorf("answer %q, %v; want a refusal naming the older version", ans, err)
	}
	if err := <-errc; err == nil {
		t.Error("Attach accepted the old worker")
	}
}

func FuzzDecodeEpochReport(f *testing.F) {
	f.Add(binary.LittleEndian.AppendUint64([]byte{'P'}, 1))
	f.Add(binary.LittleEndian.AppendUint64([]byte{'P'}, selection.MaxEpoch))
	f.Add([]byte("P"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEpochReport(b)
		if err == nil && (e == 0 || e >= selection.MaxEpoch || len(b) != epochReportLen) {
			t.Fatalf("accepted epoch %d from %x", e, b)
		}
	})
}

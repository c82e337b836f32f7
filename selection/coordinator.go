package selection

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
)

// encodeProxy is the model owner's proxy of phase for its workers' jobs
// (nil with a substitute Evaluator, which the workers hold themselves).
func (d *modelOwnerRun) encodeProxy(phase int) ([]byte, error) {
	if d.m.Evaluator != nil {
		return nil, nil
	}
	if phase < 0 || phase >= len(d.m.Proxies) || d.m.Proxies[phase] == nil {
		return nil, fmt.Errorf("selection: phase %d: no proxy for the workers", phase+1)
	}
	return d.m.Proxies[phase].Marshal()
}

// runShards runs phase i's forward on the worker pairs (r.shards): each
// shard (ShardSpan) with a batch not in the checkpoint is handed to the
// party's worker as a Job, all at once, with the floor of its epochs
// recorded in the checkpoint (State.ShardFloors, raised and written by
// each epoch the worker reports before it draws there: Job.Reached, so no
// life of the worker, whatever its directory holds, runs at an epoch of
// an earlier one); each returned shard's batches are
// checked against the job, checkpointed (replacing any of the shard's
// batches the state held, so that a shard's shares all come from one
// worker pair's computation) and copied into vals.
func (r *runner) runShards(ctx context.Context, i int, seed share.Seed, arch secure.Arch, cand []int, vals []uint64, ps *PhaseStats) error {
	K := r.shards.Shards()
	if K < 1 || K > MaxShards {
		return fmt.Errorf("selection: %d shards (1..%d)", K, MaxShards)
	}
	bs := r.p.BatchSize
	done := map[int]bool{}
	for _, b := range r.st.Phases[i].Batches {
		done[b.Batch] = true
	}
	var proxyBytes []byte
	var jobs []*Job
	for k := range K {
		lo, hi := ShardSpan(len(cand), bs, K, k)
		if lo == hi {
			continue
		}
		blo, bhi := lo/bs, (hi+bs-1)/bs
		all := true
		for b := blo; b < bhi; b++ {
			all = all && done[b]
		}
		if all {
			continue
		}
		if proxyBytes == nil && r.jobProxy != nil {
			var err error
			if proxyBytes, err = r.jobProxy(i); err != nil {
				return err
			}
		}
		sess := shardSession(seed, i, k, K)
		job := &Job{Version: ProtocolVersion, Party: r.party, Params: r.p, Session: sess,
			Phase: i, Shard: k, Shards: K, PhaseCandidates: len(cand), FirstBatch: blo, Candidates: cand[lo:hi], Arch: arch,
			EmbeddingHash: r.embHash, Proxy: proxyBytes, Floor: r.shardFloor(sess)}
		job.reached = func(_ context.Context, epoch uint64) error { return r.raiseShardFloor(sess, epoch) }
		jobs = append(jobs, job)
	}
	prog := &progress{r: r, phase: i, already: ps.Resumed, total: ps.Batches, start: time.Now()}
	prog.lastLog = prog.start
	if r.onProgress != nil {
		r.onProgress(Progress{Phase: i, Done: ps.Resumed, Total: ps.Batches})
	}
	r.logf().Info("selection: phase on worker pairs", "party", r.party, "phase", i+1, "shards", K, "jobs", len(jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(jobs))
	stats := make([]*ShardStats, len(jobs))
	var wg sync.WaitGroup
	for n, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stats[n], errs[n] = r.runShard(ctx, job, cand, vals, prog); errs[n] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, st := range stats {
		if st != nil {
			ps.Shards = append(ps.Shards, *st)
		}
	}
	return firstCause(errs)
}

// shardFloor is the recorded floor of the job of dealer session sess
// (State.ShardFloors; 0 when none).
func (r *runner) shardFloor(sess beaver.SessionID) uint64 {
	r.stMu.Lock()
	defer r.stMu.Unlock()
	return r.st.ShardFloors[hex.EncodeToString(sess[:])]
}

// raiseShardFloor raises the recorded floor of the job of dealer session
// sess to epoch and writes the checkpoint before it returns (nothing when
// the floor is already as high): the record a worker's Job.Reached waits
// for before it draws at epoch.
func (r *runner) raiseShardFloor(sess beaver.SessionID, epoch uint64) error {
	if epoch >= MaxEpoch {
		return fmt.Errorf("selection: shard floor epoch %d (1..%d)", epoch, MaxEpoch-1)
	}
	key := hex.EncodeToString(sess[:])
	r.stMu.Lock()
	defer r.stMu.Unlock()
	if epoch <= r.st.ShardFloors[key] {
		return nil
	}
	if r.st.ShardFloors == nil {
		r.st.ShardFloors = map[string]uint64{}
	}
	prev, ok := r.st.ShardFloors[key]
	if !ok && len(r.st.ShardFloors) >= maxShardFloors {
		return fmt.Errorf("selection: %d shard floors recorded (at most %d)", len(r.st.ShardFloors), maxShardFloors)
	}
	r.st.ShardFloors[key] = epoch
	if err := r.checkpoint(); err != nil {
		// Not written: a later report of the same epoch must write it.
		if ok {
			r.st.ShardFloors[key] = prev
		} else {
			delete(r.st.ShardFloors, key)
		}
		return err
	}
	return nil
}

// addShards adds the worker pairs' figures (ps.Shards) to the phase's,
// which hold the coordinator's own: traffic and dealer bytes are summed,
// and the forward's critical path is the largest pair's (the pairs run at
// the same time; the coordinators run no forward).
func (ps *PhaseStats) addShards() {
	for _, s := range ps.Shards {
		ps.BytesSent += s.BytesSent
		ps.BytesRecv += s.BytesRecv
		ps.DealerBytes += s.DealerBytes
		ps.ForwardRounds = max(ps.ForwardRounds, s.ForwardRounds)
	}
}

// runShard runs one job and records its result; it returns the worker's
// figures.
func (r *runner) runShard(ctx context.Context, job *Job, cand []int, vals []uint64, prog *progress) (*ShardStats, error) {
	res, err := r.shards.RunShard(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("selection: phase %d shard %d of %d: %w", job.Phase+1, job.Shard+1, job.Shards, err)
	}
	// The runner's own check of what a ShardRunner returns.
	if res, err = decodeResult(encodeResult(res), job); err != nil {
		return nil, err
	}
	// The worker reported every epoch it drew at before drawing
	// (Job.Reached); a batch of a higher one (a ShardRunner that does not
	// relay them) raises the floor all the same.
	var top uint64
	for _, bs := range res.Batches {
		top = max(top, bs.Epoch)
	}
	if err := r.raiseShardFloor(job.Session, top); err != nil {
		return nil, err
	}
	for _, bs := range res.Batches {
		if err := r.store.record(job.Phase, bs); err != nil {
			return nil, err
		}
		lo, hi := r.sched.Span(bs.Batch, len(cand))
		r.stMu.Lock()
		ph := &r.st.Phases[job.Phase]
		n := len(ph.Batches)
		ph.Batches = slices.DeleteFunc(ph.Batches, func(b BatchShares) bool { return b.Batch == bs.Batch })
		fresh := len(ph.Batches) == n
		ph.Batches = append(ph.Batches, bs)
		copy(vals[lo:hi], bs.Shares)
		r.stMu.Unlock()
		if fresh {
			prog.batchDone(ctx)
		}
	}
	return &res.Stats, nil
}

// firstCause returns the first error that is not a cancellation caused by
// another, or the first error.
func firstCause(errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		if !isCancel(err) {
			return err
		}
	}
	return first
}

// isCancel reports whether err is a cancellation.
func isCancel(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

package shard

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/selectformer/selectformer/selection"
)

// jobRunner runs one job on the party's worker job.Shard and returns the
// worker's checked result (Workers.runJob; the tests count the jobs).
type jobRunner func(ctx context.Context, job *Job) (*Result, error)

// runPhase runs ph on K worker pairs: each shard (Span) with a batch not
// in the coordinator's checkpoint is handed to the party's worker as a
// Job by run, all at once, with the floor of its epochs the checkpoint
// records (ph.Floor, raised and written by each epoch the worker reports
// before it draws there: Job.Reached, ph.RaiseFloor, so no life of the
// worker, whatever its directory holds, runs at an epoch of an earlier
// one); each returned shard's batches are checked against the job and
// recorded (ph.Record, replacing any of the shard's batches the
// checkpoint held, so that a shard's shares all come from one worker
// pair's computation), and the workers' figures added by shard.
func runPhase(ctx context.Context, ph *selection.ShardedPhase, K int, run jobRunner) error {
	if K < 1 || K > MaxShards {
		return fmt.Errorf("selection: %d shards (1..%d)", K, MaxShards)
	}
	cand, bs := ph.Candidates, ph.Params.PhaseBatchSize(ph.Phase)
	var proxyBytes []byte
	var jobs []*Job
	for k := range K {
		lo, hi := Span(len(cand), bs, K, k)
		if lo == hi {
			continue
		}
		blo, bhi := lo/bs, (hi+bs-1)/bs
		all := true
		for b := blo; b < bhi; b++ {
			all = all && ph.Recorded(b)
		}
		if all {
			continue
		}
		if proxyBytes == nil {
			var err error
			if proxyBytes, err = ph.Proxy(); err != nil {
				return err
			}
		}
		sess := jobSession(ph.Seed, ph.Phase, k, K)
		job := &Job{Version: selection.ProtocolVersion, Party: ph.Party, Params: ph.Params, Session: sess,
			Phase: ph.Phase, Shard: k, Shards: K, PhaseCandidates: len(cand), FirstBatch: blo, Candidates: cand[lo:hi], Arch: ph.Arch,
			EmbeddingHash: ph.EmbeddingHash, Proxy: proxyBytes, Floor: ph.Floor(sess)}
		job.reached = func(_ context.Context, epoch uint64) error { return ph.RaiseFloor(sess, epoch) }
		jobs = append(jobs, job)
	}
	ph.Logger.Info("selection: phase on worker pairs", "party", ph.Party, "phase", ph.Phase+1, "shards", K, "jobs", len(jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(jobs))
	stats := make([]*selection.ShardStats, len(jobs))
	var wg sync.WaitGroup
	for n, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if stats[n], errs[n] = runJob(ctx, ph, job, run); errs[n] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, st := range stats {
		if st != nil {
			if err := ph.AddStats(*st); err != nil {
				return err
			}
		}
	}
	return firstCause(errs)
}

// runJob runs one job and records its result; it returns the worker's
// figures.
func runJob(ctx context.Context, ph *selection.ShardedPhase, job *Job, run jobRunner) (*selection.ShardStats, error) {
	res, err := run(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("selection: phase %d shard %d of %d: %w", job.Phase+1, job.Shard+1, job.Shards, err)
	}
	// The coordinator's own check of what a job's runner returns.
	if res, err = decodeResult(encodeResult(res), job); err != nil {
		return nil, err
	}
	// The worker reported every epoch it drew at before drawing
	// (Job.Reached); a batch of a higher one (a runner that does not
	// relay them) raises the floor all the same.
	var top uint64
	for _, bs := range res.Batches {
		top = max(top, bs.Epoch)
	}
	if err := ph.RaiseFloor(job.Session, top); err != nil {
		return nil, err
	}
	for _, bs := range res.Batches {
		if err := ph.Record(ctx, bs); err != nil {
			return nil, err
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

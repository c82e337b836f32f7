// Package shard runs a selection's phases on K worker pairs per party: a
// sharded selection. Each party runs a coordinator — its selection.Run,
// with ModelOwner.Shards or DataOwner.Shards set to this package's Workers
// (a selection.ShardRunner) — and K Worker processes; worker k of the
// model owner and worker k of the data owner form pair k. The
// coordinators keep everything but the phases' secure forward (package
// selection's "Sharding"); this package cuts each phase into jobs, carries
// them to the workers and back, and runs them.
//
// In phase i the candidates are cut into K contiguous shards at batch
// boundaries (Span, public), and the model owner's worker k and the data
// owner's worker k run shard k (a Job) over their own connection, in their
// own dealer session (derived from the coin, i, k and K: no two pairs,
// and no pair and the coordinators, share a word), as a
// selection.ForwardRun: a pair handshake in the clear (public facts only:
// hashes of the session, the candidates, the architecture and the
// parameters; phase, k, K, epoch and the numbers of the checkpointed
// batches), their own epochs, high-water marks and per-job checkpoint
// (JobDir: a restarted worker resumes its shard without redoing a finished
// batch or drawing a word twice); the model owner's worker shares the
// phase's weights with its own masks. A worker draws at an epoch only once
// its coordinator has written it into its checkpoint (Job.Reached,
// selection.ShardedPhase.RaiseFloor), and every job carries the highest
// such epoch (Job.Floor), above which the worker runs: a worker back with
// an empty directory, whatever epoch its peer announces, draws no word of
// an earlier life (TestShardWorkerEmptyDirDrawsNothingTwice,
// TestShardCoordinatorRestartKeepsFloors). Each worker hands its party's
// shares of the shard's entropies to its own coordinator, which
// checkpoints them as the phase's batches (a restarted coordinator does
// not send a recorded shard again). Nothing new crosses between the
// parties: the coordinators' clear messages are an unsharded run's (the
// hello longer by K), and the pairs' are their hellos
// (TestShardedTranscript).
//
// A worker whose pair connection fails (its peer worker died) runs the job
// again on a new connection with a new epoch, from its checkpoint
// (Worker.Retries); a coordinator whose worker's connection drops waits
// for the worker to come back and sends the job again (Workers.Wait); a
// job both workers of the pair had finished (both said "done") is answered
// from the worker's checkpoint without its peer, which does not run it
// again. After the run the coordinator tells its workers the selection is
// done (Workers.Done), also a worker that reconnects afterwards, and may
// wait until every one has been told (Workers.AwaitDone). The selection
// equals an unsharded run's with the same coin up to the fixed-point
// near-ties of probabilistic truncation (the pairs draw other correlated
// randomness). Each worker reports its figures for its job with its shares
// (selection.ShardStats: the pair link's traffic, its dealer traffic,
// rounds, attempts, wall time), and a sharded phase's selection.PhaseStats
// add them to the coordinator's own.
//
// The files: job.go (Job, its encoding, Span), result.go (a worker's
// result), phase.go (the coordinator's side of a phase: its jobs, their
// floors and results), wire.go (the internal connection's messages),
// workers.go (Workers), worker.go (Worker), pair.go (the pair handshake
// and close).
package shard

package shard

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// Worker is one party's worker of a sharded selection: it runs the jobs
// its coordinator hands it (Serve, or RunJob), each the secure forward of
// one shard of a phase with the other party's worker of the same index
// (a selection.ForwardRun), and returns its party's shares of the shard's
// entropies to its coordinator. Everything else of the selection stays
// with the coordinators (selection.ModelOwner.Shards,
// selection.DataOwner.Shards).
//
// A job runs like a selection's phase: the pair connection (PairFunc) and
// a handshake in the clear (pairHello: version, party, the hash of the
// shard's dealer session, phase, shard k of K, the hash of the shard's
// candidates, of the architecture and of the public parameters, the epoch
// and a summary of the checkpoint; any difference is a
// *selection.MismatchError and the peer is told in public words, as in a
// run), an epoch counted and persisted before anything is said, the
// provider wrapped in persistent high-water marks and bound to the
// shard's session, the model owner's worker sharing the phase's weights
// with its own masks on the pair's control session, the shard's batches
// on Params.Workers lanes, each finished batch checkpointed. Each job
// keeps its state in its own subdirectory of StateDir (JobDir), so a
// restarted worker resumes a shard without redoing a finished batch and
// never draws a word it drew before. That holds without the directory
// too (a replaced pod, a lost volume, a state deleted): each attempt runs
// above the job's Floor, its coordinator's record of the epochs the job
// reached, and reports the epoch the pair agreed on to the coordinator
// (Job.Reached), which writes it before the worker draws anything there,
// so no life of the worker runs at an epoch of an earlier one, whatever
// epoch the peer worker announces (the pair adopts the larger). A job
// whose pair connection fails (the peer worker died) is retried with a
// new pair connection, a new handshake and a new epoch, from the
// checkpoint: at most Retries times, Backoff apart (doubling, at most
// 5 s). A job finished with the peer (both workers said "done") is
// marked so in its directory: sent again (its coordinator restarted, or
// this worker died, before the coordinator had the result), it is
// answered from the checkpoint without the peer, which does not run it
// again.
type Worker struct {
	// Party is 0 (model owner's worker) or 1 (data owner's).
	Party int
	// Shard is this worker's index k (0..K−1), announced to its
	// coordinator; a job of another index is refused.
	Shard int
	// Pool and Embedding are the data owner's (its own copy of the pool,
	// PoolSize candidates, and the public embedding model), as in
	// selection.DataOwner; the model owner's worker takes its proxies from
	// the jobs.
	Pool      model.Input
	Embedding *model.Model
	// EmbeddingHash, if set, replaces the hash of Embedding's tables (as
	// in selection.DataOwner); a job of another embedding hash is refused.
	EmbeddingHash string
	// Evaluator, if set, replaces the secure forward (tests).
	Evaluator selection.Evaluator
	// StateDir holds the worker's checkpoints (required: without it a
	// retried job could not know which correlated randomness it drew).
	StateDir string
	// Logger receives progress (slog.Default() when nil).
	Logger *slog.Logger
	// Retries is how often a job whose pair failed is tried again
	// (DefaultPairRetries when 0; negative: never).
	Retries int
	// Backoff is the first pause before a retry (200 ms when 0).
	Backoff time.Duration

	// forgeEpoch (tests: a lying worker) replaces the epoch each attempt
	// announces in its pair hello.
	forgeEpoch func(uint64) uint64
}

// DefaultPairRetries is Worker.Retries when 0.
const DefaultPairRetries = 20

// PairFunc establishes a job's pair connection to the other party's
// worker of the same shard index, and this worker's provider of
// correlated randomness for it (a networked dealer's client,
// dealer.Connect, or ot.NewProvider on the pair connection; RunJob binds
// it to the job's session). It is called again for every retry; the
// connection is closed after each attempt.
type PairFunc func(ctx context.Context, job *Job) (*transport.Conn, beaver.Provider, error)

// RunJob runs job with the other party's worker (see Worker) and returns
// this party's shares of the shard's entropies, with its figures for the
// job (Result.Stats: every attempt's traffic on the pair link and with
// its provider, forward rounds, wall time), which its coordinator adds to
// the phase's selection.PhaseStats.
func (w *Worker) RunJob(ctx context.Context, job *Job, pair PairFunc) (*Result, error) {
	switch {
	case w == nil || job == nil:
		return nil, fmt.Errorf("shard: worker: nil worker or job")
	case job.Party != w.Party || job.Shard != w.Shard:
		return nil, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: worker %d of party %d given a job for worker %d of party %d", w.Shard, w.Party, job.Shard, job.Party))
	case w.StateDir == "":
		return nil, fmt.Errorf("shard: worker: a StateDir is required (a retried job must know which correlated randomness it drew)")
	case pair == nil:
		return nil, fmt.Errorf("shard: worker: no PairFunc")
	}
	retries := w.Retries
	if retries == 0 {
		retries = DefaultPairRetries
	}
	pause := w.Backoff
	if pause <= 0 {
		pause = 200 * time.Millisecond
	}
	if res, err := w.finished(job); err != nil || res != nil {
		return res, err
	}
	start := time.Now()
	var st selection.ShardStats
	for attempt := 0; ; attempt++ {
		res, err := w.attempt(ctx, job, pair, &st)
		if err == nil {
			st.Seconds = time.Since(start).Seconds()
			res.Stats = st.Bounded()
			w.logf().Info("shard: worker: job figures", "party", w.Party, "phase", job.Phase+1, "shard", job.Shard, "attempts", st.Attempts,
				"forward_rounds", st.ForwardRounds, "bytes_sent", st.BytesSent, "bytes_recv", st.BytesRecv, "randomness_bytes", st.RandomnessBytes, "seconds", st.Seconds)
			return res, nil
		}
		if ctx.Err() != nil || !retryable(err) || attempt >= retries {
			return nil, err
		}
		w.logf().Warn("shard: worker: pair failed, retrying", "party", w.Party, "shard", w.Shard, "phase", job.Phase+1, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// run is job's selection.ForwardRun for this worker.
func (w *Worker) run(job *Job) *selection.ForwardRun {
	return &selection.ForwardRun{Party: w.Party, Params: job.Params, Session: job.Session, Phase: job.Phase, Arch: job.Arch,
		Candidates: job.Candidates, EmbeddingHash: job.EmbeddingHash, Proxy: job.Proxy, Floor: job.Floor,
		Evaluator: w.Evaluator, Pool: w.Pool, Embedding: w.Embedding, OwnEmbeddingHash: w.EmbeddingHash,
		StateDir: JobDir(w.StateDir, job), Logger: w.Logger}
}

// finished returns job's result from the worker's checkpoint if the job
// was finished with the peer worker before (both said "done", each then
// holding every batch of the shard from the same epochs: the job's
// finished marker, selection.ForwardRun.Finished), and nil if not. A job
// sent again after it finished (the worker died, or its coordinator
// restarted, before the coordinator had its result, while the peer's
// coordinator had the peer's) is so answered without the peer worker,
// which does not run the job again: waiting for it would hold the phase
// until the retries ran out.
func (w *Worker) finished(job *Job) (*Result, error) {
	run := w.run(job)
	bs, err := run.Finished()
	if err != nil || bs == nil {
		return nil, err
	}
	out := jobResult(bs, job.FirstBatch)
	out.Stats.Resumed = len(out.Batches)
	res, err := decodeResult(encodeResult(out), job)
	if err != nil {
		return nil, &selection.StateError{Path: selection.StateFile(run.StateDir, w.Party),
			Err: fmt.Errorf("the job is marked finished (%s) but its batches do not fit it: %w", selection.FinishedFile(run.StateDir, w.Party), err)}
	}
	w.logf().Info("shard: worker: the job was finished with the peer worker before; its result is the checkpoint's", "party", w.Party,
		"phase", job.Phase+1, "shard", job.Shard, "batches", len(res.Batches))
	return res, nil
}

// jobResult is a job's result from its batches (numbered within the job,
// ascending), numbered within the phase (from first).
func jobResult(bs []selection.BatchShares, first int) *Result {
	out := &Result{Batches: make([]selection.BatchShares, len(bs))}
	for i, b := range bs {
		b.Batch += first
		out.Batches[i] = b
	}
	return out
}

// retryable reports whether a failed attempt may be retried: anything
// but a refusal that another attempt would meet again (a handshake
// mismatch, a refused epoch, a checkpoint, bad input of this worker's, a
// peer's abort for such a reason) and an epoch its coordinator did not
// record (it is gone or cannot write: the worker serves it no more). A
// dying pair connection can surface as any error of the protocol (a
// message cut short), so those are retried, at most Retries times.
func retryable(err error) bool {
	var re *epochReportError
	if errors.As(err, &re) {
		return false
	}
	var pa *selection.PeerAbortError
	if errors.As(err, &pa) {
		return pa.Code == selection.AbortInternal || pa.Code == selection.AbortCancelled || pa.Code == selection.AbortProtocol || pa.Code == selection.AbortLimit
	}
	switch selection.AbortCodeOf(err) {
	case selection.AbortMismatch, selection.AbortResume, selection.AbortState, selection.AbortStateParams, selection.AbortInput, selection.AbortBootstrapRevealed:
		return false
	}
	return true
}

func (w *Worker) logf() *slog.Logger {
	if w.Logger == nil {
		return slog.Default()
	}
	return w.Logger
}

// JobDir is the state directory of job under a worker's StateDir dir:
// job-<the first 16 hex digits of its session>.
func JobDir(dir string, job *Job) string {
	return filepath.Join(dir, "job-"+hex.EncodeToString(job.Session[:8]))
}

// attempt runs job once on a new pair connection, adding its figures to
// st (whether it succeeds or not).
func (w *Worker) attempt(ctx context.Context, job *Job, pair PairFunc, st *selection.ShardStats) (*Result, error) {
	st.Attempts++
	conn, prov, err := pair(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("shard: worker: pair connection: %w", err)
	}
	defer conn.Close()
	var d0 beaver.DealerStats
	if prov != nil { // nil: refused by the run's check
		d0 = prov.Stats()
	}
	out, err := w.run(job).Run(ctx, conn, prov, w.pairHooks(job))
	// The attempt's traffic: the pair's online streams and the provider's.
	d1 := d0
	if prov != nil {
		d1 = prov.Stats()
	}
	st.BytesSent += out.Online.BytesSent
	st.BytesRecv += out.Online.BytesRecv
	st.RandomnessBytes += d1.BytesRecv - d0.BytesRecv + d1.BytesSent - d0.BytesSent
	st.ForwardRounds += out.ForwardRounds
	st.Resumed = out.Resumed
	if err != nil {
		return nil, err
	}
	return jobResult(out.Batches, job.FirstBatch), nil
}

// ErrWorkerRefused is wrapped by Serve's error when the coordinator
// refuses the worker (another live worker of its index, an index ≥ K).
var ErrWorkerRefused = errors.New("the coordinator refused this worker")

// Serve runs the worker on its connection to its coordinator: it announces
// its party and shard index, then runs each job it receives (RunJob,
// pairing with pair) and returns its result, until the coordinator says
// the selection is done (Serve returns nil; also when it says so in answer
// to the announcement: a worker attaching after the selection ended) or
// the connection or ctx ends.
// A job that fails is reported to the coordinator (its error text: the
// internal connection stays within the party) and Serve goes on.
func (w *Worker) Serve(ctx context.Context, coord *transport.Conn, pair PairFunc) error {
	if w == nil || coord == nil {
		return fmt.Errorf("shard: worker: nil worker or connection")
	}
	if w.Party != 0 && w.Party != 1 || w.Shard < 0 || w.Shard >= MaxShards {
		return fmt.Errorf("shard: worker: party %d, shard %d", w.Party, w.Shard)
	}
	st := coord.Stream(StreamWorker)
	hello := append([]byte(workerHelloMagic), byte(w.Party))
	hello = binary.LittleEndian.AppendUint32(hello, uint32(w.Shard))
	if err := st.SendBytes(ctx, hello); err != nil {
		return fmt.Errorf("shard: worker: announce: %w", err)
	}
	ans, err := st.RecvBytes(ctx, maxWorkerReply)
	if err != nil {
		return fmt.Errorf("shard: worker: announce: %w", err)
	}
	if string(ans) == "done" || len(ans) == 1 && ans[0] == 'D' {
		w.logf().Info("shard: worker: the selection is done (told as it attached)", "party", w.Party, "shard", w.Shard)
		return nil
	}
	if string(ans) != "ok" {
		return fmt.Errorf("shard: worker %d: %w: %.200s", w.Shard, ErrWorkerRefused, ans)
	}
	w.logf().Info("shard: worker attached to its coordinator", "party", w.Party, "shard", w.Shard)
	for {
		b, err := st.RecvBytes(ctx, 1+MaxJobBytes)
		if err != nil {
			return fmt.Errorf("shard: worker: receive from the coordinator: %w", err)
		}
		if len(b) == 1 && b[0] == 'D' {
			w.logf().Info("shard: worker: the selection is done", "party", w.Party, "shard", w.Shard)
			return nil
		}
		if len(b) == 0 || b[0] != 'J' {
			return fmt.Errorf("shard: worker: unreadable message from the coordinator")
		}
		var reply []byte
		job, err := DecodeJob(b[1:])
		var res *Result
		if err == nil {
			job.reached = reportEpochs(st)
			res, err = w.RunJob(ctx, job, pair)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.logf().Warn("shard: worker: job failed", "party", w.Party, "shard", w.Shard, "err", err)
			msg := err.Error()
			if len(msg) > maxWorkerError {
				msg = msg[:maxWorkerError]
			}
			reply = append([]byte{'E'}, msg...)
		} else {
			reply = append([]byte{'R'}, encodeResult(res)...)
		}
		if err := st.SendBytes(ctx, reply); err != nil {
			return fmt.Errorf("shard: worker: send to the coordinator: %w", err)
		}
	}
}

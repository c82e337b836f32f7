package selection

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/lanes"
	"github.com/selectformer/selectformer/share"
)

// ShardRunner runs a phase's secure forward on worker pairs: a sharded
// selection (ModelOwner.Shards, DataOwner.Shards; see the package comment).
// selection/shard's Workers is the implementation that hands the phase's
// jobs to the party's worker processes over its internal connections.
type ShardRunner interface {
	// Shards is K, the number of worker pairs; both parties announce it
	// in the handshake (a mismatch is a MismatchError of field "shards").
	Shards() int
	// RunPhase computes this party's shares of the entropies of every
	// batch of ph not yet recorded (ph.Recorded) and records each
	// (ph.Record), with the workers' figures (ph.AddStats). A worker
	// draws correlated randomness at an epoch of a dealer session only
	// once ph.RaiseFloor has recorded it, and runs above ph.Floor. It
	// returns once every batch is recorded (the caller checks), or with
	// an error.
	RunPhase(ctx context.Context, ph *ShardedPhase) error
}

// ShardedPhase is a phase whose secure forward a coordinator hands to its
// ShardRunner: the public facts of the phase, this party's coin, and the
// hooks into the coordinator's checkpoint (the only way a ShardRunner
// changes it). Its methods are safe for concurrent use.
type ShardedPhase struct {
	// Party is this party, 0 (model owner) or 1 (data owner).
	Party int
	// Params are the run's parameters, defaults filled in (with this
	// party's own Pipeline and MemoryBudget choices).
	Params Params
	// Seed is the selection session's joint coin, from which the worker
	// pairs' dealer sessions derive (it stays within the party: its
	// coordinator and its workers).
	Seed share.Seed
	// Phase is the phase, 0-based; Arch its public proxy architecture.
	Phase int
	Arch  secure.Arch
	// Candidates are the phase's pool indices, ascending: batch b of the
	// phase is Candidates[b·size, (b+1)·size), size the phase's
	// (Params.PhaseBatchSize).
	Candidates []int
	// EmbeddingHash is the hash of the public embedding tables the
	// coordinators agreed on (model.EmbeddingHash).
	EmbeddingHash string
	// Logger is the coordinator's (never nil).
	Logger *slog.Logger

	r     *runner
	vals  []uint64
	ps    *PhaseStats
	prog  *progress
	proxy func(phase int) ([]byte, error)
}

// Batches is the number of batches of the phase.
func (ph *ShardedPhase) Batches() int { return ph.r.p.phaseBatches(ph.Phase, len(ph.Candidates)) }

// Recorded reports whether batch b of the phase is in the checkpoint.
func (ph *ShardedPhase) Recorded(b int) bool {
	ph.r.stMu.Lock()
	defer ph.r.stMu.Unlock()
	return slices.ContainsFunc(ph.r.st.Phases[ph.Phase].Batches, func(bs BatchShares) bool { return bs.Batch == b })
}

// Proxy returns the model owner's proxy of the phase for its workers
// (proxy.Proxy.Marshal); nil for the data owner, and with a substitute
// Evaluator (which the workers hold themselves).
func (ph *ShardedPhase) Proxy() ([]byte, error) {
	if ph.proxy == nil {
		return nil, nil
	}
	return ph.proxy(ph.Phase)
}

// Floor is the highest epoch of the dealer session sess at which this
// party's worker may have drawn correlated randomness, as the checkpoint
// records it (State.ShardFloors; 0 when none).
func (ph *ShardedPhase) Floor(sess beaver.SessionID) uint64 {
	r := ph.r
	r.stMu.Lock()
	defer r.stMu.Unlock()
	return r.st.ShardFloors[hex.EncodeToString(sess[:])]
}

// RaiseFloor raises the recorded floor of the dealer session sess to epoch
// (1..MaxEpoch−1) and writes the checkpoint before it returns (nothing
// when the floor is already as high): the record a worker waits for
// before it draws at epoch.
func (ph *ShardedPhase) RaiseFloor(sess beaver.SessionID, epoch uint64) error {
	if epoch >= MaxEpoch {
		return fmt.Errorf("selection: shard floor epoch %d (1..%d)", epoch, MaxEpoch-1)
	}
	r := ph.r
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

// Record checks bs (a batch of the phase, its shares of the batch's size,
// an epoch in 1..MaxEpoch−1: an AbortProtocol error otherwise) and
// checkpoints it, replacing any shares of the same batch the checkpoint
// held (so that a shard's shares all come from one worker pair's
// computation), and reports progress.
func (ph *ShardedPhase) Record(ctx context.Context, bs BatchShares) error {
	r := ph.r
	n := len(ph.Candidates)
	if nb := r.p.phaseBatches(ph.Phase, n); bs.Batch < 0 || bs.Batch >= nb {
		return withCode(AbortProtocol, fmt.Errorf("selection: phase %d: batch %d of %d", ph.Phase+1, bs.Batch, nb))
	}
	lo, hi := lanes.Span(bs.Batch, n, r.p.PhaseBatchSize(ph.Phase))
	if len(bs.Shares) != hi-lo || bs.Epoch == 0 || bs.Epoch >= MaxEpoch {
		return withCode(AbortProtocol, fmt.Errorf("selection: phase %d batch %d: %d shares of epoch %d (want %d, epoch 1..%d)", ph.Phase+1, bs.Batch, len(bs.Shares), bs.Epoch, hi-lo, MaxEpoch-1))
	}
	if err := r.store.record(ph.Phase, bs); err != nil {
		return err
	}
	r.stMu.Lock()
	st := &r.st.Phases[ph.Phase]
	had := len(st.Batches)
	st.Batches = slices.DeleteFunc(st.Batches, func(b BatchShares) bool { return b.Batch == bs.Batch })
	fresh := len(st.Batches) == had
	st.Batches = append(st.Batches, bs)
	copy(ph.vals[lo:hi], bs.Shares)
	r.stMu.Unlock()
	if fresh {
		ph.prog.batchDone(ctx)
	}
	return nil
}

// AddStats adds one worker's figures for its job (refused, as an
// AbortProtocol error, outside their bounds: ShardStats.Check) to the
// phase's PhaseStats.Shards.
func (ph *ShardedPhase) AddStats(s ShardStats) error {
	if err := s.Check(); err != nil {
		return withCode(AbortProtocol, fmt.Errorf("selection: phase %d shard %d: %w", ph.Phase+1, s.Shard+1, err))
	}
	ph.r.stMu.Lock()
	defer ph.r.stMu.Unlock()
	ph.ps.Shards = append(ph.ps.Shards, s)
	return nil
}

// runShards runs phase i's forward on the worker pairs (r.shards): the
// ShardRunner records every batch not in the checkpoint, copied into vals;
// a batch it leaves unrecorded fails the phase.
func (r *runner) runShards(ctx context.Context, i int, seed share.Seed, arch secure.Arch, cand []int, vals []uint64, ps *PhaseStats) error {
	ph := &ShardedPhase{Party: r.party, Params: r.p, Seed: seed, Phase: i, Arch: arch, Candidates: cand, EmbeddingHash: r.embHash,
		Logger: r.logf(), r: r, vals: vals, ps: ps, proxy: r.jobProxy}
	ph.prog = &progress{r: r, phase: i, already: ps.Resumed, total: ps.Batches, start: time.Now()}
	ph.prog.lastLog = ph.prog.start
	if r.onProgress != nil {
		r.onProgress(Progress{Phase: i, Done: ps.Resumed, Total: ps.Batches})
	}
	if err := r.shards.RunPhase(ctx, ph); err != nil {
		return err
	}
	for b := range ps.Batches {
		if !ph.Recorded(b) {
			return fmt.Errorf("selection: phase %d: the shard runner left batch %d unrecorded", i+1, b)
		}
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
		ps.RandomnessBytes += s.RandomnessBytes
		ps.ForwardRounds = max(ps.ForwardRounds, s.ForwardRounds)
	}
}

// ShardStats are one worker pair's figures for its job of a phase, as this
// party's worker counted them: the traffic of every attempt of the job in
// this worker process's life (a retried pair connection adds its
// attempt's; a life that died took its figures with it). PhaseStats.Shards
// holds one per job of the phase, and the phase's totals add them.
type ShardStats struct {
	// Shard is k; Batches the shard's batches, Resumed of them taken from
	// the worker's checkpoint by its last attempt (not computed again).
	Shard   int `json:"shard"`
	Batches int `json:"batches"`
	Resumed int `json:"resumed"`
	// Attempts counts the pair connections the job took (1 + retries).
	Attempts int `json:"attempts"`
	// ForwardRounds is the pair's forward critical path (the weight
	// sharing plus the largest lane's rounds, as PhaseStats.ForwardRounds),
	// summed over the attempts that finished their forward (attempts run
	// one after the other).
	ForwardRounds int64 `json:"forward_rounds"`
	// BytesSent and BytesRecv are this party's worker's online traffic on
	// the pair link: the pair's clear control stream (hello and "done"),
	// its control session and its batch lanes, as a run's phase counts its
	// own (a dealer-free provider's streams on the same link excluded:
	// they are RandomnessBytes).
	BytesSent int64 `json:"bytes_sent"`
	BytesRecv int64 `json:"bytes_recv"`
	// RandomnessBytes is the worker's traffic of correlated randomness:
	// from and to the dealer on its own dealer link, or the dealer-free
	// provider's OT and HE traffic on the pair link ("dealer_bytes" in
	// results written before, which decodes into it).
	RandomnessBytes int64 `json:"randomness_bytes"`
	// Seconds is the worker's wall time for the job, all attempts and the
	// pauses between them included.
	Seconds float64 `json:"seconds"`
}

// Bounds of a worker's figures (ShardStats), so that no sum over the
// phase's pairs overflows and a corrupt report is refused rather than
// trusted.
const (
	// maxShardBytes bounds each traffic figure: 4 PiB.
	maxShardBytes = 1 << 52
	// maxShardRounds bounds the forward rounds.
	maxShardRounds = 1 << 40
	// maxShardAttempts bounds the attempts.
	maxShardAttempts = 1 << 20
	// maxShardSeconds bounds the wall time: a year.
	maxShardSeconds = 366 * 24 * 3600
)

// Bounded returns s with each figure saturated at its bound (at most 2^20
// attempts, 2^40 rounds, 2^52 bytes each and a year): what a worker
// reports, which Check always accepts.
func (s ShardStats) Bounded() ShardStats {
	s.Attempts = min(s.Attempts, maxShardAttempts)
	s.ForwardRounds = min(s.ForwardRounds, maxShardRounds)
	s.BytesSent = min(s.BytesSent, maxShardBytes)
	s.BytesRecv = min(s.BytesRecv, maxShardBytes)
	s.RandomnessBytes = min(s.RandomnessBytes, maxShardBytes)
	s.Seconds = min(s.Seconds, maxShardSeconds)
	return s
}

// Check refuses figures outside their bounds: a negative one, more than
// 2^20 attempts, more batches resumed than the shard has, more than 2^40
// rounds, 2^52 bytes each or a year (NaN included).
func (s ShardStats) Check() error {
	switch {
	case s.Attempts < 0 || s.Attempts > maxShardAttempts:
		return fmt.Errorf("%d attempts (at most %d)", s.Attempts, maxShardAttempts)
	case s.Batches < 0 || s.Resumed < 0 || s.Resumed > s.Batches:
		return fmt.Errorf("%d batches resumed of %d", s.Resumed, s.Batches)
	case s.ForwardRounds < 0 || s.ForwardRounds > maxShardRounds:
		return fmt.Errorf("%d forward rounds (at most %d)", s.ForwardRounds, int64(maxShardRounds))
	case min(s.BytesSent, s.BytesRecv, s.RandomnessBytes) < 0 || max(s.BytesSent, s.BytesRecv, s.RandomnessBytes) > maxShardBytes:
		return fmt.Errorf("traffic of %d, %d and %d bytes (0..%d each)", s.BytesSent, s.BytesRecv, s.RandomnessBytes, int64(maxShardBytes))
	case !(s.Seconds >= 0 && s.Seconds <= maxShardSeconds) || math.IsNaN(s.Seconds):
		return fmt.Errorf("a wall time of %g s (at most a year)", s.Seconds)
	}
	return nil
}

// UnmarshalJSON decodes ShardStats, also from a result written before
// RandomnessBytes was named so (legacyRandomness).
func (s *ShardStats) UnmarshalJSON(b []byte) error {
	type plain ShardStats // without this method
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	return legacyRandomness(b, &s.RandomnessBytes)
}

package selection

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/strictjson"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
)

// MaxShards bounds the worker pairs of a sharded selection (Job.Shards).
const MaxShards = 1024

// ShardSpan returns the candidate positions [lo, hi) of shard k of shards
// in a phase of n candidates (ascending pool indices, as the phase runs
// them) cut into batches of batchSize: with nb = ⌈n/batchSize⌉ batches,
// shard k gets the batches [k·nb/shards, (k+1)·nb/shards), so every shard
// starts at a batch boundary and the shards' sizes differ by at most a
// batch. Both parties derive it from public values alone. A shard may be
// empty (lo = hi) when there are fewer batches than shards; invalid
// arguments (n < 0, batchSize < 1, shards outside 1..MaxShards, k outside
// 0..shards−1) give the empty span (0, 0).
func ShardSpan(n, batchSize, shards, k int) (lo, hi int) {
	if n < 0 || batchSize < 1 || shards < 1 || shards > MaxShards || k < 0 || k >= shards {
		return 0, 0
	}
	nb := int64(n/batchSize) + int64(min(n%batchSize, 1))
	blo, bhi := int64(k)*nb/int64(shards), int64(k+1)*nb/int64(shards)
	return int(min(blo*int64(batchSize), int64(n))), int(min(bhi*int64(batchSize), int64(n)))
}

// shardSession is the dealer session of shard k of shards in phase of the
// selection whose joint coin is seed: domain-separated from the
// coordinators' session (dealerSession) and from every other shard and
// phase, so no two worker pairs, and no worker pair and the coordinators,
// ever draw the same word (and a worker pair's epochs, counted in its own
// state, start afresh for each job).
func shardSession(seed share.Seed, phase, k, shards int) beaver.SessionID {
	h := sha256.New()
	h.Write([]byte("selectformer/shard-session/v1"))
	h.Write(seed[:])
	var b [12]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(phase))
	binary.LittleEndian.PutUint32(b[4:], uint32(k))
	binary.LittleEndian.PutUint32(b[8:], uint32(shards))
	h.Write(b[:])
	var id beaver.SessionID
	copy(id[:], h.Sum(nil))
	return id
}

// ShardRunner runs a phase's secure forward on worker pairs (a sharded
// selection: see Job and Worker). ModelOwner.Shards and DataOwner.Shards
// take one; WorkerPool is the implementation that hands the jobs to the
// party's worker processes over its internal connections.
type ShardRunner interface {
	// Shards is K, the number of worker pairs (1..MaxShards); both parties
	// announce it in the handshake (a mismatch is a MismatchError of field
	// "shards").
	Shards() int
	// RunShard has the party's worker job.Shard run job with its peer
	// worker and returns this party's shares of the shard's entropies,
	// every batch of the shard (checked against the job by the caller),
	// with the worker's figures for the job (ShardResult.Stats, which the
	// phase's PhaseStats add; bounded like the batches). Each epoch the
	// worker is about to draw at goes to job.Reached first, and a job
	// sent again carries the raised job.Floor (see Job.Reached).
	RunShard(ctx context.Context, job *Job) (*ShardResult, error)
}

// Job is what a coordinator hands its own worker k for one phase: the
// public facts of the run the worker needs, and for the model owner the
// phase's proxy (its own weights, which never leave its machines). It
// travels over the party's internal, authenticated connection (EncodeJob;
// DecodeJob checks every field).
type Job struct {
	// Version is ProtocolVersion.
	Version int `json:"version"`
	// Party is the worker's party, 0 (model owner) or 1 (data owner).
	Party int `json:"party"`
	// Params are the run's public parameters (with the coordinator's
	// local Pipeline and MemoryBudget choices).
	Params Params `json:"params"`
	// Session is the shard's dealer session (derived from the joint coin,
	// the phase and the shard), to which the worker pair binds its
	// provider.
	Session beaver.SessionID `json:"-"`
	// Phase is the phase, 0-based.
	Phase int `json:"phase"`
	// Shard is k and Shards is K.
	Shard  int `json:"shard"`
	Shards int `json:"shards"`
	// PhaseCandidates is the number of candidates of the whole phase, of
	// which Candidates are the shard's (ShardSpan), starting at the phase's
	// batch FirstBatch.
	PhaseCandidates int `json:"phase_candidates"`
	FirstBatch      int `json:"first_batch"`
	// Candidates are the shard's pool indices, ascending.
	Candidates []int `json:"-"`
	// Arch is the phase's public proxy architecture.
	Arch secure.Arch `json:"arch"`
	// EmbeddingHash is the hash of the public embedding tables the
	// coordinators agreed on (model.EmbeddingHash): a data-owner worker
	// refuses a job if its own embedding differs.
	EmbeddingHash string `json:"embedding_hash"`
	// Proxy is the model owner's phase proxy (proxy.Proxy.Marshal); empty
	// for the data owner, or with a substitute Evaluator.
	Proxy []byte `json:"-"`
	// Floor is the highest epoch at which this party's worker may have
	// drawn correlated randomness for the job (in any of its lives), as
	// its coordinator recorded it (State.ShardFloors; 0: none yet). The
	// worker runs only at epochs above it, whatever its directory holds
	// and whatever epoch the peer worker announces, so a worker that comes
	// back with an empty directory never draws a word of an earlier life.
	// At most MaxEpoch−2.
	Floor uint64 `json:"floor"`

	// reached, if set, records an epoch of the job durably (Reached): the
	// coordinator's record, or, in a worker, the relay to its coordinator.
	reached func(ctx context.Context, epoch uint64) error
}

// Reached records that the job's worker is about to draw correlated
// randomness at epoch (1..MaxEpoch−1), and raises Floor to it: a worker
// calls it once the pair has agreed on an epoch and before it draws
// anything there, and draws nothing unless it returns nil. For a job its
// coordinator made, the coordinator has written the epoch into its
// checkpoint when Reached returns (State.ShardFloors), so a job sent
// again carries it as Floor; a worker that received the job over its
// internal connection (Worker.Serve) relays it to its coordinator and
// waits for the answer. A ShardRunner that hands jobs on passes each
// epoch its worker reports to Reached before answering (WorkerPool does),
// and sends a job again with its raised Floor. Calls of one job's Reached
// and EncodeJob are not concurrent.
func (j *Job) Reached(ctx context.Context, epoch uint64) error {
	if epoch == 0 || epoch >= MaxEpoch {
		return fmt.Errorf("selection: job: epoch %d reached (1..%d)", epoch, MaxEpoch-1)
	}
	if j.reached != nil {
		if err := j.reached(ctx, epoch); err != nil {
			return err
		}
	}
	j.Floor = max(j.Floor, epoch)
	return nil
}

// jobMagic starts an encoded job.
const jobMagic = "SFJ1"

// Bounds of an encoded job, checked before anything is decoded.
const (
	// maxJobHeader bounds the job's JSON fields.
	maxJobHeader = 1 << 20
	// MaxJobBytes bounds a whole job message (the internal connection's
	// receive bound): the proxy of a phase must fit.
	MaxJobBytes = 1 << 30
)

// span is the job's batches of the phase: the shard's candidates
// [lo, hi) of the phase's and its batches [blo, bhi).
func (j *Job) span() (lo, hi, blo, bhi int) {
	bs := j.Params.withDefaults().BatchSize
	lo, hi = ShardSpan(j.PhaseCandidates, bs, j.Shards, j.Shard)
	return lo, hi, lo / bs, (hi + bs - 1) / bs
}

// EncodeJob encodes j: "SFJ1" | header length u32 | the JSON header (every
// field but Session, Candidates and Proxy) | the session (32 bytes) |
// candidate count u32 | the candidates (u32 each) | the proxy (the rest),
// little-endian.
func EncodeJob(j *Job) ([]byte, error) {
	h, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("selection: encode job: %w", err)
	}
	if len(h) > maxJobHeader {
		return nil, fmt.Errorf("selection: encode job: header of %d bytes", len(h))
	}
	b := make([]byte, 0, len(jobMagic)+4+len(h)+32+4+4*len(j.Candidates)+len(j.Proxy))
	b = append(b, jobMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h)))
	b = append(b, h...)
	b = append(b, j.Session[:]...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(j.Candidates)))
	for _, c := range j.Candidates {
		b = binary.LittleEndian.AppendUint32(b, uint32(c))
	}
	b = append(b, j.Proxy...)
	if len(b) > MaxJobBytes {
		return nil, fmt.Errorf("selection: encode job: %d bytes (at most %d)", len(b), MaxJobBytes)
	}
	return b, nil
}

// DecodeJob decodes and checks a job (EncodeJob): the sizes before
// anything is decoded (at most MaxJobBytes, a header of at most 1 MiB, a
// candidate count within the message and the pool), the header strictly
// (unknown fields refused), the version, the parameters (Params.Validate),
// the party, K in 1..MaxShards, k in 0..K−1, the phase within the
// schedule, the floor epoch at most MaxEpoch−2, and the candidates:
// ascending, distinct pool indices, exactly
// the shard's ShardSpan of the phase's PhaseCandidates (at most the pool),
// starting at FirstBatch; a data owner's job carries no proxy.
func DecodeJob(b []byte) (*Job, error) {
	bad := func(format string, args ...any) (*Job, error) {
		return nil, withCode(AbortProtocol, fmt.Errorf("selection: job: "+format, args...))
	}
	if len(b) > MaxJobBytes {
		return bad("%d bytes (at most %d)", len(b), MaxJobBytes)
	}
	if len(b) < len(jobMagic)+4 || string(b[:len(jobMagic)]) != jobMagic {
		return bad("not a job")
	}
	hl := uint64(binary.LittleEndian.Uint32(b[len(jobMagic):]))
	b = b[len(jobMagic)+4:]
	if hl > maxJobHeader || hl+32+4 > uint64(len(b)) {
		return bad("header of %d bytes in %d", hl, len(b))
	}
	var j Job
	if err := strictjson.Unmarshal(b[:hl], &j); err != nil {
		return bad("header: %w", err)
	}
	b = b[hl:]
	copy(j.Session[:], b[:32])
	nc := uint64(binary.LittleEndian.Uint32(b[32:]))
	b = b[36:]
	if nc*4 > uint64(len(b)) {
		return bad("%d candidates in %d bytes", nc, len(b))
	}
	switch {
	case j.Version != ProtocolVersion:
		return bad("version %d (this worker speaks %d)", j.Version, ProtocolVersion)
	case j.Party != 0 && j.Party != 1:
		return bad("party %d", j.Party)
	case j.Shards < 1 || j.Shards > MaxShards:
		return bad("%d shards (1..%d)", j.Shards, MaxShards)
	case j.Shard < 0 || j.Shard >= j.Shards:
		return bad("shard %d of %d", j.Shard, j.Shards)
	}
	if err := j.Params.Validate(); err != nil {
		return bad("%w", err)
	}
	if err := j.Params.checkLanes(); err != nil {
		return bad("%w", err)
	}
	p := j.Params.withDefaults()
	switch {
	case j.Phase < 0 || j.Phase >= len(p.Schedule):
		return bad("phase %d of %d", j.Phase+1, len(p.Schedule))
	case j.PhaseCandidates < 1 || j.PhaseCandidates > p.PoolSize-p.Bootstrap:
		return bad("a phase of %d candidates (pool %d, bootstrap %d)", j.PhaseCandidates, p.PoolSize, p.Bootstrap)
	case j.Floor > MaxEpoch-2:
		return bad("floor epoch %d (at most %d: the job's worker must be able to run above it)", j.Floor, MaxEpoch-2)
	}
	lo, hi, blo, _ := j.span()
	if uint64(hi-lo) != nc || hi == lo {
		return bad("%d candidates for shard %d of %d (%d of %d candidates)", nc, j.Shard+1, j.Shards, hi-lo, j.PhaseCandidates)
	}
	if j.FirstBatch != blo {
		return bad("first batch %d for shard %d of %d (want %d)", j.FirstBatch, j.Shard+1, j.Shards, blo)
	}
	j.Candidates = make([]int, nc)
	for i := range j.Candidates {
		c := int(binary.LittleEndian.Uint32(b[4*i:]))
		if c >= p.PoolSize || i > 0 && c <= j.Candidates[i-1] {
			return bad("candidates not ascending distinct pool indices below %d", p.PoolSize)
		}
		j.Candidates[i] = c
	}
	if rest := b[4*nc:]; len(rest) > 0 {
		if j.Party != 0 {
			return bad("a data owner's job with a proxy")
		}
		j.Proxy = rest
	}
	return &j, nil
}

// candidatesHash is the hash of a job's phase position and candidates
// that the two workers of a pair compare in their handshake.
func (j *Job) candidatesHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "selectformer/shard-candidates/v1:%d:%d:%d:", j.PhaseCandidates, j.FirstBatch, len(j.Candidates))
	var b [4]byte
	for _, c := range j.Candidates {
		binary.LittleEndian.PutUint32(b[:], uint32(c))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// archHash is the hash of the job's architecture.
func (j *Job) archHash() string {
	b, _ := json.Marshal(j.Arch)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ShardResult is what a worker returns to its coordinator: its party's
// shares of the entropies of every batch of its shard, each with the
// phase's batch number and the worker pair's epoch that computed it
// (both workers of a pair return the same numbers and epochs), and its
// figures for the job.
type ShardResult struct {
	// Batches are the shard's batches, ascending.
	Batches []BatchShares
	// Stats are the worker's figures for the job (its Shard and Batches
	// are the job's: the coordinator sets them). A ShardRunner that
	// counts nothing leaves them zero.
	Stats ShardStats
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
	// they are DealerBytes).
	BytesSent int64 `json:"bytes_sent"`
	BytesRecv int64 `json:"bytes_recv"`
	// DealerBytes is the worker's correlated-randomness traffic: from and
	// to the dealer on its own dealer link, or the dealer-free provider's
	// OT traffic on the pair link.
	DealerBytes int64 `json:"dealer_bytes"`
	// Seconds is the worker's wall time for the job, all attempts and the
	// pauses between them included.
	Seconds float64 `json:"seconds"`
}

// Bounds of a worker's figures (ShardStats) in its result message, so that
// no sum over MaxShards pairs overflows and a corrupt message is refused
// rather than trusted.
const (
	// maxShardBytes bounds each traffic figure: 4 PiB.
	maxShardBytes = 1 << 52
	// maxShardRounds bounds the forward rounds.
	maxShardRounds = 1 << 40
	// maxShardAttempts bounds the attempts.
	maxShardAttempts = 1 << 20
	// maxShardNanos bounds the wall time: a year.
	maxShardNanos = int64(366 * 24 * time.Hour)
)

// bounded returns s with each figure saturated at its bound (a worker's
// honest figures are always accepted by decodeResult).
func (s ShardStats) bounded() ShardStats {
	s.Attempts = min(s.Attempts, maxShardAttempts)
	s.ForwardRounds = min(s.ForwardRounds, maxShardRounds)
	s.BytesSent = min(s.BytesSent, maxShardBytes)
	s.BytesRecv = min(s.BytesRecv, maxShardBytes)
	s.DealerBytes = min(s.DealerBytes, maxShardBytes)
	s.Seconds = min(s.Seconds, float64(maxShardNanos)/1e9)
	return s
}

// resultMagic starts an encoded ShardResult.
const resultMagic = "SFR2"

// resultStatsLen is the size of a result's figures.
const resultStatsLen = 4 + 4 + 8 + 8 + 8 + 8 + 8

// encodeResult encodes r: "SFR2" | batch count u32 | per batch: batch u32 |
// epoch u64 | n u32 | n × u64 shares | the figures: attempts u32 | resumed
// u32 | forward rounds u64 | bytes sent u64 | bytes received u64 | dealer
// bytes u64 | wall time in nanoseconds u64, little-endian. Figures outside
// their bounds are encoded as they are (and refused by decodeResult).
func encodeResult(r *ShardResult) []byte {
	n := len(resultMagic) + 4 + resultStatsLen
	for _, bs := range r.Batches {
		n += 16 + 8*len(bs.Shares)
	}
	b := make([]byte, 0, n)
	b = append(b, resultMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Batches)))
	for _, bs := range r.Batches {
		b = binary.LittleEndian.AppendUint32(b, uint32(bs.Batch))
		b = binary.LittleEndian.AppendUint64(b, bs.Epoch)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(bs.Shares)))
		for _, s := range bs.Shares {
			b = binary.LittleEndian.AppendUint64(b, s)
		}
	}
	st := r.Stats
	b = binary.LittleEndian.AppendUint32(b, uint32(min(max(st.Attempts, 0), math.MaxUint32)))
	b = binary.LittleEndian.AppendUint32(b, uint32(min(max(st.Resumed, 0), math.MaxUint32)))
	for _, v := range []int64{st.ForwardRounds, st.BytesSent, st.BytesRecv, st.DealerBytes} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	ns := st.Seconds * 1e9
	if !(ns >= 0 && ns < math.MaxInt64) { // NaN and out of range: refused when decoded
		ns = math.MaxInt64
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(int64(ns)))
	return b
}

// resultBound is the size of the result of job j (bytes).
func resultBound(j *Job) int {
	_, _, blo, bhi := j.span()
	return len(resultMagic) + 4 + 16*(bhi-blo) + 8*len(j.Candidates) + resultStatsLen
}

// decodeResult decodes a worker's result for job j and checks it: exactly
// the shard's batches, ascending, each of the batch's size, of an epoch in
// 1..MaxEpoch−1, and figures within their bounds (at most 2^20 attempts, at most
// the shard's batches resumed, at most 2^40 rounds, 2^52 bytes each and a
// year; 0 attempts: a ShardRunner that counts nothing); the size is checked first (resultBound). The figures' Shard and
// Batches are the job's.
func decodeResult(b []byte, j *Job) (*ShardResult, error) {
	bad := func(format string, args ...any) (*ShardResult, error) {
		return nil, withCode(AbortProtocol, fmt.Errorf("selection: shard %d result: "+format, append([]any{j.Shard + 1}, args...)...))
	}
	if len(b) != resultBound(j) {
		return bad("%d bytes (want %d)", len(b), resultBound(j))
	}
	if string(b[:len(resultMagic)]) != resultMagic {
		return bad("not a result")
	}
	lo, _, blo, bhi := j.span()
	bs := j.Params.withDefaults().BatchSize
	if n := binary.LittleEndian.Uint32(b[len(resultMagic):]); uint64(n) != uint64(bhi-blo) {
		return bad("%d batches (want %d)", n, bhi-blo)
	}
	b = b[len(resultMagic)+4:]
	out := &ShardResult{Batches: make([]BatchShares, 0, bhi-blo)}
	for g := blo; g < bhi; g++ {
		if len(b) < 16 {
			return bad("truncated")
		}
		nb, ep, n := int(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint64(b[4:]), uint64(binary.LittleEndian.Uint32(b[12:]))
		want := min((g+1)*bs, lo+len(j.Candidates)) - g*bs
		if nb != g || n != uint64(want) || ep == 0 || ep >= MaxEpoch {
			return bad("batch %d of %d shares, epoch %d (want batch %d of %d)", nb, n, ep, g, want)
		}
		b = b[16:]
		if uint64(len(b)) < 8*n {
			return bad("truncated")
		}
		sh := make([]uint64, n)
		for i := range sh {
			sh[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		b = b[8*n:]
		out.Batches = append(out.Batches, BatchShares{Batch: g, Epoch: ep, Shares: sh})
	}
	if len(b) != resultStatsLen {
		return bad("truncated")
	}
	att, res := uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[4:]))
	var v [5]uint64
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8+8*i:])
	}
	switch {
	case att > maxShardAttempts:
		return bad("%d attempts (at most %d)", att, maxShardAttempts)
	case res > uint64(bhi-blo):
		return bad("%d batches resumed of %d", res, bhi-blo)
	case v[0] > maxShardRounds:
		return bad("%d forward rounds (at most %d)", v[0], uint64(maxShardRounds))
	case v[1] > maxShardBytes || v[2] > maxShardBytes || v[3] > maxShardBytes:
		return bad("traffic of %d, %d and %d bytes (at most %d each)", v[1], v[2], v[3], uint64(maxShardBytes))
	case v[4] > uint64(maxShardNanos):
		return bad("a wall time of %d ns (at most a year)", v[4])
	}
	out.Stats = ShardStats{Shard: j.Shard, Batches: bhi - blo, Resumed: int(res), Attempts: int(att), ForwardRounds: int64(v[0]),
		BytesSent: int64(v[1]), BytesRecv: int64(v[2]), DealerBytes: int64(v[3]), Seconds: float64(v[4]) / 1e9}
	return out, nil
}

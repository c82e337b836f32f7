package shard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/strictjson"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
)

// MaxShards bounds the worker pairs of a sharded selection (Job.Shards).
const MaxShards = 1024

// Span returns the candidate positions [lo, hi) of shard k of shards
// in a phase of n candidates (ascending pool indices, as the phase runs
// them) cut into batches of batchSize: with nb = ⌈n/batchSize⌉ batches,
// shard k gets the batches [k·nb/shards, (k+1)·nb/shards), so every shard
// starts at a batch boundary and the shards' sizes differ by at most a
// batch. Both parties derive it from public values alone. A shard may be
// empty (lo = hi) when there are fewer batches than shards; invalid
// arguments (n < 0, batchSize < 1, shards outside 1..MaxShards, k outside
// 0..shards−1) give the empty span (0, 0).
func Span(n, batchSize, shards, k int) (lo, hi int) {
	if n < 0 || batchSize < 1 || shards < 1 || shards > MaxShards || k < 0 || k >= shards {
		return 0, 0
	}
	nb := int64(n/batchSize) + int64(min(n%batchSize, 1))
	blo, bhi := int64(k)*nb/int64(shards), int64(k+1)*nb/int64(shards)
	return int(min(blo*int64(batchSize), int64(n))), int(min(bhi*int64(batchSize), int64(n)))
}

// jobSession is the dealer session of shard k of shards in phase of the
// selection whose joint coin is seed: domain-separated from the
// coordinators' dealer session (selection's) and from every other shard and
// phase, so no two worker pairs, and no worker pair and the coordinators,
// ever draw the same word (and a worker pair's epochs, counted in its own
// state, start afresh for each job).
func jobSession(seed share.Seed, phase, k, shards int) beaver.SessionID {
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

// Job is what a coordinator hands its own worker k for one phase: the
// public facts of the run the worker needs, and for the model owner the
// phase's proxy (its own weights, which never leave its machines). It
// travels over the party's internal, authenticated connection (EncodeJob;
// DecodeJob checks every field). The worker runs it as a
// selection.ForwardRun.
type Job struct {
	// Version is selection.ProtocolVersion.
	Version int `json:"version"`
	// Party is the worker's party, 0 (model owner) or 1 (data owner).
	Party int `json:"party"`
	// Params are the run's public parameters (with the coordinator's
	// local Pipeline and MemoryBudget choices).
	Params selection.Params `json:"params"`
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
	// which Candidates are the shard's (Span), starting at the phase's
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
	// its coordinator recorded it (selection.ShardedPhase.Floor; 0: none
	// yet). The
	// worker runs only at epochs above it, whatever its directory holds
	// and whatever epoch the peer worker announces, so a worker that comes
	// back with an empty directory never draws a word of an earlier life.
	// At most selection.MaxEpoch−2.
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
// checkpoint when Reached returns (selection.ShardedPhase.RaiseFloor), so
// a job sent again carries it as Floor; a worker that received the job
// over its internal connection (Worker.Serve) relays it to its
// coordinator and waits for the answer, and Workers passes each epoch its
// worker reports to Reached before answering, and sends a job again with
// its raised Floor. Calls of one job's Reached and EncodeJob are not
// concurrent.
func (j *Job) Reached(ctx context.Context, epoch uint64) error {
	if epoch == 0 || epoch >= selection.MaxEpoch {
		return fmt.Errorf("shard: job: epoch %d reached (1..%d)", epoch, selection.MaxEpoch-1)
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

// span is the job's batches of the phase (of the phase's size,
// selection.Params.PhaseBatchSize): the shard's candidates [lo, hi) of
// the phase's and its batches [blo, bhi).
func (j *Job) span() (lo, hi, blo, bhi int) {
	bs := j.Params.PhaseBatchSize(j.Phase)
	lo, hi = Span(j.PhaseCandidates, bs, j.Shards, j.Shard)
	return lo, hi, lo / bs, (hi + bs - 1) / bs
}

// EncodeJob encodes j: "SFJ1" | header length u32 | the JSON header (every
// field but Session, Candidates and Proxy) | the session (32 bytes) |
// candidate count u32 | the candidates (u32 each) | the proxy (the rest),
// little-endian.
func EncodeJob(j *Job) ([]byte, error) {
	h, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("shard: encode job: %w", err)
	}
	if len(h) > maxJobHeader {
		return nil, fmt.Errorf("shard: encode job: header of %d bytes", len(h))
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
		return nil, fmt.Errorf("shard: encode job: %d bytes (at most %d)", len(b), MaxJobBytes)
	}
	return b, nil
}

// DecodeJob decodes and checks a job (EncodeJob): the sizes before
// anything is decoded (at most MaxJobBytes, a header of at most 1 MiB, a
// candidate count within the message and the pool), the header strictly
// (unknown fields refused), the version, the parameters
// (selection.Params.Validate and CheckLanes),
// the party, K in 1..MaxShards, k in 0..K−1, the phase within the
// schedule, the floor epoch at most selection.MaxEpoch−2, and the candidates:
// ascending, distinct pool indices, exactly
// the shard's Span of the phase's PhaseCandidates (at most the pool),
// starting at FirstBatch; a data owner's job carries no proxy.
func DecodeJob(b []byte) (*Job, error) {
	bad := func(format string, args ...any) (*Job, error) {
		return nil, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: job: "+format, args...))
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
	case j.Version != selection.ProtocolVersion:
		return bad("version %d (this worker speaks %d)", j.Version, selection.ProtocolVersion)
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
	if err := j.Params.CheckLanes(); err != nil {
		return bad("%w", err)
	}
	p := j.Params.WithDefaults()
	switch {
	case j.Phase < 0 || j.Phase >= len(p.Schedule):
		return bad("phase %d of %d", j.Phase+1, len(p.Schedule))
	case j.PhaseCandidates < 1 || j.PhaseCandidates > p.PoolSize-p.Bootstrap:
		return bad("a phase of %d candidates (pool %d, bootstrap %d)", j.PhaseCandidates, p.PoolSize, p.Bootstrap)
	case j.Floor > selection.MaxEpoch-2:
		return bad("floor epoch %d (at most %d: the job's worker must be able to run above it)", j.Floor, selection.MaxEpoch-2)
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

package selection

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/lanes"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/share"
)

// ProtocolVersion is the version of the selection protocol, compared in the
// handshake.
const ProtocolVersion = 2

// Phase is one phase of the schedule: the shape of its proxy and the
// fraction of the candidates it keeps (ParseSchedule reads a list of them
// from "l:w:d@keep,...").
type Phase struct {
	// Proxy is the shape ⟨l, w, d⟩ of the phase's proxy.
	Proxy proxy.Shape `json:"proxy"`
	// Keep is the fraction of the candidates (the pool without the bootstrap
	// sample) that survive this phase, e.g. 0.3. The last phase ignores it
	// and keeps Budget − Bootstrap.
	Keep float64 `json:"keep"`
	// Workers, if positive, is the phase's own number of batch lanes
	// (1..MaxWorkers; 0: Params.Workers): a phase whose proxy is small
	// and whose batches are latency-bound runs more batches at once than
	// the run's largest proxy lets it hold in memory. Lanes do not change
	// what a batch computes (its dealer counters are its own), only how
	// many run at once. Part of the schedule: both parties pass the same
	// value (ParseSchedule reads it as "/lanes").
	Workers int `json:"workers,omitempty"`
	// BatchSize, if positive, is the phase's own number of candidates per
	// secure forward (1..MaxBatchSize; 0: Params.BatchSize): a phase whose
	// proxy is small runs larger batches, so that its batches' rounds,
	// which do not grow with the batch size, are paid fewer times. The
	// size changes how a phase's candidates are cut into batches (batch
	// b is candidates [b·size, (b+1)·size) of the phase's), never what a
	// candidate's entropy is. Part of the schedule: both parties pass the
	// same value (ParseSchedule reads it as "/lanesxsize" or "/xsize").
	BatchSize int `json:"batch_size,omitempty"`
}

// AppraisalMode says what the optional appraisal reveals.
type AppraisalMode string

const (
	// AppraiseNone skips the appraisal.
	AppraiseNone AppraisalMode = ""
	// AppraiseMean reveals the mean entropy of the final set to both parties.
	AppraiseMean AppraisalMode = "mean"
	// AppraiseThreshold reveals one bit: whether the mean entropy of the final
	// set exceeds the model owner's private threshold.
	AppraiseThreshold AppraisalMode = "threshold"
)

// Params are the public parameters of a selection. Both parties pass the same
// values; the handshake compares them field by field.
type Params struct {
	// PoolSize is the number of candidates in the data owner's pool.
	PoolSize int `json:"pool_size"`
	// Budget is the number of points bought in total, bootstrap included: the
	// last phase keeps Budget − Bootstrap candidates.
	Budget int `json:"budget"`
	// Bootstrap is the size of the bootstrap sample (sent in the clear and
	// labelled by the model owner).
	Bootstrap int `json:"bootstrap"`
	// Schedule is the list of phases, at least one.
	Schedule []Phase `json:"schedule"`
	// FixedPoint is the encoding (share.DefaultFixedPoint when zero).
	FixedPoint share.FixedPoint `json:"fixed_point"`
	// BatchSize is the number of candidates per secure forward (64 when
	// 0; at most MaxBatchSize). A phase may cut its candidates into
	// batches of its own size instead (Phase.BatchSize; PhaseBatchSize).
	BatchSize int `json:"batch_size"`
	// Workers is the number of batch lanes: at most this many batches are
	// in flight at once, batch b on lane b mod Workers, each lane its own
	// stream, protocol session and dealer counter range per batch (8 when
	// 0). A phase may run its own number instead (Phase.Workers;
	// PhaseWorkers). Both parties pass the same value (it fixes which
	// correlated randomness a batch uses).
	Workers int `json:"workers"`
	// Pipeline says whether the batch scheduler pipelines (PipelineOn, the
	// default when empty: every lane runs at once, so one batch's
	// computation overlaps the round trips of the others, and the dealer
	// material of upcoming batches is prefetched within MemoryBudget) or
	// runs one batch at a time with every dealer request on the critical
	// path (PipelineOff, the baseline). The batches use the same lanes,
	// streams and dealer counters either way, so the entropies, hence the
	// selected indices, are identical; each party chooses alone (it is not
	// compared in the handshake, and a checkpoint written with one mode
	// resumes with the other).
	Pipeline PipelineMode `json:"pipeline,omitempty"`
	// MemoryBudget bounds the bytes of prefetched dealer material this
	// party holds at once (DefaultMemoryBudget when 0; negative: no
	// prefetch). A batch is prefetched whole when its material fits; when
	// the budget cannot hold two batches a lane, part of it is kept as a
	// window a lane, through which a batch that starts without its whole
	// material streams it (a round trip to a networked dealer per half
	// window, not per item). PhaseStats reports the peak held. A local
	// choice, like Pipeline.
	MemoryBudget int64 `json:"memory_budget,omitempty"`
	// Appraisal selects the optional appraisal of the final set.
	Appraisal AppraisalMode `json:"appraisal"`
}

// WithDefaults returns p with the defaults of its zero fields filled in
// (the fixed-point encoding, BatchSize, Workers, Pipeline, MemoryBudget),
// as a run uses it.
func (p Params) WithDefaults() Params {
	if p.FixedPoint == (share.FixedPoint{}) {
		p.FixedPoint = share.DefaultFixedPoint
	}
	if p.BatchSize == 0 {
		p.BatchSize = DefaultBatchSize
	}
	if p.Workers == 0 {
		p.Workers = DefaultWorkers
	}
	if p.Pipeline == "" {
		p.Pipeline = PipelineOn
	}
	if p.MemoryBudget == 0 {
		p.MemoryBudget = DefaultMemoryBudget
	}
	return p
}

// PipelineMode selects the batch scheduler's mode (Params.Pipeline).
type PipelineMode string

const (
	// PipelineOn runs all lanes at once and prefetches dealer material.
	PipelineOn PipelineMode = "on"
	// PipelineOff runs one batch at a time, without prefetching.
	PipelineOff PipelineMode = "off"
)

// DefaultBatchSize is the batch size when Params.BatchSize is 0.
const DefaultBatchSize = 64

// DefaultWorkers is the number of batch lanes when Params.Workers is 0.
const DefaultWorkers = 8

// DefaultMemoryBudget is the prefetch budget when Params.MemoryBudget is 0.
const DefaultMemoryBudget = 1 << 30

// protocolView returns p without the settings each party chooses alone
// (Pipeline, MemoryBudget): what the handshake and the checkpoint's view
// hash compare.
func (p Params) protocolView() Params {
	p.Pipeline, p.MemoryBudget = "", 0
	return p
}

// MaxWorkers bounds Params.Workers and every Phase.Workers: the lanes'
// streams StreamSlotBase..StreamSlotBase+MaxWorkers−1 lie below a
// dealer-free provider's (beaver/ot's DefaultStreamBase), and a run's
// streams within the transport's DefaultMaxStreams.
const MaxWorkers = 64

// PhaseWorkers returns the number of batch lanes of phase i (after
// defaults): the phase's own Workers, or the run's.
func (p Params) PhaseWorkers(i int) int {
	if i >= 0 && i < len(p.Schedule) && p.Schedule[i].Workers > 0 {
		return p.Schedule[i].Workers
	}
	if p.Workers == 0 {
		return DefaultWorkers
	}
	return p.Workers
}

// MaxBatchSize bounds Params.BatchSize and every Phase.BatchSize: a batch
// is one secure forward of that many candidates, whose shares and dealer
// material a party holds at once.
const MaxBatchSize = 1 << 16

// PhaseBatchSize returns the number of candidates of a full batch of
// phase i (after defaults): the phase's own BatchSize, or the run's.
func (p Params) PhaseBatchSize(i int) int {
	if i >= 0 && i < len(p.Schedule) && p.Schedule[i].BatchSize > 0 {
		return p.Schedule[i].BatchSize
	}
	if p.BatchSize == 0 {
		return DefaultBatchSize
	}
	return p.BatchSize
}

// phaseBatches returns the number of batches of phase i's n candidates.
func (p Params) phaseBatches(i, n int) int {
	return lanes.Batches(n, p.PhaseBatchSize(i))
}

// laneCount returns the number of batch lanes a run opens: the most any
// phase runs.
func (p Params) laneCount() int {
	n := p.PhaseWorkers(-1)
	for i := range p.Schedule {
		n = max(n, p.PhaseWorkers(i))
	}
	return n
}

// Validate checks the parameters (after defaults).
func (p Params) Validate() error {
	p = p.WithDefaults()
	if err := p.FixedPoint.Validate(); err != nil {
		return fmt.Errorf("selection: params: %w", err)
	}
	switch {
	case p.PoolSize <= 0:
		return fmt.Errorf("selection: params: pool size %d", p.PoolSize)
	case p.Bootstrap < 0 || p.Bootstrap >= p.PoolSize:
		return fmt.Errorf("selection: params: bootstrap %d for a pool of %d", p.Bootstrap, p.PoolSize)
	case p.Budget <= p.Bootstrap || p.Budget > p.PoolSize:
		return fmt.Errorf("selection: params: budget %d must exceed the bootstrap (%d) and not exceed the pool (%d)", p.Budget, p.Bootstrap, p.PoolSize)
	case len(p.Schedule) == 0:
		return fmt.Errorf("selection: params: empty schedule")
	case p.BatchSize < 0 || p.BatchSize > MaxBatchSize:
		return fmt.Errorf("selection: params: batch size %d (1..%d)", p.BatchSize, MaxBatchSize)
	case p.Workers < 0 || p.Workers > MaxWorkers:
		return fmt.Errorf("selection: params: workers %d (1..%d)", p.Workers, MaxWorkers)
	case p.Pipeline != PipelineOn && p.Pipeline != PipelineOff:
		return fmt.Errorf("selection: params: pipeline %q (on or off)", p.Pipeline)
	case len(p.Schedule) > lanes.MaxPhases:
		return fmt.Errorf("selection: params: %d phases (at most %d)", len(p.Schedule), lanes.MaxPhases)
	}
	switch p.Appraisal {
	case AppraiseNone, AppraiseMean, AppraiseThreshold:
	default:
		return fmt.Errorf("selection: params: appraisal %q", p.Appraisal)
	}
	prev := p.PoolSize - p.Bootstrap
	for i, st := range p.Schedule {
		keep := p.keep(i)
		if keep < p.Budget-p.Bootstrap || keep > prev {
			return fmt.Errorf("selection: params: phase %d keeps %d of %d candidates (fraction %g); the final set has %d", i+1, keep, prev, st.Keep, p.Budget-p.Bootstrap)
		}
		if i < len(p.Schedule)-1 && (st.Keep <= 0 || st.Keep > 1) {
			return fmt.Errorf("selection: params: phase %d keep fraction %g not in (0, 1]", i+1, st.Keep)
		}
		if st.Proxy.Layers < 0 || st.Proxy.Heads < 0 || st.Proxy.MLPHidden < 0 {
			return fmt.Errorf("selection: params: phase %d proxy %+v", i+1, st.Proxy)
		}
		if st.Workers < 0 || st.Workers > MaxWorkers {
			return fmt.Errorf("selection: params: phase %d workers %d (1..%d, or 0 for the run's)", i+1, st.Workers, MaxWorkers)
		}
		if st.BatchSize < 0 || st.BatchSize > MaxBatchSize {
			return fmt.Errorf("selection: params: phase %d batch size %d (1..%d, or 0 for the run's)", i+1, st.BatchSize, MaxBatchSize)
		}
		prev = keep
	}
	return nil
}

// CheckLanes checks that every lane's batches fit the lane's dealer
// counters (lanes.MaxLaneBatches) in every phase, with the candidates
// entering it in batches of the phase's size on the phase's lanes. Run checks it with the parameters'
// real pool size (Validate does not: binaries validate their flags with a
// placeholder pool size before reading the pool).
func (p Params) CheckLanes() error {
	p = p.WithDefaults()
	in := p.PoolSize - p.Bootstrap
	for i := range p.Schedule {
		w, bs := p.PhaseWorkers(i), p.PhaseBatchSize(i)
		if w <= 0 || bs <= 0 {
			return nil // Validate reports it
		}
		if per := (lanes.Batches(in, bs) + w - 1) / w; per > lanes.MaxLaneBatches {
			return fmt.Errorf("selection: params: phase %d: %d batches per lane (at most %d): raise the batch size or the workers", i+1, per, lanes.MaxLaneBatches)
		}
		in = p.keep(i)
	}
	return nil
}

// keep returns the number of survivors of phase i.
func (p Params) keep(i int) int {
	if i == len(p.Schedule)-1 {
		return p.Budget - p.Bootstrap
	}
	return int(float64(p.PoolSize-p.Bootstrap)*p.Schedule[i].Keep + 0.5)
}

// Shapes returns the proxy shapes of the schedule's phases (for
// proxy.Config.Phases).
func (p Params) Shapes() []proxy.Shape {
	out := make([]proxy.Shape, len(p.Schedule))
	for i, s := range p.Schedule {
		out[i] = s.Proxy
	}
	return out
}

// Forwarder evaluates one phase's proxy on batches of candidates.
type Forwarder interface {
	// Forward returns this party's shares of the entropies of the candidates
	// idx (pool indices; both parties pass the same list) as a tensor of
	// len(idx) fixed-point values. s is the batch slot's session.
	Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error)
}

// Evaluator is one party's side of the secure proxy forward. The default
// implementations wrap package proxy/secure; tests may substitute their own.
type Evaluator interface {
	// Arch returns the public architecture of phase's proxy for inputs of
	// seq tokens (or patches + 1; the data owner announces seq). Only the model
	// owner's evaluator is asked; the data owner receives it after the
	// bootstrap.
	Arch(phase, seq int) (secure.Arch, error)
	// Prepare shares (model owner) or receives (data owner) phase's weights on
	// the control session s, once per phase and run. weightBase is the first
	// weight id to use (distinct per phase and run so that weight masks are
	// never shared by two different matrices). The model owner's Prepare, and
	// the Forward of what it returns, are also called on rehearsal sessions
	// (s.Rehearsal(): no stream, material of zeros; protocol.Rehearse) to learn
	// the dealer work of a phase (DealerBudget) and of a batch (prefetch):
	// there they must not read s.Stream().
	Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, weightBase uint64) (Forwarder, error)
}

// Labeler labels the bootstrap sample for the model owner: idx are the pool
// indices, in the data owner's order, and in holds their inputs.
type Labeler func(ctx context.Context, idx []int, in model.Input) ([]int, error)

// Progress is a progress report of a phase's batches.
type Progress struct {
	// Phase is the phase, 0-based (an index of Params.Schedule; messages
	// number it from 1); Done and Total count its batches.
	Phase, Done, Total int
	// Rate is batches per second in this run; ETA the estimated time left.
	Rate float64
	ETA  time.Duration
}

// ModelOwner is party 0: it holds the target model and the proxies.
type ModelOwner struct {
	// Params are the public parameters.
	Params Params
	// Target is the target model; proxies are generated from it after the
	// bootstrap (unless Proxies or Evaluator is set). Its embedding tables
	// are hashed into the handshake.
	Target *model.Model
	// Proxies, if set, are pre-generated proxies, one per phase, used instead
	// of generating them.
	Proxies []*proxy.Proxy
	// Generate configures proxy generation; its Phases are taken from
	// Params.Schedule.
	Generate proxy.Config
	// Label labels the bootstrap sample (required when proxies are
	// generated). With a StateDir it is called at most once per sample of
	// a session: its labels are checkpointed (State.Labelled) before the
	// proxies are generated, and a resumed run that receives the same
	// points reuses them, whatever it stopped in.
	Label Labeler
	// Threshold is the private threshold of AppraiseThreshold; Run refuses
	// one outside the fixed-point range before the session.
	Threshold float64
	// Evaluator, if set, replaces the secure forward of the proxies.
	Evaluator Evaluator
	// ItemInput, if set, turns the data owner's committed candidates
	// (their canonical bytes, package selection/purchase) into the input
	// the target takes, for sequences of seq tokens (the length the data
	// owner announces; pool.Pool.Input does it for pool files). With it
	// the model owner requires the data owner's commitment to its pool
	// (a hello without one is a mismatch of field "pool_root"), and
	// labels the bootstrap points it derives from their verified
	// openings, refusing a sample whose inputs differ (AbortOpening).
	// Without it, a commitment the data owner sends is still recorded and
	// the bootstrap's openings verified, but the inputs labelled are the
	// ones sent beside them, unchecked against the opened candidates.
	ItemInput func(items [][]byte, seq int) (model.Input, error)
	// RequireCommitment refuses a data owner that does not commit to its
	// pool (ItemInput implies it): a buyer that means to verify what it
	// is delivered (the modelowner binary sets it).
	RequireCommitment bool
	// Shards, if set, makes this Run a sharded selection's coordinator:
	// each phase's secure forward runs on the model owner's K workers
	// (a ShardRunner: selection/shard's Workers), each paired with the data owner's
	// worker of the same index, instead of on conn; everything else
	// (handshake, coin, bootstrap, proxies, QuickSelect, appraisal,
	// checkpoints) stays here. nil: one pair, today's run. Both parties
	// set the same K (a MismatchError of field "shards" otherwise).
	Shards ShardRunner
	// EmbeddingHash, if non-empty, is used as the embedding hash instead of
	// hashing Target's (or the first proxy's) embedding tables
	// (model.EmbeddingHash).
	EmbeddingHash string
	// StateDir, if set, holds the checkpoint (see the package comment).
	StateDir string
	// Logger receives progress (slog.Default() when nil).
	Logger *slog.Logger
	// OnProgress, if set, is called as each phase starts (Done: its
	// batches resumed from a checkpoint, often 0) and after every batch,
	// one call at a time and in order (Done grows by one each call within
	// a phase).
	OnProgress func(Progress)

	// onBootstrap, if set (tests), sees the bootstrap message as received.
	onBootstrap func(b []byte) error
	// onAbort, if set (tests), sees the data owner's abort message as
	// received.
	onAbort func(b []byte)
	// coinSource, if set (tests), replaces crypto/rand for this party's
	// part of the coin toss.
	coinSource io.Reader
}

// DataOwner is party 1: it holds the pool.
type DataOwner struct {
	// Params are the public parameters.
	Params Params
	// Pool holds the candidates' inputs (PoolSize of them).
	Pool model.Input
	// Embedding is the public pretrained model whose embedding module embeds
	// the pool locally; its tables are hashed into the handshake.
	Embedding *model.Model
	// Evaluator, if set, replaces the secure forward.
	Evaluator Evaluator
	// Items, if set, are the pool's candidates as canonical bytes
	// (pool.Pool implements it, with the bytes mkpool writes), candidate i
	// the same as Pool's: the data owner commits to all of them (package
	// selection/purchase: a Merkle root of salted hashes, the salts from a
	// seed it keeps in StateDir, or in memory without one) and announces
	// the root in its hello, before the coin toss; the bootstrap's points
	// then go with their openings, and Deliver writes the bundle of the
	// purchased candidates. A resumed session recomputes the root and
	// refuses to go on with a pool that no longer gives it.
	Items purchase.Items
	// Shards, if set, makes this Run a sharded selection's coordinator
	// (see ModelOwner.Shards; the data owner's workers hold their own
	// copies of the pool).
	Shards ShardRunner
	// EmbeddingHash, if non-empty, is used as the embedding hash instead of
	// hashing Embedding's tables (model.EmbeddingHash).
	EmbeddingHash string
	// StateDir, if set, holds the checkpoint (see the package comment),
	// including the record of the bootstrap sample sent. Without it the
	// record lives in this DataOwner value only: a restarted process cannot
	// recognise a session whose sample it already sent.
	StateDir string
	// Logger receives progress (slog.Default() when nil).
	Logger *slog.Logger
	// OnProgress, if set, is called as each phase starts (Done: its
	// batches resumed from a checkpoint, often 0) and after every batch,
	// one call at a time and in order (Done grows by one each call within
	// a phase).
	OnProgress func(Progress)

	mu       sync.Mutex
	revealed *Revealed // without StateDir: the bootstrap sent by a Run of this value
	// poolSeed and bought are, without StateDir, the salt seed of this
	// value's commitment (drawn once) and the state of its last finished
	// Run (what Deliver delivers).
	poolSeed *purchase.Seed
	bought   *State
	// shareOffset, if set (tests), adds its value to this party's share of
	// candidate idx's score in phase (a data owner that shifts its
	// shares: TestAuditFlagsShiftedShares).
	shareOffset func(phase, idx int) float64
	// onAbort, if set (tests), sees the model owner's abort message as
	// received.
	onAbort func(b []byte)
	// coinSource, if set (tests), replaces crypto/rand for this party's
	// part of the coin toss.
	coinSource io.Reader
	// forgeEpoch, if set (tests), replaces this party's epoch once it is
	// counted, before it is persisted and announced: a data owner that
	// lies about its epoch (TestModelOwnerRefusesForgedEpoch).
	forgeEpoch func(uint64) uint64
}

// PhaseStats are one phase's figures, as seen by one party, counted in
// this run (batches resumed from a checkpoint cost nothing again).
//
// In a sharded phase (ModelOwner.Shards, DataOwner.Shards) the
// coordinator's own figures (its link to the other coordinator:
// QuickSelect) are added to its workers' (Shards, one per job this run
// handed out, as each worker reported it with its shares): BytesSent and
// BytesRecv sum the coordinators' link and every worker pair's link,
// RandomnessBytes the coordinator's provider and every worker's (its own
// dealer link, or the dealer-free provider's OT traffic on its pair
// link). The pairs run at the same time, so their rounds overlap:
// ForwardRounds is the largest pair's forward critical path (the
// coordinators run no forward), SelectRounds the coordinators'; the
// phase's critical path is their sum, and each pair's rounds are in
// Shards. A worker's figures cover its attempts in its current process:
// a worker that died and restarted reports those of its new life only,
// and a shard recorded before a coordinator's restart is not run (nor
// counted) again. The memory figures (PeakInFlight, Prefetched, Streamed,
// PeakPrefetchBytes, BatchMaterialBytes) are the machine's that ran the
// forward: zero for a sharded coordinator (see its workers' logs).
type PhaseStats struct {
	// In and Out count the candidates entering and surviving the phase.
	In  int `json:"in"`
	Out int `json:"out"`
	// Batches is the number of batches; Resumed of them came from the checkpoint.
	Batches int `json:"batches"`
	Resumed int `json:"resumed"`
	// ForwardRounds is the forward's critical path: the weight sharing plus
	// the largest number of rounds on any batch lane's stream with the
	// pipeline on (the lanes' rounds overlap), their sum with it off; in a
	// sharded phase the largest of the pairs'. SelectRounds are those of
	// QuickSelect.
	ForwardRounds int64 `json:"forward_rounds"`
	SelectRounds  int64 `json:"select_rounds"`
	// BytesSent and BytesRecv are this party's online traffic in the phase:
	// on its link to the other party, plus, sharded, on every pair's link.
	BytesSent int64 `json:"bytes_sent"`
	BytesRecv int64 `json:"bytes_recv"`
	// RandomnessBytes is this party's traffic of correlated randomness:
	// from and to the dealer, or, dealer-free, the OT and HE traffic with
	// the peer that makes it; plus, sharded, every worker's. (Results
	// written before it was named so hold it as "dealer_bytes", which
	// decodes into it.)
	RandomnessBytes int64 `json:"randomness_bytes"`
	// Shards are the worker pairs' figures of a sharded phase, one per job
	// this run handed out, by shard (already added to the totals above).
	Shards []ShardStats `json:"shards,omitempty"`
	// PeakInFlight is the most batches that ran at once (≤ the phase's
	// lanes, Params.PhaseWorkers; 1 with the pipeline off).
	PeakInFlight int `json:"peak_in_flight,omitempty"`
	// Prefetched counts the batches whose dealer material was fetched
	// ahead of use; PeakPrefetchBytes is the most bytes of such material
	// held at once (≤ Params.MemoryBudget), BatchMaterialBytes a full
	// batch's material.
	Prefetched int `json:"prefetched,omitempty"`
	// Streamed counts the batches that drew their dealer material through a
	// window as they ran (the budget could not hold it whole; lanes.Stats).
	Streamed           int   `json:"streamed,omitempty"`
	PeakPrefetchBytes  int64 `json:"peak_prefetch_bytes,omitempty"`
	BatchMaterialBytes int64 `json:"batch_material_bytes,omitempty"`
	// Comparisons and Steps count QuickSelect's work.
	Comparisons int64 `json:"comparisons"`
	Steps       int   `json:"steps"`
	// Seconds is the wall time of the phase in this run.
	Seconds float64 `json:"seconds"`
}

// Appraisal is the outcome of the optional appraisal.
type Appraisal struct {
	// Mode is the appraisal mode.
	Mode AppraisalMode `json:"mode"`
	// Mean is the mean entropy of the final set (AppraiseMean).
	Mean float64 `json:"mean,omitempty"`
	// Exceeds reports whether the mean exceeds the model owner's threshold
	// (AppraiseThreshold).
	Exceeds bool `json:"exceeds,omitempty"`
}

// Result is the outcome of a selection; both parties get the same one
// (statistics apart).
type Result struct {
	// Selected holds the pool indices the secure selection chose among the
	// candidates (the pool without the bootstrap sample), ascending:
	// Budget − Bootstrap of them. What the model owner buys is Selected
	// plus Bootstrap, Budget points in all.
	Selected []int `json:"selected"`
	// Bootstrap holds the pool indices of the bootstrap sample, which the
	// data owner sent in the clear for the model owner to label (bought too).
	Bootstrap []int `json:"bootstrap"`
	// Survivors holds each phase's surviving pool indices, ascending.
	Survivors [][]int `json:"survivors"`
	// Phases holds each phase's statistics (this party's view).
	Phases []PhaseStats `json:"phases"`
	// Tiers holds, per phase, what its comparison outcomes revealed of
	// the order of its survivors (aligned with Survivors): a survivor of
	// a lower tier was revealed ahead of every survivor of a higher one
	// (topk.TopKTiers). Both parties learn them; the audit of a purchase
	// checks the delivered candidates' scores against them.
	Tiers [][]int `json:"tiers,omitempty"`
	// Commitment is the data owner's commitment to its pool, as recorded
	// in the handshake (nil without one; see DataOwner.Items).
	Commitment *PoolCommitment `json:"commitment,omitempty"`
	// OpeningBytes is the size of the bootstrap's openings message (the
	// sample's salts, Merkle paths and canonical bytes), sent in this run
	// (0 without a commitment or a bootstrap).
	OpeningBytes int64 `json:"opening_bytes,omitempty"`
	// Appraisal is set when Params.Appraisal asked for one.
	Appraisal *Appraisal `json:"appraisal,omitempty"`
	// Epoch is the run number of this state directory (1 for a fresh run).
	Epoch uint64 `json:"epoch"`
}

// UnmarshalJSON decodes PhaseStats, also from a result written before
// RandomnessBytes was named so (legacyRandomness).
func (s *PhaseStats) UnmarshalJSON(b []byte) error {
	type plain PhaseStats // without this method
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	return legacyRandomness(b, &s.RandomnessBytes)
}

// legacyRandomness decodes the "dealer_bytes" of the JSON object b, the
// name of RandomnessBytes in results written before, into *n unless b
// sets it under its name.
func legacyRandomness(b []byte, n *int64) error {
	var v struct {
		Randomness *int64 `json:"randomness_bytes"`
		Dealer     *int64 `json:"dealer_bytes"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Dealer != nil && v.Randomness == nil {
		*n = *v.Dealer
	}
	return nil
}

package selection

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/purchase"
	"github.com/selectformer/selectformer/share"
)

// stateVersion is the version of the checkpoint format.
const stateVersion = 1

// maxStateFile bounds the size of a checkpoint file read back.
const maxStateFile = 1 << 30

// BatchShares is one finished batch's entropy shares.
type BatchShares struct {
	// Batch is the batch number within its phase.
	Batch int `json:"batch"`
	// Epoch is the run that computed it.
	Epoch uint64 `json:"epoch"`
	// Shares holds this party's shares of the batch's entropies.
	Shares []uint64 `json:"shares"`
}

// PhaseState is the checkpointed progress of one phase.
type PhaseState struct {
	// Batches holds the finished batches, in any order. They are stored in
	// their own files (see DecodeBatchFile), not in the state file.
	Batches []BatchShares `json:"-"`
	// Done is set once QuickSelect has finished; Survivors then holds the
	// surviving pool indices (ascending).
	Done      bool  `json:"done"`
	Survivors []int `json:"survivors,omitempty"`
	// Tiers holds, once Done, each survivor's tier (aligned with
	// Survivors): what the phase's comparison outcomes revealed of their
	// order (topk.TopKTiers), kept for the audit of a purchase. Absent in
	// checkpoints written before tiers were kept.
	Tiers []int `json:"tiers,omitempty"`
}

// State is one party's checkpoint, written atomically to its state
// directory after every batch (see the package comment).
type State struct {
	// Version is the format version.
	Version int `json:"version"`
	// Party is 0 (model owner) or 1 (data owner).
	Party int `json:"party"`
	// ViewHash identifies the public parameters the state belongs to.
	ViewHash string `json:"view_hash"`
	// Epoch counts the runs on this state directory (incremented and
	// persisted before each run talks to the peer).
	Epoch uint64 `json:"epoch"`
	// Seed is the joint coin (hex), empty until tossed.
	Seed string `json:"seed,omitempty"`
	// BootstrapDone is set once the bootstrap sample has been sent and the
	// proxies are ready; Bootstrap holds its pool indices.
	BootstrapDone bool  `json:"bootstrap_done"`
	Bootstrap     []int `json:"bootstrap,omitempty"`
	// Phases holds the phases started so far.
	Phases []PhaseState `json:"phases"`
	// Revealed is the data owner's record of the bootstrap sample it sent in
	// the clear, written before it is sent and never trimmed (nil until
	// then, and always nil for the model owner).
	Revealed *Revealed `json:"revealed,omitempty"`
	// Pool is the data owner's commitment to its pool in this session
	// (nil without one): the root both parties record in the handshake,
	// before the coin (see PoolState).
	Pool *PoolState `json:"pool,omitempty"`
	// Labelled is the model owner's record of the bootstrap labels,
	// written the moment Label returns them, before the proxies are
	// generated, and never trimmed: a run that stops after it (in
	// generation, or in any phase) and resumes on a sample of the same
	// points (the same indices and inputs) reuses them, so nobody is asked
	// to label twice (nil until then, and always nil for the data owner).
	Labelled *BootstrapLabels `json:"labelled,omitempty"`
	// ShardFloors is a sharded coordinator's record, per dealer session of
	// a job it dispatched (the session's 64 hex digits), of the highest
	// epoch at which its worker may have drawn correlated randomness for
	// the job: raised and written before the worker draws at an epoch
	// (ShardedPhase.RaiseFloor) and never trimmed, so that a worker that
	// comes back with an empty or older directory starts above it
	// (ShardedPhase.Floor, ForwardRun.Floor).
	ShardFloors map[string]uint64 `json:"shard_floors,omitempty"`
}

// PoolState is a party's record of the data owner's commitment to its
// pool (package selection/purchase): the root, announced by the data owner
// in its hello before the coin toss, and the sequence length it announced
// (the model owner's audit tokenizes delivered texts to it). The data
// owner also keeps the secret seed of the salts, which a delivery needs;
// the model owner never has it.
type PoolState struct {
	// Root is the commitment (64 hex digits).
	Root purchase.Root `json:"root"`
	// Size is the number of candidates committed to (Params.PoolSize).
	Size int `json:"size"`
	// Seq is the data owner's announced sequence length.
	Seq int `json:"seq"`
	// Seed is the data owner's salt seed (64 hex digits; empty at the
	// model owner).
	Seed string `json:"seed,omitempty"`
}

// seed decodes the data owner's salt seed.
func (p *PoolState) seed() (purchase.Seed, error) {
	s, err := decodeHex32(p.Seed)
	if err != nil {
		return s, fmt.Errorf("selection: state: bad pool commitment seed")
	}
	return s, nil
}

// decodeHex32 decodes 32 bytes from 64 hex digits.
func decodeHex32(s string) ([32]byte, error) {
	var out [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(out) {
		return out, fmt.Errorf("not 64 hex digits")
	}
	copy(out[:], b)
	return out, nil
}

// maxShardFloors bounds State.ShardFloors: a job per phase and shard, for
// every K a session was run with.
const maxShardFloors = 1 << 20

// Revealed records what a data owner has sent in the clear in a session:
// the pool indices of its bootstrap sample and the joint coin they were
// drawn with. Once recorded, the data owner tosses no new coin for the
// session and re-sends only these points, so that no sequence of crashes
// and restarts reveals more than one uninterrupted run.
type Revealed struct {
	// ViewHash identifies the session's public parameters.
	ViewHash string `json:"view_hash"`
	// Seed is the joint coin (hex).
	Seed string `json:"seed"`
	// Bootstrap holds the pool indices sent, ascending.
	Bootstrap []int `json:"bootstrap"`
}

// BootstrapLabels are the labels of a bootstrap sample (State.Labelled).
type BootstrapLabels struct {
	// Bootstrap holds the sample's pool indices, ascending.
	Bootstrap []int `json:"bootstrap"`
	// Points is the SHA-256 (hex) of the sample's inputs as labelled
	// (pointsHash): labels are reused for the same inputs only, so a data
	// owner that sends other points under the same indices after a
	// restart gets them labelled, not the old labels.
	Points string `json:"points"`
	// Labels holds their classes, in the order of Bootstrap.
	Labels []int `json:"labels"`
}

// pointsHash is the SHA-256 (hex) of bootstrap inputs, as the model owner
// decoded them.
func pointsHash(in model.Input) string {
	b, _ := json.Marshal(in)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// labelsOf returns the recorded labels of the bootstrap sample idx of
// inputs in, if the checkpoint holds those of exactly these points.
func (s *State) labelsOf(idx []int, in model.Input) ([]int, bool) {
	l := s.Labelled
	if l == nil || !slices.Equal(l.Bootstrap, idx) || l.Points != pointsHash(in) {
		return nil, false
	}
	return slices.Clone(l.Labels), true
}

// checkLabelled refuses a record of bootstrap labels (State.Labelled) of
// a data owner, whose indices are not ascending and distinct, or whose
// labels are negative or not one per index.
func checkLabelled(party int, l *BootstrapLabels) error {
	if l == nil {
		return nil
	}
	if party != 0 {
		return fmt.Errorf("selection: state: party %d with a model owner's record of bootstrap labels", party)
	}
	if len(l.Labels) != len(l.Bootstrap) {
		return fmt.Errorf("selection: state: %d bootstrap labels for %d points", len(l.Labels), len(l.Bootstrap))
	}
	if b, err := hex.DecodeString(l.Points); err != nil || len(b) != sha256.Size {
		return fmt.Errorf("selection: state: labelled points' hash %.70q", l.Points)
	}
	for i, b := range l.Bootstrap {
		if b < 0 || i > 0 && b <= l.Bootstrap[i-1] {
			return fmt.Errorf("selection: state: labelled indices not ascending and distinct")
		}
		if l.Labels[i] < 0 {
			return fmt.Errorf("selection: state: bootstrap label %d", l.Labels[i])
		}
	}
	return nil
}

func (r *Revealed) clone() *Revealed {
	if r == nil {
		return nil
	}
	c := *r
	c.Bootstrap = slices.Clone(r.Bootstrap)
	return &c
}

// ErrBootstrapRevealed is wrapped by the data owner's error when a run
// would make it reveal a second bootstrap sample in a session whose sample
// it already sent: typically a model owner restarted with an empty or
// altered state directory (its checkpoint no longer holds the session's
// coin). Restore the model owner's state directory to go on; a data owner
// that accepts revealing another sample starts a new session with a fresh
// state directory.
var ErrBootstrapRevealed = errors.New("the data owner already sent the bootstrap sample of this session and sends no other")

// StateError is the error of a checkpoint file (state, batch or saved
// proxy) that is unreadable, malformed, or belongs to other parameters: a
// bad input file, named by Path.
type StateError struct {
	// Path is the file.
	Path string
	// Err is what is wrong with it.
	Err error
}

func (e *StateError) Error() string {
	return fmt.Sprintf("selection: checkpoint %s: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *StateError) Unwrap() error { return e.Err }

var errOtherParams = errors.New("belongs to a selection with other parameters (or another embedding checkpoint): use another state directory, or the parameters it was written with")

// seedID is what a party shows its peer of a coin (seed hex).
func seedID(seed string) string {
	h := sha256.Sum256([]byte("selection/seed-id/" + seed))
	return hex.EncodeToString(h[:])
}

// checkRevealed refuses a session in which this data owner would have to
// reveal a second bootstrap sample: it has sent one, and the model owner's
// checkpoint does not hold the coin it was drawn with.
func (s *State) checkRevealed(peer summary) error {
	r := s.Revealed
	if r == nil {
		return nil
	}
	if peer.SeedHash == seedID(r.Seed) {
		s.Seed = r.Seed
		return nil
	}
	why := "holds no coin (an empty or lost state directory)"
	if peer.SeedHash != "" {
		why = "holds another coin (an altered state directory)"
	}
	return fmt.Errorf("selection: %w: it sent %d points drawn with coin %.12s…, and the model owner's checkpoint %s; restore the model owner's state directory, or start a new session with a fresh data-owner state directory",
		ErrBootstrapRevealed, len(r.Bootstrap), seedID(r.Seed), why)
}

// StateFile returns the checkpoint file of party in dir.
func StateFile(dir string, party int) string {
	return filepath.Join(dir, fmt.Sprintf("state-p%d.json", party))
}

// DecodeState parses and validates a checkpoint.
func DecodeState(b []byte) (*State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("selection: state: %w", err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("selection: state: version %d (want %d)", s.Version, stateVersion)
	}
	if s.Party != 0 && s.Party != 1 {
		return nil, fmt.Errorf("selection: state: party %d", s.Party)
	}
	if s.Epoch >= MaxEpoch {
		return nil, fmt.Errorf("selection: state: epoch %d (at most %d)", s.Epoch, MaxEpoch-1)
	}
	if s.Seed != "" {
		if _, err := s.seed(); err != nil {
			return nil, err
		}
	}
	if r := s.Revealed; r != nil {
		if s.Party != 1 {
			return nil, fmt.Errorf("selection: state: party %d with a data owner's record of revealed points", s.Party)
		}
		if _, err := (&State{Seed: r.Seed}).seed(); err != nil {
			return nil, fmt.Errorf("selection: state: revealed: %w", err)
		}
		if s.Seed != "" && s.Seed != r.Seed {
			return nil, fmt.Errorf("selection: state: coin differs from the one of the revealed sample")
		}
		if r.ViewHash != s.ViewHash {
			return nil, fmt.Errorf("selection: state: revealed sample of other parameters")
		}
		for i, b := range r.Bootstrap {
			if b < 0 || i > 0 && b <= r.Bootstrap[i-1] {
				return nil, fmt.Errorf("selection: state: revealed indices not ascending and distinct")
			}
		}
		if s.BootstrapDone && !slices.Equal(s.Bootstrap, r.Bootstrap) {
			return nil, fmt.Errorf("selection: state: bootstrap differs from the revealed sample")
		}
	}
	if err := checkShardFloors(s.ShardFloors); err != nil {
		return nil, err
	}
	if err := checkLabelled(s.Party, s.Labelled); err != nil {
		return nil, err
	}
	if pl := s.Pool; pl != nil {
		switch {
		case pl.Root.IsZero() || pl.Size <= 0 || pl.Size > purchase.MaxPool:
			return nil, fmt.Errorf("selection: state: a pool commitment without a root, or of %d candidates", pl.Size)
		case pl.Seq < 0 || pl.Seq > secure.MaxWidth:
			return nil, fmt.Errorf("selection: state: pool commitment of sequences of %d tokens", pl.Seq)
		case s.Party == 0 && pl.Seed != "":
			return nil, fmt.Errorf("selection: state: the model owner holds a pool commitment's seed")
		case s.Party == 1:
			if _, err := pl.seed(); err != nil {
				return nil, err
			}
		}
	}
	if s.BootstrapDone && s.Seed == "" {
		return nil, fmt.Errorf("selection: state: bootstrap done without a coin")
	}
	if len(s.Phases) > 0 && !s.BootstrapDone {
		return nil, fmt.Errorf("selection: state: phases before the bootstrap")
	}
	for i, ph := range s.Phases {
		if ph.Done != (len(ph.Survivors) > 0) {
			return nil, fmt.Errorf("selection: state: phase %d: done %v with %d survivors", i+1, ph.Done, len(ph.Survivors))
		}
		if i < len(s.Phases)-1 && !ph.Done {
			return nil, fmt.Errorf("selection: state: phase %d unfinished before phase %d", i+1, i+2)
		}
		if !slices.IsSorted(ph.Survivors) {
			return nil, fmt.Errorf("selection: state: phase %d: survivors not ascending", i+1)
		}
		if len(ph.Tiers) != 0 && len(ph.Tiers) != len(ph.Survivors) || slices.ContainsFunc(ph.Tiers, func(t int) bool { return t < 0 }) {
			return nil, fmt.Errorf("selection: state: phase %d: %d tiers for %d survivors", i+1, len(ph.Tiers), len(ph.Survivors))
		}
	}
	return &s, nil
}

// checkShardFloors refuses a record of shard floors (State.ShardFloors)
// with more than maxShardFloors entries, a key that is not a session's 64
// lowercase hex digits, or a floor outside 1..MaxEpoch−1.
func checkShardFloors(f map[string]uint64) error {
	if len(f) > maxShardFloors {
		return fmt.Errorf("selection: state: %d shard floors (at most %d)", len(f), maxShardFloors)
	}
	for k, e := range f {
		if b, err := hex.DecodeString(k); err != nil || len(b) != 32 || hex.EncodeToString(b) != k {
			return fmt.Errorf("selection: state: shard floor of %.70q: not a session's 64 lowercase hex digits", k)
		}
		if e == 0 || e >= MaxEpoch {
			return fmt.Errorf("selection: state: shard floor %d (1..%d)", e, MaxEpoch-1)
		}
	}
	return nil
}

func (s *State) seed() (share.Seed, error) {
	seed, err := decodeHex32(s.Seed)
	if err != nil {
		return seed, fmt.Errorf("selection: state: bad coin seed")
	}
	return seed, nil
}

// summary is what a party tells its peer about its checkpoint, so that both
// resume from the progress they share.
type summary struct {
	SeedHash      string         `json:"seed_hash,omitempty"`
	BootstrapDone bool           `json:"bootstrap_done"`
	BootHash      string         `json:"boot_hash,omitempty"`
	Phases        []phaseSummary `json:"phases,omitempty"`
}

type phaseSummary struct {
	Done     bool   `json:"done"`
	SurvHash string `json:"surv_hash,omitempty"`
	Batches  []int  `json:"batches,omitempty"`
	// Epochs holds the epoch of each of Batches.
	Epochs []uint64 `json:"epochs,omitempty"`
}

func hashInts(v []int) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// summarize describes s (nil: nothing done).
func (s *State) summarize() summary {
	var out summary
	if s == nil || s.Seed == "" {
		return out
	}
	out.SeedHash = seedID(s.Seed)
	out.BootstrapDone = s.BootstrapDone
	if !s.BootstrapDone {
		return out
	}
	out.BootHash = hashInts(s.Bootstrap)
	for _, ph := range s.Phases {
		ps := phaseSummary{Done: ph.Done}
		if ph.Done {
			ps.SurvHash = hashInts(ph.Survivors)
		}
		bs := slices.Clone(ph.Batches)
		slices.SortFunc(bs, func(a, b BatchShares) int { return a.Batch - b.Batch })
		for _, b := range bs {
			ps.Batches = append(ps.Batches, b.Batch)
			ps.Epochs = append(ps.Epochs, b.Epoch)
		}
		out.Phases = append(out.Phases, ps)
	}
	return out
}

// reconcile trims s to the progress both parties share, given both
// summaries (a symmetric rule, so both trim alike): the coin is kept if both
// hold the same one, the bootstrap if both finished it, whole phases while
// both finished them with the same survivors, and of the first other phase
// the batches both finished. Everything else is redone (with fresh
// correlated randomness, see the package comment).
func (s *State) reconcile(mine, peer summary) {
	if mine.SeedHash == "" || mine.SeedHash != peer.SeedHash {
		s.Seed, s.BootstrapDone, s.Bootstrap, s.Phases = "", false, nil, nil
		return
	}
	if !mine.BootstrapDone || !peer.BootstrapDone || mine.BootHash != peer.BootHash {
		s.BootstrapDone, s.Bootstrap, s.Phases = false, nil, nil
		return
	}
	for i := range s.Phases {
		if i >= len(peer.Phases) {
			s.Phases = s.Phases[:i]
			return
		}
		m, p := mine.Phases[i], peer.Phases[i]
		if m.Done && p.Done && m.SurvHash == p.SurvHash {
			continue
		}
		ph := &s.Phases[i]
		ph.Done, ph.Survivors, ph.Tiers = false, nil, nil
		keep := ph.Batches[:0]
		for _, b := range ph.Batches {
			// Kept only if the peer holds the same batch from the same run
			// (the peer's batches are ascending: checkSummary).
			j, found := slices.BinarySearch(p.Batches, b.Batch)
			if found && j < len(p.Epochs) && p.Epochs[j] == b.Epoch {
				keep = append(keep, b)
			}
		}
		ph.Batches = keep
		s.Phases = s.Phases[:i+1]
		return
	}
}

package selection

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection/purchase"
)

// The purchase (package selection/purchase): the data owner commits to
// every candidate of its pool before anything is revealed, the bootstrap's
// points arrive with their openings, and after the selection the data
// owner delivers the purchased candidates with theirs (Deliver), which the
// model owner verifies against the root it recorded (Result.Purchase,
// ReadPurchase, purchase.Verify).
//
// Where it runs in the protocol:
//
//  1. Before the handshake, the data owner with Items builds the Merkle
//     tree of its pool under its salt seed (kept in its state; drawn on
//     the session's first run) and refuses to go on with a pool whose root
//     is not the one the session recorded.
//  2. Its hello announces the root (pool_root), before the coin toss fixes
//     the bootstrap; both parties record it in their state (State.Pool). A
//     model owner that recorded a root refuses a hello with another one
//     (or none): a MismatchError of field "pool_root". A model owner with
//     ItemInput requires one.
//  3. The bootstrap message (the sample's inputs) is followed by the
//     sample's openings (purchase.EncodeOpenings); the model owner checks
//     each against the root before it labels anything (AbortOpening).

// PoolCommitment is the data owner's commitment to its pool, as both
// parties recorded it in a selection.
type PoolCommitment struct {
	// Root is the Merkle root (purchase.Root).
	Root purchase.Root `json:"root"`
	// PoolSize is the number of candidates committed to.
	PoolSize int `json:"pool_size"`
	// Seq is the sequence length the data owner announced (tokens per
	// text; patches + 1 for images): what its candidates are tokenized to.
	Seq int `json:"seq"`
}

// commitPool builds the data owner's commitment to d.Items (nothing
// without Items) under the session's seed, st's or a fresh one, and
// records it in st; a session that recorded another root is refused. It
// runs before anything is said to the peer.
func (r *dataOwnerRun) commitPool(st *State) error {
	d := r.d
	if d.Items == nil {
		if st.Pool != nil {
			return fmt.Errorf("selection: data owner: this session committed to a pool (root %.16s…): pass its candidates (DataOwner.Items) to go on", st.Pool.Root)
		}
		return nil
	}
	if n := d.Items.Len(); n != r.p.PoolSize {
		return withCode(AbortInput, fmt.Errorf("selection: data owner: Items hold %d candidates, Params.PoolSize says %d", n, r.p.PoolSize))
	}
	var seed purchase.Seed
	switch {
	case st.Pool != nil:
		s, err := st.Pool.seed()
		if err != nil {
			return &StateError{Path: r.store.statePath(), Err: err}
		}
		seed = s
	case !r.store.durable():
		d.mu.Lock()
		if d.poolSeed == nil {
			s, err := purchase.NewSeed()
			if err != nil {
				d.mu.Unlock()
				return err
			}
			d.poolSeed = &s
		}
		seed = *d.poolSeed
		d.mu.Unlock()
	default:
		s, err := purchase.NewSeed()
		if err != nil {
			return err
		}
		seed = s
	}
	t, err := purchase.Commit(d.Items, seed)
	if err != nil {
		return withCode(AbortInput, fmt.Errorf("selection: data owner: commit to the pool: %w", err))
	}
	if st.Pool != nil && st.Pool.Root != t.Root() {
		return withCode(AbortInput, fmt.Errorf("selection: data owner: the pool is not the one this session committed to (root %.16s…, the pool now gives %.16s…): resume with the committed pool, or start a new session with a fresh state directory",
			st.Pool.Root, t.Root()))
	}
	st.Pool = &PoolState{Root: t.Root(), Size: t.Len(), Seq: r.seq, Seed: hex.EncodeToString(seed[:])}
	r.tree = t
	r.logf().Info("selection: committed to the pool", "candidates", t.Len(), "root", t.Root().String())
	return nil
}

// recordCommitment is the model owner's side of step 2: it checks the data
// owner's announced root against the one it recorded (or requires one) and
// records it.
func (r *runner) recordCommitment(peer hello) error {
	if r.party != 0 {
		return nil
	}
	var root purchase.Root
	if peer.PoolRoot != "" {
		var err error
		if root, err = purchase.ParseRoot(peer.PoolRoot); err != nil {
			return withCode(AbortProtocol, fmt.Errorf("selection: handshake: the data owner's pool root: %w", err))
		}
	}
	switch rec := r.st.Pool; {
	case rec != nil && root != rec.Root:
		me := HashMismatch("pool_root", rec.Root.String(), peer.PoolRoot)
		me.Hint = "the data owner committed to another pool in this session than the one it announces now: it must resume with the pool it committed to (and its state directory), or both parties start a new session"
		return me
	case rec == nil && peer.PoolRoot == "" && r.requireCommitment:
		return &MismatchError{Field: "pool_root", Local: "(required)", Peer: "(none)",
			Hint: "this model owner buys only from a data owner that commits to its pool (selection.DataOwner.Items; the dataowner binary always does)"}
	case rec == nil && peer.PoolRoot != "":
		r.st.Pool = &PoolState{Root: root, Size: r.p.PoolSize, Seq: peer.Seq}
	}
	return nil
}

// commitment is the recorded commitment as a Result shows it.
func (r *runner) commitment() *PoolCommitment {
	if r.st.Pool == nil {
		return nil
	}
	return &PoolCommitment{Root: r.st.Pool.Root, PoolSize: r.st.Pool.Size, Seq: r.st.Pool.Seq}
}

// sendOpenings sends the openings of the bootstrap sample idx (step 3).
func (r *dataOwnerRun) sendOpenings(ctx context.Context, idx []int) (int64, error) {
	if r.tree == nil {
		return 0, nil
	}
	ops := make([]purchase.Opening, len(idx))
	for k, i := range idx {
		op, err := r.tree.Open(i)
		if err != nil {
			return 0, fmt.Errorf("selection: bootstrap: %w", err)
		}
		ops[k] = op
	}
	b := purchase.EncodeOpenings(ops)
	if err := r.ctrl.SendBytes(ctx, b); err != nil {
		return 0, fmt.Errorf("selection: bootstrap: send the openings: %w", err)
	}
	return int64(len(b)), nil
}

// maxBootstrapOpenings bounds the bootstrap's openings message whatever
// the items' size.
const maxBootstrapOpenings = 1 << 30

// receiveOpenings is the model owner's side of step 3: it receives the
// openings of the sample idx, at most the size their count, the pool and
// the model's input allow, checks each against the recorded root, and
// returns the inputs to label: boot, checked against those the opened
// candidates give when ItemInput is set (and those inputs when the data
// owner sent none).
func (d *modelOwnerRun) receiveOpenings(ctx context.Context, idx []int, boot model.Input) (model.Input, error) {
	rec := d.st.Pool
	if rec == nil {
		return boot, nil
	}
	maxItem := purchase.MaxItemBytes
	if cfg := d.modelConfig(); cfg != nil && cfg.Family == model.ViT {
		maxItem = min(maxItem, bootstrapWidth(cfg))
	}
	lim := min(purchase.OpeningsBound(len(idx), d.p.PoolSize, maxItem), maxBootstrapOpenings)
	b, err := d.ctrl.RecvBytes(ctx, int(lim))
	if err != nil {
		return boot, fmt.Errorf("selection: bootstrap: receive the openings: %w", err)
	}
	ops, err := purchase.DecodeOpenings(b, idx, d.p.PoolSize, maxItem)
	if err != nil {
		return boot, withCode(AbortProtocol, fmt.Errorf("selection: bootstrap: %w", err))
	}
	items := make([][]byte, len(ops))
	for k, op := range ops {
		if err := purchase.VerifyOpening(rec.Root, d.p.PoolSize, op); err != nil {
			return boot, withCode(AbortOpening, fmt.Errorf("selection: bootstrap point %d (candidate %d): %w", k, op.Index, err))
		}
		items[k] = op.Item
	}
	d.openingBytes = int64(len(b))
	if d.m.ItemInput == nil || len(idx) == 0 {
		return boot, nil
	}
	in, err := d.m.ItemInput(items, rec.Seq)
	if err != nil {
		return boot, withCode(AbortOpening, fmt.Errorf("selection: bootstrap: the committed candidates give no input: %w", err))
	}
	if in.Len() != len(idx) {
		return boot, withCode(AbortOpening, fmt.Errorf("selection: bootstrap: %d inputs from %d committed candidates", in.Len(), len(idx)))
	}
	if boot.Len() > 0 && !sameInput(boot, in) {
		return boot, withCode(AbortOpening, fmt.Errorf("selection: bootstrap: the inputs sent are not those of the committed candidates"))
	}
	return in, nil
}

// sameInput reports whether a and b hold the same inputs (pixels compared
// bit for bit).
func sameInput(a, b model.Input) bool {
	rows := func(x, y [][]int) bool { return slices.EqualFunc(x, y, slices.Equal[[]int]) }
	return rows(a.IDs, b.IDs) && rows(a.TypeIDs, b.TypeIDs) && rows(a.Mask, b.Mask) &&
		slices.EqualFunc(a.Pixels, b.Pixels, func(x, y []float64) bool {
			return slices.EqualFunc(x, y, func(u, v float64) bool { return math.Float64bits(u) == math.Float64bits(v) })
		})
}

// Purchase returns what a delivery of the selection r must hold, the
// bootstrap and the selected candidates against the recorded commitment
// (purchase.Expect), and what each phase revealed of the order of its
// survivors (for purchase.Audit). A result without a commitment has no
// purchase to verify.
func (r *Result) Purchase() (purchase.Expect, []purchase.PhaseOrder, error) {
	if r.Commitment == nil {
		return purchase.Expect{}, nil, fmt.Errorf("selection: the selection recorded no commitment to the pool (the data owner ran without Items)")
	}
	idx := append(slices.Clone(r.Bootstrap), r.Selected...)
	slices.Sort(idx)
	want := purchase.Expect{Root: r.Commitment.Root, PoolSize: r.Commitment.PoolSize, Indices: slices.Compact(idx)}
	var orders []purchase.PhaseOrder
	for i, s := range r.Survivors {
		var t []int
		if i < len(r.Tiers) {
			t = r.Tiers[i]
		}
		if len(t) != len(s) {
			return want, nil, fmt.Errorf("selection: phase %d recorded no order of its survivors (a checkpoint from before tiers were kept)", i+1)
		}
		orders = append(orders, purchase.PhaseOrder{Survivors: s, Tiers: t})
	}
	return want, orders, nil
}

// stateResult is the purchase-related part of a finished checkpoint as a
// Result: the bootstrap, each phase's survivors and tiers, the selected
// candidates and the commitment.
func stateResult(st *State) (*Result, error) {
	if !st.BootstrapDone || len(st.Phases) == 0 || !st.Phases[len(st.Phases)-1].Done {
		return nil, fmt.Errorf("selection: the checkpoint holds no finished selection")
	}
	res := &Result{Bootstrap: slices.Clone(st.Bootstrap), Epoch: st.Epoch}
	for _, ph := range st.Phases {
		if !ph.Done {
			return nil, fmt.Errorf("selection: the checkpoint holds no finished selection")
		}
		res.Survivors = append(res.Survivors, slices.Clone(ph.Survivors))
		res.Tiers = append(res.Tiers, slices.Clone(ph.Tiers))
	}
	res.Selected = slices.Clone(res.Survivors[len(res.Survivors)-1])
	if st.Pool != nil {
		res.Commitment = &PoolCommitment{Root: st.Pool.Root, PoolSize: st.Pool.Size, Seq: st.Pool.Seq}
	}
	return res, nil
}

// ReadPurchase reads party's finished selection from its checkpoint in
// dir: the bootstrap, the survivors and tiers of each phase, the selected
// candidates and the recorded commitment, as a Result without statistics.
// The model owner verifies a delivery against it (Result.Purchase).
func ReadPurchase(dir string, party int) (*Result, error) {
	st, err := readState(dir, party)
	if err != nil {
		return nil, err
	}
	return stateResult(st)
}

// readState reads party's state file in dir (no batch files).
func readState(dir string, party int) (*State, error) {
	path := StateFile(dir, party)
	b, err := atomicfile.ReadLimited(path, maxStateFile)
	if err != nil {
		return nil, &StateError{Path: path, Err: err}
	}
	st, err := DecodeState(b)
	if err != nil {
		return nil, &StateError{Path: path, Err: err}
	}
	if st.Party != party {
		return nil, &StateError{Path: path, Err: fmt.Errorf("belongs to party %d", st.Party)}
	}
	return st, nil
}

// Deliver writes the bundle of the purchased candidates (the bootstrap and
// the selected ones, ascending) of the data owner's finished selection to
// w: the header and each candidate's opening, streamed (package
// selection/purchase documents the format), items described by f. It
// reads the selection and the commitment's seed from StateDir (or, without
// one, from this DataOwner's last finished Run), rebuilds the commitment
// from Items and refuses to deliver if it no longer gives the recorded
// root (the pool changed).
func (d *DataOwner) Deliver(w io.Writer, f purchase.Format) error {
	if d.Items == nil {
		return fmt.Errorf("selection: deliver: no Items")
	}
	var st *State
	if d.StateDir != "" {
		var err error
		if st, err = readState(d.StateDir, 1); err != nil {
			return err
		}
	} else {
		d.mu.Lock()
		st = d.bought
		d.mu.Unlock()
		if st == nil {
			return fmt.Errorf("selection: deliver: this data owner has no finished selection (and no StateDir)")
		}
	}
	return deliver(w, st, d.Items, f)
}

// deliver writes the bundle of the finished selection st of the pool items.
func deliver(w io.Writer, st *State, items purchase.Items, f purchase.Format) error {
	if st.Pool == nil {
		return fmt.Errorf("selection: deliver: the selection recorded no commitment to the pool")
	}
	if st.Pool.Size != items.Len() {
		return fmt.Errorf("selection: deliver: the pool holds %d candidates, the commitment %d", items.Len(), st.Pool.Size)
	}
	res, err := stateResult(st)
	if err != nil {
		return fmt.Errorf("selection: deliver: %w", err)
	}
	seed, err := st.Pool.seed()
	if err != nil {
		return err
	}
	t, err := purchase.Commit(items, seed)
	if err != nil {
		return fmt.Errorf("selection: deliver: %w", err)
	}
	if t.Root() != st.Pool.Root {
		return fmt.Errorf("selection: deliver: the pool is not the one committed to (root %.16s…, the pool now gives %.16s…)", st.Pool.Root, t.Root())
	}
	want, _, err := res.Purchase()
	if err != nil {
		return err
	}
	if err := purchase.WriteBundle(w, t, want.Indices, f); err != nil {
		return fmt.Errorf("selection: deliver: %w", err)
	}
	return nil
}

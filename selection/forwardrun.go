package selection

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

// ForwardRun is one party's side of a phase's secure forward on some of
// its candidates, run with the peer over a connection of its own as a
// session of its own: its own dealer session, state directory and epochs.
// It is what a sharded selection's worker pair runs for each job
// (selection/shard's Worker), and it keeps a run's guarantees: an epoch
// counted and persisted before anything is said, never at or below Floor;
// the provider wrapped in persistent high-water marks (in StateDir) and
// bound to Session; nothing drawn at the epoch both sides agreed on
// before ForwardHooks.Reached has recorded it; the model owner's side
// sharing the phase's weights with its own masks; the batches on the
// phase's lanes (Params.PhaseWorkers), each finished batch checkpointed, so that a run
// again with the same StateDir resumes without redoing a batch or drawing
// a word twice; a failure told to the peer in public words (an abort, as
// a Run's) before the connection closes.
type ForwardRun struct {
	// Party is 0 (model owner) or 1 (data owner).
	Party int
	// Params are the selection's public parameters (with the
	// coordinator's own Pipeline and MemoryBudget choices).
	Params Params
	// Session is the run's dealer session, to which the provider is bound;
	// the checkpoint in StateDir is this session's.
	Session beaver.SessionID
	// Phase is the phase, 0-based; Arch its public proxy architecture.
	Phase int
	Arch  secure.Arch
	// Candidates are the run's pool indices, ascending: its batch b is
	// Candidates[b·size, (b+1)·size), size the phase's
	// (Params.PhaseBatchSize).
	Candidates []int
	// EmbeddingHash is the hash of the public embedding tables the
	// selection's coordinators agreed on: the model owner's side takes it
	// as its own, the data owner's refuses to run unless its own
	// embedding hashes to it.
	EmbeddingHash string
	// Proxy is the model owner's proxy of the phase (proxy.Proxy.Marshal);
	// empty with Evaluator.
	Proxy []byte
	// Floor is the highest epoch at which this party may have drawn
	// correlated randomness in the session before (in any life, whatever
	// StateDir holds): the run counts its epoch above it.
	Floor uint64

	// Evaluator, if set, replaces the secure forward (tests).
	Evaluator Evaluator
	// Pool and Embedding are the data owner's (its own copy of the pool,
	// PoolSize candidates, and the public embedding model), as in
	// DataOwner; OwnEmbeddingHash, if set, replaces the hash of
	// Embedding's tables (as DataOwner.EmbeddingHash does).
	Pool             model.Input
	Embedding        *model.Model
	OwnEmbeddingHash string
	// StateDir holds the run's checkpoint and high-water marks (required).
	StateDir string
	// Logger receives progress (slog.Default() when nil).
	Logger *slog.Logger
}

// ForwardHooks are what the caller of ForwardRun.Run adds to the run: its
// handshake in the clear, the record of the epoch agreed on, and the
// close. All three are required.
type ForwardHooks struct {
	// Hello exchanges the two sides' hellos (exchange) before anything
	// secret: it sends this side's, which carries mine, receives the
	// peer's (at most maxBytes), compares what both must agree on, and
	// returns the peer's terms. The run then bounds the peer's epoch and
	// resume summary, keeps the batches both sides finished in the same
	// epoch, and adopts the larger epoch.
	Hello func(ctx context.Context, mine ForwardTerms, maxBytes int, exchange Exchange) (ForwardTerms, error)
	// Reached is called with the epoch the two sides agreed on, before
	// the run draws anything at it: it must record the epoch durably (the
	// Floor of the session's next runs); the run draws nothing unless it
	// returns nil.
	Reached func(ctx context.Context, epoch uint64) error
	// Finish is called once every batch is done, before the run is marked
	// finished in StateDir (ForwardRun.Finished): both sides say they are
	// done (exchange), so that neither takes the other's closing for a
	// failure. Its context is not cancelled by the connection's failure
	// (what the peer sent before it closed is still delivered): bound it.
	Finish func(ctx context.Context, exchange Exchange) error
}

// Exchange sends v as JSON on a ForwardRun's clear control stream (the
// connection's StreamControl, uncompressed) while it receives the peer's
// message, at most max bytes, into out (encoding/json): a message that
// does not decode is an AbortProtocol error, one over max an AbortLimit
// one.
type Exchange func(ctx context.Context, v, out any, max int) error

// ForwardTerms are what a side of a ForwardRun announces in its hello: the
// hash of the dealer session (SessionHash), of its view of the public
// parameters (ViewHash), its epoch, and a summary of its checkpoint
// (Resume, JSON: the batches it holds and their epochs).
type ForwardTerms struct {
	SessionHash string
	ViewHash    string
	Epoch       uint64
	Resume      json.RawMessage
}

// ForwardResult is what a ForwardRun.Run returns, also when it fails: the
// run's batches once it finished, and its figures so far.
type ForwardResult struct {
	// Batches are every batch of the run (numbered from 0, ascending),
	// each with the epoch that computed it; nil unless the run finished.
	Batches []BatchShares
	// Online is this side's traffic on the connection's online streams:
	// the clear control stream, the control session and the batch lanes
	// (a dealer-free provider's streams excluded).
	Online transport.Stats
	// ForwardRounds is the forward's critical path (the weight sharing
	// plus the largest lane's rounds), once it ran; Resumed counts the
	// batches taken from the checkpoint.
	ForwardRounds int64
	Resumed       int
}

// FinishedFile returns the file of a ForwardRun's StateDir dir that marks
// party's run finished with the peer (Finished).
func FinishedFile(dir string, party int) string {
	return filepath.Join(dir, fmt.Sprintf("finished-p%d", party))
}

// Run runs f with the peer on conn, drawing correlated randomness from
// prov (this party's provider; Run wraps it in persistent high-water
// marks and binds it to f.Session): it checks f's inputs, then runs the
// batches not yet checkpointed, calling h's hooks in the order ForwardHooks
// describes. When it fails it tells the peer why (an abort, a public
// reason code) and closes conn.
func (f *ForwardRun) Run(ctx context.Context, conn *transport.Conn, prov beaver.Provider, h ForwardHooks) (*ForwardResult, error) {
	out := &ForwardResult{}
	switch {
	case f == nil || h.Hello == nil || h.Reached == nil || h.Finish == nil:
		return out, fmt.Errorf("selection: forward run: nil run or hook")
	case f.StateDir == "":
		return out, fmt.Errorf("selection: forward run: a StateDir is required (a run again must know which correlated randomness it drew)")
	}
	r := &forwardRun{f: f, h: h, runner: newRunner(f.Party, f.Params, conn, prov, f.Logger, nil, &checkpointStore{dir: f.StateDir, party: f.Party})}
	if conn != nil {
		defer func() {
			out.Online = conn.Stream(StreamControl).Stats()
			if r.sched != nil { // its epoch began
				out.Online = out.Online.Add(r.sched.Online())
			}
			out.ForwardRounds, out.Resumed = r.ps.ForwardRounds, r.ps.Resumed
		}()
	}
	_, err := guard(ctx, r.runner, r.check, func(ctx context.Context) (*Result, error) {
		var err error
		out.Batches, err = r.run(ctx)
		return &Result{}, err
	})
	return out, err
}

// Finished returns the batches of f's run (numbered from 0, ascending) if
// it was finished with the peer in f.StateDir (both sides' Finish
// returned: each then holds every batch, of the same epochs), and nil if
// not. A marker of another session, or a checkpoint that is not the
// session's, is a *StateError.
func (f *ForwardRun) Finished() ([]BatchShares, error) {
	store := &checkpointStore{dir: f.StateDir, party: f.Party}
	done, err := store.finished(f.Session)
	if err != nil || !done {
		return nil, err
	}
	r := newRunner(f.Party, f.Params, nil, nil, f.Logger, nil, store)
	r.embHash = f.EmbeddingHash // the side ran with its coordinators' hash
	st, err := r.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil || st.Seed != hex.EncodeToString(f.Session[:]) || len(st.Phases) != 1 {
		return nil, &StateError{Path: store.statePath(), Err: fmt.Errorf("the job is marked finished (%s) but this is not its checkpoint", store.finishedPath())}
	}
	return sortedBatches(st.Phases[0].Batches), nil
}

// sortedBatches is a copy of bs, ascending by batch.
func sortedBatches(bs []BatchShares) []BatchShares {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b BatchShares) int { return a.Batch - b.Batch })
	return bs
}

// forwardRun is one ForwardRun.Run.
type forwardRun struct {
	*runner
	f    *ForwardRun
	h    ForwardHooks
	eval Evaluator
	// ps are the run's figures (In, Batches, Resumed, ForwardRounds).
	ps PhaseStats
}

// check checks the run's inputs against what the party holds and prepares
// its side of the forward.
func (r *forwardRun) check() error {
	f := r.f
	if err := r.checkProvider(); err != nil {
		return err
	}
	if f.Party == 0 {
		r.embHash = f.EmbeddingHash
		if f.Evaluator != nil {
			r.eval = f.Evaluator
			return nil
		}
		if len(f.Proxy) == 0 {
			return withCode(AbortInput, fmt.Errorf("selection: worker: the job carries no proxy"))
		}
		px, err := proxy.Unmarshal(f.Proxy)
		if err != nil {
			return withCode(AbortInput, fmt.Errorf("selection: worker: %w", err))
		}
		if err := checkProxy(f.Phase, px, r.p.Schedule[f.Phase]); err != nil {
			return withCode(AbortInput, err)
		}
		proxies := make([]*proxy.Proxy, len(r.p.Schedule))
		proxies[f.Phase] = px
		r.eval = &modelEvaluator{proxies: proxies}
		return nil
	}
	d := &dataOwnerRun{runner: r.runner, d: &DataOwner{Params: f.Params, Pool: f.Pool, Embedding: f.Embedding, Evaluator: f.Evaluator, EmbeddingHash: f.OwnEmbeddingHash}}
	if err := d.check(); err != nil {
		return err
	}
	if r.embHash == "" && f.Embedding == nil {
		r.embHash = f.EmbeddingHash
	}
	if r.embHash != f.EmbeddingHash {
		l, p := shortHashes(r.embHash, f.EmbeddingHash)
		return withCode(AbortInput, fmt.Errorf("selection: worker: its embedding tables (%s) differ from its coordinator's (%s): give the worker the coordinator's checkpoint", l, p))
	}
	if d.archEmb != nil {
		if err := checkArchs([]secure.Arch{f.Arch}, *d.archEmb, r.p.Schedule[f.Phase:f.Phase+1], d.seq); err != nil {
			return withCode(AbortProtocol, err)
		}
	}
	r.eval = d.eval
	return nil
}

// run runs the batches not yet checkpointed and returns every batch of the
// run.
func (r *forwardRun) run(ctx context.Context) ([]BatchShares, error) {
	hsCtx := ctx
	ctx, cancel := r.watchConn(ctx)
	defer cancel()
	f := r.f
	sess := hex.EncodeToString(f.Session[:])
	st, err := r.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = r.newState()
		st.Seed, st.BootstrapDone, st.Phases = sess, true, []PhaseState{{}}
	} else if st.Seed != sess || !st.BootstrapDone || len(st.Phases) != 1 || st.Phases[0].Done {
		return nil, &StateError{Path: r.store.statePath(), Err: fmt.Errorf("not a checkpoint of this shard job")}
	}
	if st.Epoch < f.Floor {
		// An empty directory (a replaced pod, a lost volume, a state
		// deleted) or an older one: the session's earlier lives drew up
		// to the floor its caller recorded.
		r.logf().Warn("selection: worker: the job's checkpoint is behind its coordinator's record; it runs above it", "party", r.party,
			"phase", f.Phase+1, "state_epoch", st.Epoch, "floor", f.Floor)
		st.Epoch = f.Floor
	}
	if err := r.beginEpoch(st); err != nil {
		return nil, err
	}
	if err := r.agree(hsCtx); err != nil {
		return nil, err
	}
	// Nothing is drawn at the agreed epoch before the caller has recorded
	// it: the floor of the session's next runs.
	if r.st.Epoch <= f.Floor {
		return nil, withCode(AbortResume, fmt.Errorf("selection: worker: epoch %d is not above the job's floor %d; refused", r.st.Epoch, f.Floor))
	}
	if err := r.h.Reached(ctx, r.st.Epoch); err != nil {
		return nil, err
	}
	if err := r.sched.Start(ctx, r.st.Epoch); err != nil {
		return nil, err
	}
	if r.party == 0 {
		// A networked dealer serves the session no more than its batches
		// need (as the model owner's Run announces the selection's
		// DealerBudget): the phase's preparation and the run's batches,
		// rehearsed, times DealerBudgetFactor.
		r.dealerBudget = r.budget
		if err := r.announceBudget(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.sched.Bind(ctx, f.Session); err != nil {
		return nil, err
	}
	cand := f.Candidates
	nb := r.p.phaseBatches(f.Phase, len(cand))
	r.ps = PhaseStats{In: len(cand), Batches: nb}
	ps := &r.ps
	vals, pending, err := r.resumed(0, r.p.PhaseBatchSize(f.Phase), cand, nb, ps)
	if err != nil {
		return nil, err
	}
	if len(pending) > 0 {
		if err := r.forwardPending(ctx, 0, f.Phase, r.eval, f.Arch, cand, pending, vals, ps); err != nil {
			return nil, err
		}
	}
	if err := r.h.Finish(hsCtx, r.exchange); err != nil {
		return nil, err
	}
	r.logf().Info("selection: worker: shard done", "party", r.party, "phase", f.Phase+1, "batches", nb, "resumed", ps.Resumed, "epoch", r.st.Epoch)
	// The peer holds every batch too: the run is not repeated with it
	// (Finished).
	if err := r.store.markFinished(f.Session); err != nil {
		return nil, err
	}
	r.stMu.Lock()
	defer r.stMu.Unlock()
	return sortedBatches(r.st.Phases[0].Batches), nil
}

// exchange is the run's Exchange on its clear control stream.
func (r *forwardRun) exchange(ctx context.Context, v, out any, max int) error {
	return exchangeJSON(ctx, r.ctrl, v, out, max)
}

// budget is the dealer work of the run: the phase's preparation and the
// run's batches (phaseWork, rehearsed with the party's evaluator), times
// DealerBudgetFactor.
func (r *forwardRun) budget(ctx context.Context) (uint64, error) {
	prep, batch, err := phaseWork(ctx, r.p, r.eval, r.f.Phase, r.f.Arch)
	if err != nil {
		return 0, err
	}
	nb := uint64(r.p.phaseBatches(r.f.Phase, len(r.f.Candidates)))
	return mulSat(addSat(prep, mulSat(nb, batch)), DealerBudgetFactor), nil
}

// agree runs the Hello hook on StreamControl, bounds the peer's epoch and
// checkpoint summary, then keeps the batches both sides finished in the
// same epoch and adopts the larger epoch (as a run's handshake does).
func (r *forwardRun) agree(hsCtx context.Context) error {
	r.ctrl = r.conn.Stream(StreamControl)
	sum := r.st.summarize()
	resume, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	mine := ForwardTerms{SessionHash: seedID(hex.EncodeToString(r.f.Session[:])), ViewHash: r.viewHash(), Epoch: r.st.Epoch, Resume: resume}
	nb := r.p.phaseBatches(r.f.Phase, len(r.f.Candidates))
	peer, err := r.h.Hello(hsCtx, mine, helloBase+nb*2*maxJSONNumber, r.exchange)
	if err != nil {
		return err
	}
	if err := checkEpoch(mine.Epoch, peer.Epoch); err != nil {
		return err
	}
	var peerSum summary
	if len(peer.Resume) > 0 {
		if err := json.Unmarshal(peer.Resume, &peerSum); err != nil {
			return withCode(AbortProtocol, fmt.Errorf("selection: worker: the peer's resume summary: %w; refused", err))
		}
	}
	if err := checkPairSummary(peerSum, sum.SeedHash, nb); err != nil {
		return withCode(AbortProtocol, fmt.Errorf("selection: worker: the peer's resume summary: %w; refused", err))
	}
	if peer.Epoch > r.st.Epoch {
		r.st.Epoch = peer.Epoch
	}
	r.st.reconcile(sum, peerSum)
	if err := r.checkpoint(); err != nil {
		return err
	}
	if err := r.store.prune(r.st); err != nil {
		return err
	}
	r.logf().Info("selection: worker: pair handshake done", "party", r.party, "phase", r.f.Phase+1, "epoch", r.st.Epoch)
	return nil
}

// checkPairSummary refuses a side's resume summary that no checkpoint of
// a ForwardRun describes: another session, more than one phase, a
// finished phase, batch numbers not ascending and distinct below nb, or
// epochs that do not pair up with them or lie outside 1..MaxEpoch−1.
func checkPairSummary(s summary, seedHash string, nb int) error {
	if s.SeedHash != seedHash || !s.BootstrapDone && len(s.Phases) > 0 {
		return fmt.Errorf("of another job")
	}
	if len(s.Phases) > 1 || len(s.Phases) == 1 && s.Phases[0].Done {
		return fmt.Errorf("%d phases", len(s.Phases))
	}
	for _, ph := range s.Phases {
		if len(ph.Batches) > nb || len(ph.Epochs) != len(ph.Batches) {
			return fmt.Errorf("%d batches with %d epochs (at most %d batches)", len(ph.Batches), len(ph.Epochs), nb)
		}
		for i, b := range ph.Batches {
			if b < 0 || b >= nb || i > 0 && b <= ph.Batches[i-1] {
				return fmt.Errorf("batch numbers not ascending and distinct in 0..%d", nb-1)
			}
		}
		for _, e := range ph.Epochs {
			if e == 0 || e >= MaxEpoch {
				return fmt.Errorf("batch of epoch %d", e)
			}
		}
	}
	return nil
}

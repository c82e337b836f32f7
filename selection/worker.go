package selection

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

// Worker is one party's worker of a sharded selection: it runs the jobs
// its coordinator hands it (Serve, or RunJob), each the secure forward of
// one shard of a phase with the other party's worker of the same index,
// and returns its party's shares of the shard's entropies to its
// coordinator. Everything else of the selection stays with the
// coordinators (ModelOwner.Shards, DataOwner.Shards).
//
// A job runs like a selection's phase: the pair connection (PairFunc) and
// a handshake in the clear (pairHello: version, party, the hash of the
// shard's dealer session, phase, shard k of K, the hash of the shard's
// candidates, of the architecture and of the public parameters, the epoch
// and a summary of the checkpoint; any difference is a *MismatchError and
// the peer is told in public words, as in a run), an epoch counted and
// persisted before anything is said, the provider wrapped in persistent
// high-water marks and bound to the shard's session, the model owner's
// worker sharing the phase's weights with its own masks on the pair's
// control session, the shard's batches on Params.Workers lanes, each
// finished batch checkpointed. Each job keeps its state in its own
// subdirectory of StateDir (job-<first 16 hex digits of its session>),
// so a restarted worker resumes a shard without redoing a finished batch
// and never draws a word it drew before. That holds without the directory
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
// marked so in its directory: sent
// again (its coordinator restarted, or this worker died, before the
// coordinator had the result), it is answered from the checkpoint without
// the peer, which does not run it again.
type Worker struct {
	// Party is 0 (model owner's worker) or 1 (data owner's).
	Party int
	// Shard is this worker's index k (0..K−1), announced to its
	// coordinator; a job of another index is refused.
	Shard int
	// Pool and Embedding are the data owner's (its own copy of the pool,
	// PoolSize candidates, and the public embedding model), as in
	// DataOwner; the model owner's worker takes its proxies from the jobs.
	Pool      model.Input
	Embedding *model.Model
	// EmbeddingHash, if set, replaces the hash of Embedding's tables (as
	// in DataOwner); a job of another embedding hash is refused.
	EmbeddingHash string
	// Evaluator, if set, replaces the secure forward (tests).
	Evaluator Evaluator
	// StateDir holds the worker's checkpoints (required: without it a
	// retried job could not know which words it drew).
	StateDir string
	// Logger receives progress (slog.Default() when nil).
	Logger *slog.Logger
	// Retries is how often a job whose pair failed is tried again
	// (DefaultPairRetries when 0; negative: never).
	Retries int
	// Backoff is the first pause before a retry (200 ms when 0).
	Backoff time.Duration

	// forgeEpoch (tests: a lying worker) replaces the epoch each attempt
	// counts, as runner.forgeEpoch.
	forgeEpoch func(uint64) uint64
}

// pairFinishTimeout bounds the wait for the peer worker's "done".
const pairFinishTimeout = 30 * time.Second

// DefaultPairRetries is Worker.Retries when 0.
const DefaultPairRetries = 20

// PairFunc establishes a job's pair connection to the other party's
// worker of the same shard index, and this worker's provider of
// correlated randomness for it (a networked dealer's client, beaver.Connect,
// or ot.NewProvider on the pair connection; RunJob binds it to the job's
// session). It is called again for every retry; the connection is closed
// after each attempt.
type PairFunc func(ctx context.Context, job *Job) (*transport.Conn, beaver.Provider, error)

// RunJob runs job with the other party's worker (see Worker) and returns
// this party's shares of the shard's entropies, with its figures for the
// job (ShardResult.Stats: every attempt's traffic on the pair link and
// with its provider, forward rounds, wall time), which its coordinator
// adds to the phase's PhaseStats.
func (w *Worker) RunJob(ctx context.Context, job *Job, pair PairFunc) (*ShardResult, error) {
	switch {
	case w == nil || job == nil:
		return nil, fmt.Errorf("selection: worker: nil worker or job")
	case job.Party != w.Party || job.Shard != w.Shard:
		return nil, withCode(AbortProtocol, fmt.Errorf("selection: worker %d of party %d given a job for worker %d of party %d", w.Shard, w.Party, job.Shard, job.Party))
	case w.StateDir == "":
		return nil, fmt.Errorf("selection: worker: a StateDir is required (a retried job must know which correlated randomness it drew)")
	case pair == nil:
		return nil, fmt.Errorf("selection: worker: no PairFunc")
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
	var st ShardStats
	for attempt := 0; ; attempt++ {
		res, err := w.attempt(ctx, job, pair, &st)
		if err == nil {
			st.Seconds = time.Since(start).Seconds()
			res.Stats = st.bounded()
			w.logf().Info("selection: worker: job figures", "party", w.Party, "phase", job.Phase+1, "shard", job.Shard, "attempts", st.Attempts,
				"forward_rounds", st.ForwardRounds, "bytes_sent", st.BytesSent, "bytes_recv", st.BytesRecv, "dealer_bytes", st.DealerBytes, "seconds", st.Seconds)
			return res, nil
		}
		if ctx.Err() != nil || !retryable(err) || attempt >= retries {
			return nil, err
		}
		w.logf().Warn("selection: worker: pair failed, retrying", "party", w.Party, "shard", w.Shard, "phase", job.Phase+1, "attempt", attempt+1, "err", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// finished returns job's result from the worker's checkpoint if the job
// was finished with the peer worker before (both said "done", each then
// holding every batch of the shard from the same epochs: the job's
// finished marker), and nil if not. A job sent again after it finished
// (the worker died, or its coordinator restarted, before the coordinator
// had its result, while the peer's coordinator had the peer's) is so
// answered without the peer worker, which does not run the job again:
// waiting for it would hold the phase until the retries ran out.
func (w *Worker) finished(job *Job) (*ShardResult, error) {
	store := &checkpointStore{dir: JobDir(w.StateDir, job), party: w.Party}
	done, err := store.finished(job.Session)
	if err != nil || !done {
		return nil, err
	}
	r := newRunner(w.Party, job.Params, nil, nil, w.Logger, nil, store)
	r.embHash = job.EmbeddingHash // a worker runs a job only with its coordinator's
	st, err := r.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil || st.Seed != hex.EncodeToString(job.Session[:]) || len(st.Phases) != 1 {
		return nil, &StateError{Path: store.statePath(), Err: fmt.Errorf("the job is marked finished (%s) but this is not its checkpoint", store.finishedPath())}
	}
	out := jobResult(st.Phases[0].Batches, job.FirstBatch)
	out.Stats.Resumed = len(out.Batches)
	res, err := decodeResult(encodeResult(out), job)
	if err != nil {
		return nil, &StateError{Path: store.statePath(), Err: fmt.Errorf("the job is marked finished (%s) but its batches do not fit it: %w", store.finishedPath(), err)}
	}
	w.logf().Info("selection: worker: the job was finished with the peer worker before; its result is the checkpoint's", "party", w.Party,
		"phase", job.Phase+1, "shard", job.Shard, "batches", len(res.Batches))
	return res, nil
}

// jobResult is a job's result from its batches (numbered within the job),
// numbered within the phase (from first), ascending.
func jobResult(bs []BatchShares, first int) *ShardResult {
	bs = slices.Clone(bs)
	slices.SortFunc(bs, func(a, b BatchShares) int { return a.Batch - b.Batch })
	out := &ShardResult{Batches: make([]BatchShares, len(bs))}
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
	var pa *PeerAbortError
	if errors.As(err, &pa) {
		return pa.Code == AbortInternal || pa.Code == AbortCancelled || pa.Code == AbortProtocol || pa.Code == AbortLimit
	}
	switch code, _ := classifyAbort(err); code {
	case AbortMismatch, AbortResume, AbortState, AbortStateParams, AbortInput, AbortBootstrapRevealed:
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

// JobDir is the state directory of job under a worker's StateDir dir.
func JobDir(dir string, job *Job) string {
	return filepath.Join(dir, "job-"+hex.EncodeToString(job.Session[:8]))
}

// attempt runs job once on a new pair connection, adding its figures to
// st (whether it succeeds or not).
func (w *Worker) attempt(ctx context.Context, job *Job, pair PairFunc, st *ShardStats) (*ShardResult, error) {
	st.Attempts++
	conn, prov, err := pair(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("selection: worker: pair connection: %w", err)
	}
	defer conn.Close()
	r := newRunner(w.Party, job.Params, conn, prov, w.Logger, nil, &checkpointStore{dir: JobDir(w.StateDir, job), party: w.Party})
	r.forgeEpoch = w.forgeEpoch
	wr := &workerRun{runner: r, w: w, job: job}
	var d0 beaver.DealerStats
	if prov != nil { // nil: refused by check
		d0 = prov.Stats()
	}
	defer func() {
		// The attempt's traffic: the pair's online streams (the scheduler's
		// exist once its epoch began) and the provider's.
		on := conn.Stream(StreamControl).Stats()
		if r.sched != nil {
			on = on.Add(r.sched.Online())
		}
		d1 := d0
		if prov != nil {
			d1 = prov.Stats()
		}
		st.BytesSent += on.BytesSent
		st.BytesRecv += on.BytesRecv
		st.DealerBytes += d1.BytesRecv - d0.BytesRecv + d1.BytesSent - d0.BytesSent
		st.ForwardRounds += wr.ps.ForwardRounds
		st.Resumed = wr.ps.Resumed
	}()
	var out *ShardResult
	_, err = guard(ctx, r, wr.check, func(ctx context.Context) (*Result, error) {
		var err error
		out, err = wr.run(ctx)
		return &Result{}, err
	})
	return out, err
}

// workerRun is one attempt of a job.
type workerRun struct {
	*runner
	w    *Worker
	job  *Job
	eval Evaluator
	// ps are the attempt's figures (In, Batches, Resumed, ForwardRounds).
	ps PhaseStats
}

// check checks the job against what the worker holds and prepares its
// side of the forward.
func (r *workerRun) check() error {
	j, w := r.job, r.w
	if err := r.checkProvider(); err != nil {
		return err
	}
	if j.Party == 0 {
		r.embHash = j.EmbeddingHash
		if w.Evaluator != nil {
			r.eval = w.Evaluator
			return nil
		}
		if len(j.Proxy) == 0 {
			return withCode(AbortInput, fmt.Errorf("selection: worker: the job carries no proxy"))
		}
		px, err := proxy.Unmarshal(j.Proxy)
		if err != nil {
			return withCode(AbortInput, fmt.Errorf("selection: worker: %w", err))
		}
		if err := checkProxy(j.Phase, px, r.p.Schedule[j.Phase]); err != nil {
			return withCode(AbortInput, err)
		}
		proxies := make([]*proxy.Proxy, len(r.p.Schedule))
		proxies[j.Phase] = px
		r.eval = &modelEvaluator{proxies: proxies}
		return nil
	}
	d := &dataOwnerRun{runner: r.runner, d: &DataOwner{Params: j.Params, Pool: w.Pool, Embedding: w.Embedding, Evaluator: w.Evaluator, EmbeddingHash: w.EmbeddingHash}}
	if err := d.check(); err != nil {
		return err
	}
	if r.embHash == "" && w.Embedding == nil {
		r.embHash = j.EmbeddingHash
	}
	if r.embHash != j.EmbeddingHash {
		l, p := shortHashes(r.embHash, j.EmbeddingHash)
		return withCode(AbortInput, fmt.Errorf("selection: worker: its embedding tables (%s) differ from its coordinator's (%s): give the worker the coordinator's checkpoint", l, p))
	}
	if d.archEmb != nil {
		if err := checkArchs([]secure.Arch{j.Arch}, *d.archEmb, r.p.Schedule[j.Phase:j.Phase+1], d.seq); err != nil {
			return withCode(AbortProtocol, err)
		}
	}
	r.eval = d.eval
	return nil
}

// run runs the job's batches not yet checkpointed and returns every batch
// of the shard.
func (r *workerRun) run(ctx context.Context) (*ShardResult, error) {
	hsCtx := ctx
	ctx, cancel := r.watchConn(ctx)
	defer cancel()
	j := r.job
	sess := hex.EncodeToString(j.Session[:])
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
	if st.Epoch < j.Floor {
		// An empty directory (a replaced pod, a lost volume, a state
		// deleted) or an older one: the job's earlier lives drew up to
		// the floor its coordinator recorded.
		r.logf().Warn("selection: worker: the job's checkpoint is behind its coordinator's record; it runs above it", "party", r.party,
			"phase", j.Phase+1, "shard", j.Shard, "state_epoch", st.Epoch, "floor", j.Floor)
		st.Epoch = j.Floor
	}
	if err := r.beginEpoch(st); err != nil {
		return nil, err
	}
	if err := r.pairHandshake(hsCtx); err != nil {
		return nil, err
	}
	// Nothing is drawn at the agreed epoch before the coordinator has
	// recorded it: the floor of the job's next lives.
	if r.st.Epoch <= j.Floor {
		return nil, withCode(AbortResume, fmt.Errorf("selection: worker: epoch %d is not above the job's floor %d; refused", r.st.Epoch, j.Floor))
	}
	if err := j.Reached(ctx, r.st.Epoch); err != nil {
		return nil, err
	}
	if err := r.sched.Start(ctx, r.st.Epoch); err != nil {
		return nil, err
	}
	if r.party == 0 {
		// A networked dealer serves the shard's session no more than its
		// batches need (as the model owner's Run announces the selection's
		// DealerBudget): the phase's preparation and the shard's batches,
		// rehearsed, times DealerBudgetFactor.
		r.dealerBudget = r.shardBudget
		if err := r.announceBudget(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.sched.Bind(ctx, j.Session); err != nil {
		return nil, err
	}
	cand := j.Candidates
	nb := r.sched.Batches(len(cand))
	r.ps = PhaseStats{In: len(cand), Batches: nb}
	ps := &r.ps
	vals, pending, err := r.resumed(0, cand, nb, ps)
	if err != nil {
		return nil, err
	}
	if len(pending) > 0 {
		if err := r.forwardPending(ctx, 0, j.Phase, r.eval, j.Arch, cand, pending, vals, ps); err != nil {
			return nil, err
		}
	}
	// Both workers say they are done before either closes the pair
	// connection, so that neither takes the other's closing for a failure
	// (and retries a finished job). The exchange runs even when the
	// connection's watchers have cancelled (what the peer sent before it
	// closed is still delivered), within pairFinishTimeout.
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(hsCtx), pairFinishTimeout)
	defer fcancel()
	var peerDone string
	if err := exchangeJSON(fctx, r.ctrl, "done", &peerDone, 16); err != nil || peerDone != "done" {
		return nil, fmt.Errorf("selection: worker: the peer worker did not finish the shard: %v", err)
	}
	r.logf().Info("selection: worker: shard done", "party", r.party, "phase", j.Phase+1, "shard", j.Shard, "shards", j.Shards,
		"batches", nb, "resumed", ps.Resumed, "epoch", r.st.Epoch)
	// The peer holds every batch too: the job is not run with it again
	// (Worker.finished).
	if err := r.store.markFinished(j.Session); err != nil {
		return nil, err
	}
	r.stMu.Lock()
	defer r.stMu.Unlock()
	return jobResult(r.st.Phases[0].Batches, j.FirstBatch), nil
}

// shardBudget is the dealer work of the job: the phase's preparation and
// the shard's batches (phaseWork, rehearsed with the worker's evaluator),
// times DealerBudgetFactor.
func (r *workerRun) shardBudget(ctx context.Context) (uint64, error) {
	prep, batch, err := phaseWork(ctx, r.p, r.eval, r.job.Phase, r.job.Arch)
	if err != nil {
		return 0, err
	}
	nb := uint64(r.sched.Batches(len(r.job.Candidates)))
	return mulSat(addSat(prep, mulSat(nb, batch)), DealerBudgetFactor), nil
}

// pairHello is what the two workers of a pair announce in the clear before
// a job: public facts both derive from their coordinators' jobs.
type pairHello struct {
	Version    int     `json:"version"`
	Party      int     `json:"party"`
	Session    string  `json:"shard_session"`
	Phase      int     `json:"phase"`
	Shard      int     `json:"shard"`
	Shards     int     `json:"shards"`
	Candidates string  `json:"candidates"`
	Arch       string  `json:"arch"`
	ViewHash   string  `json:"view_hash"`
	Epoch      uint64  `json:"epoch"`
	Resume     summary `json:"resume"`
}

// comparePairHello returns the first mismatch of two pair hellos.
func comparePairHello(l, p pairHello) error {
	checks := []struct {
		field   string
		l, p    any
		differs bool
	}{
		{"version", l.Version, p.Version, l.Version != p.Version},
		{"party", l.Party, p.Party, l.Party == p.Party},
		{"shard_session", l.Session, p.Session, l.Session != p.Session},
		{"phase", l.Phase + 1, p.Phase + 1, l.Phase != p.Phase},
		{"shard", l.Shard, p.Shard, l.Shard != p.Shard},
		{"shards", l.Shards, p.Shards, l.Shards != p.Shards},
		{"candidates", l.Candidates, p.Candidates, l.Candidates != p.Candidates},
		{"arch", l.Arch, p.Arch, l.Arch != p.Arch},
		{"view_hash", l.ViewHash, p.ViewHash, l.ViewHash != p.ViewHash},
	}
	for _, c := range checks {
		if !c.differs {
			continue
		}
		if ls, ok := c.l.(string); ok {
			a, b := shortHashes(ls, c.p.(string))
			return &MismatchError{Field: c.field, Local: a, Peer: b}
		}
		return &MismatchError{Field: c.field, Local: fmt.Sprint(c.l), Peer: fmt.Sprint(c.p)}
	}
	return nil
}

// sessionHash is what a worker shows its peer of a shard's session.
func sessionHash(id beaver.SessionID) string { return seedID(hex.EncodeToString(id[:])) }

// pairHandshake exchanges the pair hellos on StreamControl, compares them,
// bounds the peer's epoch and checkpoint summary, then both workers keep
// the batches both finished in the same epoch and adopt the larger epoch
// (as a run's handshake does).
func (r *workerRun) pairHandshake(hsCtx context.Context) error {
	j := r.job
	r.ctrl = r.conn.Stream(StreamControl)
	mine := pairHello{Version: ProtocolVersion, Party: r.party, Session: sessionHash(j.Session), Phase: j.Phase, Shard: j.Shard,
		Shards: j.Shards, Candidates: j.candidatesHash(), Arch: j.archHash(), ViewHash: r.viewHash(), Epoch: r.st.Epoch,
		Resume: r.st.summarize()}
	nb := r.sched.Batches(len(j.Candidates))
	var peer pairHello
	if err := exchangeJSON(hsCtx, r.ctrl, mine, &peer, helloBase+nb*2*maxJSONNumber); err != nil {
		if peer.Version != 0 {
			if merr := comparePairHello(mine, peer); merr != nil {
				return merr
			}
		}
		return fmt.Errorf("selection: worker: pair handshake: %w", err)
	}
	if err := comparePairHello(mine, peer); err != nil {
		return err
	}
	if err := checkEpoch(mine.Epoch, peer.Epoch); err != nil {
		return err
	}
	if err := checkPairSummary(peer.Resume, mine.Resume.SeedHash, nb); err != nil {
		return withCode(AbortProtocol, fmt.Errorf("selection: worker: the peer's resume summary: %w; refused", err))
	}
	if peer.Epoch > r.st.Epoch {
		r.st.Epoch = peer.Epoch
	}
	r.st.reconcile(mine.Resume, peer.Resume)
	if err := r.checkpoint(); err != nil {
		return err
	}
	if err := r.store.prune(r.st); err != nil {
		return err
	}
	r.logf().Info("selection: worker: pair handshake done", "party", r.party, "phase", j.Phase+1, "shard", j.Shard, "epoch", r.st.Epoch)
	return nil
}

// checkPairSummary refuses a worker's resume summary that no checkpoint of
// the job describes: another session, more than one phase, a finished
// phase, batch numbers not ascending and distinct below nb, or epochs that
// do not pair up with them or lie outside 1..MaxEpoch−1.
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

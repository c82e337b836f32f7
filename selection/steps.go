package selection

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/marks"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/selection/lanes"
	"github.com/selectformer/selectformer/selection/topk"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// runner holds what the two drivers (modelOwnerRun, dataOwnerRun) share:
// one party's connection, checkpoint store, batch scheduler and state, and
// the steps of the protocol that both parties run alike. The steps whose
// two sides differ (the coin toss, the bootstrap, the architectures, the
// appraisal threshold) live in the drivers, which call these in protocol
// order.
type runner struct {
	party      int
	p          Params
	conn       *transport.Conn
	prov       beaver.Provider
	log        *slog.Logger
	onProgress func(Progress)
	store      *checkpointStore
	sched      *lanes.Scheduler // set by beginEpoch (markProvider)
	embHash    string
	seq        int
	// forgeEpoch (tests) replaces the epoch counted by beginEpoch.
	forgeEpoch func(uint64) uint64
	// shards, if set, runs each phase's forward on worker pairs
	// (ModelOwner.Shards, DataOwner.Shards); jobProxy, if set, returns the
	// model owner's encoded proxy of a phase for its workers' jobs.
	shards   ShardRunner
	jobProxy func(phase int) ([]byte, error)
	// requireCommitment (the model owner with ItemInput) refuses a data
	// owner that commits to no pool; openingBytes is the size of the
	// bootstrap's openings message of this run.
	requireCommitment bool
	openingBytes      int64
	// shareOffset (tests, the data owner) shifts its shares of scores.
	shareOffset func(phase, idx int) float64
	// dealerBudget, if set, returns the session budget the party
	// announces to a networked dealer when it binds the session (the model
	// owner's DealerBudget of its proxies; see coin).
	dealerBudget func(context.Context) (uint64, error)

	st   *State
	stMu sync.Mutex // guards st while batch slots record their shares
	ctrl *transport.Stream
	// onAbort, if set (tests), sees the peer's abort message as received.
	onAbort func([]byte)
}

func newRunner(party int, p Params, conn *transport.Conn, prov beaver.Provider, log *slog.Logger, onProgress func(Progress), store *checkpointStore) *runner {
	p = p.WithDefaults()
	return &runner{party: party, p: p, conn: conn, prov: prov, log: log, onProgress: onProgress, store: store}
}

// checkProvider checks that the provider is the party's.
func (r *runner) checkProvider() error {
	if r.prov == nil {
		return fmt.Errorf("selection: party %d: nil provider", r.party)
	}
	if r.prov.Party() != r.party {
		return fmt.Errorf("selection: party %d given a provider of party %d", r.party, r.prov.Party())
	}
	return nil
}

// watchConn returns a context that also ends when the connection fails, so
// that its failure ends every blocked call.
func (r *runner) watchConn(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-r.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// viewHash is the hash of this party's view of the public parameters.
func (r *runner) viewHash() string { return viewHash(r.p, r.embHash) }

// loadState reads the checkpoint (nil when there is none) and checks that
// it belongs to these parameters.
func (r *runner) loadState() (*State, error) {
	st, err := r.store.load()
	if err != nil {
		return nil, err
	}
	if st != nil && st.ViewHash != r.viewHash() {
		return nil, &StateError{Path: r.store.statePath(), Err: errOtherParams}
	}
	return st, nil
}

// newState is the state of a fresh session.
func (r *runner) newState() *State {
	return &State{Version: stateVersion, Party: r.party, ViewHash: r.viewHash()}
}

// checkpoint saves the state.
func (r *runner) checkpoint() error { return r.store.save(r.st) }

// beginEpoch adopts st and counts this run as a new epoch, persisted before
// anything is said to the peer; then it wraps the party's provider in the
// session's persistent high-water marks (markProvider).
func (r *runner) beginEpoch(st *State) error {
	if st.Epoch >= MaxEpoch-1 {
		return fmt.Errorf("selection: the session has used all %d epochs (one per run); start a new session with a fresh state directory", MaxEpoch-1)
	}
	r.st = st
	r.st.Epoch++
	if r.forgeEpoch != nil {
		r.st.Epoch = r.forgeEpoch(r.st.Epoch)
	}
	if err := r.checkpoint(); err != nil {
		return err
	}
	return r.markProvider()
}

// markProvider wraps the party's provider in a marks.Provider whose marks
// live in the state directory (MarksFile; in memory without one), so that
// no restart of this party draws correlated randomness at a position it
// drew before in the session, whatever epoch the handshake settles on: the
// marks are reserved an epoch at a time (chunks of 2^EpochShift), so the
// file is written once per stream and run.
func (r *runner) markProvider() error {
	path := ""
	if r.store.durable() {
		path = MarksFile(r.store.dir, r.party)
	}
	m, err := marks.New(r.prov, path, marks.Options{ChunkBits: EpochShift})
	if err != nil {
		return &StateError{Path: path, Err: err}
	}
	r.prov = m
	r.sched, err = lanes.New(lanes.Config{Party: r.party, Conn: r.conn, Provider: m, FixedPoint: r.p.FixedPoint,
		Workers: r.p.laneCount(), Pipeline: r.p.Pipeline != PipelineOff, MemoryBudget: r.p.MemoryBudget,
		ControlStream: StreamSession, LaneStreamBase: StreamSlotBase})
	if err != nil {
		return fmt.Errorf("selection: %w", err)
	}
	return nil
}

// handshake exchanges hellos in the clear on StreamControl and compares
// them; then both parties keep the progress they share (reconcile), adopt
// the larger epoch and drop the batch files they no longer hold. It runs on
// hsCtx, the guard's context (the caller's, ended also by the peer's
// abort): transport itself ends a blocked receive when the connection dies,
// but only after handing over what the peer sent before it went, so a peer
// that leaves on a mismatch is reported as that mismatch rather than as a
// cancellation. It returns the peer's hello.
func (r *runner) handshake(hsCtx context.Context) (hello, error) {
	r.ctrl = r.conn.Stream(StreamControl)
	// StreamControl is not compressed (transport compression is opt-in and
	// off by default): it carries the bootstrap, the data owner's private
	// points, and the length of a compressed message would depend on their
	// content. Its other messages (hello, coin, architectures) are small.
	mine := newHello(r.party, r.p, r.embHash, r.seq, beaver.Describe(r.prov), r.st.Epoch, r.st.summarize())
	if r.shards != nil {
		mine.Shards = r.shards.Shards()
	}
	if r.party == 1 && r.st.Pool != nil {
		mine.PoolRoot = r.st.Pool.Root.String()
	}
	var peer hello
	if err := exchangeJSON(hsCtx, r.ctrl, mine, &peer, maxHelloMessage(r.p)); err != nil {
		if peer.Version != 0 { // the peer's hello arrived: a mismatch explains its leaving
			if merr := compareHello(mine, peer); merr != nil {
				return peer, merr
			}
		}
		return peer, fmt.Errorf("selection: handshake: %w", err)
	}
	if err := compareHello(mine, peer); err != nil {
		return peer, err
	}
	if err := checkPeerHello(mine, peer, r.p); err != nil {
		return peer, err
	}
	if err := r.st.checkRevealed(peer.Resume); err != nil {
		return peer, err
	}
	if err := r.recordCommitment(peer); err != nil {
		return peer, err
	}
	if peer.Epoch > r.st.Epoch {
		r.st.Epoch = peer.Epoch
	}
	r.st.reconcile(mine.Resume, peer.Resume)
	if err := r.checkpoint(); err != nil {
		return peer, err
	}
	if err := r.store.prune(r.st); err != nil {
		return peer, err
	}
	r.logf().Info("selection: handshake done", "party", r.party, "epoch", r.st.Epoch, "pool", r.p.PoolSize, "budget", r.p.Budget, "phases", len(r.p.Schedule))
	return peer, nil
}

// coin returns the session's joint coin: the checkpointed one, or a fresh
// one from toss (the driver's side of the coin toss), checkpointed. It
// then binds the provider to the dealer session drawn from the coin, so
// that no two selections share material; a provider that announces
// session budgets (beaver.SessionBudgeter: a networked dealer's client)
// first gets the runner's dealerBudget, so that the dealer serves the
// session no more than the selection's shapes need.
func (r *runner) coin(ctx context.Context, toss func(context.Context, *transport.Stream) (share.Seed, error)) (share.Seed, error) {
	if r.st.Seed == "" && r.st.Revealed != nil {
		return share.Seed{}, fmt.Errorf("selection: %w: no new coin is tossed", ErrBootstrapRevealed)
	}
	if r.st.Seed == "" {
		seed, err := toss(ctx, r.ctrl)
		if err != nil {
			return share.Seed{}, err
		}
		r.st.Seed = hex.EncodeToString(seed[:])
		if err := r.checkpoint(); err != nil {
			return share.Seed{}, err
		}
	}
	seed, err := r.st.seed()
	if err != nil {
		return seed, err
	}
	if err := r.announceBudget(ctx); err != nil {
		return seed, err
	}
	return seed, r.sched.Bind(ctx, dealerSession(seed))
}

// announceBudget hands the runner's dealerBudget to a provider that
// announces session budgets (see coin).
func (r *runner) announceBudget(ctx context.Context) error {
	b, ok := beaver.As[beaver.SessionBudgeter](r.prov)
	if !ok || r.dealerBudget == nil {
		return nil
	}
	w, err := r.dealerBudget(ctx)
	if err != nil {
		return err
	}
	b.SetSessionBudget(w)
	r.logf().Info("selection: dealer session budget", "party", r.party, "work", w)
	return nil
}

// bootstrapDone records the bootstrap sample idx as done.
func (r *runner) bootstrapDone(idx []int) error {
	r.st.Bootstrap, r.st.BootstrapDone = idx, true
	return r.checkpoint()
}

// selectAll runs the phases of the schedule with eval on the proxies of
// archs, then the appraisal (threshold shares the model owner's threshold,
// see appraise), filling res.
func (r *runner) selectAll(ctx context.Context, seed share.Seed, eval Evaluator, archs []secure.Arch, threshold func(*protocol.Session) (*share.Tensor, error), res *Result) error {
	cand := candidates(r.p.PoolSize, r.st.Bootstrap)
	var lastVals *share.Tensor
	var lastKeys []int
	for i := range r.p.Schedule {
		if i == len(r.st.Phases) {
			r.st.Phases = append(r.st.Phases, PhaseState{})
			// Record the phase before its batch files appear.
			if err := r.checkpoint(); err != nil {
				return err
			}
		}
		ps, vals, err := r.phase(ctx, i, seed, eval, archs[i], cand)
		if err != nil {
			return err
		}
		res.Phases = append(res.Phases, ps)
		lastVals, lastKeys = vals, cand
		cand = r.st.Phases[i].Survivors
		res.Survivors = append(res.Survivors, append([]int(nil), cand...))
	}
	res.Selected = append([]int(nil), cand...)
	for _, ph := range r.st.Phases {
		res.Tiers = append(res.Tiers, append([]int(nil), ph.Tiers...))
	}
	res.Commitment, res.OpeningBytes = r.commitment(), r.openingBytes
	if r.p.Appraisal != AppraiseNone {
		a, err := r.appraise(ctx, lastVals, lastKeys, cand, archs[len(archs)-1].SqrtEntropy, threshold)
		if err != nil {
			return err
		}
		res.Appraisal = a
	}
	r.logf().Info("selection: done", "party", r.party, "selected", len(res.Selected))
	return nil
}

// online returns this party's traffic so far on the selection's own
// streams (the clear control stream, the control session and the batch
// lanes): the online traffic, without that of a provider sharing the
// connection (ot.Provider makes its correlations on streams of its own).
func (r *runner) online() transport.Stats {
	return r.conn.Stream(StreamControl).Stats().Add(r.sched.Online())
}

// phase runs phase i on the candidates cand: the batches not yet finished,
// then QuickSelect. It returns the statistics and the entropy shares.
func (r *runner) phase(ctx context.Context, i int, seed share.Seed, eval Evaluator, arch secure.Arch, cand []int) (PhaseStats, *share.Tensor, error) {
	start := time.Now()
	c0, d0 := r.online(), r.prov.Stats()
	keep := r.p.keep(i)
	nb := r.p.phaseBatches(i, len(cand))
	ps := PhaseStats{In: len(cand), Out: keep, Batches: nb}
	ph := &r.st.Phases[i]
	vals, pending, err := r.resumed(i, r.p.PhaseBatchSize(i), cand, nb, &ps)
	if err != nil {
		return ps, nil, err
	}
	ctrl := r.sched.Control()
	if !ph.Done {
		if len(pending) > 0 {
			if r.shards != nil {
				err = r.runShards(ctx, i, seed, arch, cand, vals, &ps)
			} else {
				err = r.forwardPending(ctx, i, i, eval, arch, cand, pending, vals, &ps)
			}
			if err != nil {
				return ps, nil, err
			}
		}
		t, _ := share.FromData(vals, len(vals))
		prg := share.NewPRG(seed, fmt.Sprintf("selectformer/selection/pivots/phase-%d", i))
		pos, tiers, sst, err := topk.TopKTiers(ctx, ctrl, t, cand, keep, prg)
		if err != nil {
			return ps, nil, fmt.Errorf("selection: phase %d: %w", i+1, err)
		}
		ps.Comparisons, ps.Steps, ps.SelectRounds = sst.Comparisons, sst.Steps, sst.Rounds
		surv := make([]int, len(pos))
		for j, p := range pos {
			surv[j] = cand[p]
		}
		r.stMu.Lock()
		ph.Done, ph.Survivors, ph.Tiers = true, surv, tiers
		err = r.checkpoint()
		r.stMu.Unlock()
		if err != nil {
			return ps, nil, err
		}
	}
	c1, d1 := r.online().Sub(c0), r.prov.Stats()
	ps.BytesSent, ps.BytesRecv = c1.BytesSent, c1.BytesRecv
	ps.RandomnessBytes = d1.BytesRecv - d0.BytesRecv + d1.BytesSent - d0.BytesSent
	ps.addShards()
	ps.Seconds = time.Since(start).Seconds()
	r.logf().Info("selection: phase done", "party", r.party, "phase", i+1, "in", ps.In, "out", ps.Out, "comparisons", ps.Comparisons,
		"forward_rounds", ps.ForwardRounds, "select_rounds", ps.SelectRounds, "bytes_sent", ps.BytesSent, "seconds", ps.Seconds,
		"peak_in_flight", ps.PeakInFlight, "prefetched", ps.Prefetched, "streamed", ps.Streamed, "peak_prefetch_bytes", ps.PeakPrefetchBytes, "memory_budget", r.sched.MemoryBudget())
	t, _ := share.FromData(vals, len(vals))
	return ps, t, nil
}

// resumed fills the shares of the batches of state phase i (of nb
// batches of size of the candidates cand) that the checkpoint holds, counting them
// in ps.Resumed, and returns the shares and the batches still pending.
func (r *runner) resumed(i, size int, cand []int, nb int, ps *PhaseStats) ([]uint64, []int, error) {
	vals := make([]uint64, len(cand))
	done := make([]bool, nb)
	for _, b := range r.st.Phases[i].Batches {
		lo, hi := lanes.Span(b.Batch, len(cand), size)
		if b.Batch >= nb || len(b.Shares) != hi-lo {
			return nil, nil, fmt.Errorf("selection: state: phase %d batch %d does not fit %d candidates", i+1, b.Batch, len(cand))
		}
		copy(vals[lo:hi], b.Shares)
		done[b.Batch] = true
		ps.Resumed++
	}
	var pending []int
	for b, d := range done {
		if !d {
			pending = append(pending, b)
		}
	}
	return vals, pending, nil
}

// forwardPending runs the pending batches of the candidates cand on this
// party's connection: the weights of phase (eval's and the logs' phase
// number) shared once on the control session, then the batches of the
// phase's size (Params.PhaseBatchSize) on its lanes (Params.PhaseWorkers), checkpointed in state phase slot
// (= phase for a run; a worker keeps each job in its own state, slot 0),
// filling vals and ps.
func (r *runner) forwardPending(ctx context.Context, slot, phase int, eval Evaluator, arch secure.Arch, cand, pending []int, vals []uint64, ps *PhaseStats) error {
	ctrl := r.sched.Control()
	r0 := ctrl.Stream().Stats().Rounds
	fw, err := eval.Prepare(ctx, ctrl, phase, arch, r.sched.WeightBase(slot))
	if err != nil {
		return fmt.Errorf("selection: phase %d: prepare: %w", phase+1, err)
	}
	rs, err := r.forwardBatches(ctx, slot, r.p.PhaseWorkers(phase), r.p.PhaseBatchSize(phase), fw, cand, pending, vals, ps.Resumed, ps.Batches)
	if err != nil {
		return err
	}
	// The phase's weights are never drawn again: a provider that
	// holds state per weight (the dealer-free provider's encrypted
	// weights, GBs a phase) drops it.
	if wr, ok := beaver.As[beaver.WeightReleaser](r.prov); ok {
		wr.ReleaseWeights(r.sched.WeightBase(slot), r.sched.WeightBase(slot+1))
	}
	ps.ForwardRounds = ctrl.Stream().Stats().Rounds - r0 + rs.Rounds
	ps.PeakInFlight, ps.Prefetched, ps.Streamed, ps.PeakPrefetchBytes, ps.BatchMaterialBytes = rs.PeakInFlight, rs.Prefetched, rs.Streamed, rs.PeakHeld, rs.BatchBytes
	return nil
}

// forwardBatches runs the pending batches of size of a phase on the
// first width of the scheduler's lanes; after every batch its shares are checkpointed (batches may finish
// in any order: each has its own batch file) and progress is reported.
func (r *runner) forwardBatches(ctx context.Context, phase, width, size int, fw Forwarder, cand, pending []int, vals []uint64, already, total int) (lanes.Stats, error) {
	prog := &progress{r: r, phase: phase, already: already, total: total, start: time.Now()}
	prog.lastLog = prog.start
	if r.onProgress != nil && total > 0 {
		// The phase's start, so that progress shows before its first
		// batch ends (with a pipeline, the batches end close together).
		r.onProgress(Progress{Phase: phase, Done: already, Total: total})
	}
	return r.sched.Run(ctx, phase, width, size, len(cand), pending, func(ctx context.Context, slot *protocol.Session, b int) error {
		lo, hi := lanes.Span(b, len(cand), size)
		ids := fullBatch(cand[lo:hi], size)
		t, err := fw.Forward(ctx, slot, ids)
		if err == nil && len(t.Data) != len(ids) {
			err = fmt.Errorf("%d entropies for %d candidates", len(t.Data), len(ids))
		}
		if err != nil {
			return fmt.Errorf("selection: phase %d batch %d: %w", phase+1, b, err)
		}
		t.Data = t.Data[:hi-lo] // the padding's entropies are dropped
		if r.shareOffset != nil {
			for j, i := range cand[lo:hi] {
				w, _ := r.p.FixedPoint.Encode(r.shareOffset(phase, i))
				t.Data[j] += w
			}
		}
		bs := BatchShares{Batch: b, Epoch: r.st.Epoch, Shares: append([]uint64(nil), t.Data...)}
		err = r.store.record(phase, bs)
		r.stMu.Lock()
		copy(vals[lo:hi], bs.Shares)
		r.st.Phases[phase].Batches = append(r.st.Phases[phase].Batches, bs)
		r.stMu.Unlock()
		if err != nil {
			return err
		}
		prog.batchDone(ctx)
		return nil
	}, func(ctx context.Context, dry *protocol.Session, b int) error {
		lo, hi := lanes.Span(b, len(cand), size)
		_, err := fw.Forward(ctx, dry, fullBatch(cand[lo:hi], size))
		return err
	})
}

// fullBatch returns the candidates of a batch padded to size with repeats
// of its first, so that a phase's last, partial batch runs as a full one:
// every batch of a phase draws the same correlations (the dealer budget
// counts full batches), and without a dealer the same HE packings — a
// partial batch's row count chose other layouts, whose encrypted weights
// the model owner uploaded and the data owner held beside the full
// batches' until the phase ended (about 0.5 GB of its memory in sst2's
// phase 2, issue 38). The padding costs at most one batch's forward a
// phase; its entropies are dropped. Both parties pad alike (the batch
// size is public, and the data owner's inputs are its own).
func fullBatch(ids []int, size int) []int {
	if len(ids) == 0 || len(ids) >= size {
		return ids
	}
	out := make([]int, size)
	copy(out, ids)
	for i := len(ids); i < size; i++ {
		out[i] = ids[0]
	}
	return out
}

// progress reports a phase's finished batches (log and OnProgress).
type progress struct {
	r                     *runner
	phase, already, total int
	start                 time.Time

	mu       sync.Mutex
	finished int
	lastLog  time.Time
}

// batchDone reports one more finished batch.
func (p *progress) batchDone(ctx context.Context) {
	// Held through the report, so that lanes finishing at once report in
	// order (Done only grows).
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished++
	pr := Progress{Phase: p.phase, Done: p.already + p.finished, Total: p.total}
	el := time.Since(p.start).Seconds()
	if el > 0 {
		pr.Rate = float64(p.finished) / el
		pr.ETA = time.Duration(float64(p.total-pr.Done) / pr.Rate * float64(time.Second))
	}
	level := slog.LevelDebug
	if pr.Done == p.total || time.Since(p.lastLog) >= ProgressLogInterval {
		level, p.lastLog = slog.LevelInfo, time.Now()
	}
	p.r.logf().Log(ctx, level, "selection: progress", "party", p.r.party, "phase", p.phase+1, "done", pr.Done, "total", pr.Total,
		"batches_per_s", pr.Rate, "eta", pr.ETA.Round(time.Second))
	if p.r.onProgress != nil {
		p.r.onProgress(pr)
	}
}

// appraise reveals the mean entropy of the final set (the mean score of the
// proxies' selection criterion, mlp.Criterion: the entropy by default), or only whether it
// exceeds the model owner's threshold: threshold returns this party's
// share of it (the model owner inputs it, the data owner receives a share).
// With sqrt the last phase's scores are √H (secure.Arch.SqrtEntropy) and are
// squared first.
func (r *runner) appraise(ctx context.Context, vals *share.Tensor, keys, sel []int, sqrt bool, threshold func(*protocol.Session) (*share.Tensor, error)) (*Appraisal, error) {
	s := r.sched.Control()
	pos := make(map[int]int, len(keys))
	for j, k := range keys {
		pos[k] = j
	}
	picked := make([]uint64, len(sel))
	for i, k := range sel {
		picked[i] = vals.Data[pos[k]]
	}
	scores, _ := share.FromData(picked, len(picked))
	mean, err := meanEntropy(ctx, s, scores, sqrt)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	a := &Appraisal{Mode: r.p.Appraisal}
	if r.p.Appraisal == AppraiseMean {
		v, err := s.Reveal(ctx, mean)
		if err != nil {
			return nil, fmt.Errorf("selection: appraisal: %w", err)
		}
		a.Mean = r.p.FixedPoint.Decode(v.Data[0])
		return a, nil
	}
	t, err := threshold(s)
	if err != nil {
		return nil, err
	}
	bits, err := s.CompareReveal(ctx, t, mean)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	a.Exceeds = bits[0]
	return a, nil
}

// meanEntropy returns shares (shape [1]) of the mean of the entropy scores
// (the criterion's scores), squared first when they are √H (sqrt). Cost: 1 round and msg(1) bytes
// (MulPublicScalar on the sum), plus SquareFixed's 2 rounds and msg(n) +
// msg(⌈n/64⌉) with sqrt.
func meanEntropy(ctx context.Context, s *protocol.Session, scores *share.Tensor, sqrt bool) (*share.Tensor, error) {
	if scores.Len() == 0 {
		return nil, fmt.Errorf("mean of no scores")
	}
	ent := scores
	if sqrt {
		var err error
		if ent, err = s.SquareFixed(ctx, scores); err != nil {
			return nil, err
		}
	}
	var sum uint64
	for _, v := range ent.Data {
		sum += v
	}
	st, _ := share.FromData([]uint64{sum}, 1) // shape [1], as the threshold's
	return s.MulPublicScalar(ctx, st, 1/float64(scores.Len()))
}

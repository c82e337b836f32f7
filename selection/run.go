package selection

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Stream ids used on the connection.
const (
	// StreamControl carries the clear messages (hello, coin, bootstrap, archs).
	StreamControl uint32 = 1
	// StreamSession carries the control session (weight sharing, QuickSelect,
	// appraisal).
	StreamSession uint32 = 2
	// StreamSlotBase is the stream of batch slot 0; slot w uses
	// StreamSlotBase + w.
	StreamSlotBase uint32 = 16
)

// ProgressLogInterval is the least time between two Info-level progress
// lines of a phase (every batch is logged at Debug level).
const ProgressLogInterval = 5 * time.Second

// EpochShift places each run's correlated randomness in its own counter
// range: in epoch e every stream starts at counter e << EpochShift.
const EpochShift = 40

// engine runs one party's side.
type engine struct {
	party      int
	p          Params
	conn       *transport.Conn
	prov       beaver.Provider
	log        *slog.Logger
	onProgress func(Progress)
	stateDir   string
	embHash    string
	seq        int
	eval       Evaluator
	mo         *ModelOwner
	do         *DataOwner

	st    *State
	stMu  sync.Mutex
	ctrl  *transport.Stream
	sess  *protocol.Session
	slots []*protocol.Session
}

// Run runs the model owner's side of a selection over conn, drawing
// correlated randomness from prov (party 0's provider).
//
// Everything Run can check (parameters, weights, proxies, generation
// settings, the Label function) is checked before it says anything to the
// data owner. When Run fails it tells the peer why (an abort on
// StreamAbort), then closes conn; when the peer fails first, Run returns a
// *PeerAbortError with the peer's reason.
func (m *ModelOwner) Run(ctx context.Context, conn *transport.Conn, prov beaver.Provider) (*Result, error) {
	if m == nil {
		return nil, fmt.Errorf("selection: nil model owner")
	}
	e := &engine{party: 0, p: m.Params.withDefaults(), conn: conn, prov: prov, log: m.Logger, onProgress: m.OnProgress, stateDir: m.StateDir, eval: m.Evaluator, mo: m}
	return e.guard(ctx, func() error { return m.check(e) })
}

// Run runs the data owner's side of a selection over conn, drawing
// correlated randomness from prov (party 1's provider).
//
// Everything Run can check (parameters, pool, embedding weights) is checked
// before it says anything to the model owner. The bootstrap sample is
// recorded (in StateDir, or in memory without one) before it is sent, and a
// data owner never sends a second one for the same session: a restarted
// model owner that no longer holds the session's coin is refused (an error
// wrapping ErrBootstrapRevealed). When Run fails it tells the peer why (an
// abort on StreamAbort), then closes conn; when the peer fails first, Run
// returns a *PeerAbortError with the peer's reason.
func (d *DataOwner) Run(ctx context.Context, conn *transport.Conn, prov beaver.Provider) (*Result, error) {
	if d == nil {
		return nil, fmt.Errorf("selection: nil data owner")
	}
	e := &engine{party: 1, p: d.Params.withDefaults(), conn: conn, prov: prov, log: d.Logger, onProgress: d.OnProgress, stateDir: d.StateDir, eval: d.Evaluator, do: d}
	return e.guard(ctx, func() error { return d.check(e) })
}

// guard runs check and the session, and on failure tells the peer (see
// abortWatch.fail) and closes the connection.
func (e *engine) guard(ctx context.Context, check func() error) (*Result, error) {
	if e.conn == nil {
		if err := check(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("selection: party %d: nil connection", e.party)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ab := watchAbort(e.conn, e.party, cancel)
	res, err := func() (*Result, error) {
		if err := check(); err != nil {
			return nil, err
		}
		return e.run(ctx)
	}()
	if err != nil {
		return nil, ab.fail(err)
	}
	ab.stop()
	return res, nil
}

func (e *engine) logf() *slog.Logger {
	if e.log == nil {
		return slog.Default()
	}
	return e.log
}

// checkpoint saves the state; without a state directory, the data owner
// keeps its record of what it revealed in memory (DataOwner.revealed).
func (e *engine) checkpoint() error {
	if e.stateDir == "" {
		if e.do != nil && e.st.Revealed != nil {
			e.do.mu.Lock()
			e.do.revealed = e.st.Revealed.clone()
			e.do.mu.Unlock()
		}
		return nil
	}
	return e.st.save(e.stateDir)
}

func (e *engine) run(ctx context.Context) (*Result, error) {
	// The handshake runs on the guard's context (the caller's, ended also by
	// the peer's abort): transport itself ends a blocked receive when the
	// connection dies, but only after handing over what the peer sent before
	// it went, so a peer that leaves on a mismatch is reported as that
	// mismatch rather than as a cancellation.
	hsCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The connection failing ends every blocked call.
	go func() {
		select {
		case <-e.conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	vh := viewHash(e.p, e.embHash)
	// 1. Checkpoint: load, check, bump the epoch before talking to the peer.
	if e.stateDir != "" {
		st, err := loadState(e.stateDir, e.party)
		if err != nil {
			return nil, err
		}
		if st != nil && st.ViewHash != vh {
			return nil, &StateError{Path: StateFile(e.stateDir, e.party), Err: errOtherParams}
		}
		e.st = st
	}
	if e.st == nil {
		e.st = &State{Version: stateVersion, Party: e.party, ViewHash: vh}
		if e.stateDir == "" && e.do != nil {
			e.do.mu.Lock()
			if r := e.do.revealed; r != nil {
				if r.ViewHash != vh {
					e.do.mu.Unlock()
					return nil, fmt.Errorf("%w (%d points, under other parameters); use a new DataOwner for a new session", ErrBootstrapRevealed, len(r.Bootstrap))
				}
				e.st.Revealed = r.clone()
				e.st.Seed = r.Seed
			}
			e.do.mu.Unlock()
		}
	}
	if e.party == 1 && e.stateDir == "" {
		e.logf().Warn("selection: data owner without a StateDir: a restarted process cannot recognise a session whose bootstrap sample it already sent")
	}
	e.st.Epoch++
	if err := e.checkpoint(); err != nil {
		return nil, err
	}
	// 2. Handshake.
	e.ctrl = e.conn.Stream(StreamControl)
	// The clear messages (hello, coin, bootstrap inputs, architectures) are
	// compressible text: zstd shrinks a bootstrap of MNIST images 11×.
	e.ctrl.SetCompression(transport.CompressBytes)
	mine := newHello(e.party, e.p, e.embHash, e.seq, e.st.Epoch, e.st.summarize())
	var peer hello
	if err := exchangeJSON(hsCtx, e.ctrl, mine, &peer); err != nil {
		if peer.Version != 0 { // the peer's hello arrived: a mismatch explains its leaving
			if merr := compareHello(mine, peer); merr != nil {
				return nil, merr
			}
		}
		return nil, fmt.Errorf("selection: handshake: %w", err)
	}
	if err := compareHello(mine, peer); err != nil {
		return nil, err
	}
	if err := e.st.checkRevealed(peer.Resume); err != nil {
		return nil, err
	}
	if e.party == 0 {
		e.seq = peer.Seq
	}
	if peer.Epoch > e.st.Epoch {
		e.st.Epoch = peer.Epoch
	}
	e.st.reconcile(mine.Resume, peer.Resume)
	if err := e.checkpoint(); err != nil {
		return nil, err
	}
	if e.stateDir != "" {
		if err := e.st.pruneBatches(e.stateDir); err != nil {
			return nil, err
		}
	}
	res := &Result{Epoch: e.st.Epoch}
	e.logf().Info("selection: handshake done", "party", e.party, "epoch", e.st.Epoch, "pool", e.p.PoolSize, "budget", e.p.Budget, "phases", len(e.p.Schedule))
	// 3. Correlated randomness of this epoch, sessions.
	streams := []uint32{StreamSession}
	for w := range e.p.Workers {
		streams = append(streams, StreamSlotBase+uint32(w))
	}
	for _, id := range streams {
		if err := e.prov.Seek(id, e.st.Epoch<<EpochShift); err != nil {
			return nil, fmt.Errorf("selection: start epoch %d: %w", e.st.Epoch, err)
		}
	}
	if err := e.openSessions(ctx); err != nil {
		return nil, err
	}
	// 4. Coin and bootstrap.
	if e.st.Seed == "" && e.st.Revealed != nil {
		return nil, fmt.Errorf("selection: %w: no new coin is tossed", ErrBootstrapRevealed)
	}
	if e.st.Seed == "" {
		seed, err := coinToss(ctx, e.ctrl, e.party)
		if err != nil {
			return nil, err
		}
		e.st.Seed = hex.EncodeToString(seed[:])
		if err := e.checkpoint(); err != nil {
			return nil, err
		}
	}
	seed, err := e.st.seed()
	if err != nil {
		return nil, err
	}
	// Every word of correlated randomness is keyed by a session id drawn
	// from the joint coin, so no two selections share material.
	if err := beaver.BindSession(ctx, e.prov, dealerSession(seed)); err != nil {
		return nil, fmt.Errorf("selection: dealer session: %w", err)
	}
	if err := e.bootstrap(ctx, seed); err != nil {
		return nil, err
	}
	res.Bootstrap = append([]int(nil), e.st.Bootstrap...)
	// 5. Architectures.
	archs, err := e.archs(ctx)
	if err != nil {
		return nil, err
	}
	// 6. Phases.
	cand := candidates(e.p.PoolSize, e.st.Bootstrap)
	var lastVals *share.Tensor
	var lastKeys []int
	for i := range e.p.Schedule {
		if i == len(e.st.Phases) {
			e.st.Phases = append(e.st.Phases, PhaseState{})
			// Record the phase before its batch files appear.
			if err := e.checkpoint(); err != nil {
				return nil, err
			}
		}
		ps, vals, err := e.phase(ctx, i, seed, archs[i], cand)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, ps)
		lastVals, lastKeys = vals, cand
		cand = e.st.Phases[i].Survivors
		res.Survivors = append(res.Survivors, append([]int(nil), cand...))
	}
	res.Selected = append([]int(nil), cand...)
	// 7. Appraisal.
	if e.p.Appraisal != AppraiseNone {
		a, err := e.appraise(ctx, lastVals, lastKeys, cand)
		if err != nil {
			return nil, err
		}
		res.Appraisal = a
	}
	e.logf().Info("selection: done", "party", e.party, "selected", len(res.Selected))
	return res, nil
}

// openSessions creates the control session and the batch slots' sessions.
func (e *engine) openSessions(ctx context.Context) error {
	var err error
	if e.sess, err = protocol.NewSession(ctx, e.party, e.conn.Stream(StreamSession), e.prov, e.p.FixedPoint); err != nil {
		return fmt.Errorf("selection: control session: %w", err)
	}
	e.slots = make([]*protocol.Session, e.p.Workers)
	errs := make([]error, e.p.Workers)
	var wg sync.WaitGroup
	for w := range e.p.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.slots[w], errs[w] = protocol.NewSession(ctx, e.party, e.conn.Stream(StreamSlotBase+uint32(w)), e.prov, e.p.FixedPoint)
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			return fmt.Errorf("selection: batch slot %d session: %w", w, err)
		}
	}
	return nil
}

// candidates returns 0..n−1 without the bootstrap indices, ascending.
func candidates(n int, boot []int) []int {
	skip := make(map[int]bool, len(boot))
	for _, b := range boot {
		skip[b] = true
	}
	out := make([]int, 0, n-len(boot))
	for i := range n {
		if !skip[i] {
			out = append(out, i)
		}
	}
	return out
}

// sampleBootstrap draws k distinct pool indices of n with the coin's PRG
// (partial Fisher–Yates), ascending.
func sampleBootstrap(seed share.Seed, n, k int) []int {
	prg := share.NewPRG(seed, "selectformer/selection/bootstrap")
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	for i := range k {
		j := i + prg.Intn(n-i)
		perm[i], perm[j] = perm[j], perm[i]
	}
	out := append([]int(nil), perm[:k]...)
	slices.Sort(out)
	return out
}

// bootstrap sends the sample (data owner) and labels it and makes the
// proxies (model owner); on a resumed run the model owner reloads them.
func (e *engine) bootstrap(ctx context.Context, seed share.Seed) error {
	proxiesDir := ""
	if e.stateDir != "" {
		proxiesDir = filepath.Join(e.stateDir, "proxies")
	}
	if e.st.BootstrapDone {
		if e.party == 0 && e.eval == nil {
			return e.loadProxies(proxiesDir)
		}
		return nil
	}
	idx := sampleBootstrap(seed, e.p.PoolSize, e.p.Bootstrap)
	var boot model.Input
	if e.party == 1 {
		// Record what is revealed, durably, before revealing it; a restart
		// re-sends exactly these points (the same coin gives the same sample).
		if r := e.st.Revealed; r == nil {
			e.st.Revealed = &Revealed{ViewHash: e.st.ViewHash, Seed: e.st.Seed, Bootstrap: idx}
			if err := e.checkpoint(); err != nil {
				return fmt.Errorf("selection: bootstrap: record before sending: %w", err)
			}
		} else if r.Seed != e.st.Seed || !slices.Equal(r.Bootstrap, idx) {
			return fmt.Errorf("selection: bootstrap: %w: the sample to send differs from the one sent", ErrBootstrapRevealed)
		}
		if e.do.Pool.Len() > 0 && len(idx) > 0 {
			var err error
			if boot, err = e.do.Pool.Select(idx); err != nil {
				return fmt.Errorf("selection: bootstrap: %w", err)
			}
		}
		b, err := json.Marshal(boot)
		if err != nil {
			return fmt.Errorf("selection: bootstrap: %w", err)
		}
		if err := e.ctrl.SendBytes(ctx, b); err != nil {
			return fmt.Errorf("selection: bootstrap: send: %w", err)
		}
	} else {
		b, err := e.ctrl.RecvBytes(ctx)
		if err != nil {
			return fmt.Errorf("selection: bootstrap: receive: %w", err)
		}
		if e.mo.onBootstrap != nil {
			if err := e.mo.onBootstrap(b); err != nil {
				return err
			}
		}
		if boot, err = DecodeBootstrap(b, len(idx)); err != nil {
			return err
		}
		if err := e.makeProxies(ctx, idx, boot, proxiesDir); err != nil {
			return err
		}
	}
	e.st.Bootstrap, e.st.BootstrapDone = idx, true
	return e.checkpoint()
}

// DecodeBootstrap parses the data owner's bootstrap message: the inputs of
// the n sampled candidates (a JSON model.Input, empty when the data owner
// runs without a pool, as in tests with a substitute Evaluator).
func DecodeBootstrap(b []byte, n int) (model.Input, error) {
	var in model.Input
	if len(b) > maxControlMessage*64 {
		return in, fmt.Errorf("selection: bootstrap: message of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("selection: bootstrap: decode: %w", err)
	}
	if got := in.Len(); got != n && got != 0 {
		return in, fmt.Errorf("selection: bootstrap: %d inputs for a sample of %d", got, n)
	}
	if _, err := in.Select(nil); err != nil {
		return in, fmt.Errorf("selection: bootstrap: %w", err)
	}
	return in, nil
}

func (e *engine) makeProxies(ctx context.Context, idx []int, boot model.Input, dir string) error {
	m := e.mo
	if e.eval != nil {
		return nil
	}
	if m.Proxies == nil {
		labels, err := m.Label(ctx, idx, boot)
		if err != nil {
			return fmt.Errorf("selection: bootstrap: label: %w", err)
		}
		if len(labels) != len(idx) {
			return fmt.Errorf("selection: bootstrap: %d labels for %d samples", len(labels), len(idx))
		}
		r, err := proxy.Generate(ctx, m.Target, boot, labels, m.generateConfig(e.p))
		if err != nil {
			return fmt.Errorf("selection: bootstrap: generate proxies: %w", err)
		}
		m.Proxies = r.Proxies
		if dir != "" {
			for i, p := range r.Proxies {
				if err := p.Save(filepath.Join(dir, fmt.Sprintf("phase-%d", i)), r.Reports); err != nil {
					return fmt.Errorf("selection: save proxy %d: %w", i, err)
				}
			}
		}
	}
	e.eval = &modelEvaluator{proxies: m.Proxies}
	return nil
}

func (e *engine) loadProxies(dir string) error {
	m := e.mo
	if m.Proxies == nil {
		if dir == "" {
			return fmt.Errorf("selection: resume: no saved proxies")
		}
		for i := range e.p.Schedule {
			path := filepath.Join(dir, fmt.Sprintf("phase-%d", i))
			p, err := proxy.Load(path)
			if err != nil {
				return &StateError{Path: path, Err: fmt.Errorf("resume: load proxy %d: %w", i, err)}
			}
			if err := checkProxy(i, p, e.p.Schedule[i]); err != nil {
				return &StateError{Path: path, Err: err}
			}
			m.Proxies = append(m.Proxies, p)
		}
	}
	e.eval = &modelEvaluator{proxies: m.Proxies}
	return nil
}

// archs announces (model owner) or receives and checks (data owner) the
// proxies' architectures.
func (e *engine) archs(ctx context.Context) ([]secure.Arch, error) {
	n := len(e.p.Schedule)
	if e.party == 0 {
		if e.eval == nil {
			e.eval = &modelEvaluator{proxies: e.mo.Proxies}
		}
		out := make([]secure.Arch, n)
		for i := range out {
			a, err := e.eval.Arch(i, e.seq)
			if err != nil {
				return nil, fmt.Errorf("selection: phase %d architecture: %w", i, err)
			}
			out[i] = a
		}
		b, _ := json.Marshal(out)
		if err := e.ctrl.SendBytes(ctx, b); err != nil {
			return nil, fmt.Errorf("selection: send architectures: %w", err)
		}
		return out, nil
	}
	b, err := e.ctrl.RecvBytes(ctx)
	if err != nil {
		return nil, fmt.Errorf("selection: receive architectures: %w", err)
	}
	var out []secure.Arch
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("selection: decode architectures: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("selection: %d architectures for %d phases", len(out), n)
	}
	if _, ok := e.eval.(*dataEvaluator); ok {
		emb := e.do.Embedding.Config
		for i, a := range out {
			sp := e.p.Schedule[i].Proxy
			switch {
			case a.Family != emb.Family || a.Hidden != emb.Hidden:
				return nil, fmt.Errorf("selection: phase %d proxy is a %s of width %d, the embedding model a %s of width %d", i, a.Family, a.Hidden, emb.Family, emb.Hidden)
			case a.Seq != e.seq:
				return nil, fmt.Errorf("selection: phase %d proxy for %d tokens, the pool has %d", i, a.Seq, e.seq)
			case sp.Layers != 0 && a.Layers != sp.Layers, sp.Heads != 0 && a.Heads != sp.Heads, sp.Hidden != 0 && a.MLPHidden != sp.Hidden:
				return nil, fmt.Errorf("selection: phase %d proxy ⟨%d, %d, %d⟩ differs from the schedule's %+v", i, a.Layers, a.Heads, a.MLPHidden, sp)
			}
		}
	}
	return out, nil
}

// phase runs phase i on the candidates cand: the batches not yet finished,
// then QuickSelect. It returns the statistics and the entropy shares.
func (e *engine) phase(ctx context.Context, i int, seed share.Seed, arch secure.Arch, cand []int) (PhaseStats, *share.Tensor, error) {
	start := time.Now()
	c0, d0 := e.conn.Stats(), e.prov.Stats()
	keep := e.p.keep(i)
	B := e.p.BatchSize
	nb := (len(cand) + B - 1) / B
	ps := PhaseStats{In: len(cand), Out: keep, Batches: nb}
	vals := make([]uint64, len(cand))
	ph := &e.st.Phases[i]
	done := make([]bool, nb)
	for _, b := range ph.Batches {
		lo, hi := b.Batch*B, min((b.Batch+1)*B, len(cand))
		if b.Batch >= nb || len(b.Shares) != hi-lo {
			return ps, nil, fmt.Errorf("selection: state: phase %d batch %d does not fit %d candidates", i, b.Batch, len(cand))
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
	if !ph.Done {
		r0 := e.sess.Stream().Stats().Rounds
		if len(pending) > 0 {
			fw, err := e.eval.Prepare(ctx, e.sess, i, arch, e.st.Epoch<<EpochShift|uint64(i)<<32)
			if err != nil {
				return ps, nil, fmt.Errorf("selection: phase %d: prepare: %w", i, err)
			}
			slotRounds, err := e.forwardBatches(ctx, i, fw, cand, pending, vals, ps.Resumed, nb)
			if err != nil {
				return ps, nil, err
			}
			ps.ForwardRounds = e.sess.Stream().Stats().Rounds - r0 + slotRounds
		}
		t, _ := share.FromData(vals, len(vals))
		prg := share.NewPRG(seed, fmt.Sprintf("selectformer/selection/pivots/phase-%d", i))
		pos, sst, err := TopK(ctx, e.sess, t, cand, keep, prg)
		if err != nil {
			return ps, nil, fmt.Errorf("selection: phase %d: %w", i, err)
		}
		ps.Comparisons, ps.Steps, ps.SelectRounds = sst.Comparisons, sst.Steps, sst.Rounds
		surv := make([]int, len(pos))
		for j, p := range pos {
			surv[j] = cand[p]
		}
		e.stMu.Lock()
		ph.Done, ph.Survivors = true, surv
		err = e.checkpoint()
		e.stMu.Unlock()
		if err != nil {
			return ps, nil, err
		}
	}
	c1, d1 := e.conn.Stats().Sub(c0), e.prov.Stats()
	ps.BytesSent, ps.BytesRecv = c1.BytesSent, c1.BytesRecv
	ps.DealerBytes = d1.BytesRecv - d0.BytesRecv + d1.BytesSent - d0.BytesSent
	ps.Seconds = time.Since(start).Seconds()
	e.logf().Info("selection: phase done", "party", e.party, "phase", i, "in", ps.In, "out", ps.Out, "comparisons", ps.Comparisons,
		"forward_rounds", ps.ForwardRounds, "select_rounds", ps.SelectRounds, "bytes_sent", ps.BytesSent, "seconds", ps.Seconds)
	t, _ := share.FromData(vals, len(vals))
	return ps, t, nil
}

// forwardBatches is THE batch loop: the pending batches run on the W batch
// slots, slot w taking pending[w], pending[w+W], ... (both parties assign
// alike), each on its own stream and session. After every batch the
// shares are checkpointed. It returns the largest round count of a slot.
func (e *engine) forwardBatches(ctx context.Context, phase int, fw Forwarder, cand, pending []int, vals []uint64, already, total int) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	B := e.p.BatchSize
	W := len(e.slots)
	start := time.Now()
	var mu sync.Mutex
	finished := 0
	lastLog := start
	errs := make([]error, W)
	rounds := make([]int64, W)
	var wg sync.WaitGroup
	for w := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := e.slots[w]
			r0 := s.Stream().Stats().Rounds
			defer func() { rounds[w] = s.Stream().Stats().Rounds - r0 }()
			for j := w; j < len(pending); j += W {
				b := pending[j]
				lo, hi := b*B, min((b+1)*B, len(cand))
				t, err := fw.Forward(ctx, s, cand[lo:hi])
				if err == nil && len(t.Data) != hi-lo {
					err = fmt.Errorf("%d entropies for %d candidates", len(t.Data), hi-lo)
				}
				if err != nil {
					errs[w] = fmt.Errorf("selection: phase %d batch %d: %w", phase, b, err)
					cancel()
					return
				}
				bs := BatchShares{Batch: b, Epoch: e.st.Epoch, Shares: append([]uint64(nil), t.Data...)}
				if e.stateDir != "" {
					err = saveBatch(e.stateDir, e.party, phase, bs)
				}
				e.stMu.Lock()
				copy(vals[lo:hi], bs.Shares)
				e.st.Phases[phase].Batches = append(e.st.Phases[phase].Batches, bs)
				e.stMu.Unlock()
				if err != nil {
					errs[w] = err
					cancel()
					return
				}
				mu.Lock()
				finished++
				pr := Progress{Phase: phase, Done: already + finished, Total: total}
				el := time.Since(start).Seconds()
				if el > 0 {
					pr.Rate = float64(finished) / el
					pr.ETA = time.Duration(float64(total-pr.Done) / pr.Rate * float64(time.Second))
				}
				level := slog.LevelDebug
				if pr.Done == total || time.Since(lastLog) >= ProgressLogInterval {
					level, lastLog = slog.LevelInfo, time.Now()
				}
				mu.Unlock()
				e.logf().Log(ctx, level, "selection: progress", "party", e.party, "phase", phase, "done", pr.Done, "total", pr.Total,
					"batches_per_s", pr.Rate, "eta", pr.ETA.Round(time.Second))
				if e.onProgress != nil {
					e.onProgress(pr)
				}
			}
		}()
	}
	wg.Wait()
	var maxR int64
	for _, r := range rounds {
		maxR = max(maxR, r)
	}
	// Prefer the error that caused the others' cancellation.
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return maxR, err
		}
	}
	for _, err := range errs {
		if err != nil {
			return maxR, err
		}
	}
	return maxR, nil
}

// appraise reveals the mean entropy of the final set, or only whether it
// exceeds the model owner's threshold.
func (e *engine) appraise(ctx context.Context, vals *share.Tensor, keys, sel []int) (*Appraisal, error) {
	pos := make(map[int]int, len(keys))
	for j, k := range keys {
		pos[k] = j
	}
	var sum uint64
	for _, k := range sel {
		sum += vals.Data[pos[k]]
	}
	st, _ := share.FromData([]uint64{sum}, 1)
	mean, err := e.sess.MulPublicScalar(ctx, st, 1/float64(len(sel)))
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	a := &Appraisal{Mode: e.p.Appraisal}
	if e.p.Appraisal == AppraiseMean {
		v, err := e.sess.Reveal(ctx, mean)
		if err != nil {
			return nil, fmt.Errorf("selection: appraisal: %w", err)
		}
		a.Mean = e.p.FixedPoint.Decode(v.Data[0])
		return a, nil
	}
	var t *share.Tensor
	if e.party == 0 {
		enc, err := e.p.FixedPoint.EncodeTensor([]float64{e.mo.Threshold}, 1)
		if err != nil {
			return nil, fmt.Errorf("selection: appraisal threshold: %w", err)
		}
		t, err = e.sess.ShareInput(0, enc)
		if err != nil {
			return nil, fmt.Errorf("selection: appraisal: %w", err)
		}
	} else if t, err = e.sess.ShareInput(0, nil, 1); err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	bits, err := e.sess.CompareReveal(ctx, t, mean)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	a.Exceeds = bits[0]
	return a, nil
}

package lanes

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// EpochShift places each run's correlated randomness in its own counter
// range: in epoch e every stream starts at counter e << EpochShift.
const EpochShift = 40

// MaxEpoch bounds the epochs of a session: e << EpochShift must not wrap
// around, so every epoch lies in 1..MaxEpoch−1 (Start refuses others).
const MaxEpoch = 1 << (64 - EpochShift)

// Within an epoch, a lane's stream gives batch b of phase i the counters
// from epoch<<EpochShift | i<<phaseShift | (b/W)<<batchShift on: each batch
// its own dealer sub-stream, whatever the order in which batches run or
// finish, and the same one with the pipeline on or off.
const (
	phaseShift = 32
	batchShift = 18
)

// Bounds of the counter layout: a session's phases, a lane's batches in a
// phase, and the dealer items of one batch.
const (
	// MaxPhases is the most phases of a run.
	MaxPhases = 1 << (EpochShift - phaseShift)
	// MaxLaneBatches is the most batches one lane runs in a phase.
	MaxLaneBatches = 1 << (phaseShift - batchShift)
	// MaxBatchItems is the most dealer items one batch may draw.
	MaxBatchItems = 1 << batchShift
)

// Config is what one party's Scheduler is built from: both parties build
// theirs from the same public parameters, so that their lanes meet.
type Config struct {
	// Party is this party: 0 (model owner) or 1 (data owner).
	Party int
	// Conn is the connection to the peer.
	Conn *transport.Conn
	// Provider is the party's provider of correlated randomness (the
	// scheduler positions its counters and prefetches from it).
	Provider beaver.Provider
	// FixedPoint is the sessions' fixed-point encoding.
	FixedPoint share.FixedPoint
	// Workers is the number of batch lanes the scheduler opens (≥ 1): the
	// most any phase runs (each Run says how many of them its phase uses).
	Workers int
	// Pipeline runs every lane at once and prefetches; off, one batch runs
	// at a time and nothing is prefetched.
	Pipeline bool
	// MemoryBudget bounds the bytes of prefetched material held at once
	// (≤ 0: nothing is prefetched).
	MemoryBudget int64
	// MinStreamWindow is the smallest window a batch streams its material
	// through when the budget cannot hold two batches a lane
	// (DefaultMinStreamWindow when 0; see prefetch.go).
	MinStreamWindow int64
	// ControlStream is the control session's stream; lane w's stream is
	// LaneStreamBase + w. They must not overlap.
	ControlStream, LaneStreamBase uint32
}

// Scheduler is the batch scheduler of one party's run, the one place that
// decides where the secure computation runs: which streams exist, which
// protocol session (the control session or a batch lane's) runs what,
// which batch goes to which lane and when, where the provider's counters
// stand for each batch, which weight ids a phase uses, and which dealer
// material is fetched ahead of use. Both parties build the same schedule
// from the same public parameters, so their lanes meet.
//
// The j-th pending batch of a phase runs on lane j mod W (W, the phase's
// lanes, at most Config.Workers: Run's lanes), on the lane's stream LaneStreamBase+w and protocol
// session, with the dealer counters of its own sub-stream (batchCounter).
// Each lane runs its batches in order. With the pipeline on, every lane
// runs at once (a batch starts as soon as its lane's previous batch is
// done), so the exchanges of all lanes share each round trip of the link
// and one batch computes while the others wait on the network; with it
// off, one batch runs at a time, in ascending order. Either way the lowest
// unfinished batch runs on both sides (its lane's earlier batches are
// done), whatever each party's mode: the schedule cannot deadlock.
//
// With the pipeline on, the dealer material of upcoming batches is
// prefetched (prefetch.go): a rehearsal of a full batch of the phase
// (protocol.Rehearse) gives the script of its dealer requests (the secure
// forward is data-oblivious: every full batch draws the same sequence),
// and each lane's next batch is drawn by that script (protocol.Prefetch)
// while the lane's current batch runs, as long as the material held fits
// in Config.MemoryBudget. When the budget cannot hold two batches a lane,
// part of it is kept for windows: a batch that starts without its whole
// material at hand streams it through a window (protocol.NewPrefetchWindow:
// one sequence per half window) instead of drawing item by item, so that
// on a distant dealer a batch waits a round trip per half window rather
// than one per item.
type Scheduler struct {
	party     int
	conn      *transport.Conn
	prov      beaver.Provider
	fp        share.FixedPoint
	workers   int
	pipeline  bool
	budget    int64
	minWindow int64
	ctrlID    uint32
	laneBase  uint32

	epoch uint64
	ctrl  *protocol.Session
	slots []*protocol.Session
	lanes *laneProvider
	// gate (pipeline on) lets one lane per core compute at once, the
	// oldest batch first; the lanes' streams carry the same priorities.
	gate *protocol.ComputeGate
}

// New returns the scheduler of c; it opens no session (Start does).
func New(c Config) (*Scheduler, error) {
	switch {
	case c.Party != 0 && c.Party != 1:
		return nil, fmt.Errorf("lanes: party %d, want 0 or 1", c.Party)
	case c.Conn == nil:
		return nil, fmt.Errorf("lanes: nil connection")
	case c.Provider == nil || c.Provider.Party() != c.Party:
		return nil, fmt.Errorf("lanes: no provider of party %d", c.Party)
	case c.Workers < 1:
		return nil, fmt.Errorf("lanes: %d lanes, want ≥ 1", c.Workers)
	case uint64(c.LaneStreamBase)+uint64(c.Workers) > 1<<32:
		return nil, fmt.Errorf("lanes: %d lanes from stream %d overflow the stream ids", c.Workers, c.LaneStreamBase)
	case c.ControlStream >= c.LaneStreamBase && uint64(c.ControlStream) < uint64(c.LaneStreamBase)+uint64(c.Workers):
		return nil, fmt.Errorf("lanes: control stream %d is a lane's (%d..%d)", c.ControlStream, c.LaneStreamBase, uint64(c.LaneStreamBase)+uint64(c.Workers)-1)
	}
	s := &Scheduler{party: c.Party, conn: c.Conn, prov: c.Provider, fp: c.FixedPoint, workers: c.Workers,
		pipeline: c.Pipeline, budget: c.MemoryBudget, minWindow: c.MinStreamWindow, ctrlID: c.ControlStream, laneBase: c.LaneStreamBase}
	if s.minWindow <= 0 {
		s.minWindow = DefaultMinStreamWindow
	}
	if !s.pipeline || s.budget < 0 {
		s.budget = 0
	}
	s.lanes = newLaneProvider(c.Provider, s)
	if s.pipeline {
		s.gate = protocol.NewComputeGate(runtime.GOMAXPROCS(0))
	}
	return s, nil
}

// Streams returns the streams whose correlated randomness the scheduler
// positions: the control session's, then each lane's.
func (s *Scheduler) Streams() []uint32 {
	out := []uint32{s.ctrlID}
	for w := range s.workers {
		out = append(out, s.slotStream(w))
	}
	return out
}

// Online returns this party's traffic so far on the scheduler's streams
// (the control session and the batch lanes): online traffic only, without
// that of a provider sharing the connection (ot.Provider makes its
// correlations on streams of its own).
func (s *Scheduler) Online() transport.Stats {
	var st transport.Stats
	for _, id := range s.Streams() {
		st = st.Add(s.conn.Stream(id).Stats())
	}
	return st
}

// MemoryBudget returns the bytes of prefetched material the scheduler may
// hold at once (0: it prefetches nothing).
func (s *Scheduler) MemoryBudget() int64 { return s.budget }

// slotStream is the stream of batch lane w.
func (s *Scheduler) slotStream(w int) uint32 { return s.laneBase + uint32(w) }

// batchCounter is the first counter of batch b of phase, run on W lanes,
// on its lane's stream in this epoch. A lane's batches ascend by at least
// W (it takes every W-th pending batch), so their counter ranges ascend
// too; phases have ranges of their own, whatever their lanes.
func (s *Scheduler) batchCounter(phase, W, b int) uint64 {
	return s.epoch<<EpochShift | uint64(phase)<<phaseShift | uint64(b/W)<<batchShift
}

// Start begins epoch: it moves every stream's provider counter to
// epoch<<EpochShift, so that no two runs of a session touch the same
// material, and opens the control session and the lanes' sessions (their
// setup exchanges run concurrently: one round trip for all).
func (s *Scheduler) Start(ctx context.Context, epoch uint64) error {
	if epoch == 0 || epoch >= MaxEpoch {
		return fmt.Errorf("lanes: start epoch %d: outside 1..%d", epoch, MaxEpoch-1)
	}
	s.epoch = epoch
	if err := s.position(); err != nil {
		return err
	}
	var err error
	if s.ctrl, err = protocol.NewSession(ctx, s.party, s.conn.Stream(s.ctrlID), s.prov, s.fp); err != nil {
		return fmt.Errorf("lanes: control session: %w", err)
	}
	s.slots = make([]*protocol.Session, s.workers)
	errs := make([]error, s.workers)
	var wg sync.WaitGroup
	for w := range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.slots[w], errs[w] = protocol.NewSession(ctx, s.party, s.conn.Stream(s.slotStream(w)), s.lanes, s.fp)
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			return fmt.Errorf("lanes: batch lane %d session: %w", w, err)
		}
	}
	return nil
}

// position moves every stream's provider counter to the epoch's first,
// epoch<<EpochShift.
func (s *Scheduler) position() error {
	for _, id := range s.Streams() {
		if err := s.prov.Seek(id, s.epoch<<EpochShift); err != nil {
			return fmt.Errorf("lanes: start epoch %d: %w", s.epoch, err)
		}
	}
	return nil
}

// Bind keys all further correlated randomness by the dealer session id,
// then positions the streams again (where they already are): a provider
// that keeps persistent high-water marks per session (marks.Provider, as
// selection wraps it) checks the epoch's counters against the session's marks
// before anything is drawn.
func (s *Scheduler) Bind(ctx context.Context, id beaver.SessionID) error {
	if err := s.prov.BindSession(ctx, id); err != nil {
		return fmt.Errorf("lanes: dealer session: %w", err)
	}
	return s.position()
}

// Control returns the control session (weight sharing, QuickSelect,
// appraisal) of the running epoch.
func (s *Scheduler) Control() *protocol.Session { return s.ctrl }

// WeightBase is the first weight id of phase in this epoch: distinct per
// phase and run, so that weight masks never serve two different matrices.
func (s *Scheduler) WeightBase(phase int) uint64 {
	return s.epoch<<EpochShift | uint64(phase)<<32
}

// Batches returns the number of batches of n candidates cut into batches
// of size (≥ 1) candidates.
func Batches(n, size int) int { return (n + size - 1) / size }

// Span returns the candidate positions [lo, hi) of batch b of n candidates
// cut into batches of size (≥ 1).
func Span(b, n, size int) (lo, hi int) {
	return b * size, min((b+1)*size, n)
}

// Stats are the scheduler's figures of one Run.
type Stats struct {
	// Rounds is the forward's critical path: the largest number of rounds
	// a lane took with the pipeline on, their sum with it off.
	Rounds int64
	// PeakInFlight is the most batches that ran at once.
	PeakInFlight int
	// Prefetched counts the batches whose material was fetched ahead,
	// Streamed those that drew theirs through a window as they ran (the
	// budget could not hold their whole material; see MinStreamWindow).
	Prefetched, Streamed int
	// PeakHeld is the most bytes of prefetched material held at once, and
	// BatchBytes the material of one full batch (0 when not rehearsed).
	PeakHeld, BatchBytes int64
}

// Run runs do for every batch of pending (ascending batch numbers of
// phase, whose n candidates make batches of size candidates: Span) on the
// phase's first lanes lanes (W, 1..Config.Workers: both parties pass the
// same lanes and size), pending[j]
// on lane j mod W, each lane's batches in order: with the pipeline on, all lanes at once;
// with it off, one batch at a time in ascending order. Each batch starts at its own dealer counters (batchCounter), drawn
// from the lane's prefetched material where there is some. The first error
// cancels the others and is returned (the one that caused the cancellation
// rather than a cancellation).
//
// rehearse, if set, runs a batch like do but on a rehearsal session and
// without keeping anything: the scheduler rehearses one full batch before
// the lanes start, to learn the dealer requests of a batch and prefetch the
// material of every lane's batches from the start (see beginPhase).
func (s *Scheduler) Run(ctx context.Context, phase, lanes, size, n int, pending []int, do, rehearse func(ctx context.Context, slot *protocol.Session, batch int) error) (Stats, error) {
	var st Stats
	if lanes < 1 || lanes > len(s.slots) {
		return st, fmt.Errorf("lanes: phase %d: %d lanes, the scheduler has %d", phase+1, lanes, len(s.slots))
	}
	if size < 1 {
		return st, fmt.Errorf("lanes: phase %d: batches of %d candidates, want ≥ 1", phase+1, size)
	}
	for i := 1; i < len(pending); i++ {
		if pending[i] <= pending[i-1] {
			return st, fmt.Errorf("lanes: phase %d: pending batches not ascending", phase+1)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	W, slots := lanes, s.slots[:lanes]
	r0 := make([]int64, W)
	for w, slot := range slots {
		r0[w] = slot.Stream().Stats().Rounds
	}
	if !s.pipeline {
		rehearse = nil // nothing is prefetched
	}
	pf, err := s.lanes.beginPhase(ctx, phase, W, size, n, pending, rehearse)
	if err != nil {
		return st, err
	}
	defer s.lanes.endPhase()

	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
		inFlight atomic.Int64
		peak     atomic.Int64
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil || errors.Is(firstErr, context.Canceled) && !errors.Is(err, context.Canceled) {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	// run runs pending[j] for j = from, from+step, ... in order.
	run := func(from, step int) {
		defer wg.Done()
		for j := from; j < len(pending) && ctx.Err() == nil; j += step {
			k := inFlight.Add(1)
			for {
				p := peak.Load()
				if k <= p || peak.CompareAndSwap(p, k) {
					break
				}
			}
			err := s.runOne(ctx, pf, phase, pending[j], j%W, do)
			inFlight.Add(-1)
			if err != nil {
				fail(err)
				return
			}
		}
	}
	if s.pipeline {
		// Every lane on its own: a slow batch holds back its lane only.
		for w := range min(W, len(pending)) {
			wg.Add(1)
			go run(w, W)
		}
	} else {
		wg.Add(1)
		run(0, 1)
	}
	wg.Wait()
	for w, slot := range slots {
		r := slot.Stream().Stats().Rounds - r0[w]
		if s.pipeline {
			st.Rounds = max(st.Rounds, r) // the lanes' rounds overlap
		} else {
			st.Rounds += r // one batch after another
		}
	}
	st.PeakInFlight = int(peak.Load())
	st.Prefetched, st.Streamed, st.PeakHeld, st.BatchBytes = pf.stats()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("lanes: phase %d: %w", phase+1, ctx.Err())
	}
	return st, firstErr
}

// runOne runs batch b on lane w: from its prefetched material, or after
// seeking the lane's stream to the batch's counters.
func (s *Scheduler) runOne(ctx context.Context, pf *phaseFetch, phase, b, w int, do func(ctx context.Context, slot *protocol.Session, batch int) error) error {
	lb, err := pf.begin(ctx, b)
	if err != nil {
		return fmt.Errorf("lanes: phase %d batch %d: %w", phase+1, b, err)
	}
	slot := s.slots[w]
	if s.pipeline {
		// Served by batch number: the oldest batch in flight computes and
		// sends first, the others fill the gaps (see protocol.ComputeGate).
		if err := slot.Enter(ctx, s.gate, int64(b)); err != nil {
			pf.finish(lb, false)
			return fmt.Errorf("lanes: phase %d batch %d: %w", phase+1, b, err)
		}
	}
	err = do(ctx, slot, b)
	slot.Leave()
	if ferr := pf.finish(lb, err == nil); err == nil && ferr != nil {
		err = fmt.Errorf("lanes: phase %d batch %d: %w", phase+1, b, ferr)
	}
	return err
}

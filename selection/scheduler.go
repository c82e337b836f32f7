package selection

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

// Stream ids used on the connection.
const (
	// StreamControl carries the clear messages (hello, coin, bootstrap, archs).
	StreamControl uint32 = 1
	// StreamSession carries the control session (weight sharing, QuickSelect,
	// appraisal).
	StreamSession uint32 = 2
	// StreamSlotBase is the stream of batch lane 0; lane w uses
	// StreamSlotBase + w.
	StreamSlotBase uint32 = 16
)

// EpochShift places each run's correlated randomness in its own counter
// range: in epoch e every stream starts at counter e << EpochShift.
const EpochShift = 40

// MaxEpoch bounds the epochs of a session: e << EpochShift must not wrap
// around, so every epoch lies in 1..MaxEpoch−1. A peer announcing an epoch
// outside that range is refused (EpochError), and a session whose epochs
// are used up refuses to run another.
const MaxEpoch = 1 << (64 - EpochShift)

// MaxEpochLead is the most a peer's epoch may lead this party's in the
// handshake. Each party adds one to its own epoch before every run (before
// the handshake) and both adopt the larger after it, so honest epochs
// differ only by the runs one party started whose handshake the other
// never completed (the other side failed or was refused before its own
// hello): a few, one per manual restart. A larger lead is refused
// (EpochError): a forging peer can then advance this party's epoch by at
// most MaxEpochLead per run, and never onto an epoch it already used.
const MaxEpochLead = 1024

// Within an epoch, a lane's stream gives batch b of phase i the counters
// from epoch<<EpochShift | i<<phaseShift | (b/W)<<batchShift on: each batch
// its own dealer sub-stream, whatever the order in which batches run or
// finish, and the same one with the pipeline on or off.
const (
	phaseShift     = 32
	batchShift     = 18
	maxPhases      = 1 << (EpochShift - phaseShift)
	maxLaneBatches = 1 << (phaseShift - batchShift)
	// maxBatchItems is the most dealer items one batch may draw.
	maxBatchItems = 1 << batchShift
)

// scheduler is the batch scheduler of one party's run, the one place that
// decides where the secure computation runs: which streams exist, which
// protocol session (the control session or a batch lane's) runs what,
// which batch goes to which lane and when, where the provider's counters
// stand for each batch, which weight ids a phase uses, and which dealer
// material is fetched ahead of use. Both parties build the same schedule
// from the same public parameters, so their lanes meet.
//
// The j-th pending batch of a phase runs on lane j mod W (W =
// Params.Workers), on the lane's stream StreamSlotBase+w and protocol
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
// prefetched (see prefetcher): the first full batch of a phase records the
// sequence of requests (the secure forward is data-oblivious: every full
// batch draws the same sequence), and from then on each lane's next batch
// is fetched while the lane's current batch runs, as long as the material
// held fits in Params.MemoryBudget.
type scheduler struct {
	party     int
	conn      *transport.Conn
	prov      beaver.Provider
	fp        share.FixedPoint
	batchSize int
	workers   int
	pipeline  bool
	budget    int64

	epoch uint64
	ctrl  *protocol.Session
	slots []*protocol.Session
	lanes *laneProvider
	// gate (pipeline on) lets one lane per core compute at once, the
	// oldest batch first; the lanes' streams carry the same priorities.
	gate *protocol.ComputeGate
}

// newScheduler returns the scheduler of p (after defaults) for party.
func newScheduler(party int, conn *transport.Conn, prov beaver.Provider, p Params) *scheduler {
	s := &scheduler{party: party, conn: conn, prov: prov, fp: p.FixedPoint, batchSize: p.BatchSize, workers: p.Workers,
		pipeline: p.Pipeline != PipelineOff, budget: p.MemoryBudget}
	if !s.pipeline || s.budget < 0 {
		s.budget = 0
	}
	s.lanes = newLaneProvider(prov, s)
	if s.pipeline {
		s.gate = protocol.NewComputeGate(runtime.GOMAXPROCS(0))
	}
	return s
}

// streams returns the streams whose correlated randomness the scheduler
// positions: the control session's, then each lane's.
func (s *scheduler) streams() []uint32 {
	out := []uint32{StreamSession}
	for w := range s.workers {
		out = append(out, s.slotStream(w))
	}
	return out
}

// online returns this party's traffic so far on the selection's own
// streams (the clear control stream, the control session and the batch
// lanes): the online traffic, without that of a provider sharing the
// connection (ot.Provider makes its correlations on streams of its own).
func (s *scheduler) online() transport.Stats {
	st := s.conn.Stream(StreamControl).Stats()
	for _, id := range s.streams() {
		st = st.Add(s.conn.Stream(id).Stats())
	}
	return st
}

// slotStream is the stream of batch lane w.
func (s *scheduler) slotStream(w int) uint32 { return StreamSlotBase + uint32(w) }

// batchCounter is the first counter of batch b of phase on its lane's
// stream in this epoch. A lane's batches ascend by at least W (it takes
// every W-th pending batch), so their counter ranges ascend too.
func (s *scheduler) batchCounter(phase, b int) uint64 {
	return s.epoch<<EpochShift | uint64(phase)<<phaseShift | uint64(b/s.workers)<<batchShift
}

// start begins epoch: it moves every stream's provider counter to
// epoch<<EpochShift, so that no two runs of a session touch the same
// material, and opens the control session and the lanes' sessions (their
// setup exchanges run concurrently: one round trip for all).
func (s *scheduler) start(ctx context.Context, epoch uint64) error {
	if epoch == 0 || epoch >= MaxEpoch {
		return fmt.Errorf("selection: start epoch %d: outside 1..%d", epoch, MaxEpoch-1)
	}
	s.epoch = epoch
	if err := s.position(); err != nil {
		return err
	}
	var err error
	if s.ctrl, err = protocol.NewSession(ctx, s.party, s.conn.Stream(StreamSession), s.prov, s.fp); err != nil {
		return fmt.Errorf("selection: control session: %w", err)
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
			return fmt.Errorf("selection: batch lane %d session: %w", w, err)
		}
	}
	return nil
}

// position moves every stream's provider counter to the epoch's first,
// epoch<<EpochShift.
func (s *scheduler) position() error {
	for _, id := range s.streams() {
		if err := s.prov.Seek(id, s.epoch<<EpochShift); err != nil {
			return fmt.Errorf("selection: start epoch %d: %w", s.epoch, err)
		}
	}
	return nil
}

// bind keys all further correlated randomness by the dealer session id,
// then positions the streams again (where they already are): a provider
// that keeps persistent high-water marks per session (beaver.Marked, as
// Run wraps it) checks the epoch's counters against the session's marks
// before anything is drawn.
func (s *scheduler) bind(ctx context.Context, id beaver.SessionID) error {
	if err := s.prov.BindSession(ctx, id); err != nil {
		return fmt.Errorf("selection: dealer session: %w", err)
	}
	return s.position()
}

// control returns the control session (weight sharing, QuickSelect,
// appraisal).
func (s *scheduler) control() *protocol.Session { return s.ctrl }

// weightBase is the first weight id of phase in this epoch: distinct per
// phase and run, so that weight masks never serve two different matrices.
func (s *scheduler) weightBase(phase int) uint64 {
	return s.epoch<<EpochShift | uint64(phase)<<32
}

// batches returns the number of batches of n candidates.
func (s *scheduler) batches(n int) int { return (n + s.batchSize - 1) / s.batchSize }

// span returns the candidate positions [lo, hi) of batch b of n candidates.
func (s *scheduler) span(b, n int) (lo, hi int) {
	return b * s.batchSize, min((b+1)*s.batchSize, n)
}

// runStats are the scheduler's figures of one runBatches.
type runStats struct {
	// rounds is the forward's critical path: the largest number of rounds
	// a lane took with the pipeline on, their sum with it off.
	rounds int64
	// peakInFlight is the most batches that ran at once.
	peakInFlight int
	// prefetched counts the batches whose material was fetched ahead.
	prefetched int
	// peakHeld is the most bytes of prefetched material held at once, and
	// batchBytes the material of one full batch (0 before it is known).
	peakHeld, batchBytes int64
}

// runBatches runs do for every batch of pending (ascending batch numbers of
// phase, whose n candidates make batches of span), pending[j] on lane j mod
// W, each lane's batches in order: with the pipeline on, all lanes at once;
// with it off, one batch at a time in ascending order. Each batch starts at its own dealer counters (batchCounter), drawn
// from the lane's prefetched material where there is some. The first error
// cancels the others and is returned (the one that caused the cancellation
// rather than a cancellation).
//
// rehearse, if set, runs a batch like do but on a rehearsal session and
// without keeping anything: the scheduler rehearses one full batch before
// the lanes start, to learn the dealer requests of a batch and prefetch the
// material of every lane's batches from the start (see beginPhase).
func (s *scheduler) runBatches(ctx context.Context, phase, n int, pending []int, do, rehearse func(ctx context.Context, slot *protocol.Session, batch int) error) (runStats, error) {
	var st runStats
	for i := 1; i < len(pending); i++ {
		if pending[i] <= pending[i-1] {
			return st, fmt.Errorf("selection: phase %d: pending batches not ascending", phase+1)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	W := len(s.slots)
	r0 := make([]int64, W)
	for w, slot := range s.slots {
		r0[w] = slot.Stream().Stats().Rounds
	}
	if !s.pipeline {
		rehearse = nil // nothing is prefetched
	}
	pf, err := s.lanes.beginPhase(ctx, phase, n, pending, rehearse)
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
	for w, slot := range s.slots {
		r := slot.Stream().Stats().Rounds - r0[w]
		if s.pipeline {
			st.rounds = max(st.rounds, r) // the lanes' rounds overlap
		} else {
			st.rounds += r // one batch after another
		}
	}
	st.peakInFlight = int(peak.Load())
	st.prefetched, st.peakHeld, st.batchBytes = pf.stats()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = fmt.Errorf("selection: phase %d: %w", phase+1, ctx.Err())
	}
	return st, firstErr
}

// runOne runs batch b on lane w: from its prefetched material, or after
// seeking the lane's stream to the batch's counters.
func (s *scheduler) runOne(ctx context.Context, pf *phaseFetch, phase, b, w int, do func(ctx context.Context, slot *protocol.Session, batch int) error) error {
	lb, err := pf.begin(ctx, b)
	if err != nil {
		return fmt.Errorf("selection: phase %d batch %d: %w", phase+1, b, err)
	}
	slot := s.slots[w]
	if s.pipeline {
		// Served by batch number: the oldest batch in flight computes and
		// sends first, the others fill the gaps (see protocol.ComputeGate).
		if err := slot.Enter(ctx, s.gate, int64(b)); err != nil {
			pf.finish(lb, false)
			return fmt.Errorf("selection: phase %d batch %d: %w", phase+1, b, err)
		}
	}
	err = do(ctx, slot, b)
	slot.Leave()
	if ferr := pf.finish(lb, err == nil); err == nil && ferr != nil {
		err = fmt.Errorf("selection: phase %d batch %d: %w", phase+1, b, ferr)
	}
	return err
}

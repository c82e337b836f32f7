package selection

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	// StreamSlotBase is the stream of batch slot 0; slot w uses
	// StreamSlotBase + w.
	StreamSlotBase uint32 = 16
)

// EpochShift places each run's correlated randomness in its own counter
// range: in epoch e every stream starts at counter e << EpochShift.
const EpochShift = 40

// scheduler is the batch scheduler of one party's run, the one place that
// decides where the secure computation runs: which streams exist, which
// protocol session (the control session or a batch slot's) runs what,
// which batch goes to which slot, where the provider's counters stand in
// each epoch and which weight ids a phase uses. Both parties build the same
// schedule from the same public parameters, so their slots meet.
//
// Today a batch runs on slot w when it is the w-th, (w+W)-th, ... pending
// batch of its phase, W = Params.Workers, and every slot's stream starts the
// epoch at counter epoch<<EpochShift.
type scheduler struct {
	party     int
	conn      *transport.Conn
	prov      beaver.Provider
	fp        share.FixedPoint
	batchSize int
	workers   int

	epoch uint64
	ctrl  *protocol.Session
	slots []*protocol.Session
}

// newScheduler returns the scheduler of p (after defaults) for party.
func newScheduler(party int, conn *transport.Conn, prov beaver.Provider, p Params) *scheduler {
	return &scheduler{party: party, conn: conn, prov: prov, fp: p.FixedPoint, batchSize: p.BatchSize, workers: p.Workers}
}

// streams returns the streams whose correlated randomness the scheduler
// positions: the control session's, then each slot's.
func (s *scheduler) streams() []uint32 {
	out := []uint32{StreamSession}
	for w := range s.workers {
		out = append(out, s.slotStream(w))
	}
	return out
}

// slotStream is the stream of batch slot w.
func (s *scheduler) slotStream(w int) uint32 { return StreamSlotBase + uint32(w) }

// start begins epoch: it moves every stream's provider counter to
// epoch<<EpochShift, so that no two runs of a session touch the same
// material, and opens the control session and the slots' sessions.
func (s *scheduler) start(ctx context.Context, epoch uint64) error {
	s.epoch = epoch
	for _, id := range s.streams() {
		if err := s.prov.Seek(id, epoch<<EpochShift); err != nil {
			return fmt.Errorf("selection: start epoch %d: %w", epoch, err)
		}
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
			s.slots[w], errs[w] = protocol.NewSession(ctx, s.party, s.conn.Stream(s.slotStream(w)), s.prov, s.fp)
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

// bind keys all further correlated randomness by the dealer session id.
func (s *scheduler) bind(ctx context.Context, id beaver.SessionID) error {
	if err := s.prov.BindSession(ctx, id); err != nil {
		return fmt.Errorf("selection: dealer session: %w", err)
	}
	return nil
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

// runBatches runs do for every batch of pending, on the slots: slot w takes
// pending[w], pending[w+W], ... (both parties assign alike), each on its
// own stream and session. The first error cancels the others and is
// returned (the one that caused the cancellation rather than a
// cancellation). It returns the largest number of rounds a slot took.
func (s *scheduler) runBatches(ctx context.Context, pending []int, do func(ctx context.Context, slot *protocol.Session, batch int) error) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	W := len(s.slots)
	errs := make([]error, W)
	rounds := make([]int64, W)
	var wg sync.WaitGroup
	for w := range W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slot := s.slots[w]
			r0 := slot.Stream().Stats().Rounds
			defer func() { rounds[w] = slot.Stream().Stats().Rounds - r0 }()
			for j := w; j < len(pending); j += W {
				if err := do(ctx, slot, pending[j]); err != nil {
					errs[w] = err
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	var maxR int64
	for _, r := range rounds {
		maxR = max(maxR, r)
	}
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

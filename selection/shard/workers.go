package shard

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/transport"
)

// DefaultWorkerWait is Workers.Wait when 0.
const DefaultWorkerWait = 10 * time.Minute

// Workers is a sharded selection's coordinator side of its party's
// internal connections: the selection.ShardRunner that hands each phase's
// jobs (Job: one a shard with a batch not yet recorded) to the party's K
// workers. Workers connect (Serve accepts them on a transport.Listener,
// Attach takes one connection) and announce their shard index k; a second
// live worker of the same index, an index ≥ K or another party's worker
// is refused. RunPhase sends worker k its job and waits for its result; if
// worker k's connection drops (the worker died), it waits for worker k to
// connect again (at most Wait, and within the context) and sends the job
// again: the restarted worker resumes from its checkpoint. After a
// successful run, Done tells the workers the selection is over, and a
// worker that attaches afterwards (one that was reconnecting, or
// restarting) is answered "done" too; AwaitDone waits until every worker
// has been told.
type Workers struct {
	// Wait bounds how long RunPhase waits for worker k to connect
	// (DefaultWorkerWait when 0).
	Wait time.Duration
	// Logger receives the workers' events (slog.Default() when nil).
	Logger *slog.Logger

	party, shards int
	mu            sync.Mutex
	conns         []*transport.Conn
	changed       chan struct{} // closed and replaced when a worker attaches
	closed        bool
	// finished: Done was called; told[k]: worker k was told so (toldAll
	// is closed once every worker was).
	finished bool
	told     []bool
	nTold    int
	toldAll  chan struct{}
}

// NewWorkers returns the coordinator side of party's shards workers
// (1..MaxShards).
func NewWorkers(party, shards int) (*Workers, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("shard: workers of party %d", party)
	}
	if shards < 1 || shards > MaxShards {
		return nil, fmt.Errorf("shard: %d shards (1..%d)", shards, MaxShards)
	}
	return &Workers{party: party, shards: shards, conns: make([]*transport.Conn, shards), changed: make(chan struct{}),
		told: make([]bool, shards), toldAll: make(chan struct{})}, nil
}

// Shards implements selection.ShardRunner.
func (w *Workers) Shards() int { return w.shards }

// RunPhase implements selection.ShardRunner: it cuts ph into the K shards'
// jobs and runs each on its worker (see Workers).
func (w *Workers) RunPhase(ctx context.Context, ph *selection.ShardedPhase) error {
	return runPhase(ctx, ph, w.shards, w.runJob)
}

func (w *Workers) logf() *slog.Logger {
	if w.Logger == nil {
		return slog.Default()
	}
	return w.Logger
}

// announceTimeout bounds the wait for a connected worker's announcement.
const announceTimeout = 30 * time.Second

// Attach takes a worker's connection: it reads the worker's announcement
// (within 30 s and ctx), refuses (and closes) another party's worker, an
// index ≥ K and a second live worker of the same index, answers "done"
// (and closes) after Done, and otherwise answers "ok" and makes it worker
// k's connection.
func (w *Workers) Attach(ctx context.Context, conn *transport.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	st := conn.Stream(StreamWorker)
	b, err := st.RecvBytes(ctx, len(workerHelloMagic)+5)
	if err != nil {
		conn.Close()
		return fmt.Errorf("shard: workers: announcement: %w", err)
	}
	refuse := func(format string, args ...any) error {
		err := fmt.Errorf(format, args...)
		_ = st.SendBytes(ctx, []byte("refused: "+err.Error()))
		conn.Close()
		return fmt.Errorf("shard: workers: %w", err)
	}
	if len(b) == len(workerHelloMagic)+5 && string(b[:len(oldWorkerHelloMagic)]) == oldWorkerHelloMagic {
		return refuse("a worker of an older version (it does not report its epochs): run the coordinator's version")
	}
	if len(b) != len(workerHelloMagic)+5 || string(b[:len(workerHelloMagic)]) != workerHelloMagic {
		return refuse("not a worker's announcement")
	}
	party, k := int(b[4]), uint64(binary.LittleEndian.Uint32(b[5:]))
	if party != w.party {
		return refuse("a worker of party %d at party %d's coordinator", party, w.party)
	}
	if k >= uint64(w.shards) {
		return refuse("worker index %d, the selection has %d shards (0..%d)", k, w.shards, w.shards-1)
	}
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		err := st.SendBytes(ctx, []byte("done"))
		conn.Close()
		if err != nil {
			return fmt.Errorf("shard: workers: telling worker %d the selection is done: %w", k, err)
		}
		w.markTold(int(k))
		w.logf().Info("shard: worker told the selection is done as it reconnected", "party", w.party, "shard", k)
		return nil
	}
	if w.closed {
		w.mu.Unlock()
		return refuse("the coordinator is stopping (its run failed); connect again to the restarted coordinator")
	}
	if c := w.conns[k]; c != nil && !isDone(c) {
		w.mu.Unlock()
		return refuse("worker %d is already connected", k)
	}
	w.conns[k] = conn
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	if err := st.SendBytes(ctx, []byte("ok")); err != nil {
		return fmt.Errorf("shard: workers: worker %d: %w", k, err)
	}
	w.logf().Info("shard: worker connected", "party", w.party, "shard", k)
	return nil
}

// isDone reports whether c has failed or closed.
func isDone(c *transport.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// Serve accepts workers on ln (each authenticated by transport with the
// party's own fingerprint) until ctx ends or ln closes, attaching each
// (Attach; a refused worker is logged).
func (w *Workers) Serve(ctx context.Context, ln *transport.Listener, fingerprint string) error {
	for {
		c, err := ln.Accept(ctx, fingerprint)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("shard: workers: accept: %w", err)
		}
		go func() {
			if err := w.Attach(ctx, c); err != nil {
				w.logf().Warn("shard: worker refused", "err", err)
			}
		}()
	}
}

// await returns worker k's live connection, waiting at most Wait.
func (w *Workers) await(ctx context.Context, k int) (*transport.Conn, error) {
	wait := w.Wait
	if wait <= 0 {
		wait = DefaultWorkerWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		w.mu.Lock()
		c, ch, closed := w.conns[k], w.changed, w.closed
		w.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("shard: workers closed")
		}
		if c != nil && !isDone(c) {
			return c, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, fmt.Errorf("shard: worker %d did not connect within %v: check that its process runs and reaches this coordinator", k, wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// maxJobResends bounds how often one job is sent again after its worker's
// connection dropped.
const maxJobResends = 100

// runJob sends job to worker job.Shard,
// records each epoch the worker reports before it draws there
// (job.Reached, answered once recorded) and returns the worker's checked
// result, sending the job again, with its raised Floor, to a reconnected
// worker when the connection drops.
func (w *Workers) runJob(ctx context.Context, job *Job) (*Result, error) {
	if job.Shard < 0 || job.Shard >= w.shards || job.Shards != w.shards {
		return nil, fmt.Errorf("shard: job for shard %d of %d at workers of %d", job.Shard, job.Shards, w.shards)
	}
	for range maxJobResends {
		c, err := w.await(ctx, job.Shard)
		if err != nil {
			return nil, err
		}
		res, err := w.runOn(ctx, c, job)
		if !errors.Is(err, errWorkerLost) {
			return res, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		w.logf().Warn("shard: worker connection lost; waiting for the worker to come back", "party", w.party, "shard", job.Shard, "phase", job.Phase+1, "err", err)
		c.Close()
	}
	return nil, fmt.Errorf("shard: worker %d: connection lost %d times", job.Shard, maxJobResends)
}

// errWorkerLost is wrapped by runOn's error when the worker's connection
// failed: the job is sent again once the worker is back.
var errWorkerLost = errors.New("worker connection lost")

// runOn sends job (encoded now: its Floor as last raised) on worker
// connection c and serves the worker's epoch reports until its result.
func (w *Workers) runOn(ctx context.Context, c *transport.Conn, job *Job) (*Result, error) {
	b, err := EncodeJob(job)
	if err != nil {
		return nil, err
	}
	st := c.Stream(StreamWorker)
	if err := st.SendBytes(ctx, append([]byte{'J'}, b...)); err != nil {
		return nil, fmt.Errorf("%w: %w", errWorkerLost, err)
	}
	for {
		rb, err := st.RecvBytes(ctx, 1+max(resultBound(job), maxWorkerError))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errWorkerLost, err)
		}
		if len(rb) == 0 || rb[0] != 'P' {
			switch {
			case len(rb) > 0 && rb[0] == 'R':
				return decodeResult(rb[1:], job)
			case len(rb) > 0 && rb[0] == 'E' && len(rb) <= 1+maxWorkerError:
				return nil, fmt.Errorf("worker %d failed: %s", job.Shard, rb[1:])
			}
			return nil, selection.WithAbortCode(selection.AbortProtocol, fmt.Errorf("shard: worker %d: unreadable answer", job.Shard))
		}
		epoch, err := decodeEpochReport(rb)
		if err == nil {
			err = job.Reached(ctx, epoch)
		}
		if err != nil {
			// The worker draws nothing at the epoch; its job fails.
			_ = st.SendBytes(ctx, []byte("Nnot recorded by the coordinator"))
			return nil, fmt.Errorf("shard: worker %d's epoch report: %w", job.Shard, err)
		}
		if err := st.SendBytes(ctx, []byte{'A'}); err != nil {
			return nil, fmt.Errorf("%w: %w", errWorkerLost, err)
		}
	}
}

// Done tells every connected worker that the selection is done (they
// exit) and closes w: call it after a successful Run. A worker
// that attaches afterwards (while the caller still accepts workers:
// Serve, Attach) is answered "done" as well; AwaitDone waits until every
// worker has been told.
func (w *Workers) Done(ctx context.Context) { w.close(ctx, true) }

// Close closes w and its workers' connections without telling
// them the selection is done: they connect again, to a restarted
// coordinator (call it after a failed Run; after Done it does nothing
// more). RunPhase fails afterwards.
func (w *Workers) Close() { w.close(context.Background(), false) }

func (w *Workers) close(ctx context.Context, done bool) {
	w.mu.Lock()
	if w.finished {
		w.mu.Unlock()
		return
	}
	w.closed, w.finished = true, done
	conns := append([]*transport.Conn(nil), w.conns...)
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
	for k, c := range conns {
		if c != nil && !isDone(c) {
			// A worker whose "done" could not be sent (its connection
			// failing) is told when it reconnects.
			if done && c.Stream(StreamWorker).SendBytes(ctx, []byte{'D'}) == nil {
				w.markTold(k)
			}
			c.Close()
		}
	}
}

// markTold records that worker k was told the selection is done.
func (w *Workers) markTold(k int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told[k] {
		return
	}
	w.told[k] = true
	if w.nTold++; w.nTold == w.shards {
		close(w.toldAll)
	}
}

// AwaitDone waits, after Done, until every worker has been told that the
// selection is done (on its connection at Done, or as it attached
// afterwards), and returns nil; or until ctx ends, and returns an error
// naming the workers not told (they were not connected: they learn it
// only if they attach while w still accepts workers, and otherwise
// fail when they cannot reach their coordinator). Bound ctx: a worker that
// never comes back must not hold the coordinator.
func (w *Workers) AwaitDone(ctx context.Context) error {
	w.mu.Lock()
	finished := w.finished
	w.mu.Unlock()
	if !finished {
		return fmt.Errorf("shard: workers: AwaitDone before Done")
	}
	select {
	case <-w.toldAll:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var missing []int
	for k, t := range w.told {
		if !t {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("shard: workers %v were not told that the selection is done (not connected): %w", missing, context.Cause(ctx))
}

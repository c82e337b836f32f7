package selection

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// The internal connection between a party's coordinator and its workers
// (transport's mutual TLS with the party's own key pair on both ends:
// workers dial the coordinator's WorkerPool) carries, on StreamWorker:
//
//	worker → coordinator  "SFW2" | party u8 | shard u32 (little-endian): the worker's announcement
//	coordinator → worker  "ok"; "done" (the selection is over: the worker
//	                      exits, successfully), or a refusal in words (then
//	                      the connection closes)
//	coordinator → worker  'J' | EncodeJob(job)   a job
//	worker → coordinator  'P' | epoch u64        the pair agreed on epoch: before it draws there
//	coordinator → worker  'A'                    recorded (Job.Reached): the worker goes on, or
//	                      'N' | reason           not recorded: the worker draws nothing
//	worker → coordinator  'R' | result           its shares and figures (see ShardResult), or
//	                      'E' | error text       the job failed (at most 4 KiB)
//	coordinator → worker  'D'                    done: the worker exits (successfully)
//
// A job's 'P' and its answer come any number of times (once per attempt)
// before its 'R' or 'E'. A 'D' may also come in place of the answer to the
// announcement (the selection ended as the worker attached): the worker
// takes it as "done". Announcements of "SFW1" (workers before epoch
// reports) are refused.
const (
	// StreamWorker is the stream of the internal connection's messages.
	StreamWorker uint32 = 1
	// workerHelloMagic starts a worker's announcement.
	workerHelloMagic = "SFW2"
	// oldWorkerHelloMagic started the announcement of a worker that does
	// not report its epochs.
	oldWorkerHelloMagic = "SFW1"
	// epochReportLen is the size of a worker's epoch report ('P').
	epochReportLen = 1 + 8
	// epochReportTimeout bounds a worker's wait for its coordinator's
	// answer to an epoch report.
	epochReportTimeout = 30 * time.Second
	// maxWorkerError bounds a worker's error message.
	maxWorkerError = 4 << 10
	// maxWorkerReply bounds the coordinator's answer to an announcement.
	maxWorkerReply = 256
)

// DefaultWorkerWait is WorkerPool.Wait when 0.
const DefaultWorkerWait = 10 * time.Minute

// WorkerPool is a sharded selection's coordinator side of its party's
// internal connections: the ShardRunner that hands each phase's jobs to
// the party's K workers. Workers connect (Serve accepts them on a
// transport.Listener, Attach takes one connection) and announce their
// shard index k; a second live worker of the same index, an index ≥ K or
// another party's worker is refused. RunShard sends worker k its job and
// waits for its result; if worker k's connection drops (the worker died),
// it waits for worker k to connect again (at most Wait, and within the
// context) and sends the job again: the restarted worker resumes from its
// checkpoint. After a successful run, Done tells the workers the selection
// is over, and a worker that attaches afterwards (one that was
// reconnecting, or restarting) is answered "done" too; AwaitDone waits
// until every worker has been told.
type WorkerPool struct {
	// Wait bounds how long RunShard waits for worker k to connect
	// (DefaultWorkerWait when 0).
	Wait time.Duration
	// Logger receives the pool's events (slog.Default() when nil).
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

// NewWorkerPool returns the pool of party's shards workers (1..MaxShards).
func NewWorkerPool(party, shards int) (*WorkerPool, error) {
	if party != 0 && party != 1 {
		return nil, fmt.Errorf("selection: worker pool of party %d", party)
	}
	if shards < 1 || shards > MaxShards {
		return nil, fmt.Errorf("selection: %d shards (1..%d)", shards, MaxShards)
	}
	return &WorkerPool{party: party, shards: shards, conns: make([]*transport.Conn, shards), changed: make(chan struct{}),
		told: make([]bool, shards), toldAll: make(chan struct{})}, nil
}

// Shards implements ShardRunner.
func (p *WorkerPool) Shards() int { return p.shards }

func (p *WorkerPool) logf() *slog.Logger {
	if p.Logger == nil {
		return slog.Default()
	}
	return p.Logger
}

// announceTimeout bounds the wait for a connected worker's announcement.
const announceTimeout = 30 * time.Second

// Attach takes a worker's connection: it reads the worker's announcement
// (within 30 s and ctx), refuses (and closes) another party's worker, an
// index ≥ K and a second live worker of the same index, answers "done"
// (and closes) after Done, and otherwise answers "ok" and makes it worker
// k's connection.
func (p *WorkerPool) Attach(ctx context.Context, conn *transport.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, announceTimeout)
	defer cancel()
	st := conn.Stream(StreamWorker)
	b, err := st.RecvBytes(ctx, len(workerHelloMagic)+5)
	if err != nil {
		conn.Close()
		return fmt.Errorf("selection: worker pool: announcement: %w", err)
	}
	refuse := func(format string, args ...any) error {
		err := fmt.Errorf(format, args...)
		_ = st.SendBytes(ctx, []byte("refused: "+err.Error()))
		conn.Close()
		return fmt.Errorf("selection: worker pool: %w", err)
	}
	if len(b) == len(workerHelloMagic)+5 && string(b[:len(oldWorkerHelloMagic)]) == oldWorkerHelloMagic {
		return refuse("a worker of an older version (it does not report its epochs): run the coordinator's version")
	}
	if len(b) != len(workerHelloMagic)+5 || string(b[:len(workerHelloMagic)]) != workerHelloMagic {
		return refuse("not a worker's announcement")
	}
	party, k := int(b[4]), uint64(binary.LittleEndian.Uint32(b[5:]))
	if party != p.party {
		return refuse("a worker of party %d at party %d's coordinator", party, p.party)
	}
	if k >= uint64(p.shards) {
		return refuse("worker index %d, the selection has %d shards (0..%d)", k, p.shards, p.shards-1)
	}
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		err := st.SendBytes(ctx, []byte("done"))
		conn.Close()
		if err != nil {
			return fmt.Errorf("selection: worker pool: telling worker %d the selection is done: %w", k, err)
		}
		p.markTold(int(k))
		p.logf().Info("selection: worker told the selection is done as it reconnected", "party", p.party, "shard", k)
		return nil
	}
	if p.closed {
		p.mu.Unlock()
		return refuse("the coordinator is stopping (its run failed); connect again to the restarted coordinator")
	}
	if c := p.conns[k]; c != nil && !isDone(c) {
		p.mu.Unlock()
		return refuse("worker %d is already connected", k)
	}
	p.conns[k] = conn
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	if err := st.SendBytes(ctx, []byte("ok")); err != nil {
		return fmt.Errorf("selection: worker pool: worker %d: %w", k, err)
	}
	p.logf().Info("selection: worker connected", "party", p.party, "shard", k)
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
func (p *WorkerPool) Serve(ctx context.Context, ln *transport.Listener, fingerprint string) error {
	for {
		c, err := ln.Accept(ctx, fingerprint)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("selection: worker pool: accept: %w", err)
		}
		go func() {
			if err := p.Attach(ctx, c); err != nil {
				p.logf().Warn("selection: worker refused", "err", err)
			}
		}()
	}
}

// await returns worker k's live connection, waiting at most Wait.
func (p *WorkerPool) await(ctx context.Context, k int) (*transport.Conn, error) {
	wait := p.Wait
	if wait <= 0 {
		wait = DefaultWorkerWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		p.mu.Lock()
		c, ch, closed := p.conns[k], p.changed, p.closed
		p.mu.Unlock()
		if closed {
			return nil, fmt.Errorf("selection: worker pool closed")
		}
		if c != nil && !isDone(c) {
			return c, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return nil, fmt.Errorf("selection: worker %d did not connect within %v: check that its process runs and reaches this coordinator", k, wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// maxJobResends bounds how often one job is sent again after its worker's
// connection dropped.
const maxJobResends = 100

// RunShard implements ShardRunner: it sends job to worker job.Shard,
// records each epoch the worker reports before it draws there
// (job.Reached, answered once recorded) and returns the worker's checked
// result, sending the job again, with its raised Floor, to a reconnected
// worker when the connection drops.
func (p *WorkerPool) RunShard(ctx context.Context, job *Job) (*ShardResult, error) {
	if job.Shard < 0 || job.Shard >= p.shards || job.Shards != p.shards {
		return nil, fmt.Errorf("selection: job for shard %d of %d at a pool of %d", job.Shard, job.Shards, p.shards)
	}
	for range maxJobResends {
		c, err := p.await(ctx, job.Shard)
		if err != nil {
			return nil, err
		}
		res, err := p.runOn(ctx, c, job)
		if !errors.Is(err, errWorkerLost) {
			return res, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		p.logf().Warn("selection: worker connection lost; waiting for the worker to come back", "party", p.party, "shard", job.Shard, "phase", job.Phase+1, "err", err)
		c.Close()
	}
	return nil, fmt.Errorf("selection: worker %d: connection lost %d times", job.Shard, maxJobResends)
}

// errWorkerLost is wrapped by runOn's error when the worker's connection
// failed: the job is sent again once the worker is back.
var errWorkerLost = errors.New("worker connection lost")

// runOn sends job (encoded now: its Floor as last raised) on worker
// connection c and serves the worker's epoch reports until its result.
func (p *WorkerPool) runOn(ctx context.Context, c *transport.Conn, job *Job) (*ShardResult, error) {
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
			return nil, withCode(AbortProtocol, fmt.Errorf("selection: worker %d: unreadable answer", job.Shard))
		}
		epoch, err := decodeEpochReport(rb)
		if err == nil {
			err = job.Reached(ctx, epoch)
		}
		if err != nil {
			// The worker draws nothing at the epoch; its job fails.
			_ = st.SendBytes(ctx, []byte("Nnot recorded by the coordinator"))
			return nil, fmt.Errorf("selection: worker %d's epoch report: %w", job.Shard, err)
		}
		if err := st.SendBytes(ctx, []byte{'A'}); err != nil {
			return nil, fmt.Errorf("%w: %w", errWorkerLost, err)
		}
	}
}

// decodeEpochReport decodes a worker's epoch report ('P' | epoch u64) and
// checks the epoch: 1..MaxEpoch−1.
func decodeEpochReport(b []byte) (uint64, error) {
	if len(b) != epochReportLen || b[0] != 'P' {
		return 0, withCode(AbortProtocol, fmt.Errorf("selection: an epoch report of %d bytes", len(b)))
	}
	e := binary.LittleEndian.Uint64(b[1:])
	if e == 0 || e >= MaxEpoch {
		return 0, withCode(AbortProtocol, fmt.Errorf("selection: an epoch report of epoch %d (1..%d)", e, MaxEpoch-1))
	}
	return e, nil
}

// reportEpochs returns the relay of a job's epoch reports (Job.Reached)
// to the coordinator on st: 'P' | epoch, then the coordinator's 'A' within
// epochReportTimeout; anything else is an *epochReportError.
func reportEpochs(st *transport.Stream) func(context.Context, uint64) error {
	return func(ctx context.Context, epoch uint64) error {
		ctx, cancel := context.WithTimeout(ctx, epochReportTimeout)
		defer cancel()
		msg := binary.LittleEndian.AppendUint64([]byte{'P'}, epoch)
		if err := st.SendBytes(ctx, msg); err != nil {
			return &epochReportError{Epoch: epoch, Err: err}
		}
		ans, err := st.RecvBytes(ctx, maxWorkerReply)
		switch {
		case err != nil:
			return &epochReportError{Epoch: epoch, Err: err}
		case len(ans) == 1 && ans[0] == 'A':
			return nil
		case len(ans) > 0 && ans[0] == 'N':
			return &epochReportError{Epoch: epoch, Err: fmt.Errorf("%s", ans[1:])}
		}
		return &epochReportError{Epoch: epoch, Err: fmt.Errorf("an unreadable answer")}
	}
}

// epochReportError is a worker's error when its coordinator did not record
// an epoch it reported (Job.Reached): the worker draws nothing there, and
// does not retry the job (its coordinator is gone or cannot write).
type epochReportError struct {
	Epoch uint64
	Err   error
}

func (e *epochReportError) Error() string {
	return fmt.Sprintf("selection: worker: the coordinator did not record epoch %d before the worker would draw there: %v", e.Epoch, e.Err)
}

func (e *epochReportError) Unwrap() error { return e.Err }

// Done tells every connected worker that the selection is done (they
// exit) and closes the pool: call it after a successful Run. A worker
// that attaches afterwards (while the caller still accepts workers:
// Serve, Attach) is answered "done" as well; AwaitDone waits until every
// worker has been told.
func (p *WorkerPool) Done(ctx context.Context) { p.close(ctx, true) }

// Close closes the pool and its workers' connections without telling
// them the selection is done: they connect again, to a restarted
// coordinator (call it after a failed Run; after Done it does nothing
// more). RunShard fails afterwards.
func (p *WorkerPool) Close() { p.close(context.Background(), false) }

func (p *WorkerPool) close(ctx context.Context, done bool) {
	p.mu.Lock()
	if p.finished {
		p.mu.Unlock()
		return
	}
	p.closed, p.finished = true, done
	conns := append([]*transport.Conn(nil), p.conns...)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	for k, c := range conns {
		if c != nil && !isDone(c) {
			// A worker whose "done" could not be sent (its connection
			// failing) is told when it reconnects.
			if done && c.Stream(StreamWorker).SendBytes(ctx, []byte{'D'}) == nil {
				p.markTold(k)
			}
			c.Close()
		}
	}
}

// markTold records that worker k was told the selection is done.
func (p *WorkerPool) markTold(k int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.told[k] {
		return
	}
	p.told[k] = true
	if p.nTold++; p.nTold == p.shards {
		close(p.toldAll)
	}
}

// AwaitDone waits, after Done, until every worker has been told that the
// selection is done (on its connection at Done, or as it attached
// afterwards), and returns nil; or until ctx ends, and returns an error
// naming the workers not told (they were not connected: they learn it
// only if they attach while the pool still accepts workers, and otherwise
// fail when they cannot reach their coordinator). Bound ctx: a worker that
// never comes back must not hold the coordinator.
func (p *WorkerPool) AwaitDone(ctx context.Context) error {
	p.mu.Lock()
	finished := p.finished
	p.mu.Unlock()
	if !finished {
		return fmt.Errorf("selection: worker pool: AwaitDone before Done")
	}
	select {
	case <-p.toldAll:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var missing []int
	for k, t := range p.told {
		if !t {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("selection: worker pool: workers %v were not told that the selection is done (not connected): %w", missing, context.Cause(ctx))
}

// ErrWorkerRefused is wrapped by Serve's error when the coordinator
// refuses the worker (another live worker of its index, an index ≥ K).
var ErrWorkerRefused = errors.New("the coordinator refused this worker")

// Serve runs the worker on its connection to its coordinator: it announces
// its party and shard index, then runs each job it receives (RunJob,
// pairing with pair) and returns its result, until the coordinator says
// the selection is done (Serve returns nil; also when it says so in answer
// to the announcement: a worker attaching after the selection ended) or
// the connection or ctx ends.
// A job that fails is reported to the coordinator (its error text: the
// internal connection stays within the party) and Serve goes on.
func (w *Worker) Serve(ctx context.Context, coord *transport.Conn, pair PairFunc) error {
	if w == nil || coord == nil {
		return fmt.Errorf("selection: worker: nil worker or connection")
	}
	if w.Party != 0 && w.Party != 1 || w.Shard < 0 || w.Shard >= MaxShards {
		return fmt.Errorf("selection: worker: party %d, shard %d", w.Party, w.Shard)
	}
	st := coord.Stream(StreamWorker)
	hello := append([]byte(workerHelloMagic), byte(w.Party))
	hello = binary.LittleEndian.AppendUint32(hello, uint32(w.Shard))
	if err := st.SendBytes(ctx, hello); err != nil {
		return fmt.Errorf("selection: worker: announce: %w", err)
	}
	ans, err := st.RecvBytes(ctx, maxWorkerReply)
	if err != nil {
		return fmt.Errorf("selection: worker: announce: %w", err)
	}
	if string(ans) == "done" || len(ans) == 1 && ans[0] == 'D' {
		w.logf().Info("selection: worker: the selection is done (told as it attached)", "party", w.Party, "shard", w.Shard)
		return nil
	}
	if string(ans) != "ok" {
		return fmt.Errorf("selection: worker %d: %w: %.200s", w.Shard, ErrWorkerRefused, ans)
	}
	w.logf().Info("selection: worker attached to its coordinator", "party", w.Party, "shard", w.Shard)
	for {
		b, err := st.RecvBytes(ctx, 1+MaxJobBytes)
		if err != nil {
			return fmt.Errorf("selection: worker: receive from the coordinator: %w", err)
		}
		if len(b) == 1 && b[0] == 'D' {
			w.logf().Info("selection: worker: the selection is done", "party", w.Party, "shard", w.Shard)
			return nil
		}
		if len(b) == 0 || b[0] != 'J' {
			return fmt.Errorf("selection: worker: unreadable message from the coordinator")
		}
		var reply []byte
		job, err := DecodeJob(b[1:])
		var res *ShardResult
		if err == nil {
			job.reached = reportEpochs(st)
			res, err = w.RunJob(ctx, job, pair)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			w.logf().Warn("selection: worker: job failed", "party", w.Party, "shard", w.Shard, "err", err)
			msg := err.Error()
			if len(msg) > maxWorkerError {
				msg = msg[:maxWorkerError]
			}
			reply = append([]byte{'E'}, msg...)
		} else {
			reply = append([]byte{'R'}, encodeResult(res)...)
		}
		if err := st.SendBytes(ctx, reply); err != nil {
			return fmt.Errorf("selection: worker: send to the coordinator: %w", err)
		}
	}
}

package selection

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// ProgressLogInterval is the least time between two Info-level progress
// lines of a phase (every batch is logged at Debug level).
const ProgressLogInterval = 5 * time.Second

// Run runs the model owner's side of a selection over conn, drawing
// correlated randomness from prov (party 0's provider), which it wraps in a
// marks.Provider whose high-water marks live in StateDir (MarksFile; in
// memory without one), so that no run draws at a position of the session
// drawn before (see the package comment).
//
// Everything Run can check (parameters, weights, proxies, generation
// settings, the Label function) is checked before it says anything to the
// data owner. When Run fails it tells the peer why (an abort on
// StreamAbort, a public reason code: the error itself stays in its log),
// then closes conn; when the peer fails first, Run returns a
// *PeerAbortError with the peer's reason.
func (m *ModelOwner) Run(ctx context.Context, conn *transport.Conn, prov beaver.Provider) (*Result, error) {
	if m == nil {
		return nil, fmt.Errorf("selection: nil model owner")
	}
	d := &modelOwnerRun{m: m,
		runner: newRunner(0, m.Params, conn, prov, m.Logger, m.OnProgress, &checkpointStore{dir: m.StateDir, party: 0})}
	d.onAbort = m.onAbort
	d.shards = m.Shards
	d.requireCommitment = m.RequireCommitment || m.ItemInput != nil
	d.jobProxy = d.encodeProxy
	return guard(ctx, d.runner, d.check, d.run)
}

// Run runs the data owner's side of a selection over conn, drawing
// correlated randomness from prov (party 1's provider), wrapped in a
// marks.Provider as ModelOwner.Run does.
//
// Everything Run can check (parameters, pool, embedding weights) is checked
// before it says anything to the model owner. The bootstrap sample is
// recorded (in StateDir, or in memory without one) before it is sent, and a
// data owner never sends a second one for the same session: a restarted
// model owner that no longer holds the session's coin is refused (an error
// wrapping ErrBootstrapRevealed). When Run fails it tells the peer why (an
// abort on StreamAbort, a public reason code: the error itself, which may
// name a pool value, stays in its log), then closes conn; when the peer
// fails first, Run returns a *PeerAbortError with the peer's reason.
func (d *DataOwner) Run(ctx context.Context, conn *transport.Conn, prov beaver.Provider) (*Result, error) {
	if d == nil {
		return nil, fmt.Errorf("selection: nil data owner")
	}
	store := &checkpointStore{dir: d.StateDir, party: 1, remember: func(r *Revealed) {
		d.mu.Lock()
		d.revealed = r
		d.mu.Unlock()
	}}
	r := &dataOwnerRun{d: d,
		runner: newRunner(1, d.Params, conn, prov, d.Logger, d.OnProgress, store)}
	r.forgeEpoch = d.forgeEpoch
	r.shareOffset = d.shareOffset
	r.onAbort = d.onAbort
	r.shards = d.Shards
	return guard(ctx, r.runner, r.check, r.run)
}

// guard runs check and then run, and on failure tells the peer (see
// abortWatch.fail) and closes the connection.
func guard(ctx context.Context, r *runner, check func() error, run func(context.Context) (*Result, error)) (*Result, error) {
	if r.conn == nil {
		if err := check(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("selection: party %d: nil connection", r.party)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ab := watchAbort(r.conn, r.party, r.logf(), cancel, r.onAbort)
	res, err := func() (*Result, error) {
		if err := check(); err != nil {
			return nil, withCode(AbortInput, err)
		}
		return run(ctx)
	}()
	if err != nil {
		return nil, ab.fail(err)
	}
	ab.stop()
	return res, nil
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

func (r *runner) logf() *slog.Logger {
	if r.log == nil {
		return slog.Default()
	}
	return r.log
}

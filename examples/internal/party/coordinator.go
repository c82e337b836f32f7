package party

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/shard"
	"github.com/selectformer/selectformer/transport"
)

// Role is what differs between the two party binaries' runs of a
// selection as a coordinator (a party not sharded, or the coordinator of
// its -shards K workers).
type Role struct {
	// Party is 0 (model owner) or 1 (data owner).
	Party int
	// Name is the binary's name ("modelowner"), in what it prints and in
	// its errors.
	Name string
	// Running is the progress step while the selection runs (the step
	// while the party connects names the dealer, or, dealer-free, only
	// the peer).
	Running string
	// Run runs the party's selection over conn with prov, the shards
	// (the party's workers, nil when it has none) running its phases'
	// forwards: set them as ModelOwner.Shards or DataOwner.Shards.
	Run func(ctx context.Context, shards selection.ShardRunner, conn *transport.Conn, prov beaver.Provider) (*selection.Result, error)
}

// RunCoordinator is the connect → run → stop body of both party binaries:
// with -shards K ≥ 2 it serves the party's workers (-workers-listen),
// connects to the dealer and the peer as -provider says (pt.Connect), runs
// r.Run, tells the workers the selection is done, prints the summary and
// writes the result to out (WriteResult), then waits for the workers not
// connected at the end, at most -connect-timeout. With out "-" the result
// is the only thing on stdout: the summary goes to stderr. A failure of
// the run is reported in one line, as Stop.Error says (state is the
// -state directory).
func RunCoordinator(ctx context.Context, pt *peer.Party, sf *peer.ShardFlags, r Role, state, out string, prog *Progress, stdout io.Writer) error {
	var (
		workers *shard.Workers
		shards  selection.ShardRunner // nil without workers, not a nil *shard.Workers
	)
	info := stdout
	if out == "-" {
		info = prog.Writer() // stdout holds the result only
	}
	if sf.Shards >= 2 {
		ws, ln, err := pt.ServeWorkers(ctx, r.Party, sf.Shards, sf.WorkersListen, func(a net.Addr) {
			fmt.Fprintf(info, "%s workers listening %s\n", r.Name, a)
		})
		if err != nil {
			return err
		}
		defer ln.Close()
		defer ws.Close() // after a failure: the workers wait for a restarted coordinator
		workers, shards = ws, ws
	}
	stop := Stop{Command: r.Name, Party: r.Party, State: state, Dealer: !pt.Source.DealerFree, Prog: prog, Log: pt.Logger}
	if stop.Dealer {
		prog.Step("connecting to the dealer and the " + roleNames[1-r.Party])
	} else {
		prog.Step("connecting to the " + roleNames[1-r.Party])
	}
	prov, dconn, conn, err := pt.Connect(ctx, r.Party, r.Name, info)
	if err != nil {
		return stop.Error(ctx, err)
	}
	if c, ok := dconn.(interface{ Err() error }); ok {
		stop.DealerLost = func() bool { err := c.Err(); return err != nil && !errors.Is(err, transport.ErrClosed) }
	}
	defer dconn.Close()
	defer conn.Close()
	prog.Step(r.Running)
	res, err := r.Run(ctx, shards, conn, prov)
	if err == nil && workers != nil {
		workers.Done(ctx) // the workers exit
	}
	if err != nil {
		return stop.Error(ctx, err)
	}
	fmt.Fprint(info, Summary(res))
	err = WriteResult(out, stdout, res)
	if workers != nil {
		// A worker not connected at the end (restarting) is told "done" as
		// it reconnects: wait for it, at most -connect-timeout.
		_ = pt.AwaitWorkers(ctx, workers)
	}
	return err
}

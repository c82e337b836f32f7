package peer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/selection/shard"
	"github.com/selectformer/selectformer/transport"
)

// ShardFlags are the flags of a sharded selection that modelowner and
// dataowner share: as a coordinator, -shards K and -workers-listen; as a
// worker, -worker, -coordinator and -shard-index (default: the
// environment variable JOB_COMPLETION_INDEX, which a Kubernetes Indexed
// Job sets).
type ShardFlags struct {
	Shards        int
	WorkersListen string
	Worker        bool
	Coordinator   string
	ShardIndex    string
}

// ShardIndexEnv is the environment variable a worker takes its shard
// index from when -shard-index is not given (a Kubernetes Indexed Job's).
const ShardIndexEnv = "JOB_COMPLETION_INDEX"

// ShardPlaceholder is replaced by the worker's shard index in -listen,
// -connect and -dealer (so that worker k dials dealer k, e.g.
// dealer-{shard}.dealers.NS.svc:7100: one dealer host per worker pair). A
// coordinator, which has no index, refuses it (CheckMode).
const ShardPlaceholder = "{shard}"

// Register defines the flags on fs.
func (f *ShardFlags) Register(fs *flag.FlagSet) {
	fs.IntVar(&f.Shards, "shards", 0, "coordinator of a sharded selection: run each phase's secure forward on K worker pairs (this party's -worker processes, each paired with the other party's worker of the same index); 0 or 1: one pair, this process (the default)")
	fs.StringVar(&f.WorkersListen, "workers-listen", "", "with -shards K ≥ 2: listen for this party's K workers on this address (mutual TLS with this party's own key pair on both ends); required with -shards ≥ 2")
	fs.BoolVar(&f.Worker, "worker", false, "run as a worker of a sharded selection: take jobs from this party's coordinator (-coordinator), run them with the other party's worker of the same -shard-index over -listen or -connect, with the dealer at -dealer (\""+ShardPlaceholder+"\" in these addresses is replaced by the index: one dealer per worker pair), checkpoint in -state; exits 0 when the coordinator says the selection is done")
	fs.StringVar(&f.Coordinator, "coordinator", "", "with -worker: the address of this party's coordinator (its -workers-listen); required with -worker")
	fs.StringVar(&f.ShardIndex, "shard-index", "", "with -worker: this worker's index k in 0..K-1 (default: $"+ShardIndexEnv+", set by a Kubernetes Indexed Job)")
}

// WorkerFlags lists the flags a worker of party takes (the others are
// refused with -worker): identity, pair link, provider, log, -state and
// the worker flags; the data owner's worker also reads its own copy of
// the pool (-pool, -embedding, -vocab, -seq).
func WorkerFlags(party int) map[string]bool {
	ok := map[string]bool{"cert": true, "key": true, "listen": true, "connect": true, "connect-timeout": true, "peer-fingerprint": true,
		"provider": true, "dealer": true, "dealer-fingerprint": true, "link": true, "log": true, "state": true,
		"worker": true, "coordinator": true, "shard-index": true}
	if party == 1 {
		for _, n := range []string{"pool", "embedding", "vocab", "seq"} {
			ok[n] = true
		}
	}
	return ok
}

// CheckMode refuses the flags that make no sense in the mode the flags
// select: in worker mode every flag set but those of WorkerFlags(party),
// and a missing -coordinator or -state; as a coordinator, -coordinator and
// -shard-index, ShardPlaceholder in -dealer, -listen or -connect (a
// coordinator has no shard index), -shards outside 0..MaxShards, and
// -workers-listen without -shards ≥ 2 (or missing with it).
func (f *ShardFlags) CheckMode(fs *flag.FlagSet, party int) error {
	var set []string
	fs.Visit(func(fl *flag.Flag) { set = append(set, fl.Name) })
	if f.Worker {
		ok := WorkerFlags(party)
		for _, n := range set {
			if !ok[n] {
				return Usage("-%s is not used with -worker (a worker takes its job from its coordinator)", n)
			}
		}
		if f.Coordinator == "" {
			return Usage("-worker needs -coordinator (the address of this party's coordinator's -workers-listen)")
		}
		return nil
	}
	for _, n := range set {
		switch n {
		case "coordinator", "shard-index":
			return Usage("-%s is used with -worker only", n)
		case "dealer", "listen", "connect":
			v := fs.Lookup(n).Value.String()
			if !strings.Contains(v, ShardPlaceholder) {
				continue
			}
			if n == "dealer" {
				return Usage("-dealer %q: %s is replaced by a worker's shard index, and a coordinator has none: give the one dealer the coordinators use (with a dealer per worker pair, pair 0's, e.g. dealer-0.dealers.NS.svc:7100)", v, ShardPlaceholder)
			}
			return Usage("-%s %q: %s is replaced by a worker's shard index, and a coordinator has none: give the coordinator's own address", n, v, ShardPlaceholder)
		}
	}
	switch {
	case f.Shards < 0 || f.Shards > shard.MaxShards:
		return Usage("-shards %d: want 0..%d", f.Shards, shard.MaxShards)
	case f.Shards >= 2 && f.WorkersListen == "":
		return Usage("-shards %d needs -workers-listen (where this party's workers connect)", f.Shards)
	case f.Shards < 2 && f.WorkersListen != "":
		return Usage("-workers-listen is used with -shards 2 or more")
	}
	return nil
}

// Index returns the worker's shard index: -shard-index, else $ShardIndexEnv
// (a usage error if neither is set or it is not a number in
// 0..shard.MaxShards−1; the coordinator refuses an index ≥ its K).
func (f *ShardFlags) Index() (int, error) {
	s, from := f.ShardIndex, "-shard-index"
	if s == "" {
		s, from = os.Getenv(ShardIndexEnv), "$"+ShardIndexEnv
	}
	if s == "" {
		return 0, Usage("a worker needs -shard-index or $%s (its shard index)", ShardIndexEnv)
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k >= shard.MaxShards {
		return 0, Usage("%s %q: want a number in 0..%d", from, s, shard.MaxShards-1)
	}
	return k, nil
}

// ShardEndpoint returns e with ShardPlaceholder replaced by k in its
// addresses.
func ShardEndpoint(e Endpoint, k int) Endpoint {
	e.Listen = ShardAddress(e.Listen, k)
	e.Connect = ShardAddress(e.Connect, k)
	return e
}

// ShardAddress returns addr with ShardPlaceholder replaced by k: worker
// k's -listen, -connect or -dealer address.
func ShardAddress(addr string, k int) string {
	return strings.ReplaceAll(addr, ShardPlaceholder, strconv.Itoa(k))
}

// ServeWorkers listens on addr for this party's workers (mutual TLS: each
// must present the party's own key, pinned by its fingerprint) and returns
// the shard.Workers to set as the coordinator's Shards, serving until ctx
// ends; the caller closes them (shard.Workers.Close; Done tells the
// workers to exit) and the listener. onListen, if set, is called with the bound address.
func (p *Party) ServeWorkers(ctx context.Context, party, shards int, addr string, onListen func(net.Addr)) (*shard.Workers, io.Closer, error) {
	ws, err := shard.NewWorkers(party, shards)
	if err != nil {
		return nil, nil, Usage("%v", err)
	}
	ws.Logger = p.Logger
	opt := p.Options
	opt.Link = nil // the party's own machines: no emulated link
	ln, err := transport.Listen(addr, p.ID, opt)
	if err != nil {
		return nil, nil, ListenError("workers-listen", err)
	}
	if onListen != nil {
		onListen(ln.Addr())
	}
	go func() {
		if err := ws.Serve(ctx, ln, p.ID.Fingerprint()); err != nil {
			p.Logger.Warn("worker listener stopped", "err", err)
		}
	}()
	return ws, ln, nil
}

// AwaitWorkers waits, after ws.Done, until every worker of ws has been
// told that the selection is done (shard.Workers.AwaitDone): a worker not
// connected when the run ended (restarting, or its link dropped) is told
// "done" as it reconnects, and exits 0 rather than failing at its
// -connect-timeout. It waits at most this party's -connect-timeout (a
// worker that never comes back does not hold the coordinator), and
// returns the error naming the workers not told, which it also logs; the
// coordinator still exits 0: its selection succeeded.
func (p *Party) AwaitWorkers(ctx context.Context, ws *shard.Workers) error {
	grace := p.flags.Endpoint.Timeout
	if grace <= 0 {
		grace = time.Minute
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	err := ws.AwaitDone(gctx)
	if err != nil {
		p.Logger.Warn("the selection is done, but not every worker was told so within -connect-timeout: those exit 3 when they cannot reach this coordinator", "connect_timeout", grace, "err", err)
	}
	return err
}

// RunWorker runs w (party's worker, index w.Shard) until its coordinator
// says the selection is done: it dials the coordinator at addr (pinned to
// the party's own fingerprint), serves its jobs, pairing each over
// pflags' -listen or -connect (ShardEndpoint) with the provider the flags
// choose (a dealer session per pair connection, at -dealer with
// ShardPlaceholder replaced by the index, or ot.Provider on it),
// and dials again when the coordinator's connection drops (a restarted
// coordinator), each time within -connect-timeout. It returns nil when the
// coordinator says the selection is done: on its connection, or in answer
// to its announcement when it reconnects after the run (the coordinator
// answers so for its -connect-timeout after the result, AwaitWorkers); an
// *Error of ExitPeer when it cannot reach its coordinator in time or is
// refused (but for "already connected" and "connect again": it dials
// again).
func (p *Party) RunWorker(ctx context.Context, w *shard.Worker, party int, addr string, stdout io.Writer, name string) error {
	pair := p.workerPair(party, w.Shard, stdout, name)
	timeout := p.flags.Endpoint.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	opt := p.Options
	opt.Link = nil
	for {
		dctx, cancel := context.WithTimeout(ctx, timeout)
		conn, err := dialRetrying(dctx, addr, p.ID, p.ID.Fingerprint(), opt, p.Logger)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &Error{Code: ExitPeer, Err: fmt.Errorf("connecting to the coordinator at %s: %w", addr, err)}
		}
		err = w.Serve(ctx, conn, pair)
		conn.Close()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, shard.ErrWorkerRefused) && !strings.Contains(err.Error(), "already connected") && !strings.Contains(err.Error(), "connect again") {
			return &Error{Code: ExitPeer, Err: err}
		}
		p.Logger.Warn("coordinator connection ended; connecting again", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// workerPair returns the pairing of worker k's jobs: the source -provider
// names, opened for each job with the dealer at -dealer (ShardAddress:
// worker k's own dealer where the address holds ShardPlaceholder) and the
// pair link over -listen or -connect (ShardEndpoint); the dealer's
// connection closes with the pair link.
func (p *Party) workerPair(party, k int, stdout io.Writer, name string) func(context.Context, *shard.Job) (*transport.Conn, beaver.Provider, error) {
	env := p.env(party, ShardEndpoint(p.flags.Endpoint, k), ShardAddress(p.flags.Dealer, k), func(a net.Addr) {
		fmt.Fprintf(stdout, "%s worker %d listening %s\n", name, k, a)
	})
	return func(ctx context.Context, job *shard.Job) (*transport.Conn, beaver.Provider, error) {
		op, err := p.Source.Open(ctx, env)
		if err != nil {
			return nil, nil, err
		}
		go func() { <-op.Conn.Done(); op.Closer.Close() }()
		return op.Conn, op.Provider, nil
	}
}

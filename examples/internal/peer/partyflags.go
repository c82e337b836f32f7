package peer

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/internal/memlimit"
	"github.com/selectformer/selectformer/transport"
)

// PartyFlags are the flags modelowner and dataowner share: this host's
// identity, the peer and the dealer with their pinned keys (or -provider
// ot or he: no dealer), how to reach the peer, link emulation and the log level.
type PartyFlags struct {
	Cert, Key         string
	PeerFingerprint   string
	Provider          string
	Dealer            string
	DealerFingerprint string
	DealerBudget      uint64
	Endpoint          Endpoint
	Link              string
	Log               string
}

// Register defines the flags on fs for party (0 or 1) whose peer is called
// peerName in the help texts.
func (f *PartyFlags) Register(fs *flag.FlagSet, party int, peerName string) {
	fs.StringVar(&f.Cert, "cert", "", "this party's certificate (PEM, from keygen); required")
	fs.StringVar(&f.Key, "key", "", "this party's private key (PEM, from keygen); required")
	fs.StringVar(&f.Endpoint.Listen, "listen", "", "listen for the "+peerName+" on this address (or use -connect)")
	fs.StringVar(&f.Endpoint.Connect, "connect", "", "connect to the "+peerName+" at this address (or use -listen)")
	fs.DurationVar(&f.Endpoint.Timeout, "connect-timeout", time.Minute, "how long to wait for the "+peerName+" and the dealer")
	fs.StringVar(&f.PeerFingerprint, "peer-fingerprint", "", "the "+peerName+"'s fingerprint or certificate file; required")
	fs.StringVar(&f.Provider, "provider", source.Default, "where the correlated randomness comes from: "+source.Usage())
	fs.StringVar(&f.Dealer, "dealer", "", fmt.Sprintf("the dealer's address for party %d; required with -provider dealer (with -worker, \"%s\" in it is replaced by the shard index: one dealer per worker pair)", party, ShardPlaceholder))
	fs.StringVar(&f.DealerFingerprint, "dealer-fingerprint", "", "the dealer's fingerprint or certificate file; required with -provider dealer")
	fs.Uint64Var(&f.DealerBudget, "dealer-budget", 0, "the most dealer work (beaver.Request.DealerWork units) this party lets the session draw; the dealer serves the smaller of the two parties' announcements (0: none; the model owner announces the smaller of this and selection.DealerBudget of its proxies' shapes, and the dealer's -session-budget caps both)")
	fs.StringVar(&f.Link, "link", "", "emulate a link on this party's sending direction: lan, paper-wan or none")
	fs.StringVar(&f.Log, "log", "info", "log level: debug, info, warn, error")
}

// Party is what PartyFlags resolve to.
type Party struct {
	flags PartyFlags
	// Source is the source of correlated randomness -provider names.
	Source    source.Source
	ID        *transport.Identity
	PeerPin   string
	DealerPin string
	Options   transport.Options
	Logger    *slog.Logger
}

// Resolve checks the parsed flags and loads the identity: usage errors for
// missing or malformed values, input errors for unreadable identity files.
func (f *PartyFlags) Resolve(stderr io.Writer) (*Party, error) {
	log, err := Logger(stderr, f.Log)
	if err != nil {
		return nil, err
	}
	if err := f.Endpoint.Validate("listen", "connect"); err != nil {
		return nil, err
	}
	p := &Party{flags: *f, Logger: log}
	src, ok := source.ByName(f.Provider)
	switch {
	case !ok:
		return nil, Usage("-provider %q: want %s", f.Provider, source.Choices())
	case src.DealerFree:
		if f.Dealer != "" || f.DealerFingerprint != "" || f.DealerBudget != 0 {
			return nil, Usage("-dealer, -dealer-fingerprint and -dealer-budget are not used with -provider %s", f.Provider)
		}
	default:
		if err := Require("dealer", f.Dealer); err != nil {
			return nil, err
		}
		if p.DealerPin, err = Fingerprint("dealer-fingerprint", f.DealerFingerprint); err != nil {
			return nil, err
		}
	}
	p.Source = src
	if p.PeerPin, err = Fingerprint("peer-fingerprint", f.PeerFingerprint); err != nil {
		return nil, err
	}
	if p.Options, err = Link(f.Link); err != nil {
		return nil, err
	}
	p.Options.Log = log // the transport logs in the party's format, not slog.Default's
	if p.ID, err = LoadIdentity(f.Cert, f.Key); err != nil {
		return nil, err
	}
	return p, nil
}

// Connect opens the source -provider names as party: with a dealer
// source it connects to the dealer (-dealer) first, then to the peer
// (listening or dialling per the flags; name is printed with the
// listening address); a dealer-free source makes the correlations on the
// peer connection (ot.Provider, its OT traffic on dedicated streams of
// that TLS connection) and the returned closer ends the process's soft
// memory limit (limitMemory). The caller
// closes both.
func (p *Party) Connect(ctx context.Context, party int, name string, stdout io.Writer) (beaver.Provider, io.Closer, *transport.Conn, error) {
	op, err := p.Source.Open(ctx, p.env(party, p.flags.Endpoint, p.flags.Dealer, func(a net.Addr) {
		fmt.Fprintf(stdout, "%s listening %s\n", name, a)
	}))
	if err != nil {
		return nil, nil, nil, err
	}
	return op.Provider, limitMemory(p.Source, op.Closer), op.Conn, nil
}

// limitMemory returns c, and for a dealer-free src starts the process's
// soft memory limit at DealerFreeMemoryTarget, which closing the returned
// closer ends: a dealer-free party holds GBs of live heap a whole phase
// (party 1's encrypted weights), so the collector's slack is kept small, as
// in mpcbench's party processes (GOMEMLIMIT, when set, wins).
func limitMemory(src source.Source, c io.Closer) io.Closer {
	if !src.DealerFree {
		return c
	}
	return stopAlso{c, memlimit.Start(DealerFreeMemoryTarget, 0)}
}

// DealerFreeMemoryTarget is the soft memory limit (internal/memlimit) a
// party's process keeps while it runs a dealer-free source: 3.5 GiB, or the
// live heap and a thirty-second when that is more. It is mpcbench's target at
// the workloads' 256 MiB prefetch budget, under which the data owner of
// sst2-distilbert peaks at 3.87 GB at the workload's defaults (bench/RESULTS.md); set GOMEMLIMIT to
// choose another.
const DealerFreeMemoryTarget = 3<<30 + 2*(256<<20)

// stopAlso is a closer that also calls stop once it has closed c (c may
// be nil).
type stopAlso struct {
	c    io.Closer
	stop func()
}

// Close closes the wrapped closer, then calls stop.
func (s stopAlso) Close() error {
	var err error
	if s.c != nil {
		err = s.c.Close()
	}
	s.stop()
	return err
}

// env is the source.Env of party: the peer over e (onListen is called
// with a listening address), the networked dealer at dealerAddr with the
// party's -dealer-budget.
func (p *Party) env(party int, e Endpoint, dealerAddr string, onListen func(net.Addr)) source.Env {
	return source.Env{
		Party: party,
		Peer: func(ctx context.Context) (*transport.Conn, error) {
			return Establish(ctx, e, p.ID, p.PeerPin, p.Options, p.Logger, onListen)
		},
		Dealer: func(ctx context.Context) (beaver.Provider, io.Closer, error) {
			cl, dconn, err := ConnectDealerWith(ctx, dealerAddr, p.ID, p.DealerPin, party, p.Options, e, dealer.ConnectOptions{Budget: p.flags.DealerBudget})
			if err != nil {
				return nil, nil, err
			}
			return cl, dconn, nil
		},
	}
}

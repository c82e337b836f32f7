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
	"github.com/selectformer/selectformer/beaver/ot"
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
	fs.StringVar(&f.Provider, "provider", ProviderDealer, "where the correlated randomness comes from: "+ProviderDealer+" (a networked dealer, -dealer), "+ProviderOT+" (no dealer: both parties make it by oblivious transfer over their own connection) or "+ProviderHE+" (no dealer: as "+ProviderOT+", but the products with the model owner's weights by lattice encryption, each weight matrix uploaded once)")
	fs.StringVar(&f.Dealer, "dealer", "", fmt.Sprintf("the dealer's address for party %d; required with -provider dealer (with -worker, \"%s\" in it is replaced by the shard index: one dealer per worker pair)", party, ShardPlaceholder))
	fs.StringVar(&f.DealerFingerprint, "dealer-fingerprint", "", "the dealer's fingerprint or certificate file; required with -provider dealer")
	fs.Uint64Var(&f.DealerBudget, "dealer-budget", 0, "the most dealer work (beaver.Request.DealerWork units) this party lets the session draw; the dealer serves the smaller of the two parties' announcements (0: none; the model owner announces the smaller of this and selection.DealerBudget of its proxies' shapes, and the dealer's -session-budget caps both)")
	fs.StringVar(&f.Link, "link", "", "emulate a link on this party's sending direction: lan, paper-wan or none")
	fs.StringVar(&f.Log, "log", "info", "log level: debug, info, warn, error")
}

// Party is what PartyFlags resolve to.
type Party struct {
	flags     PartyFlags
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
	switch f.Provider {
	case ProviderDealer:
		if err := Require("dealer", f.Dealer); err != nil {
			return nil, err
		}
		if p.DealerPin, err = Fingerprint("dealer-fingerprint", f.DealerFingerprint); err != nil {
			return nil, err
		}
	case ProviderOT, ProviderHE:
		if f.Dealer != "" || f.DealerFingerprint != "" || f.DealerBudget != 0 {
			return nil, Usage("-dealer, -dealer-fingerprint and -dealer-budget are not used with -provider %s", f.Provider)
		}
	default:
		return nil, Usage("-provider %q: want %s, %s or %s", f.Provider, ProviderDealer, ProviderOT, ProviderHE)
	}
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

// The values of -provider.
const (
	ProviderDealer = "dealer"
	ProviderOT     = "ot"
	// ProviderHE is ProviderOT with the weight-mask correlations made by
	// lattice encryption (ot.LinearHE).
	ProviderHE = "he"
)

// Connect connects to the dealer as party (with -provider dealer) and then
// to the peer (listening or dialling per the flags; name is printed with the
// listening address). With -provider ot or he there is no dealer: the
// provider is an ot.Provider (ot.LinearHE with he) on the peer connection (its OT traffic on dedicated streams
// of that TLS connection) and the returned closer does nothing. The caller
// closes both.
func (p *Party) Connect(ctx context.Context, party int, name string, stdout io.Writer) (beaver.Provider, io.Closer, *transport.Conn, error) {
	if p.flags.Provider == ProviderOT || p.flags.Provider == ProviderHE {
		conn, err := Establish(ctx, p.flags.Endpoint, p.ID, p.PeerPin, p.Options, p.Logger, func(a net.Addr) {
			fmt.Fprintf(stdout, "%s listening %s\n", name, a)
		})
		if err != nil {
			return nil, nil, nil, err
		}
		opts := ot.ProviderOptions{}
		if p.flags.Provider == ProviderHE {
			opts.Linear = ot.LinearHE
		}
		prov, err := ot.NewProvider(conn, party, opts)
		if err != nil {
			conn.Close()
			return nil, nil, nil, err
		}
		return prov, nopCloser{}, conn, nil
	}
	prov, dconn, err := ConnectDealerWith(ctx, p.flags.Dealer, p.ID, p.DealerPin, party, p.Options, p.flags.Endpoint, dealer.ConnectOptions{Budget: p.flags.DealerBudget})
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := Establish(ctx, p.flags.Endpoint, p.ID, p.PeerPin, p.Options, p.Logger, func(a net.Addr) {
		fmt.Fprintf(stdout, "%s listening %s\n", name, a)
	})
	if err != nil {
		dconn.Close()
		return nil, nil, nil, err
	}
	return prov, dconn, conn, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

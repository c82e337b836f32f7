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
	"github.com/selectformer/selectformer/transport"
)

// PartyFlags are the flags modelowner and dataowner share: this host's
// identity, the peer and the dealer with their pinned keys, how to reach the
// peer, link emulation and the log level.
type PartyFlags struct {
	Cert, Key         string
	PeerFingerprint   string
	Dealer            string
	DealerFingerprint string
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
	fs.StringVar(&f.Dealer, "dealer", "", fmt.Sprintf("the dealer's address for party %d; required", party))
	fs.StringVar(&f.DealerFingerprint, "dealer-fingerprint", "", "the dealer's fingerprint or certificate file; required")
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
	if err := Require("dealer", f.Dealer); err != nil {
		return nil, err
	}
	p := &Party{flags: *f, Logger: log}
	if p.PeerPin, err = Fingerprint("peer-fingerprint", f.PeerFingerprint); err != nil {
		return nil, err
	}
	if p.DealerPin, err = Fingerprint("dealer-fingerprint", f.DealerFingerprint); err != nil {
		return nil, err
	}
	if p.Options, err = Link(f.Link); err != nil {
		return nil, err
	}
	if p.ID, err = LoadIdentity(f.Cert, f.Key); err != nil {
		return nil, err
	}
	return p, nil
}

// Connect connects to the dealer as party and then to the peer (listening or
// dialling per the flags; name is printed with the listening address). The
// caller closes both connections.
func (p *Party) Connect(ctx context.Context, party int, name string, stdout io.Writer) (*beaver.Client, *transport.Conn, *transport.Conn, error) {
	prov, dconn, err := ConnectDealer(ctx, p.flags.Dealer, p.ID, p.DealerPin, party, p.Options, p.flags.Endpoint)
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

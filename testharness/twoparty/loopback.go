package twoparty

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/transport"
)

// Loopback is the parties' connection over loopback TLS, for a run whose
// Config.Open makes each party's end as two processes would: party 0
// listens with its identity, party 1 dials it, each pinning the other's
// key (mutually authenticated TLS 1.3).
type Loopback struct {
	ln  *transport.Listener
	ids [2]*transport.Identity
	opt transport.Options
}

// NewLoopback listens on a loopback port for party 0 (ids[0]) with opt
// (its link emulation, its log); close it when the run is done.
func NewLoopback(ids [2]*transport.Identity, opt transport.Options) (*Loopback, error) {
	ln, err := transport.Listen("127.0.0.1:0", ids[0], opt)
	if err != nil {
		return nil, fmt.Errorf("twoparty: loopback: %w", err)
	}
	return &Loopback{ln: ln, ids: ids, opt: opt}, nil
}

// Peer returns party's source.Env.Peer: party 0 accepts party 1's
// connection, party 1 dials party 0.
func (l *Loopback) Peer(party int) func(context.Context) (*transport.Conn, error) {
	return func(ctx context.Context) (*transport.Conn, error) {
		if party == 0 {
			return l.ln.Accept(ctx, l.ids[1].Fingerprint())
		}
		return transport.Dial(ctx, l.ln.Addr().String(), l.ids[1], l.ids[0].Fingerprint(), l.opt)
	}
}

// Close stops listening.
func (l *Loopback) Close() error { return l.ln.Close() }

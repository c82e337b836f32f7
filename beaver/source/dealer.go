package source

import (
	"context"
	"fmt"
)

// The dealer source: a dealer host hands each party its part of every
// correlation (beaver/dealer: its Client over the network, or an
// in-process Dealer's provider, whichever Env.Dealer connects).
func init() {
	Register(Source{
		Name: "dealer",
		Doc:  "a dealer host makes it and hands each party its part",
		Open: openDealer,
	})
}

// openDealer connects to the dealer, then to the peer.
func openDealer(ctx context.Context, env Env) (Opened, error) {
	if env.Dealer == nil {
		return Opened{}, fmt.Errorf("source dealer: %w", errNoDealer)
	}
	prov, closer, err := env.Dealer(ctx)
	if err != nil {
		return Opened{}, err
	}
	conn, err := env.Peer(ctx)
	if err != nil {
		closer.Close()
		return Opened{}, err
	}
	return Opened{Provider: prov, Conn: conn, Closer: closer}, nil
}

package peer

import (
	"context"
	"fmt"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/transport"
)

// ConnectDealer connects to the networked dealer at addr (pinned by
// fingerprint) as party and returns the party's provider and the dealer
// connection (close it when done). Failures are ExitPeer errors.
func ConnectDealer(ctx context.Context, addr string, id *transport.Identity, fingerprint string, party int, opt transport.Options, e Endpoint) (*dealer.Client, *transport.Conn, error) {
	return ConnectDealerWith(ctx, addr, id, fingerprint, party, opt, e, dealer.ConnectOptions{})
}

// ConnectDealerWith is ConnectDealer with the client's options (the session
// budget the party announces).
func ConnectDealerWith(ctx context.Context, addr string, id *transport.Identity, fingerprint string, party int, opt transport.Options, e Endpoint, copt dealer.ConnectOptions) (*dealer.Client, *transport.Conn, error) {
	e.Connect, e.Listen = addr, ""
	conn, err := Establish(ctx, e, id, fingerprint, opt, discard, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("dealer: %w", err)
	}
	cl, err := dealer.ConnectWith(ctx, conn, party, copt)
	if err != nil {
		_ = conn.Close()
		return nil, nil, &Error{Code: ExitPeer, Err: fmt.Errorf("dealer handshake: %w", err)}
	}
	return cl, conn, nil
}

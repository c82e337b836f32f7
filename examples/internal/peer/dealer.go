package peer

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Dealer serves the correlated randomness of one two-party computation to
// the model owner (party 0) and the data owner (party 1), each on its own
// listener that accepts only that party's pinned key. A party may reconnect
// (after a crash, to resume); the dealer keeps serving until its context
// ends or, with Once, party 1's first session is over.
type Dealer struct {
	Server       *beaver.Server
	Listeners    [2]*transport.Listener
	Fingerprints [2]string
	// Once ends Run when both parties' first sessions are over: party 0
	// has its seed and party 1's connection has ended (a run without
	// resume).
	Once bool
	Log  *slog.Logger
}

// Run serves until ctx ends (nil) or, with Once, the session is over (nil).
// It returns an error only if a listener fails. Rejected connections (a
// wrong key, garbage, a silent socket past the handshake timeout) are logged
// by the listeners (transport.Options.Log) and never hold up the party the
// listener is pinned to.
func (d *Dealer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	served := [2]bool{}
	for party := 0; party < 2; party++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := d.Listeners[party].Accept(ctx, d.Fingerprints[party])
				if err != nil {
					// Accept itself logs and skips the connections it
					// rejects (a wrong key, not TLS, a handshake timeout),
					// authenticating several at once: it fails only when
					// ctx ends or the listener does.
					if ctx.Err() != nil {
						return
					}
					cancel(fmt.Errorf("dealer: party %d listener: %w", party, err))
					return
				}
				d.Log.Info("party connected", "party", party, "addr", c.RemoteAddr().String())
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					err := d.Server.Serve(ctx, c)
					st := d.Server.Stats()
					if party == 0 && err == nil {
						d.Log.Info("party 0 has its seed", "party", party)
					} else {
						d.Log.Info("party disconnected", "party", party, "reason", err, "items", st.Items, "bytes", st.BytesRecv)
					}
					// Party 0's session ends when it has its seed, party
					// 1's when it hangs up; the two may finish in either
					// order.
					mu.Lock()
					served[party] = true
					done := d.Once && served[0] && served[1]
					mu.Unlock()
					if done {
						cancel(nil)
					}
				}()
			}
		}()
	}
	<-ctx.Done()
	for _, l := range d.Listeners {
		_ = l.Close()
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Seeds returns the dealer's two seeds: read from path if it exists (so a
// restarted dealer serves the same material and resumed parties can seek
// past what they used), otherwise fresh and, if path is not empty, saved there
// (mode 0600, 64 bytes as 128 hex digits). A malformed file is an ExitInput
// error.
func Seeds(path string) (share.Seed, share.Seed, error) {
	var s0, s1 share.Seed
	if path != "" {
		b, err := os.ReadFile(path)
		if err == nil {
			s0, s1, err = ParseSeeds(b)
			if err != nil {
				return s0, s1, &Error{Code: ExitInput, Err: fmt.Errorf("dealer seed file %s: %w", path, err)}
			}
			return s0, s1, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return s0, s1, &Error{Code: ExitInput, Err: fmt.Errorf("dealer seed file: %w", err)}
		}
	}
	var err error
	if s0, err = share.NewSeed(); err != nil {
		return s0, s1, fmt.Errorf("dealer seeds: %w", err)
	}
	if s1, err = share.NewSeed(); err != nil {
		return s0, s1, fmt.Errorf("dealer seeds: %w", err)
	}
	if path != "" {
		data := hex.EncodeToString(append(s0[:], s1[:]...)) + "\n"
		if err := atomicfile.Write(path, []byte(data), 0o600); err != nil {
			return s0, s1, fmt.Errorf("dealer seed file: %w", err)
		}
	}
	return s0, s1, nil
}

// ParseSeeds decodes a seed file: 128 hex digits (seed of party 0, then of
// party 1), surrounding white space allowed.
func ParseSeeds(b []byte) (share.Seed, share.Seed, error) {
	var s0, s1 share.Seed
	raw, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(raw) != 2*share.SeedSize {
		return s0, s1, fmt.Errorf("want %d hex digits", 4*share.SeedSize)
	}
	copy(s0[:], raw[:share.SeedSize])
	copy(s1[:], raw[share.SeedSize:])
	return s0, s1, nil
}

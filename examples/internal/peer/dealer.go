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

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// Dealer serves correlated randomness to the model owner (party 0) and the
// data owner (party 1), each on its own listener that accepts only that
// party's pinned key; the role of a connection is the role of its listener,
// and a hello claiming the other role is refused (and logged) without a byte
// of material. Material is keyed by the session id both parties present, so
// one dealer may serve several selections. A party may reconnect (after a
// crash, to resume); the dealer keeps serving until its context ends or,
// with Once, both parties are gone.
//
// It logs (Info) each party connecting and leaving, by role ("model owner",
// "data owner") and address, never by key, and why a connection ended.
type Dealer struct {
	Server       *dealer.Server
	Listeners    [2]*transport.Listener
	Fingerprints [2]string
	// Once ends Run when the session is over: both parties have connected
	// (each at least once, a hello claiming the other role not counted)
	// and neither is connected any more — after a finished run, a failed
	// one, or two parties that quit on a handshake mismatch before drawing
	// anything (a run without resume).
	Once bool
	Log  *slog.Logger
}

// RoleName names a party by its role: "model owner" (0), "data owner" (1).
func RoleName(party int) string {
	if party == 0 {
		return "model owner"
	}
	return "data owner"
}

// Listen opens the dealer's two listeners, party 0's on addrs[0] and party
// 1's on addrs[1], with id and base (a link profile, the log) and the
// receive limits of the dealer's connections (dealer.Server.ConnOptions:
// small stream windows, a stream count, so that a party can make the
// dealer buffer at most Server.ConnBufferBound per connection). On error
// nothing is left open; an address that cannot be bound is a ListenError
// naming -listen-p0 or -listen-p1.
func (d *Dealer) Listen(addrs [2]string, id *transport.Identity, base transport.Options) error {
	opt := d.Server.ConnOptions(base)
	for p, addr := range addrs {
		ln, err := transport.Listen(addr, id, opt)
		if err != nil {
			for i, l := range d.Listeners[:p] {
				_ = l.Close()
				d.Listeners[i] = nil
			}
			return ListenError(fmt.Sprintf("listen-p%d", p), err)
		}
		d.Listeners[p] = ln
	}
	return nil
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
	var (
		mu   sync.Mutex
		seen [2]bool // a connection of the party's role has ended
		open [2]int  // the party's connections now
	)
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
				addr := c.RemoteAddr().String()
				mu.Lock()
				open[party]++
				mu.Unlock()
				d.Log.Info("dealer: party connected", "role", RoleName(party), "party", party, "addr", addr)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					err := d.Server.Serve(ctx, c, party)
					st := d.Server.Stats()
					switch {
					case ctx.Err() != nil:
						d.Log.Info("dealer: party left", "role", RoleName(party), "party", party, "addr", addr, "reason", "the dealer is stopping")
					case errors.Is(err, dealer.ErrRefused):
						// The refusal itself is logged (Warn) by the
						// server; a party that hangs up before asking for
						// material (both quit on a handshake mismatch)
						// lands here too.
						d.Log.Info("dealer: party left before drawing material", "role", RoleName(party), "party", party, "addr", addr)
						d.Log.Debug("dealer: party left", "role", RoleName(party), "addr", addr, "err", err)
					case err == nil:
						d.Log.Info("dealer: party left", "role", RoleName(party), "party", party, "addr", addr, "items", st.Items, "bytes", st.BytesRecv)
					default:
						d.Log.Info("dealer: party left", "role", RoleName(party), "party", party, "addr", addr, "reason", err, "items", st.Items, "bytes", st.BytesRecv)
					}
					// A hello claiming the other role is no session of
					// this party's (the key is pinned, the role is wrong).
					var re *dealer.RoleError
					mu.Lock()
					open[party]--
					if !errors.As(err, &re) {
						seen[party] = true
					}
					over := d.Once && seen[0] && seen[1] && open[0] == 0 && open[1] == 0
					mu.Unlock()
					if over && ctx.Err() == nil {
						d.Log.Info("dealer: session over, both parties gone; exiting (-once)")
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

// StateFile returns the dealer's state file for the seed file seeds (the
// per-session high-water marks, kept beside the seeds: seeds + ".state"),
// or "" without a seed file (fresh seeds serve no earlier material).
func StateFile(seeds string) string {
	if seeds == "" {
		return ""
	}
	return seeds + ".state"
}

// NewServer returns the networked dealer for seeds (see Seeds) with its
// state file (see StateFile) and options; a malformed state file, or one of
// other seeds, is an ExitInput error naming the file.
func NewServer(s0, s1 share.Seed, seedsPath string, opt dealer.ServerOptions) (*dealer.Server, error) {
	opt.StateFile = StateFile(seedsPath)
	srv, err := dealer.NewServerWithSeeds(s0, s1, opt)
	if errors.Is(err, dealer.ErrBadStateFile) {
		return nil, &Error{Code: ExitInput, Err: fmt.Errorf("dealer: %w", err)}
	}
	if err != nil {
		return nil, fmt.Errorf("dealer: %w", err)
	}
	return srv, nil
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

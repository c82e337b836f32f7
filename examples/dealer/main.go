// Command dealer is the networked dealer of a selectformer session: a third
// host, trusted by both parties not to collude with either, that hands out
// correlated randomness (Beaver triples, wrap pairs for truncation, ...) and never sees
// an input.
//
// It listens on two addresses, one per party, and accepts on each only that
// party's pinned key:
//
//	dealer -cert d.crt -key d.key \
//	    -listen-p0 :7100 -p0-fingerprint mo.crt \
//	    -listen-p1 :7101 -p1-fingerprint do.crt [-seeds dealer.seeds] [-once]
//
// Fingerprints are 64 hex digits (as printed by keygen) or the path of the
// party's certificate. It prints "dealer listening p0=ADDR p1=ADDR" on stdout
// once both listeners are bound, then serves until interrupted (SIGINT or
// SIGTERM: exit 0) or, with -once, until its session ends: both parties
// have connected and both are gone (after the run, or after both quit on a
// handshake mismatch). It logs each party connecting and leaving by role.
// Each connection's role is its listener's: a hello claiming the other role
// is refused and logged. Material is keyed by the session id both parties
// present (drawn jointly by them), so no word is served to two
// computations. Parties may reconnect to resume; with -seeds the dealer
// itself may be restarted too (the seeds are kept in that file, and each
// session's high-water marks in FILE.state, both mode 0600): a restarted
// dealer refuses every position it served before.
//
// It bounds what a party can make it do (dealer.ServerOptions; 0 keeps the
// default): -max-request-words (words of any part of one item, default
// 2^25) and -max-request-macs (multiply-adds of one matrix item, 2^36),
// both checked before anything is allocated; -session-budget (the work, in
// beaver.Request.DealerWork units, a session may draw when the parties
// announce less or nothing, default 2^50); -max-streams (streams per
// connection and per session, 256); -max-conns (connections per party
// key at once, 4: a party sharded over K worker pairs with a dealer per
// pair, worker k's -dealer holding {shard}, holds 1 at each dealer and 2
// at the one its coordinator uses too, pair 0's, which the default
// covers with room for a replaced pod's reconnection; one dealer serving
// every pair holds K+1, its coordinator's and its K workers', so start it
// with at least K+1, more for a replaced worker's reconnection);
// -max-sessions (sessions kept, 1024) and -session-retention (a
// session nobody joined for that long is retired, 720h): a retired
// session's id is refused for good, and the state file keeps only an
// 8-byte tag of it. Its connections have 64 KiB stream windows and at most
// -max-streams + 1 streams opened by the party (dealer.Server.ConnOptions),
// so the frames a party can make it hold, read or not, are at most about
// 1.25 × 64 KiB × 2 × (-max-streams + 1) per connection: 40 MiB at the
// default 256 streams, 161 MiB for the 4 connections of one key.
// Exit codes: see examples/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/examples/internal/peer"
)

// summary is the first line of -h.
const summary = "dealer serves the correlated randomness (Beaver triples, wrap pairs for truncation, ...) of a selectformer session to both parties; it never sees an input."

func main() { peer.Exec("dealer", summary, serve, nil) }

func serve(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	cert := fs.String("cert", "", "this dealer's certificate (PEM, from keygen); required")
	key := fs.String("key", "", "this dealer's private key (PEM, from keygen); required")
	listen0 := fs.String("listen-p0", "", "address for the model owner (party 0), e.g. :7100; required")
	listen1 := fs.String("listen-p1", "", "address for the data owner (party 1), e.g. :7101; required")
	fp0 := fs.String("p0-fingerprint", "", "model owner's fingerprint or certificate file; required")
	fp1 := fs.String("p1-fingerprint", "", "data owner's fingerprint or certificate file; required")
	seeds := fs.String("seeds", "", "keep the dealer's seeds in this file (created if missing) and its served positions in FILE.state, so a restarted dealer can serve a resumed session and refuses positions it served")
	once := fs.Bool("once", false, "exit when the session ends: both parties have connected and both are gone (no resume)")
	link := fs.String("link", "", "emulate a link on the dealer's sending direction: lan, paper-wan or none")
	idle := fs.Duration("idle-timeout", 0, "drop a data owner that sends no request for this long (0: never)")
	maxWords := fs.Int("max-request-words", 0, "refuse an item with a part of more words than this (0: 2^25)")
	maxMACs := fs.Uint64("max-request-macs", 0, "refuse a matrix item of more multiply-adds than this (0: 2^36)")
	budget := fs.Uint64("session-budget", 0, "most dealer work (beaver.Request.DealerWork units) a session may draw (0: 2^50); the parties may announce less")
	maxStreams := fs.Int("max-streams", 0, "most streams per connection and per session (0: 256)")
	maxConns := fs.Int("max-conns", 0, "most connections per party key at once (0: 4); a party sharded over K worker pairs (-shards K) holds 2 at a dealer per pair (pair 0's, which its coordinator shares) but K+1 at one dealer serving every pair, its coordinator's and its workers': there, set at least K+1")
	maxSessions := fs.Int("max-sessions", 0, "most sessions kept; more retire the least recently used (0: 1024)")
	retention := fs.Duration("session-retention", 0, "retire a session nobody joined for this long (0: 720h)")
	level := fs.String("log", "info", "log level: debug, info, warn, error")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	log, err := peer.Logger(stderr, *level)
	if err != nil {
		return err
	}
	if err := peer.Require("listen-p0", *listen0, "listen-p1", *listen1); err != nil {
		return err
	}
	var pins [2]string
	if pins[0], err = peer.Fingerprint("p0-fingerprint", *fp0); err != nil {
		return err
	}
	if pins[1], err = peer.Fingerprint("p1-fingerprint", *fp1); err != nil {
		return err
	}
	if pins[0] == pins[1] {
		return peer.Usage("-p0-fingerprint and -p1-fingerprint are the same key; the parties need distinct identities")
	}
	opt, err := peer.Link(*link)
	if err != nil {
		return err
	}
	if *idle < 0 {
		return peer.Usage("-idle-timeout must not be negative")
	}
	if *maxWords < 0 || *maxWords > beaver.MaxItemWords || *maxStreams < 0 || *maxStreams > 1<<16 || *maxConns < 0 || *maxSessions < 0 || *maxSessions > 1<<16 || *retention < 0 {
		return peer.Usage("-max-request-words (at most %d), -max-streams and -max-sessions (at most 65536), -max-conns and -session-retention must not be negative", beaver.MaxItemWords)
	}
	id, err := peer.LoadIdentity(*cert, *key)
	if err != nil {
		return err
	}
	s0, s1, err := peer.Seeds(*seeds)
	if err != nil {
		return err
	}
	srv, err := peer.NewServer(s0, s1, *seeds, dealer.ServerOptions{
		IdleTimeout: *idle, Fingerprints: pins, Logger: log,
		MaxRequestWords: *maxWords, MaxRequestMACs: *maxMACs, SessionBudget: *budget, MaxStreams: *maxStreams,
		MaxConnsPerKey: *maxConns, MaxSessions: *maxSessions, SessionRetention: *retention,
	})
	if err != nil {
		return err
	}
	d := &peer.Dealer{
		Server:       srv,
		Fingerprints: pins,
		Once:         *once,
		Log:          log,
	}
	opt.Log = log // the listeners log the connections they reject
	if err := d.Listen([2]string{*listen0, *listen1}, id, opt); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dealer listening p0=%s p1=%s\n", d.Listeners[0].Addr(), d.Listeners[1].Addr())
	start := time.Now()
	if err := d.Run(ctx); err != nil {
		return err
	}
	st := d.Server.Stats()
	log.Info("dealer done", "items", st.Items, "bytes", st.BytesRecv, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

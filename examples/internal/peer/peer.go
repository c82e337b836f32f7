// Package peer holds what the example binaries (keygen, dealer, modelowner,
// dataowner) share: exit codes, identity and fingerprint flags, link profiles
// and the set-up of an authenticated connection, either by listening or by
// dialling.
package peer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/selectformer/selectformer/transport"
)

// Exit codes of every example binary (documented in examples/README.md).
const (
	// ExitOK: the command finished its work.
	ExitOK = 0
	// ExitFailure: a runtime failure after the session was established
	// (connection lost, protocol error, I/O error writing results).
	ExitFailure = 1
	// ExitUsage: bad command line or configuration, to fix before a rerun:
	// an unknown flag, a missing or invalid value, inconsistent
	// parameters, a listening address this host cannot bind (in use, or
	// not its own: ListenError), or a flag that differs from the peer's
	// (the selection handshake's mismatch, named by the flag).
	ExitUsage = 2
	// ExitPeer: no authenticated session with a peer: it could not be
	// reached, its key is not the pinned one (or it rejected ours), or the
	// peer ended the session (its public reason code says why:
	// selection.AbortCode).
	ExitPeer = 3
	// ExitInput: an input file (identity, model, proxies, pool, state
	// checkpoint) is missing, unreadable or malformed; the message names it.
	ExitInput = 4
	// ExitLabel: the bootstrap sample was not labelled: the model owner's
	// label command failed or outlived -label-timeout, or no labels file
	// arrived in its -label-dir within it. Nothing is lost: restarted with
	// the same -state, both parties meet on the same coin and the model owner
	// labels the same points again.
	ExitLabel = 5
	// ExitInterrupted: the command was stopped by SIGINT or SIGTERM (128 +
	// SIGINT, as shells report an interrupted command). A party prints one
	// line saying where it stopped and how to resume; the error chain goes
	// to its debug log.
	ExitInterrupted = 130
)

// InterruptError is the error of a command stopped by SIGINT or SIGTERM: its
// text is the one line the command prints (no error chain).
type InterruptError struct {
	// Command is the binary's name (modelowner, dataowner, quickstart).
	Command string
	// Where says where it stopped, e.g. "in phase 1 of 2 after 3 of 8
	// batches" or "while connecting to the peer"; empty if unknown.
	Where string
	// Next says what to do, e.g. "rerun with the same flags and -state
	// DIR to resume"; empty if nothing.
	Next string
	// Err is the error the command's work returned when it was stopped.
	Err error
}

// Error returns the line printed for the interrupt.
func (e *InterruptError) Error() string {
	s := "interrupted: " + e.Command + " stopped"
	if e.Where != "" {
		s += " " + e.Where
	}
	if e.Next != "" {
		s += "; " + e.Next
	}
	return s
}

// Unwrap returns the error the work returned.
func (e *InterruptError) Unwrap() error { return e.Err }

// Interrupted returns err (which may be nil) as an ExitInterrupted error of
// command, see InterruptError.
func Interrupted(command, where, next string, err error) error {
	return &Error{Code: ExitInterrupted, Err: &InterruptError{Command: command, Where: where, Next: next, Err: err}}
}

// Error is an error that carries the exit code the command should end with.
type Error struct {
	Code int
	Err  error
	// Config marks an ExitUsage error that the flags' help does not
	// explain (an address in use, a flag that differs from the peer's):
	// Main prints no pointer to -h after it.
	Config bool
}

// ConfigError returns err as an ExitUsage error of the configuration
// (Error.Config), nil for nil.
func ConfigError(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: ExitUsage, Err: err, Config: true}
}

// Error returns the wrapped error's text.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Usage returns an error with exit code ExitUsage.
func Usage(format string, a ...any) error {
	return &Error{Code: ExitUsage, Err: fmt.Errorf(format, a...)}
}

// WithCode wraps err (if not nil and not already coded) with code.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: code, Err: err}
}

// Code returns the exit code for err: ExitOK for nil, the code of an *Error
// in its chain, ExitPeer for a transport.PinError, ExitFailure otherwise.
func Code(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var pe *transport.PinError
	if errors.As(err, &pe) {
		return ExitPeer
	}
	return ExitFailure
}

// Main runs a command's body and turns its error into a message on stderr and
// an exit code. Usage errors also print the flag set's defaults.
func Main(name string, stderr io.Writer, fs *flag.FlagSet, err error) int {
	if err == nil {
		return ExitOK
	}
	code := Code(err)
	var ie *InterruptError
	if errors.As(err, &ie) {
		// One line, no error chain: the command names itself.
		fmt.Fprintln(stderr, ie.Error())
		return code
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ce *Error
	if code == ExitUsage && fs != nil && !(errors.As(err, &ce) && ce.Config) {
		fmt.Fprintf(stderr, "run '%s -h' for the flags\n", name)
	}
	return code
}

// ListenError is the error of a listener that could not be opened on the
// address of flag (without its dash): a local configuration error
// (ExitUsage: the address is in use, or not this host's), not a peer
// failure.
func ListenError(flag string, err error) error {
	return ConfigError(fmt.Errorf("flag -%s: %w (is the address in use, or not this host's?)", flag, err))
}

// Parse parses args into fs (whose output goes to stderr); -h gives
// flag.ErrHelp, any other problem (including positional arguments) a usage
// error.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.Init(fs.Name(), flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &Error{Code: ExitUsage, Err: err}
	}
	if fs.NArg() > 0 {
		return Usage("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Require returns a usage error naming the first empty flag value.
func Require(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return Usage("flag -%s is required", pairs[i])
		}
	}
	return nil
}

// LoadIdentity reads this host's identity (written by keygen); a missing or
// malformed file is an ExitInput error.
func LoadIdentity(certPath, keyPath string) (*transport.Identity, error) {
	if certPath == "" || keyPath == "" {
		return nil, Usage("flags -cert and -key are required (make them with keygen)")
	}
	id, err := transport.LoadIdentity(certPath, keyPath)
	if err != nil {
		return nil, &Error{Code: ExitInput, Err: err}
	}
	return id, nil
}

// Fingerprint resolves a peer fingerprint flag: 64 hex digits (colons and
// spaces allowed), or the path of the peer's certificate PEM file. flagName
// names the flag in errors.
func Fingerprint(flagName, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", Usage("flag -%s is required: the peer's fingerprint (printed by keygen) or its certificate file", flagName)
	}
	if fp, err := transport.ParseFingerprint(v); err == nil {
		return fp, nil
	}
	if _, err := os.Stat(v); err != nil {
		return "", Usage("flag -%s: %q is neither a fingerprint (64 hex digits) nor a readable certificate file", flagName, v)
	}
	fp, err := transport.LoadFingerprint(v)
	if err != nil {
		return "", &Error{Code: ExitInput, Err: fmt.Errorf("-%s: %w", flagName, err)}
	}
	return fp, nil
}

// Link returns the transport options for an emulated link profile name
// ("" or "none": no emulation).
func Link(name string) (transport.Options, error) {
	if name == "" || name == "none" {
		return transport.Options{}, nil
	}
	p, err := transport.ProfileByName(name)
	if err != nil {
		return transport.Options{}, Usage("flag -link: %v (known: %s)", err, strings.Join(transport.ProfileNames(), ", "))
	}
	return transport.Options{Link: &p}, nil
}

// Endpoint says how to reach a peer: listen on Listen, or dial Connect.
// Exactly one must be set.
type Endpoint struct {
	Listen  string
	Connect string
	// Timeout bounds the whole set-up (waiting for the peer included).
	Timeout time.Duration
}

// Validate checks that exactly one of Listen and Connect is set. listenFlag
// and connectFlag name the flags in the error.
func (e Endpoint) Validate(listenFlag, connectFlag string) error {
	if (e.Listen == "") == (e.Connect == "") {
		return Usage("exactly one of -%s and -%s is required", listenFlag, connectFlag)
	}
	return nil
}

// Establish opens the authenticated connection to the peer pinned by
// fingerprint. Dialling, it retries every failure but a key mismatch (see
// dialRetrying) until the timeout. Listening, it waits for the pinned peer
// until the timeout: a stranger, garbage or a silent socket is logged at
// warn level on log and skipped, and the timeout's error names the last
// one. Every failure is an ExitPeer error, but a listener that cannot be
// opened (ListenError: ExitUsage). onListen, if not nil, is called
// with the bound address once listening.
func Establish(ctx context.Context, e Endpoint, id *transport.Identity, fingerprint string, opt transport.Options, log *slog.Logger, onListen func(net.Addr)) (*transport.Conn, error) {
	if e.Timeout <= 0 {
		e.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, e.Timeout)
	defer cancel()
	if e.Listen != "" {
		if opt.Log == nil {
			opt.Log = log // the listener logs the connections it rejects
		}
		ln, err := transport.Listen(e.Listen, id, opt)
		if err != nil {
			return nil, ListenError("listen", err)
		}
		defer ln.Close()
		if onListen != nil {
			onListen(ln.Addr())
		}
		log.Info("waiting for peer", "listen", ln.Addr().String(), "peer", short(fingerprint))
		c, err := ln.Accept(ctx, fingerprint)
		if err != nil {
			return nil, &Error{Code: ExitPeer, Err: fmt.Errorf("waiting for the peer on %s: %w", ln.Addr(), err)}
		}
		return c, nil
	}
	c, err := dialRetrying(ctx, e.Connect, id, fingerprint, opt, log)
	if err != nil {
		return nil, &Error{Code: ExitPeer, Err: err}
	}
	return c, nil
}

// The pauses between a dialler's attempts: doubling from the first to the
// last, each drawn from [pause/2, 3·pause/2) so that diallers that failed
// together (the workers of a party) do not retry in step.
const (
	firstRetryPause = 100 * time.Millisecond
	maxRetryPause   = 2 * time.Second
)

// dialRetrying dials the peer at addr pinned by fingerprint until it
// connects or ctx ends, and returns the last failure then. It retries every
// failure but a key mismatch (transport.PinError: the peer's key is not the
// pinned one; transport.ErrKeyRejected: the peer refuses ours), which a
// retry cannot mend and which nobody but the peer, or whoever answers in its
// place, can cause: a peer not listening yet, a handshake that timed out,
// and a socket closed or reset during the handshake (a listener that evicted
// it under a flood of strangers' connections, a restarting peer) are all
// tried again, after a pause that doubles from 100 ms to 2 s
// (TestEstablishDialRetriesFailedHandshakes). Every party dialler (a
// party's peer connection, its workers' connections to their coordinator
// and to their pair, a dealer client) dials through it.
func dialRetrying(ctx context.Context, addr string, id *transport.Identity, fingerprint string, opt transport.Options, log *slog.Logger) (*transport.Conn, error) {
	pause := firstRetryPause
	for {
		c, err := transport.Dial(ctx, addr, id, fingerprint, opt)
		if err == nil {
			return c, nil
		}
		var pe *transport.PinError
		if errors.As(err, &pe) || errors.Is(err, transport.ErrKeyRejected) || ctx.Err() != nil {
			return nil, err
		}
		wait := pause/2 + rand.N(pause)
		if errors.Is(err, syscall.ECONNREFUSED) {
			log.Debug("peer not listening yet; retrying", "addr", addr, "pause", wait)
		} else {
			log.Warn("connection attempt failed; retrying", "addr", addr, "pause", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w; gave up: %w", err, ctx.Err())
		case <-time.After(wait):
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// Logger returns a text logger on w at the given level name (debug, info,
// warn, error).
func Logger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, Usage("flag -log: %v", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

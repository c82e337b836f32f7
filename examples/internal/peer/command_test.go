package peer

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	parseOnly := func(_ context.Context, fs *flag.FlagSet, args []string, _, _ io.Writer) error {
		fs.Int("n", 0, "a number")
		return Parse(fs, args)
	}
	failing := func(err error) Command {
		return func(context.Context, *flag.FlagSet, []string, io.Writer, io.Writer) error { return err }
	}
	toInput := func(err error) error { return &Error{Code: ExitInput, Err: err} }
	cases := []struct {
		name     string
		cmd      Command
		classify func(error) error
		args     []string
		code     int
		stderr   string
	}{
		{"ok", parseOnly, nil, []string{"-n", "3"}, ExitOK, ""},
		{"help", parseOnly, nil, []string{"-h"}, ExitOK, "tool does things.\n\nUsage of tool:\n  -n int"},
		{"unknown flag", parseOnly, nil, []string{"-bogus"}, ExitUsage, "run 'tool -h' for the flags"},
		{"positional", parseOnly, nil, []string{"extra"}, ExitUsage, `unexpected argument "extra"`},
		{"plain error", failing(errors.New("boom")), nil, nil, ExitFailure, "tool: boom"},
		{"classified", failing(errors.New("bad file")), toInput, nil, ExitInput, "tool: bad file"},
		// A configuration error (an address in use, the peer's flags) is
		// exit 2 without the pointer to -h, which would not explain it.
		{"config", failing(ConfigError(errors.New("flag -listen: address already in use"))), nil, nil, ExitUsage, "tool: flag -listen: address already in use\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Run(context.Background(), "tool", "tool does things.", c.args, &out, &errb, c.cmd, c.classify)
			if code != c.code || !strings.Contains(errb.String(), c.stderr) || (c.name == "help" && !strings.HasPrefix(errb.String(), c.stderr)) ||
				c.name == "config" && strings.Contains(errb.String(), "-h") {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), c.code, c.stderr)
			}
		})
	}
}

// TestRunInterrupted: an error returned after the context ended (SIGINT or
// SIGTERM) exits ExitInterrupted with one line, the command's own
// InterruptError if it gave one, never the chain of cancelled calls.
func TestRunInterrupted(t *testing.T) {
	chain := errors.New("selection: phase 1 batch 3: secure: forward layer 0: context canceled")
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"plain", chain, "interrupted: tool stopped\n"},
		{"described", Interrupted("tool", "in phase 1 of 2 after 3 of 8 batches", "rerun with the same flags and -state s to resume", chain),
			"interrupted: tool stopped in phase 1 of 2 after 3 of 8 batches; rerun with the same flags and -state s to resume\n"},
		{"coded", WithCode(ExitPeer, chain), "interrupted: tool stopped\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out, errb bytes.Buffer
			cmd := func(context.Context, *flag.FlagSet, []string, io.Writer, io.Writer) error { return c.err }
			if code := Run(ctx, "tool", "tool does things.", nil, &out, &errb, cmd, nil); code != ExitInterrupted || errb.String() != c.want {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errb.String(), ExitInterrupted, c.want)
			}
		})
	}
}

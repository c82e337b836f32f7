package peer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Command is the body of an example binary: it parses args into fs (named
// after the binary, writing to stderr) and does the work.
type Command func(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error

// Run runs cmd as the binary name and returns its exit code: ExitOK on
// success or -h, otherwise the code of the error after classify (nil keeps
// the error as it is), with the error printed to stderr. An error returned
// after ctx ended (SIGINT or SIGTERM, see Exec) is an ExitInterrupted one,
// printed as one line (an *InterruptError the command returned, or one that
// only names the command). summary is the one
// line, starting with the name, that says what the binary does: -h prints it
// first, then the flags.
func Run(ctx context.Context, name, summary string, args []string, stdout, stderr io.Writer, cmd Command, classify func(error) error) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage of %s:\n", summary, name)
		fs.PrintDefaults()
	}
	err := cmd(ctx, fs, args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if classify != nil {
		err = classify(err)
	}
	var ie *InterruptError
	if err != nil && ctx.Err() != nil && !errors.As(err, &ie) {
		// Stopped by a signal where the command did not say where: one
		// line instead of the chain of cancelled calls.
		err = Interrupted(name, "", "", err)
	}
	return Main(name, stderr, fs, err)
}

// Exec runs cmd on the process's arguments under a context that SIGINT and
// SIGTERM cancel, and exits the process with the command's exit code (see
// Run for summary).
func Exec(name, summary string, cmd Command, classify func(error) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, name, summary, os.Args[1:], os.Stdout, os.Stderr, cmd, classify)
	stop()
	os.Exit(code)
}

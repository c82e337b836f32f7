// Command mpcbench measures selectformer's two-party protocols.
//
//	mpcbench ops [--json] [--link lan|paper-wan] [--tiny] [--prefetch=false] [--only mul,trunc] [--provider dealer|ot|he|he-silent]
//
// The ops subcommand runs every registered op between two in-process parties
// (transport.Pipe and an in-process dealer) and prints, per op, the online
// rounds, the bytes each party sends, the dealer's bytes, the online wall time
// and the offline (material) time; --json prints a JSON array instead of a
// table. With --link the parties talk over transport's link emulation and the
// report adds the link model's delay (rounds × latency + busiest direction /
// bandwidth). By default each party first rehearses the op to learn its
// requests of correlated randomness (protocol.Rehearse) and the measured run
// draws it all ahead with a protocol.Prefetch, so "seconds" is the online
// phase alone. With --provider ot
// there is no dealer: the parties make the material by OT (package
// beaver/ot) over their own pipe, dealer_bytes counts that OT traffic (both
// directions, base OTs included) and the offline time includes it. With
// --provider he the weight-mask correlations are made by lattice encryption
// instead (ot.Lattice: the encrypted weights and the HE outputs are counted
// in dealer_bytes too).
//
// Ops are registered by Op entries (ops.go); the arithmetic ones live in
// arith.go and the nonlinear ones in nonlinear.go. More subcommands plug
// into the commands table: forward (forward.go, forward_party.go), select
// (select.go: a whole selection of a workload projected to its full pool,
// optionally cross-checked against separate processes; --provider ot or he
// runs it with no dealer, in process) and report
// (report.go: writes a results report; --regenerate replaces bench/RESULTS.md
// and its plots).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/transport"
)

// command is one subcommand: it parses its own flags from args.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand table, filled from init functions (ops here,
// forward and forward-party in their files).
var commands = map[string]command{}

func init() {
	commands["ops"] = command{"measure every protocol op (rounds, bytes, time)", runOps}
}

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mpcbench:", err)
		os.Exit(2)
	}
}

// summary is the first line of -h.
const summary = "mpcbench measures the cost (rounds, bytes, dealer traffic, time, memory) of selectformer's two-party protocols and secure forward."

func usage(w io.Writer) {
	fmt.Fprintln(w, summary)
	fmt.Fprintln(w, "\nusage: mpcbench <command> [flags]   (mpcbench <command> -h for its flags)\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); !errors.Is(err, flag.ErrHelp) {
		return err
	}
	return nil // a subcommand's -h
}

// parseFlags parses a command's args into fs and refuses positional
// arguments, naming the command.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", fs.Name(), fs.Args())
	}
	return nil
}

// newFlagSet returns the flag set of subcommand name, writing to stderr;
// its -h prints the subcommand's summary first, then its flags.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "mpcbench %s: %s\n\nflags:\n", name, commands[name].summary)
		fs.PrintDefaults()
	}
	return fs
}

func runOps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ops", stderr)
	asJSON := fs.Bool("json", false, "print a JSON array instead of a table")
	linkName := fs.String("link", "", "emulate a link: "+strings.Join(transport.ProfileNames(), ", "))
	tiny := fs.Bool("tiny", false, "tiny shapes (for tests)")
	prefetch := fs.Bool("prefetch", true, "make correlated randomness ahead (offline) so seconds is online time only")
	only := fs.String("only", "", "comma-separated op names to run (default all)")
	provider := fs.String("provider", source.Default, "where the correlated randomness comes from (in process): "+source.Usage())
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	src, err := sourceFlag("ops: ", *provider)
	if err != nil {
		return err
	}
	var link *transport.Profile
	if *linkName != "" && *linkName != "none" {
		p, err := transport.ProfileByName(*linkName)
		if err != nil {
			return fmt.Errorf("ops: %w", err)
		}
		link = &p
	}
	sc := Full
	if *tiny {
		sc = Tiny
	}
	var want []string
	if *only != "" {
		want = strings.Split(*only, ",")
		for _, name := range want {
			if !slices.ContainsFunc(ops(), func(o Op) bool { return o.Name == name }) {
				return fmt.Errorf("ops: unknown op %q", name)
			}
		}
	}
	var results []Result
	for _, op := range ops() {
		if want != nil && !slices.Contains(want, op.Name) {
			continue
		}
		t0 := time.Now()
		r, err := measure(ctx, op, sc, link, *prefetch, src)
		if err != nil {
			return fmt.Errorf("ops: %w", err)
		}
		fmt.Fprintf(stderr, "mpcbench: %s done in %v\n", op.Name, time.Since(t0).Round(time.Millisecond))
		results = append(results, r)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tshape\tn\trounds\tbytes_p0\tbytes_p1\tdealer_bytes\tonline s\toffline s\tlink model s\t")
	for _, r := range results {
		model := "-"
		if r.Link != "" {
			model = fmt.Sprintf("%.4f", r.LinkModelSeconds)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.4f\t%s\t\n", r.Op, r.Shape, r.N, r.Rounds, r.BytesP0, r.BytesP1, r.DealerBytes, r.Seconds, r.OfflineSeconds, model)
	}
	return tw.Flush()
}

// sourceFlag returns the source of correlated randomness --provider
// names; an unknown name is an error starting with prefix.
func sourceFlag(prefix, name string) (source.Source, error) {
	src, ok := source.ByName(name)
	if !ok {
		return src, fmt.Errorf("%s--provider %q: want %s", prefix, name, source.Choices())
	}
	return src, nil
}

// defaultSource returns the source the commands use by default (the
// in-process dealer).
func defaultSource() source.Source {
	src, _ := source.ByName(source.Default)
	return src
}

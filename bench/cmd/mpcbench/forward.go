package main

// The forward subcommand:
//
//	mpcbench forward [--json] --shape bert-base|distilbert|vit-small|vit-base
//	    [--layers L] [--heads W] [--mlp-dim D] [--seq N] [--batch B] [--exact]
//	    [--public-mask] [--private-embeddings] [--full-last-layer] [--link lan|paper-wan]
//	    [--per-party [--timeout D]] [--by-kind | --by-module] [--provider dealer|ot|he|he-silent]
//
// runs the secure proxy forward (package proxy/secure, measured by package bench) with random weights of
// the shape between two in-process parties and prints the cost of one Forward
// call for the whole batch (weight sharing excluded, reported apart).
//
// With --per-party [--timeout D] the dealer and the two parties run as three
// child processes of this binary over loopback TLS (forward_party.go), and the
// report adds each process's peak Go heap (peak_bytes_p0, peak_bytes_p1,
// peak_bytes_dealer; peak_bytes is then their sum) and peak RSS (rss_bytes_*).
//
// With --provider ot or he there is no dealer (forward_free.go): the two
// in-process parties make the correlations with an ot.Provider on their own
// pipe (he: the weight-mask correlations by lattice encryption), run the
// forward twice in one session (the first run with the one-time uploads of
// encrypted weights, the second the steady state of later candidates) and
// print the provider's bytes each way and seconds, kind by kind.
//
// With --by-module it prints where the bytes go instead (a proxy only):
// bench.ModuleCosts's table, per candidate, of every step of the forward
// (secure.ForwardCostRows: rounds and bytes each party sends) with the
// dealer bytes each party receives for it, then the sums per module, and
// fails if the rows do not add up to the measured forward. The default
// configuration of `mpcbench report`'s table is the sst2 phase-0 proxy:
// --shape distilbert --layers 1 --mlp-dim 2 --batch 1.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/bench"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

func init() {
	commands["forward"] = command{"cost of the secure proxy forward pass (random weights of a shape)", runForward}
}

func runForward(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("forward", stderr)
	asJSON := fs.Bool("json", false, "print a JSON object")
	perParty := fs.Bool("per-party", false, "run the dealer and each party as its own process (loopback TLS) and report each one's peak memory")
	timeout := fs.Duration("timeout", time.Hour, "with --per-party: give up (and kill the child processes) after this long")
	byKind := fs.Bool("by-kind", false, "also print the correlated randomness drawn per candidate, kind by kind (not with --per-party)")
	provider := fs.String("provider", source.Default, "where the correlated randomness comes from (in process; a dealer-free source runs the forward twice in one session and prints its traffic and time per kind): "+source.Usage())
	byModule := fs.Bool("by-module", false, "print where the bytes go: per step and module of a proxy's forward, the bytes each party sends and the dealer bytes each receives per candidate (not with --per-party; --json prints bench.ModuleTable)")
	bf := addBenchFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := bf.config()
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	src, err := sourceFlag("forward: ", *provider)
	if err != nil {
		return err
	}
	// A source with a dealer is measured on the run's in-process dealer
	// (bench.Forward); a dealer-free one by runForwardFree.
	if src.DealerFree {
		if *perParty || *asJSON || *byKind {
			return fmt.Errorf("forward: --provider %s prints its own table: drop --per-party, --json and --by-kind", src.Name)
		}
		return runForwardFree(ctx, cfg, src, stdout)
	}
	if *byModule {
		if *perParty || *byKind || cfg.Exact {
			return fmt.Errorf("forward: --by-module measures a proxy in one process: drop --per-party, --by-kind and --exact")
		}
		return runByModule(ctx, cfg, *asJSON, stdout)
	}
	if *perParty {
		if *byKind {
			return fmt.Errorf("forward: --by-kind counts in one process: drop --per-party")
		}
		return runPerParty(ctx, bf, cfg, *timeout, *asJSON, stdout, stderr)
	}
	res, err := bench.Forward(ctx, cfg)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	printForward(stdout, res)
	if *byKind {
		printKinds(stdout, res)
	}
	return nil
}

// runByModule prints cfg's module table (bench.ModuleCosts).
func runByModule(ctx context.Context, cfg bench.ForwardConfig, asJSON bool, stdout io.Writer) error {
	tab, err := bench.ModuleCosts(ctx, cfg)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(tab); err != nil {
			return err
		}
	} else if err := printModules(stdout, tab); err != nil {
		return err
	}
	if err := tab.Check(); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	return nil
}

// printModules prints a module table: the steps, then the sums per module.
func printModules(w io.Writer, tab *bench.ModuleTable) error {
	a := tab.Arch
	fmt.Fprintf(w, "where the bytes go: %s ⟨%dL,%dH,d%d⟩, sequence %d, batch %d, per candidate (CPU %s)\n\n", tab.Config.Shape, a.Layers, a.Heads, a.MLPHidden, a.Seq, tab.Config.Batch, bench.CurrentMachine().CPU)
	if err := bench.WriteModuleTable(w, tab); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return bench.WriteModuleSummary(w, tab)
}

// printKinds prints res's correlations per candidate as a Markdown table.
func printKinds(stdout io.Writer, res *bench.ForwardResult) {
	b := int64(res.Batch)
	fmt.Fprintln(stdout, "\ncorrelated randomness per candidate:")
	fmt.Fprintln(stdout, "| kind | items | n | MACs | dealer words p0 | dealer words p1 | dealer bytes | words held p0 | words held p1 |")
	fmt.Fprintln(stdout, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var total int64
	for _, u := range res.Correlations {
		dealer := 8 * (u.DealerWords[0] + u.DealerWords[1]) / b
		total += dealer
		fmt.Fprintf(stdout, "| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n", u.Kind, u.Items/b, u.N/b, u.MACs/uint64(b),
			u.DealerWords[0]/b, u.DealerWords[1]/b, dealer, u.PartWords[0]/b, u.PartWords[1]/b)
	}
	fmt.Fprintf(stdout, "| total | | | | | | %d | | |\n", total)
}

// printForward prints res as text.
func printForward(stdout io.Writer, res *bench.ForwardResult) {
	b := float64(res.Batch)
	fmt.Fprintf(stdout, "%s L=%d W=%d d=%d seq=%d batch=%d exact=%v: %d rounds, bytes p0 %d p1 %d, dealer %d, %.3f s, peak heap %d B\n",
		res.Shape, res.Layers, res.Heads, res.MLPHidden, res.Seq, res.Batch, res.Exact, res.Rounds, res.BytesP0, res.BytesP1, res.DealerBytes, res.Seconds, res.PeakBytes)
	fmt.Fprintf(stdout, "per candidate: bytes p0 %.0f p1 %.0f, %.4f s\n", float64(res.BytesP0)/b, float64(res.BytesP1)/b, res.Seconds/b)
}

// benchFlags are the flags that describe a bench.ForwardConfig, shared by
// forward and its child processes (forward-party).
type benchFlags struct {
	shape                                *string
	layers, heads, mlpDim, seq, batch    *int
	labels                               *int
	exact, publicMask, privEmb, fullLast *bool
	link                                 *string
	seed                                 *uint64
}

func addBenchFlags(fs *flag.FlagSet) *benchFlags {
	return &benchFlags{
		shape:      fs.String("shape", "bert-base", "target shape: "+strings.Join(bench.Shapes, ", ")),
		layers:     fs.Int("layers", 1, "layers L"),
		heads:      fs.Int("heads", 0, "heads W per layer (0: all heads of the shape)"),
		mlpDim:     fs.Int("mlp-dim", 16, "hidden width d of the approximator MLPs"),
		seq:        fs.Int("seq", 128, "padded sequence length (ViT-B/16 at 224 pixels: 197)"),
		batch:      fs.Int("batch", 1, "candidates per Forward call"),
		labels:     fs.Int("labels", 0, "classes (0: 2 for text shapes, 10 for ViT)"),
		exact:      fs.Bool("exact", false, "the exact target model (Oracle): FFN, exact softmax, LayerNorm and entropy"),
		publicMask: fs.Bool("public-mask", false, "treat the padding mask as public"),
		privEmb:    fs.Bool("private-embeddings", false, "secret embedding tables: one-hot × table (text) or patches × projection (ViT)"),
		fullLast:   fs.Bool("full-last-layer", false, "evaluate the last layer on every token, not the class token only"),
		link:       fs.String("link", "", "emulate a link: "+strings.Join(transport.ProfileNames(), ", ")),
		seed:       fs.Uint64("seed", 1, "seed of the random weights and inputs"),
	}
}

// config returns the parsed configuration.
func (f *benchFlags) config() (bench.ForwardConfig, error) {
	cfg := bench.ForwardConfig{Shape: *f.shape, Layers: *f.layers, Heads: *f.heads, MLPHidden: *f.mlpDim, Seq: *f.seq, Batch: *f.batch, Labels: *f.labels,
		Exact: *f.exact, Options: secure.Options{PublicMask: *f.publicMask, FullLastLayer: *f.fullLast, PrivateEmbeddings: *f.privEmb}, Seed: *f.seed}
	if *f.link != "" && *f.link != "none" {
		p, err := transport.ProfileByName(*f.link)
		if err != nil {
			return cfg, err
		}
		cfg.Link = &p
	}
	if _, err := bench.ShapeArch(cfg); err != nil {
		return cfg, err
	}
	if cfg.Batch <= 0 {
		return cfg, fmt.Errorf("batch %d, want > 0", cfg.Batch)
	}
	return cfg, nil
}

// args renders the flags back as command-line arguments (for a child).
func (f *benchFlags) args() []string {
	return []string{
		"--shape", *f.shape, "--layers", strconv.Itoa(*f.layers), "--heads", strconv.Itoa(*f.heads),
		"--mlp-dim", strconv.Itoa(*f.mlpDim), "--seq", strconv.Itoa(*f.seq), "--batch", strconv.Itoa(*f.batch),
		"--labels", strconv.Itoa(*f.labels), "--exact=" + strconv.FormatBool(*f.exact),
		"--public-mask=" + strconv.FormatBool(*f.publicMask), "--private-embeddings=" + strconv.FormatBool(*f.privEmb),
		"--full-last-layer=" + strconv.FormatBool(*f.fullLast), "--link", *f.link, "--seed", strconv.FormatUint(*f.seed, 10),
	}
}

package main

// The forward subcommand:
//
//	mpcbench forward [--json] --shape bert-base|distilbert|vit-small|vit-base
//	    [--layers L] [--heads W] [--mlp-dim D] [--seq N] [--batch B] [--exact]
//	    [--public-mask] [--private-embeddings] [--full-last-layer] [--link lan|paper-wan]
//
// runs the secure proxy forward (package proxy/secure) with random weights of
// the shape between two in-process parties and prints the cost of one Forward
// call for the whole batch (weight sharing excluded, reported apart).

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

func init() {
	commands["forward"] = command{"cost of the secure proxy forward pass (random weights of a shape)", runForward}
}

func runForward(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print a JSON object")
	shape := fs.String("shape", "bert-base", "target shape: "+strings.Join(secure.Shapes, ", "))
	layers := fs.Int("layers", 1, "layers L")
	heads := fs.Int("heads", 0, "heads W per layer (0: all heads of the shape)")
	mlpDim := fs.Int("mlp-dim", 16, "hidden width d of the approximator MLPs")
	seq := fs.Int("seq", 128, "padded sequence length (ViT-B/16 at 224 pixels: 197)")
	batch := fs.Int("batch", 1, "candidates per Forward call")
	labels := fs.Int("labels", 0, "classes (0: 2 for text shapes, 10 for ViT)")
	exact := fs.Bool("exact", false, "the exact target model (Oracle): FFN, exact softmax, LayerNorm and entropy")
	publicMask := fs.Bool("public-mask", false, "treat the padding mask as public")
	privEmb := fs.Bool("private-embeddings", false, "secret embedding tables: one-hot × table (text) or patches × projection (ViT)")
	fullLast := fs.Bool("full-last-layer", false, "evaluate the last layer on every token, not the class token only")
	linkName := fs.String("link", "", "emulate a link: "+strings.Join(transport.ProfileNames(), ", "))
	seed := fs.Uint64("seed", 1, "seed of the random weights and inputs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("forward: unexpected arguments %q", fs.Args())
	}
	cfg := secure.BenchConfig{Shape: *shape, Layers: *layers, Heads: *heads, MLPDim: *mlpDim, Seq: *seq, Batch: *batch, Labels: *labels,
		Exact: *exact, Options: secure.Options{PublicMask: *publicMask, FullLastLayer: *fullLast, PrivateEmbeddings: *privEmb}, Seed: *seed}
	if *linkName != "" && *linkName != "none" {
		p, err := transport.ProfileByName(*linkName)
		if err != nil {
			return fmt.Errorf("forward: %w", err)
		}
		cfg.Link = &p
	}
	res, err := secure.Bench(ctx, cfg)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(res)
	}
	b := float64(res.Batch)
	fmt.Fprintf(stdout, "%s L=%d W=%d d=%d seq=%d batch=%d exact=%v: %d rounds, bytes p0 %d p1 %d, dealer %d, %.3f s, peak heap %d B\n",
		res.Shape, res.Layers, res.Heads, res.MLPDim, res.Seq, res.Batch, res.Exact, res.Rounds, res.BytesP0, res.BytesP1, res.DealerBytes, res.Seconds, res.PeakBytes)
	fmt.Fprintf(stdout, "per candidate: bytes p0 %.0f p1 %.0f, %.4f s\n", float64(res.BytesP0)/b, float64(res.BytesP1)/b, res.Seconds/b)
	return nil
}

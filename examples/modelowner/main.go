// Command modelowner is party 0 of a selectformer session: it holds the target
// model (and so the proxies generated from it) and, with the data owner
// (command dataowner) and a dealer (command dealer), privately selects the
// most valuable points of the data owner's pool.
//
// Example (the data owner connects to :7000; the dealer listens on :7100 for
// party 0):
//
//	modelowner -cert mo.crt -key mo.key -listen :7000 -peer-fingerprint do.crt \
//	    -dealer dealer-host:7100 -dealer-fingerprint dealer.crt \
//	    -model checkpoint/ -label-cmd 'python3 label.py' \
//	    -pool-size 400 -budget 60 -bootstrap 20 -schedule 2:4:8@0.4,2:4:16 \
//	    -state state-mo/ -out result.json
//
// -model is a model directory (config.json + model.safetensors, as written by
// model.Save or a Hugging Face ViT/BERT/DistilBERT checkpoint); the data
// owner's pool holds images for a ViT, texts for a BERT or DistilBERT (the
// data owner tokenizes; the model owner uses the checkpoint's tokenizer, if
// it has one, to check the bootstrap's committed texts). The bootstrap
// sample is labelled when it arrives, one of three ways: -label-cmd runs a
// command on its points, exported in the pool's own format, which writes
// their labels; -label-dir writes the points into a directory and waits
// for a labels file there; -labels (for demos) reads a file with one class
// per pool candidate. -label-timeout bounds the first two (see
// examples/README.md, "Labelling the bootstrap"). Proxy generation uses the
// library's defaults (the measured-best generation of bench/QUALITY.md):
// -public FILE gives it inputs the model owner holds in the clear, in a pool
// format (images, or texts tokenized to -public-seq tokens, the data
// owner's -seq), distilled on besides the bootstrap; without it, it distils
// on the bootstrap alone and the log says so. Fingerprints are 64 hex
// digits or a certificate file. With -state, a killed or disconnected run
// restarted with the same flags resumes where it stopped. On a terminal, a
// spinner shows each step before the first phase and a progress bar each
// phase; Ctrl-C (or SIGTERM) stops it with one line saying where it stopped
// and how to resume. The -schedule is checked against the checkpoint before
// any connection. Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 peer
// or handshake failure, 4 bad input file, 5 the bootstrap was not labelled,
// 130 interrupted (see examples/README.md).
//
// The model owner buys only from a data owner that commits to its pool
// before the bootstrap (package selection/purchase), and checks every
// bootstrap point against that commitment before labelling it. After the
// selection,
//
//	modelowner verify -state state-mo/ -model checkpoint/ purchase.bundle
//
// checks the data owner's delivery ('dataowner deliver') against the
// recorded commitment and the selected indices, names each candidate that
// fails, and audits the delivered candidates' scores against the order the
// selection revealed; exit 6 when the delivery is not what was bought.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/shard"
	"github.com/selectformer/selectformer/transport"
)

// summary is the first line of -h.
const summary = "modelowner runs party 0 of a private data selection: it holds the target model and selects the most valuable points of the data owner's pool."

func main() { peer.Exec("modelowner", summary, modelOwner, party.Classify) }

func modelOwner(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "verify" {
		return verify(args[1:], stdout, stderr)
	}
	var pflags peer.PartyFlags
	pflags.Register(fs, 0, "data owner")
	modelDir := fs.String("model", "", "the target model directory (config.json + model.safetensors); required unless -proxies")
	var lf party.LabelFlags
	lf.Register(fs)
	proxiesDir := fs.String("proxies", "", "pre-generated proxies, DIR/phase-<n> for phase n = 1, 2, ... (what STATE/proxies of an earlier run holds): no labelling or generation")
	var pf party.ParamFlags
	pf.Register(fs, true)
	threshold := fs.Float64("threshold", 0, "private threshold of -appraisal threshold (nats)")
	points := fs.Int("mlp-points", 0, "size of each MLP's training set in proxy generation (0: the library's default, 500 per bootstrap sample and at least 300000)")
	seed := fs.Uint64("gen-seed", 1, "seed of proxy generation")
	public := fs.String("public", "", "a file of inputs this model owner holds in the clear (its pretraining or other unlabelled data; no labels needed), in a pool format (mkpool builds one: images for a ViT, texts for a BERT or DistilBERT): proxy generation distils the target on them besides the bootstrap, which makes better proxies (without: the bootstrap alone); at most 100000")
	publicSeq := fs.Int("public-seq", 0, "with text -public: tokens per text (0: the checkpoint's max_position_embeddings); must be the data owner's -seq")
	state := fs.String("state", "", "state directory: checkpoint after every batch, resume on restart")
	out := fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	var sf peer.ShardFlags
	sf.Register(fs)
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	if err := sf.CheckMode(fs, 0); err != nil {
		return err
	}
	if sf.Worker {
		return modelOwnerWorker(ctx, &pflags, &sf, *state, stdout, stderr)
	}
	prog := party.NewProgress(stderr, party.IsTerminal(stderr))
	defer prog.Close()
	pt, err := pflags.Resolve(prog.Writer())
	if err != nil {
		return err
	}
	log := pt.Logger
	if *proxiesDir == "" {
		if err := peer.Require("model", *modelDir); err != nil {
			return err
		}
	} else if *public != "" || *publicSeq != 0 {
		return peer.Usage("-public and -public-seq are not used with -proxies (pre-generated proxies need no generation)")
	}
	if *public == "" && *publicSeq != 0 {
		return peer.Usage("-public-seq applies to -public texts")
	}
	if err := lf.Check(fs, *proxiesDir != ""); err != nil {
		return err
	}
	if pf.PoolSize <= 0 {
		return peer.Usage("flag -pool-size is required (the number of candidates in the data owner's pool)")
	}
	params, err := pf.Params()
	if err != nil {
		return err
	}
	if params.Appraisal != selection.AppraiseThreshold && *threshold != 0 {
		return peer.Usage("-threshold needs -appraisal threshold")
	}
	mo := &selection.ModelOwner{
		Params:     params,
		Threshold:  *threshold,
		StateDir:   *state,
		Logger:     party.DropEngineProgress(log),
		OnProgress: prog.Func(len(params.Schedule), log),
	}
	// Only from a data owner that commits to its pool (before the coin
	// toss), so that 'modelowner verify' can check what it delivers.
	mo.RequireCommitment = true
	if *proxiesDir != "" {
		for i := range params.Schedule {
			p, err := proxy.Load(selection.ProxyDir(*proxiesDir, i))
			if err != nil {
				return peer.WithCode(peer.ExitInput, fmt.Errorf("loading the proxy of phase %d: %w", i+1, err))
			}
			mo.Proxies = append(mo.Proxies, p)
		}
		if err := party.CheckProxies(params.Schedule, mo.Proxies, *proxiesDir); err != nil {
			return err
		}
		mo.ItemInput = party.BuyerItemInput(mo.Proxies[0].Model.Config, "", "", log)
	} else {
		target, err := model.Load(*modelDir, model.LoadOptions{})
		if err != nil {
			return peer.WithCode(peer.ExitInput, fmt.Errorf("loading the target model: %w", err))
		}
		// The label command gets this process's stdin and stderr as they
		// are (a terminal stays one for an interactive labeller): no
		// progress bar is drawn before the phases.
		label, err := lf.Labeler(target, *modelDir, params.PoolSize, os.Stdin, stderr, log)
		if err != nil {
			return err
		}
		// Everything checkable about the schedule and the model is
		// checked before any connection (usage errors, exit 2).
		if err := party.CheckSchedule(params.Schedule, target.Config, "the target model in "+*modelDir); err != nil {
			return err
		}
		var pub model.Input
		if *public != "" {
			if pub, err = party.PublicInput(*public, *modelDir, target, lf.Vocab, *publicSeq); err != nil {
				return err
			}
			log.Info("proxy generation: distilling on the bootstrap and the -public inputs", "public", pub.Len(), "file", *public)
		} else {
			log.Info("proxy generation: no -public file: distilling on the bootstrap alone (a file of the model owner's own unlabelled inputs makes better proxies)")
		}
		gen := party.GenerateConfig(*points, *seed, pub)
		gen.Logger = log
		gen.Progress = prog.GenerationProgress()
		if err := party.CheckGenerate(gen, params, target); err != nil {
			return err
		}
		if lf.Cmd == "" {
			// The command hook keeps the terminal for its labeller: no
			// spinner while it runs.
			label = prog.Labeler(label)
		}
		mo.Target, mo.Generate, mo.Label = target, gen, label
		mo.ItemInput = party.BuyerItemInput(target.Config, *modelDir, lf.Vocab, log)
	}
	return party.RunCoordinator(ctx, pt, &sf, party.Role{Party: 0, Name: "modelowner",
		Running: "handshake and joint coin with the data owner",
		Run: func(ctx context.Context, shards selection.ShardRunner, conn *transport.Conn, prov beaver.Provider) (*selection.Result, error) {
			mo.Shards = shards
			return mo.Run(ctx, conn, prov)
		}}, *state, *out, prog, stdout)
}

// modelOwnerWorker runs the model owner's worker of a sharded selection
// (-worker): its jobs carry the phases' proxies, so it needs no model.
func modelOwnerWorker(ctx context.Context, pflags *peer.PartyFlags, sf *peer.ShardFlags, state string, stdout, stderr io.Writer) error {
	pt, err := pflags.Resolve(stderr)
	if err != nil {
		return err
	}
	if err := peer.Require("state", state); err != nil {
		return err
	}
	k, err := sf.Index()
	if err != nil {
		return err
	}
	w := &shard.Worker{Party: 0, Shard: k, StateDir: state, Logger: pt.Logger}
	return pt.RunWorker(ctx, w, 0, sf.Coordinator, stdout, "modelowner")
}

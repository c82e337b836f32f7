// Command dataowner is party 1 of a selectformer session: it holds the
// unlabeled pool and, with the model owner (command modelowner) and a dealer
// (command dealer), privately selects the pool's most valuable points for the
// model owner's model, without seeing the model.
//
// Example (the model owner listens on mo-host:7000; the dealer on :7101 for
// party 1):
//
//	dataowner -cert do.crt -key do.key -connect mo-host:7000 -peer-fingerprint mo.crt \
//	    -dealer dealer-host:7101 -dealer-fingerprint dealer.crt \
//	    -pool pool.sfimg.gz -embedding checkpoint/ \
//	    -budget 60 -bootstrap 20 -schedule 2:4:8@0.4,2:4:16 \
//	    -state state-do/ -out result.json
//
// -pool is the pool, in either format of package selection/pool (read
// with pool.ReadFile; plain or gzip'd; command mkpool builds one from a
// directory of PNG/JPEG files or a CSV/TSV/plain-text file): images
// ("SFIMGS01" grey or "SFIMGS02" RGB, for a ViT checkpoint of their size)
// or texts (JSON lines under the header {"format":"selectformer-texts/1"},
// one {"text": ...} per line, for a BERT or DistilBERT checkpoint); labels
// in the file are ignored. Texts are WordPiece-tokenized with the
// checkpoint's vocab.txt or Hugging Face tokenizer.json (the model
// directory's, or -vocab FILE), which must match the checkpoint, to the
// checkpoint's max_position_embeddings tokens, or -seq. -embedding is the public pretrained checkpoint (a model directory)
// whose frozen embeddings the data owner evaluates locally: a classifier, or
// a base checkpoint without one (a Hugging Face BertForMaskedLM such as
// examples/pretrained/gcide-bert-mini), of which only the embedding tables
// are used. The pool size is
// the file's. With -state, a killed or disconnected run restarted with the
// same flags resumes where it stopped; Ctrl-C (or SIGTERM) stops it with
// one line saying where it stopped and how to resume. The -schedule is
// checked against the checkpoint before any connection. On a terminal, a spinner
// shows each step before the first phase and a progress bar each phase.
// Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 peer or handshake
// failure, 4 bad input file, 130 interrupted (see examples/README.md).
//
// The data owner commits to every candidate of -pool in the handshake,
// before the bootstrap is drawn (package selection/purchase), and keeps the
// commitment's secret seed in -state. After the selection,
//
//	dataowner deliver -state state-do/ -pool pool.sfimg.gz -out purchase.bundle
//
// writes the bundle of the purchased candidates (the bootstrap and the
// selected ones, each with its salt and Merkle path) for the model owner's
// 'modelowner verify'; without -state the seed is lost with the process
// and nothing can be delivered.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/shard"
	"github.com/selectformer/selectformer/transport"
)

// summary is the first line of -h.
const summary = "dataowner runs party 1 of a private data selection: it holds the unlabeled pool and selects its most valuable points for a model it never sees."

func main() { peer.Exec("dataowner", summary, dataOwner, party.Classify) }

func dataOwner(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "deliver" {
		return deliver(args[1:], stdout, stderr)
	}
	var pflags peer.PartyFlags
	pflags.Register(fs, 1, "model owner")
	poolPath := fs.String("pool", "", "the pool file: images or texts, as package selection/pool describes (plain or gzip'd; mkpool builds one from a directory of PNG/JPEG files or a CSV/TSV/text file); required")
	embDir := fs.String("embedding", "", "the public checkpoint (model directory, a classifier or a base checkpoint such as a BertForMaskedLM) whose embeddings the pool goes through; required")
	vocab := fs.String("vocab", "", "text pools: the checkpoint's WordPiece vocab.txt or Hugging Face tokenizer.json (default: the -embedding directory's vocab.txt, else its tokenizer.json); refused if it does not match the checkpoint")
	seq := fs.Int("seq", 0, "text pools: tokens per text, truncated or padded (0: the checkpoint's max_position_embeddings)")
	var pf party.ParamFlags
	pf.Register(fs, false)
	state := fs.String("state", "", "state directory: checkpoint after every batch, resume on restart")
	out := fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	var sf peer.ShardFlags
	sf.Register(fs)
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	if err := sf.CheckMode(fs, 1); err != nil {
		return err
	}
	prog := party.NewProgress(stderr, party.IsTerminal(stderr))
	defer prog.Close()
	pt, err := pflags.Resolve(prog.Writer())
	if err != nil {
		return err
	}
	log := pt.Logger
	if err := peer.Require("pool", *poolPath, "embedding", *embDir); err != nil {
		return err
	}
	if sf.Worker {
		return dataOwnerWorker(ctx, pt, &sf, *state, *poolPath, *embDir, *vocab, *seq, stdout)
	}
	// Check the flags before reading the (possibly large) pool.
	pf.PoolSize = 1 << 30
	if _, err := pf.Params(); err != nil {
		return err
	}
	emb, err := model.Load(*embDir, embeddingLoad)
	if err != nil {
		return peer.WithCode(peer.ExitInput, fmt.Errorf("loading the embedding checkpoint: %w", err))
	}
	pl, in, err := party.ReadPool(*poolPath, *embDir, emb, *vocab, *seq)
	if err != nil {
		return err
	}
	log.Info("pool read", "kind", pl.Kind(), "candidates", in.Len(), "checkpoint", emb.Config.Family)
	pf.PoolSize = in.Len()
	params, err := pf.Params()
	if err != nil {
		return err
	}
	// The proxies keep layers and heads of this checkpoint's architecture:
	// a schedule that asks for more is refused before any connection.
	if err := party.CheckSchedule(params.Schedule, emb.Config, "the embedding checkpoint in "+*embDir); err != nil {
		return err
	}
	if *state == "" {
		log.Warn("no -state: the seed of the commitment to the pool is not kept, so 'dataowner deliver' cannot deliver this selection's purchase")
	}
	do := &selection.DataOwner{
		Params:     params,
		Pool:       in,
		Items:      pl, // committed to before the coin; 'dataowner deliver' delivers from it
		Embedding:  emb,
		StateDir:   *state,
		Logger:     party.DropEngineProgress(log),
		OnProgress: prog.Func(len(params.Schedule), log),
	}
	return party.RunCoordinator(ctx, pt, &sf, party.Role{Party: 1, Name: "dataowner",
		Running: "handshake with the model owner, who then labels the bootstrap sample and generates the proxies",
		Run: func(ctx context.Context, shards selection.ShardRunner, conn *transport.Conn, prov beaver.Provider) (*selection.Result, error) {
			do.Shards = shards
			return do.Run(ctx, conn, prov)
		}}, *state, *out, prog, stdout)
}

// embeddingLoad reads the embedding checkpoint: the data owner uses its
// embedding tables only, so a pretrained base checkpoint without a
// classifier (a Hugging Face BertForMaskedLM, bench/cmd/pretrain's) is read
// as well as a fine-tuned one; its pre-training head is skipped.
var embeddingLoad = model.LoadOptions{NewHead: true}

// dataOwnerWorker runs the data owner's worker of a sharded selection
// (-worker) on its own copy of the pool.
func dataOwnerWorker(ctx context.Context, pt *peer.Party, sf *peer.ShardFlags, state, poolPath, embDir, vocab string, seq int, stdout io.Writer) error {
	if err := peer.Require("state", state); err != nil {
		return err
	}
	k, err := sf.Index()
	if err != nil {
		return err
	}
	emb, err := model.Load(embDir, embeddingLoad)
	if err != nil {
		return peer.WithCode(peer.ExitInput, fmt.Errorf("loading the embedding checkpoint: %w", err))
	}
	in, _, err := party.PoolInput(poolPath, embDir, emb, vocab, seq)
	if err != nil {
		return err
	}
	w := &shard.Worker{Party: 1, Shard: k, Pool: in, Embedding: emb, StateDir: state, Logger: pt.Logger}
	return pt.RunWorker(ctx, w, 1, sf.Coordinator, stdout, "dataowner")
}

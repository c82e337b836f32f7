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
//	    -budget 60 -bootstrap 20 -schedule 1:4:8@0.4,2:4:16 \
//	    -state state-do/ -out result.json
//
// -pool is an image pool in the dataset package's compact format
// (dataset.EncodeImages: gzip of "SFIMGS01", count, width, height, labels,
// uint8 pixels; labels are ignored). -embedding is the public pretrained
// checkpoint (a model directory) whose frozen patch embeddings the data owner
// evaluates locally. The pool size is the file's. With -state, a killed or
// disconnected run restarted with the same flags resumes where it stopped.
// Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 peer or handshake
// failure, 4 bad input file (see examples/README.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/selection"
)

// summary is the first line of -h.
const summary = "dataowner runs party 1 of a private data selection: it holds the unlabeled pool and selects its most valuable points for a model it never sees."

func main() { peer.Exec("dataowner", summary, dataOwner, party.Classify) }

func dataOwner(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var pflags peer.PartyFlags
	pflags.Register(fs, 1, "model owner")
	poolPath := fs.String("pool", "", "the pool: images in the dataset package's compact format; required")
	embDir := fs.String("embedding", "", "the public checkpoint (model directory) whose embeddings the pool goes through; required")
	var pf party.ParamFlags
	pf.Register(fs, false)
	state := fs.String("state", "", "state directory: checkpoint after every batch, resume on restart")
	out := fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	pt, err := pflags.Resolve(stderr)
	if err != nil {
		return err
	}
	log := pt.Logger
	if err := peer.Require("pool", *poolPath, "embedding", *embDir); err != nil {
		return err
	}
	// Check the flags before reading the (possibly large) pool.
	pf.PoolSize = 1 << 30
	if _, err := pf.Params(); err != nil {
		return err
	}
	pool, err := demo.ReadPool(*poolPath)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	emb, err := model.Load(*embDir, model.LoadOptions{})
	if err != nil {
		return peer.WithCode(peer.ExitInput, fmt.Errorf("loading the embedding checkpoint: %w", err))
	}
	if c := emb.Config; c.Family != model.ViT || c.ImageSize != pool.Width || c.ImageSize != pool.Height || c.NumChannels != 1 {
		return peer.WithCode(peer.ExitInput, fmt.Errorf("pool of %d×%d grey images does not fit the %s checkpoint (image size %d, %d channels)",
			pool.Width, pool.Height, c.Family, c.ImageSize, c.NumChannels))
	}
	pf.PoolSize = pool.Len()
	params, err := pf.Params()
	if err != nil {
		return err
	}
	do := &selection.DataOwner{
		Params:    params,
		Pool:      model.NormalizeImages(pool.Images, 1),
		Embedding: emb,
		StateDir:  *state,
		Logger:    log,
	}
	prov, dconn, conn, err := pt.Connect(ctx, 1, "dataowner", stdout)
	if err != nil {
		return err
	}
	defer dconn.Close()
	defer conn.Close()
	res, err := do.Run(ctx, conn, prov)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, party.Summary(res))
	return party.WriteResult(*out, stdout, res)
}

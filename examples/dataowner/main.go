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
	"net"
	"time"

	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/selection"
)

func main() { peer.Exec("dataowner", dataOwner, party.Classify) }

func dataOwner(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	cert := fs.String("cert", "", "this party's certificate (PEM, from keygen); required")
	key := fs.String("key", "", "this party's private key (PEM, from keygen); required")
	var ep peer.Endpoint
	fs.StringVar(&ep.Listen, "listen", "", "listen for the model owner on this address (or use -connect)")
	fs.StringVar(&ep.Connect, "connect", "", "connect to the model owner at this address (or use -listen)")
	fs.DurationVar(&ep.Timeout, "connect-timeout", time.Minute, "how long to wait for the model owner and the dealer")
	peerFP := fs.String("peer-fingerprint", "", "the model owner's fingerprint or certificate file; required")
	dealerAddr := fs.String("dealer", "", "the dealer's address for party 1; required")
	dealerFP := fs.String("dealer-fingerprint", "", "the dealer's fingerprint or certificate file; required")
	poolPath := fs.String("pool", "", "the pool: images in the dataset package's compact format; required")
	embDir := fs.String("embedding", "", "the public checkpoint (model directory) whose embeddings the pool goes through; required")
	var pf party.ParamFlags
	pf.Register(fs, false)
	state := fs.String("state", "", "state directory: checkpoint after every batch, resume on restart")
	link := fs.String("link", "", "emulate a link on this party's sending direction: lan, paper-wan or none")
	out := fs.String("out", "", "write the result as JSON to this file (- for stdout)")
	level := fs.String("log", "info", "log level: debug, info, warn, error")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	log, err := peer.Logger(stderr, *level)
	if err != nil {
		return err
	}
	if err := ep.Validate("listen", "connect"); err != nil {
		return err
	}
	if err := peer.Require("dealer", *dealerAddr, "pool", *poolPath, "embedding", *embDir); err != nil {
		return err
	}
	// Check the flags before reading the (possibly large) pool.
	pf.PoolSize = 1 << 30
	if _, err := pf.Params(); err != nil {
		return err
	}
	pin, err := peer.Fingerprint("peer-fingerprint", *peerFP)
	if err != nil {
		return err
	}
	dpin, err := peer.Fingerprint("dealer-fingerprint", *dealerFP)
	if err != nil {
		return err
	}
	opt, err := peer.Link(*link)
	if err != nil {
		return err
	}
	id, err := peer.LoadIdentity(*cert, *key)
	if err != nil {
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
	prov, dconn, err := peer.ConnectDealer(ctx, *dealerAddr, id, dpin, 1, opt, ep)
	if err != nil {
		return err
	}
	defer dconn.Close()
	conn, err := peer.Establish(ctx, ep, id, pin, opt, log, func(a net.Addr) {
		fmt.Fprintf(stdout, "dataowner listening %s\n", a)
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	res, err := do.Run(ctx, conn, prov)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, party.Summary(res))
	return party.WriteResult(*out, stdout, res)
}

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/pool"
)

// deliverSummary is the first line of 'dataowner deliver -h'.
const deliverSummary = "dataowner deliver writes the bundle of a finished selection's purchased candidates (the bootstrap and the selected ones): each candidate's data, salt and Merkle path, and the session's root, for the model owner's 'modelowner verify'."

// deliver is 'dataowner deliver -state DIR -pool FILE -out BUNDLE': the
// bundle of the purchase of the selection whose checkpoint is in DIR (the
// run's -state), from the pool it committed to (the run's -pool).
func deliver(args []string, stdout, stderr io.Writer) error {
	fs := party.SubcommandFlags("dataowner deliver", deliverSummary, "dataowner deliver -state DIR -pool FILE -out BUNDLE [-force]", stderr)
	state := fs.String("state", "", "the state directory of the selection's run (its checkpoint holds the selection and the commitment's secret seed); required")
	poolPath := fs.String("pool", "", "the pool file the run committed to (its -pool); required")
	out := fs.String("out", "", "the bundle file to write (format: package selection/purchase); required")
	force := fs.Bool("force", false, "overwrite an existing -out file")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	if err := peer.Require("state", *state, "pool", *poolPath, "out", *out); err != nil {
		return err
	}
	if !*force {
		if _, err := os.Stat(*out); err == nil {
			return peer.Usage("%s exists (-force overwrites it)", *out)
		}
	}
	p, err := pool.ReadFile(*poolPath)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	res, err := selection.ReadPurchase(*state, 1)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	// Written beside -out and renamed into place once complete: a bundle
	// is GBs for large purchases, streamed, never whole in memory.
	tmp, err := os.CreateTemp(filepath.Dir(*out), ".bundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	do := &selection.DataOwner{StateDir: *state, Items: p}
	if err := do.Deliver(tmp, party.BundleFormat(p)); err != nil {
		tmp.Close()
		return peer.WithCode(peer.ExitInput, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dataowner delivered %d candidates (bootstrap %d, selected %d) to %s; root %s\n",
		len(res.Bootstrap)+len(res.Selected), len(res.Bootstrap), len(res.Selected), *out, res.Commitment.Root)
	return nil
}

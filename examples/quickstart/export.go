package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/transport"
)

// The demos -export writes.
const (
	exportMNIST   = "mnist"
	exportText    = "text"
	exportWordNet = "wordnet"
)

// exportDemo prepares the demo named kind, writes it under dir as two
// organisations hold it (demo.Export) with the identities, and prints the
// commands that run its selection with the peer binaries.
func exportDemo(dir, kind string, o options, pf party.ParamFlags, stdout io.Writer) error {
	var (
		e   demo.Export
		err error
	)
	switch kind {
	case exportText:
		var d *demo.TextDemo
		if d, err = demo.PrepareText(demo.TextConfig{Seed: o.demo.Seed, Pool: o.demo.Pool, Epochs: o.demo.Epochs, Logger: o.log}); err == nil {
			e, err = d.Export(dir)
		}
	case exportWordNet:
		var d *demo.WordNetDemo
		if d, err = demo.PrepareWordNet(demo.WordNetConfig{Seed: o.demo.Seed, Public: o.wordNetPublic, Pool: o.demo.Pool, Epochs: o.wordNetEpochs, Logger: o.log}); err == nil {
			e, err = d.Export(dir)
		}
	default:
		var d *demo.Demo
		if d, err = demo.Prepare(o.demo); err == nil {
			e, err = d.Export(dir)
		}
	}
	if err != nil {
		return peer.WithCode(peer.ExitFailure, err)
	}
	if err := writeIdentities(dir); err != nil {
		return err
	}
	printCommands(stdout, dir, e, pf)
	return nil
}

// printCommands prints the commands of an exported demo's selection: first
// the two organisations' with no dealer (-provider he), each on its own
// host, the data owner building its pool with mkpool and the model owner
// labelling through -label-cmd; then the same with a dealer, a third host.
// Every command is one line starting "go run ./examples/".
func printCommands(w io.Writer, dir string, e demo.Export, pf party.ParamFlags) {
	id := func(name string) string { return filepath.Join(dir, name) }
	common := []string{"-budget", fmt.Sprint(pf.Budget), "-bootstrap", fmt.Sprint(pf.Bootstrap), "-schedule", pf.Schedule, "-appraisal", pf.Appraisal}
	if pf.Batch != 0 {
		common = append(common, "-batch", fmt.Sprint(pf.Batch))
	}
	if pf.Inflight != 0 {
		common = append(common, "-inflight", fmt.Sprint(pf.Inflight))
	}
	mo := []string{"-model", e.Model, "-label-cmd", "sh " + shellWord(e.Labeller), "-pool-size", fmt.Sprint(e.PoolSize)}
	if e.Public != "" {
		mo = append(mo, "-public", e.Public, "-public-seq", fmt.Sprint(e.PublicSeq))
	}
	do := []string{"-pool", e.Pool, "-embedding", e.Embedding}
	if e.Seq != 0 {
		do = append(do, "-seq", fmt.Sprint(e.Seq))
	}
	modelOwner := func(how []string, state string) []string {
		return slices.Concat([]string{"modelowner", "-cert", id("modelowner.crt"), "-key", id("modelowner.key"),
			"-listen", "127.0.0.1:7000", "-peer-fingerprint", id("dataowner.crt")}, how, mo, common, []string{"-state", id(state)})
	}
	dataOwner := func(how []string, state string) []string {
		return slices.Concat([]string{"dataowner", "-cert", id("dataowner.crt"), "-key", id("dataowner.key"),
			"-connect", "127.0.0.1:7000", "-peer-fingerprint", id("modelowner.crt")}, how, do, common, []string{"-state", id(state)})
	}
	fmt.Fprintf(w, "wrote under %s:\n", dir)
	for _, f := range e.Written {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintf(w, "  the identities of the model owner, the data owner and a dealer (%s/*.crt, %[1]s/*.key)\n", dir)
	fmt.Fprint(w, "\nTwo organisations, no dealer (-provider he: the parties make the correlated randomness between themselves).\n"+
		"The data owner builds its pool from its own files, on its host:\n\n")
	printCommand(w, slices.Concat([]string{"mkpool"}, e.Mkpool))
	fmt.Fprint(w, "\nthen the model owner listens on its host and the data owner connects from its own (127.0.0.1 being the model owner's address);\n"+
		"the model owner labels the bootstrap sample with the labelling script when it arrives:\n\n")
	printCommand(w, modelOwner([]string{"-provider", "he"}, "state-mo"))
	printCommand(w, dataOwner([]string{"-provider", "he"}, "state-do"))
	fmt.Fprint(w, "\nOr with a dealer, a third host that makes the randomness (faster; it must not collude with either party):\n"+
		"the same mkpool, then the dealer, the model owner and the data owner, in three shells:\n\n")
	printCommand(w, []string{"dealer", "-cert", id("dealer.crt"), "-key", id("dealer.key"), "-listen-p0", "127.0.0.1:7100",
		"-listen-p1", "127.0.0.1:7101", "-p0-fingerprint", id("modelowner.crt"), "-p1-fingerprint", id("dataowner.crt"), "-once"})
	printCommand(w, modelOwner([]string{"-dealer", "127.0.0.1:7100", "-dealer-fingerprint", id("dealer.crt")}, "state-dealer-mo"))
	printCommand(w, dataOwner([]string{"-dealer", "127.0.0.1:7101", "-dealer-fingerprint", id("dealer.crt")}, "state-dealer-do"))
}

// printCommand prints go run ./examples/BINARY ARGS... on one line, each
// argument quoted for a POSIX shell where it needs it.
func printCommand(w io.Writer, cmd []string) {
	words := make([]string, len(cmd)-1)
	for i, a := range cmd[1:] {
		words[i] = shellWord(a)
	}
	fmt.Fprintf(w, "go run ./examples/%s %s\n", cmd[0], strings.Join(words, " "))
}

// shellWord returns s as one word of a POSIX shell: as it is if it holds
// only characters no shell treats specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@,=+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeIdentities writes the three parties' identities into dir.
func writeIdentities(dir string) error {
	for _, name := range []string{"modelowner", "dataowner", "dealer"} {
		id, err := transport.GenerateIdentity(name)
		if err != nil {
			return err
		}
		if err := id.Save(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")); err != nil {
			return err
		}
	}
	return nil
}

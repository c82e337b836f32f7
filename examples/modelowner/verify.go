package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/selection/purchase"
)

// verifySummary is the first line of 'modelowner verify -h'.
const verifySummary = "modelowner verify checks a data owner's delivery (the bundle 'dataowner deliver' writes) against the selection: every purchased candidate present, in order, and the one committed to before the bootstrap; then it audits the delivered candidates' scores against the order the selection revealed."

// verify is 'modelowner verify -state DIR [flags] BUNDLE'.
func verify(args []string, stdout, stderr io.Writer) error {
	fs := party.SubcommandFlags("modelowner verify", verifySummary, "modelowner verify -state DIR [flags] BUNDLE", stderr)
	state := fs.String("state", "", "the state directory of the model owner's run (its checkpoint holds the recorded commitment, the selection and what each phase revealed); required")
	modelDir := fs.String("model", "", "the target model directory of the run: the audit's image size, or its tokenizer for texts (default: the proxies' configuration; texts then need -vocab)")
	proxiesDir := fs.String("proxies", "", "the phases' proxies, DIR/phase-<n> (default: STATE/proxies)")
	vocab := fs.String("vocab", "", "text models: the WordPiece vocab.txt or tokenizer.json the audit tokenizes the delivered texts with (default: MODEL/vocab.txt, else MODEL/tokenizer.json)")
	noAudit := fs.Bool("no-audit", false, "verify the delivery against the commitment only, without recomputing the scores")
	tolerance := fs.Float64("tolerance", 0, "the audit's tolerance between two candidates' scores (0: twice the secure forward's documented error for each phase's proxy, proxy/secure's ScoreError)")
	report := fs.String("report", "", "also write the whole report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return peer.Usage("%v", err)
	}
	if fs.NArg() != 1 {
		return peer.Usage("want one bundle file after the flags, got %d arguments", fs.NArg())
	}
	if err := peer.Require("state", *state); err != nil {
		return err
	}
	if *tolerance < 0 {
		return peer.Usage("-tolerance must not be negative")
	}
	res, err := selection.ReadPurchase(*state, 0)
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	want, orders, err := res.Purchase()
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	var audit *purchase.Audit
	if !*noAudit {
		dir := *proxiesDir
		if dir == "" {
			dir = filepath.Join(*state, "proxies")
		}
		if audit, err = buildAudit(orders, dir, *modelDir, *vocab, res.Commitment.Seq, *tolerance); err != nil {
			return err
		}
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return peer.WithCode(peer.ExitInput, err)
	}
	defer f.Close()
	rep, verr := purchase.Verify(f, want, audit)
	if rep == nil {
		return peer.WithCode(peer.ExitInput, fmt.Errorf("%s: %w", fs.Arg(0), verr))
	}
	printReport(stdout, fs.Arg(0), rep, audit)
	if *report != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(*report, append(b, '\n'), 0o600); err != nil {
			return err
		}
	}
	switch {
	case verr != nil:
		return peer.WithCode(peer.ExitDelivery, fmt.Errorf("%s: %w", fs.Arg(0), verr))
	case !rep.OK():
		return peer.WithCode(peer.ExitDelivery, fmt.Errorf("%s is not what was bought: %d of %d purchased candidates fail, %d records should not be there, the audit flags %d", fs.Arg(0), rep.Failed, len(rep.Items), rep.ExtraCount, rep.Flagged))
	}
	return nil
}

// buildAudit loads the phases' proxies from dir and builds the audit of
// the delivered candidates: their inputs as the data owner's pool gives
// them (the target's configuration, from modelDir or the proxies, texts
// tokenized to seq tokens), each phase's proxy, and each phase's tolerance
// (tol, or twice its documented error).
func buildAudit(orders []purchase.PhaseOrder, dir, modelDir, vocab string, seq int, tol float64) (*purchase.Audit, error) {
	var proxies []*proxy.Proxy
	for i := range orders {
		p, err := proxy.Load(selection.ProxyDir(dir, i))
		if err != nil {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("the audit needs the proxy of phase %d (-proxies, or -no-audit): %w", i+1, err))
		}
		proxies = append(proxies, p)
	}
	cfg := proxies[0].Model.Config
	if modelDir != "" {
		c, err := model.ReadConfig(filepath.Join(modelDir, model.ConfigFile))
		if err != nil {
			return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("-model: %w", err))
		}
		cfg = *c
	}
	log := slog.New(slog.DiscardHandler)
	input := party.BuyerItemInput(cfg, modelDir, vocab, log)
	if input == nil {
		return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("the audit of texts needs the target's tokenizer: -model DIR (with its vocab.txt or tokenizer.json) or -vocab FILE, or -no-audit"))
	}
	a := &purchase.Audit{Phases: orders, Tolerance: make([]float64, len(orders)),
		Score: purchase.ProxyScorer(proxies, func(items [][]byte) (model.Input, error) { return input(items, seq) })}
	for i, p := range proxies {
		a.Tolerance[i] = tol
		if tol == 0 {
			t, err := purchase.ProxyTolerance(p, seq)
			if err != nil {
				return nil, peer.WithCode(peer.ExitInput, fmt.Errorf("phase %d: %w", i+1, err))
			}
			a.Tolerance[i] = t
		}
	}
	return a, nil
}

// printReport prints what failed, what the audit flagged and a summary.
func printReport(w io.Writer, name string, rep *purchase.Report, a *purchase.Audit) {
	h := rep.Header
	fmt.Fprintf(w, "bundle %s: %d records of a pool of %d, root %s\n", name, h.Count, h.PoolSize, h.Root)
	for _, it := range rep.Items {
		if it.Problem == "" {
			continue
		}
		if it.Position >= 0 {
			fmt.Fprintf(w, "candidate %d (record %d): %s\n", it.Index, it.Position, it.Problem)
		} else {
			fmt.Fprintf(w, "candidate %d: %s\n", it.Index, it.Problem)
		}
	}
	for _, it := range rep.Extra {
		fmt.Fprintf(w, "record %d (candidate %d): %s\n", it.Position, it.Index, it.Problem)
	}
	if rep.ExtraCount > len(rep.Extra) {
		fmt.Fprintf(w, "... and %d more records that should not be there\n", rep.ExtraCount-len(rep.Extra))
	}
	outcomes := 0
	for _, it := range rep.Items {
		ia := it.Audit
		if ia == nil {
			continue
		}
		outcomes += ia.Outcomes
		switch {
		case ia.Err != "":
			fmt.Fprintf(w, "audit: candidate %d could not be scored: %s\n", it.Index, ia.Err)
		case ia.Contradicted > 0:
			s := ""
			if ia.Suspect {
				s = "; suspect"
			}
			fmt.Fprintf(w, "audit: candidate %d: its score contradicts %d of the %d revealed outcomes it was checked in (first in phase %d, by up to %.4g beyond the tolerance %.4g)%s\n",
				it.Index, ia.Contradicted, ia.Outcomes, ia.Phase+1, ia.Excess, a.Tolerance[ia.Phase], s)
		}
	}
	fmt.Fprintf(w, "modelowner verified %d of %d purchased candidates", rep.Verified, len(rep.Items))
	if rep.Failed > 0 || rep.ExtraCount > 0 {
		fmt.Fprintf(w, "; %d failed, %d records should not be there", rep.Failed, rep.ExtraCount)
	}
	if a != nil {
		fmt.Fprintf(w, "; audit: %d candidates checked in %d revealed outcomes, %d flagged", rep.Audited, outcomes/2, rep.Flagged)
		if rep.Flagged > 0 && rep.SuspectsFound {
			fmt.Fprintf(w, ", %d suspects", rep.Suspects)
		}
	}
	fmt.Fprintln(w)
}

// Command quickstart runs a private data selection end to end on one machine,
// with nothing to download: the model owner, the data owner and the dealer run
// in one process and talk over loopback TLS with fresh pinned identities,
// exactly as the peer binaries do across hosts.
//
//	go run ./examples/quickstart
//
// The data is the bundled MNIST subset (package dataset): a tiny ViT is
// pretrained on a public split (the public checkpoint: the data owner's
// embeddings and the model owner's target), and the data owner's pool is a
// long-tailed (class 0 common, class 9 rare) set of other digits. The model
// owner labels a bootstrap sample drawn by joint coin toss, generates the
// proxies of the schedule (the library's default generation, distilled on
// -public of the checkpoint's public digits, with a lighter setting than the
// library's: -mlp-points 50000 and -mixes 1000; -mlp-points 0 -mixes -1 is
// the library's own), and the parties run the phases: secure proxy
// forward on every surviving candidate, then QuickSelect on the shared
// entropies. It prints the pool size, budget, phases, selected count, rounds,
// bytes and time per phase and — since the demo knows the labels — the class
// mix of the selected set against a random set of the same size.
//
// With -export DIR it instead writes the demo as two organisations hold it
// and prints the commands that run the same selection with the peer
// binaries: the data owner's own files (the pool's digits as PNG files),
// which it turns into its pool with mkpool, the public checkpoint, the
// model owner's labelling script for -label-cmd with the answers a person
// would give, and the identities; first the two organisations' commands
// with no dealer (-provider he), then the same with a dealer host. With
// -export DIR -text, the text counterpart: a tiny BERT trained on part of
// the bundled SpamAssassin mails (its model directory holds its WordPiece
// vocab.txt) and a CSV of other mails; with -export DIR -wordnet, a text
// selection with the committed pretrained BERT (package
// examples/pretrained): that checkpoint as the public one, the model
// owner's target fine-tuned from it on WordNet definitions, the data
// owner's definitions as a CSV. On a terminal, a progress bar shows each phase.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/examples/internal/demo"
	"github.com/selectformer/selectformer/examples/internal/party"
	"github.com/selectformer/selectformer/examples/internal/peer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// summary is the first line of -h.
const summary = "quickstart runs a private data selection end to end on one machine (model owner, data owner and dealer over loopback TLS) on bundled MNIST data."

func main() { peer.Exec("quickstart", summary, quickstart, party.Classify) }

// run is main with its arguments, output and context given (for tests).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return peer.Run(ctx, "quickstart", summary, args, stdout, stderr, quickstart, party.Classify)
}

type options struct {
	demo   demo.Config
	params selection.Params
	link   transport.Options
	points int
	public int
	mixes  int
	// wordNetEpochs and wordNetPublic are -epochs and -public when given
	// with -wordnet (0: the demo's defaults, a frozen-embedding
	// fine-tuning on 500 definitions).
	wordNetEpochs, wordNetPublic int
	log                          *slog.Logger
	progress                     *party.Progress
}

func quickstart(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) error {
	var o options
	fs.IntVar(&o.demo.Pool, "pool", 600, "candidates in the data owner's pool")
	var pf party.ParamFlags
	pf.Register(fs, false)
	fs.Lookup("budget").DefValue, pf.Budget = "160", 160
	fs.Lookup("bootstrap").DefValue, pf.Bootstrap = "100", 100
	fs.Lookup("appraisal").DefValue, pf.Appraisal = "mean", "mean"
	fs.Uint64Var(&o.demo.Seed, "seed", 1, "seed of the data splits and the pretraining")
	fs.IntVar(&o.demo.Epochs, "epochs", 12, "epochs of pretraining of the public checkpoint (-wordnet: of fine-tuning the model owner's target, default 40)")
	fs.Float64Var(&o.demo.RareFrac, "rare", 0.1, "fraction of the rarest class kept in the long-tailed pool (1: balanced)")
	fs.IntVar(&o.points, "mlp-points", 50_000, "size of each MLP's training set in proxy generation (the lighter setting of the quickstart; 0: the library's default, 300000 and more)")
	fs.IntVar(&o.public, "public", 300, "public digits (from the checkpoint's pretraining split) the model owner distils its proxies on besides the bootstrap (0: the bootstrap alone; -wordnet: the labelled definitions its target is fine-tuned on and distils on, at least 10, default 500)")
	fs.IntVar(&o.mixes, "mixes", 1000, "mixes of two inputs in the distillation set (the lighter setting of the quickstart; -1: the library's default, up to 8000)")
	link := fs.String("link", "", "emulate a link between the parties: lan, paper-wan or none")
	export := fs.String("export", "", "write the demo as two organisations hold it (the data owner's files for mkpool, the checkpoints, the model owner's labelling script, identities) to this directory and print the peer binaries' commands (two hosts with no dealer, then with a dealer), instead of running")
	text := fs.Bool("text", false, "with -export: the text demo (tiny BERT, pool of SpamAssassin mails) instead of MNIST")
	wordNet := fs.Bool("wordnet", false, "with -export: the pretrained text demo (the committed pretrained BERT fine-tuned on WordNet definitions, a CSV of other definitions for mkpool, a -label-cmd labeller) instead of MNIST")
	level := fs.String("log", "warn", "log level: debug, info, warn, error")
	if err := peer.Parse(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "epochs":
			o.wordNetEpochs = o.demo.Epochs
		case "public":
			o.wordNetPublic = o.public
		}
	})
	o.progress = party.NewProgress(stderr, party.IsTerminal(stderr))
	defer o.progress.Close()
	var err error
	if o.log, err = peer.Logger(o.progress.Writer(), *level); err != nil {
		return err
	}
	o.progress.SetLog(o.log)
	if o.link, err = peer.Link(*link); err != nil {
		return err
	}
	// One log, one format: the listeners and the dealer log through it too
	// (not through slog.Default, a second format on the same stream).
	o.link.Log = o.log
	if o.demo.Pool < 2 || o.demo.Pool > 3000 {
		return peer.Usage("-pool %d outside [2, 3000]", o.demo.Pool)
	}
	if o.public < 0 || o.public > 1500 {
		return peer.Usage("-public %d outside [0, 1500] (the public split's digits)", o.public)
	}
	if o.mixes < -1 {
		return peer.Usage("-mixes %d: want -1 (the library's default) or a count", o.mixes)
	}
	if *text && *export == "" {
		return peer.Usage("-text needs -export (the quickstart itself runs the MNIST demo)")
	}
	if *text && o.demo.Pool > 1200 {
		return peer.Usage("-pool %d: the text demo has at most 1200 mails for the pool", o.demo.Pool)
	}
	if *wordNet && (*export == "" || *text) {
		return peer.Usage("-wordnet needs -export and not -text (the quickstart itself runs the MNIST demo)")
	}
	if *wordNet && o.demo.Pool > 2500 {
		return peer.Usage("-pool %d: the pretrained text demo has at most 2500 definitions for the pool", o.demo.Pool)
	}
	if *wordNet && o.wordNetPublic != 0 && (o.wordNetPublic < 10 || o.wordNetPublic+o.demo.Pool > 3000) {
		return peer.Usage("-public %d with -wordnet: want at least 10 labelled definitions and at most 3000 with the pool's %d", o.wordNetPublic, o.demo.Pool)
	}
	pf.PoolSize = o.demo.Pool
	if o.params, err = pf.Params(); err != nil {
		return err
	}
	o.demo.Logger = o.log
	if *export != "" {
		kind := exportMNIST
		if *text {
			kind = exportText
		} else if *wordNet {
			kind = exportWordNet
		}
		return exportDemo(*export, kind, o, pf, stdout)
	}
	err = runDemo(ctx, o, stdout)
	if err != nil && ctx.Err() != nil {
		// Interrupted: one line saying where; the chain at debug level.
		o.log.Debug("interrupted", "err", err)
		return peer.Interrupted("quickstart", o.progress.Where(), "", err)
	}
	return err
}

func runDemo(ctx context.Context, o options, stdout io.Writer) error {
	start := time.Now()
	fmt.Fprintln(stdout, "selectformer quickstart: private data selection on the bundled MNIST subset")
	o.progress.Step(fmt.Sprintf("pretraining the public checkpoint (%d epochs)", o.demo.Epochs))
	d, err := demo.Prepare(o.demo)
	if err != nil {
		return err
	}
	poolMix, err := demo.ClassMix(d.Pool.Labels, dataIdx(d.Pool.Len()))
	if err != nil {
		return err
	}
	p := o.params
	fmt.Fprintf(stdout, "public checkpoint: tiny ViT (%d layers, hidden 32, 7x7 patches) pretrained on %d public digits in %.1fs, test accuracy %.3f\n",
		d.Config.Layers, d.Public.Len(), time.Since(start).Seconds(), d.CheckpointAccuracy)
	fmt.Fprintf(stdout, "pool: %d unlabeled digits, long-tailed, class mix %s\n", d.Pool.Len(), demo.FormatMix(poolMix))
	fmt.Fprintf(stdout, "budget: %d points = bootstrap %d (random, labelled by the model owner) + %d selected\n",
		p.Budget, p.Bootstrap, p.Budget-p.Bootstrap)
	var phases []string
	for i, s := range p.Schedule {
		keep := fmt.Sprintf("keep %.0f%%", 100*s.Keep)
		if i == len(p.Schedule)-1 {
			keep = fmt.Sprintf("keep %d", p.Budget-p.Bootstrap)
		}
		phases = append(phases, fmt.Sprintf("proxy <l=%d, w=%d, d=%d> %s", s.Proxy.Layers, s.Proxy.Heads, s.Proxy.MLPHidden, keep))
	}
	fmt.Fprintf(stdout, "phases: %s\n", strings.Join(phases, " -> "))
	if o.link.Link != nil {
		fmt.Fprintf(stdout, "link: %s\n", o.link.Link)
	}

	res, err := selectOverTLS(ctx, d, o)
	if err != nil {
		return err
	}
	r0, r1 := res[0], res[1]
	if !slices.Equal(r0.Selected, r1.Selected) {
		return fmt.Errorf("the parties disagree on the selection: %v vs %v", r0.Selected, r1.Selected)
	}
	fmt.Fprintf(stdout, "\nselected %d of %d candidates (plus the %d bootstrap points, drawn by a fresh joint coin: results vary between runs)\n", len(r0.Selected), d.Pool.Len()-len(r0.Bootstrap), len(r0.Bootstrap))
	fmt.Fprintf(stdout, "%-6s %11s %7s %7s %10s %10s %13s %13s %6s\n", "phase", "candidates", "rounds", "compars", "P0 sent", "P1 sent", "P0 randomness", "P1 randomness", "time")
	for i := range r0.Phases {
		a, b := r0.Phases[i], r1.Phases[i]
		fmt.Fprintf(stdout, "%-6d %5d->%-5d %7d %7d %10s %10s %13s %13s %5.1fs\n", i+1, a.In, a.Out,
			max(a.ForwardRounds, b.ForwardRounds)+max(a.SelectRounds, b.SelectRounds), a.Comparisons,
			party.Bytes(a.BytesSent), party.Bytes(b.BytesSent), party.Bytes(a.RandomnessBytes), party.Bytes(b.RandomnessBytes), max(a.Seconds, b.Seconds))
	}
	if a := r0.Appraisal; a != nil && a.Mode == selection.AppraiseMean {
		fmt.Fprintf(stdout, "appraisal: mean proxy entropy of the selected set %.3f nats (revealed to both)\n", a.Mean)
	}

	// What the demo can show because it knows the labels and the target:
	// the selected set against a random set of the same size from the same
	// candidates (the pool without the bootstrap sample).
	cands := slices.DeleteFunc(dataIdx(d.Pool.Len()), func(i int) bool { return slices.Contains(r0.Bootstrap, i) })
	pick, err := demo.RandomSubset(len(cands), len(r0.Selected), o.demo.Seed+100)
	if err != nil {
		return err
	}
	random := make([]int, len(pick))
	for i, j := range pick {
		random[i] = cands[j]
	}
	selMix, err := demo.ClassMix(d.Pool.Labels, r0.Selected)
	if err != nil {
		return err
	}
	rndMix, err := demo.ClassMix(d.Pool.Labels, random)
	if err != nil {
		return err
	}
	met, err := model.Evaluate(d.Checkpoint, d.PoolInput(), d.Pool.Labels, 256)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nclass mix (digit:count)     %s\n", "rare classes are 7, 8, 9")
	fmt.Fprintf(stdout, "  selected  %s   target entropy %.3f, target errors %d\n", demo.FormatMix(selMix), mean(met.Entropy, r0.Selected), errorsAt(met.Predictions, d.Pool.Labels, r0.Selected))
	fmt.Fprintf(stdout, "  random    %s   target entropy %.3f, target errors %d\n", demo.FormatMix(rndMix), mean(met.Entropy, random), errorsAt(met.Predictions, d.Pool.Labels, random))
	fmt.Fprintf(stdout, "  distinct classes: selected %d, random %d; rare (7-9) points: selected %d, random %d\n",
		nonZero(selMix), nonZero(rndMix), selMix[7]+selMix[8]+selMix[9], rndMix[7]+rndMix[8]+rndMix[9])
	fmt.Fprintf(stdout, "total time %.1fs\n", time.Since(start).Seconds())
	return nil
}

// selectOverTLS runs the dealer and both parties in this process over
// loopback TLS and returns each party's result.
func selectOverTLS(ctx context.Context, d *demo.Demo, o options) ([2]*selection.Result, error) {
	var res [2]*selection.Result
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ids [3]*transport.Identity // model owner, data owner, dealer
	for i, name := range []string{"model-owner", "data-owner", "dealer"} {
		id, err := transport.GenerateIdentity(name)
		if err != nil {
			return res, err
		}
		ids[i] = id
	}
	srv, err := dealer.NewServer(dealer.ServerOptions{Logger: o.log})
	if err != nil {
		return res, err
	}
	dl := &peer.Dealer{Server: srv, Fingerprints: [2]string{ids[0].Fingerprint(), ids[1].Fingerprint()}, Once: true, Log: o.log}
	if err := dl.Listen([2]string{"127.0.0.1:0", "127.0.0.1:0"}, ids[2], o.link); err != nil {
		return res, err
	}
	dealerDone := make(chan error, 1)
	go func() { dealerDone <- dl.Run(ctx) }()
	lb, err := twoparty.NewLoopback([2]*transport.Identity{ids[0], ids[1]}, o.link)
	if err != nil {
		return res, err
	}
	defer lb.Close()

	gen := generateConfig(d, o)
	gen.Logger = o.log
	gen.Progress = o.progress.GenerationProgress()
	log := party.DropEngineProgress(o.log)
	mo := &selection.ModelOwner{Params: o.params, Target: d.Checkpoint, Generate: gen,
		Label: o.progress.Labeler(party.OracleLabeler(d.Pool.Labels)), Logger: log, OnProgress: o.progress.Func(len(o.params.Schedule), o.log)}
	o.progress.Step("connecting the parties and the dealer over loopback TLS")
	do := &selection.DataOwner{Params: o.params, Pool: d.PoolInput(), Embedding: d.Checkpoint, Logger: log}
	ep := peer.Endpoint{Timeout: 30 * time.Second}

	// The dealer source (beaver/source) for each party: the dealer first,
	// then the peer over loopback TLS, both parties in this process
	// (twoparty.Run: a failing party ends its connection and the other's
	// run).
	src, _ := source.ByName(source.Default)
	open := func(ctx context.Context, p int) (source.Opened, error) {
		return src.Open(ctx, source.Env{
			Party: p,
			Peer: func(ctx context.Context) (*transport.Conn, error) {
				conn, err := lb.Peer(p)(ctx)
				if err != nil {
					return nil, peer.WithCode(peer.ExitPeer, err)
				}
				return conn, nil
			},
			Dealer: func(ctx context.Context) (beaver.Provider, io.Closer, error) {
				prov, dconn, err := peer.ConnectDealer(ctx, dl.Listeners[p].Addr().String(), ids[p], ids[2].Fingerprint(), p, o.link, ep)
				if err != nil {
					return nil, nil, err
				}
				return prov, dconn, nil
			},
		})
	}
	r, err := twoparty.Run(ctx, twoparty.Config{Open: open, CancelGrace: -1}, func(ctx context.Context, p *twoparty.Party) (*selection.Result, error) {
		if p.ID == 0 {
			return mo.Run(ctx, p.Conn, p.Provider)
		}
		return do.Run(ctx, p.Conn, p.Provider)
	})
	if err != nil {
		return res, err
	}
	res = r.Out
	select {
	case err := <-dealerDone:
		if err != nil {
			return res, err
		}
	case <-time.After(10 * time.Second):
		return res, errors.New("the dealer did not finish")
	}
	return res, nil
}

func dataIdx(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func mean(v []float64, idx []int) float64 {
	if len(idx) == 0 {
		return 0
	}
	s := 0.0
	for _, i := range idx {
		s += v[i]
	}
	return s / float64(len(idx))
}

func errorsAt(pred, labels, idx []int) int {
	n := 0
	for _, i := range idx {
		if pred[i] != labels[i] {
			n++
		}
	}
	return n
}

func nonZero(c []int) int {
	n := 0
	for _, v := range c {
		if v > 0 {
			n++
		}
	}
	return n
}

// generateConfig is the quickstart's proxy generation: the library's
// defaults (the measured-best generation), distilling on the first -public
// digits of the checkpoint's public split, with the quickstart's lighter
// setting (-mlp-points, -mixes) so that the whole demo takes about 40
// CPU-seconds (examples/README.md has the measurement).
func generateConfig(d *demo.Demo, o options) proxy.Config {
	var pub model.Input
	if o.public > 0 {
		pub = model.NormalizeImages(d.Public.Images[:min(o.public, d.Public.Len())], 1)
	}
	gen := party.GenerateConfig(o.points, o.demo.Seed, pub)
	if o.mixes >= 0 {
		gen.Distill = proxy.DefaultDistill(o.params.Bootstrap+pub.Len(), "")
		gen.Distill.Mixup = o.mixes
		if o.params.Bootstrap+pub.Len() < 2 {
			gen.Distill.Mixup = 0
		}
	}
	return gen
}

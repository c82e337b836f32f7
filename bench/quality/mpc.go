package quality

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/beaver/source"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/testharness/twoparty"
	"github.com/selectformer/selectformer/transport"
)

// SecureRun is the outcome of a private selection run through the real
// pipeline.
type SecureRun struct {
	// Result is the model owner's result (the data owner's selection is
	// checked equal).
	Result *selection.Result
	// Proxies are the proxies the model owner generated inside the run from
	// the bootstrap the joint coin drew.
	Proxies []*proxy.Proxy
	// Seconds is the wall time of the whole run (proxy generation included).
	Seconds float64
	// GenSeconds is the model owner's proxy generation's part of it
	// (proxy.StageGenerated's Elapsed).
	GenSeconds float64
}

// SecureSelect runs a private selection as the parties would: the model
// owner (target, labelling oracle, proxy generation config) and the data
// owner (the pool, the public checkpoint's embeddings) each run their side of
// the selection package over mutually authenticated loopback TLS, with an
// in-process dealer; the bootstrap is drawn by the joint coin, labelled by the
// model owner, the proxies are generated from it inside the run and evaluated
// over MPC, and QuickSelect keeps the budget on the shared entropies.
func SecureSelect(ctx context.Context, d *Data, params selection.Params, gen proxy.Config, log *slog.Logger) (*SecureRun, error) {
	start := time.Now()
	var ids [2]*transport.Identity
	for i, name := range []string{"model-owner", "data-owner"} {
		id, err := transport.GenerateIdentity(name)
		if err != nil {
			return nil, fmt.Errorf("secure select: %w", err)
		}
		ids[i] = id
	}
	dl, err := dealer.New()
	if err != nil {
		return nil, fmt.Errorf("secure select: %w", err)
	}
	lb, err := twoparty.NewLoopback(ids, transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("secure select: %w", err)
	}
	defer lb.Close()
	labels := d.PoolY
	gen.Logger = log
	var genSeconds float64 // written by the model owner's goroutine, read after wg.Wait
	gen.Progress = genTimer(gen.Progress, &genSeconds)
	mo := &selection.ModelOwner{Params: params, Target: d.Target, Generate: gen, Logger: log,
		Label: func(_ context.Context, idx []int, in model.Input) ([]int, error) {
			if in.Len() != len(idx) {
				return nil, fmt.Errorf("%d inputs for %d indices", in.Len(), len(idx))
			}
			out := make([]int, len(idx))
			for i, j := range idx {
				if j < 0 || j >= len(labels) {
					return nil, fmt.Errorf("bootstrap index %d outside the pool", j)
				}
				out[i] = labels[j]
			}
			return out, nil
		}}
	do := &selection.DataOwner{Params: params, Pool: d.Pool, Embedding: d.Target, Logger: log}
	// The dealer source (beaver/source) for each party: the in-process
	// dealer's provider, then the peer over loopback TLS, both parties in
	// this process (twoparty.Run).
	src, _ := source.ByName(source.Default)
	open := func(ctx context.Context, p int) (source.Opened, error) {
		return src.Open(ctx, source.Env{
			Party: p,
			Peer:  lb.Peer(p),
			Dealer: func(context.Context) (beaver.Provider, io.Closer, error) {
				prov, err := dl.Provider(p)
				return prov, io.NopCloser(nil), err // nothing to close in process
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
		return nil, fmt.Errorf("secure select: %w", err)
	}
	res := r.Out
	if !slices.Equal(res[0].Selected, res[1].Selected) || !slices.Equal(res[0].Bootstrap, res[1].Bootstrap) {
		return nil, fmt.Errorf("secure select: the parties disagree on the selection")
	}
	return &SecureRun{Result: res[0], Proxies: mo.Proxies, Seconds: time.Since(start).Seconds(), GenSeconds: genSeconds}, nil
}

// genTimer returns a proxy.Config.Progress that stores the generation's
// time in *seconds when proxy.Generate reports proxy.StageGenerated, and
// passes every report on to next (if not nil).
func genTimer(next func(proxy.Progress), seconds *float64) func(proxy.Progress) {
	return func(p proxy.Progress) {
		if p.Stage == proxy.StageGenerated {
			*seconds = p.Elapsed.Seconds()
		}
		if next != nil {
			next(p)
		}
	}
}

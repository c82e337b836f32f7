package quality

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/selectformer/selectformer/beaver/dealer"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/selection"
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
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
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
	ln, err := transport.Listen("127.0.0.1:0", ids[0], transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("secure select: %w", err)
	}
	defer ln.Close()
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
	var res [2]*selection.Result
	var errs [2]error
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prov, err := dl.Provider(p)
			if err != nil {
				errs[p] = err
				cancel()
				return
			}
			var conn *transport.Conn
			if p == 0 {
				conn, err = ln.Accept(ctx, ids[1].Fingerprint())
			} else {
				conn, err = transport.Dial(ctx, ln.Addr().String(), ids[1], ids[0].Fingerprint(), transport.Options{})
			}
			if err != nil {
				errs[p] = err
				cancel()
				return
			}
			defer conn.Close()
			if p == 0 {
				res[p], err = mo.Run(ctx, conn, prov)
			} else {
				res[p], err = do.Run(ctx, conn, prov)
			}
			if err != nil {
				errs[p] = fmt.Errorf("party %d: %w", p, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("secure select: %w", err)
	}
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

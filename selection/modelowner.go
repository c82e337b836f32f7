package selection

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// modelOwnerRun is the model owner's driver: one Run of a ModelOwner, the
// protocol from party 0's side, in order.
type modelOwnerRun struct {
	*runner
	m    *ModelOwner
	eval Evaluator // m.Evaluator, or the secure forward of the proxies once they exist
}

func (d *modelOwnerRun) run(ctx context.Context) (*Result, error) {
	hsCtx := ctx
	ctx, cancel := d.watchConn(ctx)
	defer cancel()
	// 1. Checkpoint: load, check, bump the epoch before talking to the peer.
	st, err := d.loadState()
	if err != nil {
		return nil, err
	}
	if st == nil {
		st = d.newState()
	}
	if err := d.beginEpoch(st); err != nil {
		return nil, err
	}
	// 2. Handshake; the data owner announces the sequence length.
	peer, err := d.handshake(hsCtx)
	if err != nil {
		return nil, err
	}
	d.seq = peer.Seq
	res := &Result{Epoch: d.st.Epoch}
	// 3. This epoch's correlated randomness and sessions.
	if err := d.sched.start(ctx, d.st.Epoch); err != nil {
		return nil, err
	}
	// 4. Coin, dealer session, bootstrap.
	seed, err := d.coin(ctx, func(ctx context.Context, st *transport.Stream) (share.Seed, error) {
		return tossCoinModelOwnerFrom(ctx, st, d.m.coinSource)
	})
	if err != nil {
		return nil, err
	}
	if err := d.bootstrap(ctx, seed); err != nil {
		return nil, err
	}
	res.Bootstrap = append([]int(nil), d.st.Bootstrap...)
	// 5. Architectures.
	archs, err := d.announceArchs(ctx)
	if err != nil {
		return nil, err
	}
	// 6. Phases and appraisal.
	if err := d.selectAll(ctx, seed, d.eval, archs, d.shareThreshold, res); err != nil {
		return nil, err
	}
	return res, nil
}

// bootstrap receives the data owner's sample, labels it and makes the
// proxies; on a resumed run it reloads the saved proxies.
func (d *modelOwnerRun) bootstrap(ctx context.Context, seed share.Seed) error {
	if d.st.BootstrapDone {
		if d.eval == nil {
			return d.loadProxies()
		}
		return nil
	}
	idx := sampleBootstrap(seed, d.p.PoolSize, d.p.Bootstrap)
	b, err := d.ctrl.RecvBytes(ctx)
	if err != nil {
		return fmt.Errorf("selection: bootstrap: receive: %w", err)
	}
	if d.m.onBootstrap != nil {
		if err := d.m.onBootstrap(b); err != nil {
			return err
		}
	}
	boot, err := DecodeBootstrap(b, len(idx))
	if err != nil {
		return err
	}
	if err := d.makeProxies(ctx, idx, boot); err != nil {
		return err
	}
	return d.bootstrapDone(idx)
}

// makeProxies labels the bootstrap sample and generates the proxies (unless
// given), saving them in the state directory.
func (d *modelOwnerRun) makeProxies(ctx context.Context, idx []int, boot model.Input) error {
	m := d.m
	if d.eval != nil {
		return nil
	}
	if m.Proxies == nil {
		labels, err := m.Label(ctx, idx, boot)
		if err != nil {
			return withCode(AbortInput, fmt.Errorf("selection: bootstrap: label: %w", err))
		}
		if len(labels) != len(idx) {
			return withCode(AbortInput, fmt.Errorf("selection: bootstrap: %d labels for %d samples", len(labels), len(idx)))
		}
		r, err := proxy.Generate(ctx, m.Target, boot, labels, m.generateConfig(d.p))
		if err != nil {
			return withCode(AbortInput, fmt.Errorf("selection: bootstrap: generate proxies: %w", err))
		}
		m.Proxies = r.Proxies
		if dir := d.store.proxiesDir(); dir != "" {
			for i, p := range r.Proxies {
				if err := p.Save(filepath.Join(dir, fmt.Sprintf("phase-%d", i)), r.Reports); err != nil {
					return withCode(AbortState, fmt.Errorf("selection: save proxy %d: %w", i, err))
				}
			}
		}
	}
	d.eval = &modelEvaluator{proxies: m.Proxies}
	return nil
}

// loadProxies reloads the proxies saved by an earlier run of the session.
func (d *modelOwnerRun) loadProxies() error {
	m := d.m
	if m.Proxies == nil {
		dir := d.store.proxiesDir()
		if dir == "" {
			return fmt.Errorf("selection: resume: no saved proxies")
		}
		for i := range d.p.Schedule {
			path := filepath.Join(dir, fmt.Sprintf("phase-%d", i))
			p, err := proxy.Load(path)
			if err != nil {
				return &StateError{Path: path, Err: fmt.Errorf("resume: load proxy %d: %w", i, err)}
			}
			if err := checkProxy(i, p, d.p.Schedule[i]); err != nil {
				return &StateError{Path: path, Err: err}
			}
			m.Proxies = append(m.Proxies, p)
		}
	}
	d.eval = &modelEvaluator{proxies: m.Proxies}
	return nil
}

// announceArchs sends the proxies' public architectures.
func (d *modelOwnerRun) announceArchs(ctx context.Context) ([]secure.Arch, error) {
	if d.eval == nil {
		d.eval = &modelEvaluator{proxies: d.m.Proxies}
	}
	out := make([]secure.Arch, len(d.p.Schedule))
	for i := range out {
		a, err := d.eval.Arch(i, d.seq)
		if err != nil {
			return nil, fmt.Errorf("selection: phase %d architecture: %w", i, err)
		}
		out[i] = a
	}
	b, _ := json.Marshal(out)
	if err := d.ctrl.SendBytes(ctx, b); err != nil {
		return nil, fmt.Errorf("selection: send architectures: %w", err)
	}
	return out, nil
}

// shareThreshold inputs the private appraisal threshold.
func (d *modelOwnerRun) shareThreshold(s *protocol.Session) (*share.Tensor, error) {
	enc, err := d.p.FixedPoint.EncodeTensor([]float64{d.m.Threshold}, 1)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal threshold: %w", err)
	}
	t, err := s.ShareInput(0, enc)
	if err != nil {
		return nil, fmt.Errorf("selection: appraisal: %w", err)
	}
	return t, nil
}

// tossCoinModelOwner is the model owner's side of the coin toss (see
// coinCommit): it commits to r0, receives r1, opens r0.
func tossCoinModelOwner(ctx context.Context, st *transport.Stream) (share.Seed, error) {
	return tossCoinModelOwnerFrom(ctx, st, nil)
}

// tossCoinModelOwnerFrom is tossCoinModelOwner drawing this party's contribution from src
// (crypto/rand when nil; tests fix it to repeat a selection).
func tossCoinModelOwnerFrom(ctx context.Context, st *transport.Stream, src io.Reader) (share.Seed, error) {
	var seed share.Seed
	mine, err := coinContribution(src)
	if err != nil {
		return seed, err
	}
	if err := st.SendBytes(ctx, coinCommit(mine[:])); err != nil {
		return seed, fmt.Errorf("selection: coin toss: send commitment: %w", err)
	}
	r1, err := st.RecvBytes(ctx)
	if err != nil {
		return seed, fmt.Errorf("selection: coin toss: receive: %w", err)
	}
	if len(r1) != 32 {
		return seed, withCode(AbortProtocol, fmt.Errorf("selection: coin toss: peer coin of %d bytes", len(r1)))
	}
	if err := st.SendBytes(ctx, mine[:]); err != nil {
		return seed, fmt.Errorf("selection: coin toss: open: %w", err)
	}
	return coinSeed(mine[:], r1), nil
}

// DecodeBootstrap parses the data owner's bootstrap message: the inputs of
// the n sampled candidates (a JSON model.Input, empty when the data owner
// runs without a pool, as in tests with a substitute Evaluator).
func DecodeBootstrap(b []byte, n int) (model.Input, error) {
	var in model.Input
	if len(b) > maxControlMessage*64 {
		return in, fmt.Errorf("selection: bootstrap: message of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, fmt.Errorf("selection: bootstrap: decode: %w", err)
	}
	if got := in.Len(); got != n && got != 0 {
		return in, fmt.Errorf("selection: bootstrap: %d inputs for a sample of %d", got, n)
	}
	if _, err := in.Select(nil); err != nil {
		return in, fmt.Errorf("selection: bootstrap: %w", err)
	}
	return in, nil
}

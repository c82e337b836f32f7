package selection

import (
	"context"
	"fmt"
	"sync"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/share"
)

// modelEvaluator is the model owner's secure forward of its proxies.
type modelEvaluator struct {
	proxies []*proxy.Proxy
}

// Arch implements Evaluator.
func (m *modelEvaluator) Arch(phase, seq int) (secure.Arch, error) {
	if phase < 0 || phase >= len(m.proxies) {
		return secure.Arch{}, fmt.Errorf("no proxy for phase %d", phase+1)
	}
	return secure.ArchOfProxy(m.proxies[phase], seq)
}

// Prepare implements Evaluator.
func (m *modelEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, weightBase uint64) (Forwarder, error) {
	if phase < 0 || phase >= len(m.proxies) {
		return nil, fmt.Errorf("no proxy for phase %d", phase+1)
	}
	net, err := secure.FromProxy(m.proxies[phase], arch.Seq)
	if err != nil {
		return nil, err
	}
	p, err := secure.Prepare(ctx, s, arch, net, secure.Options{WeightBase: weightBase})
	if err != nil {
		return nil, err
	}
	return &secureForwarder{p: p}, nil
}

// embedLocks holds one mutex per embedding model: the model keeps
// per-call caches (and secure.Embed sets its training mode), so the
// evaluators that share one (a process running several data-owner
// Workers on one Embedding) embed one batch at a time.
var embedLocks sync.Map // *model.Model → *sync.Mutex

func embedLock(m *model.Model) *sync.Mutex {
	mu, _ := embedLocks.LoadOrStore(m, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// dataEvaluator is the data owner's side: it embeds its candidates with the
// public embedding model and shares them.
type dataEvaluator struct {
	emb  *model.Model // embedded under embedLock(emb)
	pool model.Input
}

// Arch implements Evaluator (the data owner receives the architectures).
func (d *dataEvaluator) Arch(phase, seq int) (secure.Arch, error) {
	return secure.Arch{}, fmt.Errorf("the data owner does not hold the proxies")
}

// Prepare implements Evaluator.
func (d *dataEvaluator) Prepare(ctx context.Context, s *protocol.Session, phase int, arch secure.Arch, weightBase uint64) (Forwarder, error) {
	p, err := secure.Prepare(ctx, s, arch, nil, secure.Options{WeightBase: weightBase})
	if err != nil {
		return nil, err
	}
	return &secureForwarder{p: p, d: d}, nil
}

// secureForwarder runs secure.Prepared.Forward on a batch.
type secureForwarder struct {
	p *secure.Prepared
	d *dataEvaluator // nil at the model owner
}

// Forward implements Forwarder.
func (f *secureForwarder) Forward(ctx context.Context, s *protocol.Session, idx []int) (*share.Tensor, error) {
	var in *secure.Batch
	if f.d != nil {
		sub, err := f.d.pool.Select(idx)
		if err != nil {
			return nil, err
		}
		mu := embedLock(f.d.emb)
		mu.Lock()
		in, err = secure.Embed(f.d.emb, sub)
		mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	return f.p.Forward(ctx, s, len(idx), in)
}

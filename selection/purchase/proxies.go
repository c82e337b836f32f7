package purchase

import (
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
)

// Decoder turns candidates' canonical bytes into the model input the
// proxies take, as the data owner's pool gives it (package selection/pool:
// images normalised, texts tokenized to the sequence length the data owner
// announced).
type Decoder func(items [][]byte) (model.Input, error)

// ProxyScorer is an Audit's Score for a selection whose phase p ran
// proxies[p]: it decodes the items and returns the proxy's plaintext
// scores (proxy.Proxy.Entropies: the same network, modules and score as
// the secure forward, in floating point).
func ProxyScorer(proxies []*proxy.Proxy, decode Decoder) func(phase int, items [][]byte) ([]float64, error) {
	return func(phase int, items [][]byte) ([]float64, error) {
		if phase < 0 || phase >= len(proxies) || proxies[phase] == nil {
			return nil, fmt.Errorf("no proxy for phase %d", phase+1)
		}
		in, err := decode(items)
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		if in.Len() != len(items) {
			return nil, fmt.Errorf("decode: %d inputs for %d items", in.Len(), len(items))
		}
		return proxies[phase].Entropies(in, auditBatch)
	}
}

// ProxyTolerance is the audit's tolerance for a phase run by proxy p on
// inputs of seq tokens (patches + 1 for a ViT): twice the secure forward's
// documented error for its architecture (secure.ScoreError), since each of
// the two scores of an outcome may be off by it.
func ProxyTolerance(p *proxy.Proxy, seq int) (float64, error) {
	a, err := secure.ArchOfProxy(p, seq)
	if err != nil {
		return 0, fmt.Errorf("purchase: tolerance: %w", err)
	}
	return 2 * secure.ScoreError(a), nil
}

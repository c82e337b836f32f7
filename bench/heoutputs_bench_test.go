package bench

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/beaver/he"
	"github.com/selectformer/selectformer/protocol"
)

// BenchmarkHEOutputs counts, per workload of Workloads, the output
// coefficients the model owner decrypts in a whole selection with the
// dealer-free weight-mask correlations (beaver/he: product outputs and check
// columns, he.PlanChecked with he.DefaultParams), the count behind
// beaver/he's statistical bound ("Security"): for each phase, one forward of
// a batch of the workload's size records the weight-mask requests, and the
// phase's candidates (PhaseSizes at the full pool) take ⌈candidates/batch⌉
// such batches. It reports
//
//	outputs       coefficients in the whole selection
//	log2-outputs  their log2
//	log2-dist     log2 of the statistical distance bound over them
//	              (he.Scheme.DistanceLog)
//
// One iteration is enough (-benchtime 1x): the counts do not depend on it.
// The exact DistilBERT's forward takes minutes.
func BenchmarkHEOutputs(b *testing.B) {
	sc, err := he.NewScheme(he.DefaultParams())
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range Workloads {
		b.Run(w.Name, func(b *testing.B) {
			var total float64
			for range b.N {
				cand, _, err := w.PhaseSizes(w.Pool)
				if err != nil {
					b.Fatal(err)
				}
				total = 0
				for i := range w.Phases {
					per, err := heOutputsPerBatch(sc, w.Forward(i, w.BatchSize))
					if err != nil {
						b.Fatal(err)
					}
					total += float64(per) * math.Ceil(float64(cand[i])/float64(w.BatchSize))
				}
			}
			b.ReportMetric(total, "outputs")
			b.ReportMetric(math.Log2(total), "log2-outputs")
			b.ReportMetric(sc.DistanceLog(int64(total)), "log2-dist")
		})
	}
}

// heOutputsPerBatch runs one forward of cfg (dealer mode) and returns the
// output coefficients of the HE plans of its weight-mask requests.
func heOutputsPerBatch(sc *he.Scheme, cfg ForwardConfig) (int64, error) {
	var rec *weightRequests
	wrap := func(party int, p beaver.Provider) beaver.Provider {
		if party != 0 {
			return p
		}
		rec = &weightRequests{Provider: p}
		return rec
	}
	_, err := RunLocal(context.Background(), LocalConfig{Wrap: wrap}, func(ctx context.Context, s *protocol.Session) (ForwardParty, error) {
		a, nw, in, err := forwardSetup(s, cfg)
		if err != nil {
			return ForwardParty{}, err
		}
		return forwardParty(ctx, s, a, nw, in, cfg, nil)
	})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range rec.reqs {
		k := r.K
		if r.Kind == beaver.KindWeightVectorTriple {
			k = r.N // A ⊙ b = A·diag(b)
		}
		p, err := sc.PlanChecked(r.M, k, r.N)
		if err != nil {
			return 0, err
		}
		for _, o := range p.Outputs {
			n += int64(o.Rows) * int64(o.Width)
		}
	}
	return n, nil
}

// weightRequests records the weight-mask requests drawn through the
// provider it wraps.
type weightRequests struct {
	beaver.Provider
	mu   sync.Mutex
	reqs []beaver.Request
}

// Material implements beaver.Provider.
func (w *weightRequests) Material(ctx context.Context, r beaver.Request) (beaver.Material, error) {
	if r.Kind == beaver.KindWeightTriple || r.Kind == beaver.KindWeightVectorTriple {
		w.mu.Lock()
		w.reqs = append(w.reqs, r)
		w.mu.Unlock()
	}
	return w.Provider.Material(ctx, r)
}

package bench

import (
	"context"
	"fmt"
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

// BenchmarkHEReversed counts, per phase of sst2-distilbert at its batch
// size, what the weight-mask products would cost made the other way round
// (bench/TWOHOSTS.md, step 29): the data owner encrypting its factor X1
// (fresh every batch) and the model owner multiplying, Wᵀ·X1ᵀ. Per
// candidate it reports
//
//	ctpt-now       the data owner's ciphertext–plaintext products today
//	               (he.PlanChecked, Scheme.PlanWork)
//	ctpt-reversed  the model owner's, reversed with he.ChooseLayout's
//	               layouts (fewest output ciphertexts)
//	upload-MB      the fresh encryptions of X1ᵀ those layouts upload
//	min-MB         the least uploads plus outputs any outer-product
//	               layout can send: with u uploaded and o output
//	               ciphertexts, u·o ≥ m·k·n/N, so at least
//	               2·√(U·O·m·k·n/N) for U and O the bytes of one each
//
// One iteration is enough (-benchtime 1x).
func BenchmarkHEReversed(b *testing.B) {
	sc, err := he.NewScheme(he.DefaultParams())
	if err != nil {
		b.Fatal(err)
	}
	w, err := WorkloadByName("sst2-distilbert")
	if err != nil {
		b.Fatal(err)
	}
	// One ciphertext uploaded (seeded) and one output ciphertext.
	one := sc.Sizes(1, 1, 1, he.Layout{MW: 1, NW: 1})
	U, O := float64(one.Weights), float64(one.Output)
	for i := range w.Phases {
		b.Run(fmt.Sprintf("phase%d", i+1), func(b *testing.B) {
			for range b.N {
				reqs, err := weightRequestsOf(w.Forward(i, w.BatchSize))
				if err != nil {
					b.Fatal(err)
				}
				var now, rev, up, least float64
				for _, r := range reqs {
					k := r.K
					if r.Kind == beaver.KindWeightVectorTriple {
						k = r.N
					}
					p, err := sc.PlanChecked(r.M, k, r.N)
					if err != nil {
						b.Fatal(err)
					}
					now += float64(sc.PlanWork(p))
					l, err := sc.ChooseLayout(r.N, k, r.M)
					if err != nil {
						b.Fatal(err)
					}
					sz := sc.Sizes(r.N, k, r.M, l)
					rev += float64(sz.WeightCiphertexts * ((r.N + l.MW - 1) / l.MW))
					up += float64(sz.Weights)
					least += 2 * math.Sqrt(U*O*float64(r.N)*float64(k)*float64(r.M)/float64(sc.N()))
				}
				per := float64(w.BatchSize)
				b.ReportMetric(now/per, "ctpt-now")
				b.ReportMetric(rev/per, "ctpt-reversed")
				b.ReportMetric(up/per/1e6, "upload-MB")
				b.ReportMetric(least/per/1e6, "min-MB")
			}
		})
	}
}

// weightRequestsOf runs one forward of cfg (dealer mode) and returns its
// weight-mask requests.
func weightRequestsOf(cfg ForwardConfig) ([]beaver.Request, error) {
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
		return nil, err
	}
	return rec.reqs, nil
}

// heOutputsPerBatch runs one forward of cfg (dealer mode) and returns the
// output coefficients of the HE plans of its weight-mask requests.
func heOutputsPerBatch(sc *he.Scheme, cfg ForwardConfig) (int64, error) {
	reqs, err := weightRequestsOf(cfg)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, r := range reqs {
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

package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/secure"
	"github.com/selectformer/selectformer/transport"
)

// Shapes names the target shapes of ForwardConfig.Shape: the paper's, and
// "tiny" (DistilBERT layout, hidden 64, 4 heads, FFN 128, vocabulary 1000)
// for tests and smoke runs.
var Shapes = []string{"bert-base", "distilbert", "vit-small", "vit-base", "tiny"}

// ForwardConfig describes a cost measurement of the secure forward with random
// weights (costs do not depend on values).
type ForwardConfig struct {
	// Shape is one of Shapes.
	Shape string
	// Layers, Heads (0: all of the shape) and MLPHidden size the proxy.
	Layers, Heads, MLPHidden int
	// Seq is the padded sequence length (128 when 0).
	Seq int
	// Batch is the number of candidates of the one Forward call.
	Batch int
	// Labels is the number of classes (0: 2 for text shapes, 10 for ViT).
	Labels int
	// Exact runs the exact target ("Oracle"): FFN with GeLU, exact softmax,
	// LayerNorm and entropy, every head.
	Exact bool
	// Options are passed to secure.Prepare.
	Options secure.Options
	// Link, if set, emulates the link.
	Link *transport.Profile
	// Seed fixes the random weights and inputs.
	Seed uint64
}

// ForwardResult is the cost of one Forward of a whole batch (secure.Prepare's weight
// sharing excluded and reported apart).
type ForwardResult struct {
	Shape     string `json:"shape"`
	Layers    int    `json:"layers"`
	Heads     int    `json:"heads"`
	MLPHidden int    `json:"mlp_dim"`
	Seq       int    `json:"seq"`
	Batch     int    `json:"batch"`
	Exact     bool   `json:"exact"`
	Rounds    int64  `json:"rounds"`
	BytesP0   int64  `json:"bytes_p0"`
	BytesP1   int64  `json:"bytes_p1"`
	// DealerBytes is the correlated randomness both parties received.
	DealerBytes int64 `json:"dealer_bytes"`
	// Seconds is the wall time of Forward (dealer material made on demand).
	Seconds float64 `json:"seconds"`
	// PeakBytes is the peak Go heap in use during the run (weight sharing and
	// Forward), sampled every 20 ms, for both parties
	// and the dealer together in one process (each party holds about half).
	PeakBytes uint64 `json:"peak_bytes"`
	// Link names the emulated link ("" for none).
	Link string `json:"link,omitempty"`
	// PrepareRounds and PrepareBytesP0 are the one-off weight sharing.
	PrepareRounds  int64 `json:"prepare_rounds"`
	PrepareBytesP0 int64 `json:"prepare_bytes_p0"`
	// Correlations is the correlated randomness Forward drew, per kind, for
	// the whole batch (Forward only; weight sharing draws none).
	Correlations []KindUse `json:"correlations,omitempty"`
}

// ShapeArch returns the architecture of a named shape.
func ShapeArch(c ForwardConfig) (secure.Arch, error) {
	var a secure.Arch
	switch c.Shape {
	case "bert-base":
		a = secure.Arch{Family: model.BERT, Hidden: 768, Heads: 12, Intermediate: 3072}
	case "distilbert":
		a = secure.Arch{Family: model.DistilBERT, Hidden: 768, Heads: 12, Intermediate: 3072}
	case "vit-small":
		a = secure.Arch{Family: model.ViT, Hidden: 384, Heads: 6, Intermediate: 1536}
	case "vit-base":
		a = secure.Arch{Family: model.ViT, Hidden: 768, Heads: 12, Intermediate: 3072}
	case "tiny":
		a = secure.Arch{Family: model.DistilBERT, Hidden: 64, Heads: 4, Intermediate: 128}
	default:
		return a, fmt.Errorf("bench: unknown shape %q (known: %v)", c.Shape, Shapes)
	}
	a.HeadDim = a.Hidden / a.Heads
	switch a.Family {
	case model.BERT:
		a.EmbedRows = 30522 + 2 // bert-base-uncased vocabulary and token types
	case model.DistilBERT:
		a.EmbedRows = 30522
		if c.Shape == "tiny" {
			a.EmbedRows = 1000
		}
	default:
		a.EmbedRows = 3 * 16 * 16 // RGB patches of 16×16
	}
	if c.Heads > 0 {
		if c.Heads > a.Heads {
			return a, fmt.Errorf("bench: %s has %d heads, asked for %d", c.Shape, a.Heads, c.Heads)
		}
		a.Heads = c.Heads
	}
	a.Layers, a.Seq, a.Labels, a.Eps = c.Layers, c.Seq, c.Labels, 1e-12
	if a.Seq == 0 {
		a.Seq = 128
	}
	if a.Labels == 0 {
		a.Labels = 2
		if a.Family == model.ViT {
			a.Labels = 10
		}
	}
	if c.Exact {
		a.Act, a.Ablation, a.TanhPooler = "gelu", proxy.NoApprox, a.Family == model.BERT
	} else {
		a.Intermediate, a.MLPHidden = 0, c.MLPHidden
	}
	return a, a.Validate()
}

// Forward measures one secure.Prepared.Forward of cfg.Batch random
// candidates through a random network of the configured shape, both parties
// in this process (RunLocal, each running RunForwardParty).
func Forward(ctx context.Context, cfg ForwardConfig) (*ForwardResult, error) {
	if _, err := forwardArch(cfg); err != nil {
		return nil, err
	}
	var counters [2]*kindCounter
	wrap := func(party int, p beaver.Provider) beaver.Provider {
		counters[party] = newKindCounter(p)
		return counters[party]
	}
	r, err := RunLocal(ctx, LocalConfig{Link: cfg.Link, MeasureMemory: true, Wrap: wrap}, func(ctx context.Context, s *protocol.Session) (ForwardParty, error) {
		o, err := RunForwardParty(ctx, s, cfg)
		if err != nil {
			return ForwardParty{}, err
		}
		return *o, nil
	})
	if err != nil {
		return nil, err
	}
	res, err := NewForwardResult(cfg, r.Out)
	if err != nil {
		return nil, err
	}
	res.PeakBytes = r.PeakHeap
	// Both parties draw the same requests, whose sizes are public: party
	// 0's count gives both parties' columns.
	res.Correlations = counters[0].kindUses()
	return res, nil
}

// ForwardParty is one party's cost in a Forward measurement.
type ForwardParty struct {
	// Prepare is the cost of the weight sharing, Forward of the one Forward.
	Prepare Cost `json:"prepare"`
	Forward Cost `json:"forward"`
	// Seconds is the wall time of Forward.
	Seconds float64 `json:"seconds"`
}

// RunForwardParty runs party s.Party()'s side of Forward over an established
// session (for parties in separate processes): the same architecture, random
// network and inputs as Forward for cfg (cfg.Link is ignored: emulate it on the
// session's connection). Only party 0 makes the network; only party 1 keeps
// the inputs (party 0 keeps the mask with Options.PublicMask).
func RunForwardParty(ctx context.Context, s *protocol.Session, cfg ForwardConfig) (*ForwardParty, error) {
	a, nw, in, err := forwardSetup(s, cfg)
	if err != nil {
		return nil, err
	}
	o, err := forwardParty(ctx, s, a, nw, in, cfg, nil)
	if err != nil {
		return nil, err
	}
	return &o, nil
}

// forwardSetup returns party s.Party()'s architecture, network (party 0)
// and inputs of a Forward of cfg.
func forwardSetup(s *protocol.Session, cfg ForwardConfig) (secure.Arch, *secure.Net, *secure.Batch, error) {
	a, err := forwardArch(cfg)
	if err != nil {
		return a, nil, nil, err
	}
	var nw *secure.Net
	if s.Party() == 0 {
		if nw, err = secure.RandomNet(a, cfg.Seed+1); err != nil {
			return a, nil, nil, err
		}
	}
	xs, mask := forwardInputs(a, cfg)
	in := &secure.Batch{X: xs, Mask: mask}
	if s.Party() == 0 {
		in = nil
		if cfg.Options.PublicMask {
			in = &secure.Batch{Mask: mask}
		}
	}
	return a, nw, in, nil
}

// NewForwardResult assembles the result of a Forward measurement of cfg from the costs
// of party 0 and party 1 (PeakBytes left zero).
func NewForwardResult(cfg ForwardConfig, parties [2]ForwardParty) (*ForwardResult, error) {
	a, err := forwardArch(cfg)
	if err != nil {
		return nil, err
	}
	p0, p1 := parties[0], parties[1]
	res := &ForwardResult{Shape: cfg.Shape, Layers: a.Layers, Heads: a.Heads, MLPHidden: a.MLPHidden, Seq: a.Seq, Batch: cfg.Batch, Exact: cfg.Exact,
		Rounds: p0.Forward.Stream.Rounds, BytesP0: p0.Forward.Stream.BytesSent, BytesP1: p1.Forward.Stream.BytesSent,
		DealerBytes: p0.Forward.Dealer.BytesRecv + p1.Forward.Dealer.BytesRecv, Seconds: max(p0.Seconds, p1.Seconds),
		PrepareRounds: p0.Prepare.Stream.Rounds, PrepareBytesP0: p0.Prepare.Stream.BytesSent}
	if cfg.Link != nil {
		res.Link = cfg.Link.Name
	}
	return res, nil
}

// forwardArch checks cfg and returns its architecture.
func forwardArch(cfg ForwardConfig) (secure.Arch, error) {
	a, err := ShapeArch(cfg)
	if err != nil {
		return a, err
	}
	if cfg.Batch <= 0 {
		return a, fmt.Errorf("bench: bench batch %d", cfg.Batch)
	}
	return a, nil
}

// normQuantiles holds N(0, 1) at the midpoints of 4096 equally likely
// intervals: indexed by 12 uniform bits, a standard normal discretised
// finely enough for synthetic embeddings (largest |value| 3.7).
var normQuantiles = func() (q [4096]float64) {
	for i := range q {
		q[i] = math.Sqrt2 * math.Erfinv(2*(float64(i)+0.5)/float64(len(q))-1)
	}
	return q
}()

// normals fills xs with standard normal values from rng: five
// normQuantiles draws per 64-bit word. The data owner's synthetic
// embeddings are B·T·H values per batch (1.6 M for the sst2 proxy's 16
// rows), which rng.NormFloat64 (a word and a ziggurat step each) made
// 7–12% of the sst2 sample's CPU: harness work a data owner looking up
// real embeddings does not do.
func normals(xs []float64, rng *rand.Rand) {
	for i := 0; i < len(xs); {
		u := rng.Uint64()
		for range 5 {
			if i == len(xs) {
				break
			}
			xs[i] = normQuantiles[u&4095]
			u >>= 12
			i++
		}
	}
}

// forwardInputs returns the random inputs of cfg (a function of cfg.Seed).
func forwardInputs(a secure.Arch, cfg ForwardConfig) ([]float64, [][]int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, 77))
	B := cfg.Batch
	var xs []float64
	switch {
	case !cfg.Options.PrivateEmbeddings:
		xs = make([]float64, B*a.Seq*a.Hidden)
		normals(xs, rng)
	case a.Family == model.ViT: // patches; row 0 is the class token's slot
		xs = make([]float64, B*a.Seq*a.EmbedRows)
		for i := range xs {
			if (i/a.EmbedRows)%a.Seq != 0 {
				xs[i] = 2*rng.Float64() - 1
			}
		}
	default: // one-hot token ids
		xs = make([]float64, B*a.Seq*a.EmbedRows)
		for r := 0; r < B*a.Seq; r++ {
			xs[r*a.EmbedRows+rng.IntN(a.EmbedRows)] = 1
		}
	}
	var mask [][]int
	if a.Family != model.ViT {
		mask = make([][]int, B)
		for i := range mask {
			mask[i] = make([]int, a.Seq)
			n := 1 + rng.IntN(a.Seq)
			for j := 0; j < n; j++ {
				mask[i][j] = 1
			}
		}
	}
	return xs, mask
}

// forwardParty shares the weights (party 0 holds net) and runs one Forward of
// in, measuring both; prepared, if set, is called between the two.
func forwardParty(ctx context.Context, s *protocol.Session, a secure.Arch, net *secure.Net, in *secure.Batch, cfg ForwardConfig, prepared func()) (ForwardParty, error) {
	var o ForwardParty
	m := NewMeter(s)
	p, err := secure.Prepare(ctx, s, a, net, cfg.Options)
	if err != nil {
		return o, err
	}
	o.Prepare = m.Since()
	if prepared != nil {
		prepared()
	}
	m = NewMeter(s)
	start := time.Now()
	if _, err := p.Forward(ctx, s, cfg.Batch, in); err != nil {
		return o, err
	}
	o.Seconds = time.Since(start).Seconds()
	o.Forward = m.Since()
	return o, nil
}

package secure

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/proxy/model"
	"github.com/selectformer/selectformer/transport"
)

// Shapes names the target shapes of BenchConfig.Shape.
var Shapes = []string{"bert-base", "distilbert", "vit-small", "vit-base"}

// BenchConfig describes a cost measurement of the secure forward with random
// weights (costs do not depend on values).
type BenchConfig struct {
	// Shape is one of Shapes.
	Shape string
	// Layers, Heads (0: all of the shape) and MLPDim size the proxy.
	Layers, Heads, MLPDim int
	// Seq is the padded sequence length (128 when 0).
	Seq int
	// Batch is the number of candidates of the one Forward call.
	Batch int
	// Labels is the number of classes (0: 2 for text shapes, 10 for ViT).
	Labels int
	// Exact runs the exact target ("Oracle"): FFN with GeLU, exact softmax,
	// LayerNorm and entropy, every head.
	Exact bool
	// Options are passed to Prepare.
	Options Options
	// Link, if set, emulates the link.
	Link *transport.Profile
	// Seed fixes the random weights and inputs.
	Seed uint64
}

// BenchResult is the cost of one Forward of a whole batch (Prepare's weight
// sharing excluded and reported apart).
type BenchResult struct {
	Shape   string `json:"shape"`
	Layers  int    `json:"layers"`
	Heads   int    `json:"heads"`
	MLPDim  int    `json:"mlp_dim"`
	Seq     int    `json:"seq"`
	Batch   int    `json:"batch"`
	Exact   bool   `json:"exact"`
	Rounds  int64  `json:"rounds"`
	BytesP0 int64  `json:"bytes_p0"`
	BytesP1 int64  `json:"bytes_p1"`
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
}

// ShapeArch returns the architecture of a named shape.
func ShapeArch(c BenchConfig) (Arch, error) {
	var a Arch
	switch c.Shape {
	case "bert-base":
		a = Arch{Family: model.BERT, Hidden: 768, Heads: 12, Intermediate: 3072}
	case "distilbert":
		a = Arch{Family: model.DistilBERT, Hidden: 768, Heads: 12, Intermediate: 3072}
	case "vit-small":
		a = Arch{Family: model.ViT, Hidden: 384, Heads: 6, Intermediate: 1536}
	case "vit-base":
		a = Arch{Family: model.ViT, Hidden: 768, Heads: 12, Intermediate: 3072}
	default:
		return a, fmt.Errorf("secure: unknown shape %q (known: %v)", c.Shape, Shapes)
	}
	a.HeadDim = a.Hidden / a.Heads
	switch a.Family {
	case model.BERT:
		a.EmbedRows = 30522 + 2 // bert-base-uncased vocabulary and token types
	case model.DistilBERT:
		a.EmbedRows = 30522
	default:
		a.EmbedRows = 3 * 16 * 16 // RGB patches of 16×16
	}
	if c.Heads > 0 {
		if c.Heads > a.Heads {
			return a, fmt.Errorf("secure: %s has %d heads, asked for %d", c.Shape, a.Heads, c.Heads)
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
		a.Intermediate, a.MLPHidden = 0, c.MLPDim
	}
	return a, a.Validate()
}

// Bench measures one Forward of cfg.Batch random candidates through a random
// network of the configured shape, both parties in this process (RunLocal).
func Bench(ctx context.Context, cfg BenchConfig) (*BenchResult, error) {
	a, err := ShapeArch(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Batch <= 0 {
		return nil, fmt.Errorf("secure: bench batch %d", cfg.Batch)
	}
	net, err := RandomNet(a, cfg.Seed+1)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 77))
	B := cfg.Batch
	var xs []float64
	switch {
	case !cfg.Options.PrivateEmbeddings:
		xs = make([]float64, B*a.Seq*a.Hidden)
		for i := range xs {
			xs[i] = rng.NormFloat64()
		}
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
	type out struct {
		prep, fwd Cost
		secs      float64
	}
	r, err := RunLocal(ctx, LocalConfig{Link: cfg.Link, MeasureMemory: true}, func(ctx context.Context, s *protocol.Session) (out, error) {
		var o out
		var nw *Net
		in := &Batch{X: xs, Mask: mask}
		if s.Party() == 0 {
			nw, in = net, nil
			if cfg.Options.PublicMask {
				in = &Batch{Mask: mask}
			}
		}
		m := NewMeter(s)
		p, err := Prepare(ctx, s, a, nw, cfg.Options)
		if err != nil {
			return o, err
		}
		o.prep = m.Since()
		m = NewMeter(s)
		start := time.Now()
		if _, err := p.Forward(ctx, s, B, in); err != nil {
			return o, err
		}
		o.secs = time.Since(start).Seconds()
		o.fwd = m.Since()
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	res := &BenchResult{Shape: cfg.Shape, Layers: a.Layers, Heads: a.Heads, MLPDim: a.MLPHidden, Seq: a.Seq, Batch: B, Exact: cfg.Exact,
		Rounds: r.Out[0].fwd.Stream.Rounds, BytesP0: r.Out[0].fwd.Stream.BytesSent, BytesP1: r.Out[1].fwd.Stream.BytesSent,
		DealerBytes: r.Out[0].fwd.Dealer.BytesRecv + r.Out[1].fwd.Dealer.BytesRecv, Seconds: max(r.Out[0].secs, r.Out[1].secs),
		PeakBytes: r.PeakHeap, PrepareRounds: r.Out[0].prep.Stream.Rounds, PrepareBytesP0: r.Out[0].prep.Stream.BytesSent}
	if cfg.Link != nil {
		res.Link = cfg.Link.Name
	}
	return res, nil
}

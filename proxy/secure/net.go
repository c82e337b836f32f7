package secure

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/proxy"
)

// Arch is the public architecture of a network evaluated by Forward: both
// parties know it (DESIGN.md reveals the proxy architectures). The data owner
// builds it without seeing any weight.
type Arch struct {
	// Family fixes the block order (ViT: pre-LayerNorm) and the head (BERT:
	// pooler, DistilBERT: pre-classifier, ViT: final LayerNorm).
	Family model.Family `json:"family"`
	// Layers, Heads (kept heads) and HeadDim size the encoder; Hidden is the
	// model width.
	Layers  int `json:"layers"`
	Heads   int `json:"heads"`
	HeadDim int `json:"head_dim"`
	Hidden  int `json:"hidden"`
	// Seq is the padded sequence length T (tokens, or patches + 1 for ViT).
	Seq int `json:"seq"`
	// Labels is the number of classes.
	Labels int `json:"labels"`
	// MLPHidden is the hidden width d of every approximator MLP (unused by the
	// modules kept exact).
	MLPHidden int `json:"mlp_hidden"`
	// EntropyHidden is the hidden width of the entropy MLP when it differs
	// from MLPHidden (0: MLPHidden; see proxy.Config.EntropyHidden).
	EntropyHidden int `json:"entropy_hidden,omitempty"`
	// SqrtEntropy says that the entropy MLP outputs √H, not H
	// (proxy.Proxy.SqrtEntropy): selections rank alike, and an appraisal of
	// the mean entropy squares the selected scores first.
	SqrtEntropy bool `json:"sqrt_entropy,omitempty"`
	// Criterion names the selection criterion the scores are of
	// (mlp.RegisterCriterion, proxy.Proxy.Criterion); empty means
	// mlp.DefaultCriterion, the entropy, which ArchOfProxy leaves empty so
	// that such architectures encode as before. Keeping the score exact
	// (Ablation.ExactEntropy) needs its exact version over MPC
	// (RegisterExactScore).
	Criterion string `json:"criterion,omitempty"`
	// Intermediate is the FFN width; 0 means no FFN (a SelectFormer proxy).
	Intermediate int `json:"intermediate"`
	// Act is the FFN activation ("relu" or "gelu"; GeLU runs as x·σ(1.702x)).
	Act string `json:"act,omitempty"`
	// Ablation keeps modules exact: they run with the CrypTen-style protocol
	// functions (protocol.Softmax, protocol.InvSqrt, protocol.Entropy).
	Ablation proxy.Ablation `json:"ablation"`
	// Eps is the LayerNorm epsilon (used by exact LayerNorms).
	Eps float64 `json:"eps"`
	// InvSqrtShift k rescales the variance of exact LayerNorms into the range
	// of protocol.InvSqrt ([0.1, 100]): 1/√v = 2^k/√(4^k·v), both factors
	// local multiplications by public integers. A model whose LayerNorm
	// variances lie in [4^−k·0.1, 4^−k·100] needs k; the default 0 fits
	// BERT-base-like variances.
	InvSqrtShift uint `json:"inv_sqrt_shift,omitempty"`
	// EmbedRows is the width of the data owner's input rows for private
	// embeddings (vocabulary + token types, or channels·patch²; 0: the
	// embeddings are public and the data owner embeds, see
	// Options.PrivateEmbeddings).
	EmbedRows int `json:"embed_rows,omitempty"`
	// TanhPooler makes BERT's pooler activation tanh (the exact target); a
	// SelectFormer proxy uses ReLU.
	TanhPooler bool `json:"tanh_pooler"`
}

// Bounds of Arch.Validate.
const (
	// MaxWidth bounds every width of an architecture (sequence, hidden,
	// heads·head dim, labels, MLP and FFN widths).
	MaxWidth = 1 << 16
	// MaxLayers bounds the number of encoder layers.
	MaxLayers = 256
)

// Validate checks that the architecture is usable.
func (a Arch) Validate() error {
	switch a.Family {
	case model.BERT, model.DistilBERT, model.ViT:
	default:
		return fmt.Errorf("secure: unknown family %q", a.Family)
	}
	if a.Layers <= 0 || a.Heads <= 0 || a.HeadDim <= 0 || a.Hidden <= 0 || a.Seq <= 0 || a.Labels < 2 || a.Intermediate < 0 {
		return fmt.Errorf("secure: architecture %+v: layers, heads, head dim, hidden, seq must be positive and labels ≥ 2", a)
	}
	needMLP := !a.Ablation.ExactAttnSoftmax || !a.Ablation.ExactLayerNorm || !a.Ablation.ExactEntropy
	if needMLP && a.MLPHidden <= 0 {
		return fmt.Errorf("secure: architecture has MLPs but MLP hidden width %d", a.MLPHidden)
	}
	if a.EntropyHidden < 0 || a.EntropyHidden > MaxWidth || a.MLPHidden < 0 || a.EmbedRows < 0 {
		return fmt.Errorf("secure: entropy MLP hidden width %d", a.EntropyHidden)
	}
	if a.SqrtEntropy && a.Ablation.ExactEntropy {
		return fmt.Errorf("secure: √H scores need an entropy MLP, but the entropy is exact")
	}
	if err := checkCriterionName(a.Criterion); err != nil {
		return err
	}
	if a.Ablation.ExactEntropy {
		if _, err := exactScore(a.Criterion); err != nil {
			return err
		}
	}
	if a.Intermediate > 0 && a.Act != "relu" && a.Act != "gelu" {
		return fmt.Errorf("secure: FFN activation %q (want relu or gelu)", a.Act)
	}
	if a.InvSqrtShift > 8 {
		return fmt.Errorf("secure: inverse square root shift %d > 8", a.InvSqrtShift)
	}
	// A peer's architecture sizes what the other party allocates: every
	// width and count is bounded (MaxWidth, MaxLayers), so a decoded
	// architecture cannot ask for more memory than a real transformer does.
	if a.Seq > MaxWidth || a.Hidden > MaxWidth || a.Heads > MaxWidth || a.HeadDim > MaxWidth || a.Heads*a.HeadDim > MaxWidth ||
		a.Labels > MaxWidth || a.MLPHidden > MaxWidth || a.Intermediate > MaxWidth || a.EmbedRows > 1<<20 || a.Layers > MaxLayers {
		return fmt.Errorf("secure: architecture %+v too large", a)
	}
	return nil
}

// inner returns heads·headDim, the width of the attention projections.
func (a Arch) inner() int { return a.Heads * a.HeadDim }

// linear is a clear affine map y = x·W + b with W stored [in, out] (the
// layout of protocol.MatMulWeights).
type linear struct {
	in, out int
	w, b    []float64 // b may be nil
}

// mlpWeights is a clear approximator MLP in→d→out with weights [in,d] and [d,out].
type mlpWeights struct {
	in, d, out int
	w1, b1     []float64
	w2, b2     []float64
	fill       []float64 // attention softmax only
}

// layerNormWeights is a clear LayerNorm: γ, β and, unless exact, the inverse square root MLP.
type layerNormWeights struct {
	gamma, beta []float64
	inv         *mlpWeights // nil: exact (protocol.InvSqrt)
}

// blockWeights is one encoder block's clear weights.
type blockWeights struct {
	qkv, o  linear
	attn    *mlpWeights // nil: exact softmax
	ln1     layerNormWeights
	ffnIn   *linear
	ffnOut  *linear
	ln2     *layerNormWeights
	scaleQK float64
}

// Net is the model owner's clear network for the secure forward: the blocks,
// the head and the entropy MLP, extracted from a proxy (FromProxy), a target
// model (FromModel, the exact "Oracle") or drawn at random (RandomNet).
type Net struct {
	// Arch is the public architecture.
	Arch   Arch
	blocks []blockWeights
	final  *layerNormWeights // ViT's final LayerNorm
	pooler *linear           // BERT pooler / DistilBERT pre-classifier
	cls    linear
	ent    *mlpWeights       // nil: exact entropy
	emb    *embeddingWeights // private embeddings (nil: public)
}

// transpose returns the [cols, rows] copy of a row-major [rows, cols] matrix.
func transpose(w []float64, rows, cols int) []float64 {
	out := make([]float64, len(w))
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			out[c*rows+r] = w[r*cols+c]
		}
	}
	return out
}

// fromLinear converts an nn.Linear (W [out, in]) to a linear (W [in, out]).
func fromLinear(l *nn.Linear) linear {
	in, out := l.In(), l.Out()
	li := linear{in: in, out: out, w: transpose(l.W.Value.Data, out, in)}
	if l.B != nil {
		li.b = append([]float64(nil), l.B.Value.Data...)
	}
	return li
}

// fromMLP converts an mlp.MLP (nil stays nil).
func fromMLP(m *mlp.MLP) *mlpWeights {
	if m == nil {
		return nil
	}
	w1, b1, w2, b2 := m.Weights()
	in, d, out := m.In(), m.Hidden(), m.Out()
	return &mlpWeights{in: in, d: d, out: out, w1: transpose(w1, d, in), b1: b1, w2: transpose(w2, out, d), b2: b2,
		fill: append([]float64(nil), m.Fill...)}
}

func fromLN(ln *nn.LayerNorm, inv *mlp.MLP) *layerNormWeights {
	return &layerNormWeights{gamma: append([]float64(nil), ln.Gamma.Value.Data...), beta: append([]float64(nil), ln.Beta.Value.Data...), inv: fromMLP(inv)}
}

// entropyHidden returns the entropy MLP's hidden width.
func (a Arch) entropyHidden() int {
	if a.EntropyHidden > 0 {
		return a.EntropyHidden
	}
	return a.MLPHidden
}

// ArchOfProxy returns the public architecture of a SelectFormer proxy for
// inputs padded to seq tokens (for ViT, seq must be patches + 1).
func ArchOfProxy(p *proxy.Proxy, seq int) (Arch, error) {
	if p == nil || p.Model == nil {
		return Arch{}, fmt.Errorf("secure: nil proxy")
	}
	if p.Kind != proxy.SelectFormer {
		return Arch{}, fmt.Errorf("secure: proxy kind %q (want %q)", p.Kind, proxy.SelectFormer)
	}
	c := p.Model.Config
	if len(p.Model.Blocks) == 0 {
		return Arch{}, fmt.Errorf("secure: proxy has no layers")
	}
	a := Arch{Family: c.Family, Layers: len(p.Model.Blocks), Heads: p.Model.Blocks[0].Attn.Heads, HeadDim: p.Model.Blocks[0].Attn.HeadDim(),
		Hidden: c.Hidden, Seq: seq, Labels: c.NumLabels(), MLPHidden: p.Shape.MLPHidden, Ablation: p.Ablation, Eps: c.LayerNormEps,
		EmbedRows: embedRowsOf(c)}
	if p.Entropy != nil && p.Entropy.Hidden() != p.Shape.MLPHidden {
		a.EntropyHidden = p.Entropy.Hidden()
	}
	a.SqrtEntropy = p.SqrtEntropy && p.Entropy != nil
	if p.Criterion != mlp.DefaultCriterion {
		a.Criterion = p.Criterion
	}
	if c.Family == model.ViT && seq != c.NumPatches()+1 {
		return Arch{}, fmt.Errorf("secure: a ViT of %d patches needs seq %d, got %d", c.NumPatches(), c.NumPatches()+1, seq)
	}
	return a, a.Validate()
}

// FromProxy extracts the model owner's clear network from a SelectFormer proxy
// for inputs padded to seq tokens. The embeddings are not part of it: they are
// public, and the data owner applies them (Embed).
func FromProxy(p *proxy.Proxy, seq int) (*Net, error) {
	a, err := ArchOfProxy(p, seq)
	if err != nil {
		return nil, err
	}
	m := p.Model
	n := &Net{Arch: a}
	for i, b := range m.Blocks {
		if b.FFN != nil || b.LN2 != nil {
			return nil, fmt.Errorf("secure: proxy layer %d has an FFN", i)
		}
		if b.Attn.Heads != a.Heads {
			return nil, fmt.Errorf("secure: proxy layer %d has %d heads, layer 0 %d", i, b.Attn.Heads, a.Heads)
		}
		bw, err := blockFrom(b, a)
		if err != nil {
			return nil, fmt.Errorf("secure: proxy layer %d: %w", i, err)
		}
		if !a.Ablation.ExactAttnSoftmax {
			if bw.attn = fromMLP(p.AttnMLP[i]); bw.attn == nil || bw.attn.in != seq {
				return nil, fmt.Errorf("secure: proxy layer %d: softmax MLP missing or not of width %d", i, seq)
			}
		}
		if !a.Ablation.ExactLayerNorm {
			if bw.ln1.inv = fromMLP(p.LNMLP[i]); bw.ln1.inv == nil {
				return nil, fmt.Errorf("secure: proxy layer %d: LayerNorm MLP missing", i)
			}
		}
		n.blocks = append(n.blocks, bw)
	}
	if err := n.headFrom(m, p.FinalLNMLP); err != nil {
		return nil, err
	}
	if n.emb, err = embFrom(m, seq); err != nil {
		return nil, err
	}
	if !a.Ablation.ExactEntropy {
		if n.ent = fromMLP(p.Entropy); n.ent == nil {
			return nil, fmt.Errorf("secure: proxy has no entropy MLP")
		}
	}
	return n, n.check()
}

// blockFrom copies a block's attention, LayerNorms and FFN (MLPs are set by
// the caller).
func blockFrom(b *nn.Block, a Arch) (blockWeights, error) {
	att := b.Attn
	q, k, v := fromLinear(att.Q), fromLinear(att.K), fromLinear(att.V)
	if q.out != a.inner() || k.out != a.inner() || v.out != a.inner() || q.in != a.Hidden {
		return blockWeights{}, fmt.Errorf("attention projections %d/%d/%d wide, want %d", q.out, k.out, v.out, a.inner())
	}
	// One matrix [hidden, 3·inner]: columns Q | K | V.
	w3 := 3 * a.inner()
	qkv := linear{in: a.Hidden, out: w3, w: make([]float64, a.Hidden*w3), b: make([]float64, w3)}
	for r := 0; r < a.Hidden; r++ {
		for j, l := range []linear{q, k, v} {
			copy(qkv.w[r*w3+j*a.inner():], l.w[r*a.inner():(r+1)*a.inner()])
		}
	}
	for j, l := range []linear{q, k, v} {
		if l.b != nil {
			copy(qkv.b[j*a.inner():], l.b)
		}
	}
	bw := blockWeights{qkv: qkv, o: fromLinear(att.O), ln1: *fromLN(b.LN1, nil), scaleQK: 1 / math.Sqrt(float64(a.HeadDim))}
	if b.FFN != nil {
		in, out := fromLinear(b.FFN.In), fromLinear(b.FFN.Out)
		bw.ffnIn, bw.ffnOut = &in, &out
		bw.ln2 = fromLN(b.LN2, nil)
	}
	return bw, nil
}

// headFrom copies the head: final LayerNorm (ViT), pooler / pre-classifier,
// classifier.
func (n *Net) headFrom(m *model.Model, finalInv *mlp.MLP) error {
	switch {
	case m.FinalLN != nil:
		n.final = fromLN(m.FinalLN, finalInv)
		if !n.Arch.Ablation.ExactLayerNorm && finalInv == nil {
			return fmt.Errorf("secure: final LayerNorm MLP missing")
		}
	case m.Pooler != nil:
		l := fromLinear(m.Pooler)
		n.pooler = &l
	case m.PreClassifier != nil:
		l := fromLinear(m.PreClassifier)
		n.pooler = &l
	}
	n.cls = fromLinear(m.Classifier)
	return nil
}

// OracleArch returns the architecture of the exact target model m ("Oracle"):
// every layer with its FFN, every nonlinear module exact.
func OracleArch(m *model.Model, seq int) (Arch, error) {
	return oracleArch(m, seq, "")
}

// oracleArch is OracleArch for the selection criterion crit (empty or
// mlp.DefaultCriterion: the entropy).
func oracleArch(m *model.Model, seq int, crit string) (Arch, error) {
	if crit == mlp.DefaultCriterion {
		crit = ""
	}
	if m == nil || len(m.Blocks) == 0 {
		return Arch{}, fmt.Errorf("secure: oracle of an empty model")
	}
	c := m.Config
	a := Arch{Family: c.Family, Layers: len(m.Blocks), Heads: m.Blocks[0].Attn.Heads, HeadDim: m.Blocks[0].Attn.HeadDim(), Hidden: c.Hidden,
		Seq: seq, Labels: c.NumLabels(), Intermediate: c.Intermediate, Act: c.HiddenAct, Ablation: proxy.NoApprox, Eps: c.LayerNormEps,
		TanhPooler: c.Family == model.BERT, EmbedRows: embedRowsOf(c), Criterion: crit}
	if a.Act != "relu" {
		a.Act = "gelu"
	}
	return a, a.Validate()
}

// FromModel extracts the exact target model m (the paper's "Oracle") for
// inputs padded to seq tokens: every layer, FFN, exact softmax, LayerNorm and
// entropy.
func FromModel(m *model.Model, seq int) (*Net, error) {
	return FromModelCriterion(m, seq, "")
}

// FromModelCriterion is FromModel scoring candidates by the selection
// criterion crit (mlp.RegisterCriterion; empty: the entropy) instead of the
// entropy; crit needs its exact version over MPC (RegisterExactScore), or
// FromModelCriterion fails saying so.
func FromModelCriterion(m *model.Model, seq int, crit string) (*Net, error) {
	a, err := oracleArch(m, seq, crit)
	if err != nil {
		return nil, err
	}
	n := &Net{Arch: a}
	for i, b := range m.Blocks {
		if b.FFN == nil {
			return nil, fmt.Errorf("secure: oracle layer %d has no FFN", i)
		}
		bw, err := blockFrom(b, a)
		if err != nil {
			return nil, fmt.Errorf("secure: oracle layer %d: %w", i, err)
		}
		n.blocks = append(n.blocks, bw)
	}
	if err := n.headFrom(m, nil); err != nil {
		return nil, err
	}
	if n.emb, err = embFrom(m, seq); err != nil {
		return nil, err
	}
	return n, n.check()
}

// RandomNet returns a network of architecture a with random weights (costs do
// not depend on values): Gaussian weights of standard deviation 0.02 as in
// BERT's initialisation, γ = 1, β = 0, and MLP weights of the order of a
// trained approximator's.
func RandomNet(a Arch, seed uint64) (*Net, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5ec))
	gauss := func(n int, sd float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * sd
		}
		return v
	}
	lin := func(in, out int) linear {
		return linear{in: in, out: out, w: gauss(in*out, 0.02), b: gauss(out, 0.02)}
	}
	randomMLPHidden := func(in, out, d int) *mlpWeights {
		return &mlpWeights{in: in, d: d, out: out, w1: gauss(in*d, 0.5/math.Sqrt(float64(in))), b1: gauss(d, 0.1),
			w2: gauss(d*out, 0.5/math.Sqrt(float64(d))), b2: gauss(out, 0.1), fill: gauss(in, 1)}
	}
	randomMLP := func(in, out int) *mlpWeights { return randomMLPHidden(in, out, a.MLPHidden) }
	ln := func() *layerNormWeights {
		l := &layerNormWeights{gamma: make([]float64, a.Hidden), beta: make([]float64, a.Hidden)}
		for i := range l.gamma {
			l.gamma[i] = 1
		}
		if !a.Ablation.ExactLayerNorm {
			l.inv = randomMLP(1, 1)
		}
		return l
	}
	n := &Net{Arch: a}
	for range a.Layers {
		b := blockWeights{qkv: lin(a.Hidden, 3*a.inner()), o: lin(a.inner(), a.Hidden), ln1: *ln(), scaleQK: 1 / math.Sqrt(float64(a.HeadDim))}
		if !a.Ablation.ExactAttnSoftmax {
			b.attn = randomMLP(a.Seq, a.Seq)
		}
		if a.Intermediate > 0 {
			in, out := lin(a.Hidden, a.Intermediate), lin(a.Intermediate, a.Hidden)
			b.ffnIn, b.ffnOut, b.ln2 = &in, &out, ln()
		}
		n.blocks = append(n.blocks, b)
	}
	if a.Family == model.ViT {
		n.final = ln()
	} else {
		l := lin(a.Hidden, a.Hidden)
		n.pooler = &l
	}
	n.cls = lin(a.Hidden, a.Labels)
	if !a.Ablation.ExactEntropy {
		n.ent = randomMLPHidden(a.Labels, 1, a.entropyHidden())
	}
	if a.EmbedRows > 0 {
		n.emb = &embeddingWeights{table: gauss(a.EmbedRows*a.Hidden, 0.02), add: gauss(a.Seq*a.Hidden, 0.02)}
		if a.Family != model.ViT {
			n.emb.ln = ln()
		}
	}
	return n, n.check()
}

// check verifies that the weights fit the architecture.
func (n *Net) check() error {
	a := n.Arch
	if err := a.Validate(); err != nil {
		return err
	}
	if len(n.blocks) != a.Layers {
		return fmt.Errorf("secure: %d blocks for %d layers", len(n.blocks), a.Layers)
	}
	okLin := func(l *linear, in, out int) bool {
		return l != nil && l.in == in && l.out == out && len(l.w) == in*out && (l.b == nil || len(l.b) == out)
	}
	okMLPD := func(m *mlpWeights, in, out, d int) bool {
		return m != nil && m.in == in && m.out == out && m.d == d && len(m.w1) == in*m.d && len(m.b1) == m.d &&
			len(m.w2) == m.d*out && len(m.b2) == out
	}
	okMLP := func(m *mlpWeights, in, out int) bool { return okMLPD(m, in, out, a.MLPHidden) }
	okLN := func(l *layerNormWeights) bool {
		return l != nil && len(l.gamma) == a.Hidden && len(l.beta) == a.Hidden && (a.Ablation.ExactLayerNorm || okMLP(l.inv, 1, 1))
	}
	for i := range n.blocks {
		b := &n.blocks[i]
		if !okLin(&b.qkv, a.Hidden, 3*a.inner()) || !okLin(&b.o, a.inner(), a.Hidden) || !okLN(&b.ln1) {
			return fmt.Errorf("secure: layer %d: weights do not fit %+v", i, a)
		}
		if !a.Ablation.ExactAttnSoftmax && (!okMLP(b.attn, a.Seq, a.Seq) || len(b.attn.fill) != a.Seq) {
			return fmt.Errorf("secure: layer %d: softmax MLP does not fit seq %d and d %d", i, a.Seq, a.MLPHidden)
		}
		if a.Intermediate > 0 && (!okLin(b.ffnIn, a.Hidden, a.Intermediate) || !okLin(b.ffnOut, a.Intermediate, a.Hidden) || !okLN(b.ln2)) {
			return fmt.Errorf("secure: layer %d: FFN does not fit %+v", i, a)
		}
	}
	if a.Family == model.ViT {
		if !okLN(n.final) {
			return fmt.Errorf("secure: final LayerNorm does not fit %+v", a)
		}
	} else if !okLin(n.pooler, a.Hidden, a.Hidden) {
		return fmt.Errorf("secure: pooler does not fit %+v", a)
	}
	if !okLin(&n.cls, a.Hidden, a.Labels) {
		return fmt.Errorf("secure: classifier does not fit %+v", a)
	}
	if a.EmbedRows > 0 && (n.emb == nil || len(n.emb.table) != a.EmbedRows*a.Hidden || len(n.emb.add) != a.Seq*a.Hidden ||
		(a.Family != model.ViT && (n.emb.ln == nil || len(n.emb.ln.gamma) != a.Hidden))) {
		return fmt.Errorf("secure: embeddings do not fit %+v", a)
	}
	if !a.Ablation.ExactEntropy && !okMLPD(n.ent, a.Labels, 1, a.entropyHidden()) {
		return fmt.Errorf("secure: entropy MLP does not fit %+v", a)
	}
	return nil
}

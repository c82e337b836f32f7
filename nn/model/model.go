// Package model holds the target transformers of private data selection: encoder
// classifiers of the BERT, DistilBERT and ViT families with their real Hugging Face
// layer layouts and parameter names, built on the plaintext engine nn. It reads and
// writes Hugging Face checkpoints (model.safetensors + config.json), trains and
// fine-tunes them, and evaluates accuracy, per-class accuracy and per-sample
// prediction entropy.
package model

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/selectformer/selectformer/nn"
)

// Input is a batch of model inputs. Text models read IDs (and optionally TypeIDs
// and Mask); ViT reads Pixels.
type Input struct {
	// IDs holds each sample's token ids; all samples have the same length.
	IDs [][]int
	// TypeIDs holds BERT token-type (segment) ids; nil means all 0.
	TypeIDs [][]int
	// Mask holds the attention mask (1 = token, 0 = padding); nil means all 1.
	Mask [][]int
	// Pixels holds each image as channels × height × width values, channel-major,
	// already normalised as the model expects (see NormalizeImages).
	Pixels [][]float64
}

// Len returns the number of samples.
func (in Input) Len() int {
	if in.Pixels != nil {
		return len(in.Pixels)
	}
	return len(in.IDs)
}

// Select returns the samples at idx (sharing their slices).
func (in Input) Select(idx []int) (Input, error) {
	n := in.Len()
	var out Input
	pick := func(src [][]int) [][]int {
		if src == nil {
			return nil
		}
		dst := make([][]int, len(idx))
		for i, j := range idx {
			dst[i] = src[j]
		}
		return dst
	}
	for _, j := range idx {
		if j < 0 || j >= n {
			return out, fmt.Errorf("input select: index %d out of range [0,%d)", j, n)
		}
	}
	if in.TypeIDs != nil && len(in.TypeIDs) != n || in.Mask != nil && len(in.Mask) != n {
		return out, fmt.Errorf("input select: %d samples but %d type-id rows and %d mask rows", n, len(in.TypeIDs), len(in.Mask))
	}
	out.IDs, out.TypeIDs, out.Mask = pick(in.IDs), pick(in.TypeIDs), pick(in.Mask)
	if in.Pixels != nil {
		out.Pixels = make([][]float64, len(idx))
		for i, j := range idx {
			out.Pixels[i] = in.Pixels[j]
		}
	}
	return out, nil
}

// NormalizeImages turns grey-scale images with pixels in [0,1] into ViT inputs
// with the Hugging Face ViT image processor's normalisation ((x − 0.5) / 0.5),
// replicating the grey channel channels times.
func NormalizeImages(images [][]float64, channels int) Input {
	out := make([][]float64, len(images))
	for i, img := range images {
		v := make([]float64, 0, len(img)*channels)
		for c := 0; c < channels; c++ {
			for _, p := range img {
				v = append(v, (p-0.5)/0.5)
			}
		}
		out[i] = v
	}
	return Input{Pixels: out}
}

// Model is an encoder classifier of one family. Its exported layers may be edited
// (blocks removed, heads pruned, modules swapped) by proxy generation.
type Model struct {
	// Config is the architecture.
	Config Config

	// Word, Position and TokenType are the text embeddings (TokenType is BERT only).
	Word, Position, TokenType *nn.Embedding
	// EmbLN normalises the text embeddings.
	EmbLN *nn.LayerNorm

	// Patch is ViT's patch projection, weight [hidden, channels, p, p].
	Patch *nn.Linear
	// CLS is ViT's class token [1, 1, hidden]; PosEmb its position embeddings
	// [1, patches+1, hidden].
	CLS, PosEmb *nn.Param

	// EmbDrop is the dropout after the embeddings.
	EmbDrop *nn.Dropout
	// Blocks are the encoder layers.
	Blocks []*nn.Block
	// FinalLN is ViT's final LayerNorm (applied to the class token).
	FinalLN *nn.LayerNorm
	// Pooler is BERT's pooler dense layer (followed by tanh).
	Pooler *nn.Linear
	// PreClassifier is DistilBERT's pre_classifier (followed by ReLU).
	PreClassifier *nn.Linear
	// HeadDrop is the dropout before the classifier.
	HeadDrop *nn.Dropout
	// Classifier maps the pooled representation to the logits.
	Classifier *nn.Linear

	headAct nn.Module
	rng     *rand.Rand
	// cached by Forward for Backward
	b, t   int
	nPatch int
}

// prefix returns the family's base-model parameter prefix.
func prefix(f Family) string {
	if f == DistilBERT {
		return "distilbert."
	}
	return string(f) + "."
}

// BlockNames returns the Hugging Face parameter-name prefixes of encoder layer i.
func BlockNames(f Family, i int) nn.BlockNames {
	switch f {
	case BERT:
		p := fmt.Sprintf("bert.encoder.layer.%d.", i)
		return nn.BlockNames{Query: p + "attention.self.query", Key: p + "attention.self.key", Value: p + "attention.self.value",
			Output: p + "attention.output.dense", LN1: p + "attention.output.LayerNorm",
			FFNIn: p + "intermediate.dense", FFNOut: p + "output.dense", LN2: p + "output.LayerNorm"}
	case DistilBERT:
		p := fmt.Sprintf("distilbert.transformer.layer.%d.", i)
		return nn.BlockNames{Query: p + "attention.q_lin", Key: p + "attention.k_lin", Value: p + "attention.v_lin",
			Output: p + "attention.out_lin", LN1: p + "sa_layer_norm",
			FFNIn: p + "ffn.lin1", FFNOut: p + "ffn.lin2", LN2: p + "output_layer_norm"}
	default:
		p := fmt.Sprintf("vit.encoder.layer.%d.", i)
		return nn.BlockNames{Query: p + "attention.attention.query", Key: p + "attention.attention.key", Value: p + "attention.attention.value",
			Output: p + "attention.output.dense", LN1: p + "layernorm_before",
			FFNIn: p + "intermediate.dense", FFNOut: p + "output.dense", LN2: p + "layernorm_after"}
	}
}

// New builds a randomly initialised model (BERT initialisation: N(0, 0.02²)
// weights, zero biases, unit LayerNorm) from a validated configuration. seed fixes
// the initialisation and the dropout masks.
func New(cfg Config, seed uint64) (*Model, error) {
	m, err := build(cfg, seed)
	if err != nil {
		return nil, err
	}
	m.initParams(m.Params())
	return m, nil
}

// initParams gives params the BERT initialisation: N(0, 0.02²) for weights,
// embeddings and ViT's class token and position embeddings, 0 for biases, 1/0 for
// LayerNorm weight/bias.
func (m *Model) initParams(params []*nn.Param) {
	ln := map[*nn.Param]bool{}
	lnGamma := map[*nn.Param]*nn.Param{}
	lns := []*nn.LayerNorm{m.EmbLN, m.FinalLN}
	for _, b := range m.Blocks {
		lns = append(lns, b.LN1, b.LN2)
	}
	for _, l := range lns {
		if l != nil {
			ln[l.Gamma], ln[l.Beta] = true, true
			lnGamma[l.Gamma] = l.Gamma
		}
	}
	for _, p := range params {
		switch {
		case ln[p] && p == lnGamma[p]:
			for i := range p.Value.Data {
				p.Value.Data[i] = 1
			}
		case ln[p] || strings.HasSuffix(p.Name, ".bias"):
			p.Value.Zero()
		default:
			nn.InitNormal(p.Value, 0.02, m.rng)
		}
	}
}

// build constructs the layers with zero weights (unit LayerNorm).
func build(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rng := nn.NewRNG(seed)
	m := &Model{Config: cfg, rng: rng, EmbDrop: &nn.Dropout{P: cfg.HiddenDropout, Rng: rng},
		HeadDrop: &nn.Dropout{P: cfg.ClassifierDropout, Rng: rng}}
	h, pre := cfg.Hidden, prefix(cfg.Family)
	switch cfg.Family {
	case BERT, DistilBERT:
		m.Word = nn.NewEmbedding(pre+"embeddings.word_embeddings", cfg.VocabSize, h, nil)
		m.Position = nn.NewEmbedding(pre+"embeddings.position_embeddings", cfg.MaxPositions, h, nil)
		if cfg.Family == BERT {
			m.TokenType = nn.NewEmbedding(pre+"embeddings.token_type_embeddings", cfg.TypeVocabSize, h, nil)
		}
		m.EmbLN = nn.NewLayerNorm(pre+"embeddings.LayerNorm", h, cfg.LayerNormEps)
	case ViT:
		p, c := cfg.PatchSize, cfg.NumChannels
		m.Patch = nn.NewLinear("vit.embeddings.patch_embeddings.projection", c*p*p, h, true, nil)
		m.Patch.W = nn.NewParam(m.Patch.W.Name, h, c, p, p)
		m.CLS = nn.NewParam("vit.embeddings.cls_token", 1, 1, h)
		m.PosEmb = nn.NewParam("vit.embeddings.position_embeddings", 1, cfg.NumPatches()+1, h)
		m.CLS.NoDecay, m.PosEmb.NoDecay = true, true
		m.FinalLN = nn.NewLayerNorm("vit.layernorm", h, cfg.LayerNormEps)
	}
	for i := 0; i < cfg.Layers; i++ {
		b, err := nn.NewBlock(nn.BlockConfig{Dim: h, Heads: cfg.Heads, Intermediate: cfg.Intermediate, Eps: cfg.LayerNormEps,
			Act: cfg.HiddenAct, PreLN: cfg.Family == ViT, HiddenDropout: cfg.HiddenDropout, AttentionDropout: cfg.AttentionDropout, NoInit: true},
			BlockNames(cfg.Family, i), rng)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if cfg.NoQKVBias {
			b.Attn.Q.B, b.Attn.K.B, b.Attn.V.B = nil, nil, nil
		}
		m.Blocks = append(m.Blocks, b)
	}
	switch cfg.Family {
	case BERT:
		m.Pooler = nn.NewLinear("bert.pooler.dense", h, h, true, nil)
		m.headAct = &nn.Tanh{}
	case DistilBERT:
		m.PreClassifier = nn.NewLinear("pre_classifier", h, h, true, nil)
		m.headAct = &nn.ReLU{}
	}
	m.Classifier = nn.NewLinear("classifier", h, cfg.NumLabels(), true, nil)
	return m, nil
}

// EmbeddingParams returns the parameters of the embedding layer (token, position,
// type, patch, class token, embedding LayerNorm).
func (m *Model) EmbeddingParams() []*nn.Param {
	var ps []*nn.Param
	for _, e := range []*nn.Embedding{m.Word, m.Position, m.TokenType} {
		if e != nil {
			ps = append(ps, e.Params()...)
		}
	}
	if m.EmbLN != nil {
		ps = append(ps, m.EmbLN.Params()...)
	}
	if m.Patch != nil {
		ps = append(ps, m.Patch.Params()...)
	}
	for _, p := range []*nn.Param{m.CLS, m.PosEmb} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// HeadParams returns the parameters above the encoder layers (final LayerNorm,
// pooler or pre-classifier, classifier).
func (m *Model) HeadParams() []*nn.Param {
	var ps []*nn.Param
	if m.FinalLN != nil {
		ps = append(ps, m.FinalLN.Params()...)
	}
	for _, l := range []*nn.Linear{m.Pooler, m.PreClassifier, m.Classifier} {
		if l != nil {
			ps = append(ps, l.Params()...)
		}
	}
	return ps
}

// Params returns every parameter, named as in Hugging Face checkpoints.
func (m *Model) Params() []*nn.Param {
	ps := m.EmbeddingParams()
	for _, b := range m.Blocks {
		ps = append(ps, b.Params()...)
	}
	return append(ps, m.HeadParams()...)
}

// SetTraining switches every dropout on or off.
func (m *Model) SetTraining(on bool) {
	nn.SetTraining(on, m.EmbDrop, m.HeadDrop)
	for _, b := range m.Blocks {
		b.SetTraining(on)
	}
}

// Embed computes the encoder input [B, T, hidden] and the key mask [B, T] (nil for
// ViT) of a batch.
func (m *Model) Embed(in Input) (*nn.Tensor, *nn.Tensor, error) {
	var (
		x, mask *nn.Tensor
		err     error
	)
	if m.Config.Family == ViT {
		x, err = m.embedImages(in)
	} else {
		x, mask, err = m.embedText(in)
	}
	if err != nil {
		return nil, nil, err
	}
	if x, err = m.EmbDrop.Forward(x); err != nil {
		return nil, nil, fmt.Errorf("embeddings: %w", err)
	}
	return x, mask, nil
}

func (m *Model) embedText(in Input) (*nn.Tensor, *nn.Tensor, error) {
	b := len(in.IDs)
	if b == 0 || in.Pixels != nil {
		return nil, nil, fmt.Errorf("embeddings: a %s model needs token ids (have %d samples, pixels %v)", m.Config.Family, b, in.Pixels != nil)
	}
	t := len(in.IDs[0])
	if t == 0 || t > m.Position.Num() {
		return nil, nil, fmt.Errorf("embeddings: sequence length %d outside [1,%d]", t, m.Position.Num())
	}
	ids := make([]int, 0, b*t)
	types := make([]int, b*t)
	pos := make([]int, b*t)
	mask := nn.New(b, t)
	for i := range mask.Data {
		mask.Data[i] = 1
	}
	for i, row := range in.IDs {
		if len(row) != t {
			return nil, nil, fmt.Errorf("embeddings: sample %d has %d tokens, sample 0 has %d", i, len(row), t)
		}
		ids = append(ids, row...)
		for j := range row {
			pos[i*t+j] = j
		}
	}
	for name, rows := range map[string][][]int{"token type ids": in.TypeIDs, "attention mask": in.Mask} {
		if rows == nil {
			continue
		}
		if len(rows) != b {
			return nil, nil, fmt.Errorf("embeddings: %d rows of %s for %d samples", len(rows), name, b)
		}
		for i, row := range rows {
			if len(row) != t {
				return nil, nil, fmt.Errorf("embeddings: sample %d has %d %s for %d tokens", i, len(row), name, t)
			}
		}
	}
	if in.TypeIDs != nil {
		if m.TokenType == nil {
			for i, row := range in.TypeIDs {
				if slices.ContainsFunc(row, func(v int) bool { return v != 0 }) {
					return nil, nil, fmt.Errorf("embeddings: sample %d has token type ids but %s has no token types", i, m.Config.Family)
				}
			}
		}
		for i, row := range in.TypeIDs {
			copy(types[i*t:], row)
		}
	}
	if in.Mask != nil {
		for i, row := range in.Mask {
			for j, v := range row {
				if v != 0 && v != 1 {
					return nil, nil, fmt.Errorf("embeddings: attention mask value %d at sample %d position %d", v, i, j)
				}
				mask.Data[i*t+j] = float64(v)
			}
		}
	}
	x, err := m.Word.Forward(ids, b, t)
	if err != nil {
		return nil, nil, fmt.Errorf("embeddings: %w", err)
	}
	p, err := m.Position.Forward(pos, b, t)
	if err != nil {
		return nil, nil, fmt.Errorf("embeddings: %w", err)
	}
	if err := nn.AddInPlace(x, p); err != nil {
		return nil, nil, err
	}
	if m.TokenType != nil {
		ty, err := m.TokenType.Forward(types, b, t)
		if err != nil {
			return nil, nil, fmt.Errorf("embeddings: %w", err)
		}
		if err := nn.AddInPlace(x, ty); err != nil {
			return nil, nil, err
		}
	}
	if x, err = m.EmbLN.Forward(x); err != nil {
		return nil, nil, fmt.Errorf("embeddings: %w", err)
	}
	m.b, m.t = b, t
	return x, mask, nil
}

func (m *Model) embedImages(in Input) (*nn.Tensor, error) {
	c := &m.Config
	b := len(in.Pixels)
	ch, size, p, h := c.NumChannels, c.ImageSize, c.PatchSize, c.Hidden
	if b == 0 || in.IDs != nil {
		return nil, fmt.Errorf("embeddings: a vit model needs pixels (have %d images, token ids %v)", b, in.IDs != nil)
	}
	g := size / p
	n := g * g
	patches := nn.New(b, n, ch*p*p)
	for i, img := range in.Pixels {
		if len(img) != ch*size*size {
			return nil, fmt.Errorf("embeddings: image %d has %d values, want %d×%d×%d", i, len(img), ch, size, size)
		}
		// Patch (gy, gx) flattened as [channel, row, column], the order of the
		// convolution kernel [hidden, channels, p, p].
		for gy := 0; gy < g; gy++ {
			for gx := 0; gx < g; gx++ {
				dst := patches.Data[(i*n+gy*g+gx)*ch*p*p:]
				k := 0
				for cc := 0; cc < ch; cc++ {
					for r := 0; r < p; r++ {
						src := img[cc*size*size+(gy*p+r)*size+gx*p:]
						copy(dst[k:k+p], src[:p])
						k += p
					}
				}
			}
		}
	}
	pe, err := m.Patch.Forward(patches)
	if err != nil {
		return nil, fmt.Errorf("patch embeddings: %w", err)
	}
	if m.PosEmb.Value.Len() != (n+1)*h || m.CLS.Value.Len() != h {
		return nil, fmt.Errorf("embeddings: position embeddings %v / class token %v do not fit %d patches of width %d", m.PosEmb.Value.Shape, m.CLS.Value.Shape, n, h)
	}
	x := nn.New(b, n+1, h)
	pos := m.PosEmb.Value.Data
	for i := 0; i < b; i++ {
		row := x.Data[i*(n+1)*h : (i+1)*(n+1)*h]
		copy(row[:h], m.CLS.Value.Data)
		copy(row[h:], pe.Data[i*n*h:(i+1)*n*h])
		for j := range row {
			row[j] += pos[j]
		}
	}
	m.b, m.t, m.nPatch = b, n+1, n
	return x, nil
}

// EmbedBackward propagates the gradient of the encoder input into the embedding
// parameters.
func (m *Model) EmbedBackward(dx *nn.Tensor) error {
	dx, err := m.EmbDrop.Backward(dx)
	if err != nil {
		return fmt.Errorf("embeddings: %w", err)
	}
	if m.Config.Family == ViT {
		b, t, h := m.b, m.t, m.Config.Hidden
		if dx.Len() != b*t*h {
			return fmt.Errorf("embeddings: gradient %v for input [%d %d %d]", dx.Shape, b, t, h)
		}
		dpe := nn.New(b, m.nPatch, h)
		pg, cg := m.PosEmb.EnsureGrad().Data, m.CLS.EnsureGrad().Data
		for i := 0; i < b; i++ {
			row := dx.Data[i*t*h : (i+1)*t*h]
			for j, v := range row {
				pg[j] += v
			}
			for j := 0; j < h; j++ {
				cg[j] += row[j]
			}
			copy(dpe.Data[i*m.nPatch*h:], row[h:])
		}
		if _, err := m.Patch.Backward(dpe); err != nil {
			return fmt.Errorf("patch embeddings: %w", err)
		}
		return nil
	}
	if dx, err = m.EmbLN.Backward(dx); err != nil {
		return fmt.Errorf("embeddings: %w", err)
	}
	for _, e := range []*nn.Embedding{m.Word, m.Position, m.TokenType} {
		if e == nil {
			continue
		}
		if err := e.Backward(dx); err != nil {
			return fmt.Errorf("embeddings: %w", err)
		}
	}
	return nil
}

// Head maps the last encoder output [B, T, hidden] to logits [B, labels] from the
// first token.
func (m *Model) Head(x *nn.Tensor) (*nn.Tensor, error) {
	cls, t, err := FirstToken(x)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	m.t = t
	for _, mod := range m.headModules() {
		if cls, err = mod.Forward(cls); err != nil {
			return nil, fmt.Errorf("head: %w", err)
		}
	}
	return cls, nil
}

// HeadBackward propagates the logits' gradient to the last encoder output.
func (m *Model) HeadBackward(dlogits *nn.Tensor) (*nn.Tensor, error) {
	mods := m.headModules()
	g := dlogits
	var err error
	for i := len(mods) - 1; i >= 0; i-- {
		if g, err = mods[i].Backward(g); err != nil {
			return nil, fmt.Errorf("head: %w", err)
		}
	}
	return FirstTokenBackward(g, m.t), nil
}

// FirstToken returns the first token's row of each sequence of x [B, T, H]
// as a [B, H] tensor (the CLS input of every classification head), and T.
func FirstToken(x *nn.Tensor) (*nn.Tensor, int, error) {
	if len(x.Shape) != 3 {
		return nil, 0, fmt.Errorf("input %v, want [batch, seq, hidden]", x.Shape)
	}
	b, t, h := x.Shape[0], x.Shape[1], x.Shape[2]
	cls := nn.New(b, h)
	for i := 0; i < b; i++ {
		copy(cls.Data[i*h:(i+1)*h], x.Data[i*t*h:i*t*h+h])
	}
	return cls, t, nil
}

// FirstTokenBackward is FirstToken's backward pass: the gradient g [B, H] of
// the first tokens placed into a zero [B, t, H] gradient of the sequence.
func FirstTokenBackward(g *nn.Tensor, t int) *nn.Tensor {
	b, h := g.Rows(), g.Cols()
	dx := nn.New(b, t, h)
	for i := 0; i < b; i++ {
		copy(dx.Data[i*t*h:i*t*h+h], g.Data[i*h:(i+1)*h])
	}
	return dx
}

func (m *Model) headModules() []nn.Module {
	var mods []nn.Module
	switch {
	case m.FinalLN != nil:
		mods = append(mods, m.FinalLN)
	case m.Pooler != nil:
		mods = append(mods, m.Pooler, m.headAct)
	case m.PreClassifier != nil:
		mods = append(mods, m.PreClassifier, m.headAct)
	}
	return append(mods, m.HeadDrop, m.Classifier)
}

// Forward returns the logits [B, labels] of a batch.
func (m *Model) Forward(in Input) (*nn.Tensor, error) {
	x, err := m.Encode(in)
	if err != nil {
		return nil, err
	}
	return m.Head(x)
}

// Encode runs the embeddings and the encoder layers on a batch: the last
// layer's output [B, T, hidden], before any head (the input of Head, or of
// another head such as a masked-language-model one).
func (m *Model) Encode(in Input) (*nn.Tensor, error) {
	x, mask, err := m.Embed(in)
	if err != nil {
		return nil, err
	}
	for i, b := range m.Blocks {
		if x, err = b.Forward(x, mask); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return x, nil
}

// Backward propagates the gradient of the loss with respect to the logits of the
// last Forward and accumulates every parameter's gradient.
func (m *Model) Backward(dlogits *nn.Tensor) error {
	dx, err := m.HeadBackward(dlogits)
	if err != nil {
		return err
	}
	return m.EncodeBackward(dx)
}

// EncodeBackward propagates the gradient with respect to the output of the
// last Encode through the encoder layers and the embeddings, accumulating
// their parameters' gradients.
func (m *Model) EncodeBackward(dx *nn.Tensor) error {
	var err error
	for i := len(m.Blocks) - 1; i >= 0; i-- {
		if dx, err = m.Blocks[i].Backward(dx); err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return m.EmbedBackward(dx)
}

// KeepLayers keeps the bottom n encoder layers (the depth pruning of proxy
// generation) and updates Config.Layers.
func (m *Model) KeepLayers(n int) error {
	if n < 0 || n > len(m.Blocks) {
		return fmt.Errorf("keep layers: %d outside [0,%d]", n, len(m.Blocks))
	}
	m.Blocks = m.Blocks[:n]
	m.Config.Layers = n
	return nil
}

// SetActivation replaces the FFN activation of every layer ("gelu" or "relu") and
// updates Config.HiddenAct.
func (m *Model) SetActivation(name string) error {
	if name != "gelu" && name != "relu" {
		return fmt.Errorf("set activation: %q is not gelu or relu", name)
	}
	for _, b := range m.Blocks {
		if b.FFN == nil {
			continue
		}
		act, err := nn.NewActivation(name)
		if err != nil {
			return fmt.Errorf("set activation: %w", err)
		}
		b.FFN.Act = act
	}
	m.Config.HiddenAct = name
	return nil
}

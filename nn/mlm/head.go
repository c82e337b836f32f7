package mlm

import (
	"fmt"
	"math/rand/v2"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
)

// headNames are the Hugging Face names of a family's masked-language-model
// head: the transform (dense, LayerNorm) and the output bias; the decoder
// weight is the word embedding table (tied) and is not stored.
type headNames struct{ dense, ln, bias string }

func namesOf(f model.Family) (headNames, error) {
	switch f {
	case model.BERT: // BertForMaskedLM's cls.predictions
		return headNames{"cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias"}, nil
	case model.DistilBERT: // DistilBertForMaskedLM
		return headNames{"vocab_transform", "vocab_layer_norm", "vocab_projector.bias"}, nil
	default:
		return headNames{}, fmt.Errorf("mlm: a %s model has no masked-language-model head (bert or distilbert)", f)
	}
}

// Head is the masked-language-model head of a BERT or DistilBERT encoder,
// laid out as Hugging Face's BertForMaskedLM (cls.predictions.*) or
// DistilBertForMaskedLM (vocab_*): a dense layer of the hidden width, GELU,
// LayerNorm, then the decoder logits = h·Eᵀ + b over the vocabulary, whose
// weight E is the encoder's word embedding table (tied, as in BERT: its
// gradient accumulates into the table's).
type Head struct {
	// Dense is the transform's dense layer [hidden, hidden].
	Dense *nn.Linear
	// LN is the transform's LayerNorm.
	LN *nn.LayerNorm
	// Bias is the decoder's output bias [vocab].
	Bias *nn.Param
	// Word is the tied decoder weight: the model's word embedding table.
	Word *nn.Param

	act nn.GeLU
	h   *nn.Tensor // the transform's output, cached for Backward
}

// NewHead returns the masked-language-model head of m (BERT or
// DistilBERT), initialised as BERT initialises it (N(0, 0.02²) dense
// weight, zero biases, unit LayerNorm) from rng.
func NewHead(m *model.Model, rng *rand.Rand) (*Head, error) {
	names, err := namesOf(m.Config.Family)
	if err != nil {
		return nil, err
	}
	if m.Word == nil {
		return nil, fmt.Errorf("mlm: the %s model has no word embeddings", m.Config.Family)
	}
	h := m.Config.Hidden
	hd := &Head{Dense: nn.NewLinear(names.dense, h, h, true, nil), LN: nn.NewLayerNorm(names.ln, h, m.Config.LayerNormEps),
		Bias: nn.NewParam(names.bias, m.Word.Num()), Word: m.Word.Table}
	hd.Bias.NoDecay = true
	nn.InitNormal(hd.Dense.W.Value, 0.02, rng)
	return hd, nil
}

// Params returns the head's own parameters (not the tied word table).
func (hd *Head) Params() []*nn.Param {
	return append(append(hd.Dense.Params(), hd.LN.Params()...), hd.Bias)
}

// Forward maps the encoder outputs x [N, hidden] of the masked positions to
// logits over the vocabulary [N, vocab].
func (hd *Head) Forward(x *nn.Tensor) (*nn.Tensor, error) {
	y, err := hd.Dense.Forward(x)
	if err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	if y, err = hd.act.Forward(y); err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	if y, err = hd.LN.Forward(y); err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	logits, err := nn.MatMul(y, hd.Word.Value, false, true)
	if err != nil {
		return nil, fmt.Errorf("mlm head decoder: %w", err)
	}
	v := hd.Bias.Value.Data
	if logits.Cols() != len(v) {
		return nil, fmt.Errorf("mlm head: %d logits a row, %d biases", logits.Cols(), len(v))
	}
	for r := 0; r < logits.Rows(); r++ {
		row := logits.Data[r*len(v) : (r+1)*len(v)]
		for j := range row {
			row[j] += v[j]
		}
	}
	hd.h = y
	return logits, nil
}

// Backward accumulates the gradients of the head and of the tied word
// table from the logits' gradient and returns the gradient of the encoder
// outputs [N, hidden].
func (hd *Head) Backward(dlogits *nn.Tensor) (*nn.Tensor, error) {
	if hd.h == nil {
		return nil, fmt.Errorf("mlm head: backward before forward")
	}
	v := len(hd.Bias.Value.Data)
	if dlogits.Cols() != v || dlogits.Rows() != hd.h.Rows() {
		return nil, fmt.Errorf("mlm head: gradient %v for %d rows of %d logits", dlogits.Shape, hd.h.Rows(), v)
	}
	gb := hd.Bias.EnsureGrad().Data
	for r := 0; r < dlogits.Rows(); r++ {
		for j, g := range dlogits.Data[r*v : (r+1)*v] {
			gb[j] += g
		}
	}
	gw, err := nn.MatMul(dlogits, hd.h, true, false) // [vocab, hidden]
	if err != nil {
		return nil, fmt.Errorf("mlm head decoder: %w", err)
	}
	if err := nn.AddInPlace(hd.Word.EnsureGrad(), gw); err != nil {
		return nil, fmt.Errorf("mlm head decoder: %w", err)
	}
	dh, err := nn.MatMul(dlogits, hd.Word.Value, false, false) // [N, hidden]
	if err != nil {
		return nil, fmt.Errorf("mlm head decoder: %w", err)
	}
	if dh, err = hd.LN.Backward(dh); err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	if dh, err = hd.act.Backward(dh); err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	if dh, err = hd.Dense.Backward(dh); err != nil {
		return nil, fmt.Errorf("mlm head: %w", err)
	}
	return dh, nil
}

package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/selectformer/selectformer/internal/atomicfile"
)

// Family is a Hugging Face model_type supported by this package.
type Family string

// The supported families.
const (
	BERT       Family = "bert"
	DistilBERT Family = "distilbert"
	ViT        Family = "vit"
)

// Config is the architecture of a target model: the fields of a Hugging Face
// config.json that this package uses, under family-independent names.
type Config struct {
	// Family is config.json's model_type.
	Family Family
	// Architectures is config.json's architectures, e.g. ["BertForSequenceClassification"].
	Architectures []string
	// Hidden, Heads, Layers and Intermediate size the encoder (BERT/ViT: hidden_size,
	// num_attention_heads, num_hidden_layers, intermediate_size; DistilBERT: dim,
	// n_heads, n_layers, hidden_dim).
	Hidden, Heads, Layers, Intermediate int
	// VocabSize, MaxPositions and TypeVocabSize size the text embeddings
	// (TypeVocabSize is BERT's type_vocab_size).
	VocabSize, MaxPositions, TypeVocabSize int
	// PadTokenID is the padding token id of text models.
	PadTokenID int
	// LayerNormEps is the LayerNorm epsilon (DistilBERT uses 1e-12, not configurable).
	LayerNormEps float64
	// HiddenAct is the FFN activation: "gelu" (erf) or "relu".
	HiddenAct string
	// HiddenDropout, AttentionDropout and ClassifierDropout are dropout rates
	// (ClassifierDropout is BERT's classifier_dropout, falling back to
	// hidden_dropout_prob, or DistilBERT's seq_classif_dropout).
	HiddenDropout, AttentionDropout, ClassifierDropout float64
	// Labels holds the class names by id (id2label); NumLabels is len(Labels).
	Labels []string
	// ImageSize, PatchSize and NumChannels describe ViT inputs.
	ImageSize, PatchSize, NumChannels int
	// NoQKVBias removes the biases of ViT's query/key/value projections
	// (config.json's qkv_bias=false; BERT and DistilBERT always have them).
	NoQKVBias bool

	// raw keeps every key read from config.json so that Write preserves the ones this
	// package does not interpret.
	raw map[string]json.RawMessage
}

// NumLabels returns the number of classes.
func (c *Config) NumLabels() int { return len(c.Labels) }

// NumPatches returns the number of ViT patches per image.
func (c *Config) NumPatches() int {
	if c.PatchSize <= 0 {
		return 0
	}
	g := c.ImageSize / c.PatchSize
	return g * g
}

// DefaultLabels returns n labels named as Hugging Face names them by default.
func DefaultLabels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "LABEL_" + strconv.Itoa(i)
	}
	return out
}

// Validate checks that the configuration describes a model this package can build.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch c.Family {
	case BERT, DistilBERT, ViT:
	default:
		bad("model_type %q is not one of bert, distilbert, vit", c.Family)
	}
	if c.Hidden <= 0 || c.Heads <= 0 || c.Hidden%c.Heads != 0 {
		bad("hidden size %d is not a positive multiple of %d heads", c.Hidden, c.Heads)
	}
	if c.Layers < 0 || c.Intermediate <= 0 {
		bad("layers %d / intermediate size %d", c.Layers, c.Intermediate)
	}
	if c.LayerNormEps <= 0 {
		bad("layer_norm_eps %g must be positive", c.LayerNormEps)
	}
	if c.HiddenAct != "gelu" && c.HiddenAct != "relu" {
		bad("activation %q is not supported (gelu or relu)", c.HiddenAct)
	}
	if len(c.Labels) == 0 {
		bad("no labels")
	}
	for name, p := range map[string]float64{"hidden dropout": c.HiddenDropout, "attention dropout": c.AttentionDropout, "classifier dropout": c.ClassifierDropout} {
		if p < 0 || p >= 1 {
			bad("%s %g outside [0,1)", name, p)
		}
	}
	if c.NoQKVBias && c.Family != ViT {
		bad("%s models always have query/key/value biases", c.Family)
	}
	switch c.Family {
	case BERT, DistilBERT:
		if c.VocabSize <= 0 || c.MaxPositions <= 0 {
			bad("vocab size %d / max positions %d", c.VocabSize, c.MaxPositions)
		}
		if c.Family == BERT && c.TypeVocabSize <= 0 {
			bad("type_vocab_size %d", c.TypeVocabSize)
		}
		if c.PadTokenID < 0 || c.PadTokenID >= c.VocabSize {
			bad("pad_token_id %d outside the vocabulary of %d", c.PadTokenID, c.VocabSize)
		}
	case ViT:
		if c.PatchSize <= 0 || c.ImageSize <= 0 || c.ImageSize%c.PatchSize != 0 || c.NumChannels <= 0 {
			bad("image size %d, patch size %d, channels %d", c.ImageSize, c.PatchSize, c.NumChannels)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model config: %w", err)
	}
	return nil
}

// ParseConfig decodes a Hugging Face config.json.
func ParseConfig(b []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	c := &Config{raw: raw}
	var errs []error
	get := func(key string, dst any) bool {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			return false
		}
		if err := json.Unmarshal(v, dst); err != nil {
			errs = append(errs, fmt.Errorf("key %q: %w", key, err))
			return false
		}
		return true
	}
	var mt string
	get("model_type", &mt)
	c.Family = Family(mt)
	get("architectures", &c.Architectures)
	get("vocab_size", &c.VocabSize)
	get("max_position_embeddings", &c.MaxPositions)
	get("pad_token_id", &c.PadTokenID)
	switch c.Family {
	case DistilBERT:
		c.Hidden, c.Heads, c.Layers, c.Intermediate = 768, 12, 6, 3072
		c.HiddenAct, c.HiddenDropout, c.AttentionDropout, c.ClassifierDropout = "gelu", 0.1, 0.1, 0.2
		get("dim", &c.Hidden)
		get("n_heads", &c.Heads)
		get("n_layers", &c.Layers)
		get("hidden_dim", &c.Intermediate)
		get("activation", &c.HiddenAct)
		get("dropout", &c.HiddenDropout)
		get("attention_dropout", &c.AttentionDropout)
		get("seq_classif_dropout", &c.ClassifierDropout)
		c.LayerNormEps = 1e-12
		var sin bool
		if get("sinusoidal_pos_embds", &sin) && sin {
			errs = append(errs, errors.New("sinusoidal_pos_embds=true is not supported"))
		}
	default:
		c.LayerNormEps, c.HiddenAct = 1e-12, "gelu"
		get("hidden_size", &c.Hidden)
		get("num_attention_heads", &c.Heads)
		get("num_hidden_layers", &c.Layers)
		get("intermediate_size", &c.Intermediate)
		get("hidden_act", &c.HiddenAct)
		get("layer_norm_eps", &c.LayerNormEps)
		get("hidden_dropout_prob", &c.HiddenDropout)
		get("attention_probs_dropout_prob", &c.AttentionDropout)
		c.ClassifierDropout = c.HiddenDropout
		get("classifier_dropout", &c.ClassifierDropout)
		c.TypeVocabSize = 2
		get("type_vocab_size", &c.TypeVocabSize)
		var pet string
		if get("position_embedding_type", &pet) && pet != "absolute" {
			errs = append(errs, fmt.Errorf("position_embedding_type %q is not supported", pet))
		}
		if c.Family == ViT {
			c.ImageSize, c.PatchSize, c.NumChannels = 224, 16, 3
			get("image_size", &c.ImageSize)
			get("patch_size", &c.PatchSize)
			get("num_channels", &c.NumChannels)
			qkv := true
			get("qkv_bias", &qkv)
			c.NoQKVBias = !qkv
			c.ClassifierDropout = 0
		}
	}
	var id2label map[string]string
	if get("id2label", &id2label) && len(id2label) > 0 {
		c.Labels = make([]string, len(id2label))
		for k, v := range id2label {
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(id2label) {
				errs = append(errs, fmt.Errorf("id2label key %q is not an id in [0,%d)", k, len(id2label)))
				continue
			}
			c.Labels[i] = v
		}
	} else {
		n := 2
		get("num_labels", &n)
		if n <= 0 {
			errs = append(errs, fmt.Errorf("num_labels %d", n))
			n = 0
		}
		c.Labels = DefaultLabels(n)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadConfig reads and decodes a config.json file.
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read model config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// architecture returns the Hugging Face class of a sequence/image classifier.
func (c *Config) architecture() string {
	switch c.Family {
	case BERT:
		return "BertForSequenceClassification"
	case DistilBERT:
		return "DistilBertForSequenceClassification"
	default:
		return "ViTForImageClassification"
	}
}

// MarshalJSON encodes the configuration as a Hugging Face config.json with the
// family's key names; keys read by ParseConfig and not interpreted are kept.
func (c *Config) MarshalJSON() ([]byte, error) {
	out := map[string]any{}
	for k, v := range c.raw {
		out[k] = v
	}
	id2label := map[string]string{}
	label2id := map[string]int{}
	for i, l := range c.Labels {
		id2label[strconv.Itoa(i)] = l
		label2id[l] = i
	}
	arch := c.Architectures
	if len(arch) == 0 {
		arch = []string{c.architecture()}
	}
	out["model_type"] = string(c.Family)
	out["architectures"] = arch
	out["id2label"], out["label2id"] = id2label, label2id
	delete(out, "num_labels")
	switch c.Family {
	case DistilBERT:
		out["dim"], out["n_heads"], out["n_layers"], out["hidden_dim"] = c.Hidden, c.Heads, c.Layers, c.Intermediate
		out["activation"], out["dropout"], out["attention_dropout"] = c.HiddenAct, c.HiddenDropout, c.AttentionDropout
		out["seq_classif_dropout"] = c.ClassifierDropout
		out["vocab_size"], out["max_position_embeddings"], out["pad_token_id"] = c.VocabSize, c.MaxPositions, c.PadTokenID
		out["sinusoidal_pos_embds"] = false
	default:
		out["hidden_size"], out["num_attention_heads"], out["num_hidden_layers"] = c.Hidden, c.Heads, c.Layers
		out["intermediate_size"], out["hidden_act"], out["layer_norm_eps"] = c.Intermediate, c.HiddenAct, c.LayerNormEps
		out["hidden_dropout_prob"], out["attention_probs_dropout_prob"] = c.HiddenDropout, c.AttentionDropout
		if c.Family == BERT {
			out["vocab_size"], out["max_position_embeddings"], out["pad_token_id"] = c.VocabSize, c.MaxPositions, c.PadTokenID
			out["type_vocab_size"], out["position_embedding_type"] = c.TypeVocabSize, "absolute"
			if c.ClassifierDropout != c.HiddenDropout {
				out["classifier_dropout"] = c.ClassifierDropout
			}
		} else {
			out["image_size"], out["patch_size"], out["num_channels"] = c.ImageSize, c.PatchSize, c.NumChannels
			out["qkv_bias"] = !c.NoQKVBias
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode model config: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteConfig writes c as a config.json file (owner-only, mode 0600).
func WriteConfig(path string, c *Config) error {
	b, err := c.MarshalJSON()
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write model config: %w", err)
	}
	return nil
}

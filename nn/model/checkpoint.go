package model

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// File names of a Hugging Face model directory.
const (
	WeightsFile = "model.safetensors"
	ConfigFile  = "config.json"
)

// LoadOptions controls how a checkpoint is matched to the model.
type LoadOptions struct {
	// NewHead initialises the classification head (pooler, pre_classifier,
	// classifier) randomly when the checkpoint lacks it, and ignores the tensors of
	// the family's pre-training heads (BERT "cls.*", DistilBERT "vocab_*", ViT
	// "pooler.*"); use it to fine-tune a pre-trained base checkpoint. A head
	// present in the checkpoint with the configured shape is still loaded.
	NewHead bool
	// Seed fixes the random initialisation and dropout masks.
	Seed uint64
}

// Load reads dir/config.json and dir/model.safetensors.
func Load(dir string, opts LoadOptions) (*Model, error) {
	cfg, err := ReadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	m, err := build(*cfg, opts.Seed)
	if err != nil {
		return nil, err
	}
	if opts.NewHead {
		m.initParams(m.headLinearParams())
	}
	if err := m.LoadWeightsFile(filepath.Join(dir, WeightsFile), opts); err != nil {
		return nil, err
	}
	return m, nil
}

// Save writes dir/config.json and dir/model.safetensors (tensors of dtype dt: F32
// as Hugging Face stores them, or F64 for a bit-exact copy), creating dir if needed.
// The directory and files are owner-only (0700, 0600): a model's weights are
// its owner's secret.
func (m *Model) Save(dir string, dt safetensors.DType) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := WriteConfig(filepath.Join(dir, ConfigFile), &m.Config); err != nil {
		return err
	}
	return m.SaveWeightsFile(filepath.Join(dir, WeightsFile), dt)
}

// Tensors converts every parameter to a safetensors tensor of dtype dt under its
// Hugging Face name and shape.
func (m *Model) Tensors(dt safetensors.DType) ([]safetensors.Tensor, error) {
	var out []safetensors.Tensor
	for _, p := range m.Params() {
		t, err := safetensors.FromFloat64s(p.Name, dt, p.Value.Shape, p.Value.Data)
		if err != nil {
			return nil, fmt.Errorf("save model: %w", err)
		}
		out = append(out, t)
	}
	return out, nil
}

// SaveWeightsFile writes the parameters as a safetensors file with the metadata
// {"format": "pt"} that the transformers library expects.
func (m *Model) SaveWeightsFile(path string, dt safetensors.DType) error {
	ts, err := m.Tensors(dt)
	if err != nil {
		return err
	}
	if err := safetensors.WriteFile(path, ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	return nil
}

// LoadWeightsFile reads a safetensors file into the model (see LoadWeights).
func (m *Model) LoadWeightsFile(path string, opts LoadOptions) error {
	f, err := safetensors.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load model weights: %w", err)
	}
	if err := m.LoadWeights(f, opts); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// canonicalName maps a checkpoint name to this package's name: the legacy
// LayerNorm names gamma/beta become weight/bias and a base-model checkpoint's
// names without the family prefix ("embeddings.…", "encoder.…") get it.
func (m *Model) canonicalName(name string, known map[string]*nn.Param) string {
	if strings.HasSuffix(name, ".gamma") {
		name = strings.TrimSuffix(name, ".gamma") + ".weight"
	} else if strings.HasSuffix(name, ".beta") {
		name = strings.TrimSuffix(name, ".beta") + ".bias"
	}
	if _, ok := known[name]; !ok {
		if _, ok := known[prefix(m.Config.Family)+name]; ok {
			return prefix(m.Config.Family) + name
		}
	}
	return name
}

// ignorable reports whether a checkpoint tensor that the model does not use may be
// skipped: buffers always, pre-training heads with NewHead.
func (m *Model) ignorable(name string, opts LoadOptions) bool {
	if strings.HasSuffix(name, "embeddings.position_ids") || strings.HasSuffix(name, "embeddings.token_type_ids") {
		return true
	}
	if !opts.NewHead {
		return false
	}
	switch m.Config.Family {
	case BERT:
		return strings.HasPrefix(name, "cls.")
	case DistilBERT:
		return strings.HasPrefix(name, "vocab_transform.") || strings.HasPrefix(name, "vocab_layer_norm.") || strings.HasPrefix(name, "vocab_projector.")
	default:
		return strings.HasPrefix(name, "vit.pooler.") || strings.HasPrefix(name, "pooler.") || name == "vit.embeddings.mask_token" || name == "embeddings.mask_token"
	}
}

// headLinearParams returns the parameters of the pooler, pre-classifier and
// classifier.
func (m *Model) headLinearParams() []*nn.Param {
	var ps []*nn.Param
	for _, l := range []*nn.Linear{m.Pooler, m.PreClassifier, m.Classifier} {
		if l != nil {
			ps = append(ps, l.Params()...)
		}
	}
	return ps
}

// LoadWeights copies the tensors of a safetensors file into the parameters. Every
// problem (missing, unexpected, mis-shaped or undecodable tensor) is reported in one
// error, and on error the model is left unchanged. With opts.NewHead, head
// parameters absent from the file (or of another shape) keep their current values.
func (m *Model) LoadWeights(f *safetensors.File, opts LoadOptions) error {
	params := m.Params()
	known := make(map[string]*nn.Param, len(params))
	for _, p := range params {
		known[p.Name] = p
	}
	head := map[string]bool{}
	if opts.NewHead {
		for _, p := range m.headLinearParams() {
			head[p.Name] = true
		}
	}
	var problems []string
	load := map[*nn.Param]*safetensors.Tensor{}
	source := map[string]string{}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		name := m.canonicalName(t.Name, known)
		p, ok := known[name]
		if !ok {
			if !m.ignorable(t.Name, opts) {
				problems = append(problems, fmt.Sprintf("unexpected tensor %s %s%v", t.Name, t.DType, t.Shape))
			}
			continue
		}
		if prev, dup := source[name]; dup {
			problems = append(problems, fmt.Sprintf("tensors %s and %s both provide %s", prev, t.Name, name))
			continue
		}
		source[name] = t.Name
		if !slices.Equal(t.Shape, p.Value.Shape) {
			if head[name] {
				// A head of another size (e.g. a different number of labels) is replaced.
				continue
			}
			problems = append(problems, fmt.Sprintf("tensor %s has shape %v, want %v", t.Name, t.Shape, p.Value.Shape))
			continue
		}
		if !t.DType.IsFloat() {
			problems = append(problems, fmt.Sprintf("tensor %s has dtype %s, want a floating-point dtype", t.Name, t.DType))
			continue
		}
		if len(t.Data) != t.NumElements()*t.DType.Size() {
			problems = append(problems, fmt.Sprintf("tensor %s %s%v has %d bytes of data", t.Name, t.DType, t.Shape, len(t.Data)))
			continue
		}
		load[p] = t
	}
	for _, p := range params {
		if _, ok := source[p.Name]; !ok && !head[p.Name] {
			problems = append(problems, fmt.Sprintf("missing tensor %s %v", p.Name, p.Value.Shape))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("checkpoint does not match the %s model (%d problems):\n  %s", m.Config.Family, len(problems), strings.Join(problems, "\n  "))
	}
	// Validated above, so the conversions cannot fail; convert one tensor at a
	// time to keep the peak memory near one copy of the weights.
	for p, t := range load {
		v, err := t.Float64s()
		if err != nil {
			return fmt.Errorf("checkpoint tensor %s: %w", t.Name, err)
		}
		copy(p.Value.Data, v)
	}
	return nil
}

package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/selectformer/selectformer/internal/atomicfile"
	"github.com/selectformer/selectformer/internal/strictjson"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// File names of a saved proxy directory.
const (
	ManifestFile = "proxy.json"
	WeightsFile  = "model.safetensors"
	// Format identifies the manifest version.
	Format = "selectformer-proxy/1"
)

// Manifest is the JSON description of a saved proxy: the target architecture, the
// proxy's shape, which modules are MLPs and the fixed-point ranges they were
// validated on. The weights (model parameters under Hugging Face names, MLP
// parameters under their names) are in model.safetensors.
type Manifest struct {
	// Format is Format.
	Format string `json:"format"`
	// Kind is the proxy kind.
	Kind Kind `json:"kind"`
	// Config is the Hugging Face config.json of the backbone (num layers = l).
	Config json.RawMessage `json:"config"`
	// Shape (stored as "phase") and Ablation describe the proxy.
	Shape    Shape    `json:"phase"`
	Ablation Ablation `json:"ablation"`
	// HeadsKept lists, per layer, the target's heads that were kept.
	HeadsKept [][]int `json:"heads_kept"`
	// FixedPoint is the encoding the MLP ranges were checked against.
	FixedPoint FixedPointSpec `json:"fixed_point"`
	// MLPs describe every MLP of the proxy.
	MLPs []MLPSpec `json:"mlps"`
	// TwoQuadC is the baseline's 2Quad shift (MPCFormer only).
	TwoQuadC float64 `json:"two_quad_c,omitempty"`
	// SqrtEntropy is Proxy.SqrtEntropy.
	SqrtEntropy bool `json:"sqrt_entropy,omitempty"`
	// Criterion is Proxy.Criterion (absent in proxies saved before criteria
	// existed: mlp.DefaultCriterion, the entropy).
	Criterion string `json:"criterion,omitempty"`
}

// FixedPointSpec records a fixed-point encoding (fractional bits, |x| < 2^int_bits).
type FixedPointSpec struct {
	FracBits int `json:"frac_bits"`
	IntBits  int `json:"int_bits"`
}

// MLPSpec describes one MLP of a saved proxy.
type MLPSpec struct {
	// Name is the parameter prefix (weights Name.fc1.weight ... Name.fc2.bias).
	Name string `json:"name"`
	// Module says where it sits: "layer.<i>.attn_softmax", "layer.<i>.attn_layernorm",
	// "final_layernorm" or "softmax_entropy".
	Module string `json:"module"`
	// Kind, In, Hidden and Out describe the network.
	Kind   mlp.Kind `json:"kind"`
	In     int      `json:"in"`
	Hidden int      `json:"hidden"`
	Out    int      `json:"out"`
	// Eps is the LayerNorm epsilon of an InvSqrt MLP.
	Eps float64 `json:"eps,omitempty"`
	// Fill holds the padded-input values of an attention softmax MLP.
	Fill []float64 `json:"fill,omitempty"`
	// Ranges are the magnitudes measured on its evaluation points after training
	// ex vivo (zero if unknown) and WeightMaxAbs is recomputed at save time.
	Ranges mlp.Ranges `json:"ranges"`
}

// Save writes dir/proxy.json and dir/model.safetensors (F64 tensors, so a loaded
// proxy computes bit-identical results). reports (may be nil) supplies the ex vivo
// ranges of the MLPs, keyed by MLP name.
func (p *Proxy) Save(dir string, reports map[string]mlp.Report) error {
	man, err := p.manifest(reports)
	if err != nil {
		return fmt.Errorf("save proxy: %w", err)
	}
	b, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return fmt.Errorf("save proxy: %w", err)
	}
	var ts []safetensors.Tensor
	for _, q := range p.Params() {
		t, err := safetensors.FromFloat64s(q.Name, safetensors.F64, q.Value.Shape, q.Value.Data)
		if err != nil {
			return fmt.Errorf("save proxy: %w", err)
		}
		ts = append(ts, t)
	}
	// The proxy is the model owner's secret: owner-only directory and files.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save proxy: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save proxy: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt", "selectformer": Format}); err != nil {
		return fmt.Errorf("save proxy: %w", err)
	}
	return nil
}

func (p *Proxy) manifest(reports map[string]mlp.Report) (*Manifest, error) {
	cfg, err := p.Model.Config.MarshalJSON()
	if err != nil {
		return nil, err
	}
	man := &Manifest{Format: Format, Kind: p.Kind, Config: cfg, Shape: p.Shape, Ablation: p.Ablation,
		HeadsKept: p.HeadsKept, FixedPoint: FixedPointSpec{FracBits: 16, IntBits: 15}, TwoQuadC: p.TwoQuadC,
		SqrtEntropy: p.SqrtEntropy, Criterion: p.Criterion}
	add := func(m *mlp.MLP, module string) {
		if m == nil {
			return
		}
		n := m.FC1.W.Name
		name := n[:len(n)-len(".fc1.weight")]
		spec := MLPSpec{Name: name, Module: module, Kind: m.Kind, In: m.In(), Hidden: m.Hidden(), Out: m.Out(), Eps: m.Eps, Fill: m.Fill}
		if r, ok := reports[name]; ok {
			spec.Ranges = r.Ranges
		}
		// Ex vivo reports are keyed by the data-set MLP; in-vivo copies share the name.
		spec.Ranges.WeightMaxAbs = 0
		for _, q := range m.Params() {
			for _, v := range q.Value.Data {
				spec.Ranges.WeightMaxAbs = max(spec.Ranges.WeightMaxAbs, math.Abs(v))
			}
		}
		man.MLPs = append(man.MLPs, spec)
	}
	for i := range p.AttnMLP {
		add(p.AttnMLP[i], fmt.Sprintf("layer.%d.attn_softmax", i))
		add(p.LNMLP[i], fmt.Sprintf("layer.%d.attn_layernorm", i))
	}
	add(p.FinalLNMLP, "final_layernorm")
	add(p.Entropy, "softmax_entropy")
	return man, nil
}

// DecodeManifest parses and validates a proxy.json (unknown fields are errors).
func DecodeManifest(b []byte) (*Manifest, *model.Config, error) {
	var man Manifest
	if err := strictjson.Unmarshal(b, &man); err != nil {
		return nil, nil, fmt.Errorf("proxy manifest: %w", err)
	}
	if man.Format != Format {
		return nil, nil, fmt.Errorf("proxy manifest: format %q, want %q", man.Format, Format)
	}
	if man.Kind != SelectFormer && man.Kind != MPCFormer {
		return nil, nil, fmt.Errorf("proxy manifest: kind %q", man.Kind)
	}
	cfg, err := model.ParseConfig(man.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy manifest: %w", err)
	}
	var errs []error
	if cfg.Layers != man.Shape.Layers || cfg.Layers <= 0 || cfg.Layers > 1024 || len(man.HeadsKept) != cfg.Layers {
		errs = append(errs, fmt.Errorf("config has %d layers, phase %d, head lists %d", cfg.Layers, man.Shape.Layers, len(man.HeadsKept)))
	}
	for i, hk := range man.HeadsKept {
		if len(hk) != man.Shape.Heads || len(hk) == 0 {
			errs = append(errs, fmt.Errorf("layer %d keeps %d heads, phase says %d", i, len(hk), man.Shape.Heads))
		}
		for _, h := range hk {
			if h < 0 || h >= cfg.Heads {
				errs = append(errs, fmt.Errorf("layer %d keeps head %d of %d", i, h, cfg.Heads))
			}
		}
	}
	if man.Kind == MPCFormer && !(man.TwoQuadC > 0) {
		errs = append(errs, fmt.Errorf("2Quad shift %g", man.TwoQuadC))
	}
	seen := map[string]bool{}
	for _, s := range man.MLPs {
		if !s.Kind.Valid() || s.In <= 0 || s.Hidden <= 0 || s.Hidden > maxMLPHidden || s.In > maxMLPHidden || s.Out != s.Kind.OutWidth(s.In) || seen[s.Module] || s.Name == "" {
			errs = append(errs, fmt.Errorf("mlp %q: kind %q, shape %d→%d→%d", s.Name, s.Kind, s.In, s.Hidden, s.Out))
			continue
		}
		seen[s.Module] = true
		if s.Kind == mlp.AttnSoftmax && len(s.Fill) != s.In {
			errs = append(errs, fmt.Errorf("mlp %q: %d fill values for width %d", s.Name, len(s.Fill), s.In))
		}
	}
	if man.SqrtEntropy && !seen["softmax_entropy"] {
		errs = append(errs, fmt.Errorf("sqrt_entropy set without an entropy MLP"))
	}
	if c, err := mlp.LookupCriterion(man.Criterion); err != nil {
		errs = append(errs, err)
	} else if man.SqrtEntropy && !c.Sqrt {
		errs = append(errs, fmt.Errorf("sqrt_entropy set for criterion %q, which has no √ calibration", c.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, fmt.Errorf("proxy manifest: %w", err)
	}
	return &man, cfg, nil
}

// Load reads a proxy saved by Save.
func Load(dir string) (*Proxy, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("load proxy: %w", err)
	}
	man, cfg, err := DecodeManifest(b)
	if err != nil {
		return nil, fmt.Errorf("load proxy %s: %w", dir, err)
	}
	f, err := safetensors.ReadFile(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, fmt.Errorf("load proxy: %w", err)
	}
	p, err := fromManifest(man, cfg)
	if err != nil {
		return nil, fmt.Errorf("load proxy %s: %w", dir, err)
	}
	if err := loadParams(p.Params(), f); err != nil {
		return nil, fmt.Errorf("load proxy %s: %w", dir, err)
	}
	return p, nil
}

// fromManifest builds an untrained proxy with the manifest's structure.
func fromManifest(man *Manifest, cfg *model.Config) (*Proxy, error) {
	m, err := model.New(*cfg, 1)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Kind: man.Kind, Shape: man.Shape, Ablation: man.Ablation, Model: m, HeadsKept: man.HeadsKept, TwoQuadC: man.TwoQuadC,
		SqrtEntropy: man.SqrtEntropy, Criterion: man.Criterion}
	if p.Criterion == "" {
		p.Criterion = mlp.DefaultCriterion
	}
	if err := p.shape(); err != nil {
		return nil, err
	}
	if p.Kind == MPCFormer {
		p.installQuad()
	}
	rng := nn.NewRNG(1)
	for _, s := range man.MLPs {
		e, err := mlp.New(s.Kind, s.Name, s.In, s.Hidden, s.Eps, rng)
		if err != nil {
			return nil, err
		}
		if s.Kind == mlp.AttnSoftmax {
			copy(e.Fill, s.Fill)
		}
		var i int
		switch {
		case s.Module == "final_layernorm" && s.Kind == mlp.InvSqrt && m.FinalLN != nil:
			p.FinalLNMLP, m.FinalLN.InvSqrt = e, e
		case s.Module == "softmax_entropy" && s.Kind == mlp.SoftmaxEntropy && s.In == cfg.NumLabels():
			p.Entropy = e
		case scan(s.Module, "layer.%d.attn_softmax", &i) && s.Kind == mlp.AttnSoftmax && i >= 0 && i < len(m.Blocks):
			p.AttnMLP[i], m.Blocks[i].Attn.Softmax = e, e
		case scan(s.Module, "layer.%d.attn_layernorm", &i) && s.Kind == mlp.InvSqrt && i >= 0 && i < len(m.Blocks):
			p.LNMLP[i], m.Blocks[i].LN1.InvSqrt = e, e
		default:
			return nil, fmt.Errorf("mlp %q: module %q of kind %s does not fit the model", s.Name, s.Module, s.Kind)
		}
	}
	return p, nil
}

func scan(s, format string, i *int) bool {
	n, err := fmt.Sscanf(s, format, i)
	return err == nil && n == 1 && fmt.Sprintf(format, *i) == s
}

// loadParams copies every tensor into the parameter of the same name; missing,
// extra and mis-shaped tensors are errors.
func loadParams(params []*nn.Param, f *safetensors.File) error {
	var errs []error
	used := map[string]bool{}
	for _, q := range params {
		t, ok := f.Get(q.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("tensor %s missing", q.Name))
			continue
		}
		used[q.Name] = true
		if !slices.Equal(t.Shape, q.Value.Shape) {
			errs = append(errs, fmt.Errorf("tensor %s has shape %v, want %v", q.Name, t.Shape, q.Value.Shape))
			continue
		}
		v, err := t.Float64s()
		if err != nil {
			errs = append(errs, fmt.Errorf("tensor %s: %w", q.Name, err))
			continue
		}
		copy(q.Value.Data, v)
	}
	for _, n := range f.Names() {
		if !used[n] {
			errs = append(errs, fmt.Errorf("unexpected tensor %s", n))
		}
	}
	return errors.Join(errs...)
}

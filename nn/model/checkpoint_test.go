package model

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// hfNames lists, independently of the model code, the Hugging Face parameter names
// and shapes of one-layer classifiers with hidden 8, intermediate 12, 3 labels,
// vocabulary 20, 16 positions, and for ViT 6×6 images of 2 channels in 3×3 patches.
var hfNames = map[Family]map[string][]int{
	BERT: {
		"bert.embeddings.word_embeddings.weight":                 {20, 8},
		"bert.embeddings.position_embeddings.weight":             {16, 8},
		"bert.embeddings.token_type_embeddings.weight":           {2, 8},
		"bert.embeddings.LayerNorm.weight":                       {8},
		"bert.embeddings.LayerNorm.bias":                         {8},
		"bert.encoder.layer.0.attention.self.query.weight":       {8, 8},
		"bert.encoder.layer.0.attention.self.query.bias":         {8},
		"bert.encoder.layer.0.attention.self.key.weight":         {8, 8},
		"bert.encoder.layer.0.attention.self.key.bias":           {8},
		"bert.encoder.layer.0.attention.self.value.weight":       {8, 8},
		"bert.encoder.layer.0.attention.self.value.bias":         {8},
		"bert.encoder.layer.0.attention.output.dense.weight":     {8, 8},
		"bert.encoder.layer.0.attention.output.dense.bias":       {8},
		"bert.encoder.layer.0.attention.output.LayerNorm.weight": {8},
		"bert.encoder.layer.0.attention.output.LayerNorm.bias":   {8},
		"bert.encoder.layer.0.intermediate.dense.weight":         {12, 8},
		"bert.encoder.layer.0.intermediate.dense.bias":           {12},
		"bert.encoder.layer.0.output.dense.weight":               {8, 12},
		"bert.encoder.layer.0.output.dense.bias":                 {8},
		"bert.encoder.layer.0.output.LayerNorm.weight":           {8},
		"bert.encoder.layer.0.output.LayerNorm.bias":             {8},
		"bert.pooler.dense.weight":                               {8, 8},
		"bert.pooler.dense.bias":                                 {8},
		"classifier.weight":                                      {3, 8},
		"classifier.bias":                                        {3},
	},
	DistilBERT: {
		"distilbert.embeddings.word_embeddings.weight":            {20, 8},
		"distilbert.embeddings.position_embeddings.weight":        {16, 8},
		"distilbert.embeddings.LayerNorm.weight":                  {8},
		"distilbert.embeddings.LayerNorm.bias":                    {8},
		"distilbert.transformer.layer.0.attention.q_lin.weight":   {8, 8},
		"distilbert.transformer.layer.0.attention.q_lin.bias":     {8},
		"distilbert.transformer.layer.0.attention.k_lin.weight":   {8, 8},
		"distilbert.transformer.layer.0.attention.k_lin.bias":     {8},
		"distilbert.transformer.layer.0.attention.v_lin.weight":   {8, 8},
		"distilbert.transformer.layer.0.attention.v_lin.bias":     {8},
		"distilbert.transformer.layer.0.attention.out_lin.weight": {8, 8},
		"distilbert.transformer.layer.0.attention.out_lin.bias":   {8},
		"distilbert.transformer.layer.0.sa_layer_norm.weight":     {8},
		"distilbert.transformer.layer.0.sa_layer_norm.bias":       {8},
		"distilbert.transformer.layer.0.ffn.lin1.weight":          {12, 8},
		"distilbert.transformer.layer.0.ffn.lin1.bias":            {12},
		"distilbert.transformer.layer.0.ffn.lin2.weight":          {8, 12},
		"distilbert.transformer.layer.0.ffn.lin2.bias":            {8},
		"distilbert.transformer.layer.0.output_layer_norm.weight": {8},
		"distilbert.transformer.layer.0.output_layer_norm.bias":   {8},
		"pre_classifier.weight":                                   {8, 8},
		"pre_classifier.bias":                                     {8},
		"classifier.weight":                                       {3, 8},
		"classifier.bias":                                         {3},
	},
	ViT: {
		"vit.embeddings.cls_token":                             {1, 1, 8},
		"vit.embeddings.position_embeddings":                   {1, 5, 8},
		"vit.embeddings.patch_embeddings.projection.weight":    {8, 2, 3, 3},
		"vit.embeddings.patch_embeddings.projection.bias":      {8},
		"vit.encoder.layer.0.attention.attention.query.weight": {8, 8},
		"vit.encoder.layer.0.attention.attention.query.bias":   {8},
		"vit.encoder.layer.0.attention.attention.key.weight":   {8, 8},
		"vit.encoder.layer.0.attention.attention.key.bias":     {8},
		"vit.encoder.layer.0.attention.attention.value.weight": {8, 8},
		"vit.encoder.layer.0.attention.attention.value.bias":   {8},
		"vit.encoder.layer.0.attention.output.dense.weight":    {8, 8},
		"vit.encoder.layer.0.attention.output.dense.bias":      {8},
		"vit.encoder.layer.0.intermediate.dense.weight":        {12, 8},
		"vit.encoder.layer.0.intermediate.dense.bias":          {12},
		"vit.encoder.layer.0.output.dense.weight":              {8, 12},
		"vit.encoder.layer.0.output.dense.bias":                {8},
		"vit.encoder.layer.0.layernorm_before.weight":          {8},
		"vit.encoder.layer.0.layernorm_before.bias":            {8},
		"vit.encoder.layer.0.layernorm_after.weight":           {8},
		"vit.encoder.layer.0.layernorm_after.bias":             {8},
		"vit.layernorm.weight":                                 {8},
		"vit.layernorm.bias":                                   {8},
		"classifier.weight":                                    {3, 8},
		"classifier.bias":                                      {3},
	},
}

// hfConfigs are config.json files as transformers writes them (abridged).
var hfConfigs = map[Family]string{
	BERT: `{"architectures": ["BertForSequenceClassification"], "attention_probs_dropout_prob": 0.1,
 "classifier_dropout": null, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 8,
 "id2label": {"0": "neg", "1": "pos", "2": "other"}, "label2id": {"neg": 0, "pos": 1, "other": 2},
 "initializer_range": 0.02, "intermediate_size": 12, "layer_norm_eps": 1e-12, "max_position_embeddings": 16,
 "model_type": "bert", "num_attention_heads": 2, "num_hidden_layers": 1, "pad_token_id": 0,
 "position_embedding_type": "absolute", "torch_dtype": "float32", "transformers_version": "4.44.0",
 "type_vocab_size": 2, "use_cache": true, "vocab_size": 20}`,
	DistilBERT: `{"activation": "gelu", "architectures": ["DistilBertForSequenceClassification"], "attention_dropout": 0.1,
 "dim": 8, "dropout": 0.1, "hidden_dim": 12, "id2label": {"0": "neg", "1": "pos", "2": "other"},
 "label2id": {"neg": 0, "pos": 1, "other": 2}, "initializer_range": 0.02, "max_position_embeddings": 16,
 "model_type": "distilbert", "n_heads": 2, "n_layers": 1, "pad_token_id": 0, "qa_dropout": 0.1,
 "seq_classif_dropout": 0.2, "sinusoidal_pos_embds": false, "tie_weights_": true, "vocab_size": 20}`,
	ViT: `{"architectures": ["ViTForImageClassification"], "attention_probs_dropout_prob": 0.0, "encoder_stride": 16,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": 8, "id2label": {"0": "neg", "1": "pos", "2": "other"},
 "image_size": 6, "initializer_range": 0.02, "intermediate_size": 12, "label2id": {"neg": 0, "pos": 1, "other": 2},
 "layer_norm_eps": 1e-12, "model_type": "vit", "num_attention_heads": 2, "num_channels": 2,
 "num_hidden_layers": 1, "patch_size": 3, "qkv_bias": true}`,
}

// writeHF writes a checkpoint directory with the given tensors and the family's
// config.json.
func writeHF(t *testing.T, f Family, ts []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(hfConfigs[f]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hfTensors builds random tensors of dtype dt under the reference names.
func hfTensors(t testing.TB, f Family, dt safetensors.DType, seed uint64) ([]safetensors.Tensor, map[string][]float64) {
	t.Helper()
	rng := nn.NewRNG(seed)
	var ts []safetensors.Tensor
	vals := map[string][]float64{}
	for name, shape := range hfNames[f] {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(float32(rng.NormFloat64() * 0.5))
		}
		tt, err := safetensors.FromFloat64s(name, dt, shape, v)
		if err != nil {
			t.Fatal(err)
		}
		back, _ := tt.Float64s()
		vals[name] = back
		ts = append(ts, tt)
	}
	return ts, vals
}

func TestParamNamesMatchHuggingFace(t *testing.T) {
	for f, want := range hfNames {
		cfg := tinyConfig(f)
		cfg.Layers = 1
		m, err := New(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]int{}
		for _, p := range m.Params() {
			got[p.Name] = p.Value.Shape
		}
		for name, shape := range want {
			if !slices.Equal(got[name], shape) {
				t.Errorf("%s: parameter %s has shape %v, want %v", f, name, got[name], shape)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%s: unexpected parameter %s", f, name)
			}
		}
	}
}

func TestLoadHuggingFaceCheckpoint(t *testing.T) {
	for _, f := range []Family{BERT, DistilBERT, ViT} {
		for _, dt := range []safetensors.DType{safetensors.F32, safetensors.F16, safetensors.BF16} {
			t.Run(fmt.Sprintf("%s/%s", f, dt), func(t *testing.T) {
				ts, vals := hfTensors(t, f, dt, 5)
				m, err := Load(writeHF(t, f, ts), LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if m.Config.Layers != 1 || m.Config.Hidden != 8 || m.Config.Labels[2] != "other" {
					t.Fatalf("config %+v", m.Config)
				}
				for _, p := range m.Params() {
					if !slices.Equal(p.Value.Data, vals[p.Name]) {
						t.Fatalf("%s not loaded exactly", p.Name)
					}
				}
				if _, err := m.Forward(tinyInput(f, 2, 1)); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

func TestLoadVariants(t *testing.T) {
	rename := func(ts []safetensors.Tensor, fn func(string) string) []safetensors.Tensor {
		out := slices.Clone(ts)
		for i := range out {
			out[i].Name = fn(out[i].Name)
		}
		return out
	}
	extra := func(ts []safetensors.Tensor, names ...string) []safetensors.Tensor {
		for _, n := range names {
			e, err := safetensors.FromFloat64s(n, safetensors.F32, []int{2}, []float64{1, 2})
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, e)
		}
		return ts
	}
	drop := func(ts []safetensors.Tensor, prefix string) []safetensors.Tensor {
		return slices.DeleteFunc(slices.Clone(ts), func(x safetensors.Tensor) bool { return strings.HasPrefix(x.Name, prefix) })
	}
	bert, _ := hfTensors(t, BERT, safetensors.F32, 1)
	distil, _ := hfTensors(t, DistilBERT, safetensors.F32, 1)
	vit, _ := hfTensors(t, ViT, safetensors.F32, 1)
	tests := []struct {
		name string
		f    Family
		ts   []safetensors.Tensor
		opts LoadOptions
	}{
		{"legacy gamma/beta", BERT, rename(bert, func(n string) string {
			return strings.NewReplacer("LayerNorm.weight", "LayerNorm.gamma", "LayerNorm.bias", "LayerNorm.beta").Replace(n)
		}), LoadOptions{}},
		{"position_ids buffer", BERT, extra(slices.Clone(bert), "bert.embeddings.position_ids"), LoadOptions{}},
		{"bert pretraining checkpoint", BERT, extra(drop(bert, "classifier."), "cls.predictions.bias", "cls.seq_relationship.bias"), LoadOptions{NewHead: true}},
		{"base model without prefix", BERT, rename(drop(drop(bert, "classifier."), "bert.pooler."), func(n string) string { return strings.TrimPrefix(n, "bert.") }), LoadOptions{NewHead: true}},
		{"distilbert masked-lm checkpoint", DistilBERT, extra(drop(drop(distil, "classifier."), "pre_classifier."), "vocab_transform.bias", "vocab_projector.bias"), LoadOptions{NewHead: true}},
		{"vit in21k checkpoint", ViT, extra(rename(drop(vit, "classifier."), func(n string) string { return strings.TrimPrefix(n, "vit.") }), "pooler.dense.bias"), LoadOptions{NewHead: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Load(writeHF(t, tc.f, tc.ts), tc.opts); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestLoadReportsEveryProblem(t *testing.T) {
	ts, _ := hfTensors(t, BERT, safetensors.F32, 1)
	ts = slices.DeleteFunc(ts, func(x safetensors.Tensor) bool {
		return x.Name == "bert.pooler.dense.bias" || x.Name == "bert.encoder.layer.0.output.dense.weight"
	})
	bad, _ := safetensors.FromFloat64s("bert.encoder.layer.0.output.dense.weight", safetensors.F32, []int{12, 8}, make([]float64, 96))
	extra, _ := safetensors.FromFloat64s("bert.encoder.layer.1.output.dense.bias", safetensors.F32, []int{8}, make([]float64, 8))
	ints := safetensors.Tensor{Name: "bert.pooler.dense.bias", DType: safetensors.I32, Shape: []int{8}, Data: make([]byte, 32)}
	dir := writeHF(t, BERT, append(ts, bad, extra, ints))
	_, err := Load(dir, LoadOptions{})
	if err == nil {
		t.Fatal("mismatched checkpoint loaded")
	}
	for _, want := range []string{
		"bert.encoder.layer.0.output.dense.weight has shape [12 8], want [8 12]",
		"unexpected tensor bert.encoder.layer.1.output.dense.bias",
		"bert.pooler.dense.bias has dtype I32",
		"3 problems",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// A missing tensor.
	ts2, _ := hfTensors(t, DistilBERT, safetensors.F32, 1)
	ts2 = slices.DeleteFunc(ts2, func(x safetensors.Tensor) bool { return x.Name == "classifier.weight" })
	if _, err := Load(writeHF(t, DistilBERT, ts2), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "missing tensor classifier.weight [3 8]") {
		t.Errorf("missing tensor error: %v", err)
	}
}

func TestLoadCorruptFiles(t *testing.T) {
	ts, _ := hfTensors(t, ViT, safetensors.F32, 1)
	dir := writeHF(t, ViT, ts)
	path := filepath.Join(dir, WeightsFile)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"truncated", full[:len(full)-7]},
		{"empty", nil},
		{"garbage header", append([]byte{200, 0, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte("x"), 300)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(dir, LoadOptions{}); err == nil {
				t.Fatal("corrupt checkpoint loaded")
			}
		})
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"model_type": "gpt2"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, LoadOptions{}); err == nil {
		t.Fatal("unsupported model type loaded")
	}
}

func TestSaveLoadIdenticalForward(t *testing.T) {
	for _, f := range []Family{BERT, DistilBERT, ViT} {
		for _, dt := range []safetensors.DType{safetensors.F64, safetensors.F32} {
			t.Run(fmt.Sprintf("%s/%s", f, dt), func(t *testing.T) {
				cfg := tinyConfig(f)
				cfg.HiddenDropout = 0.1
				m, err := New(cfg, 9)
				if err != nil {
					t.Fatal(err)
				}
				for i, p := range m.Params() { // move away from the initialisation
					nn.InitNormal(p.Value, 0.2, nn.NewRNG(uint64(i)))
				}
				dir := t.TempDir()
				if err := m.Save(dir, dt); err != nil {
					t.Fatal(err)
				}
				m2, err := Load(dir, LoadOptions{Seed: 99})
				if err != nil {
					t.Fatal(err)
				}
				if m2.Config.HiddenDropout != 0.1 || !slices.Equal(m2.Config.Labels, cfg.Labels) {
					t.Fatalf("config did not round-trip: %+v", m2.Config)
				}
				in := tinyInput(f, 3, 4)
				a, err := m.Forward(in)
				if err != nil {
					t.Fatal(err)
				}
				b, err := m2.Forward(in)
				if err != nil {
					t.Fatal(err)
				}
				tol := 0.0
				if dt == safetensors.F32 {
					tol = 1e-5
				}
				for i := range a.Data {
					if math.Abs(a.Data[i]-b.Data[i]) > tol {
						t.Fatalf("logit %d: %g before saving, %g after loading", i, a.Data[i], b.Data[i])
					}
				}
			})
		}
	}
}

func TestConfigRoundTripKeepsUnknownKeys(t *testing.T) {
	for f, text := range hfConfigs {
		c, err := ParseConfig([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: reparse: %v\n%s", f, err, b)
		}
		c.raw, c2.raw = nil, nil
		if fmt.Sprintf("%+v", c) != fmt.Sprintf("%+v", c2) {
			t.Errorf("%s: config changed:\n%+v\n%+v", f, c, c2)
		}
		if !bytes.Contains(b, []byte(`"initializer_range": 0.02`)) {
			t.Errorf("%s: unknown key dropped:\n%s", f, b)
		}
	}
	bad := []string{`{`, `{"model_type": "bert", "hidden_size": 10, "num_attention_heads": 3}`, `{"model_type": "vit", "id2label": {"x": "a"}}`,
		`{"model_type": "bert", "hidden_act": "swish"}`, `{"model_type": "distilbert", "sinusoidal_pos_embds": true}`, `{"model_type": "bert", "hidden_size": "big"}`}
	for _, b := range bad {
		if _, err := ParseConfig([]byte(b)); err == nil {
			t.Errorf("config %s accepted", b)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, c := range hfConfigs {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("parsed config fails validation: %v", err)
		}
		if _, err := c.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	})
}

// fuzzConfig is the smallest DistilBERT: FuzzLoadWeights's base checkpoint
// is a few hundred bytes, so an input the fuzzer finds interesting is
// minimized in milliseconds (the heavy reference checkpoints stay in the
// unit tests above, out of the fuzz loop).
func fuzzConfig() Config {
	return Config{Family: DistilBERT, Hidden: 2, Heads: 1, Layers: 1, Intermediate: 2, LayerNormEps: 1e-12, HiddenAct: "gelu",
		Labels: []string{"a", "b"}, VocabSize: 3, MaxPositions: 2}
}

// fuzzFile builds safetensors bytes from tensors without validating them, so
// that mismatched dtypes, shapes and data lengths reach Parse and LoadWeights.
func fuzzFile(ts []safetensors.Tensor) []byte {
	type entry struct {
		DType   string `json:"dtype"`
		Shape   []int  `json:"shape"`
		Offsets [2]int `json:"data_offsets"`
	}
	hdr := map[string]entry{}
	var data []byte
	for _, t := range ts {
		hdr[t.Name] = entry{string(t.DType), t.Shape, [2]int{len(data), len(data) + len(t.Data)}}
		data = append(data, t.Data...)
	}
	h, _ := json.Marshal(hdr)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return append(append(out, h...), data...)
}

// FuzzLoadWeights loads a checkpoint of fuzzConfig in which one tensor (pick
// mod the count; the count itself appends one) gets the fuzzer's name,
// dtype, shape (one dimension per byte) and data where mode says so (bit 0
// name, 1 dtype, 2 shape, 3 data, 4 drop it; bits 6-7 choose the dtype of
// the others: F16, BF16, F32, F64). A checkpoint that loads must give a
// model whose forward pass works.
func FuzzLoadWeights(f *testing.F) {
	cfg := fuzzConfig()
	ref, err := New(cfg, 1)
	if err != nil {
		f.Fatal(err)
	}
	dtypes := []safetensors.DType{safetensors.F16, safetensors.BF16, safetensors.F32, safetensors.F64}
	bases := make([][]safetensors.Tensor, len(dtypes))
	for i, dt := range dtypes {
		if bases[i], err = ref.Tensors(dt); err != nil {
			f.Fatal(err)
		}
	}
	n := uint8(len(bases[0]))
	in := Input{IDs: [][]int{{1, 2}}, Mask: [][]int{{1, 1}}}
	// The unmodified base checkpoints load and run: the fuzzer starts from
	// inputs that reach the forward pass.
	for i, b := range bases {
		file, err := safetensors.Parse(fuzzFile(b))
		if err != nil {
			f.Fatal(err)
		}
		m, _ := New(cfg, 2)
		if err := m.LoadWeights(file, LoadOptions{}); err != nil {
			f.Fatalf("base %s: %v", dtypes[i], err)
		}
		if _, err := m.Forward(in); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(uint8(0), uint8(0), "", "", []byte(nil), []byte(nil))
	f.Add(uint8(2), uint8(3<<6|1), "distilbert.embeddings.LayerNorm.gamma", "", []byte(nil), []byte(nil))
	f.Add(uint8(5), uint8(2), "", "I32", []byte(nil), []byte(nil))
	f.Add(uint8(7), uint8(4|8), "", "", []byte{2, 1}, []byte{0, 0x7c, 0, 0xfc})
	f.Add(uint8(9), uint8(16), "", "", []byte(nil), []byte(nil))
	f.Add(n, uint8(1|2|4|8), "vocab_projector.bias", "F32", []byte{3}, make([]byte, 12))
	f.Add(uint8(1), uint8(8), "", "", []byte(nil), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, pick, mode uint8, name, dtype string, shape, data []byte) {
		if len(name) > 96 || len(dtype) > 8 || len(data) > 128 {
			return // bounded inputs keep the minimization of a new find short
		}
		base := bases[mode>>6]
		ts := make([]safetensors.Tensor, len(base), len(base)+1)
		copy(ts, base)
		i := int(pick) % (len(ts) + 1)
		if i == len(ts) {
			ts = append(ts, safetensors.Tensor{Name: "extra", DType: safetensors.F32})
		}
		tt := &ts[i]
		if mode&1 != 0 {
			tt.Name = name
		}
		if mode&2 != 0 {
			tt.DType = safetensors.DType(dtype)
		}
		if mode&4 != 0 && len(shape) <= 4 {
			tt.Shape = make([]int, len(shape))
			for j, d := range shape {
				tt.Shape[j] = int(d)
			}
		}
		if mode&8 != 0 {
			tt.Data = data
		}
		if mode&16 != 0 {
			ts = append(ts[:i], ts[i+1:]...)
		}
		file, err := safetensors.Parse(fuzzFile(ts))
		if err != nil {
			return
		}
		m, err := New(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.LoadWeights(file, LoadOptions{NewHead: mode&32 != 0}); err != nil {
			return
		}
		if _, err := m.Forward(in); err != nil {
			t.Fatal(err)
		}
	})
}

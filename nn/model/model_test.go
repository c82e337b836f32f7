package model

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn"
	"github.com/selectformer/selectformer/nn/safetensors"
)

func tinyConfig(f Family) Config {
	c := Config{Family: f, Hidden: 8, Heads: 2, Layers: 2, Intermediate: 12, LayerNormEps: 1e-12, HiddenAct: "gelu",
		Labels: []string{"neg", "pos", "other"}}
	switch f {
	case BERT:
		c.VocabSize, c.MaxPositions, c.TypeVocabSize = 20, 16, 2
	case DistilBERT:
		c.VocabSize, c.MaxPositions = 20, 16
	case ViT:
		c.ImageSize, c.PatchSize, c.NumChannels = 6, 3, 2
	}
	return c
}

func tinyInput(f Family, b int, seed uint64) Input {
	rng := nn.NewRNG(seed)
	if f == ViT {
		in := Input{}
		for i := 0; i < b; i++ {
			px := make([]float64, 2*6*6)
			for j := range px {
				px[j] = rng.NormFloat64()
			}
			in.Pixels = append(in.Pixels, px)
		}
		return in
	}
	in := Input{}
	for i := 0; i < b; i++ {
		ids, types, mask := make([]int, 5), make([]int, 5), make([]int, 5)
		for j := range ids {
			ids[j] = rng.IntN(20)
			mask[j] = 1
			if j >= 3 {
				types[j] = 1
			}
		}
		if i%2 == 1 { // padding at the end
			mask[4] = 0
			ids[4] = 0
		}
		in.IDs, in.Mask = append(in.IDs, ids), append(in.Mask, mask)
		if f == BERT {
			in.TypeIDs = append(in.TypeIDs, types)
		}
	}
	return in
}

func TestModelGradients(t *testing.T) {
	for _, f := range []Family{BERT, DistilBERT, ViT} {
		t.Run(string(f), func(t *testing.T) {
			m, err := New(tinyConfig(f), 1)
			if err != nil {
				t.Fatal(err)
			}
			// Larger weights than the 0.02 initialisation exercise every path.
			for i, p := range m.Params() {
				if len(p.Name) > 0 && p.Value.Len() > 0 {
					nn.InitNormal(p.Value, 0.3, nn.NewRNG(uint64(i)+100))
				}
			}
			in := tinyInput(f, 3, 2)
			labels := []int{0, 2, 1}
			loss := func() (float64, error) {
				logits, err := m.Forward(in)
				if err != nil {
					return 0, err
				}
				l, _, err := nn.CrossEntropy(logits, labels)
				return l, err
			}
			backward := func() error {
				logits, err := m.Forward(in)
				if err != nil {
					return err
				}
				_, g, err := nn.CrossEntropy(logits, labels)
				if err != nil {
					return err
				}
				return m.Backward(g)
			}
			res, err := nn.GradCheck(loss, backward, m.Params(), 1e-4, 40)
			if err != nil {
				t.Fatal(err)
			}
			if res.MaxRelErr > 1e-6 {
				t.Fatalf("max relative error %.3g at %s", res.MaxRelErr, res.Worst)
			}
			t.Logf("%d entries, max relative error %.2g (%s)", res.Checked, res.MaxRelErr, res.Worst)
		})
	}
}

func TestPaddingDoesNotChangeLogits(t *testing.T) {
	for _, f := range []Family{BERT, DistilBERT} {
		m, err := New(tinyConfig(f), 3)
		if err != nil {
			t.Fatal(err)
		}
		short := Input{IDs: [][]int{{2, 5, 7}}, Mask: [][]int{{1, 1, 1}}}
		long := Input{IDs: [][]int{{2, 5, 7, 0, 0}}, Mask: [][]int{{1, 1, 1, 0, 0}}}
		a, err := m.Forward(short)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.Forward(long)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Data {
			if math.Abs(a.Data[i]-b.Data[i]) > 1e-9 {
				t.Fatalf("%s: padding changed logit %d: %g vs %g", f, i, a.Data[i], b.Data[i])
			}
		}
	}
}

func TestViTWithoutQKVBias(t *testing.T) {
	cfg := tinyConfig(ViT)
	cfg.NoQKVBias = true
	m, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() {
		if strings.HasSuffix(p.Name, "query.bias") || strings.HasSuffix(p.Name, "key.bias") || strings.HasSuffix(p.Name, "value.bias") {
			t.Fatalf("parameter %s exists with qkv_bias=false", p.Name)
		}
	}
	dir := t.TempDir()
	if err := m.Save(dir, safetensors.F64); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !m2.Config.NoQKVBias {
		t.Fatal("qkv_bias=false did not round-trip")
	}
	in := tinyInput(ViT, 2, 1)
	if _, err := m2.Forward(in); err != nil {
		t.Fatal(err)
	}
	if err := m2.Backward(nn.New(2, 3)); err != nil {
		t.Fatal(err)
	}
	bad := tinyConfig(BERT)
	bad.NoQKVBias = true
	if _, err := New(bad, 1); err == nil {
		t.Fatal("BERT without qkv biases accepted")
	}
}

func TestForwardRejectsBadInput(t *testing.T) {
	bert, _ := New(tinyConfig(BERT), 1)
	vit, _ := New(tinyConfig(ViT), 1)
	tests := []struct {
		name string
		m    *Model
		in   Input
	}{
		{"empty", bert, Input{}},
		{"ragged", bert, Input{IDs: [][]int{{1, 2}, {1}}}},
		{"id range", bert, Input{IDs: [][]int{{1, 20}}}},
		{"too long", bert, Input{IDs: [][]int{make([]int, 17)}}},
		{"mask rows", bert, Input{IDs: [][]int{{1, 2}}, Mask: [][]int{{1, 1}, {1, 1}}}},
		{"mask value", bert, Input{IDs: [][]int{{1, 2}}, Mask: [][]int{{1, 2}}}},
		{"type range", bert, Input{IDs: [][]int{{1, 2}}, TypeIDs: [][]int{{0, 2}}}},
		{"pixels to text", bert, Input{Pixels: [][]float64{{1}}}},
		{"ids to vit", vit, Input{IDs: [][]int{{1}}}},
		{"image size", vit, Input{Pixels: [][]float64{make([]float64, 10)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.m.Forward(tc.in); err == nil {
				t.Fatal("expected an error")
			}
		})
	}
	if _, err := Train(bert, Input{IDs: [][]int{{1, 2}}}, []int{5}, TrainConfig{Epochs: 1, BatchSize: 1, LR: 1}); err == nil {
		t.Fatal("label out of range accepted")
	}
	if _, err := Evaluate(bert, Input{IDs: [][]int{{1, 2}}}, []int{0, 1}, 1); err == nil {
		t.Fatal("label count mismatch accepted")
	}
}

func TestKeepLayersAndActivation(t *testing.T) {
	m, err := New(tinyConfig(BERT), 1)
	if err != nil {
		t.Fatal(err)
	}
	full := len(m.Params())
	if err := m.KeepLayers(1); err != nil {
		t.Fatal(err)
	}
	if err := m.SetActivation("relu"); err != nil {
		t.Fatal(err)
	}
	if m.Config.Layers != 1 || m.Config.HiddenAct != "relu" || len(m.Params()) != full-16 {
		t.Fatalf("layers %d act %s params %d (from %d)", m.Config.Layers, m.Config.HiddenAct, len(m.Params()), full)
	}
	if _, ok := m.Blocks[0].FFN.Act.(*nn.ReLU); !ok {
		t.Fatalf("activation is %T", m.Blocks[0].FFN.Act)
	}
	dir := t.TempDir()
	if err := m.Save(dir, safetensors.F64); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := tinyInput(BERT, 2, 3)
	a, _ := m.Forward(in)
	b, err := m2.Forward(in)
	if err != nil || !slices.Equal(a.Data, b.Data) {
		t.Fatalf("pruned model did not round-trip (err %v)", err)
	}
	if m.KeepLayers(2) == nil || m.SetActivation("tanh") == nil {
		t.Fatal("bad arguments accepted")
	}
}

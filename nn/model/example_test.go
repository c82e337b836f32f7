package model_test

import (
	"fmt"
	"os"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/nn/safetensors"
)

// Build a small BERT classifier, fine-tune it, save it as a Hugging Face
// checkpoint directory and load it back.
func Example() {
	cfg := model.Config{Family: model.BERT, Hidden: 16, Heads: 2, Layers: 1, Intermediate: 32, LayerNormEps: 1e-12,
		HiddenAct: "gelu", VocabSize: 10, MaxPositions: 8, TypeVocabSize: 2, Labels: []string{"even", "odd"}}
	m, err := model.New(cfg, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Label: whether the sequence contains token 3.
	in := model.Input{IDs: [][]int{{1, 3, 4, 5}, {1, 4, 5, 6}, {1, 5, 3, 0}, {1, 6, 4, 0}}, Mask: [][]int{{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 0}, {1, 1, 1, 0}}}
	labels := []int{1, 0, 1, 0}
	if _, err := model.Train(m, in, labels, model.TrainConfig{Epochs: 60, BatchSize: 4, LR: 1e-2, ClipNorm: 1}); err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "bert")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	if err := m.Save(dir, safetensors.F32); err != nil { // config.json + model.safetensors
		fmt.Println(err)
		return
	}
	loaded, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	mt, err := model.Evaluate(loaded, in, labels, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("accuracy:", mt.Accuracy, "entropies:", len(mt.Entropy))
	fmt.Println("first parameter:", loaded.Params()[0].Name)
	// Output:
	// accuracy: 1 entropies: 4
	// first parameter: bert.embeddings.word_embeddings.weight
}

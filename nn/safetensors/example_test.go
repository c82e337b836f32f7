package safetensors_test

import (
	"bytes"
	"fmt"

	"github.com/selectformer/selectformer/nn/safetensors"
)

func Example() {
	w, err := safetensors.FromFloat64s("layer.weight", safetensors.F16, []int{2, 2}, []float64{1, -0.5, 0.1, 65504})
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, []safetensors.Tensor{w}, map[string]string{"format": "pt"}); err != nil {
		panic(err)
	}
	f, err := safetensors.Parse(buf.Bytes())
	if err != nil {
		panic(err)
	}
	t, _ := f.Get("layer.weight")
	v, _ := t.Float64s()
	fmt.Println(t.DType, t.Shape, v, f.Metadata["format"])
	// Output: F16 [2 2] [1 -0.5 0.0999755859375 65504] pt
}

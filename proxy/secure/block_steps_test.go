package secure

import (
	"slices"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// TestBlockLocalSteps checks the local (no-exchange) steps of a block on
// small tensors with known entries: addKVBias picks layer i's biases of each
// row, fillTerm adds each batch row's fill of layer i, shifted, to every
// row of its hidden layer, and shiftPaddedScores subtracts c on the padded
// keys' columns of each batch row.
func TestBlockLocalSteps(t *testing.T) {
	t.Run("addKVBias", func(t *testing.T) {
		// 2 rows, I2 = 2, 2 layers: kvb row r = [l0: 10r+1, 10r+2 | l1: 10r+3, 10r+4].
		kv := &share.Tensor{Shape: []int{2, 2}, Data: []uint64{100, 200, 300, 400}}
		kvb := &share.Tensor{Shape: []int{2, 4}, Data: []uint64{1, 2, 3, 4, 11, 12, 13, 14}}
		addKVBias(kv, kvb, 1, 2, 2, 2)
		if want := []uint64{103, 204, 313, 414}; !slices.Equal(kv.Data, want) {
			t.Errorf("layer 1: %v, want %v", kv.Data, want)
		}
	})
	t.Run("fillTerm", func(t *testing.T) {
		// B = 2, rows = 2 (heads·Tq), d = 2, 2 layers: fill row b = [l0: 2 words | l1: 2 words].
		fill := &share.Tensor{Shape: []int{2, 4}, Data: []uint64{1, 2, 3, 4, 5, 6, 7, 8}}
		h := &share.Tensor{Shape: []int{2, 1, 2, 2}, Data: make([]uint64, 8)}
		fillTerm(fill, 1, 2, 2, 2, 2)(h, 1)
		if want := []uint64{6, 8, 6, 8, 14, 16, 14, 16}; !slices.Equal(h.Data, want) {
			t.Errorf("layer 1, shift 1: %v, want %v", h.Data, want)
		}
	})
	t.Run("shiftPaddedScores", func(t *testing.T) {
		// B = 2, heads·Tq = 2, T = 3; batch row 0 pads key 2, row 1 keys 1 and 2.
		sc := &share.Tensor{Shape: []int{2, 2, 1, 3}, Data: []uint64{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10}}
		omm := &share.Tensor{Shape: []int{2, 3}, Data: []uint64{0, 0, 1, 0, 1, 1}}
		shiftPaddedScores(sc, omm, 4)
		if want := []uint64{10, 10, 6, 10, 10, 6, 10, 6, 6, 10, 6, 6}; !slices.Equal(sc.Data, want) {
			t.Errorf("%v, want %v", sc.Data, want)
		}
	})
}

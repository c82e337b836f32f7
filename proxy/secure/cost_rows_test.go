package secure

import (
	"testing"

	"github.com/selectformer/selectformer/nn/model"
)

// TestForwardCostRows checks the per-step rows of the cost tables: they sum
// to the totals the measured tests pin (BlockCost, HeadCost; TestBlockCost
// and TestHeadCost run them), every row is named and costs a round, and a
// whole forward's rows are the private mask's two products, the blocks and
// the head (one product, the fill term, where the only layer is folded:
// its key and value biases ride in its weights). For the sst2 phase-0 proxy
// ⟨1L,12H,d2⟩ of DistilBERT at sequence 128, one candidate, the total is
// what `mpcbench forward --shape distilbert --layers 1 --mlp-dim 2 --batch
// 1` measures: 50 rounds, 84090 bytes from P0, 928036 from P1 (90234 and
// 934180 while the LayerNorm's product by r·γ opened x−μ again: its class
// row's H = 768 words, 6144 bytes, from each party; 51, 888178 and 2500094
// before the last block's class attention was folded with its softmax MLP;
// 2485068 and 4096984 from P0 and P1 while each truncation sent a word per
// element; bench's TestModuleCosts measures it again).
func TestForwardCostRows(t *testing.T) {
	sst2 := Arch{Family: model.DistilBERT, Layers: 1, Heads: 12, HeadDim: 64, Hidden: 768, Seq: 128, Labels: 2, MLPHidden: 2}
	rows, err := ForwardCostRows(sst2, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r, b := SumCostRows(rows); r != 50 || b != [2]int64{84090, 928036} {
		t.Errorf("sst2 phase 0: %d rounds, bytes %v; want 50, [84090 928036]", r, b)
	}
	for _, c := range []struct {
		a     Arch
		batch int
		opt   Options
	}{
		{sst2, 1, Options{}},
		{sst2, 3, Options{PublicMask: true}},
		{Arch{Family: model.BERT, Layers: 3, Heads: 12, HeadDim: 64, Hidden: 768, Seq: 128, Labels: 2, MLPHidden: 16}, 4, Options{}},
		{Arch{Family: model.BERT, Layers: 2, Heads: 3, HeadDim: 4, Hidden: 10, Seq: 7, Labels: 3, MLPHidden: 5}, 2, Options{FullLastLayer: true}},
		{Arch{Family: model.ViT, Layers: 1, Heads: 6, HeadDim: 64, Hidden: 384, Seq: 197, Labels: 10, MLPHidden: 16}, 8, Options{}},
	} {
		rows, err := ForwardCostRows(c.a, c.batch, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		var want [2]int64
		var wantRounds int64
		if c.a.Family != model.ViT && !c.opt.PublicMask {
			// The fill term, and m⊗b unless the only layer is folded.
			n := 2
			if c.a.Layers == 1 && !c.opt.FullLastLayer {
				n = 1
			}
			wantRounds = int64(n)
			want = [2]int64{0, int64(n) * msg(c.batch*c.a.Seq)}
		}
		for l := range c.a.Layers {
			br, err := BlockCostRows(c.a, c.batch, l, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			r, b, err := BlockCost(c.a, c.batch, l, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if rr, bb := SumCostRows(br); rr != r || bb != b {
				t.Errorf("%+v layer %d: rows sum to %d rounds %v bytes, BlockCost %d %v", c.a, l, rr, bb, r, b)
			}
			wantRounds += r
			want[0] += b[0]
			want[1] += b[1]
		}
		r, b, err := HeadCost(c.a, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		wantRounds += r
		want[0] += b[0]
		want[1] += b[1]
		if rr, bb := SumCostRows(rows); rr != wantRounds || bb != want {
			t.Errorf("%+v batch %d: forward rows sum to %d rounds %v bytes, want %d %v", c.a, c.batch, rr, bb, wantRounds, want)
		}
		for _, row := range rows {
			if row.Module == "" || row.Step == "" || row.Rounds < 1 || row.Bytes[0] < 0 || row.Bytes[1] < row.Bytes[0] {
				t.Errorf("row %+v", row)
			}
		}
	}
	if _, err := ForwardCostRows(sst2, 1, Options{PrivateEmbeddings: true}); err == nil {
		t.Error("private embeddings: no error")
	}
	if _, err := ForwardCostRows(sst2, 0, Options{}); err == nil {
		t.Error("batch 0: no error")
	}
}

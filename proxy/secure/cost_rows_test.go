package secure

import (
	"strings"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
)

// TestForwardCostRows checks the per-step rows of the cost tables: they sum
// to the totals the measured tests pin (BlockCost, HeadCost; TestBlockCost
// and TestHeadCost run them), every row is named and costs a round, and a
// whole forward's rows are the private mask's product (the fill term: the
// folded blocks' key and value biases ride in their weights), the blocks and
// the head. For the sst2 phase-0 proxy
// ⟨1L,12H,d2⟩ of DistilBERT at sequence 128, one candidate, the total is
// what `mpcbench forward --shape distilbert --layers 1 --mlp-dim 2 --batch
// 1` measures: 50 rounds, 84090 bytes from P0, 928036 from P1 (90234 and
// 934180 while the LayerNorm's product by r·γ opened x−μ again: its class
// row's H = 768 words, 6144 bytes, from each party; 51, 888178 and 2500094
// before the last block's class attention was folded with its softmax MLP;
// 2485068 and 4096984 from P0 and P1 while each truncation sent a word per
// element; bench's TestModuleCosts measures it again). For qqp-bert's
// phase-2 proxy ⟨3L,12H,d16⟩ of BERT, one candidate: 114 rounds, 9719238 bytes
// from P0 and 14324456 from P1. Zeroing the padded input rows of layers 1 and
// 2 (each B·T·H = 98,304 words) costs P0 msg(98304) = 786442 and P1
// msg(2) = 26 bytes a layer (protocol.MulPrivateRowBits); with a Beaver
// product by the broadcast mask each party sent msg(196608) = 1572892 a
// layer (P0 2·786450 and P1 2·1572866 more). Layers 0 and 1 fold their
// attention (foldedAttention): per layer the data owner opens 332,705
// words (Y_augᵀ and y, Ŷ, Q and G) where it opened 589,824 (y; Q and K;
// the scores and Vᵀ), both parties' shared × shared product 110,592 where
// 196,608, and the truncations 2,329 words where 7,680; with m⊗b's round
// gone (P1 msg(128)) that is P0 1461908 and P1 4200610 bytes and one round
// less than the unfolded layers' 12760190, 20104110 and 115 (the frames of
// the largest messages make the last tens of bytes). The LayerNorm opens
// x−μ once for its square and its product by r·γ (protocol.SquareKeep):
// 1579044 bytes from each party (197,376 words of x−μ: every row of layers
// 0 and 1, the class row of layer 2) less than 11298282 and 15903500.
// The LayerNorm's two products in Z_2^50 (layerNormRing) open x−μ and r·γ
// packed at 50 bits, 14/64 of their words fewer, and truncate every square
// where Z_2^64 truncated the row's sum (tmsg(R·H) for tmsg(R)): sst2
// 2,688 − 88 = 2,600 bytes fewer a party (78906 and 922852 before), qqp
// 2·(344,064 − 12,272) + 2,600 = 666,184 (9041118 and 13646336 before).
func TestForwardCostRows(t *testing.T) {
	sst2 := Arch{Family: model.DistilBERT, Layers: 1, Heads: 12, HeadDim: 64, Hidden: 768, Seq: 128, Labels: 2, MLPHidden: 2}
	rows, err := ForwardCostRows(sst2, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The folded attention's two shared × shared products open their
	// operands packed at 54 bits (attentionRing): 5,184 bytes fewer a party.
	if r, b := SumCostRows(rows); r != 50 || b != [2]int64{76306, 920252} {
		t.Errorf("sst2 phase 0: %d rounds, bytes %v; want 50, [76306 920252]", r, b)
	}
	qqp := Arch{Family: model.BERT, Layers: 3, Heads: 12, HeadDim: 64, Hidden: 768, Seq: 128, Labels: 2, MLPHidden: 16}
	if rows, err = ForwardCostRows(qqp, 1, Options{}); err != nil {
		t.Fatal(err)
	}
	if r, b := SumCostRows(rows); r != 114 || b != [2]int64{8374934, 12980152} {
		t.Errorf("qqp phase 2: %d rounds, bytes %v; want 114, [8374934 12980152]", r, b)
	}
	masking := 0
	for _, row := range rows {
		if strings.HasSuffix(row.Module, "input masking") {
			masking++
			if row.Rounds != 1 || row.Bytes != [2]int64{786442, 26} {
				t.Errorf("qqp phase 2: %+v, want 1 round, bytes [786442 26]", row)
			}
		}
	}
	if masking != 2 {
		t.Errorf("qqp phase 2: %d input masking rows, want 2 (layers 1 and 2)", masking)
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
			// The fill term alone: the folded blocks need no m⊗b.
			wantRounds = 1
			want = [2]int64{0, msg(c.batch * c.a.Seq)}
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
			if row.Module == "" || row.Step == "" || row.Rounds < 1 || row.Bytes[0] < 0 || row.Bytes[1] < 0 {
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

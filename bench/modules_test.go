package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/proxy/secure"
)

// TestModuleCosts measures the module tables of small proxies and of the
// sst2 phase-0 proxy ⟨1L,12H,d2⟩ at sequence 128: the rows (the exact cost
// table, secure.ForwardCostRows) add up to the measured forward (rounds
// and dealer bytes exactly, each party's bytes up to the transport's
// credit frames), every row that draws material names its kinds, and for
// sst2 the totals are the pinned figures (secure's TestForwardCostRows:
// 50 rounds, 84090 and 928036 bytes in the rows) with 168504 dealer bytes,
// 117568 to the model owner (its weight triples, bit pairs and cross-party
// AND triples) and 50936 to the data owner (90234 and 934180 bytes, the
// same dealer bytes, while the LayerNorm's product by r·γ opened x−μ
// again: 768 words from each party; all 168504 dealer bytes to the data
// owner before the kinds' words were split between the parties; 51 rounds, 888178,
// 2500094 and 3665128 before the last block's class attention was folded
// with its softmax MLP; 2485068, 4096984 and 6502528 with the
// opening-based truncation before the wrap pairs).
func TestModuleCosts(t *testing.T) {
	for _, cfg := range []ForwardConfig{
		{Shape: "distilbert", Layers: 1, Heads: 2, MLPHidden: 2, Seq: 6, Batch: 2, Seed: 1},
		{Shape: "bert-base", Layers: 2, Heads: 1, MLPHidden: 4, Seq: 5, Batch: 1, Seed: 2},
		{Shape: "vit-small", Layers: 1, Heads: 1, MLPHidden: 2, Seq: 5, Batch: 3, Seed: 3},
		{Shape: "distilbert", Layers: 1, Heads: 1, MLPHidden: 2, Seq: 4, Batch: 2, Seed: 4, Options: secure.Options{PublicMask: true}},
		SST2Phase0,
	} {
		tab, err := ModuleCosts(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := tab.Check(); err != nil {
			t.Error(err)
		}
		tot := tab.Total()
		for _, r := range tab.Rows {
			// Every step draws material but the LayerNorm's product by r·γ,
			// whose quadruples its square drew (protocol.Session.SquareKeep).
			kept := strings.HasSuffix(r.Step, "x−μ kept open")
			if r.Dealer != [2]int64{} && len(r.Kinds) == 0 || r.Dealer[0] < 0 || r.Dealer[1] < 0 || (r.Dealer == [2]int64{}) != kept {
				t.Errorf("%s %+v: row %+v", cfg.Shape, cfg, r)
			}
		}
		sum := ModuleSummary(tab)
		var st ModuleRow
		for _, m := range sum {
			st.Rounds += m.Rounds
			st.Bytes[0] += m.Bytes[0]
			st.Bytes[1] += m.Bytes[1]
			st.Dealer[0] += m.Dealer[0]
			st.Dealer[1] += m.Dealer[1]
		}
		if st.Rounds != tot.Rounds || st.Bytes != tot.Bytes || st.Dealer != tot.Dealer {
			t.Errorf("summary by module %+v, rows %+v", st, tot)
		}
		if cfg == SST2Phase0 {
			// The folded attention's shared × shared products in Z_2^54
			// (proxy/secure's attentionRing): their openings packed at 54
			// bits, the ReLU's sign circuit on 54 bits (fewer cross ANDs from
			// the dealer), their truncations' wrap pairs 10 bits wider. The
			// LayerNorm's two products in Z_2^50 (layerNormRing): x−μ and
			// r·γ opened packed at 50 bits (−1,344 bytes each), every square
			// truncated before the sum (+88), the wrap pairs of those 768
			// truncations and of the output's 14 bits wider (+4,216 dealer
			// bytes to P1).
			if tot.Rounds != 50 || tot.Bytes != [2]int64{76306, 920252} || tot.Dealer != [2]int64{117368, 56064} {
				t.Errorf("sst2 phase 0: %d rounds, bytes %v, dealer %v", tot.Rounds, tot.Bytes, tot.Dealer)
			}
			var md bytes.Buffer
			if err := WriteModuleTable(&md, tab); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"| Q/K/V projections | truncation | 1 | 594 B | 594 B | 0 B | 9.23 kB | wrap |",
				"| Q/K/V projections | G = Ŷ₁ᵀ·[Wk; b_K], N = Ŷ₂ᵀ·[Wv; b_V] product with P0's weights (P1 opens its input) | 1 | 0 B | 30.8 kB | 30.7 kB | 0 B | weighttriple |",
				"| softmax MLP | q·Gᵀ = Q·Kᵀ·W1 (shared × shared, all heads, in Z_2^54) | 1 | 15.6 kB | 15.6 kB | 0 B | 192 B | mattriple |",
				"| LayerNorm | (x−μ)² (in Z_2^50) | 1 | 4.81 kB | 4.81 kB | 0 B | 12.3 kB | squareproduct |",
				"| LayerNorm | variance: each (x−μ)² truncated, Σ | 1 | 106 B | 106 B | 0 B | 2.88 kB | wrap |",
				"| **total** (measured) | | 50 | 76.3 kB | 920 kB | 117 kB | 56.1 kB |"} {
				if !strings.Contains(md.String(), want) {
					t.Errorf("module table lacks %q:\n%s", want, md.String())
				}
			}
		}
	}
	if _, err := ModuleCosts(context.Background(), ForwardConfig{Shape: "bert-base", Layers: 1, Batch: 1, Exact: true}); err == nil {
		t.Error("an exact model's module table: no error")
	}
}

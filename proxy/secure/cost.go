package secure

import (
	"fmt"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
)

// msg returns the bytes one message of w ring words costs on the wire
// (protocol.MessageBytes: 8w + 10 while that is one frame).
func msg(w int) int64 { return protocol.MessageBytes(w) }

// truncReLUBytes is the bytes a party sends for protocol.TruncReLU of n > 0
// elements (protocol.TruncReLUCost): the truncation's ⌈n/64⌉ words of bits in
// the sign circuit's first message, its five other layers and the
// multiplexer.
func truncReLUBytes(n int) int64 { return protocol.TruncReLUCost(n).Bytes }

// step is one step of a cost table: its rounds and the bytes it costs.
type step struct {
	rounds int64
	both   int64 // bytes sent by each party
	p1     int64 // bytes sent by party 1 only
}

// trunc is the step of a protocol.TruncBy of n elements (1 round, one bit
// per element: msg(⌈n/64⌉)).
func trunc(n int) step {
	c := protocol.TruncCost(n)
	return step{c.Rounds, c.Bytes, 0}
}

// truncReLU is the step of a protocol.TruncReLU of n elements (7 rounds).
func truncReLU(n int) step { return truncReLURing(n, 64) }

// matMulRing is the step of a protocol.MatMulRing of operands of nx and ny
// words in Z_2^ring (1 round, the openings packed at ring bits).
func matMulRing(nx, ny int, ring uint) step {
	c := protocol.MatMulRingCost(nx, ny, ring)
	return step{c.Rounds, c.Bytes, 0}
}

// squareKeepRing is the step of a protocol.SquareKeepRing of n elements in
// Z_2^ring, or of its KeptOpening's Mul (1 round, the openings packed at
// ring bits).
func squareKeepRing(n int, ring uint) step {
	c := protocol.SquareKeepRingCost(n, ring)
	return step{c.Rounds, c.Bytes, 0}
}

// truncReLURing is the step of a protocol.TruncReLURing of n elements in
// Z_2^ring (7 rounds; the sign circuit on ring bits).
func truncReLURing(n int, ring uint) step {
	c := protocol.TruncReLURingCost(n, ring)
	return step{c.Rounds, c.Bytes, 0}
}

// CostRow is one step of a cost table (BlockCostRows, HeadCostRows,
// ForwardCostRows): the module it belongs to, what the step does, its
// rounds and the bytes each party sends.
type CostRow struct {
	// Module names the module (e.g. "softmax MLP", "LayerNorm MLP");
	// Step the step within it (e.g. "truncation + ReLU (sign circuit)").
	Module string `json:"module"`
	Step   string `json:"step"`
	Rounds int64  `json:"rounds"`
	// Bytes are the bytes party 0 and party 1 send.
	Bytes [2]int64 `json:"bytes"`
}

// row names step s.
func (s step) row(module, name string) CostRow {
	return CostRow{Module: module, Step: name, Rounds: s.rounds, Bytes: [2]int64{s.both, s.both + s.p1}}
}

// SumCostRows returns the rows' total rounds and bytes.
func SumCostRows(rows []CostRow) (rounds int64, bytes [2]int64) {
	for _, r := range rows {
		rounds += r.Rounds
		bytes[0] += r.Bytes[0]
		bytes[1] += r.Bytes[1]
	}
	return rounds, bytes
}

// Step names of the cost tables.
const (
	stepOpen      = "product with P0's weights (P1 opens its input)"
	stepTrunc     = "truncation"
	stepTruncReLU = "truncation + ReLU (sign circuit: comparison)"
)

// lnRows are a LayerNorm's steps over R rows of H (a block's or ViT's
// final one), d the MLP width.
func lnRows(R, H, d int) []CostRow {
	const m, mlp = "LayerNorm", "LayerNorm MLP"
	return []CostRow{
		trunc(R).row(m, "mean"),
		squareKeepRing(R*H, layerNormRing).row(m, "(x−μ)² (in Z_2^50)"),
		trunc(R*H).row(m, "variance: each (x−μ)² truncated, Σ"),
		step{1, 0, msg(R)}.row(mlp, "·W1/H "+stepOpen),
		truncReLU(R*d).row(mlp, stepTruncReLU),
		step{1, 0, msg(R * d)}.row(mlp, "·(W2⊗γ) "+stepOpen),
		trunc(R*H).row(mlp, stepTrunc),
		squareKeepRing(R*H, layerNormRing).row(m, "(x−μ)·(r·γ) (in Z_2^50), x−μ kept open"),
		trunc(R*H).row(m, "output truncation"),
	}
}

// BlockCost is the exact online cost of block layer (0-based) of a
// SelectFormer proxy (every module an MLP, no FFN) for a batch: the rounds
// (the same for both parties) and the bytes each party sends. Every block
// runs its attention folded with the softmax MLP (Prepared.foldedAttention):
// the queries, then Ŷ = Y_augᵀ·[W1 | W2ᵀ | b2ᵀ], G = Ŷ₁ᵀ·[Wk; b_K] and N =
// Ŷ₂ᵀ·[Wv; b_V] instead of every token's keys, values and scores (the
// dealer's weight-triple and truncation material shrink with them); the
// last block (unless opt.FullLastLayer) runs its queries, attention output
// and LayerNorm on the class token only. It errs for architectures outside
// that case (exact modules, FFN).
//
// With B the batch, T the sequence, H the width, I = heads·headDim, nh the
// heads, d the MLP width, Tq = T (1 in the last block), S = B·nh·Tq
// softmax rows and R LayerNorm rows (B·Tq; ViT's pre-LayerNorm normalises
// every token: B·T); msg(w) = 8w + 10 (protocol.MessageBytes, which also
// counts multi-frame messages); tmsg(n) = msg(⌈n/64⌉), a truncation of n
// elements (protocol.TruncCost: one bit each); truncrelu(n) =
// msg(157⌈n/64⌉) + Σ_{k∈{62,30,14,6,2}} msg(k⌈n/64⌉) + msg(n + ⌈n/64⌉)
// (protocol.TruncReLUCost), the truncation fused into the ReLU
// (protocol.TruncReLU: its bits ride in the sign circuit's first message,
// the bias added before it); truncrelu₅₄(n) the same with the sign circuit
// on 54 bits (protocol.TruncReLURingCost), and msg54(n) = msg(⌈54n/64⌉), n
// openings packed at 54 bits (protocol.MatMulRingCost), msg50(n) =
// msg(⌈50n/64⌉) the same at 50 bits (protocol.SquareKeepRingCost). "P1" terms are sent by the data owner alone
// (the weight-mask products), "P0 …, P1 …" by each party as stated
// (protocol.MulPrivateRowBits), the others by both parties:
//
//	step                               rounds  bytes
//	zero padded input rows (private    1       P0 msg(B·T·H), P1
//	  mask, layers ≥ 1 or private              msg(⌈B·T/64⌉)
//	  embeddings)
//	Y_augᵀ·[W1 | W2ᵀ | b2ᵀ] and the    1       P1 msg(B·(H+1)·T + B·Tq·H)
//	  queries' y·Wq
//	  truncation                       1       tmsg(B·(H+1)·(2d+1) + B·Tq·I)
//	G = Ŷ₁ᵀ·[Wk; b_K],                 1       P1 msg(B·(2d+1)·(H+1))
//	  N = Ŷ₂ᵀ·[Wv; b_V]
//	  truncation                       1       tmsg(B·(2d+1)·I)
//	q·Gᵀ (shared × shared, all heads,  1       msg54(B·Tq·I + B·I·d)
//	  in Z_2^54: attentionRing)
//	  truncation and ReLU → h          7       truncrelu₅₄(S·d)
//	h·N[:d] + N[d] = P·V (in Z_2^54)   1       msg54(S·d + B·d·I)
//	  truncation                       1       tmsg(B·Tq·I)
//	output projection, truncation      1+1     P1 msg(B·Tq·I); tmsg(B·Tq·H)
//	LayerNorm mean                     1       tmsg(R)
//	  (x−μ)² (in Z_2^50), truncation   1+1     msg50(R·H) + tmsg(R·H)
//	    of each, Σ
//	  LN MLP ·W1/H                     1       P1 msg(R)
//	  truncation and ReLU              7       truncrelu(R·d)
//	  ·(W2⊗γ), truncation              1+1     P1 msg(R·d); tmsg(R·H)
//	  (x−μ)·(r·γ) (in Z_2^50),         1+1     msg50(R·H) + tmsg(R·H)
//	    truncation
//
// The LayerNorm's square keeps its opening of x−μ for the product by r·γ
// (protocol.Session.SquareKeepRing, one square-and-product quadruple mod
// 2^50 per element, layerNormRing): that product opens r·γ alone,
// msg50(R·H) where a Beaver product would open both operands. Each square
// is truncated back to Z_2^64 before the row's sum (R·H truncations where
// the sum in Z_2^64 took R: the same round; the sum need not fit the ring).
//
// That is 31 rounds in every block, 32 for layers ≥ 1 with a private mask
// (BERT, DistilBERT; ViT has no mask and its LayerNorm comes first at the
// same cost). Layer 0 needs no masking round because the data owner zeroes
// its padded embeddings in the clear. The unfolded attention (QKV x·[Wq|Wk|Wv],
// the scores Q·Kᵀ, x·W1 beside Vᵀ·[W2ᵀ | b2ᵀ], h·(W2·V) + b2·V: the same
// 14 rounds) made the data owner open B·T·H + 2·B·Tq·I + B·nh·Tq·T +
// B·T·I words where the fold opens B·(H+1)·T + B·Tq·H + B·(2d+1)·(H+1) +
// B·Tq·I + B·I·d: per candidate of the sst2 phase-0 proxy (DistilBERT
// ⟨1L,12H,d2⟩, T = 128, class token) 99,200 + 3,845 words where 99,072 +
// 99,840, and per full block of qqp-bert's ⟨3L,12H,d16⟩ 369,569 where
// 491,520; the model owner's products have (H+1)·(2d+1) + Tq·I + (2d+1)·I
// outputs a batch row where they had T·2I + Tq·I + Tq·d + I·(d+1), and the
// key and value biases need no m⊗b. Per forward pass (not per block), a
// private mask costs one more round: the padded scores' fill term
// (1−m)·G of all softmax MLPs (P1 msg(B·T)), see Prepared.Forward.
func BlockCost(a Arch, batch, layer int, opt Options) (rounds int64, bytes [2]int64, err error) {
	rows, err := BlockCostRows(a, batch, layer, opt)
	if err != nil {
		return 0, bytes, err
	}
	rounds, bytes = SumCostRows(rows)
	return rounds, bytes, nil
}

// BlockCostRows is BlockCost step by step: the rows of its table in the
// order the block runs them (the padded rows' zeroing first; ViT's
// LayerNorm before the attention), each named by its module and step.
// BlockCost is their sum.
func BlockCostRows(a Arch, batch, layer int, opt Options) ([]CostRow, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if a.Intermediate > 0 || a.Ablation != (proxy.Ablation{}) {
		return nil, fmt.Errorf("secure: block cost: only for SelectFormer proxies with every module emulated")
	}
	B, T, H, I, nh, d := batch, a.Seq, a.Hidden, a.inner(), a.Heads, a.MLPHidden
	if layer < 0 || layer >= a.Layers {
		return nil, fmt.Errorf("secure: block cost: layer %d of %d", layer, a.Layers)
	}
	if batch <= 0 {
		return nil, fmt.Errorf("secure: block cost: batch size %d", batch)
	}
	Tq := T
	if layer == a.Layers-1 && !opt.FullLastLayer {
		Tq = 1
	}
	S, R, Rq := B*nh*Tq, B*Tq, B*Tq
	if a.Family == model.ViT {
		R = B * T // pre-LayerNorm: normalises every token (keys and values need them)
	}
	const qkv, sc, sm, pv, out = "Q/K/V projections", "attention scores", "softmax MLP", "P·V", "output projection"
	var rows []CostRow
	if foldsAttention(a, opt) {
		// The attention folded with the softmax MLP
		// (Prepared.foldedAttention).
		queries := "and every row's y·Wq "
		if Tq < T {
			queries = "and the class rows' y₀·Wq "
		}
		rows = []CostRow{
			step{1, 0, msg(B*(H+1)*T + B*Tq*H)}.row(qkv, "Y_augᵀ·[W1 | W2ᵀ | b2ᵀ] (every token, softmax MLP folded in) "+queries+stepOpen),
			trunc(B*(H+1)*(2*d+1)+B*Tq*I).row(qkv, stepTrunc),
			step{1, 0, msg(B * (2*d + 1) * (H + 1))}.row(qkv, "G = Ŷ₁ᵀ·[Wk; b_K], N = Ŷ₂ᵀ·[Wv; b_V] "+stepOpen),
			trunc(B*(2*d+1)*I).row(qkv, "truncation (G, N)"),
			matMulRing(B*Tq*I, B*I*d, attentionRing).row(sm, "q·Gᵀ = Q·Kᵀ·W1 (shared × shared, all heads, in Z_2^54)"),
			truncReLURing(S*d, attentionRing).row(sm, stepTruncReLU),
			matMulRing(S*d, B*d*I, attentionRing).row(pv, "h·N[:d] + N[d] = (h·W2 + b2)·V (shared × shared, in Z_2^54)"),
			trunc(B*Tq*I).row(pv, stepTrunc),
		}
	} else {
		// The QKV products: every row's query, key and value (x·[Wq|Wk|Wv],
		// truncated); in the last block the keys and values of every row and
		// the class token's query alone (two products in one message, one
		// truncation).
		qkvSent, qkvTrunc, qkvName := msg(B*T*H), 3*B*T*I, "x·[Wq|Wk|Wv] "+stepOpen
		if Tq < T {
			qkvSent, qkvTrunc, qkvName = msg(B*T*H+B*Tq*H), 2*B*T*I+B*Tq*I, "x·[Wk|Wv] and the class rows' x₀·Wq "+stepOpen
		}
		rows = []CostRow{
			step{1, 0, qkvSent}.row(qkv, qkvName),
			trunc(qkvTrunc).row(qkv, stepTrunc),
			step{1, msg(B*Tq*I + B*T*I), 0}.row(sc, "Q·Kᵀ (shared × shared, all heads)"),
			trunc(S*T).row(sc, stepTrunc),
			step{1, 0, msg(S*T + B*T*I)}.row(sm, "x·W1, with Vᵀ·[W2ᵀ | b2ᵀ] "+stepOpen),
			truncReLU(S*d).row(sm, stepTruncReLU),
			step{1, msg(S*d + B*d*I), 0}.row(pv, "h·(W2·V) + b2·V (shared × shared)"),
			trunc(B*Tq*I).row(pv, "truncation (by 2f)"),
		}
	}
	rows = append(rows,
		step{1, 0, msg(B * Tq * I)}.row(out, "·Wo "+stepOpen),
		trunc(Rq*H).row(out, stepTrunc))
	if a.Family == model.ViT { // pre-LayerNorm: before the attention
		return append(lnRows(R, H, d), rows...), nil
	}
	rows = append(rows, lnRows(R, H, d)...)
	if !opt.PublicMask && (layer > 0 || opt.PrivateEmbeddings) {
		c := protocol.MulPrivateRowBitsCost(B*T, H)
		mask := CostRow{Module: "input masking", Step: "zero the padded input rows (private mask: P0 its masked share, P1 a bit per row)",
			Rounds: c[0].Rounds, Bytes: [2]int64{c[0].Bytes, c[1].Bytes}}
		rows = append([]CostRow{mask}, rows...)
	}
	return rows, nil
}

// HeadCost is the exact online cost of the head of a SelectFormer proxy
// (every module an MLP) for a batch: from the last block's class-token
// output to the shared entropies. The classifier is folded into the entropy
// MLP's first layer (W' = Wc·W1, b' = bc·W1 + b1, see Prepared.entropy), so
// the logits are never computed. It errs for architectures outside that case.
//
// With B the batch, H the width, d the MLP width and d' the entropy MLP's
// (Arch.EntropyHidden, else d; msg and truncrelu as for BlockCost; "P1" terms
// are sent by the data owner alone):
//
//	step                               rounds  bytes
//	ViT: final LayerNorm of the B      15      as a block's LayerNorm, R = B
//	  class rows
//	BERT/DistilBERT: pooler x·Wp       1       P1 msg(B·H)
//	  truncation and ReLU              7       truncrelu(B·H)
//	classifier and entropy MLP z·W'    1       P1 msg(B·H)
//	  truncation and ReLU              7       truncrelu(B·d')
//	  ·W2, truncation                  1+1     P1 msg(B·d'); tmsg(B)
//
// That is 25 rounds for ViT and 18 for BERT and DistilBERT (the unfolded
// classifier, a product and its truncation, took 2 more).
func HeadCost(a Arch, batch int) (rounds int64, bytes [2]int64, err error) {
	rows, err := HeadCostRows(a, batch)
	if err != nil {
		return 0, bytes, err
	}
	rounds, bytes = SumCostRows(rows)
	return rounds, bytes, nil
}

// HeadCostRows is HeadCost step by step, in the order the head runs them;
// HeadCost is their sum.
func HeadCostRows(a Arch, batch int) ([]CostRow, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if a.Intermediate > 0 || a.Ablation != (proxy.Ablation{}) || a.TanhPooler {
		return nil, fmt.Errorf("secure: head cost: only for SelectFormer proxies with every module emulated")
	}
	if batch <= 0 {
		return nil, fmt.Errorf("secure: head cost: batch size %d", batch)
	}
	B, H, d, dEnt := batch, a.Hidden, a.MLPHidden, a.entropyHidden()
	var rows []CostRow
	if a.Family == model.ViT {
		for _, r := range lnRows(B, H, d) {
			r.Module = "final " + r.Module
			rows = append(rows, r)
		}
	} else {
		rows = []CostRow{step{1, 0, msg(B * H)}.row("pooler", "x·Wp "+stepOpen), truncReLU(B*H).row("pooler", stepTruncReLU)}
	}
	const ent = "classifier + entropy MLP"
	return append(rows,
		step{1, 0, msg(B * H)}.row(ent, "z·W' (classifier folded in) "+stepOpen),
		truncReLU(B*dEnt).row(ent, stepTruncReLU),
		step{1, 0, msg(B * dEnt)}.row(ent, "·W2 "+stepOpen),
		trunc(B).row(ent, stepTrunc)), nil
}

// ForwardCostRows is the exact online cost of a whole Prepared.Forward of
// a SelectFormer proxy (every module an MLP) for a batch, step by step in
// the order the forward runs them: the private mask's products (text
// families without Options.PublicMask: the padded scores' fill term
// (1−m)·G of every softmax MLP, P1 msg(B·T); the key and value biases ride
// in the folded blocks' augmented weights), every block's rows (BlockCostRows, the
// module prefixed with its layer when there are several), then the head's
// (HeadCostRows). Sharing the data owner's input costs nothing online. It
// errs where BlockCost and HeadCost do, and for private embeddings (their
// one-hot product is not in the table).
func ForwardCostRows(a Arch, batch int, opt Options) ([]CostRow, error) {
	if opt.PrivateEmbeddings {
		return nil, fmt.Errorf("secure: forward cost: private embeddings are not in the table")
	}
	var rows []CostRow
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if a.Family != model.ViT && !opt.PublicMask && batch > 0 {
		B, T := batch, a.Seq
		if kvBiasLayers(a, opt) > 0 {
			rows = append(rows, step{1, 0, msg(B * T)}.row("private mask", "m⊗b: masked key/value biases of the unfolded layers "+stepOpen))
		}
		rows = append(rows, step{1, 0, msg(B * T)}.row("private mask", "(1−m)·G: padded scores' fill term, every softmax MLP "+stepOpen))
	}
	for l := range a.Layers {
		br, err := BlockCostRows(a, batch, l, opt)
		if err != nil {
			return nil, err
		}
		for _, r := range br {
			if a.Layers > 1 {
				r.Module = fmt.Sprintf("layer %d: %s", l, r.Module)
			}
			rows = append(rows, r)
		}
	}
	hr, err := HeadCostRows(a, batch)
	if err != nil {
		return nil, err
	}
	return append(rows, hr...), nil
}

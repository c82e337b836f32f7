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
// elements (protocol.TruncReLUCost): the truncation's n words in the sign
// circuit's first message, its five other layers and the multiplexer.
func truncReLUBytes(n int) int64 { return protocol.TruncReLUCost(n).Bytes }

// step is one step of a cost table: its rounds and the bytes it costs.
type step struct {
	rounds int64
	both   int64 // bytes sent by each party
	p1     int64 // bytes sent by party 1 only
}

// truncReLU is the step of a protocol.TruncReLU of n elements (7 rounds).
func truncReLU(n int) step {
	c := protocol.TruncReLUCost(n)
	return step{c.Rounds, c.Bytes, 0}
}

// BlockCost is the exact online cost of block layer (0-based) of a
// SelectFormer proxy (every module an MLP, no FFN) for a batch: the rounds
// (the same for both parties) and the bytes each party sends. The last block
// (unless opt.FullLastLayer) runs its queries, attention output and LayerNorm
// on the class token only: its query product and truncation cover the B
// class rows instead of all B·T rows (the dealer's weight-triple and
// truncation material shrink with them). It errs for architectures outside that case
// (exact modules, FFN).
//
// With B the batch, T the sequence, H the width, I = heads·headDim, nh the
// heads, d the MLP width, Tq = T (Tq = 1 in the last block), S = B·nh·Tq
// softmax rows and R LayerNorm rows (B·Tq; ViT's pre-LayerNorm: B·T);
// msg(w) = 8w + 10 (protocol.MessageBytes, which also counts multi-frame
// messages); truncrelu(n) = msg(n + 156⌈n/64⌉) + Σ_{k∈{62,30,14,6,2}}
// msg(k⌈n/64⌉) + msg(n + ⌈n/64⌉) (protocol.TruncReLUCost), the truncation
// fused into the ReLU (protocol.TruncReLU: its opening rides in the sign
// circuit's first message, the bias added before it). "P1" terms are sent by the data
// owner alone (the weight-mask products), the others by both parties:
//
//	step                               rounds  bytes
//	QKV x·[Wq|Wk|Wv]                   1       P1 msg(B·T·H)
//	  truncation                       1       msg(3·B·T·I)
//	  (last block: x·[Wk|Wv] and the           P1 msg(B·T·H + B·H)
//	  class rows' x₀·Wq in one message,        msg(2·B·T·I + B·I)
//	  one truncation)
//	zero padded input rows (private    1       msg(2·B·T·H)
//	  mask, layers ≥ 1 or private
//	  embeddings)
//	scores Q·Kᵀ (all heads, batch)     1       msg(B·Tq·I + B·T·I)
//	  truncation                       1       msg(S·T)
//	softmax MLP x·W1, with             1       P1 msg(S·T + B·T·I)
//	  Vᵀ·[W2ᵀ | b2ᵀ] (W2·V, b2·V)
//	  truncation and ReLU → h          7       truncrelu(S·d)
//	P·V = h·(W2·V) + b2·V              1       msg(S·d + B·d·I)
//	  truncation (by 2f)               1       msg(B·Tq·I)
//	output projection, truncation      1+1     P1 msg(B·Tq·I); msg(B·Tq·H)
//	LayerNorm mean                     1       msg(R)
//	  (x−μ)², Σ, truncation            1+1     msg(R·H) + msg(R)
//	  LN MLP ·W1/H                     1       P1 msg(R)
//	  truncation and ReLU              7       truncrelu(R·d)
//	  ·(W2⊗γ), truncation              1+1     P1 msg(R·d); msg(R·H)
//	  (x−μ)·(r·γ), truncation          1+1     msg(2·R·H) + msg(R·H)
//
// That is 31 rounds (33 with P computed before P·V, 35 with the truncations
// apart from the ReLUs as well), 32 for layers ≥ 1 with a private mask (BERT,
// DistilBERT; ViT has no mask and its LayerNorm comes first at the same
// cost). Layer 0 needs no masking round because the data owner zeroes its
// padded embeddings in the clear. Per forward pass (not per block), a private
// mask costs two more rounds: the masked key/value biases m⊗b of all layers
// (P1 msg(B·T)) and the padded scores' fill term (1−m)·G of all softmax MLPs
// (P1 msg(B·T)), see Prepared.Forward. The softmax MLP's second layer is
// folded into P·V (Prepared.softmaxPV) for encodings of at most
// pvFoldMaxFracBits (16) fractional bits, the default; BlockCost counts that
// case.
func BlockCost(a Arch, batch, layer int, opt Options) (rounds int64, bytes [2]int64, err error) {
	if err := a.Validate(); err != nil {
		return 0, bytes, err
	}
	if a.Intermediate > 0 || a.Ablation != (proxy.Ablation{}) {
		return 0, bytes, fmt.Errorf("secure: block cost: only for SelectFormer proxies with every module emulated")
	}
	B, T, H, I, nh, d := batch, a.Seq, a.Hidden, a.inner(), a.Heads, a.MLPHidden
	if layer < 0 || layer >= a.Layers {
		return 0, bytes, fmt.Errorf("secure: block cost: layer %d of %d", layer, a.Layers)
	}
	if batch <= 0 {
		return 0, bytes, fmt.Errorf("secure: block cost: batch size %d", batch)
	}
	Tq := T
	if layer == a.Layers-1 && !opt.FullLastLayer {
		Tq = 1
	}
	S, R, Rq := B*nh*Tq, B*Tq, B*Tq
	if a.Family == model.ViT {
		R = B * T // pre-LayerNorm: normalises every token (keys and values need them)
	}
	// The QKV products: every row's query, key and value (x·[Wq|Wk|Wv],
	// truncated); in the last block the keys and values of every row and the
	// class token's query alone (two products in one message, one
	// truncation).
	qkvSent, qkvTrunc := msg(B*T*H), 3*B*T*I
	if Tq < T {
		qkvSent, qkvTrunc = msg(B*T*H+B*Tq*H), 2*B*T*I+B*Tq*I
	}
	steps := []step{
		{1, 0, qkvSent}, {1, msg(qkvTrunc), 0},
		{1, msg(B*Tq*I + B*T*I), 0}, {1, msg(S * T), 0},
		{1, 0, msg(S*T + B*T*I)}, truncReLU(S * d),
		{1, msg(S*d + B*d*I), 0}, {1, msg(B * Tq * I), 0},
		{1, 0, msg(B * Tq * I)}, {1, msg(Rq * H), 0},
		{1, msg(R), 0}, {1, msg(R * H), 0}, {1, msg(R), 0},
		{1, 0, msg(R)}, truncReLU(R * d), {1, 0, msg(R * d)}, {1, msg(R * H), 0},
		{1, msg(2 * R * H), 0}, {1, msg(R * H), 0},
	}
	if a.Family != model.ViT && !opt.PublicMask && (layer > 0 || opt.PrivateEmbeddings) {
		steps = append(steps, step{1, msg(2 * B * T * H), 0})
	}
	for _, s := range steps {
		rounds += s.rounds
		bytes[0] += s.both
		bytes[1] += s.both + s.p1
	}
	return rounds, bytes, nil
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
//	  ·W2, truncation                  1+1     P1 msg(B·d'); msg(B)
//
// That is 25 rounds for ViT and 18 for BERT and DistilBERT (the unfolded
// classifier, a product and its truncation, took 2 more).
func HeadCost(a Arch, batch int) (rounds int64, bytes [2]int64, err error) {
	if err := a.Validate(); err != nil {
		return 0, bytes, err
	}
	if a.Intermediate > 0 || a.Ablation != (proxy.Ablation{}) || a.TanhPooler {
		return 0, bytes, fmt.Errorf("secure: head cost: only for SelectFormer proxies with every module emulated")
	}
	if batch <= 0 {
		return 0, bytes, fmt.Errorf("secure: head cost: batch size %d", batch)
	}
	B, H, d, dEnt := batch, a.Hidden, a.MLPHidden, a.entropyHidden()
	var steps []step
	if a.Family == model.ViT {
		R := B
		steps = []step{{1, msg(R), 0}, {1, msg(R * H), 0}, {1, msg(R), 0},
			{1, 0, msg(R)}, truncReLU(R * d), {1, 0, msg(R * d)}, {1, msg(R * H), 0},
			{1, msg(2 * R * H), 0}, {1, msg(R * H), 0}}
	} else {
		steps = []step{{1, 0, msg(B * H)}, truncReLU(B * H)}
	}
	steps = append(steps, step{1, 0, msg(B * H)}, truncReLU(B*dEnt), step{1, 0, msg(B * dEnt)}, step{1, msg(B), 0})
	for _, s := range steps {
		rounds += s.rounds
		bytes[0] += s.both
		bytes[1] += s.both + s.p1
	}
	return rounds, bytes, nil
}

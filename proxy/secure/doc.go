// Package secure evaluates SelectFormer proxies (and, for baselines, the exact
// target model, the paper's "Oracle") over two-party additive secret sharing:
// the model owner (party 0) holds the network in the clear, the data owner
// (party 1) holds a batch of candidates in the clear, and together they
// compute a secret-shared prediction entropy per candidate; nothing else is
// revealed.
//
// # Flow
//
//   - The data owner embeds its candidates with the public, frozen embeddings
//     (Embed) and shares the result; for text models it also zeroes the
//     padded tokens' embeddings in the clear.
//   - Prepare shares the model owner's weights once per network and session
//     pair with the weight-mask trick (protocol.ShareWeight); Forward then
//     evaluates any number of batches, each in one pass whose rounds do not
//     depend on the batch size.
//   - Per block: the attention folded with its softmax MLP (see the last
//     bullets: no keys, values, scores or P are computed; 1/√headDim folded
//     into Q); the output projection; the
//     residual; LayerNorm with the exact mean subtraction, the squared
//     deviation (Square), the LayerNorm MLP (its first weights carry 1/hidden,
//     its second weights are W2⊗γ, so γ costs no extra round) and β added by
//     party 0. Then the class token, ViT's final LayerNorm or BERT's pooler
//     (ReLU) / DistilBERT's pre-classifier (ReLU), the classifier and the
//     entropy MLP. Both the classifier and the MLP's first layer are the
//     model owner's affine maps, so Prepare composes them in the clear
//     (W' = Wc·W1, b' = bc·W1 + b1) and the head runs one product and one
//     TruncReLU where it ran two products and a truncation: the logits,
//     which nothing else needs, are never computed (2 rounds fewer). With
//     the exact entropy the classifier stays apart.
//   - Padding (BERT, DistilBERT): the attention mask m is the data owner's
//     private input. Padded keys and values must vanish and padded scores
//     must enter the softmax MLP as its fill values: the block input's padded
//     rows are zeroed (from layer 1 on, protocol.MulPrivateRowBits: the
//     data owner knows m in the clear, so the model owner sends its masked
//     share and the data owner one bit per row; free at layer 0), the
//     key/value biases ride in the folded attention's augmented weights (the
//     mask column multiplies them; unfolded, as m⊗b: one MatMulWeights of m
//     for all layers), and the fill values' contribution to the MLP's first layer,
//     (1−m)·diag(Fill)·W1, is one MatMulWeights of 1−m for all layers. Since
//     m ∈ {0, 1}, none of these needs a truncation. Options.PublicMask applies
//     a public mask locally instead.
//   - Only the class token feeds the head, so the last block computes its
//     queries, attention output, LayerNorm (and FFN) for that token alone
//     (Options.FullLastLayer turns this off). With the softmax MLP every
//     block's attention is folded with the MLP (Prepared.foldedAttention;
//     the other blocks with every token's queries, the last with the class
//     token's): per batch
//     row, with Y_aug = [Y | m] the attention input and the mask column,
//     K = Y_aug·[Wk; b_K] and V = Y_aug·[Wv; b_V], so the MLP's first layer
//     on a query's scores is sc_h·W1 = q_h·(K_hᵀ·W1) and the
//     context is P_h·V_h = h_h·(W2·V_h) + b2·V_h, and both K_hᵀ·W1 and
//     [W2·V_h; b2·V_h] are Ŷᵀ·[Wk; b_K] and Ŷᵀ·[Wv; b_V] for
//     Ŷ = Y_augᵀ·[W1 | W2ᵀ | b2ᵀ] ([H+1, 2d+1]): two products with the
//     model owner's weights (Ŷ with the class rows' queries, then G and N),
//     each with its truncation, then q·Gᵀ (shared × shared), TruncReLU,
//     h·N (shared × shared) and a truncation: the 14 rounds of the
//     unfolded attention, but no product has all T·2I keys and values as
//     outputs and no shared × shared product all T scores (sst2 phase 0,
//     per candidate: the attention's weight products 4.0 M multiply-adds
//     where they were 152 M; the whole forward 50 rounds where 51, the
//     model owner sends 90 kB where 888 kB, the data owner 934 kB where
//     2.5 MB, the dealer 169 kB where 3.67 MB; qqp-bert's ⟨3L,12H,d16⟩
//     phase 2, per candidate: the data owner sends 15.9 MB where 20.1 MB,
//     the dealer 17.6 MB where 28.0 MB; BlockCost). The layer's key and
//     value biases ride in [Wk; b_K] and [Wv; b_V] (the mask column
//     multiplies them), so no layer needs m⊗b. Nothing new is opened: the weight products open the data
//     owner's masked input, the shared × shared products Beaver-masked
//     operands. With an exact softmax the last block's query weights are
//     shared apart from the key and value weights instead, so the query
//     product, its truncation and the dealer's material cover the B class
//     rows only, not all B·T rows (keys and values of every token, and the
//     class rows' queries, in one round: protocol.MatMulWeightsMany).
//   - Modules kept exact by the proxy's ablation, and every module of the
//     exact model (FromModel), run with the CrypTen-style protocol functions:
//     protocol.Softmax (padded scores shifted by −32), protocol.InvSqrt (with
//     Arch.InvSqrtShift to bring variances into its range) and γ by
//     MulPrivateVector, and the selection criterion's exact score registered
//     for it (RegisterExactScore: protocol.Entropy for the entropy, in
//     criterion_entropy.go; a criterion without one cannot be kept exact and
//     FromModelCriterion and Arch.Validate say so); the exact model's GeLU is x·σ(1.702x)
//     and BERT's pooler tanh is 2σ(2x)−1, with σ from the sign circuit, Exp on
//     (−∞, 0] and ReciprocalPositive on [1, 2].
//
// BlockCost and HeadCost document and compute the exact rounds and bytes of
// a proxy block and of a proxy's head; the tests assert them. BlockCostRows,
// HeadCostRows and ForwardCostRows give the same tables step by step, each
// row named by its module (a whole forward's: the private mask, the blocks,
// the head), whose sums are those totals. The package only computes: it runs on
// sessions the caller opens (selection's drivers in deployments); package
// bench runs both parties in one process and measures a forward of random
// weights (RandomNet) of the paper's target shapes (`mpcbench forward`).
//
// Fixed point: the default encoding (16 fractional bits) is enough; the
// fidelity tests measure max abs errors below 3e-4 nats for proxies. The
// folded P·V carries 3f fractional bits before its truncation, so attention
// contexts must stay below 2^(62−3f) in magnitude (2^14 at f = 16); the
// folded head's hidden pre-activations below 2^22, and so must the folded
// class attention's Ŷ, G, N, hidden pre-activations and contexts (2f + 8
// fractional bits before their truncations; TestClassAttention measures
// them at most 446 for inputs up to 25 and scores of standard deviation
// 30 at the sst2 shape). The shared × shared products run in narrower
// rings, exact only inside their bounds: the folded attention's two in
// Z_2^54 (attentionRing: below 2^12 at 2f + 8 fractional bits), the MLP
// LayerNorm's (x − μ)² and (x − μ)·r·γ in Z_2^50 (layerNormRing: below 2^16
// at 2f fractional bits, each element; the row's sum is taken after the
// truncation back to Z_2^64).
//
// # References
//
//   - X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and Practical Data
//     Selection for Transformers", arXiv:2310.02373 (2023), ICLR 2025: the
//     proxies evaluated here (§4) and the "Oracle" baseline; DESIGN.md at the
//     module root states the threat model and what is revealed.
//   - Products with the model owner's clear weights use Beaver triples with a
//     reusable weight mask (D. Beaver, "Efficient Multiparty Protocols Using
//     Circuit Randomization", CRYPTO '91); truncation is package protocol's
//     one-round exact truncation, not SecureML's local one (P. Mohassel,
//     Y. Zhang, IEEE S&P 2017); ReLU is the bit-sliced sign circuit (see
//     package protocol).
//   - Exact modules use CrypTen's approximations (B. Knott, S. Venkataraman,
//     A. Hannun, S. Sengupta, M. Ibrahim, L. van der Maaten, "CrypTen: Secure
//     Multi-Party Computation Meets Machine Learning", NeurIPS 2021).
package secure

// Package proxy generates the proxy models of SelectFormer (§4.2 of the paper) from
// a target transformer (package nn/model) and the labelled bootstrap set S_boot,
// evaluates them in plaintext (per-sample entropy) and saves/loads them.
//
// Generate follows the paper:
//
//  1. M_g = the bottom L = max(l_i) layers of the target, weights copied; M_g is
//     fine-tuned on S_boot while Observers (package mlp) record the inputs of its
//     nonlinear modules during the last epoch: every layer's attention softmax and
//     attention LayerNorm reciprocal square root, ViT's final LayerNorm and the
//     logits (input of the top softmax+entropy). The same backward passes score the
//     heads (see HeadScores).
//  2. One synthesised data set per module of M_g; the MLPs of every hidden width
//     d_i are trained ex vivo on it (mlp.Train), once per (module, d).
//  3. Per phase ⟨l_i, w_i, d_i⟩: the bottom l_i layers of M_g, the w_i best heads
//     of each layer, no FFN (nor the LayerNorm that belongs to it), ReLU instead of
//     GeLU/tanh, MLPs instead of the nonlinear modules, fine-tuned in vivo end to
//     end on S_boot.
//  4. Save/Load: model.safetensors + proxy.json.
//
// Two departures from the paper are options of Config. PhaseAblations keeps
// modules exact in chosen phases only: the attention softmax MLP is where a
// proxy loses most of its fidelity to the target (bench/QUALITY.md: on the
// MNIST ViT, Spearman with the target 0.63 with every module emulated, 0.82
// with the last phase's attention softmax exact), and the last phase, which
// sees the fewest candidates, can afford protocol.Softmax over MPC (about
// three times the rounds and twice the bytes of the MLP proxy's forward).
// EntropyHidden widens the entropy MLPs alone, which run once per candidate
// on C logits and cost little next to the attention MLPs. With distillation,
// Distill.SqrtEntropy calibrates the entropy MLP to √H, a monotone score that
// ranks candidates alike and keeps more of the confident end's order.
//
// The score is that of a selection criterion (mlp.Criterion), the prediction
// entropy unless Config.Criterion names another: the entropy MLP ("final
// MLP") is trained toward it ex vivo, in vivo and in the calibration, the
// plaintext forward computes it exactly when Ablation.ExactEntropy keeps it
// exact, and a proxy records it (Proxy.Criterion, "criterion" in proxy.json;
// absent in proxies saved before criteria existed, which load with the
// entropy). The names that say "entropy" (Entropy, SqrtEntropy,
// EntropyHidden, Ablation.ExactEntropy, entropyOf) keep meaning the final MLP
// and the calibration of whatever criterion's score it produces.
//
// Token/patch embeddings (and BERT's embedding LayerNorm) are frozen throughout and
// stay those of the target: the data owner evaluates them locally in the clear, so
// they are not part of the secure forward.
//
// Head choice: heads are ranked per layer by the first-order Taylor estimate of the
// loss change when a head is removed (Michel et al., 2019, "Are Sixteen Heads Really
// Better than One?"): with a gate ξ_h multiplying head h's context, ∂L/∂ξ_h =
// Σ_{rows, columns of h} W_O ⊙ ∂L/∂W_O, so the score Σ_batches |∂L/∂ξ_h| (normalised
// per layer) comes for free from the last epoch of M_g's fine-tuning. It measures
// what the task loss on S_boot, the data the proxies serve, loses without the head,
// unlike norm-based scores that ignore the downstream use.
//
// Padding: a proxy's attention sets masked scores to −Inf; its softmax MLP
// substitutes the MLP's fill value for them and zeroes their outputs (see package
// mlp), so padded keys get probability 0 and padded tokens cannot influence the
// other tokens, exactly as with the exact masked softmax.
//
// # References
//
//   - X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and Practical Data
//     Selection for Transformers", arXiv:2310.02373 (2023), ICLR 2025: §4.2
//     (proxy generation), §5 (baselines and ablations).
//   - P. Michel, O. Levy, G. Neubig, "Are Sixteen Heads Really Better than
//     One?", NeurIPS 2019 (head importance).
//   - D. Li, R. Shao, H. Wang, H. Guo, E. P. Xing, H. Zhang, "MPCFormer: Fast,
//     Performant and Private Transformer Inference with MPC", ICLR 2023 (the
//     MPCFormer baseline).
//   - The secure forward (package proxy/secure) runs on the protocols of
//     package protocol: Beaver triples (D. Beaver, CRYPTO '91), CrypTen-style
//     approximations for modules kept exact (B. Knott et al., NeurIPS 2021).
package proxy

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
// Departures from the paper are the defaults (see Defaults below);
// Config.Plain turns them off. PhaseAblations keeps
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
// # Defaults
//
// The zero Config (so selection.ModelOwner's and the modelowner binary's
// generation) is not the paper's plain generation but the one that measured
// best in bench/QUALITY.md ("Ours", the quality tool's row, which is this
// default); Config.Plain selects the paper's. Each setting, with the
// evidence (final proxy's Spearman with the adapted target on the pool;
// MNIST: ViT, pool 3,140, bootstrap 157, 500 public digits; Spam: DistilBERT,
// pool 2,000, bootstrap 100, 300 public mails):
//
//   - Distillation (DefaultDistill: α = 0.8, T = 1, class-balanced label
//     loss) from M_g on the bootstrap and Config.Public: the paper's label
//     tuning gives 0.38 on MNIST and 0.46 on Spam, distillation 0.68 and
//     0.90 with every module emulated (QUALITY.md, "label tuning (paper)"
//     and "ours, all MLPs"). Without Public it distils on the bootstrap and
//     mixes of it alone, still far better than the paper's: on MNIST (2
//     seeds, `--public-distill=false`) final proxy 0.83 and phase 1 0.52,
//     against 0.37 and 0.27 for label tuning on the same bootstraps, and
//     0.84 / 0.58 with the public digits (other bootstraps): give Public
//     where the model owner has any unlabelled inputs.
//   - Mixed inputs: min(DefaultMixup, MixupPerInput·inputs) mixes of two
//     distillation inputs (8,000 on both data sets; part of the change that
//     took MNIST from 0.53 to 0.63 and Spam from 0.68 to 0.90).
//   - MLPs trained on observed as well as synthesised activations
//     (RealMix DefaultRealMix, Reservoir DefaultReservoir, at least
//     DefaultObservedPoints points) and centred softmax MLPs
//     (CentreSoftmax): the rest of that change; the Gaussian fit alone
//     misses the tiny LayerNorm variances of blank patches.
//   - Entropy MLPs of DefaultEntropyHidden units: MNIST 0.78 at 16 units,
//     0.80 at 64, 0.82 at 128, 0.81 at 256; not measured apart on Spam,
//     whose two classes make the entropy a function of one margin (0.96
//     with it).
//   - Calibration of the entropy MLP (100 epochs at 0.003) to √H: MNIST 0.82
//     → 0.85 (against 0.86 for the exact entropy of the same logits), Spam
//     0.92 either way; without mixed inputs (TestDistillCalibration's
//     400-row fixture) √H ranks worse (0.81 against 0.92), which is why it
//     comes with the mixes.
//   - The last phase's attention softmax exact (PhaseAblations): MNIST 0.68
//     → 0.83, Spam 0.90 → 0.96; it costs that phase about three times the
//     rounds and twice the bytes of the all-MLP forward (MNIST: 269 rounds
//     instead of 87), paid on the fewest candidates. AllMLP opts out.
//
// None of these helped one data set and hurt the other in QUALITY.md's runs
// (√H ranked worse only without mixed inputs, which the default has from
// two distillation inputs on); where one changed nothing measurable (√H on
// Spam), it is kept for the data set it helps. The cost is generation time:
// at the quickstart's size (bootstrap 100, 300 public digits, 1,000 mixes,
// 50,000 points a MLP: its lighter setting) 9 s instead of 2 s on 2 cores;
// at QUALITY.md's MNIST size the default generation is most of the 60 s a
// secure run takes there.
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

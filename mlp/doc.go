// Package mlp holds the approximator MLPs of SelectFormer (§4.3 of the paper): tiny
// networks linear(in→d) → ReLU → linear(d→out) that replace the nonlinear modules of
// a proxy transformer, so that its secure evaluation needs only matrix products and
// ReLU.
//
// Three module kinds are emulated:
//
//   - AttnSoftmax: the softmax of attention along the last dimension; in = out = the
//     sequence length T (the width of a row of attention scores).
//   - InvSqrt: the reciprocal square root inside LayerNorm; in = out = 1. It maps the
//     row variance v to 1/√(v+ε). The mean subtraction and the affine γ/β of
//     LayerNorm stay exact (they are linear).
//   - SoftmaxEntropy: the final MLP, the softmax over the logits fused with the
//     selection criterion's score; in = the number of classes C, out = 1 (by
//     default the prediction entropy in nats).
//
// # Selection criteria
//
// The score a selection ranks candidates by is a Criterion: a name, the exact
// score of one row of logits, the range of the scores (which must fit the
// fixed-point encoding) and whether a √ calibration applies. The prediction
// entropy (DefaultCriterion) is the one registered here, in
// criterion_entropy.go; a new criterion is one such file calling
// RegisterCriterion, plus, only if it must also run exactly over MPC (the
// Oracle), one file in proxy/secure registering its secure version
// (secure.RegisterExactScore). Dataset.Criterion makes the final MLP's data set
// target a criterion; proxy.Config.Criterion selects it for a proxy, which
// records it (proxy.Proxy.Criterion).
//
// # Ex vivo training
//
// An Observer collects the inputs a module sees while the backbone is tuned on the
// bootstrap set. A diagonal Gaussian ⟨μ, σ⟩ is fitted to them (per feature by
// default, see Observer.Gaussian), a Dataset synthesises N inputs from it (generated
// deterministically in mini-batches from a seed, so millions of points never sit in
// memory and every MLP trained on the same Dataset sees exactly the same points),
// and Train fits an MLP to the exact outputs with Adam on mini-batches. Train returns
// a Report with the approximation error on held-out synthesised points and on the
// observed real inputs.
//
// Two options bring the training rows closer to the inputs the MLP will see.
// Dataset.RealFrac resamples a share of the rows from the observed ones (a
// diagonal Gaussian reproduces each feature's marginal, not the joint shape of
// real rows: the clusters of LayerNorm variances, the few large scores of an
// attention row). Dataset.Centre (attention softmax) trains on rows minus their
// mean, fitted to centred observations (Observer.CentredGaussian): the softmax
// ignores a row's common shift, which otherwise inflates every feature's spread;
// the centring is folded into W1, so the MLP's form does not change.
//
// # Padding
//
// In data sets and at Forward, an attention-score entry equal to −Inf marks a
// padded (masked) key. The MLP replaces such an input by its per-feature fill value
// Fill[j] = μ_j − 4σ_j (a "very low score" that is still a small fixed-point
// number), and multiplies the corresponding output by 0, so masked keys get
// probability exactly 0 and the gradient with respect to them is 0. The exact
// target is the softmax over the unmasked entries only. A proxy obtains this
// behaviour by setting its attention's MaskFill to −Inf. A secure evaluation does
// the same with the data owner's mask m ∈ {0,1}: x' = m⊙x + (1−m)⊙Fill before the
// MLP and y' = m⊙y after it.
//
// # Fixed-point form
//
// Training happens on standardised inputs and outputs, but the normalisation is
// folded into the weights afterwards: the exported weights W1, b1, W2, b2
// (Weights, row-major [out, in] like nn.Linear) act on raw inputs and produce raw
// outputs, so a secure evaluation is exactly two products with P0's clear weights
// and one ReLU. Report.Ranges records the magnitudes of inputs, hidden
// pre-activations, outputs and weights observed on the evaluation points;
// Ranges.Check verifies them against a fixed-point bound such as FixedPointBound,
// the |x| < 2^15 of the project's default encoding (share.DefaultFixedPoint, 16
// fractional bits). The documented input domain of an MLP is [Ranges.InMin,
// Ranges.InMax]; outside it the MLP extrapolates linearly.
//
// # References
//
//   - X. Ouyang, F. X. Lin, Y. Ji, "SelectFormer: Private and Practical Data
//     Selection for Transformers", arXiv:2310.02373 (2023), ICLR 2025:
//     §4.3 (MLP approximation of fused nonlinear modules, trained ex vivo on
//     Gaussian-synthesised inputs, then in vivo).
//   - Their secure evaluation (package proxy/secure) needs only products with
//     the model owner's clear weights (Beaver triples: D. Beaver, "Efficient
//     Multiparty Protocols Using Circuit Randomization", CRYPTO '91) and one
//     ReLU (package protocol), instead of CrypTen's iterative approximations
//     (B. Knott et al., "CrypTen: Secure Multi-Party Computation Meets
//     Machine Learning", NeurIPS 2021) of the modules they replace.
package mlp

package secure

// The documented error of the secure forward against the plaintext one
// (proxy.Proxy.Entropies; model.Model's entropies for the exact model), at
// the default encoding (16 fractional bits): the largest |secure score −
// plaintext score| of a candidate that the fidelity tests assert
// (TestForwardViTProxyFidelity, TestForwardViTExactSoftmaxFidelity,
// TestForwardTextProxyFidelity, TestForwardOracleFidelity). They measure
// far less (below 3e-4 nats for MLP-only proxies); the bounds leave room
// for other weights and inputs. The truncations round either way, so two
// runs of one forward differ too, each within the bound.
const (
	// ScoreErrorMLP bounds a proxy whose nonlinear modules are all MLPs.
	ScoreErrorMLP = 0.01
	// ScoreErrorExactSoftmax bounds a proxy that keeps its attention
	// softmax exact (protocol.Softmax; the default generation's last
	// phase).
	ScoreErrorExactSoftmax = 0.02
	// ScoreErrorExactModules bounds a proxy that keeps LayerNorm or the
	// score exact (protocol.InvSqrt, the exact criterion: CrypTen-style
	// approximations whose own errors are about 1e-2); also the bound of a
	// text model's forward with Options.PrivateEmbeddings (its embedding
	// LayerNorm exact), which ScoreError does not see in the architecture.
	ScoreErrorExactModules = 0.05
	// ScoreErrorExactModel bounds the exact model (FromModel: every
	// module exact, GeLU as x·σ(1.702x)).
	ScoreErrorExactModel = 0.1
)

// ScoreError is the documented bound on |secure score − plaintext score|
// of a candidate for a network of architecture a evaluated with public
// embeddings (see ScoreErrorMLP and the others), as a selection runs it:
// what a recomputation in the clear must allow for
// (selection/purchase's audit allows twice it between two candidates).
func ScoreError(a Arch) float64 {
	switch {
	case a.Intermediate > 0:
		return ScoreErrorExactModel
	case a.Ablation.ExactLayerNorm || a.Ablation.ExactEntropy:
		return ScoreErrorExactModules
	case a.Ablation.ExactAttnSoftmax:
		return ScoreErrorExactSoftmax
	}
	return ScoreErrorMLP
}

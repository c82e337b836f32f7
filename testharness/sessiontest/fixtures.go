package sessiontest

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/share"
)

// The fixtures of the tests that run whole selections (selection's and
// selection/shard's), so that a sharded run is compared with an unsharded
// one on the same inputs.

// ShareValues is the body of the tests' substitute secure forward: the
// data owner shares value(phase, i) of each candidate i of idx (encoded
// with fp) as its input, the model owner learning nothing; with square it
// returns shares of their squares (protocol.Session.SquareFixed, which
// draws square and wrap pairs).
func ShareValues(ctx context.Context, s *protocol.Session, fp share.FixedPoint, phase int, idx []int, value func(phase, idx int) float64, square bool) (*share.Tensor, error) {
	var x *share.Tensor
	var err error
	if s.Party() == 0 {
		x, err = s.ShareInput(1, nil, len(idx))
	} else {
		xs := make([]float64, len(idx))
		for j, i := range idx {
			xs[j] = value(phase, i)
		}
		enc, err := fp.EncodeTensor(xs, len(xs))
		if err != nil {
			return nil, err
		}
		x, err = s.ShareInput(1, enc)
	}
	if err != nil || !square {
		return x, err
	}
	return s.SquareFixed(ctx, x)
}

// RandomWords hands add the parts of m (drawn for q) whose words are
// uniformly random, so that two draws share none of them but by drawing
// the same material: the tail word of packed bits (a bit pair's, a wrap
// pair's u or v: its high bits cleared)
// and the wrap pairs' shares of u·v·2^(64−f) (f random bits a word) are
// left out.
func RandomWords(q beaver.Request, m beaver.Material, add func([]uint64)) {
	for i, p := range m.Parts {
		// Packed bits (a bit pair's XOR shares, a wrap pair's u or v):
		// the tail word holds only N mod 64 random bits.
		packed := m.Kind == beaver.KindBitPair && i == 0 || m.Kind == beaver.KindWrap && i < 2
		if packed && q.N%64 != 0 && len(p) > 0 {
			p = p[:len(p)-1]
		}
		if m.Kind == beaver.KindWrap && i == 2 {
			continue
		}
		add(p)
	}
}

// Common counts the words of b that are also in a.
func Common(a, b []uint64) int {
	set := make(map[uint64]bool, len(a))
	for _, w := range a {
		set[w] = true
	}
	n := 0
	for _, w := range b {
		if set[w] {
			n++
		}
	}
	return n
}

// SecureScoreTol is the fixed-point error, in nats, within which a secure
// selection may order two candidates either way (a near-tie): 4 ulps of
// the default encoding (share.DefaultFracBits), about 6.1e-5 nats.
// Probabilistic truncation makes a product's last bits depend on the
// correlated randomness, so two secure runs of one selection (sharded and
// not, pipelined and not, with and without a dealer) and the plaintext
// pipeline may swap candidates whose plaintext scores lie this close to a
// phase's boundary, and only those. On the tests' all-MLP proxies
// (PlainGeneration on TinyViT) the candidates a secure run orders against
// the plaintext lie within 1 ulp of the boundary (0.8 at most over repeated
// runs of TestSecureSharded), while a phase's entropies span only about
// 32 ulps: proxy/secure's ScoreErrorMLP (0.01 nats, a bound for any
// weights and inputs) would excuse every choice there.
const SecureScoreTol = 4.0 / (1 << share.DefaultFracBits)

// NearTies compares a selection got with a reference want (the plaintext
// top-k, or another secure run's survivors) among the same candidates cand
// (pool indices) whose plaintext scores are score (score[j] is cand[j]'s):
// every candidate kept by one and not the other must be a near-tie, its
// plaintext score within tol of the boundary, the len(want)-th largest
// score of cand (the least the plaintext top-k keeps). It returns how many
// candidates one keeps and the other does not, and an error naming those
// that are not near-ties — a wrong selection, however few they are — or
// nil.
func NearTies(cand []int, score []float64, want, got []int, tol float64) (int, error) {
	if len(score) != len(cand) || len(want) == 0 || len(want) > len(cand) {
		return 0, fmt.Errorf("%d scores, %d candidates, %d kept", len(score), len(cand), len(want))
	}
	sorted := slices.Clone(score)
	slices.Sort(sorted)
	boundary := sorted[len(sorted)-len(want)]
	inWant, inGot := make(map[int]bool, len(want)), make(map[int]bool, len(got))
	for _, c := range want {
		inWant[c] = true
	}
	for _, c := range got {
		inGot[c] = true
	}
	diff, seen := 0, 0
	var far []string
	for j, c := range cand {
		if inGot[c] {
			seen++
		}
		if inWant[c] == inGot[c] {
			continue
		}
		diff++
		if math.Abs(score[j]-boundary) > tol {
			far = append(far, fmt.Sprintf("candidate %d (score %.5f) kept=%v", c, score[j], inGot[c]))
		}
	}
	if seen != len(got) {
		far = append(far, fmt.Sprintf("%d of the %d kept are not candidates", len(got)-seen, len(got)))
	}
	if len(far) > 0 {
		return diff, fmt.Errorf("%d of %d candidates differ from the reference, %d of them farther than %g from the boundary %.5f: %s",
			diff, len(cand), len(far), tol, boundary, strings.Join(far, "; "))
	}
	return diff, nil
}

// PhaseNearTies compares a run's survivors got[i] with a reference run's
// ref[i], phase by phase, both from the candidates cand (pool indices);
// scores(i, c) returns phase i's plaintext scores of the candidates c.
// While the two runs' phases start from the same candidates, got's
// survivors may differ from ref's by near-ties alone (NearTies). Once an
// earlier near-tie swap left them different candidates, each run's
// survivors are compared with the plaintext top-k of its own candidates
// instead (k = len(ref[i])): a swap may displace others downstream, but
// each run must still keep the top of what it had. It returns how many
// survivors each phase swapped, and the first phase's error.
func PhaseNearTies(cand []int, ref, got [][]int, scores func(phase int, cand []int) ([]float64, error), tol float64) ([]int, error) {
	if len(ref) != len(got) {
		return nil, fmt.Errorf("%d phases, the reference %d", len(got), len(ref))
	}
	swaps := make([]int, len(ref))
	candRef, candGot := cand, cand
	for i := range ref {
		sRef, err := scores(i, candRef)
		if err != nil {
			return swaps, err
		}
		if slices.Equal(candRef, candGot) {
			if swaps[i], err = NearTies(candRef, sRef, ref[i], got[i], tol); err != nil {
				return swaps, fmt.Errorf("phase %d: %w", i+1, err)
			}
		} else {
			sGot, err := scores(i, candGot)
			if err != nil {
				return swaps, err
			}
			for _, r := range []struct {
				name  string
				cand  []int
				score []float64
				kept  []int
			}{{"the reference", candRef, sRef, ref[i]}, {"the run", candGot, sGot, got[i]}} {
				n, err := NearTies(r.cand, r.score, plainTop(r.cand, r.score, len(ref[i])), r.kept, tol)
				if err != nil {
					return swaps, fmt.Errorf("phase %d (candidates differ after an earlier near-tie), %s against the plaintext: %w", i+1, r.name, err)
				}
				swaps[i] = max(swaps[i], n)
			}
		}
		candRef, candGot = ref[i], got[i]
	}
	return swaps, nil
}

// plainTop returns the pool indices of the k candidates of highest score
// (PlainTopK's), ascending.
func plainTop(cand []int, score []float64, k int) []int {
	pos := PlainTopK(score, cand, k)
	out := make([]int, len(pos))
	for j, q := range pos {
		out[j] = cand[q]
	}
	slices.Sort(out)
	return out
}

// ProxyScores returns the plaintext scores of each phase's proxy (the
// entropies of proxies[phase]) of candidates of pool: PhaseNearTies'
// scores.
func ProxyScores(proxies []*proxy.Proxy, pool model.Input) func(phase int, cand []int) ([]float64, error) {
	return func(phase int, cand []int) ([]float64, error) {
		if phase >= len(proxies) {
			return nil, fmt.Errorf("phase %d of %d proxies", phase+1, len(proxies))
		}
		in, err := pool.Select(cand)
		if err != nil {
			return nil, err
		}
		return proxies[phase].Entropies(in, 64)
	}
}

// ShareWeights shares a vector of the model owner's under the weight base
// wb: what the tests' substitute forward adds to a phase's preparation so
// that a run draws weight masks (the items whose reuse reveals weights) as
// well as triples, square and wrap pairs.
func ShareWeights(ctx context.Context, s *protocol.Session, wb uint64) error {
	var g *share.Tensor
	if s.Party() == 0 {
		g, _ = share.FromData([]uint64{1, 2, 3, 4}, 4)
	}
	_, err := s.ShareVector(ctx, wb, g, 4)
	return err
}

// Labels is the model owner's labelling of the bootstrap sample by the
// pool's true labels (labels[i] of candidate i).
func Labels(labels []int) func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
	return func(ctx context.Context, idx []int, in model.Input) ([]int, error) {
		if in.Len() != len(idx) {
			return nil, fmt.Errorf("%d inputs for %d indices", in.Len(), len(idx))
		}
		out := make([]int, len(idx))
		for j, i := range idx {
			out[j] = labels[i]
		}
		return out, nil
	}
}

// TinyViT is the secure tests' target and pool: an untrained tiny ViT
// (its entropies all near ln 10, many near-ties) and the first n MNIST
// images of the bundled subset, normalized, with their labels.
func TinyViT(t testing.TB, n int) (pool model.Input, labels []int, target *model.Model) {
	t.Helper()
	set, err := dataset.MNIST()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := set.Subset(dataset.Indices(n))
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Config{Family: model.ViT, Hidden: 16, Heads: 2, Layers: 2, Intermediate: 32, LayerNormEps: 1e-12, HiddenAct: "gelu",
		ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}
	target, err = model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return model.NormalizeImages(sub.Images, 1), sub.Labels, target
}

// PlainGeneration is the secure tests' proxy generation: the paper's plain
// generation, one short epoch each (these tests are about the pipeline,
// checkpoints and the plaintext agreement of all-MLP proxies, whose
// scores two runs reproduce within a few ulps; the default's exact
// softmax in the last phase moves them by up to 0.001 nats).
func PlainGeneration(log *slog.Logger) proxy.Config {
	return proxy.Config{Plain: true, Tune: proxy.TrainConfig{Epochs: 1, BatchSize: 8, LR: 1e-3}, InVivo: proxy.TrainConfig{Epochs: 1, BatchSize: 8, LR: 5e-4},
		Points: 2000, MLP: mlp.TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 1}, Seed: 3, Logger: log}
}

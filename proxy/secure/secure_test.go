package secure

import (
	"context"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/selectformer/selectformer/examples/dataset"
	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// vitFixture is a tiny ViT trained briefly on MNIST digits, a SelectFormer
// proxy generated from it, and 256 held-out candidates.
type vitFixture struct {
	target *model.Model
	proxy  *proxy.Proxy
	// exactSM is a second phase's proxy with the attention softmax exact
	// (proxy.Config.PhaseAblations).
	exactSM *proxy.Proxy
	cand    model.Input
}

var (
	vitOnce sync.Once
	vitFix  *vitFixture
	vitErr  error
)

func getViT(t *testing.T) *vitFixture {
	t.Helper()
	vitOnce.Do(func() {
		start := time.Now()
		set, err := dataset.MNIST()
		if err != nil {
			vitErr = err
			return
		}
		perm := dataset.Shuffled(dataset.Indices(set.Len()), dataset.NewRand(11))
		sub := func(idx []int) (model.Input, []int) {
			s, err := set.Subset(idx)
			if err != nil {
				vitErr = err
				return model.Input{}, nil
			}
			return model.NormalizeImages(s.Images, 1), s.Labels
		}
		train, trainY := sub(perm[:1500])
		boot, bootY := sub(perm[1500:1900])
		cand, _ := sub(perm[1900:2156])
		if vitErr != nil {
			return
		}
		cfg := model.Config{Family: model.ViT, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64, LayerNormEps: 1e-12, HiddenAct: "gelu",
			ImageSize: 28, PatchSize: 7, NumChannels: 1, Labels: model.DefaultLabels(10)}
		m, err := model.New(cfg, 1)
		if err != nil {
			vitErr = err
			return
		}
		if _, err := model.Train(m, train, trainY, model.TrainConfig{Epochs: 8, BatchSize: 32, LR: 3e-3, WarmupFrac: 0.05, ClipNorm: 1, Seed: 2}); err != nil {
			vitErr = err
			return
		}
		// Both proxies have an entropy MLP wider than their other MLPs
		// (Arch.EntropyHidden); the second keeps the attention softmax
		// exact (protocol.Softmax).
		pc := proxy.Config{Phases: []proxy.Shape{{Layers: 2, Heads: 2, MLPHidden: 8}, {Layers: 2, Heads: 2, MLPHidden: 8}},
			PhaseAblations: []proxy.Ablation{{}, proxy.NoAttnSM}, EntropyHidden: 24,
			Tune: proxy.TrainConfig{Epochs: 1, BatchSize: 32, LR: 1e-3}, InVivo: proxy.TrainConfig{Epochs: 2, BatchSize: 16, LR: 5e-4},
			Points: 20_000, MLP: mlp.TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2}, Seed: 3, Logger: quiet()}
		// The default distillation with 2,000 mixes of the bootstrap's
		// 400 digits instead of the default's 8,000: the proxies' structure
		// is the default's, their in-vivo tuning and calibration four times
		// shorter (the fixture: 33 s → 18 s), and the fidelity tests' margins
		// as wide (exact softmax: top-20% overlap 1.000, was 0.980).
		pc.Distill = proxy.DefaultDistill(boot.Len(), "")
		pc.Distill.Mixup = 2000
		res, err := proxy.Generate(context.Background(), m, boot, bootY, pc)
		if err != nil {
			vitErr = err
			return
		}
		vitFix = &vitFixture{target: m, proxy: res.Proxies[0], exactSM: res.Proxies[1], cand: cand}
		slog.Debug("fixture", "elapsed", time.Since(start))
	})
	if vitErr != nil {
		t.Fatal(vitErr)
	}
	return vitFix
}

// secureEntropies runs Prepare + one Forward of the whole batch and reveals
// the entropies; it returns them with both parties' forward costs.
func secureEntropies(t *testing.T, net *Net, arch Arch, batch *Batch, n int, opt Options, fp share.FixedPoint) ([]float64, [2]twoparty.Cost) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type out struct {
		h    []float64
		cost twoparty.Cost
	}
	var seeds [2]share.Seed
	seeds[0][0], seeds[1][0] = 1, 2 // deterministic dealer
	r, err := runLocal(ctx, localConfig{FixedPoint: fp, Seeds: seeds}, func(ctx context.Context, s *protocol.Session) (out, error) {
		var nw *Net
		var in *Batch
		if s.Party() == 0 {
			nw = net
			if opt.PublicMask {
				in = &Batch{Mask: batch.Mask}
			}
		} else {
			in = batch
		}
		p, err := Prepare(ctx, s, arch, nw, opt)
		if err != nil {
			return out{}, err
		}
		m := twoparty.NewMeter(s)
		h, err := p.Forward(ctx, s, n, in)
		if err != nil {
			return out{}, err
		}
		c := m.Since()
		v, err := Reveal(ctx, s, h)
		return out{v, c}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r[0].h, r[1].h) {
		t.Fatal("parties revealed different entropies")
	}
	return r[0].h, [2]twoparty.Cost{r[0].cost, r[1].cost}
}

// embeddedFidelity embeds cand with m's public embeddings, runs net's secure
// forward on them (public mask, default encoding) and compares the entropies
// with want (see fidelity).
func embeddedFidelity(t *testing.T, net *Net, m *model.Model, cand model.Input, want []float64) (maxErr, rho, overlap float64, cost [2]twoparty.Cost) {
	t.Helper()
	batch, err := Embed(m, cand)
	if err != nil {
		t.Fatal(err)
	}
	got, cost := secureEntropies(t, net, net.Arch, batch, cand.Len(), Options{}, share.DefaultFixedPoint)
	maxErr, rho, overlap = fidelity(t, got, want)
	return maxErr, rho, overlap, cost
}

// fidelity compares secure and plaintext entropies: max abs error, Spearman
// and the overlap of the top 20% sets.
func fidelity(t *testing.T, got, want []float64) (maxErr, rho, overlap float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d secure entropies, %d plaintext", len(got), len(want))
	}
	for i := range got {
		maxErr = max(maxErr, math.Abs(got[i]-want[i]))
	}
	rho, err := proxy.Spearman(got, want)
	if err != nil {
		t.Fatal(err)
	}
	k := len(got) / 5
	top := func(v []float64) map[int]bool {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
		m := map[int]bool{}
		for _, i := range idx[:k] {
			m[i] = true
		}
		return m
	}
	tg, tw := top(got), top(want)
	n := 0
	for i := range tg {
		if tw[i] {
			n++
		}
	}
	return maxErr, rho, float64(n) / float64(k)
}

func TestForwardViTProxyFidelity(t *testing.T) {
	f := getViT(t)
	p := f.proxy
	want, err := p.Entropies(f.cand, 256)
	if err != nil {
		t.Fatal(err)
	}
	seq := p.Model.Config.NumPatches() + 1
	net, err := FromProxy(p, seq)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := Embed(p.Model, f.cand)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got, cost := secureEntropies(t, net, net.Arch, batch, f.cand.Len(), Options{}, share.DefaultFixedPoint)
	t.Logf("secure forward of %d candidates: %v, rounds %d, bytes p0 %d p1 %d", len(got), time.Since(start).Round(time.Millisecond),
		cost[0].Stream.Rounds, cost[0].Stream.BytesSent, cost[1].Stream.BytesSent)
	maxErr, rho, overlap := fidelity(t, got, want)
	t.Logf("max abs error %.5f nats, Spearman %.5f, top-20%% overlap %.3f", maxErr, rho, overlap)
	if bound := ScoreError(net.Arch); maxErr > bound || rho < 0.999 || overlap < 0.98 {
		t.Errorf("fidelity: max abs error %.5f (≤ %g), Spearman %.5f (≥ 0.999), overlap %.3f (≥ 0.98)", maxErr, bound, rho, overlap)
	}

	// Private patch embeddings: the data owner shares raw patches.
	rows, err := EmbedRows(p.Model.Config, f.cand, seq)
	if err != nil {
		t.Fatal(err)
	}
	got, cost = secureEntropies(t, net, net.Arch, rows, f.cand.Len(), Options{PrivateEmbeddings: true}, share.DefaultFixedPoint)
	maxErr, rho, overlap = fidelity(t, got, want)
	t.Logf("private embeddings: rounds %d, bytes p0 %d p1 %d; max abs error %.5f, Spearman %.5f, overlap %.3f",
		cost[0].Stream.Rounds, cost[0].Stream.BytesSent, cost[1].Stream.BytesSent, maxErr, rho, overlap)
	if maxErr > ScoreErrorMLP || rho < 0.999 || overlap < 0.98 {
		t.Errorf("private embeddings: max abs error %.5f (≤ %g), Spearman %.5f (≥ 0.999), overlap %.3f (≥ 0.98)", maxErr, ScoreErrorMLP, rho, overlap)
	}
}

// TestForwardViTExactSoftmaxFidelity evaluates a proxy whose attention
// softmax is exact (the ablation of a last phase, run by protocol.Softmax)
// and whose entropy MLP is wider than its other MLPs, and compares it with
// the plaintext proxy.
func TestForwardViTExactSoftmaxFidelity(t *testing.T) {
	f := getViT(t)
	p := f.exactSM
	if p.AttnMLP[0] != nil || p.Entropy == nil || p.Entropy.Hidden() != 24 {
		t.Fatalf("fixture: attention MLP %v, entropy MLP of width %d", p.AttnMLP[0], p.Entropy.Hidden())
	}
	if q := f.proxy; q.AttnMLP[0] == nil || q.Ablation != (proxy.Ablation{}) || q.Entropy.Hidden() != 24 {
		t.Fatalf("fixture: the first phase's proxy has ablation %+v, entropy MLP of width %d", q.Ablation, q.Entropy.Hidden())
	}
	want, err := p.Entropies(f.cand, 256)
	if err != nil {
		t.Fatal(err)
	}
	// A saved proxy keeps its ablation and its entropy MLP's width.
	dir := t.TempDir()
	if err := p.Save(dir, nil); err != nil {
		t.Fatal(err)
	}
	q, err := proxy.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if q.Ablation != p.Ablation || q.Entropy == nil || q.Entropy.Hidden() != 24 {
		t.Fatalf("loaded proxy: ablation %+v, entropy MLP %v", q.Ablation, q.Entropy)
	}
	if again, err := q.Entropies(f.cand, 256); err != nil || !slices.Equal(again, want) {
		t.Fatalf("loaded proxy's entropies differ (%v)", err)
	}
	net, err := FromProxy(q, p.Model.Config.NumPatches()+1)
	if err != nil {
		t.Fatal(err)
	}
	if !net.Arch.Ablation.ExactAttnSoftmax || net.Arch.EntropyHidden != 24 || net.Arch.MLPHidden != 8 {
		t.Fatalf("arch %+v: want the exact attention softmax, MLPs of width 8 and an entropy MLP of width 24", net.Arch)
	}
	maxErr, rho, overlap, cost := embeddedFidelity(t, net, p.Model, f.cand, want)
	t.Logf("exact attention softmax: rounds %d, bytes p0 %d p1 %d; max abs error %.5f nats, Spearman %.5f, overlap %.3f",
		cost[0].Stream.Rounds, cost[0].Stream.BytesSent, cost[1].Stream.BytesSent, maxErr, rho, overlap)
	if bound := ScoreError(net.Arch); maxErr > bound || bound != ScoreErrorExactSoftmax || rho < 0.998 || overlap < 0.98 {
		t.Errorf("fidelity: max abs error %.5f (≤ %g, want %g), Spearman %.5f (≥ 0.998), overlap %.3f (≥ 0.98)", maxErr, bound, ScoreErrorExactSoftmax, rho, overlap)
	}
}

package secure

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/mlp"
	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/proxy"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

const textSeq = 12

// textData returns n synthetic padded token sequences (lengths 3..textSeq,
// the first token a class token) labelled by whether token 5 occurs more than
// token 6.
func textData(n int, seed uint64) (model.Input, []int) {
	rng := rand.New(rand.NewPCG(seed, 9))
	var in model.Input
	labels := make([]int, n)
	for i := 0; i < n; i++ {
		l := 3 + rng.IntN(textSeq-2)
		ids, mask := make([]int, textSeq), make([]int, textSeq)
		ids[0], mask[0] = 1, 1
		c5, c6 := 0, 0
		for j := 1; j < l; j++ {
			ids[j], mask[j] = 2+rng.IntN(8), 1
			switch ids[j] {
			case 5:
				c5++
			case 6:
				c6++
			}
		}
		if c5 > c6 {
			labels[i] = 1
		}
		in.IDs, in.Mask = append(in.IDs, ids), append(in.Mask, mask)
	}
	return in, labels
}

// textTarget trains a tiny text target of family f.
func textTarget(t *testing.T, f model.Family) *model.Model {
	t.Helper()
	cfg := model.Config{Family: f, Hidden: 32, Heads: 4, Layers: 2, Intermediate: 64, LayerNormEps: 1e-12, HiddenAct: "gelu",
		VocabSize: 20, MaxPositions: 16, TypeVocabSize: 2, Labels: model.DefaultLabels(2)}
	if f == model.DistilBERT {
		cfg.TypeVocabSize = 0
	}
	m, err := model.New(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	train, y := textData(300, 1)
	if _, err := model.Train(m, train, y, model.TrainConfig{Epochs: 6, BatchSize: 16, LR: 5e-3, ClipNorm: 1, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	return m
}

// textProxy generates a SelectFormer proxy of a tiny text target of family f.
func textProxy(t *testing.T, f model.Family, ab proxy.Ablation) (*proxy.Proxy, model.Input) {
	t.Helper()
	m := textTarget(t, f)
	boot, by := textData(200, 2)
	pc := proxy.Config{Plain: true, Phases: []proxy.Shape{{Layers: 2, Heads: 2, MLPHidden: 8}},
		Tune: proxy.TrainConfig{Epochs: 1, BatchSize: 32, LR: 1e-3}, InVivo: proxy.TrainConfig{Epochs: 1, BatchSize: 16, LR: 5e-4},
		Points: 10_000, MLP: mlp.TrainConfig{BatchSize: 128, LR: 1e-2, Epochs: 2}, Seed: 3, Logger: quiet(), Ablation: ab}
	res, err := proxy.Generate(context.Background(), m, boot, by, pc)
	if err != nil {
		t.Fatal(err)
	}
	cand, _ := textData(256, 3)
	return res.Proxies[0], cand
}

func TestForwardTextProxyFidelity(t *testing.T) {
	for _, c := range []struct {
		family   model.Family
		public   bool
		privEmb  bool
		ablation proxy.Ablation
		// The bounds (0.01 nats, 0.999, 98%); looser with CrypTen's
		// exact modules, whose own errors are ~1e-2 (protocol.Entropy).
		maxErr, minRho, minOverlap float64
	}{
		{model.BERT, false, false, proxy.Ablation{}, ScoreErrorMLP, 0.999, 0.98},
		{model.BERT, true, false, proxy.Ablation{}, ScoreErrorMLP, 0.999, 0.98},
		{model.DistilBERT, false, false, proxy.Ablation{}, ScoreErrorMLP, 0.999, 0.98},
		// Private embeddings: one-hot rows, exact embedding LayerNorm.
		{model.BERT, false, true, proxy.Ablation{}, ScoreErrorExactModules, 0.99, 0.95},
		// Every module exact: protocol.Softmax with the private mask, InvSqrt
		// (variances rescaled by 4^2), protocol.Entropy.
		{model.BERT, false, false, proxy.NoApprox, ScoreErrorExactModules, 0.98, 0.95},
	} {
		t.Run(fmt.Sprintf("%s/public=%v/private_embeddings=%v/ablation=%+v", c.family, c.public, c.privEmb, c.ablation), func(t *testing.T) {
			p, cand := textProxy(t, c.family, c.ablation)
			want, err := p.Entropies(cand, 256)
			if err != nil {
				t.Fatal(err)
			}
			net, err := FromProxy(p, textSeq)
			if err != nil {
				t.Fatal(err)
			}
			if c.ablation.ExactLayerNorm || c.privEmb {
				net.Arch.InvSqrtShift = 2
			}
			batch, err := Embed(p.Model, cand)
			if c.privEmb {
				batch, err = EmbedRows(p.Model.Config, cand, textSeq)
			}
			if err != nil {
				t.Fatal(err)
			}
			opt := Options{PublicMask: c.public, PrivateEmbeddings: c.privEmb}
			got, cost := secureEntropies(t, net, net.Arch, batch, cand.Len(), opt, share.DefaultFixedPoint)
			maxErr, rho, overlap := fidelity(t, got, want)
			t.Logf("rounds %d, bytes p0 %d p1 %d; max abs error %.5f nats, Spearman %.5f, top-20%% overlap %.3f",
				cost[0].Stream.Rounds, cost[0].Stream.BytesSent, cost[1].Stream.BytesSent, maxErr, rho, overlap)
			if !c.privEmb && ScoreError(net.Arch) != c.maxErr {
				t.Errorf("ScoreError(%+v) = %g, want %g", net.Arch.Ablation, ScoreError(net.Arch), c.maxErr)
			}
			if maxErr > c.maxErr || rho < c.minRho || overlap < c.minOverlap {
				t.Errorf("fidelity: max abs error %.5f (≤ %g), Spearman %.5f (≥ %g), overlap %.3f (≥ %g)", maxErr, c.maxErr, rho, c.minRho, overlap, c.minOverlap)
			}
			if c.public || c.privEmb || c.ablation != (proxy.Ablation{}) {
				return
			}
			// The mask matters: ignoring it (no padding) changes the entropies.
			unmasked := &Batch{X: batch.X}
			got2, _ := secureEntropies(t, net, net.Arch, unmasked, cand.Len(), Options{}, share.DefaultFixedPoint)
			if e, _, _ := fidelity(t, got2, want); e < 0.01 {
				t.Errorf("entropies without the mask differ by only %.5f", e)
			}
		})
	}
}

// TestBlockCost runs single blocks of random proxies and asserts their exact
// rounds and bytes against BlockCost.
func TestBlockCost(t *testing.T) {
	for _, c := range []struct {
		name   string
		family model.Family
		public bool
		full   bool // FullLastLayer
		layer  int
		batch  int
		// exactSM keeps the attention softmax exact (a last phase's
		// ablation): its rounds and bytes are pinned against the MLP
		// block's, see below.
		exactSM bool
	}{
		{"bert layer 0", model.BERT, false, false, 0, 3, false},
		{"bert public mask", model.BERT, true, false, 0, 3, false},
		{"bert layer 1 full", model.BERT, false, true, 1, 2, false},
		{"bert public mask layer 1 full", model.BERT, true, true, 1, 2, false},
		{"bert last block", model.BERT, false, false, 1, 2, false},
		{"distilbert last block", model.DistilBERT, false, false, 1, 1, false},
		{"vit", model.ViT, false, false, 0, 2, false},
		{"vit last block", model.ViT, false, false, 1, 5, false},
		{"exact softmax, bert layer 0", model.BERT, false, false, 0, 3, true},
		{"exact softmax, bert last block", model.BERT, false, false, 1, 2, true},
		{"exact softmax, vit", model.ViT, false, false, 0, 2, true},
		{"exact softmax, vit last block", model.ViT, false, false, 1, 5, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := Arch{Family: c.family, Layers: 2, Heads: 3, HeadDim: 4, Hidden: 10, Seq: 7, Labels: 3, MLPHidden: 5}
			if c.exactSM {
				a.Ablation = proxy.NoAttnSM
			}
			net, err := RandomNet(a, 1)
			if err != nil {
				t.Fatal(err)
			}
			opt := Options{PublicMask: c.public, FullLastLayer: c.full}
			B := c.batch
			rng := rand.New(rand.NewPCG(4, 4))
			xs := make([]float64, B*a.Seq*a.Hidden)
			for i := range xs {
				xs[i] = rng.NormFloat64()
			}
			mask := make([][]int, B)
			for i := range mask {
				mask[i] = make([]int, a.Seq)
				for j := 0; j < 3+i; j++ {
					mask[i][j] = 1
				}
			}
			layer := c.layer
			last := layer == a.Layers-1 && !c.full
			r, err := runLocal(context.Background(), localConfig{}, func(ctx context.Context, s *protocol.Session) (twoparty.Cost, error) {
				var nw *Net
				in := &Batch{X: xs, Mask: mask}
				if s.Party() == 0 {
					nw = net
					in = &Batch{Mask: mask}
					if !c.public {
						in = nil
					}
				}
				p, err := Prepare(ctx, s, a, nw, opt)
				if err != nil {
					return twoparty.Cost{}, err
				}
				x, err := dataOwnerInput(s, xs, B, a.Seq, a.Hidden)
				if err != nil {
					return twoparty.Cost{}, err
				}
				var padding *paddingMask
				if p.textual() {
					if padding, err = p.shareMask(ctx, s, B, in); err != nil {
						return twoparty.Cost{}, err
					}
				}
				m := twoparty.NewMeter(s)
				if _, err := p.block(ctx, s, layer, x, padding, last); err != nil {
					return twoparty.Cost{}, err
				}
				return m.Since(), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.exactSM {
				// The softmax MLP's 10 rounds (x·W1; truncation and ReLU, 7;
				// P·V folded with W2; its truncation) give way to
				// protocol.Softmax over rows of T scores (7·⌈log2 T⌉ + 16 +
				// 46 + 2 rounds) and P·V with its truncation (2).
				// Bytes likewise: the MLP's steps (P1 msg(S·T + B·T·I),
				// truncrelu(S·d), msg(S·d + B·d·I), tmsg(B·Tq·I)) give way to
				// softmaxBytes(S, T), P·V's msg(S·T + B·T·I) and its
				// truncation's tmsg(B·Tq·I), sent by both parties.
				// The MLP block is the unfolded one: the exact softmax's
				// last block keeps every token's keys and values.
				mlpArch := a
				mlpArch.Ablation = proxy.Ablation{}
				mlpOpt := opt
				mlpOpt.unfoldedClass = true
				rounds, bytes, err := BlockCost(mlpArch, B, layer, mlpOpt)
				if err != nil {
					t.Fatal(err)
				}
				levels := int64(bits.Len(uint(a.Seq - 1)))
				rounds += -10 + (7*levels + 16 + 46 + 2) + 2
				T, I, d := a.Seq, a.inner(), a.MLPHidden
				Tq := T
				if last {
					Tq = 1
				}
				S := B * a.Heads * Tq
				for p := range bytes {
					bytes[p] += -truncReLUBytes(S*d) - msg(S*d+B*d*I) - tmsg(B*Tq*I) +
						softmaxBytes(S, T) + msg(S*T+B*T*I) + tmsg(B*Tq*I)
				}
				bytes[1] -= msg(S*T + B*T*I)
				for p := range 2 {
					if got := r[p].Stream; got.Rounds != rounds || got.BytesSent != bytes[p] {
						t.Errorf("party %d: %d rounds, %d bytes sent; formula %d rounds, %d bytes", p, got.Rounds, got.BytesSent, rounds, bytes[p])
					}
				}
				return
			}
			rounds, bytes, err := BlockCost(a, B, layer, opt)
			if err != nil {
				t.Fatal(err)
			}
			for p := range 2 {
				got := r[p].Stream
				if got.Rounds != rounds || got.BytesSent != bytes[p] {
					t.Errorf("party %d: %d rounds, %d bytes sent; formula %d rounds, %d bytes", p, got.Rounds, got.BytesSent, rounds, bytes[p])
				}
			}
		})
	}
}

// TestClassQKVCost pins what the last block with an exact softmax (a last
// phase's ablation; with the softmax MLP the block folds its attention
// instead, see TestClassAttention) saves: with the query and
// key/value weights shared apart, its QKV step opens every token's row once
// plus the class rows (P1: msg(B·T·H + B·H)), truncates 2·B·T·I + B·I words
// instead of 3·B·T·I, and the dealer sends party 1 3 words per output
// (weight-triple correction 1, truncation 2) for those outputs only; the
// query rows of every token (prepared with FullLastLayer) cost the rest.
// The two paths agree on the class rows' query, keys and values.
func TestClassQKVCost(t *testing.T) {
	a := Arch{Family: model.DistilBERT, Layers: 1, Heads: 2, HeadDim: 3, Hidden: 8, Seq: 5, Labels: 2, MLPHidden: 4, Ablation: proxy.NoAttnSM}
	net, err := RandomNet(a, 1)
	if err != nil {
		t.Fatal(err)
	}
	const B = 3
	T, H, I := a.Seq, a.Hidden, a.inner()
	rng := rand.New(rand.NewPCG(5, 5))
	xs := make([]float64, B*T*H)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	type out struct {
		cost  [2]twoparty.Cost
		q, kv [2][]float64
	}
	r, err := runLocal(context.Background(), localConfig{}, func(ctx context.Context, s *protocol.Session) (out, error) {
		var o out
		var nw *Net
		if s.Party() == 0 {
			nw = net
		}
		x, err := dataOwnerInput(s, xs, B, T, H)
		if err != nil {
			return o, err
		}
		for k, full := range []bool{false, true} {
			p, err := Prepare(ctx, s, a, nw, Options{FullLastLayer: full, WeightBase: uint64(100 * k)})
			if err != nil {
				return o, err
			}
			b := &p.blocks[0]
			if (b.q != nil) == full || (b.qkv.w != nil) != full {
				t.Errorf("FullLastLayer %v: split weights %v", full, b.q != nil)
			}
			m := twoparty.NewMeter(s)
			var q, kv *share.Tensor
			if full {
				qkv, err := p.lin(ctx, s, x, b.qkv)
				if err != nil {
					return o, err
				}
				q, kv = firstToken(cols(qkv, 0, I)), cols(qkv, I, 3*I)
			} else if q, kv, err = p.classQKV(ctx, s, x, b); err != nil {
				return o, err
			}
			o.cost[k] = m.Since()
			for j, v := range []*share.Tensor{q, kv} {
				open, err := Reveal(ctx, s, v)
				if err != nil {
					return o, err
				}
				if j == 0 {
					o.q[k] = open
				} else {
					o.kv[k] = open
				}
			}
		}
		return o, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	outs := 2*B*T*I + B*I // the class-only step's outputs
	all := 3 * B * T * I
	for p := range 2 {
		c := r[p].cost[0]
		wantSent := tmsg(outs)
		if p == 1 {
			wantSent += msg(B*T*H + B*H)
		}
		if c.Stream.Rounds != 2 || c.Stream.BytesSent != wantSent {
			t.Errorf("party %d: class-only QKV %d rounds, %d bytes sent; want 2, %d", p, c.Stream.Rounds, c.Stream.BytesSent, wantSent)
		}
		// The weight triples' outs words (to party 0) and the wrap pairs'
		// f bits (f = 16) per output (to party 1).
		dealt := func(n int) [2]int64 { return [2]int64{int64(8 * n), int64(8 * share.FieldWords(n, 16))} }
		wantDealer := dealt(outs)[p]
		if c.Dealer.BytesRecv != wantDealer {
			t.Errorf("party %d: class-only QKV received %d dealer bytes, want %d", p, c.Dealer.BytesRecv, wantDealer)
		}
		if full := r[p].cost[1]; full.Dealer.BytesRecv != dealt(all)[p] || full.Stream.BytesSent != tmsg(all)+[2]int64{0, msg(B * T * H)}[p] {
			t.Errorf("party %d: all-rows QKV cost %+v", p, full)
		}
	}
	if len(r[0].q[0]) != B*I || len(r[0].q[1]) != B*I {
		t.Fatalf("class queries of %d and %d values, want %d", len(r[0].q[0]), len(r[0].q[1]), B*I)
	}
	for i := range r[0].q[0] {
		if d := math.Abs(r[0].q[0][i] - r[0].q[1][i]); d > 1e-3 {
			t.Fatalf("class query %d: %v (class only) vs %v (all rows)", i, r[0].q[0][i], r[0].q[1][i])
		}
	}
	for i := range r[0].kv[0] {
		if d := math.Abs(r[0].kv[0][i] - r[0].kv[1][i]); d > 1e-3 {
			t.Fatalf("key/value %d: %v (class only) vs %v (all rows)", i, r[0].kv[0][i], r[0].kv[1][i])
		}
	}
}

// softmaxBytes is the bytes a party sends for protocol.Softmax of rows rows
// of m entries, from the costs protocol's doc comments give: Max's
// tournament (per level of p pairs a row: the sign circuit, Σ msg(k·W) over
// k ∈ {156, 62, 30, 14, 6, 2} with W = ⌈rows·p/64⌉, and a multiplexer,
// msg(W + rows·p)), Exp (8·(msg(n) + tmsg(n))), ReciprocalPositive on the
// row sums (8·(msg(rows) + tmsg(rows)) + 10·(msg(rows) + msg(2·rows) +
// tmsg(rows))) and the final MulFixed (msg(2n) + tmsg(n)), n = rows·m;
// tmsg(n) = msg(⌈n/64⌉) is a truncation of n elements.
func softmaxBytes(rows, m int) int64 {
	n := rows * m
	var b int64
	for k := m; k > 1; k = (k + 1) / 2 {
		pairs := rows * (k / 2)
		w := (pairs + 63) / 64
		for _, c := range []int{156, 62, 30, 14, 6, 2} {
			b += msg(c * w)
		}
		b += msg(w + pairs)
	}
	b += 8 * (msg(n) + tmsg(n))
	b += 8*(msg(rows)+tmsg(rows)) + 10*(msg(rows)+msg(2*rows)+tmsg(rows))
	return b + msg(2*n) + tmsg(n)
}

// tmsg is the bytes a party sends for a truncation of n elements
// (protocol.TruncCost: one bit each).
func tmsg(n int) int64 { return protocol.TruncCost(n).Bytes }

package secure

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/nn/model"
	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/testharness/twoparty"
)

// classFoldCase is a last block whose class-token attention is folded
// (foldedAttention): its architecture, batch and mask, and the magnitudes of
// its attention input and query/key weights.
type classFoldCase struct {
	name   string
	a      Arch
	batch  int
	public bool // Options.PublicMask
	// padded pads the batch rows (text families): row b keeps its first
	// Seq − 1 − b·pad tokens (at least 2).
	padded bool
	// ySD is the standard deviation of the attention input; outliers, when
	// not 0, sets two of its dimensions to ±outliers (BERT's LayerNorm
	// outputs have a few such dimensions); qkScale multiplies RandomNet's
	// query and key weights (scores of a trained model's magnitude).
	ySD, outliers, qkScale float64
}

// sst2Arch is the sst2 phase-0 proxy's architecture (DistilBERT ⟨1L,12H,d2⟩
// at sequence 128).
var sst2Arch = Arch{Family: model.DistilBERT, Layers: 1, Heads: 12, HeadDim: 64, Hidden: 768, Seq: 128, Labels: 2, MLPHidden: 2}

var classFoldCases = []classFoldCase{
	{name: "bert, private mask, padded", a: Arch{Family: model.BERT, Layers: 2, Heads: 3, HeadDim: 4, Hidden: 10, Seq: 7, Labels: 3, MLPHidden: 5},
		batch: 3, padded: true, ySD: 1, qkScale: 1},
	{name: "bert, public mask, padded", a: Arch{Family: model.BERT, Layers: 2, Heads: 3, HeadDim: 4, Hidden: 10, Seq: 7, Labels: 3, MLPHidden: 5},
		batch: 2, public: true, padded: true, ySD: 1, qkScale: 1},
	{name: "distilbert, one layer, private mask", a: Arch{Family: model.DistilBERT, Layers: 1, Heads: 2, HeadDim: 6, Hidden: 12, Seq: 9, Labels: 2, MLPHidden: 3},
		batch: 3, padded: true, ySD: 1, qkScale: 1},
	{name: "vit", a: Arch{Family: model.ViT, Layers: 2, Heads: 2, HeadDim: 5, Hidden: 8, Seq: 10, Labels: 4, MLPHidden: 4},
		batch: 3, ySD: 1, qkScale: 1},
	// The sst2 phase-0 shape with large activations: |y| up to 25 (norms
	// ≈ 90), scores of standard deviation ≈ 3.3·qkScale² (6 and 30); G and N
	// sum 128 tokens and 769 rows.
	{name: "sst2 shape, large activations, padded", a: sst2Arch, batch: 2, padded: true, ySD: 3, outliers: 25, qkScale: 1.3},
	{name: "sst2 shape, large activations and scores", a: sst2Arch, batch: 2, ySD: 3, outliers: 25, qkScale: 3},
}

// netAndInput returns the case's random network (query and key weights
// scaled) and an attention input y [batch, Seq, Hidden] with the padded
// rows zero, and the mask (nil for ViT).
func (c classFoldCase) netAndInput(t *testing.T, seed uint64) (*Net, []float64, [][]int) {
	t.Helper()
	a := c.a
	net, err := RandomNet(a, seed)
	if err != nil {
		t.Fatal(err)
	}
	I := a.inner()
	for i := range net.blocks {
		q := &net.blocks[i].qkv
		for r := 0; r < q.in; r++ {
			for col := 0; col < 2*I; col++ {
				q.w[r*q.out+col] *= c.qkScale
			}
		}
	}
	B, T, H := c.batch, a.Seq, a.Hidden
	rng := rand.New(rand.NewPCG(seed, 77))
	ys := make([]float64, B*T*H)
	for i := range ys {
		ys[i] = rng.NormFloat64() * c.ySD
	}
	if c.outliers != 0 {
		for r := 0; r < B*T; r++ {
			ys[r*H+3] = -c.outliers * (0.8 + 0.2*rng.Float64())
			ys[r*H+H/2] = c.outliers * (0.8 + 0.2*rng.Float64())
		}
	}
	var mask [][]int
	if a.Family != model.ViT {
		mask = make([][]int, B)
		pad := max(1, (T-2)/(2*B))
		for b := range mask {
			mask[b] = make([]int, T)
			n := T
			if c.padded {
				n = max(2, T-1-b*pad)
			}
			for j := 0; j < T; j++ {
				if j < n {
					mask[b][j] = 1
				} else {
					clear(ys[(b*T+j)*H : (b*T+j+1)*H])
				}
			}
		}
	}
	// The plaintext uses the encoded inputs.
	enc, err := share.DefaultFixedPoint.EncodeTensor(ys, B, T, H)
	if err != nil {
		t.Fatal(err)
	}
	copy(ys, share.DefaultFixedPoint.DecodeTensor(enc))
	return net, ys, mask
}

// plainClassContext is the plaintext attention context of the class token
// of net's last block ([batch, heads, headDim] flattened) for the attention
// input ys and the mask (nil: none): the scores q_h·K_hᵀ (padded keys'
// scores replaced by the softmax MLP's fill values), P = ReLU(sc·W1 +
// b1)·W2 + b2, context P·V_h. With f > 0 the weights are first rounded as
// Prepare encodes them (1/√headDim folded into the query's): the
// projections' to f fractional bits, the softmax MLP's to f + e (e: its
// extra bits), so that what remains of a secure path's error is its own.
func plainClassContext(net *Net, ys []float64, mask [][]int, B int, f, e uint) []float64 {
	a := net.Arch
	T, H, I, nh, dh, d := a.Seq, a.Hidden, a.inner(), a.Heads, a.HeadDim, a.MLPHidden
	blk := net.blocks[a.Layers-1]
	rndBits := func(bits uint) func(v []float64, scale func(i int) float64) []float64 {
		return func(v []float64, scale func(i int) float64) []float64 {
			out := make([]float64, len(v))
			for i, x := range v {
				out[i] = x * scale(i)
				if f > 0 {
					out[i] = math.Round(math.Ldexp(out[i], int(bits))) / math.Ldexp(1, int(bits))
				}
			}
			return out
		}
	}
	rnd, rndMLP := rndBits(f), rndBits(f+e)
	one := func(int) float64 { return 1 }
	w := rnd(blk.qkv.w, func(i int) float64 {
		if i%(3*I) < I {
			return blk.scaleQK
		}
		return 1
	})
	bias := rnd(blk.qkv.b, func(i int) float64 {
		if i < I {
			return blk.scaleQK
		}
		return 1
	})
	mw := &mlpWeights{w1: rndMLP(blk.attn.w1, one), b1: rnd(blk.attn.b1, one), w2: rndMLP(blk.attn.w2, one), b2: rndMLP(blk.attn.b2, one), fill: blk.attn.fill}
	out := make([]float64, B*I)
	for b := 0; b < B; b++ {
		m := func(t int) float64 {
			if mask == nil {
				return 1
			}
			return float64(mask[b][t])
		}
		row := func(t int) []float64 { return ys[(b*T+t)*H : (b*T+t+1)*H] }
		proj := func(t, from int) []float64 { // y_t·W[:, from:from+I] + m_t·b
			p := make([]float64, I)
			for r, yv := range row(t) {
				if yv == 0 {
					continue
				}
				for c, wv := range w[r*3*I+from : r*3*I+from+I] {
					p[c] += yv * wv
				}
			}
			for c := range p {
				p[c] += m(t) * bias[from+c]
			}
			return p
		}
		q := proj(0, 0) // the class token is never padded; 1/√headDim is in w
		K, V := make([][]float64, T), make([][]float64, T)
		for t := 0; t < T; t++ {
			K[t], V[t] = proj(t, I), proj(t, 2*I)
		}
		for h := 0; h < nh; h++ {
			sc := make([]float64, T)
			for t := range sc {
				if m(t) == 0 {
					sc[t] = mw.fill[t]
					continue
				}
				for c := 0; c < dh; c++ {
					sc[t] += q[h*dh+c] * K[t][h*dh+c]
				}
			}
			hid := make([]float64, d)
			for j := range hid {
				hid[j] = mw.b1[j]
				for t, s := range sc {
					hid[j] += s * mw.w1[t*d+j]
				}
				hid[j] = max(hid[j], 0)
			}
			for t := 0; t < T; t++ {
				p := mw.b2[t]
				for j, hv := range hid {
					p += hv * mw.w2[j*T+t]
				}
				for c := 0; c < dh; c++ {
					out[b*I+h*dh+c] += p * V[t][h*dh+c]
				}
			}
		}
	}
	return out
}

// classFoldRange returns the largest magnitude of the values the folded
// class attention truncates (Ŷ = Y_augᵀ·[W1 | W2ᵀ | b2ᵀ], G, N, the hidden
// pre-activations q_h·G_hᵀ + b1 + fill and the contexts, given as
// plainClassContext's), in plaintext with net's weights.
func classFoldRange(net *Net, ys []float64, mask [][]int, B int, contexts []float64) float64 {
	a := net.Arch
	T, H, I, nh, dh, d := a.Seq, a.Hidden, a.inner(), a.Heads, a.HeadDim, a.MLPHidden
	blk := net.blocks[a.Layers-1]
	w, bias, mw := blk.qkv.w, blk.qkv.b, blk.attn
	big := 0.0
	for _, v := range contexts {
		big = max(big, math.Abs(v))
	}
	for b := 0; b < B; b++ {
		m := func(t int) float64 {
			if mask == nil {
				return 1
			}
			return float64(mask[b][t])
		}
		yaug := func(t, r int) float64 {
			if r == H {
				return m(t)
			}
			return ys[(b*T+t)*H+r]
		}
		wmlp := func(t, j int) float64 {
			switch {
			case j < d:
				return mw.w1[t*d+j]
			case j < 2*d:
				return mw.w2[(j-d)*T+t]
			}
			return mw.b2[t]
		}
		yh := make([][]float64, H+1) // [H+1][2d+1]
		for r := range yh {
			yh[r] = make([]float64, 2*d+1)
			for j := range yh[r] {
				for t := 0; t < T; t++ {
					yh[r][j] += yaug(t, r) * wmlp(t, j)
				}
				big = max(big, math.Abs(yh[r][j]))
			}
		}
		waug := func(r, col int) float64 { // [Wq | Wk | Wv; b]
			if r == H {
				return bias[col]
			}
			return w[r*3*I+col]
		}
		q := make([]float64, I)
		for c := range q {
			for r := 0; r < H; r++ {
				q[c] += ys[b*T*H+r] * w[r*3*I+c]
			}
			q[c] = (q[c] + bias[c]) * blk.scaleQK
		}
		g := make([][]float64, 2*d+1) // G (j < d) and N (j ≥ d): [2d+1][I]
		for j := range g {
			g[j] = make([]float64, I)
			from := I
			if j >= d {
				from = 2 * I
			}
			for c := range g[j] {
				for r := 0; r <= H; r++ {
					g[j][c] += yh[r][j] * waug(r, from+c)
				}
				big = max(big, math.Abs(g[j][c]))
			}
		}
		for h := 0; h < nh; h++ {
			for j := 0; j < d; j++ {
				pre := mw.b1[j]
				for t := 0; t < T; t++ {
					pre += (1 - m(t)) * mw.fill[t] * mw.w1[t*d+j]
				}
				for c := 0; c < dh; c++ {
					pre += q[h*dh+c] * g[j][h*dh+c]
				}
				big = max(big, math.Abs(pre))
			}
		}
	}
	return big
}

// TestClassAttention runs the last block's class-token attention folded
// with its softmax MLP (foldedAttention) and unfolded (every token's keys
// and values, the scores, the softmax MLP and P·V: Options.unfoldedClass)
// on the same shared attention input and mask, for BERT with a private and
// a public mask and padded rows, DistilBERT with one layer, ViT, and the
// sst2 phase-0 shape with large activations (|y| up to 25, scores of
// standard deviation ≈ 6 and ≈ 30), batch > 1:
//
//   - against the plaintext with each path's own rounded weights (the
//     folded W_mlp carries 8 more fractional bits), the folded context's
//     largest error is at most twice the unfolded one's plus 4 ulps (their
//     truncations' errors are alike and random: which is larger changes with
//     the dealer's seeds), and the unfolded one is below 1e-4 of the
//     largest context;
//   - against the plaintext of the unrounded weights, where the rounding of
//     Wq, Wk and Wv to f bits (alike on both paths) dominates, the folded
//     error is at most 1.5 times the unfolded one plus 4 ulps;
//   - the values the folded path truncates (Ŷ, G, N, the hidden
//     pre-activations, the contexts) stay below 2^(62−2f−e)/64;
//   - the folded attention costs exactly what BlockCostRows says (14
//     rounds, the bytes of each party), the dealer sends the data owner one
//     word per output of its two weight products and of its two
//     shared×shared products, f bits per element truncated by 2^f (f + e
//     for the context) and a TruncReLU's material, and the model owner
//     nothing; the unfolded attention also takes 14 rounds;
//   - the folded block shares none of the unfolded one's attention weights
//     (no qkv, q, kv, attn, attnV).
func TestClassAttention(t *testing.T) {
	for ci, c := range classFoldCases {
		t.Run(c.name, func(t *testing.T) {
			a := c.a
			net, ys, mask := c.netAndInput(t, uint64(ci+1))
			B, T, H, I, nh, d := c.batch, a.Seq, a.Hidden, a.inner(), a.Heads, a.MLPHidden
			L := a.Layers
			f := share.DefaultFixedPoint.FracBits
			e := foldExtraBits(f) // W_mlp's extra bits
			type out struct {
				ctx        [2][]float64 // folded, unfolded
				cost       [2]twoparty.Cost
				reluDealer int64
			}
			r, err := runLocal(context.Background(), localConfig{Seeds: [2]share.Seed{{byte(ci), 1}, {byte(ci), 2}}}, func(ctx context.Context, s *protocol.Session) (out, error) {
				var o out
				var nw *Net
				var in *Batch
				if s.Party() == 0 {
					nw = net
					if c.public {
						in = &Batch{Mask: mask}
					}
				} else {
					in = &Batch{Mask: mask}
				}
				opt := Options{PublicMask: c.public}
				pf, err := Prepare(ctx, s, a, nw, opt)
				if err != nil {
					return o, err
				}
				opt.unfoldedClass, opt.WeightBase = true, 1000
				pu, err := Prepare(ctx, s, a, nw, opt)
				if err != nil {
					return o, err
				}
				bf, bu := &pf.blocks[L-1], &pu.blocks[L-1]
				if bf.cf == nil || bf.qkv.w != nil || bf.q != nil || bf.kv != nil || bf.attn != nil || bf.attnV != nil || bu.cf != nil || bu.q == nil {
					return o, fmt.Errorf("folded block %+v, unfolded %+v", bf, bu)
				}
				y, err := dataOwnerInput(s, ys, B, T, H)
				if err != nil {
					return o, err
				}
				var mkf, mku *paddingMask
				if pf.textual() {
					if mkf, err = pf.shareMask(ctx, s, B, in); err != nil {
						return o, err
					}
					if mku, err = pu.shareMask(ctx, s, B, in); err != nil {
						return o, err
					}
				}
				m := twoparty.NewMeter(s)
				folded, err := pf.foldedAttention(ctx, s, L-1, y, bf.cf, mkf)
				if err != nil {
					return o, err
				}
				o.cost[0] = m.Since()
				m = twoparty.NewMeter(s)
				q, kv, _, err := pu.blockQKV(ctx, s, L-1, y, y, bu, mku, true)
				if err != nil {
					return o, err
				}
				sc, vh, err := pu.attentionScores(ctx, s, q, kv)
				if err != nil {
					return o, err
				}
				unfolded, err := pu.attentionValues(ctx, s, L-1, sc, vh, bu, mku)
				if err != nil {
					return o, err
				}
				o.cost[1] = m.Since()
				// A TruncReLURing of the hidden layer's size, in the folded
				// attention's ring: its dealer material.
				m = twoparty.NewMeter(s)
				if _, err := s.TruncReLURing(ctx, &share.Tensor{Shape: []int{B * nh * d}, Data: make([]uint64, B*nh*d)}, f+e, attentionRing); err != nil {
					return o, err
				}
				o.reluDealer = m.Since().Dealer.BytesRecv
				for k, v := range []*share.Tensor{folded, unfolded} {
					if v.Len() != B*I {
						return o, fmt.Errorf("context %v, want %d values", v.Shape, B*I)
					}
					if o.ctx[k], err = Reveal(ctx, s, v); err != nil {
						return o, err
					}
				}
				return o, nil
			})
			if err != nil {
				t.Fatal(err)
			}

			// Costs.
			rows, err := BlockCostRows(a, B, L-1, Options{PublicMask: c.public})
			if err != nil {
				t.Fatal(err)
			}
			var attnRounds int64
			var attnBytes [2]int64
			for _, row := range rows {
				switch row.Module {
				case "Q/K/V projections", "softmax MLP", "P·V":
					attnRounds += row.Rounds
					attnBytes[0] += row.Bytes[0]
					attnBytes[1] += row.Bytes[1]
				}
			}
			n1, n2 := B*(H+1)*(2*d+1)+B*I, B*(2*d+1)*I // the weight products' outputs
			// The shared × shared products open their operands packed at
			// attentionRing bits, and the ReLU's sign circuit runs on them.
			ring := func(nx, ny int) int64 { return protocol.MatMulRingCost(nx, ny, attentionRing).Bytes }
			wantP0 := tmsg(n1) + tmsg(n2) + ring(B*I, B*I*d) + protocol.TruncReLURingCost(B*nh*d, attentionRing).Bytes + ring(B*nh*d, B*d*I) + tmsg(B*I)
			wantP1 := wantP0 + msg(B*(H+1)*T+B*H) + msg(B*(2*d+1)*(H+1))
			// A truncation by 2^k draws k bits of wrap pair per element.
			wrap := func(n int, k uint) int64 { return int64(8 * share.FieldWords(n, k)) }
			for p := range 2 {
				got := r[p].cost[0]
				if got.Stream.Rounds != 14 || attnRounds != 14 || got.Stream.BytesSent != [2]int64{wantP0, wantP1}[p] || attnBytes[p] != got.Stream.BytesSent {
					t.Errorf("party %d: folded %d rounds, %d bytes sent; want 14, %d (BlockCostRows: %d, %d)", p, got.Stream.Rounds, got.Stream.BytesSent,
						[2]int64{wantP0, wantP1}[p], attnRounds, attnBytes[p])
				}
				// The weight triples' words go to party 0, the wrap pairs'
				// and matrix triples' to party 1, the ReLU's to both (as
				// measured: its bit pairs' and cross-party AND triples' to
				// party 0, the rest to party 1).
				wantDealer := [2]int64{8*int64(n1+n2) + r[0].reluDealer,
					wrap(n1, f) + wrap(n2, f) + wrap(B*I, f+e+64-attentionRing) + 8*int64(B*nh*d+B*I) + r[1].reluDealer}[p]
				if got.Dealer.BytesRecv != wantDealer {
					t.Errorf("party %d: folded attention received %d dealer bytes, want %d", p, got.Dealer.BytesRecv, wantDealer)
				}
				if u := r[p].cost[1]; u.Stream.Rounds != 14 {
					t.Errorf("party %d: unfolded %d rounds, want 14", p, u.Stream.Rounds)
				}
				t.Logf("party %d: folded %d bytes sent, %d dealer bytes; unfolded %d, %d", p, got.Stream.BytesSent, got.Dealer.BytesRecv,
					r[p].cost[1].Stream.BytesSent, r[p].cost[1].Dealer.BytesRecv)
			}

			// Values: each path against the plaintext with its own weights'
			// rounding (the folded W_mlp carries e more bits), and both
			// against the plaintext of the unrounded weights.
			own := [2][]float64{plainClassContext(net, ys, mask, B, f, e), plainClassContext(net, ys, mask, B, f, 0)}
			exact := plainClassContext(net, ys, mask, B, 0, 0)
			var worst, worstExact [2]float64
			var scale float64
			for i, w := range exact {
				scale = max(scale, math.Abs(w))
				for k := range 2 {
					worst[k] = max(worst[k], math.Abs(r[0].ctx[k][i]-own[k][i]))
					worstExact[k] = max(worstExact[k], math.Abs(r[0].ctx[k][i]-w))
				}
			}
			ulp := share.DefaultFixedPoint.Ulp()
			t.Logf("largest |context| %.3f; largest error: folded %.3g, unfolded %.3g (%.1f and %.1f ulps); with the weights' rounding: %.3g and %.3g",
				scale, worst[0], worst[1], worst[0]/ulp, worst[1]/ulp, worstExact[0], worstExact[1])
			if scale < 10*ulp {
				t.Fatalf("contexts of at most %g: too small to judge", scale)
			}
			// The values the folded attention truncates stay far inside
			// their bound 2^(62−2f−e) (2^22).
			if big, bound := classFoldRange(net, ys, mask, B, exact), math.Ldexp(1, int(62-2*f-e)); !(big < bound/64) {
				t.Errorf("the folded attention's values reach %g: too close to their bound %g", big, bound)
			} else {
				t.Logf("largest |Ŷ|, |G|, |N|, |pre-activation|, |context|: %.4g (bound %g)", big, bound)
			}
			// The contexts come from a product in Z_2^attentionRing: the
			// results above are exact only inside its bound, 2^12 at f = 16.
			if bound := math.Ldexp(1, int(attentionRing-2-2*f-e)); !(scale < bound/4) {
				t.Errorf("contexts of %g: too close to the narrow ring's bound %g", scale, bound)
			}
			if !(worst[1] < 1e-4*max(1, scale)) || !(worst[0] <= 2*worst[1]+4*ulp) || !(worstExact[0] <= 1.5*worstExact[1]+4*ulp) {
				t.Errorf("errors against the plaintext: folded %.3g, unfolded %.3g; with the weights' rounding %.3g and %.3g", worst[0], worst[1], worstExact[0], worstExact[1])
			}
		})
	}
}

// TestClassFoldForward runs whole forwards of the classFoldCases' networks
// (the embedded inputs of their attention inputs' values, batch > 1) with
// every block's attention folded and the last block's on the class query
// (the default), unfolded (Options.unfoldedClass) and on every token
// (Options.FullLastLayer): the three give the same entropies within 2e-3
// nats (2e-4 for the small networks); the folded forward costs exactly
// ForwardCostRows, one round fewer than the unfolded one where the mask is
// private (no m⊗b), as many otherwise. Prepare shares per folded block
// Wq, [Wk; b_K], [Wv; b_V] and W_mlp where the unfolded one shares
// [Wq | Wk | Wv] ([Wq] and [Wk | Wv] apart in a class-only last block), W1
// and [W2ᵀ | b2ᵀ], and, with a private mask, the m⊗b bias weight of every
// layer (one round): one round more per block but the last, one fewer
// without m⊗b. The model owner's bytes are pinned message by message
// (msg), the largest weights in several frames.
func TestClassFoldForward(t *testing.T) {
	for ci, c := range classFoldCases[:5] {
		t.Run(c.name, func(t *testing.T) {
			a := c.a
			net, ys, mask := c.netAndInput(t, uint64(ci+1))
			B, I := c.batch, a.inner()
			opts := []Options{{PublicMask: c.public}, {PublicMask: c.public, unfoldedClass: true, WeightBase: 1000}, {PublicMask: c.public, FullLastLayer: true, WeightBase: 2000}}
			type out struct {
				h       [3][]float64
				prep, f [3]twoparty.Cost
			}
			r, err := runLocal(context.Background(), localConfig{Seeds: [2]share.Seed{{byte(ci), 3}, {byte(ci), 4}}}, func(ctx context.Context, s *protocol.Session) (out, error) {
				var o out
				var nw *Net
				in := &Batch{X: ys, Mask: mask}
				if s.Party() == 0 {
					nw, in = net, nil
					if c.public {
						in = &Batch{Mask: mask}
					}
				}
				for k, opt := range opts {
					m := twoparty.NewMeter(s)
					p, err := Prepare(ctx, s, a, nw, opt)
					if err != nil {
						return o, err
					}
					o.prep[k] = m.Since()
					m = twoparty.NewMeter(s)
					h, err := p.Forward(ctx, s, B, in)
					if err != nil {
						return o, err
					}
					o.f[k] = m.Since()
					if o.h[k], err = Reveal(ctx, s, h); err != nil {
						return o, err
					}
				}
				return o, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			tol := 2e-4
			if a.Seq > 64 {
				tol = 2e-3
			}
			var worst [2]float64
			for i, h := range r[0].h[0] {
				for k := 1; k < 3; k++ {
					worst[k-1] = max(worst[k-1], math.Abs(h-r[0].h[k][i]))
				}
			}
			t.Logf("entropies %.4f…; folded against unfolded %.3g, against every token %.3g", r[0].h[0][0], worst[0], worst[1])
			if !(worst[0] <= tol && worst[1] <= tol) {
				t.Errorf("folded entropies differ from the unfolded ones by %.3g, from every token's by %.3g (> %g)", worst[0], worst[1], tol)
			}
			rows, err := ForwardCostRows(a, B, opts[0])
			if err != nil {
				t.Fatal(err)
			}
			rounds, bytes := SumCostRows(rows)
			// The weights the model owner sends per block (see above).
			H, T, d, L := a.Hidden, a.Seq, a.MLPHidden, a.Layers
			folded := msg(H*I) + 2*msg((H+1)*I) + msg(T*(2*d+1))
			mlp := msg(T*d) + msg(T*(d+1))
			prepDiff := int64(L)*folded - (msg(H*I) + msg(2*H*I) + mlp) - int64(L-1)*(msg(3*H*I)+mlp)
			prepMore := int64(L - 1) // Prepare rounds the folded one takes more
			var fewer int64          // forward rounds the folded one saves
			if a.Family != model.ViT && !c.public {
				prepDiff -= msg(L * 2 * I)
				prepMore--
				fewer = 1
			}
			for p := range 2 {
				f, u := r[p].f[0].Stream, r[p].f[1].Stream
				if f.Rounds != rounds || f.BytesSent != bytes[p] || u.Rounds != rounds+fewer {
					t.Errorf("party %d: folded forward %d rounds, %d bytes (ForwardCostRows %d, %d); unfolded %d rounds, want %d", p, f.Rounds, f.BytesSent, rounds, bytes[p], u.Rounds, rounds+fewer)
				}
				// (The data owner sends only the transport's credit frames.)
				pf, pu := r[p].prep[0].Stream, r[p].prep[1].Stream
				if pf.Rounds != pu.Rounds+prepMore || (p == 0 && pf.BytesSent-pu.BytesSent != prepDiff) {
					t.Errorf("party %d: Prepare folded %d rounds, %d bytes; unfolded %d, %d; want %d rounds more and %d bytes more", p, pf.Rounds, pf.BytesSent, pu.Rounds, pu.BytesSent, prepMore, prepDiff)
				}
			}
			t.Logf("per forward: folded %d rounds, bytes %d/%d, dealer %d; unfolded %d rounds, bytes %d/%d, dealer %d", r[0].f[0].Stream.Rounds, r[0].f[0].Stream.BytesSent, r[1].f[0].Stream.BytesSent,
				r[1].f[0].Dealer.BytesRecv, r[0].f[1].Stream.Rounds, r[0].f[1].Stream.BytesSent, r[1].f[1].Stream.BytesSent, r[1].f[1].Dealer.BytesRecv)
		})
	}
}

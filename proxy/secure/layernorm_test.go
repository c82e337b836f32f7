package secure

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/share"
)

// TestLayerNormRing runs the MLP LayerNorm (its products in
// Z_2^layerNormRing) on rows of the width of DistilBERT whose Σ(x − μ)²
// exceed the ring's bound 2^(ℓ−2−2f) = 65,536 while every (x − μ)² and
// (x − μ)·r·γ stays inside it: four rows of standard deviation 16
// (Σ(x − μ)² ≈ 197,000, beyond even 2^(ℓ−1−2f), so a sum truncated in the
// ring would come out negative), a row with ±200 outliers (each
// (x − μ)² ≈ 40,000), ordinary and near-constant rows. The result equals the
// plaintext (x − μ)·MLP(Σ(x − μ)²/H)·γ + β within the fixed-point error
// (what the same inputs give in Z_2^64), and the call costs exactly lnRows'
// rounds and bytes.
func TestLayerNormRing(t *testing.T) {
	const R, H, d = 8, 768, 4
	rng := rand.New(rand.NewPCG(3, 50))
	xs := make([]float64, R*H)
	for i := range H {
		for r := range 4 {
			xs[r*H+i] = 5 + 16*rng.NormFloat64()
		}
		xs[4*H+i] = rng.NormFloat64()
		xs[5*H+i] = rng.NormFloat64()
		xs[6*H+i] = 0.01 * rng.NormFloat64()
		xs[7*H+i] = 3 + 1e-3*rng.NormFloat64()
	}
	xs[4*H+7], xs[4*H+300] = 200, -200
	inv := &mlpWeights{in: 1, d: d, out: 1,
		w1: []float64{0.05, -0.02, 0.01, 0.03}, b1: []float64{0.1, 0.5, -0.1, 0.2},
		w2: []float64{-0.05, 0.1, 0.2, -0.1}, b2: []float64{0.8}}
	lw := &layerNormWeights{gamma: make([]float64, H), beta: make([]float64, H), inv: inv}
	for i := range H {
		lw.gamma[i] = 0.5 + rng.Float64()
		lw.beta[i] = rng.NormFloat64() * 0.1
	}
	fp := share.DefaultFixedPoint
	bound := math.Ldexp(1, int(layerNormRing-2-2*fp.FracBits))
	// Plaintext: the MLP's r per row, then (x − μ)·r·γ + β.
	want, dev := make([]float64, R*H), make([]float64, R*H)
	overflowing := 0
	for r := range R {
		row := xs[r*H : (r+1)*H]
		mu := 0.0
		for _, v := range row {
			mu += v
		}
		mu /= H
		ss := 0.0
		for _, v := range row {
			ss += (v - mu) * (v - mu)
			if (v-mu)*(v-mu) >= bound {
				t.Fatalf("row %d: (x − μ)² = %g outside the bound %g", r, (v-mu)*(v-mu), bound)
			}
		}
		if ss >= bound {
			overflowing++
		}
		rr := inv.b2[0]
		for j := range d {
			rr += math.Max(0, ss/H*inv.w1[j]+inv.b1[j]) * inv.w2[j]
		}
		for i, v := range row {
			want[r*H+i] = (v-mu)*rr*lw.gamma[i] + lw.beta[i]
			dev[r*H+i] = math.Abs(v - mu)
		}
	}
	if overflowing != 5 {
		t.Fatalf("%d rows with Σ(x − μ)² ≥ %g, want 5", overflowing, bound)
	}
	type out struct {
		y      *share.Tensor
		rounds int64
		bytes  int64
	}
	a := Arch{Hidden: H, MLPHidden: d}
	res, err := runLocal(context.Background(), localConfig{Seeds: [2]share.Seed{{5}, {6}}}, func(ctx context.Context, s *protocol.Session) (out, error) {
		p := &Prepared{arch: a, party: s.Party(), fp: s.FixedPoint()}
		var w *layerNormWeights
		if s.Party() == 0 {
			w = lw
		}
		l, err := p.prepareLN(ctx, s, w)
		if err != nil {
			return out{}, err
		}
		var x *share.Tensor
		if s.Party() == 1 {
			enc, err := s.FixedPoint().EncodeTensor(xs, R, H)
			if err != nil {
				return out{}, err
			}
			x, err = s.ShareInput(1, enc)
			if err != nil {
				return out{}, err
			}
		} else if x, err = s.ShareInput(1, nil, R, H); err != nil {
			return out{}, err
		}
		before := s.Stream().Stats()
		y, err := p.layerNorm(ctx, s, x, l)
		after := s.Stream().Stats()
		return out{y, after.Rounds - before.Rounds, after.BytesSent - before.BytesSent}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	rounds, bytes := SumCostRows(lnRows(R, H, d))
	for p := range 2 {
		if res[p].rounds != rounds || res[p].bytes != bytes[p] {
			t.Errorf("party %d: %d rounds, %d bytes; lnRows %d, %d", p, res[p].rounds, res[p].bytes, rounds, bytes[p])
		}
	}
	y := make([]uint64, R*H)
	if err := share.Reconstruct(y, res[0].y.Data, res[1].y.Data); err != nil {
		t.Fatal(err)
	}
	// The error is r·γ's (the MLP's weights rounded to f + lnExtraBits and
	// f bits, its truncations) times |x − μ|: at most 4.6e-4 per unit of
	// 1 + |x − μ| here, the same as in Z_2^64; a sum truncated in the ring
	// is off by more than 1 per unit (−8.3 for 1.01).
	worst := 0.0
	for i, v := range y {
		d := math.Abs(fp.Decode(v)-want[i]) / (1 + dev[i])
		if d > 1e-3 {
			t.Fatalf("element %d (row %d, |x − μ| = %.3g): %v, want %v", i, i/H, dev[i], fp.Decode(v), want[i])
		}
		worst = max(worst, d)
	}
	t.Logf("largest error per unit of 1 + |x − μ|: %.3g", worst)
}

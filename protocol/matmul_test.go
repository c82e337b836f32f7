package protocol

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// randRing returns a tensor of uniform ring words from a fixed seed.
func randRing(seed uint64, shape ...int) *share.Tensor {
	t, _ := share.NewTensor(shape...)
	rng := rand.New(rand.NewPCG(seed, 3))
	for i := range t.Data {
		t.Data[i] = rng.Uint64()
	}
	return t
}

func TestMatMul(t *testing.T) {
	tests := []struct {
		name   string
		xs, ys []int
	}{
		{"2d", []int{3, 4}, []int{4, 5}},
		{"batched heads", []int{2, 3, 4, 5}, []int{2, 3, 5, 6}},
		{"shared rhs", []int{2, 3, 4, 5}, []int{5, 2}},
		{"vector", []int{1, 7}, []int{7, 1}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Ring products are exact: uniform ring words test the algebra.
			x, y := randRing(uint64(i), tc.xs...), randRing(uint64(i+100), tc.ys...)
			want, err := share.MatMul(x, y)
			if err != nil {
				t.Fatal(err)
			}
			xsh, ysh := splitTensor(x, 1), splitTensor(y, 2)
			r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				return s.MatMul(ctx, pickShare(s, xsh), pickShare(s, ysh))
			})
			b := wireBytes(x.Len() + y.Len())
			wantCost(t, r, [2]int64{1, 1}, [2]int64{b, b})
			got := openPair(t, r.Out)
			if !slices.Equal(got.Shape, want.Shape) || !slices.Equal(got.Data, want.Data) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	t.Run("bad shapes", func(t *testing.T) {
		runPair(t, func(ctx context.Context, s *Session) (int, error) {
			for _, sh := range [][2][]int{{{3, 4}, {5, 6}}, {{2, 3, 4}, {3, 4, 5}}, {{4}, {4, 1}}} {
				a, _ := share.NewTensor(sh[0]...)
				b, _ := share.NewTensor(sh[1]...)
				if _, err := s.MatMul(ctx, a, b); err == nil {
					t.Errorf("matmul %v·%v: no error", sh[0], sh[1])
				}
			}
			return 0, nil
		})
	})
}

func TestMatMulFixed(t *testing.T) {
	fp := share.DefaultFixedPoint
	const m, k, n = 4, 16, 3
	xs, ys := randReals(m*k, 4, 5), randReals(k*n, 4, 6)
	x, y := encodeT(t, fp, xs, m, k), encodeT(t, fp, ys, k, n)
	xsh, ysh := splitTensor(x, 1), splitTensor(y, 2)
	r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
		return s.MatMulFixed(ctx, pickShare(s, xsh), pickShare(s, ysh))
	})
	b := wireBytes(m*k+k*n) + truncWire(m*n)
	wantCost(t, r, [2]int64{2, 2}, [2]int64{b, b})
	got := fp.DecodeTensor(openPair(t, r.Out))
	xq, yq := fp.DecodeTensor(x), fp.DecodeTensor(y)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			for p := 0; p < k; p++ {
				want += xq[i*k+p] * yq[p*n+j]
			}
			if d := math.Abs(got[i*n+j] - want); d > fp.Ulp()+1e-9 {
				t.Fatalf("(%d,%d): got %v, want %v", i, j, got[i*n+j], want)
			}
		}
	}
}

func TestMatMulWeights(t *testing.T) {
	const k, n = 6, 5
	w := randRing(42, k, n)
	tests := []struct {
		name string
		xs   []int
	}{
		{"matrix", []int{4, k}},
		{"batch", []int{2, 3, k}},
		{"row", []int{k}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x1, x2 := randRing(uint64(i), tc.xs...), randRing(uint64(i+50), tc.xs...)
			m := x1.Len() / k
			w2, _ := w.Reshape(k, n)
			want1, _ := share.MatMul(mustReshape(t, x1, m, k), w2)
			want2, _ := share.MatMul(mustReshape(t, x2, m, k), w2)
			x1sh, x2sh := splitTensor(x1, 1), splitTensor(x2, 2)
			r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
				var wt *share.Tensor
				if s.Party() == 0 {
					wt = w
				}
				h, err := s.ShareWeight(ctx, 9, wt, k, n)
				if err != nil {
					return [2]*share.Tensor{}, err
				}
				before := s.Stream().Stats()
				y1, err := s.MatMulWeights(ctx, pickShare(s, x1sh), h)
				if err != nil {
					return [2]*share.Tensor{}, err
				}
				y2, err := s.MatMulWeights(ctx, pickShare(s, x2sh), h)
				if err != nil {
					return [2]*share.Tensor{}, err
				}
				d := s.Stream().Stats().Sub(before)
				wantSent := [2]int64{0, 2 * wireBytes(m*k)}[s.Party()]
				if d.BytesSent != wantSent || d.Rounds != 2 {
					t.Errorf("party %d: two products cost %v, want 2 rounds and %d bytes sent", s.Party(), d, wantSent)
				}
				return [2]*share.Tensor{y1, y2}, nil
			})
			// Whole run: ShareWeight (party 0 sends F once) + two products.
			wantCost(t, r, [2]int64{3, 3}, [2]int64{wireBytes(k * n), 2 * wireBytes(m*k)})
			for j, want := range []*share.Tensor{want1, want2} {
				got := openPair(t, [2]*share.Tensor{r.Out[0][j], r.Out[1][j]})
				wantShape := append(slices.Clone(tc.xs[:len(tc.xs)-1]), n)
				if !slices.Equal(got.Shape, wantShape) || !slices.Equal(got.Data, want.Data) {
					t.Fatalf("product %d: got %v, want %v", j, got.Shape, wantShape)
				}
			}
		})
	}
}

func mustReshape(t testing.TB, x *share.Tensor, shape ...int) *share.Tensor {
	t.Helper()
	y, err := x.Reshape(shape...)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

func TestMatMulWeightsFixed(t *testing.T) {
	fp := share.DefaultFixedPoint
	const m, k, n = 3, 8, 4
	xs, ws := randReals(m*k, 10, 7), randReals(k*n, 2, 8)
	x, w := encodeT(t, fp, xs, m, k), encodeT(t, fp, ws, k, n)
	xsh := splitTensor(x, 3)
	r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
		var wt *share.Tensor
		if s.Party() == 0 {
			wt = w
		}
		h, err := s.ShareWeight(ctx, 1, wt, k, n)
		if err != nil {
			return nil, err
		}
		return s.MatMulWeightsFixed(ctx, pickShare(s, xsh), h)
	})
	got := fp.DecodeTensor(openPair(t, r.Out))
	xq, wq := fp.DecodeTensor(x), fp.DecodeTensor(w)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			want := 0.0
			for p := 0; p < k; p++ {
				want += xq[i*k+p] * wq[p*n+j]
			}
			if d := math.Abs(got[i*n+j] - want); d > fp.Ulp()+1e-9 {
				t.Fatalf("(%d,%d): got %v, want %v", i, j, got[i*n+j], want)
			}
		}
	}
}

func TestMulPrivateVector(t *testing.T) {
	const n = 7
	gamma := randRing(5, n)
	x := randRing(6, 2, 3, n)
	want := x.Clone()
	for i := range want.Data {
		want.Data[i] *= gamma.Data[i%n]
	}
	xsh := splitTensor(x, 4)
	r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
		var g *share.Tensor
		if s.Party() == 0 {
			g = gamma
		}
		h, err := s.ShareVector(ctx, 77, g, n)
		if err != nil {
			return nil, err
		}
		if _, err := s.MatMulWeights(ctx, pickShare(s, xsh), h); err == nil {
			t.Error("a vector weight used as a matrix")
		}
		return s.MulPrivateVector(ctx, pickShare(s, xsh), h)
	})
	wantCost(t, r, [2]int64{2, 2}, [2]int64{wireBytes(n), wireBytes(x.Len())})
	got := openPair(t, r.Out)
	if !slices.Equal(got.Data, want.Data) || !slices.Equal(got.Shape, want.Shape) {
		t.Fatal("x ⊙ γ wrong")
	}
}

// TestMatMulWeightsUniform checks that party 0 (who receives E = X1 − A) sees
// uniform bytes whatever the data owner's input, and party 1 (who receives
// F = W − B) whatever the weights; and no clear value crosses the wire.
func TestMatMulWeightsUniform(t *testing.T) {
	const m, k, n = 64, 32, 16
	cases := map[string]uint64{"zeros": 0, "ones": share.DefaultFixedPoint.Scale()}
	for name, v := range cases {
		t.Run(name, func(t *testing.T) {
			x, _ := share.NewTensor(m, k)
			w, _ := share.NewTensor(k, n)
			for i := range x.Data {
				x.Data[i] = v
			}
			for i := range w.Data {
				w.Data[i] = v
			}
			// Party 1 holds x in the clear (its share is x, party 0's zero).
			var zero, _ = share.NewTensor(m, k)
			xsh := [2]*share.Tensor{zero, x}
			r := runPairWith(t, pairConfig{Record: true, Seed: 3}, func(ctx context.Context, s *Session) (*share.Tensor, error) {
				var wt *share.Tensor
				if s.Party() == 0 {
					wt = w
				}
				h, err := s.ShareWeight(ctx, 5, wt, k, n)
				if err != nil {
					return nil, err
				}
				return s.MatMulWeights(ctx, pickShare(s, xsh), h)
			})
			for p := range 2 {
				if len(r.Recv[p]) == 0 {
					t.Fatalf("party %d received nothing", p)
				}
				if chi := chiSquareBytes(r.Recv[p]); chi > chiSquareLimit {
					t.Errorf("party %d: chi-square %.1f", p, chi)
				}
				for _, msg := range r.Recv[p] {
					if slices.Contains(msg, v) {
						t.Errorf("party %d received a clear value", p)
					}
				}
			}
		})
	}
}

// TestMatMulWeightsMany checks several products by different weights in one
// call: each opens to x_i·W_i, and together they cost one round in which
// party 1 sends one message of Σ m_i·k_i words (party 0 nothing), with one
// weight triple per product; mismatched or malformed operands are errors.
func TestMatMulWeightsMany(t *testing.T) {
	const k, n1, n2 = 6, 5, 3
	w1, w2 := randRing(42, k, n1), randRing(43, k, n2)
	x1, x2 := randRing(1, 2, 4, k), randRing(2, 2, 1, k) // every token; one token per candidate
	want1, _ := share.MatMul(mustReshape(t, x1, 8, k), w1)
	want2, _ := share.MatMul(mustReshape(t, x2, 2, k), w2)
	x1sh, x2sh := splitTensor(x1, 1), splitTensor(x2, 2)
	r := runPair(t, func(ctx context.Context, s *Session) ([]*share.Tensor, error) {
		var a, b *share.Tensor
		if s.Party() == 0 {
			a, b = w1, w2
		}
		h1, err := s.ShareWeight(ctx, 1, a, k, n1)
		if err != nil {
			return nil, err
		}
		h2, err := s.ShareWeight(ctx, 2, b, k, n2)
		if err != nil {
			return nil, err
		}
		for _, bad := range []struct {
			xs []*share.Tensor
			ws []*Weight
		}{
			{nil, nil},
			{[]*share.Tensor{pickShare(s, x1sh)}, []*Weight{h1, h2}},
			{[]*share.Tensor{pickShare(s, x1sh), nil}, []*Weight{h1, h2}},
			{[]*share.Tensor{pickShare(s, x1sh), randRing(3, 2, k+1)}, []*Weight{h1, h2}},
		} {
			if _, err := s.MatMulWeightsMany(ctx, bad.xs, bad.ws); err == nil {
				t.Errorf("party %d: %d operands for %d weights: no error", s.Party(), len(bad.xs), len(bad.ws))
			}
		}
		before, items := s.Stream().Stats(), s.Provider().Stats().Items
		ys, err := s.MatMulWeightsMany(ctx, []*share.Tensor{pickShare(s, x1sh), pickShare(s, x2sh)}, []*Weight{h1, h2})
		if err != nil {
			return nil, err
		}
		d := s.Stream().Stats().Sub(before)
		wantSent := [2]int64{0, wireBytes(8*k + 2*k)}[s.Party()]
		if d.BytesSent != wantSent || d.Rounds != 1 {
			t.Errorf("party %d: two products cost %v, want 1 round and %d bytes sent", s.Party(), d, wantSent)
		}
		if got := s.Provider().Stats().Items - items; got != 2 {
			t.Errorf("party %d: %d dealer items, want one weight triple per product", s.Party(), got)
		}
		return ys, nil
	})
	for j, c := range []struct {
		want  *share.Tensor
		shape []int
	}{{want1, []int{2, 4, n1}}, {want2, []int{2, 1, n2}}} {
		got := openPair(t, [2]*share.Tensor{r.Out[0][j], r.Out[1][j]})
		if !slices.Equal(got.Shape, c.shape) || !slices.Equal(got.Data, c.want.Data) {
			t.Errorf("product %d: got shape %v, want %v (or the values differ)", j, got.Shape, c.shape)
		}
	}
}

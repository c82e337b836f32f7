package protocol

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// grid returns n points spread geometrically (log) or linearly over [lo, hi],
// endpoints included.
func grid(lo, hi float64, n int, logScale bool) []float64 {
	out := make([]float64, n)
	for i := range out {
		t := float64(i) / float64(n-1)
		if logScale {
			out[i] = lo * math.Pow(hi/lo, t)
		} else {
			out[i] = lo + (hi-lo)*t
		}
	}
	return out
}

// approxCase is one elementwise approximation checked over a range.
type approxCase struct {
	name   string
	xs     []float64
	op     func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error)
	ref    func(float64) float64
	maxAbs float64 // tolerated |got − want| is maxAbs + maxRel·|want|
	maxRel float64
	rounds int64
	bytes  func(n int) int64 // exact bytes each party sends
}

func TestApproxElementwise(t *testing.T) {
	fp := share.DefaultFixedPoint
	exp := func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error) { return s.Exp(ctx, x) }
	recPos := func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
		return s.ReciprocalPositive(ctx, x)
	}
	rec := func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
		return s.Reciprocal(ctx, x)
	}
	isq := func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
		return s.InvSqrt(ctx, x)
	}
	lg := func(s *Session, ctx context.Context, x *share.Tensor) (*share.Tensor, error) { return s.Log(ctx, x) }
	inv := func(x float64) float64 { return 1 / x }
	negGrid := grid(0.05, 500, 300, true)
	for i := range negGrid {
		negGrid[i] = -negGrid[i]
	}
	w := wireBytes
	tw := truncWire
	expB := func(n int) int64 { return 8 * (w(n) + tw(n)) }
	recPosB := func(n int) int64 { return expB(n) + 10*(w(n)+w(2*n)+tw(n)) }
	recB := func(n int) int64 { return msbWire(n) + 2*w(share.PackedWords(n)+n) + recPosB(n) }
	isqB := func(n int) int64 { return expB(n) + tw(n) + 3*(w(n)+w(2*n)+tw(n)+w(2*n)+tw(n)) }
	logB := func(n int) int64 {
		iter := expB(n) + w(2*n) + tw(n) + w(n) + tw(n) + w(4*n) + tw(2*n) + w(8*n) + tw(4*n) + tw(n)
		return tw(n) + expB(n) + 2*iter
	}
	cases := []approxCase{
		{name: "exp[-16,0]", xs: grid(-16, 0, 801, false), op: exp, ref: math.Exp, maxAbs: 2.5e-3, rounds: 16},
		{name: "exp[-256,-16]", xs: grid(-256, -16, 200, false), op: exp, ref: math.Exp, maxAbs: 1e-5, rounds: 16},
		{name: "exp[0,4]", xs: grid(0, 4, 401, false), op: exp, ref: math.Exp, maxRel: 0.035, rounds: 16},
		{name: "exp[4,10]", xs: grid(4, 10, 101, false), op: exp, ref: math.Exp, maxRel: 0.2, rounds: 16, bytes: expB},
		{name: "reciprocal+[0.05,500]", xs: grid(0.05, 500, 600, true), op: recPos, ref: inv, maxAbs: 2e-5, maxRel: 1e-4, rounds: 46, bytes: recPosB},
		{name: "reciprocal±[0.05,500]", xs: append(grid(0.05, 500, 300, true), negGrid...), op: rec, ref: inv, maxAbs: 2e-5, maxRel: 1e-4, rounds: 54, bytes: recB},
		{name: "inv_sqrt[0.1,100]", xs: grid(0.1, 100, 600, true), op: isq, ref: func(x float64) float64 { return 1 / math.Sqrt(x) }, maxRel: 6e-3, rounds: 32, bytes: isqB},
		{name: "log[0.01,250]", xs: grid(0.01, 250, 600, true), op: lg, ref: math.Log, maxAbs: 7e-2, rounds: 67},
		{name: "log[0.5,20]", xs: grid(0.5, 20, 400, true), op: lg, ref: math.Log, maxAbs: 2.2e-2, rounds: 67, bytes: logB},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.xs)
			x := splitTensor(encodeT(t, fp, tc.xs, n), 12)
			r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) { return tc.op(s, ctx, x[s.Party()]) })
			got := fp.DecodeTensor(openPair(t, r.Out))
			worstAbs, worstRel, at := 0.0, 0.0, 0.0
			for i, v := range tc.xs {
				want := tc.ref(fp.Decode(x[0].Data[i] + x[1].Data[i])) // of the encoded input
				d := math.Abs(got[i] - want)
				rel := d / math.Abs(want)
				if d > worstAbs {
					worstAbs = d
				}
				if rel > worstRel {
					worstRel, at = rel, v
				}
				if d > tc.maxAbs+tc.maxRel*math.Abs(want) {
					t.Fatalf("f(%g) = %g, want %g (abs error %.3g, rel %.3g)", v, got[i], want, d, rel)
				}
			}
			t.Logf("%s: max abs error %.3g, max rel error %.3g (at %g), %d rounds, %d bytes/element",
				tc.name, worstAbs, worstRel, at, r.Stats[0].Rounds, r.Stats[0].BytesSent/int64(n))
			for p := range 2 {
				if r.Stats[p].Rounds != tc.rounds {
					t.Errorf("party %d: %d rounds, want %d", p, r.Stats[p].Rounds, tc.rounds)
				}
				if tc.bytes != nil && r.Stats[p].BytesSent != tc.bytes(n) {
					t.Errorf("party %d: sent %d bytes, want %d", p, r.Stats[p].BytesSent, tc.bytes(n))
				}
			}
		})
	}
}

// TestExpCost asserts exp's exact traffic: 8 × (Square + Trunc), messages
// of n words and of ⌈n/64⌉ words.
func TestExpCost(t *testing.T) {
	fp := share.DefaultFixedPoint
	xs := grid(-4, 1, 100, false)
	x := splitTensor(encodeT(t, fp, xs, len(xs)), 13)
	r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) { return s.Exp(ctx, x[s.Party()]) })
	w := 8 * (wireBytes(len(xs)) + truncWire(len(xs)))
	wantCost(t, r, [2]int64{16, 16}, [2]int64{w, w})
}

// rowLogits returns rows×m logits uniform in [−lim, lim].
func rowLogits(rows, m int, lim float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 77))
	v := make([]float64, rows*m)
	for i := range v {
		v[i] = (rng.Float64()*2 - 1) * lim
	}
	return v
}

func plainSoftmax(row []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = math.Max(mx, v)
	}
	out := make([]float64, len(row))
	sum := 0.0
	for i, v := range row {
		out[i] = math.Exp(v - mx)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

func TestSoftmaxEntropy(t *testing.T) {
	fp := share.DefaultFixedPoint
	cases := []struct {
		name       string
		rows, m    int
		lim        float64
		maxP, maxH float64
	}{
		{"m16", 8, 16, 8, 4e-3, 2e-2},
		{"m2-ties", 4, 2, 0, 4e-3, 2e-2},
		{"m1", 3, 1, 4, 0, 0},
		{"m128-wide", 2, 128, 20, 4e-3, 2e-2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vals := rowLogits(tc.rows, tc.m, tc.lim, uint64(tc.m))
			x := splitTensor(encodeT(t, fp, vals, tc.rows, tc.m), 14)
			r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
				p, err := s.Softmax(ctx, x[s.Party()])
				if err != nil {
					return [2]*share.Tensor{}, err
				}
				h, err := s.Entropy(ctx, x[s.Party()])
				return [2]*share.Tensor{p, h}, err
			})
			p := fp.DecodeTensor(openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]}))
			h := fp.DecodeTensor(openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]}))
			if len(h) != tc.rows {
				t.Fatalf("%d entropies, want %d", len(h), tc.rows)
			}
			worstP, worstH := 0.0, 0.0
			for row := range tc.rows {
				in := make([]float64, tc.m)
				for j := range in {
					in[j] = fp.Decode(x[0].Data[row*tc.m+j] + x[1].Data[row*tc.m+j])
				}
				want := plainSoftmax(in)
				wantH := 0.0
				for j, q := range want {
					worstP = math.Max(worstP, math.Abs(p[row*tc.m+j]-q))
					if q > 0 {
						wantH -= q * math.Log(q)
					}
				}
				worstH = math.Max(worstH, math.Abs(h[row]-wantH))
			}
			t.Logf("%s: max abs error p %.3g, entropy %.3g; rounds %d", tc.name, worstP, worstH, r.Stats[0].Rounds)
			if worstP > tc.maxP || worstH > tc.maxH {
				t.Fatalf("errors p %.3g (limit %.3g), entropy %.3g (limit %.3g)", worstP, tc.maxP, worstH, tc.maxH)
			}
			levels := int64(math.Ceil(math.Log2(float64(tc.m))))
			want := int64(0)
			if tc.m > 1 {
				want = (7*levels + 16 + 46 + 2) + (7*levels + 16 + 2 + 46 + 2 + 67)
			}
			for q := range 2 {
				if r.Stats[q].Rounds != want {
					t.Errorf("party %d: %d rounds, want %d", q, r.Stats[q].Rounds, want)
				}
			}
		})
	}
}

func TestApproxBadInput(t *testing.T) {
	r := runPair(t, func(ctx context.Context, s *Session) ([]error, error) {
		bad := &share.Tensor{Shape: []int{4}, Data: make([]uint64, 2)}
		scalar := &share.Tensor{Shape: []int{}, Data: []uint64{0}}
		var errs []error
		_, err := s.Exp(ctx, bad)
		errs = append(errs, err)
		_, err = s.Reciprocal(ctx, nil)
		errs = append(errs, err)
		_, err = s.ReciprocalPositive(ctx, bad)
		errs = append(errs, err)
		_, err = s.InvSqrt(ctx, bad)
		errs = append(errs, err)
		_, err = s.Log(ctx, bad)
		errs = append(errs, err)
		_, err = s.Softmax(ctx, scalar)
		errs = append(errs, err)
		_, err = s.Entropy(ctx, &share.Tensor{Shape: []int{3, 0}})
		errs = append(errs, err)
		return errs, nil
	})
	for i, err := range r.Out[0] {
		if err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
	// Too many fractional bits for the approximations.
	fp, err := share.NewFixedPoint(30, 10)
	if err != nil {
		t.Fatal(err)
	}
	r2 := runPairWith(t, pairConfig{FP: fp}, func(ctx context.Context, s *Session) (error, error) {
		_, err := s.Exp(ctx, &share.Tensor{Shape: []int{1}, Data: []uint64{0}})
		return err, nil
	})
	if r2.Out[0] == nil {
		t.Error("exp with 30 fractional bits: no error")
	}
}

// TestApproxOtherEncodings runs the approximations with 12 and 20 fractional
// bits: with 20, exp first truncates its base (F = 28 > 27 bits: one more
// round) and x·y² takes the 4-round SquareFixed + MulFixed path.
func TestApproxOtherEncodings(t *testing.T) {
	cases := []struct {
		frac, intBits        uint
		expRounds, recRounds int64
		tol                  float64
	}{
		{12, 15, 16, 46, 4e-2}, // 2^−12 units, amplified by the squarings
		{20, 11, 17, 57, 2e-3},
	}
	for _, tc := range cases {
		fp, err := share.NewFixedPoint(tc.frac, tc.intBits)
		if err != nil {
			t.Fatal(err)
		}
		xs := grid(0.1, 20, 200, true)
		negs := grid(-8, 0, 200, false)
		x := splitTensor(encodeT(t, fp, xs, len(xs)), 16)
		y := splitTensor(encodeT(t, fp, negs, len(negs)), 17)
		r := runPairWith(t, pairConfig{FP: fp}, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
			e, err := s.Exp(ctx, y[s.Party()])
			if err != nil {
				return [2]*share.Tensor{}, err
			}
			rec, err := s.ReciprocalPositive(ctx, x[s.Party()])
			return [2]*share.Tensor{e, rec}, err
		})
		e := fp.DecodeTensor(openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]}))
		rec := fp.DecodeTensor(openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]}))
		for i, v := range negs {
			if d := math.Abs(e[i] - math.Exp(v)); d > tc.tol {
				t.Errorf("f=%d: exp(%g) = %g (error %.3g)", tc.frac, v, e[i], d)
			}
		}
		for i, v := range xs {
			if d := math.Abs(rec[i] - 1/v); d > tc.tol*(1+1/v) {
				t.Errorf("f=%d: 1/%g = %g (error %.3g)", tc.frac, v, rec[i], d)
			}
		}
		if want := tc.expRounds + tc.recRounds; r.Stats[0].Rounds != want {
			t.Errorf("f=%d: %d rounds, want %d", tc.frac, r.Stats[0].Rounds, want)
		}
	}
}

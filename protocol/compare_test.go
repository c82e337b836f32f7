package protocol

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// splitBits returns XOR shares of the bits (bit i of the result = bits[i]).
func splitBits(bits []bool, seed uint64, shape ...int) [2]*BitTensor {
	rng := rand.New(rand.NewPCG(seed, 99))
	w := share.PackedWords(len(bits))
	a, b := make([]uint64, w), make([]uint64, w)
	for j := range b {
		b[j] = rng.Uint64()
		a[j] = b[j]
	}
	for i, v := range bits {
		if v {
			a[i/64] ^= 1 << uint(i%64)
		}
	}
	return [2]*BitTensor{{Shape: slices.Clone(shape), Words: a}, {Shape: slices.Clone(shape), Words: b}}
}

func randomWords(rng *rand.Rand, n int) []uint64 {
	x := make([]uint64, n)
	for i := range x {
		x[i] = rng.Uint64()
	}
	return x
}

func randomBools(rng *rand.Rand, n int) []bool {
	b := make([]bool, n)
	for i := range b {
		b[i] = rng.IntN(2) == 1
	}
	return b
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func TestB2A(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 64, 100, 3000} {
		bits := randomBools(rng, n)
		sh := splitBits(bits, uint64(n), n)
		r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
			return s.B2A(ctx, sh[s.Party()])
		})
		got := openPair(t, r.Out)
		for i, v := range bits {
			if got.Data[i] != b2u(v) {
				t.Fatalf("n=%d element %d: %d, want %d", n, i, got.Data[i], b2u(v))
			}
		}
		w := wireBytes(share.PackedWords(n))
		wantCost(t, r, [2]int64{1, 1}, [2]int64{w, w})
	}
}

func TestLTZAndLessThan(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	fp := share.DefaultFixedPoint
	// x and y inside |·| < 2^62, including equal pairs and ±1 ulp apart.
	var xs, ys []uint64
	for _, v := range signEdgeValues {
		if int64(v) > -(1<<62) && int64(v) < 1<<62 { // LessThan's documented range
			for _, d := range []uint64{0, 1, ^uint64(0)} {
				xs = append(xs, v)
				ys = append(ys, v+d)
			}
		}
	}
	for range 500 {
		xs = append(xs, uint64(rng.Int64N(1<<62)-rng.Int64N(1<<62)))
		ys = append(ys, uint64(rng.Int64N(1<<62)-rng.Int64N(1<<62)))
	}
	for _, v := range []float64{-3.5, -1, -fp.Ulp(), 0, fp.Ulp(), 1, 2.75} {
		e, _ := fp.Encode(v)
		xs, ys = append(xs, e), append(ys, 0)
	}
	n := len(xs)
	x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 1)
	y := splitTensor(&share.Tensor{Shape: []int{n}, Data: ys}, 2)
	cmpWant := func(i int) bool { return int64(xs[i]) < int64(ys[i]) }
	ltzWire := msbWire(n) + wireBytes(share.PackedWords(n))

	t.Run("LTZ", func(t *testing.T) {
		d, _ := cmpDiff("test", &share.Tensor{Shape: []int{n}, Data: xs}, &share.Tensor{Shape: []int{n}, Data: ys})
		dsh := splitTensor(d, 3)
		r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) { return s.LTZ(ctx, dsh[s.Party()]) })
		got := openPair(t, r.Out)
		for i := range n {
			if got.Data[i] != b2u(int64(d.Data[i]) < 0) {
				t.Fatalf("element %d (%d): %d", i, int64(d.Data[i]), got.Data[i])
			}
		}
		wantCost(t, r, [2]int64{7, 7}, [2]int64{ltzWire, ltzWire})
	})
	t.Run("LessThan", func(t *testing.T) {
		r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) {
			return s.LessThan(ctx, x[s.Party()], y[s.Party()])
		})
		got := openPair(t, r.Out)
		for i := range n {
			if got.Data[i] != b2u(cmpWant(i)) {
				t.Fatalf("element %d: %d < %d gave %d", i, int64(xs[i]), int64(ys[i]), got.Data[i])
			}
		}
		wantCost(t, r, [2]int64{7, 7}, [2]int64{ltzWire, ltzWire})
	})
	t.Run("CompareReveal", func(t *testing.T) {
		r := runPair(t, func(ctx context.Context, s *Session) ([]bool, error) {
			return s.CompareReveal(ctx, x[s.Party()], y[s.Party()])
		})
		if !slices.Equal(r.Out[0], r.Out[1]) {
			t.Fatal("the parties revealed different bits")
		}
		for i := range n {
			if r.Out[0][i] != cmpWant(i) {
				t.Fatalf("element %d: %d < %d revealed %v", i, int64(xs[i]), int64(ys[i]), r.Out[0][i])
			}
		}
		wantCost(t, r, [2]int64{7, 7}, [2]int64{ltzWire, ltzWire})
	})
}

func TestMulBitAndSelect(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 63, 64, 65, 2000} {
		xs, ys := randomWords(rng, n), randomWords(rng, n)
		xs[0] = 1 << 63
		bits := randomBools(rng, n)
		x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 4)
		y := splitTensor(&share.Tensor{Shape: []int{n}, Data: ys}, 5)
		b := splitBits(bits, 6, n)
		r := runPair(t, func(ctx context.Context, s *Session) ([2]*share.Tensor, error) {
			m, err := s.MulBit(ctx, x[s.Party()], b[s.Party()])
			if err != nil {
				return [2]*share.Tensor{}, err
			}
			sel, err := s.Select(ctx, b[s.Party()], x[s.Party()], y[s.Party()])
			return [2]*share.Tensor{m, sel}, err
		})
		mul := openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]})
		sel := openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]})
		for i := range n {
			if want := xs[i] * b2u(bits[i]); mul.Data[i] != want {
				t.Fatalf("n=%d: mul bit %d: %#x, want %#x", n, i, mul.Data[i], want)
			}
			want := ys[i]
			if bits[i] {
				want = xs[i]
			}
			if sel.Data[i] != want {
				t.Fatalf("n=%d: select %d: %#x, want %#x", n, i, sel.Data[i], want)
			}
		}
		w := 2 * wireBytes(share.PackedWords(n)+n)
		wantCost(t, r, [2]int64{2, 2}, [2]int64{w, w})
	}
}

func TestReLU(t *testing.T) {
	fp := share.DefaultFixedPoint
	rng := rand.New(rand.NewPCG(17, 18))
	vals := []float64{0, fp.Ulp(), -fp.Ulp(), 1, -1, 0.5, -0.5, fp.Bound() - fp.Ulp(), -(fp.Bound() - fp.Ulp())}
	for range 1000 {
		vals = append(vals, (rng.Float64()*2-1)*100)
	}
	n := len(vals)
	xt := encodeT(t, fp, vals, n)
	// Raw ring words near ±2^62 as well: ReLU is exact on every word.
	xt.Data = append(xt.Data, 1<<62-1, 3<<62+1, 1<<63-1, 1<<63)
	xt.Shape = []int{len(xt.Data)}
	n = len(xt.Data)
	x := splitTensor(xt, 8)
	r := runPair(t, func(ctx context.Context, s *Session) (*share.Tensor, error) { return s.ReLU(ctx, x[s.Party()]) })
	got := openPair(t, r.Out)
	for i, v := range xt.Data {
		want := v
		if int64(v) < 0 {
			want = 0
		}
		if got.Data[i] != want {
			t.Fatalf("relu(%d) = %d", int64(v), int64(got.Data[i]))
		}
	}
	w := msbWire(n) + wireBytes(share.PackedWords(n)+n)
	wantCost(t, r, [2]int64{7, 7}, [2]int64{w, w})
}

func TestMaxArgMax(t *testing.T) {
	fp := share.DefaultFixedPoint
	rng := rand.New(rand.NewPCG(19, 20))
	cases := []struct {
		name  string
		shape []int
		vals  []float64 // nil: random
	}{
		{"single", []int{3, 1}, nil},
		{"pair", []int{2, 2}, nil},
		{"odd", []int{4, 5}, nil},
		{"ties", []int{2, 6}, []float64{1, 3, 3, 0, 3, -1, -2, -2, -2, -2, -2, -2}},
		{"negatives", []int{1, 7}, []float64{-5, -4.5, -100, -4.5, -4.25, -7, -4.25}},
		{"rank3", []int{2, 3, 13}, nil},
		{"row128", []int{2, 128}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			for _, d := range tc.shape {
				n *= d
			}
			vals := tc.vals
			if vals == nil {
				vals = make([]float64, n)
				for i := range vals {
					vals[i] = math.Round((rng.Float64()*2-1)*1000) / 8
				}
			}
			x := splitTensor(encodeT(t, fp, vals, tc.shape...), 9)
			r := runPair(t, func(ctx context.Context, s *Session) ([3]*share.Tensor, error) {
				mx, err := s.Max(ctx, x[s.Party()])
				if err != nil {
					return [3]*share.Tensor{}, err
				}
				amx, oh, err := s.ArgMax(ctx, x[s.Party()])
				return [3]*share.Tensor{mx, amx, oh}, err
			})
			mx := openPair(t, [2]*share.Tensor{r.Out[0][0], r.Out[1][0]})
			amx := openPair(t, [2]*share.Tensor{r.Out[0][1], r.Out[1][1]})
			oh := openPair(t, [2]*share.Tensor{r.Out[0][2], r.Out[1][2]})
			m := tc.shape[len(tc.shape)-1]
			if !slices.Equal(mx.Shape, tc.shape[:len(tc.shape)-1]) || !slices.Equal(oh.Shape, tc.shape) {
				t.Fatalf("shapes %v, %v", mx.Shape, oh.Shape)
			}
			for row := 0; row < n/m; row++ {
				best := 0
				for j := 1; j < m; j++ {
					if vals[row*m+j] > vals[row*m+best] {
						best = j
					}
				}
				if got := fp.Decode(mx.Data[row]); got != vals[row*m+best] {
					t.Fatalf("row %d: max %v, want %v", row, got, vals[row*m+best])
				}
				if amx.Data[row] != mx.Data[row] {
					t.Fatalf("row %d: ArgMax's max differs from Max", row)
				}
				for j := 0; j < m; j++ {
					if want := b2u(j == best); oh.Data[row*m+j] != want {
						t.Fatalf("row %d: one-hot[%d] = %d, want %d (best %d)", row, j, oh.Data[row*m+j], want, best)
					}
				}
			}
			levels := int64(0)
			for k := m; k > 1; k = (k + 1) / 2 {
				levels++
			}
			// Each level: the sign circuit on rows·⌊k/2⌋ differences, then one
			// MulBit on those differences (Max) plus, for ArgMax, the one-hot
			// entries of every paired candidate.
			rows := n / m
			var wantBytes int64
			for k := m; k > 1; k = (k + 1) / 2 {
				p := k / 2
				span := 1 // positions per candidate (the last may have fewer)
				for kk := m; kk > k; kk = (kk + 1) / 2 {
					span *= 2
				}
				covered := min(m, 2*p*span) // positions in pairs
				maxMux := rows * p
				argMux := rows*p + rows*covered
				wantBytes += 2*msbWire(rows*p) + wireBytes(share.PackedWords(maxMux)+maxMux) + wireBytes(share.PackedWords(argMux)+argMux)
			}
			wantRounds := 2 * 7 * levels
			wantCost(t, r, [2]int64{wantRounds, wantRounds}, [2]int64{wantBytes, wantBytes})
		})
	}
}

// TestCompareUniform checks that what each party receives during the
// nonlinear protocols looks uniform, whatever the secret: two very different
// secrets, a byte-histogram chi-square per party and secret (fixed seeds, so
// the outcome is reproducible), and no received word equal to a secret word
// or to a bit plane of the secret.
func TestCompareUniform(t *testing.T) {
	const n = 4096
	secrets := map[string][]uint64{"zeros": make([]uint64, n), "ramp": make([]uint64, n)}
	for i := range secrets["ramp"] {
		secrets["ramp"][i] = uint64(i) << 20 * 0x9E3779B97F4A7C15 >> 1
	}
	bits := make([]bool, n)
	for i := range bits {
		bits[i] = i%3 == 0
	}
	for name, xs := range secrets {
		t.Run(name, func(t *testing.T) {
			x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 10)
			b := splitBits(bits, 11, n)
			r := runPairWith(t, pairConfig{Record: true, Seed: 3}, func(ctx context.Context, s *Session) (int, error) {
				if _, err := s.ReLU(ctx, x[s.Party()]); err != nil {
					return 0, err
				}
				if _, err := s.B2A(ctx, b[s.Party()]); err != nil {
					return 0, err
				}
				_, err := s.CompareReveal(ctx, x[s.Party()], x[s.Party()])
				return 0, err
			})
			clear := map[uint64]bool{}
			for _, v := range xs {
				if v != 0 {
					clear[v] = true
				}
			}
			planes := bitSlice(xs)
			for _, w := range planes {
				if w != 0 && w != ^uint64(0) {
					clear[w] = true
				}
			}
			for p := range 2 {
				msgs := r.Recv[p]
				// The last message is the revealed comparison (all false,
				// x < x never holds): the output, not a protocol message.
				if len(msgs) != 15 { // ReLU 7, B2A 1, CompareReveal 7
					t.Fatalf("party %d received %d messages, want 15", p, len(msgs))
				}
				checkViewHidesSecret(t, p, msgs[:len(msgs)-1], clear)
			}
		})
	}
}

func TestCompareBadInput(t *testing.T) {
	r := runPair(t, func(ctx context.Context, s *Session) ([]string, error) {
		good := &share.Tensor{Shape: []int{3}, Data: make([]uint64, 3)}
		other := &share.Tensor{Shape: []int{4}, Data: make([]uint64, 4)}
		bad := &share.Tensor{Shape: []int{5}, Data: make([]uint64, 3)}
		bits3 := &BitTensor{Shape: []int{3}, Words: make([]uint64, 1)}
		badBits := &BitTensor{Shape: []int{100}, Words: make([]uint64, 1)}
		empty := &share.Tensor{Shape: []int{2, 0}, Data: nil}
		var errs []string
		add := func(err error) {
			if err == nil {
				errs = append(errs, "<nil>")
			} else {
				errs = append(errs, err.Error())
			}
		}
		_, err := s.MSB(ctx, nil)
		add(err)
		_, err = s.MSB(ctx, bad)
		add(err)
		_, err = s.LessThan(ctx, good, other)
		add(err)
		_, err = s.CompareReveal(ctx, good, nil)
		add(err)
		_, err = s.B2A(ctx, badBits)
		add(err)
		_, err = s.B2A(ctx, nil)
		add(err)
		_, err = s.MulBit(ctx, other, bits3)
		add(err)
		_, err = s.MulBit(ctx, good, badBits)
		add(err)
		_, err = s.Select(ctx, bits3, good, other)
		add(err)
		_, err = s.ReLU(ctx, bad)
		add(err)
		_, err = s.Max(ctx, empty)
		add(err)
		_, _, err = s.ArgMax(ctx, &share.Tensor{Shape: []int{}, Data: []uint64{1}})
		add(err)
		_, err = s.RevealBits(ctx, badBits)
		add(err)
		_, err = XorBits(bits3, badBits)
		add(err)
		_, err = s.NotBits(nil)
		add(err)
		return errs, nil
	})
	for i, e := range r.Out[0] {
		if e == "<nil>" || !strings.HasPrefix(e, "protocol: ") {
			t.Errorf("case %d: error %q, want a protocol error", i, e)
		}
	}
	for p := range 2 {
		if r.Stats[p].BytesSent != 0 {
			t.Errorf("party %d sent %d bytes on bad input", p, r.Stats[p].BytesSent)
		}
	}
}

package protocol

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/selectformer/selectformer/share"
)

// msb32Wire is the exact number of bytes each party sends in the 32-bit sign
// circuit on n elements: five messages of 76, 30, 14, 6 and 2 words per 64
// elements (128 bits per comparison), each with its frame headers.
func msb32Wire(n int) int64 {
	w := (n + 63) / 64
	var b int64
	for _, k := range []int{76, 30, 14, 6, 2} {
		b += wireBytes(k * w)
	}
	return b
}

// boundedDiffs are differences x − y at the edges of CompareRevealBounded's
// range −2^31 ≤ x − y < 2^31.
var boundedDiffs = []int64{0, 1, -1, 2, -2, 1<<31 - 1, -(1<<31 - 1), -1 << 31, 1 << 16, -1 << 16, 1<<30 + 12345, -(1 << 30)}

// boundedPairs returns n pairs (x, y) with −2^31 ≤ x − y < 2^31 and
// |x|, |y| < 2^62: the first ones cycle through boundedDiffs around varied x
// (0, ±1, ±2^62 − 2^32, random), the rest are random.
func boundedPairs(rng *rand.Rand, n int) (xs, ys []uint64) {
	bases := []int64{0, 1, -1, 1<<62 - 1<<32, -(1<<62 - 1<<32), 1 << 40}
	for i := range n {
		var x, d int64
		if i < len(boundedDiffs)*len(bases) {
			d = boundedDiffs[i%len(boundedDiffs)]
			x = bases[i/len(boundedDiffs)]
		} else {
			d = rng.Int64N(1<<32) - 1<<31
			x = rng.Int64N(1<<61) - rng.Int64N(1<<61)
		}
		xs = append(xs, uint64(x))
		ys = append(ys, uint64(x-d))
	}
	return xs, ys
}

// TestCompareRevealBounded checks that CompareRevealBounded reveals exactly
// the plaintext [x < y] for pairs inside its bound, for several sizes
// (empty, one, around a word, many), with the exact cost: 5 rounds of the
// 32-bit sign circuit and the opening, 76W + 30W + 14W + 6W + 2W + W words.
func TestCompareRevealBounded(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 1000} {
		t.Run("", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(31, uint64(n)))
			xs, ys := boundedPairs(rng, n)
			x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 1)
			y := splitTensor(&share.Tensor{Shape: []int{n}, Data: ys}, 2)
			r := runPair(t, func(ctx context.Context, s *Session) ([]bool, error) {
				return s.CompareRevealBounded(ctx, x[s.Party()], y[s.Party()])
			})
			if !slices.Equal(r.Out[0], r.Out[1]) {
				t.Fatal("the parties revealed different bits")
			}
			if len(r.Out[0]) != n {
				t.Fatalf("%d bits for %d pairs", len(r.Out[0]), n)
			}
			for i := range n {
				if want := int64(xs[i]) < int64(ys[i]); r.Out[0][i] != want {
					t.Fatalf("n=%d element %d: %d < %d (difference %d) revealed %v", n, i, int64(xs[i]), int64(ys[i]), int64(xs[i]-ys[i]), r.Out[0][i])
				}
			}
			var rounds, bytes int64
			if n > 0 {
				rounds, bytes = 6, msb32Wire(n)+wireBytes(share.PackedWords(n))
			}
			wantCost(t, r, [2]int64{rounds, rounds}, [2]int64{bytes, bytes})
			if n == 0 && (r.Dealer[0].Items != 0 || r.Dealer[1].Items != 0) {
				t.Errorf("empty input drew dealer material: %+v", r.Dealer)
			}
		})
	}
}

// TestCompareRevealBoundedOutOfRange pins the documented behaviour outside
// the bound: the bit revealed is bit 31 of x − y, so it is wrong for some
// differences of 2^31 or more in magnitude — the circuit really looks at 32
// bits only — while CompareReveal stays exact on the same pairs.
func TestCompareRevealBoundedOutOfRange(t *testing.T) {
	diffs := []int64{1 << 31, -(1<<31 + 1), 1 << 32, 3 << 31, -(3 << 31), 1 << 40}
	n := len(diffs)
	xs, ys := make([]uint64, n), make([]uint64, n)
	for i, d := range diffs {
		xs[i], ys[i] = uint64(d), 0
	}
	x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xs}, 3)
	y := splitTensor(&share.Tensor{Shape: []int{n}, Data: ys}, 4)
	r := runPair(t, func(ctx context.Context, s *Session) ([2][]bool, error) {
		b, err := s.CompareRevealBounded(ctx, x[s.Party()], y[s.Party()])
		if err != nil {
			return [2][]bool{}, err
		}
		full, err := s.CompareReveal(ctx, x[s.Party()], y[s.Party()])
		return [2][]bool{b, full}, err
	})
	for i, d := range diffs {
		if want := uint64(d)>>31&1 == 1; r.Out[0][0][i] != want {
			t.Errorf("difference %d: bounded revealed %v, want bit 31 = %v", d, r.Out[0][0][i], want)
		}
		if r.Out[0][1][i] != (d < 0) {
			t.Errorf("difference %d: CompareReveal revealed %v", d, r.Out[0][1][i])
		}
	}
	// 2^31 has bit 31 set but is positive: the bounded comparison errs.
	if !r.Out[0][0][0] {
		t.Error("2^31 compared as non-negative: the circuit is not the 32-bit one")
	}
}

// TestCompareRevealBoundedUniform mirrors TestCompareUniform for the 32-bit
// circuit: what each party receives before the opening looks uniform (byte
// histogram chi-square), whatever the secrets, and no received word is a
// word or a (low 32) bit plane of a secret.
func TestCompareRevealBoundedUniform(t *testing.T) {
	const n = 4096
	ramp := make([]uint64, n)
	for i := range ramp {
		ramp[i] = uint64(i) << 20 * 0x9E3779B97F4A7C15 >> 34 // below 2^30
	}
	secrets := map[string][2][]uint64{
		"zeros":      {make([]uint64, n), make([]uint64, n)},
		"ramp-zero":  {ramp, make([]uint64, n)},
		"ramp-shift": {ramp, append(ramp[1:n:n], 0)},
	}
	for name, xy := range secrets {
		t.Run(name, func(t *testing.T) {
			x := splitTensor(&share.Tensor{Shape: []int{n}, Data: xy[0]}, 10)
			y := splitTensor(&share.Tensor{Shape: []int{n}, Data: xy[1]}, 12)
			r := runPairWith(t, pairConfig{Record: true, Seed: 5}, func(ctx context.Context, s *Session) ([]bool, error) {
				return s.CompareRevealBounded(ctx, x[s.Party()], y[s.Party()])
			})
			clear := map[uint64]bool{}
			for _, xs := range xy {
				for _, v := range xs {
					if v != 0 {
						clear[v] = true
					}
				}
				for _, w := range bitSlice(xs)[:32*share.PackedWords(n)] {
					if w != 0 && w != ^uint64(0) {
						clear[w] = true
					}
				}
			}
			for p := range 2 {
				msgs := r.Recv[p]
				if len(msgs) != 6 { // 5 sign-circuit messages, then the opening
					t.Fatalf("party %d received %d messages, want 6", p, len(msgs))
				}
				// The last message is the opening of the output bits.
				checkViewHidesSecret(t, p, msgs[:len(msgs)-1], clear)
			}
		})
	}
}

// TestCompareRevealBoundedBadInput checks the errors on bad tensors: nil,
// data not filling the shape, shapes that differ; and that no traffic
// happens then.
func TestCompareRevealBoundedBadInput(t *testing.T) {
	good := &share.Tensor{Shape: []int{3}, Data: make([]uint64, 3)}
	cases := []struct {
		name string
		x, y *share.Tensor
		want string
	}{
		{"nil x", nil, good, "nil tensor"},
		{"nil y", good, nil, "nil tensor"},
		{"short data", &share.Tensor{Shape: []int{5}, Data: make([]uint64, 3)}, good, "do not fill"},
		{"negative dimension", &share.Tensor{Shape: []int{-1}}, good, "negative dimension"},
		{"shapes differ", good, &share.Tensor{Shape: []int{4}, Data: make([]uint64, 4)}, "differ"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runPair(t, func(ctx context.Context, s *Session) (string, error) {
				_, err := s.CompareRevealBounded(ctx, c.x, c.y)
				if err == nil {
					return "<nil>", nil
				}
				return err.Error(), nil
			})
			for p, msg := range r.Out {
				if !strings.Contains(msg, c.want) || !strings.Contains(msg, "compare bounded") {
					t.Errorf("party %d: error %q, want one about %q", p, msg, c.want)
				}
			}
			wantCost(t, r, [2]int64{0, 0}, [2]int64{0, 0})
		})
	}
}

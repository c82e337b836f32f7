package protocol

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/selectformer/selectformer/share"
)

func TestBitSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 63, 64, 65, 130, 1000} {
		x := make([]uint64, n)
		for i := range x {
			x[i] = rng.Uint64()
		}
		planes := bitSlice(x)
		w := share.PackedWords(n)
		if len(planes) != 64*w {
			t.Fatalf("n=%d: %d words, want %d", n, len(planes), 64*w)
		}
		for i := range 64 {
			for e := range 64 * w {
				got := planes[i*w+e/64] >> uint(e%64) & 1
				var want uint64
				if e < n {
					want = x[e] >> uint(i) & 1
				}
				if got != want {
					t.Fatalf("n=%d: plane %d element %d is %d, want %d", n, i, e, got, want)
				}
			}
		}
	}
}

// msbWire is the exact number of bytes each party sends in the sign circuit
// on n elements: six messages of 156, 62, 30, 14, 6 and 2 words per 64
// elements (270 bits per comparison), each with its frame headers.
func msbWire(n int) int64 {
	w := (n + 63) / 64
	var b int64
	for _, k := range []int{156, 62, 30, 14, 6, 2} {
		b += wireBytes(k * w)
	}
	return b
}

// signEdgeValues are ring words around the places where a sign circuit can
// go wrong: 0, ±1, the int64 extremes and ±2^62.
var signEdgeValues = []uint64{
	0, 1, ^uint64(0), 2, ^uint64(1),
	1 << 62, 1<<62 - 1, 1<<62 + 1, 3 << 62, 3<<62 - 1, 3<<62 + 1, // ±2^62 (and ±1)
	1<<63 - 1, 1 << 63, 1<<63 + 1,
	1 << 16, ^uint64(1<<16 - 1), 1<<31 - 1, ^uint64(1<<31 - 1), // ±2^16, 2^31−1, −2^31
}

func TestMSB(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []uint64 {
		x := make([]uint64, n)
		for i := range x {
			x[i] = rng.Uint64()
		}
		return x
	}
	type shares func(x []uint64) [2][]uint64
	randomShares := func(x []uint64) [2][]uint64 {
		sh := splitTensor(&share.Tensor{Shape: []int{len(x)}, Data: x}, 7)
		return [2][]uint64{sh[0].Data, sh[1].Data}
	}
	// allOnP0 gives party 0 the whole secret (b = 0: no carries at all).
	allOnP0 := func(x []uint64) [2][]uint64 { return [2][]uint64{append([]uint64(nil), x...), make([]uint64, len(x))} }
	// allOnes gives party 1 the word 2^64−1, so the carry chain runs through
	// every position whenever party 0's low bits are not all zero.
	allOnes := func(x []uint64) [2][]uint64 {
		a, b := make([]uint64, len(x)), make([]uint64, len(x))
		for i, v := range x {
			b[i] = ^uint64(0)
			a[i] = v + 1
		}
		return [2][]uint64{a, b}
	}
	edges := append([]uint64(nil), signEdgeValues...)
	cases := []struct {
		name  string
		x     []uint64
		split shares
	}{
		{"one", []uint64{^uint64(0)}, randomShares},
		{"edges", edges, randomShares},
		{"edges-all-on-p0", edges, allOnP0},
		{"edges-carry-chain", edges, allOnes},
		{"random-63", random(63), randomShares},
		{"random-64", random(64), randomShares},
		{"random-65", random(65), randomShares},
		{"random-5000", random(5000), randomShares},
		{"multi-frame", random(64 * 1100), randomShares}, // first message > 1 MiB
		{"empty", []uint64{}, randomShares},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sh := tc.split(tc.x)
			r := runPair(t, func(ctx context.Context, s *Session) (*BitTensor, error) {
				return s.MSB(ctx, &share.Tensor{Shape: []int{len(tc.x)}, Data: sh[s.Party()]})
			})
			for i, v := range tc.x {
				got := r.Out[0].Bit(i) ^ r.Out[1].Bit(i)
				if want := v >> 63; got != want {
					t.Fatalf("element %d (%#x): msb %d, want %d", i, v, got, want)
				}
			}
			var rounds int64 = 6
			if len(tc.x) == 0 {
				rounds = 0
			}
			want := msbWire(len(tc.x))
			if len(tc.x) == 0 {
				want = 0
			}
			wantCost(t, r, [2]int64{rounds, rounds}, [2]int64{want, want})
		})
	}
}

func TestMSBBytesPerComparison(t *testing.T) {
	// 270 bits per comparison per party: within the budget of 64 bytes and
	// 7 rounds (CrypTen: 216 bytes sent per party, 8 rounds).
	const n = 64 * 1024
	perCmp := float64(msbWire(n)) / n
	if perCmp > 34 || perCmp < 33.75 {
		t.Fatalf("%.3f bytes per comparison, want 33.75 + framing", perCmp)
	}
}

// BenchmarkMSB measures the sign circuit on 64Ki elements (both parties in
// one process over an in-memory pipe); bytes/op reports one party's traffic.
func BenchmarkMSB(b *testing.B) {
	const n = 1 << 16
	rng := rand.New(rand.NewPCG(21, 22))
	x := splitTensor(&share.Tensor{Shape: []int{n}, Data: randomWords(rng, n)}, 15)
	r := runPair(b, func(ctx context.Context, s *Session) (int, error) {
		if s.Party() == 0 {
			b.ResetTimer()
		}
		for range b.N {
			if _, err := s.MSB(ctx, x[s.Party()]); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
	b.ReportMetric(float64(r.Stats[0].BytesSent)/float64(b.N)/n, "B/cmp")
	b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "cmp/s")
}

package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/selectformer/selectformer/protocol"
	"github.com/selectformer/selectformer/selection"
	"github.com/selectformer/selectformer/share"
)

// TopKCost is the cost of one QuickSelect (selection.TopK) keeping K of N
// shared values.
type TopKCost struct {
	N int `json:"n"`
	K int `json:"k"`
	// Comparisons, Steps and Rounds are TopK's statistics.
	Comparisons int64 `json:"comparisons"`
	Steps       int   `json:"steps"`
	Rounds      int64 `json:"rounds"`
	// BytesP0 and BytesP1 are the bytes each party sent; DealerBytes both
	// parties' dealer traffic and Dealer each party's (DealerBytes is their
	// sum; zero in costs recorded before it was counted apart, when party 1
	// received every dealer word: DealerDown).
	BytesP0     int64    `json:"bytes_p0"`
	BytesP1     int64    `json:"bytes_p1"`
	DealerBytes int64    `json:"dealer_bytes"`
	Dealer      [2]int64 `json:"dealer,omitzero"`
	// Seconds is the wall time without a link (correlated randomness made
	// on demand by the in-process dealer, included).
	Seconds float64 `json:"seconds"`
	// Measured is false for a cost modelled from measured ones (TopKModel).
	Measured bool `json:"measured"`
}

// MeasureTopK runs selection.TopK keeping k of n random shared values, both
// parties in this process without a link.
func MeasureTopK(ctx context.Context, n, k int, seed uint64) (*TopKCost, error) {
	if n <= 0 || k < 0 || k > n {
		return nil, fmt.Errorf("bench: topk: keep %d of %d", k, n)
	}
	type out struct {
		st      selection.SelectStats
		seconds float64
	}
	var coin share.Seed
	for i := range 8 {
		coin[i] = byte(seed >> (8 * i))
	}
	r, err := RunLocal(ctx, LocalConfig{}, func(ctx context.Context, s *protocol.Session) (out, error) {
		// Shares of random values: party 0 holds v + r, party 1 −r. The
		// values lie in [0, 2^30), fixed-point [0, 16384) at the default
		// 16 fractional bits, inside the bound of the 32-bit comparison
		// TopK uses (any two differ by less than 2^31 as ring values).
		rng := rand.New(rand.NewPCG(seed, 99))
		mask := share.NewPRG(coin, "bench/topk/mask")
		vals, err := share.NewTensor(n)
		if err != nil {
			return out{}, err
		}
		for i := range vals.Data {
			v := uint64(rng.Int64N(1 << 30))
			m := mask.Uint64()
			if s.Party() == 0 {
				vals.Data[i] = v + m
			} else {
				vals.Data[i] = -m
			}
		}
		start := time.Now()
		_, st, err := selection.TopK(ctx, s, vals, nil, k, share.NewPRG(coin, "bench/topk/pivots"))
		return out{st, time.Since(start).Seconds()}, err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: topk %d of %d: %w", k, n, err)
	}
	c0, c1 := r.Cost[0], r.Cost[1]
	st := r.Out[0].st
	d := [2]int64{c0.Dealer.BytesRecv + c0.Dealer.BytesSent, c1.Dealer.BytesRecv + c1.Dealer.BytesSent}
	return &TopKCost{N: n, K: k, Comparisons: st.Comparisons, Steps: st.Steps, Rounds: st.Rounds,
		BytesP0: c0.Stream.BytesSent, BytesP1: c1.Stream.BytesSent, DealerBytes: d[0] + d[1], Dealer: d,
		Seconds: max(r.Out[0].seconds, r.Out[1].seconds), Measured: true}, nil
}

// DealerDown returns each party's dealer traffic (Dealer), counted as the
// dealer's bytes to that party: for a cost recorded before it was counted
// apart, all of DealerBytes to party 1.
func (c TopKCost) DealerDown() [2]int64 {
	if c.Dealer == [2]int64{} {
		return [2]int64{0, c.DealerBytes}
	}
	return c.Dealer
}

// harmonic returns H_n = 1 + 1/2 + ... + 1/n.
func harmonic(n int) float64 {
	if n <= 0 {
		return 0
	}
	if n < 64 {
		h := 0.0
		for i := 1; i <= n; i++ {
			h += 1 / float64(i)
		}
		return h
	}
	x := float64(n)
	return math.Log(x) + 0.5772156649015329 + 1/(2*x) - 1/(12*x*x)
}

// ExpectedComparisons is the expected number of comparisons of QuickSelect
// with uniformly random pivots finding the k-th of n values (Knuth, TAOCP
// vol. 3, §5.2.2, ex. 32: C = 2((n+1)H_n − (n+3−k)H_{n+1−k} − (k+2)H_k + n + 3)),
// which TopK, comparing every remaining candidate with the pivot once per
// step, follows; it is linear in n (2n to 3.39n).
func ExpectedComparisons(n, k int) float64 {
	if k <= 0 || k >= n {
		return 0
	}
	fn, fk := float64(n), float64(k)
	return 2 * ((fn+1)*harmonic(n) - (fn+3-fk)*harmonic(n+1-k) - (fk+2)*harmonic(k) + fn + 3)
}

// ExpectedSteps is the expected number of partition steps (pivots) of that
// QuickSelect: the value of rank i is a pivot iff it is drawn first among
// the ranks between i and k, with probability 1/(|i−k|+1), so the sum is
// H_k + H_{n−k+1} − 1 (logarithmic in n). TopK stops once the remaining
// candidates all fit, so it takes about one step less.
func ExpectedSteps(n, k int) float64 {
	if k <= 0 || k >= n {
		return 0
	}
	return harmonic(k) + harmonic(n-k+1) - 1
}

// TopKModel predicts TopK's cost at other sizes from measured ones: bytes,
// dealer bytes and seconds per comparison and rounds per step are the
// measurements' totals divided by their comparisons and steps, applied to
// ExpectedComparisons and ExpectedSteps.
type TopKModel struct {
	BytesPerComparison       [2]float64 `json:"bytes_per_comparison"`
	DealerBytesPerComparison float64    `json:"dealer_bytes_per_comparison"`
	// DealerShare is each party's share of the dealer bytes
	// (TopKCost.DealerDown).
	DealerShare          [2]float64 `json:"dealer_share,omitzero"`
	SecondsPerComparison float64    `json:"seconds_per_comparison"`
	RoundsPerStep        float64    `json:"rounds_per_step"`
}

// NewTopKModel fits a model to measured costs.
func NewTopKModel(ms []TopKCost) (TopKModel, error) {
	var c, steps, rounds, b0, b1, d, sec float64
	var dp [2]float64
	for _, m := range ms {
		for p, v := range m.DealerDown() {
			dp[p] += float64(v)
		}
		c += float64(m.Comparisons)
		steps += float64(m.Steps)
		rounds += float64(m.Rounds)
		b0 += float64(m.BytesP0)
		b1 += float64(m.BytesP1)
		d += float64(m.DealerBytes)
		sec += m.Seconds
	}
	if c == 0 || steps == 0 {
		return TopKModel{}, fmt.Errorf("bench: topk model: no comparisons measured")
	}
	share := [2]float64{0, 1}
	if d > 0 {
		share = [2]float64{dp[0] / d, dp[1] / d}
	}
	return TopKModel{BytesPerComparison: [2]float64{b0 / c, b1 / c}, DealerBytesPerComparison: d / c, DealerShare: share,
		SecondsPerComparison: sec / c, RoundsPerStep: rounds / steps}, nil
}

// Predict returns the modelled cost of keeping k of n.
func (m TopKModel) Predict(n, k int) TopKCost {
	c, s := ExpectedComparisons(n, k), ExpectedSteps(n, k)
	d := int64(c * m.DealerBytesPerComparison)
	share := m.DealerShare
	if share == [2]float64{} { // a model fitted before the parties' shares were kept
		share[1] = 1
	}
	d0 := int64(float64(d) * share[0])
	return TopKCost{N: n, K: k, Comparisons: int64(c), Steps: int(math.Round(s)), Rounds: int64(math.Round(s * m.RoundsPerStep)),
		BytesP0: int64(c * m.BytesPerComparison[0]), BytesP1: int64(c * m.BytesPerComparison[1]),
		DealerBytes: d, Dealer: [2]int64{d0, d - d0}, Seconds: c * m.SecondsPerComparison}
}

package he

import (
	"bytes"
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// chiSquare returns Σ (observed − expected)²/expected.
func chiSquare(counts []int, probs []float64, total int) float64 {
	var x float64
	for i, c := range counts {
		e := probs[i] * float64(total)
		x += (float64(c) - e) * (float64(c) - e) / e
	}
	return x
}

// residueValue reads coefficient x of p as a small signed integer from
// residue 0 and checks that every residue holds the same integer.
func residueValue(t *testing.T, s *Scheme, p ring.Poly, x int) int64 {
	t.Helper()
	q0 := s.p.Q[0]
	v := int64(p.Coeffs[0][x])
	if p.Coeffs[0][x] > q0/2 {
		v = -int64(q0 - p.Coeffs[0][x])
	}
	for i, q := range s.p.Q {
		if p.Coeffs[i][x] != smallMod(v, q) {
			t.Fatalf("coefficient %d: residue %d holds %d, residue 0 %d", x, i, p.Coeffs[i][x], v)
		}
	}
	return v
}

// TestSampleTernary: the coefficients are uniform in {−1, 0, 1} (a χ²
// test over 8 polynomials, 2 degrees of freedom, p = 10^-6 at 27.6), the
// same integer in every residue and in coef, and a stream's bytes from 243
// up are skipped, not folded into the digits.
func TestSampleTernary(t *testing.T) {
	s := defaultScheme
	counts := make([]int, 3)
	coef := make([]int8, s.n)
	p := s.rq.NewPoly()
	const polys = 8
	for i := range polys {
		s.sampleTernary(prngFor(bytes.Repeat([]byte{byte(i)}, 32), domMask, 0), p, coef)
		for x := range s.n {
			v := residueValue(t, s, p, x)
			if v < -1 || v > 1 || int8(v) != coef[x] {
				t.Fatalf("coefficient %d: %d in the residues, %d in coef", x, v, coef[x])
			}
			counts[v+1]++
		}
	}
	if x := chiSquare(counts, []float64{1. / 3, 1. / 3, 1. / 3}, polys*s.n); x > 27.6 {
		t.Fatalf("ternary counts %v: χ² = %.1f", counts, x)
	}

	// A stream of bytes ≥ 243 and then the byte 5 (digits 2, 1, 0, 0, 0:
	// coefficients 1, 0, −1, −1, −1) repeated.
	stream := append(bytes.Repeat([]byte{255, 243, 250}, 1000), bytes.Repeat([]byte{5}, 4*ternaryBytes)...)
	s.sampleTernary(bytes.NewReader(stream), p, coef)
	for x := range s.n {
		if want := []int8{1, 0, -1, -1, -1}[x%5]; coef[x] != want {
			t.Fatalf("coefficient %d: %d, want %d (bytes ≥ 243 must be skipped)", x, coef[x], want)
		}
	}
}

// TestGaussianTable: the table is increasing, below 2^63, and each step is
// the exact discrete Gaussian's probability of that |e| within 2^-60.
func TestGaussianTable(t *testing.T) {
	const sigma, bound = 3.2, 19
	tab := gaussianTable(sigma, bound)
	if len(tab) != bound {
		t.Fatalf("%d entries, want %d", len(tab), bound)
	}
	rho := func(k int) float64 { return math.Exp(-float64(k*k) / (2 * sigma * sigma)) }
	var sum float64
	for k := -bound; k <= bound; k++ {
		sum += rho(k)
	}
	prev := uint64(0)
	for k, c := range tab {
		if c <= prev || c >= 1<<63 {
			t.Fatalf("entry %d = %d after %d: the table must increase below 2^63", k, c, prev)
		}
		want := rho(k) / sum
		if k > 0 {
			want *= 2
		}
		got := float64(c-prev) / (1 << 63)
		if math.Abs(got-want) > 1e-12 {
			t.Fatalf("P(|e| = %d) = %.15g, want %.15g", k, got, want)
		}
		prev = c
	}
}

// TestAddGaussian: errors lie within ±bErr, are the same integer in every
// residue, follow the table (χ² over |e| ≤ 8 and a tail bin, 9 degrees of
// freedom, p = 10^-6 at 42.6) with a symmetric sign, and are added (mod
// q) to what p held, or written over it.
func TestAddGaussian(t *testing.T) {
	s := defaultScheme
	const polys = 8
	counts := make([]int, 10)
	var neg, pos int
	p := s.rq.NewPoly()
	for i := range polys {
		s.addGaussian(prngFor(bytes.Repeat([]byte{byte(i)}, 32), domErr, 0), p, true)
		for x := range s.n {
			v := residueValue(t, s, p, x)
			a := uint64(max(v, -v))
			if a > s.bErr {
				t.Fatalf("error %d beyond the bound %d", v, s.bErr)
			}
			counts[min(a, 9)]++
			if v < 0 {
				neg++
			} else if v > 0 {
				pos++
			}
		}
	}
	probs := make([]float64, 10)
	prev := uint64(0)
	for k, c := range s.gauss.tab[:s.bErr] {
		probs[min(k, 9)] += float64(c-prev) / (1 << 63)
		prev = c
	}
	probs[9] += float64(1<<63-prev) / (1 << 63)
	if x := chiSquare(counts, probs, polys*s.n); x > 42.6 {
		t.Fatalf("|e| counts %v: χ² = %.1f", counts, x)
	}
	if d := math.Abs(float64(neg-pos)) / math.Sqrt(float64(neg+pos)); d > 5 {
		t.Fatalf("%d negative, %d positive errors", neg, pos)
	}

	// Adding: the same stream onto a polynomial of known values.
	base := s.rq.NewPoly()
	rng := rand.New(rand.NewPCG(4, 4))
	for i, q := range s.p.Q {
		for x := range s.n {
			base.Coeffs[i][x] = rng.Uint64N(q)
		}
	}
	e, sum := s.rq.NewPoly(), *base.CopyNew()
	s.addGaussian(prngFor(make([]byte, 32), domErr, 1), e, true)
	s.addGaussian(prngFor(make([]byte, 32), domErr, 1), sum, false)
	for i, q := range s.p.Q {
		for x := range s.n {
			if want := addMod(base.Coeffs[i][x], e.Coeffs[i][x], q); sum.Coeffs[i][x] != want {
				t.Fatalf("residue %d, coefficient %d: %d after adding, want %d", i, x, sum.Coeffs[i][x], want)
			}
		}
	}
}

// TestMulShoup: x·c mod q for words x up to 2^64 − 1 and constants c up
// to q − 1, for every prime of the scheme, against the 128-bit product's
// remainder (TestArith checks encode and words3, which use it).
func TestMulShoup(t *testing.T) {
	s := defaultScheme
	rng := rand.New(rand.NewPCG(5, 5))
	for _, q := range s.p.Q {
		xs := []uint64{0, 1, q - 1, q, 1<<63 - 1, 1 << 63, math.MaxUint64}
		cs := []uint64{0, 1, 2, q / 2, q - 2, q - 1}
		for range 64 {
			xs = append(xs, rng.Uint64())
			cs = append(cs, rng.Uint64N(q))
		}
		for _, c := range cs {
			k := newShoup(c, q)
			for _, x := range xs {
				hi, lo := bits.Mul64(x, c)
				if got, want := mulShoup(x, k, q), bits.Rem64(hi, lo, q); got != want {
					t.Fatalf("q = %d: %d·%d = %d, want %d", q, x, c, got, want)
				}
			}
		}
	}
}

// BenchmarkSamplers: a polynomial of the scheme's small distributions (N
// coefficients in every residue), here and by lattigo's samplers, which
// these replaced.
func BenchmarkSamplers(b *testing.B) {
	s := defaultScheme
	p := s.rq.NewPoly()
	key := make([]byte, 32)
	var idx uint64
	next := func() uint64 { idx++; return idx }
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"ternary", func() { s.sampleTernary(prngFor(key, domMask, next()), p, nil) }},
		{"ternary/lattigo", func() {
			ts, err := ring.NewTernarySampler(prngFor(key, domMask, next()), s.rq, ring.Ternary{P: 2.0 / 3}, false)
			if err != nil {
				b.Fatal(err)
			}
			ts.Read(p)
		}},
		{"gaussian", func() { s.addGaussian(prngFor(key, domMask, next()), p, true) }},
		{"gaussian/lattigo", func() {
			ring.NewGaussianSampler(prngFor(key, domMask, next()), s.rq,
				ring.DiscreteGaussian{Sigma: s.p.Sigma, Bound: s.p.ErrBound}, false).Read(p)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				c.f()
			}
		})
	}
}

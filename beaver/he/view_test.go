package he

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// noiseView runs one full-block product (all N coefficients hold outputs)
// and returns what P0 can compute from the output ciphertext with its key:
// the noise ν = c0 + c1·s − Δ·(A·B − R) mod Q (centred) of the ciphertext
// before the modulus switch, and the noise of the phase after it,
// x − C·2^(L−64) mod 2^L. The ciphertext after the switch is a function of
// the one before, so independence of the first implies it for the second.
func noiseView(t *testing.T, s *Scheme, A []uint64, seed uint64) (pre, post []float64) {
	t.Helper()
	l := Layout{MW: 16, NW: 512}
	m, k, n := l.MW, 8, l.NW
	rnd := newDetRand(seed)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	B, R := fill(rng, k*n, "random"), fill(rng, m*n, "random")
	ew, err := s.EncryptWeights(sk, B, k, n, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	out, raws, err := s.mulMaskedRaw([]Term{{W: w, A: A}}, l, m, n, R, rnd, false)
	if err != nil {
		t.Fatal(err)
	}
	M := plainMul(A, B, m, k, n)
	for i := range M {
		M[i] -= R[i]
	}
	// Before the switch: ν in R_Q.
	c0, c1 := raws[0].c0, raws[0].c1
	ph := s.rq.NewPoly()
	s.rq.NTT(c1, ph)
	s.rq.MulCoeffsBarrett(ph, sk.sQ, ph)
	s.rq.INTT(ph, ph)
	s.rq.Add(ph, c0, ph)
	for p, q := range s.p.Q {
		for x := range s.n {
			ph.Coeffs[p][x] = subMod(ph.Coeffs[p][x], s.encode(M[x/l.NW*n+x%l.NW], p), q)
		}
	}
	nu := make([]*big.Int, s.n)
	for i := range nu {
		nu[i] = new(big.Int)
	}
	s.rq.PolyToBigintCentered(ph, 1, nu)
	scale := 1.0
	if s.floodLog > 0 {
		scale = math.Ldexp(1, -s.floodLog)
	}
	for _, v := range nu {
		f, _ := new(big.Float).SetInt(v).Float64()
		pre = append(pre, f*scale)
	}
	// After the switch: P0's phases.
	x, err := s.phases(sk, out, m, n, l)
	if err != nil {
		t.Fatal(err)
	}
	L := max(s.p.LogQ0, s.p.LogQ1)
	for i, v := range x {
		d := v.sub(u128{M[i], 0}.shl(L - 64)).mask(L)
		if d.hi>>(L-65)&1 == 1 { // negative
			d = d.sub(u128{0, 1 << (L - 64)}).mask(128)
		}
		post = append(post, float64(int64(d.lo)))
	}
	return pre, post
}

// ks2 returns the two-sample Kolmogorov–Smirnov statistic.
func ks2(a, b []float64) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	var i, j int
	var d float64
	for i < len(a) && j < len(b) {
		if a[i] <= b[j] {
			i++
		} else {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// ksCrit is the two-sample KS critical value at level α for sizes n, m.
func ksCrit(alpha float64, n, m int) float64 {
	return math.Sqrt(-math.Log(alpha/2)/2) * math.Sqrt(float64(n+m)/float64(n*m))
}

// TestViews: what P0 receives, decrypted with its own key (the noise P0 can
// compute exactly, knowing s and every error it sampled), is distributed
// independently of A: for A = 0 and A = −2^63 everywhere (the same
// uniform A·B − R in both), the noise samples pass a two-sample KS test
// (and fit the uniform flood). The control, flooding disabled, must fail
// the same test: there the noise is the A-dependent Σ a·e. The test is
// deterministic (fixed seeds); α = 10^-4.
func TestViews(t *testing.T) {
	zero := make([]uint64, 16*8)
	ext := fill(nil, 16*8, "min")
	crit := ksCrit(1e-4, 8192, 8192)

	preZ, postZ := noiseView(t, defaultScheme, zero, 1)
	preE, postE := noiseView(t, defaultScheme, ext, 2)
	if d := ks2(preZ, preE); d > crit {
		t.Errorf("flooded: noise before the switch depends on A: KS D = %.4f > %.4f", d, crit)
	} else {
		t.Logf("flooded, before the switch: KS D = %.4f ≤ %.4f", d, crit)
	}
	if d := ks2(postZ, postE); d > crit {
		t.Errorf("flooded: P0's phase noise depends on A: KS D = %.4f > %.4f", d, crit)
	} else {
		t.Logf("flooded, P0's phases: KS D = %.4f ≤ %.4f", d, crit)
	}
	// The flooded noise is uniform on [−1, 1) (in units of the flood).
	unif := make([]float64, 8192)
	ur := rand.New(rand.NewPCG(4, 4))
	for i := range unif {
		unif[i] = 2*ur.Float64() - 1
	}
	if d := ks2(preE, unif); d > crit {
		t.Errorf("flooded noise not uniform: KS D = %.4f", d)
	}

	// Control: no flood (which NewScheme refuses); the same test detects A.
	p := DefaultParams()
	p.FloodBits = 0
	sNo, err := newScheme(p)
	if err != nil {
		t.Fatal(err)
	}
	preZ, _ = noiseView(t, sNo, zero, 1)
	preE, _ = noiseView(t, sNo, ext, 2)
	if d := ks2(preZ, preE); d <= crit {
		t.Errorf("control: without flooding the test does not see A: KS D = %.4f ≤ %.4f", d, crit)
	} else {
		t.Logf("control (no flood): KS D = %.4f > %.4f", d, crit)
	}
}

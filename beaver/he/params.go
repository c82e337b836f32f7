package he

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// Params are the public parameters of the scheme. Both parties must use the
// same Params (compare them in the session handshake).
type Params struct {
	// LogN is log2 of the ring degree N (R_Q = Z_Q[X]/(X^N+1)).
	LogN int
	// Q are the NTT-friendly primes (each ≡ 1 mod 2N, below 2^61) whose
	// product is the ciphertext modulus Q.
	Q []uint64
	// Sigma is the parameter of the discrete Gaussian error, P(e = k) ∝
	// exp(−k²/2σ²), and ErrBound its truncation bound: sampled errors
	// satisfy |e| ≤ round(ErrBound) < 32 (noise.go).
	Sigma, ErrBound float64
	// MaxInner is the largest inner dimension k a product may have; the
	// noise budget is computed for it.
	MaxInner int
	// MaxRows is the number of rows of A packed in one plaintext (the
	// layout's MW) that the noise budget is computed for, with MaxInner:
	// the noise grows with k·MW, so a product with inner dimension k may
	// pack up to max(MaxRows, MaxRows·MaxInner/k) rows (RowBudget) within
	// the same budget.
	MaxRows int
	// FloodBits is λ, the statistical margin of the noise flooding: the
	// flood is uniform in [−2^f, 2^f) with f = ceil(log2 E|ν|) + λ, E|ν|
	// the bound on the mean size of the noise before flooding (over P1's
	// factor and P0's errors), so that each output coefficient P0 decrypts
	// is within statistical distance 2^−(λ+1) of one whose noise does not
	// depend on P1's inputs (Scheme.DistanceLog; package documentation,
	// "Security"). NewScheme refuses a λ (zero included) that leaves the
	// distance over 2^LogSelectionOutputs coefficients above
	// 2^−StatisticalSecurity, and one whose flood, added to the worst-case
	// noise, makes decryption inexact: for DefaultParams, λ = 79 is the
	// largest and 78 the smallest it allows.
	FloodBits int
	// LogQ0 and LogQ1 are the bit sizes of the moduli 2^LogQ0 and 2^LogQ1 to
	// which the output ciphertexts' c0 and c1 are switched before sending.
	LogQ0, LogQ1 int
}

// DefaultParams returns the parameters of the package documentation:
// N = 8192, Q the product of two 55-bit and two 54-bit primes
// (log2 Q ≈ 218, the HE-standard bound for 128-bit classical security at
// N = 8192 with a ternary secret and σ = 3.2), MaxInner = 4096,
// MaxRows = 64, λ = 79 (a flood of 2^152: statistical distance
// 2^−80.10 per output coefficient, 2^−41.10 over 2^39), and output moduli
// 2^68 (c0) and 2^81 (c1).
func DefaultParams() Params {
	return Params{
		LogN: 13,
		Q: []uint64{
			0x7ffffffffb4001, 0x7fffffffeac001,
			0x3fffffffef8001, 0x3fffffffeb8001,
		},
		Sigma:     3.2,
		ErrBound:  19.2, // 6σ, lattigo's rlwe.DefaultNoiseBound
		MaxInner:  4096,
		MaxRows:   64,
		FloodBits: 79,
		LogQ0:     68,
		LogQ1:     81,
	}
}

// StatisticalSecurity is s, the statistical security NewScheme requires:
// P0's view of 2^LogSelectionOutputs output coefficients is within
// statistical distance 2^−s of one that does not depend on P1's inputs.
const StatisticalSecurity = 40

// LogSelectionOutputs is log2 of the number of output coefficients
// (product outputs and check columns) the statistical bound is stated for:
// 2^39 ≈ 5.5·10^11, twice the largest workload's selection (the exact
// DistilBERT over SST-2's 39,900 candidates decrypts 2.72·10^11 ≈ 2^37.99;
// qqp-bert 5.77·10^10 ≈ 2^35.75; package documentation, "Security").
const LogSelectionOutputs = 39

// maxLogQ128 is the Homomorphic Encryption Standard's table of the largest
// log2 q for 128-bit classical security with a secret uniform in
// {−1, 0, 1} and error σ ≈ 3.2 (M. Albrecht et al., "Homomorphic Encryption
// Security Standard", HomomorphicEncryption.org, November 2018, Table 1;
// SEAL's CoeffModulus::MaxBitCount(n, sec_level_type::tc128)), by log2 n.
var maxLogQ128 = map[int]int{10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881}

// minSigma is the error width the standard's table assumes: a discrete
// Gaussian of parameter s = 8, σ = 8/√(2π) ≈ 3.19.
var minSigma = 8 / math.Sqrt(2*math.Pi)

// minErrBoundSigmas is the least truncation of the error, in σ: 6σ, as
// SEAL's and lattigo's samplers truncate (and ours, noise.go).
const minErrBoundSigmas = 6

// decPrimes are the two 60-bit NTT-friendly primes (for N ≤ 2^13) of the
// auxiliary ring in which P0 computes c1·s exactly (|c1·s| < N·2^LogQ1 <
// p0·p1/2).
var decPrimes = []uint64{0xfffffffffffc001, 0xffffffffffe8001}

// maxLogQ1 keeps N·2^LogQ1 below half the product of decPrimes (≈ 2^120).
const maxLogQ1 = 104

// Scheme holds Params with everything precomputed from them (rings, NTT
// tables, encoding and modulus-switching constants). It is safe for
// concurrent use.
type Scheme struct {
	p        Params
	n        int        // ring degree
	rq       *ring.Ring // R_Q
	rd       *ring.Ring // auxiliary ring for exact c1·s at P0
	bErr     uint64     // integer bound on sampled errors
	gauss    *gaussian  // the errors' distribution
	floodLog int        // flood is uniform in [−2^floodLog, 2^floodLog); 0 = none
	noiseLog float64    // log2 of the pre-flood worst-case noise bound Bν
	meanLog  float64    // log2 of the bound on the mean of |ν| (meanNoise)

	// Encoding round(Q·v/2^64) = dFloor·v + round(qModT·v/2^64).
	dFloor []uint64 // floor(Q/2^64) mod q_i
	qModT  uint64   // Q mod 2^64

	pow64, pow128, powFlood []uint64 // 2^64, 2^128, 2^floodLog mod q_i
	bred                    [][2]uint64
	shoups                  []residueShoups // 1, dFloor, pow64, pow128 in Shoup form

	ms0, ms1 msConst // modulus switching to 2^LogQ0 and 2^LogQ1

	// Garner constants for rd.
	d0Inv uint64 // p0^{-1} mod p1

	// accumulating admits one weight product (mulMaskedRaw) at a time:
	// each already runs on every core (parallel), so more at once only
	// multiply their accumulators (issue 38: a data owner's 16 lanes held
	// 0.79 GB of them in sst2's phase 2 and 1.51 GB in phase 3 at the
	// defaults; two at a time, 0.19 GB). Its next holder takes every
	// waiting product on the same weights into its pass (merge.go).
	// peakAccumulating is the most passes admitted at once, and
	// onAccumulate, when set, runs in each admitted pass (tests).
	accumulating chan struct{}
	// sums is the admitted pass's accumulator memory (passSums), used
	// only by the admission's holder.
	sums             []uint64
	peakAccumulating atomic.Int64
	nAccumulating    atomic.Int64
	onAccumulate     func()
	// mergeMu guards waiting, the products waiting for the admission, of
	// which its next holder takes those on the same weights (merge.go).
	mergeMu sync.Mutex
	waiting []*mulJob
	mergeCounters
	// scratch holds polynomials of R_Q for reuse (scratchPoly).
	scratch sync.Pool
}

// msConst are the constants of the switch Z_Q → Z_{2^l}:
// round(2^l·c/Q) = round(Σ_i y_i·2^l/q_i) mod 2^l with y_i = c_i·(Q/q_i)^{-1} mod q_i.
type msConst struct {
	l       int
	qHatInv []shoup     // (Q/q_i)^{-1} mod q_i
	intPart [][2]uint64 // floor(2^l/q_i) mod 2^128, {lo, hi}
	frac    []uint64    // floor(frac(2^l/q_i)·2^64)
}

// Fingerprint is a SHA-256 digest of every field of p and the scheme's
// version, for the session handshake: both parties must run the same
// Params and expand seeds and sample the same way (v2: the public seeds by
// AES-128, publicSeedKey; a v1 peer's seeded halves would differ).
func (p Params) Fingerprint() [32]byte {
	b := []byte("selectformer/beaver/he params v2")
	for _, v := range []int{p.LogN, len(p.Q), p.MaxInner, p.MaxRows, p.FloodBits, p.LogQ0, p.LogQ1} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, q := range p.Q {
		b = binary.LittleEndian.AppendUint64(b, q)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Sigma))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.ErrBound))
	return sha256.Sum256(b)
}

// Validate reports whether p is usable (NewScheme): sizes in range,
// 128-bit security by the HE standard's table, the statistical bound of the
// flood, and decryption exact in the worst case (see the package
// documentation).
func (p Params) Validate() error {
	_, err := NewScheme(p)
	return err
}

// NewScheme checks p and precomputes its constants. It refuses parameters
// below 128-bit security: log2 Q above the HE standard's bound for N
// (maxLogQ128: 218 bits at N = 8192), σ below 8/√(2π) ≈ 3.19 or errors
// truncated below 6σ, and a flood that leaves the statistical distance over
// 2^LogSelectionOutputs output coefficients above 2^−StatisticalSecurity
// (FloodBits 0 included). It also fails when the worst-case noise of a
// product with inner dimension MaxInner and MaxRows rows per block, plus the
// flood and the modulus-switching errors, could make decryption inexact.
func NewScheme(p Params) (*Scheme, error) {
	s, err := newScheme(p)
	if err != nil {
		return nil, err
	}
	if err := s.checkSecurity(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkSecurity refuses s's parameters when they are below 128-bit
// computational or the stated statistical security (NewScheme).
func (s *Scheme) checkSecurity() error {
	p := s.p
	if b := s.rq.Modulus().BitLen(); b > maxLogQ128[p.LogN] {
		return fmt.Errorf("he: log2 Q = %d above %d, the HE standard's bound for 128-bit security at N = %d with a ternary secret", b, maxLogQ128[p.LogN], s.n)
	}
	if p.Sigma < minSigma || p.ErrBound < minErrBoundSigmas*p.Sigma*(1-1e-9) {
		return fmt.Errorf("he: error σ = %v truncated at %v: the HE standard's table assumes σ ≥ 8/√(2π) ≈ %.4f, truncated at %dσ or more", p.Sigma, p.ErrBound, minSigma, minErrBoundSigmas)
	}
	if p.FloodBits == 0 {
		return fmt.Errorf("he: no flood (FloodBits 0): P0's decryptions would show noise that depends on P1's inputs")
	}
	if d := s.DistanceLog(1 << LogSelectionOutputs); d > -StatisticalSecurity {
		return fmt.Errorf("he: flood 2^%d (FloodBits %d) leaves a statistical distance of 2^%.2f over 2^%d output coefficients, above 2^−%d",
			s.floodLog, p.FloodBits, d, LogSelectionOutputs, StatisticalSecurity)
	}
	return nil
}

// newScheme is NewScheme without checkSecurity: the ring, exactness and
// size checks only (tests build an unflooded scheme with it).
func newScheme(p Params) (*Scheme, error) {
	if _, ok := maxLogQ128[p.LogN]; !ok || p.LogN > 13 {
		return nil, fmt.Errorf("he: LogN %d outside [10, 13] (the HE standard's table starts at N = 1024; the decryption ring stops at 8192)", p.LogN)
	}
	if len(p.Q) < 1 || len(p.Q) > maxPrimes {
		return nil, fmt.Errorf("he: %d moduli, want 1..%d", len(p.Q), maxPrimes)
	}
	if p.MaxInner < 1 || p.MaxInner > 1<<20 {
		return nil, fmt.Errorf("he: MaxInner %d outside [1, 2^20]", p.MaxInner)
	}
	n := 1 << p.LogN
	if p.MaxRows < 1 || p.MaxRows > n {
		return nil, fmt.Errorf("he: MaxRows %d outside [1, N]", p.MaxRows)
	}
	if p.LogQ0 < 65 || p.LogQ0 > 128 || p.LogQ1 < 65 || p.LogQ1 > maxLogQ1 {
		return nil, fmt.Errorf("he: LogQ0 %d, LogQ1 %d: want 65..128 and 65..%d", p.LogQ0, p.LogQ1, maxLogQ1)
	}
	if p.FloodBits < 0 || p.FloodBits > 128 {
		return nil, fmt.Errorf("he: FloodBits %d outside [0, 128]", p.FloodBits)
	}
	if !(p.Sigma > 0) || !(p.ErrBound >= p.Sigma) || p.ErrBound >= gaussianTableSize-0.5 {
		return nil, fmt.Errorf("he: Sigma %v, ErrBound %v: want 0 < Sigma ≤ ErrBound < %v", p.Sigma, p.ErrBound, gaussianTableSize-0.5)
	}
	for i, q := range p.Q {
		if q >= 1<<61 || q%(2*uint64(n)) != 1 || !ring.IsPrime(q) {
			return nil, fmt.Errorf("he: modulus %d (%#x) is not an NTT-friendly prime below 2^61", i, q)
		}
		for _, r := range p.Q[:i] {
			if r == q {
				return nil, fmt.Errorf("he: modulus %#x repeated", q)
			}
		}
	}
	for _, q := range p.Q {
		// MulMasked accumulates up to MaxInner products < q² in 128 bits.
		if float64(bits.Len64(q-1))*2+math.Log2(float64(p.MaxInner)) >= 128 {
			return nil, fmt.Errorf("he: MaxInner %d products of %d-bit residues overflow 128 bits", p.MaxInner, bits.Len64(q-1))
		}
	}
	rq, err := ring.NewRing(n, p.Q)
	if err != nil {
		return nil, fmt.Errorf("he: ring Q: %w", err)
	}
	rd, err := ring.NewRing(n, decPrimes)
	if err != nil {
		return nil, fmt.Errorf("he: decryption ring: %w", err)
	}
	s := &Scheme{p: p, n: n, rq: rq, rd: rd, bErr: uint64(math.Floor(p.ErrBound + 0.5)),
		accumulating: make(chan struct{}, 1)}
	s.gauss = newGaussian(p.Sigma, s.bErr)
	s.bred = rq.BRedConstants()
	Q := rq.Modulus()
	t := new(big.Int).Lsh(big.NewInt(1), 64)

	// Worst-case noise before flooding, per output coefficient:
	//   k·MW·(B_e + 1/2)·2^63   (weights' error and rounding times A)
	// + (2N+1)·B_e              (re-randomisation u·e_pk + e1·s + e0)
	// + 1/2                     (rounding of Δ·R)
	bound := new(big.Float).SetPrec(256).SetInt64(int64(p.MaxInner) * int64(p.MaxRows))
	bound.Mul(bound, big.NewFloat(float64(s.bErr)+0.5))
	bound.Mul(bound, new(big.Float).SetMantExp(big.NewFloat(1), 63))
	bound.Add(bound, big.NewFloat(float64(2*n+1)*float64(s.bErr)+0.5))
	s.noiseLog = log2Float(bound)
	s.meanLog = math.Log2(s.meanNoise(float64(p.MaxInner) * float64(p.MaxRows)))
	total := new(big.Float).SetPrec(256).Set(bound)
	if p.FloodBits > 0 {
		s.floodLog = int(math.Ceil(s.meanLog)) + p.FloodBits
		if s.floodLog+1 > 191 {
			return nil, fmt.Errorf("he: flood 2^%d too large", s.floodLog)
		}
		total.Add(total, new(big.Float).SetMantExp(big.NewFloat(1), s.floodLog))
	}
	// Exactness: 2^64·(ν/Q + (1/2+δ)/2^LogQ0 + N·(1/2+δ)/2^LogQ1) < 1/2,
	// δ = 2^-8 the fixed-point error of the switch.
	qf := new(big.Float).SetPrec(256).SetInt(Q)
	lhs := new(big.Float).SetPrec(256).Quo(total, qf)
	half := 0.5 + 1.0/256
	lhs.Add(lhs, new(big.Float).SetMantExp(big.NewFloat(half), -p.LogQ0))
	lhs.Add(lhs, new(big.Float).SetMantExp(big.NewFloat(half*float64(n)), -p.LogQ1))
	lhs.Mul(lhs, new(big.Float).SetMantExp(big.NewFloat(1), 64))
	if lhs.Cmp(big.NewFloat(0.5)) >= 0 {
		v, _ := lhs.Float64()
		return nil, fmt.Errorf("he: decryption not exact in the worst case: error %.3g ≥ 1/2 (log2 Q = %d, noise 2^%.1f, flood 2^%d)",
			v, Q.BitLen(), s.noiseLog, s.floodLog)
	}

	qModT := new(big.Int).Mod(Q, t)
	s.qModT = qModT.Uint64()
	dFloor := new(big.Int).Rsh(Q, 64)
	L := len(p.Q)
	s.dFloor = make([]uint64, L)
	s.pow64 = make([]uint64, L)
	s.pow128 = make([]uint64, L)
	s.powFlood = make([]uint64, L)
	for i, q := range p.Q {
		qb := new(big.Int).SetUint64(q)
		s.dFloor[i] = new(big.Int).Mod(dFloor, qb).Uint64()
		s.pow64[i] = new(big.Int).Mod(t, qb).Uint64()
		s.pow128[i] = new(big.Int).Mod(new(big.Int).Lsh(big.NewInt(1), 128), qb).Uint64()
		s.powFlood[i] = new(big.Int).Mod(new(big.Int).Lsh(big.NewInt(1), uint(s.floodLog)), qb).Uint64()
		s.shoups = append(s.shoups, residueShoups{one: newShoup(1, q), dFloor: newShoup(s.dFloor[i], q),
			pow64: newShoup(s.pow64[i], q), pow128: newShoup(s.pow128[i], q)})
	}
	s.ms0 = newMSConst(p.Q, Q, p.LogQ0)
	s.ms1 = newMSConst(p.Q, Q, p.LogQ1)
	p0, p1 := new(big.Int).SetUint64(decPrimes[0]), new(big.Int).SetUint64(decPrimes[1])
	s.d0Inv = new(big.Int).ModInverse(p0, p1).Uint64()
	return s, nil
}

// meanNoise is the bound on E|ν|, the mean size of the noise ν of an output
// coefficient before flooding that sums K terms z·c (K ≤ MaxInner·MaxRows:
// RowBudget), over P1's factor and P0's encryption errors (package
// documentation, "Security"):
//
//	E|ν| ≤ √(K·E[c²]·E[z²] + K²·2^61) + (2N+1)·B_e + 1/2,
//
// z P1's factor entries (uniform words lifted to [−2^63, 2^63):
// E[z²] = 2^126/3 + 1/6, pairwise |E[z·z']| ≤ 2^63), c = e + ε P0's
// encryption error plus the rounding of its encoding (E[c²] ≤ E[e²] + 1/4,
// |E[c·c']| ≤ 1/4), and the re-randomisation and R's rounding at their
// worst case.
func (s *Scheme) meanNoise(K float64) float64 {
	z2 := 0x1p126/3 + 1.0/6
	c2 := errSecondMoment(s.p.Sigma, s.p.ErrBound) + 0.25
	return math.Sqrt(K*c2*z2+K*K*0x1p61) + float64(2*s.n+1)*float64(s.bErr) + 0.5
}

// errSecondMoment returns E[e²] for an error e of the scheme's sampler
// (addGaussian): the discrete Gaussian D_{Z,σ}, P(e = k) ∝ exp(−k²/2σ²),
// truncated to |k| ≤ round(bound). It is rounded up by 2^−20 (relative)
// for the float64 arithmetic and the table's 2^−63 steps.
func errSecondMoment(sigma, bound float64) float64 {
	var m, sum float64
	for k := 0.0; k <= math.Floor(bound+0.5); k++ {
		w := math.Exp(-k * k / (2 * sigma * sigma))
		if k > 0 {
			w *= 2
		}
		m += k * k * w
		sum += w
	}
	return m / sum * (1 + 0x1p-20)
}

// DistanceLog returns log2 of the bound on the statistical distance between
// P0's view of outputs output coefficients (product outputs and check
// columns, under one key or several) and one that does not depend on P1's
// inputs: by the union bound, outputs times the bound per coefficient,
// E|ν|/2^(f+1) ≤ 2^−(λ+1) (the distance of ν + U from U, U uniform on the
// 2^(f+1) integers of the flood, is |ν|/2^(f+1); package documentation,
// "Security"). It is at most 0 (a distance of 1: no flood). DistanceLog(1)
// is the bound per coefficient.
func (s *Scheme) DistanceLog(outputs int64) float64 {
	if s.floodLog == 0 {
		return 0
	}
	return min(0, s.meanLog-float64(s.floodLog+1)+math.Log2(float64(max(outputs, 1))))
}

func newMSConst(qs []uint64, Q *big.Int, l int) msConst {
	c := msConst{l: l}
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	mask128 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
	for _, q := range qs {
		qb := new(big.Int).SetUint64(q)
		qHat := new(big.Int).Quo(Q, qb)
		c.qHatInv = append(c.qHatInv, newShoup(new(big.Int).ModInverse(new(big.Int).Mod(qHat, qb), qb).Uint64(), q))
		num := new(big.Int).Lsh(big.NewInt(1), uint(l))
		ip, rem := new(big.Int).QuoRem(num, qb, new(big.Int))
		ip.And(ip, mask128)
		lo := new(big.Int).And(ip, new(big.Int).Sub(two64, big.NewInt(1))).Uint64()
		hi := new(big.Int).Rsh(ip, 64).Uint64()
		c.intPart = append(c.intPart, [2]uint64{lo, hi})
		f := new(big.Int).Lsh(rem, 64)
		f.Quo(f, qb)
		c.frac = append(c.frac, f.Uint64())
	}
	return c
}

func log2Float(x *big.Float) float64 {
	m := new(big.Float)
	e := x.MantExp(m)
	f, _ := m.Float64()
	return float64(e) + math.Log2(f)
}

// Params returns the parameters s was built from.
func (s *Scheme) Params() Params { return s.p }

// N returns the ring degree.
func (s *Scheme) N() int { return s.n }

// LogQ returns log2 of the ciphertext modulus Q.
func (s *Scheme) LogQ() float64 { return s.rq.LogModuli() }

// NoiseLog returns log2 of the worst-case noise bound Bν before flooding.
func (s *Scheme) NoiseLog() float64 { return s.noiseLog }

// FloodLog returns f, the flood being uniform in [−2^f, 2^f) (0: no flood).
func (s *Scheme) FloodLog() int { return s.floodLog }

// Layout is the block shape of the outer-product packing: a plaintext of A
// holds MW entries of one column of A at X^(i·NW), i < MW, and a weight
// ciphertext NW entries of one row of B at X^j, j < NW. MW·NW ≤ N, so one
// product yields MW·NW outputs at X^(i·NW+j) with no wrap-around.
//
// With KW > 1 a weight ciphertext also packs KW rows of B, row r+t at
// X^(t·NW+j), and A's plaintext holds A[i][r+t] at X^(i·KW·NW − t·NW): the
// product sums the KW inner terms at X^(i·KW·NW+j) (MW·KW·NW ≤ N; KW a power
// of two, so the other terms, which land at offsets that are not multiples
// of KW·NW, never meet an output). A product with few rows then needs
// KW times fewer weight ciphertexts: 96 instead of 768 for 1×768·768×768.
type Layout struct {
	MW int // rows of A per plaintext
	NW int // columns of B per weight ciphertext (a power of two)
	KW int // rows of B per weight ciphertext (a power of two; 0 means 1)
}

// kw returns KW, 0 meaning 1.
func (l Layout) kw() int { return max(l.KW, 1) }

// stride is the distance of two rows of A's outputs in a block, KW·NW.
func (l Layout) stride() int { return l.kw() * l.NW }

// innerBlocks is the number of weight ciphertexts per column block of a
// matrix with k rows, ceil(k/KW).
func (l Layout) innerBlocks(k int) int { return ceilDiv(k, l.kw()) }

// RowBudget returns the most rows of A one plaintext may pack (the layout's
// MW, before the ring's MW·NW ≤ N) for a product with inner dimension k:
// the worst-case noise of an output coefficient grows with k·MW, and the
// budget (flood and exactness) is computed for MaxInner·MaxRows, so
// MW ≤ max(MaxRows, MaxRows·MaxInner/k). A narrow inner dimension thus packs
// more rows: k = 128 allows 2,048 (MaxInner 4096, MaxRows 64), so a tall
// product such as 6,152×128·128×5 needs 7 output ciphertexts instead of 97.
// k < 1 is treated as 1.
func (s *Scheme) RowBudget(k int) int {
	k = max(k, 1)
	return min(max(s.p.MaxRows, s.p.MaxRows*s.p.MaxInner/k), s.n)
}

// checkLayout reports whether l is a valid layout for s and a product with
// inner dimension k (MW ≤ RowBudget(k); k = 1 checks the shape only, for a
// party that does not compute the product). KW does not change the noise:
// an output coefficient still sums k·MW terms a·e, KW of them from each
// ciphertext product.
func (s *Scheme) checkLayout(l Layout, k int) error {
	kw := l.kw()
	rows := s.RowBudget(k)
	if l.NW < 1 || l.MW < 1 || l.KW < 0 || l.MW > rows || l.NW > s.n || kw > s.n || l.MW*kw*l.NW > s.n || l.NW&(l.NW-1) != 0 || kw&(kw-1) != 0 {
		return fmt.Errorf("he: layout %d×%d×%d invalid for inner dimension %d (MW ≤ %d, MW·KW·NW ≤ %d, NW and KW powers of two)", l.MW, l.NW, kw, k, rows, s.n)
	}
	return nil
}

// ChooseLayout returns the layout for an m×k·k×n product. NW and KW are
// powers of two (so the NTT of A's sparse plaintexts is a size-N/NW
// evaluation) and MW = min(RowBudget(k), N/(KW·NW), m). The rule: fewest
// output ciphertexts ceil(m/MW)·ceil(n/NW) (the per-candidate bytes are
// m·n·LogQ0 + that count·N·LogQ1 bits); among those, fewest weight
// ciphertexts ceil(k/KW)·ceil(n/NW) (P0's one-time upload, P1's memory and
// its work per candidate); then the largest MW.
func (s *Scheme) ChooseLayout(m, k, n int) (Layout, error) {
	return s.ChooseLayoutWithin(m, k, n, math.MaxInt64)
}

// ChooseLayoutWithin is ChooseLayout among the layouts whose prepared
// weights (Sizes.P1Weights, k rows) fit in maxP1 bytes: it trades
// per-candidate bytes for P1's memory and P0's upload (for 128×768·768×768,
// 1.21 GB and 12 output ciphertexts unbounded; 0.40 GB and 16 within
// 0.5 GB). It fails when no layout fits.
func (s *Scheme) ChooseLayoutWithin(m, k, n int, maxP1 int64) (Layout, error) {
	if m < 1 || n < 1 || k < 1 {
		return Layout{}, fmt.Errorf("he: layout for %d×%d·%d×%d", m, k, k, n)
	}
	best, bestOut, bestW := Layout{}, math.MaxInt, math.MaxInt
	for nw := 1; nw <= s.n; nw *= 2 {
		cb := ceilDiv(n, nw)
		for kw := 1; kw*nw <= s.n; kw *= 2 {
			l := Layout{NW: nw}
			if kw > 1 {
				l.KW = kw
			}
			l.MW = min(s.RowBudget(k), s.n/(kw*nw), m)
			if s.Sizes(m, k, n, l).P1Weights > maxP1 {
				continue
			}
			out, w := ceilDiv(m, l.MW)*cb, l.innerBlocks(k)*cb
			if out < bestOut || (out == bestOut && (w < bestW || (w == bestW && l.MW > best.MW))) {
				best, bestOut, bestW = l, out, w
			}
		}
	}
	if bestOut == math.MaxInt {
		return Layout{}, fmt.Errorf("he: no layout for %d×%d·%d×%d keeps P1's weights within %d bytes", m, k, k, n, maxP1)
	}
	return best, nil
}

// Sizes are the exact byte sizes of the scheme's messages for one product,
// and the counts behind them.
type Sizes struct {
	// PublicKey is P0's public key (once per session).
	PublicKey int64
	// Weights is P0's encrypted weights (once per weight matrix).
	Weights int64
	// Output is P1's output message (once per candidate product).
	Output int64
	// Dealer is the dealer's correction for the same product, 8·m·n bytes.
	Dealer int64
	// WeightCiphertexts and OutputCiphertexts count the ciphertexts.
	WeightCiphertexts, OutputCiphertexts int
	// P1Weights is the memory of P1's prepared weights (NTT form, both
	// components, 8 bytes per residue); P1WeightsCompact that of
	// LoadWeightsCompact (c0 only).
	P1Weights, P1WeightsCompact int64
}

// Sizes returns the message sizes of an m×k·k×n product with layout l
// (the zero Layout means ChooseLayout(m, k, n)).
func (s *Scheme) Sizes(m, k, n int, l Layout) Sizes {
	if l == (Layout{}) {
		l, _ = s.ChooseLayout(max(m, 1), max(k, 1), max(n, 1))
	}
	cb := ceilDiv(n, l.NW)
	rb := ceilDiv(m, l.MW)
	w := s.WeightSizes(k, n, 0, l)
	return Sizes{
		PublicKey:         pkHeader + int64(ceilDiv(s.n*s.residueBits(), 8)),
		Weights:           w.Bytes,
		Output:            outHeader + ceilDiv64(int64(m)*int64(n)*int64(s.p.LogQ0)+int64(rb*cb)*int64(s.n)*int64(s.p.LogQ1), 8),
		Dealer:            8 * int64(m) * int64(n),
		WeightCiphertexts: w.Ciphertexts,
		OutputCiphertexts: rb * cb,
		P1Weights:         w.P1,
		P1WeightsCompact:  w.P1Compact,
	}
}

// WeightSizes are the sizes of one encrypted weight matrix.
type WeightSizes struct {
	// Bytes is the EncryptedWeights message.
	Bytes int64
	// Ciphertexts counts its ciphertexts.
	Ciphertexts int
	// P1 and P1Compact are the memory of P1's prepared weights (LoadWeights,
	// both components in the NTT domain, 8 bytes per residue; and
	// LoadWeightsCompact, c0 only).
	P1, P1Compact int64
}

// WeightSizes returns the sizes of a k×n weight matrix placed at the
// columns [off, off+n) of a product and packed with l.NW (EncryptWeightsAt).
func (s *Scheme) WeightSizes(k, n, off int, l Layout) WeightSizes {
	_, cb := ColumnBlocks(off, n, max(l.NW, 1))
	cts := l.innerBlocks(k) * cb
	per := int64(len(s.p.Q)) * int64(s.n) * 8
	return WeightSizes{
		Bytes:       weightsHeader + int64(cts)*int64(ceilDiv(s.n*s.residueBits(), 8)),
		Ciphertexts: cts,
		P1:          int64(cts) * 2 * per,
		P1Compact:   int64(cts) * per,
	}
}

// residueBits is the packed size of one coefficient of R_Q.
func (s *Scheme) residueBits() int {
	b := 0
	for _, q := range s.p.Q {
		b += bits.Len64(q - 1)
	}
	return b
}

func ceilDiv(a, b int) int       { return (a + b - 1) / b }
func ceilDiv64(a, b int64) int64 { return (a + b - 1) / b }

var errShape = errors.New("he: shape mismatch")

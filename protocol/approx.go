package protocol

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/selectformer/selectformer/share"
)

// CrypTen-style approximations of exp, reciprocal, inverse square root, log,
// softmax and entropy, for the exact (non-proxy) baselines. They follow
// CrypTen's algorithms and default parameters (crypten/common/functions/
// approximations.py); where this package's primitives allow it, a step is
// done with more fixed-point precision or fewer rounds than CrypTen's, never
// with a different algorithm. Every fixed-point product is truncated with the
// exact protocol (Trunc), so no result suffers a wrap-around error inside the
// documented input range.
//
// The documented ranges, errors and costs assume the default encoding (16
// fractional bits, share.DefaultFixedPoint); the tests measure them (see
// approx_test.go). Costs are per party for n elements, msg(w) = 8w + 10
// bytes for a message of w ring words (one frame up to 1 MiB); a truncation
// of n elements sends msg(W), W = ⌈n/64⌉ (TruncBy).

// CrypTen's default parameters of the approximations below.
//
// Measured with the default encoding (16 fractional bits) by
// TestApproxElementwise and TestSoftmaxEntropy; costs per party, bytes per
// element excluding frame headers (exactly asserted by the tests):
//
//	function            input range          max abs error        rounds   bytes/element
//	Exp                 [−16, 0]             1.8e-3               16       128
//	Exp                 [−256, −16]          1.2e-7               16       128
//	Exp                 [0, 4]               3.1% relative        16       128
//	ReciprocalPositive  [0.05, 500]          1.5e-5 (1 ulp)       46       448
//	Reciprocal          ±[0.05, 500]         1.5e-5 (1 ulp)       54       498
//	InvSqrt             [0.1, 100]           1.5e-2 (0.49% rel)   32       304
//	Log                 [0.01, 250]          6.1e-2               67       776
//	Log                 [0.5, 20]            1.9e-2               67       776
//	Softmax (m = 16)    logits in [−8, 8]    2.9e-3 per p         92
//	Entropy (m = 16)    logits in [−8, 8]    1.3e-2               161
//
// Softmax and Entropy take 7·⌈log2 m⌉ + 64 and 7·⌈log2 m⌉ + 133 rounds for
// rows of m logits (113 and 182 for m = 128). Log's error is that of its
// inner exp (limit approximation, relative error ≈ y²/512 at exp(−y)), as in
// CrypTen.
const (
	// ExpIterations is the number of squarings of the limit approximation
	// exp(x) ≈ (1 + x/2^k)^(2^k) (CrypTen's exp_iterations).
	ExpIterations = 8
	// ReciprocalIterations is the number of Newton–Raphson iterations of
	// Reciprocal (CrypTen's reciprocal_nr_iters).
	ReciprocalIterations = 10
	// InvSqrtIterations is the number of Newton–Raphson iterations of
	// InvSqrt (CrypTen's sqrt_nr_iters).
	InvSqrtIterations = 3
	// LogIterations is the number of Householder iterations of Log
	// (CrypTen's log_iterations).
	LogIterations = 2
	// LogOrder is the order of Log's Householder iterations (CrypTen's
	// log_order).
	LogOrder = 8
)

// maxApproxFracBits bounds the fractional bits the approximations accept:
// their squarings need 2f plus the values' integer bits below 62.
const maxApproxFracBits = 24

// expMaxFrac is the most fractional bits the first operand of exp's limit
// approximation is kept with: (1 + x/2^k) squared must stay below 2^62 with
// room for |1 + x/2^k| < 2^4.
const expMaxFrac = 27

// apCheck validates the input of an approximation.
func (s *Session) apCheck(op string, x *share.Tensor) error {
	if err := cmpCheck(op, x); err != nil {
		return err
	}
	if s.fp.FracBits > maxApproxFracBits {
		return fmt.Errorf("protocol: %s: %d fractional bits, the approximations support at most %d", op, s.fp.FracBits, maxApproxFracBits)
	}
	return nil
}

// apEnc returns the ring word of round(c·2^bits).
func apEnc(c float64, bits uint) uint64 {
	return uint64(int64(math.Round(math.Ldexp(c, int(bits)))))
}

// apAddConst returns shares of x + c (c real, encoded at the session's scale).
func (s *Session) apAddConst(x *share.Tensor, c float64) *share.Tensor {
	return s.AddPublicScalar(x, apEnc(c, s.fp.FracBits))
}

// apLinear returns a·x + b·y elementwise for public integers a, b (local).
func apLinear(a int64, x *share.Tensor, b int64, y *share.Tensor) *share.Tensor {
	out := &share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, len(x.Data))}
	for i := range out.Data {
		out.Data[i] = uint64(a)*x.Data[i] + uint64(b)*y.Data[i]
	}
	return out
}

// Exp returns shares of exp(x) elementwise by CrypTen's limit approximation
// (1 + x/2^8)^(2^8): eight squarings. Unlike CrypTen, which first truncates
// x/256 to f fractional bits (losing 8 bits of x), the base 1 + x/256 is kept
// with f + 8 fractional bits and the first square truncated by f + 16.
//
// Range: x ∈ [−256, 10] (exp(x) < 2^15; below −256 the base turns negative).
// Measured max abs error (default encoding): 1.8e-3 on [−16, 0], 1.2e-7 on
// [−256, −16]; relative error 3.1% on [0, 4] and 19% at x = 10 (the limit
// approximation's own error, about x²/512 relatively). Cost: 16 rounds
// (8 × Square + Trunc), 8·(msg(n) + msg(W)) bytes.
func (s *Session) Exp(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("exp", x); err != nil {
		return nil, err
	}
	out, err := s.expScaled(ctx, x, 0)
	if err != nil {
		return nil, fmt.Errorf("protocol: exp %v: %w", x.Shape, err)
	}
	return out, nil
}

// expScaled returns shares of exp(v) at the session's scale f, where the
// input u is the ring word of v at scale f + j (j extra fractional bits).
func (s *Session) expScaled(ctx context.Context, u *share.Tensor, j uint) (*share.Tensor, error) {
	f := s.fp.FracBits
	if len(u.Data) == 0 {
		return &share.Tensor{Shape: slices.Clone(u.Shape), Data: []uint64{}}, nil
	}
	// The base 1 + v/2^k at scale F: u already is v/2^k at scale f+j+k.
	F := f + j + ExpIterations
	y := u
	if target := max(min(F, expMaxFrac), f); target < F {
		var err error
		if y, err = s.TruncBy(ctx, u, F-target); err != nil {
			return nil, err
		}
		F = target
	}
	y = s.AddPublicScalar(y, 1<<F)
	sq, err := s.Square(ctx, y)
	if err != nil {
		return nil, err
	}
	if y, err = s.TruncBy(ctx, sq, 2*F-f); err != nil {
		return nil, err
	}
	for i := 1; i < ExpIterations; i++ {
		if y, err = s.SquareFixed(ctx, y); err != nil {
			return nil, err
		}
	}
	return y, nil
}

// apMulSquare returns shares of x·y² at scale f. With f ≤ 16 the product is
// formed exactly in the ring (y² at 2f bits times x at f bits) and truncated
// once by 2f: 3 rounds, msg(n) + msg(2n) + msg(W), valid while
// |x·y²| < 2^(62−3f) (2^14 for f = 16). Otherwise SquareFixed then MulFixed:
// 4 rounds.
func (s *Session) apMulSquare(ctx context.Context, x, y *share.Tensor) (*share.Tensor, error) {
	f := s.fp.FracBits
	if 3*f <= 48 {
		y2, err := s.Square(ctx, y)
		if err != nil {
			return nil, err
		}
		p, err := s.Mul(ctx, x, y2)
		if err != nil {
			return nil, err
		}
		return s.TruncBy(ctx, p, 2*f)
	}
	y2, err := s.SquareFixed(ctx, y)
	if err != nil {
		return nil, err
	}
	return s.MulFixed(ctx, x, y2)
}

// ReciprocalPositive returns shares of 1/x elementwise for positive x
// (CrypTen's reciprocal with reciprocal_all_pos): Newton–Raphson
// y ← 2y − x·y², 10 iterations, from CrypTen's initial guess
// y0 = 3·exp(0.5 − x) + 0.003. (CrypTen's source has since changed the guess
// to 3·exp(1 − 2x) + 0.003; its documentation still gives this one.)
//
// Range: x ∈ [0.05, 500] (Newton converges while 0 < x·y0 < 2, which fails
// beyond about 660; below 0.05 ten iterations from y0 ≈ 5 do not reach
// 1/x). Measured max abs error 1.5e-5 (one unit of 2^−16) on [0.05, 500],
// i.e. relative error ≤ 0.62% (at x = 485, where 1/x is 135 units) and
// ≤ 1e-4 + 1 unit everywhere. Cost: 46 rounds
// (exp 16, then 10 × (Square, Mul, Trunc)), 8·(msg(n) + msg(W)) +
// 10·(msg(n) + msg(2n) + msg(W)) bytes.
func (s *Session) ReciprocalPositive(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("reciprocal", x); err != nil {
		return nil, err
	}
	out, err := s.reciprocalPos(ctx, x)
	if err != nil {
		return nil, fmt.Errorf("protocol: reciprocal %v: %w", x.Shape, err)
	}
	return out, nil
}

func (s *Session) reciprocalPos(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	e, err := s.expScaled(ctx, s.apAddConst(s.Neg(x), 0.5), 0)
	if err != nil {
		return nil, err
	}
	y := s.apAddConst(s.MulPublicInt(e, 3), 0.003)
	for range ReciprocalIterations {
		xy2, err := s.apMulSquare(ctx, x, y)
		if err != nil {
			return nil, err
		}
		y = apLinear(2, y, -1, xy2)
	}
	return y, nil
}

// Reciprocal returns shares of 1/x elementwise for x of either sign, as
// CrypTen does by default: with s = sign(x), 1/x = s·(1/(s·x)). Here the sign
// bit comes from MSB once and serves both multiplications (each a MulBit:
// |x| = x − 2·x·msb, result = r − 2·r·msb).
//
// Range: |x| ∈ [0.05, 500]; error as ReciprocalPositive. Cost: 54 rounds
// (MSB 6 + MulBit 1 + ReciprocalPositive 46 + MulBit 1).
func (s *Session) Reciprocal(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("reciprocal", x); err != nil {
		return nil, err
	}
	neg, err := s.MSB(ctx, x)
	if err != nil {
		return nil, fmt.Errorf("protocol: reciprocal: %w", err)
	}
	flip := func(v *share.Tensor) (*share.Tensor, error) { // v·(1 − 2·msb)
		m, err := s.MulBit(ctx, v, neg)
		if err != nil {
			return nil, err
		}
		return apLinear(1, v, -2, m), nil
	}
	ax, err := flip(x)
	if err != nil {
		return nil, fmt.Errorf("protocol: reciprocal: %w", err)
	}
	r, err := s.reciprocalPos(ctx, ax)
	if err != nil {
		return nil, fmt.Errorf("protocol: reciprocal %v: %w", x.Shape, err)
	}
	out, err := flip(r)
	if err != nil {
		return nil, fmt.Errorf("protocol: reciprocal: %w", err)
	}
	return out, nil
}

// InvSqrt returns shares of 1/√x elementwise for positive x by CrypTen's
// Newton–Raphson y ← y·(3 − x·y²)/2, 3 iterations, from CrypTen's initial
// guess y0 = 2.2·exp(−(x/2 + 0.2)) + 0.2 − x/1024. The halving is folded into
// the truncation of the product (one Trunc by f+1) and x/2 into exp's extra
// precision.
//
// Range: x ∈ [0.1, 100] (three iterations from CrypTen's guess; LayerNorm
// variances). Measured max relative error 0.49% on [0.1, 100] (at x = 0.1,
// where CrypTen's three iterations have not converged), abs error 1.5e-2.
// Cost: 32 rounds (exp 16, guess 1, 3 × 5), 8·msg(n) + 9·msg(W) +
// 3·(msg(n) + 2·msg(2n) + 2·msg(W)) bytes.
func (s *Session) InvSqrt(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("inv sqrt", x); err != nil {
		return nil, err
	}
	f := s.fp.FracBits
	// u = −(x/2 + 0.2) at scale f+1 is −x_enc − 0.4·2^f.
	u := s.AddPublicScalar(s.Neg(x), -apEnc(0.4, f))
	e, err := s.expScaled(ctx, u, 1)
	if err != nil {
		return nil, fmt.Errorf("protocol: inv sqrt %v: %w", x.Shape, err)
	}
	// 2.2·e − x/1024 at scale f+10, then one truncation by 10.
	w := apLinear(int64(apEnc(2.2, 10)), e, -1, x)
	y, err := s.TruncBy(ctx, w, 10)
	if err != nil {
		return nil, fmt.Errorf("protocol: inv sqrt %v: %w", x.Shape, err)
	}
	y = s.apAddConst(y, 0.2)
	for range InvSqrtIterations {
		xy2, err := s.apMulSquare(ctx, x, y)
		if err != nil {
			return nil, fmt.Errorf("protocol: inv sqrt %v: %w", x.Shape, err)
		}
		t := s.apAddConst(s.Neg(xy2), 3)
		p, err := s.Mul(ctx, y, t)
		if err != nil {
			return nil, fmt.Errorf("protocol: inv sqrt %v: %w", x.Shape, err)
		}
		if y, err = s.TruncBy(ctx, p, f+1); err != nil {
			return nil, fmt.Errorf("protocol: inv sqrt %v: %w", x.Shape, err)
		}
	}
	return y, nil
}

// Log returns shares of ln(x) elementwise for positive x by CrypTen's
// algorithm: initial guess y0 = x/120 − 20·exp(−2x − 1) + 3, then 2
// Householder iterations of order 8, h = 1 − x·exp(−y),
// y ← y − Σ_{k=1..8} h^k/k. The powers of h are formed as CrypTen does
// ([h, h²], then ·h², then ·h⁴: 3 products) and the weighted sum is one
// truncation of Σ round(2^14/k)·h^k.
//
// Range: x ∈ [0.01, 250] (CrypTen states [1e-4, 250] at 2% relative error;
// fixed point with 16 bits resolves x = 1e-4 to 7 units only). Measured max
// abs error 6.1e-2 on [0.01, 250] (largest at the ends, from the limit
// approximation of exp(−y): about y²/512) and 1.9e-2 on [0.5, 20]. Cost:
// 67 rounds (x/120 1, exp 16, 2 × (exp 16 + MulFixed 2 + powers 6 + sum 1)).
func (s *Session) Log(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("log", x); err != nil {
		return nil, err
	}
	out, err := s.logApprox(ctx, x)
	if err != nil {
		return nil, fmt.Errorf("protocol: log %v: %w", x.Shape, err)
	}
	return out, nil
}

func (s *Session) logApprox(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	f := s.fp.FracBits
	t1, err := s.MulPublicScalar(ctx, x, 1.0/120)
	if err != nil {
		return nil, err
	}
	// exp(−2x − 1)
	e, err := s.expScaled(ctx, s.apAddConst(s.MulPublicInt(x, -2), -1), 0)
	if err != nil {
		return nil, err
	}
	y := s.apAddConst(apLinear(1, t1, -20, e), 3)
	const extra = 14
	for range LogIterations {
		e, err := s.expScaled(ctx, s.Neg(y), 0)
		if err != nil {
			return nil, err
		}
		xe, err := s.MulFixed(ctx, x, e)
		if err != nil {
			return nil, err
		}
		h := s.AddPublicScalar(s.Neg(xe), 1<<f)
		pows, err := s.apPowers(ctx, h, LogOrder)
		if err != nil {
			return nil, err
		}
		n := len(h.Data)
		acc := &share.Tensor{Shape: slices.Clone(h.Shape), Data: make([]uint64, n)}
		for k := 1; k <= LogOrder; k++ {
			c := apEnc(1/float64(k), extra)
			pk := pows[(k-1)*n : k*n]
			for i := range acc.Data {
				acc.Data[i] += c * pk[i]
			}
		}
		poly, err := s.TruncBy(ctx, acc, extra)
		if err != nil {
			return nil, err
		}
		y = apLinear(1, y, -1, poly)
	}
	return y, nil
}

// apPowers returns h, h², ..., h^order (fixed point) concatenated, by
// CrypTen's doubling: [h, h²] then each step multiplies all terms so far by
// the highest one. ⌈log2 order⌉ products of 2 rounds each.
func (s *Session) apPowers(ctx context.Context, h *share.Tensor, order int) ([]uint64, error) {
	n := len(h.Data)
	terms := slices.Clone(h.Data)
	if order == 1 {
		return terms, nil
	}
	h2, err := s.SquareFixed(ctx, h)
	if err != nil {
		return nil, err
	}
	terms = append(terms, h2.Data...)
	for len(terms) < order*n {
		k := len(terms) / n
		top := terms[(k-1)*n:]
		take := min(k, order-k)
		a := &share.Tensor{Shape: []int{take * n}, Data: slices.Clone(terms[:take*n])}
		b := &share.Tensor{Shape: []int{take * n}, Data: make([]uint64, take*n)}
		for t := range take {
			copy(b.Data[t*n:], top)
		}
		p, err := s.MulFixed(ctx, a, b)
		if err != nil {
			return nil, err
		}
		terms = append(terms, p.Data...)
	}
	return terms, nil
}

// apLastDim returns the size of x's last dimension and the number of rows.
func apLastDim(op string, x *share.Tensor) (m, rows int, err error) {
	if len(x.Shape) == 0 || x.Shape[len(x.Shape)-1] == 0 {
		return 0, 0, fmt.Errorf("protocol: %s of %v: need a non-empty last dimension", op, x.Shape)
	}
	m = x.Shape[len(x.Shape)-1]
	return m, len(x.Data) / m, nil
}

// apBroadcast returns v (one value per row) repeated m times per row, in
// shape.
func apBroadcast(v *share.Tensor, m int, shape []int) *share.Tensor {
	out := &share.Tensor{Shape: slices.Clone(shape), Data: make([]uint64, len(v.Data)*m)}
	for r, w := range v.Data {
		row := out.Data[r*m : (r+1)*m]
		for i := range row {
			row[i] = w
		}
	}
	return out
}

// softmaxParts returns z = x − max(x) along the last dimension, e = exp(z)
// and S = Σ e per row.
func (s *Session) softmaxParts(ctx context.Context, x *share.Tensor, m int) (z, e, sum *share.Tensor, err error) {
	mx, err := s.Max(ctx, x)
	if err != nil {
		return nil, nil, nil, err
	}
	z = apLinear(1, x, -1, apBroadcast(mx, m, x.Shape))
	if e, err = s.expScaled(ctx, z, 0); err != nil {
		return nil, nil, nil, err
	}
	if sum, err = s.Sum(e, -1); err != nil {
		return nil, nil, nil, err
	}
	return z, e, sum, nil
}

// Softmax returns shares of softmax(x) along the last dimension, as CrypTen
// computes it: subtract the row maximum (Max), exp, sum, ReciprocalPositive
// of the sum, and one fixed-point product. A last dimension of 1 gives ones
// without communication, as in CrypTen.
//
// Range: any row whose entries lie within 256 of its maximum contributes
// exactly as exp's range allows; the row length m must keep Σ exp ≤ m below
// ReciprocalPositive's 500. Measured max abs error 2.9e-3 per probability
// (logits uniform in [−8, 8], m = 16; 8.7e-4 for m = 128 in [−20, 20]). Cost: 7·⌈log2 m⌉ (Max) + 16 (exp) +
// 46 (reciprocal on one value per row) + 2 (product) rounds, e.g. 113 for
// m = 128.
func (s *Session) Softmax(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("softmax", x); err != nil {
		return nil, err
	}
	m, _, err := apLastDim("softmax", x)
	if err != nil {
		return nil, err
	}
	if m == 1 {
		return s.AddPublicScalar(&share.Tensor{Shape: slices.Clone(x.Shape), Data: make([]uint64, len(x.Data))}, s.fp.Scale()), nil
	}
	_, e, sum, err := s.softmaxParts(ctx, x, m)
	if err != nil {
		return nil, fmt.Errorf("protocol: softmax %v: %w", x.Shape, err)
	}
	r, err := s.reciprocalPos(ctx, sum)
	if err != nil {
		return nil, fmt.Errorf("protocol: softmax %v: %w", x.Shape, err)
	}
	out, err := s.MulFixed(ctx, e, apBroadcast(r, m, x.Shape))
	if err != nil {
		return nil, fmt.Errorf("protocol: softmax %v: %w", x.Shape, err)
	}
	return out, nil
}

// Entropy returns shares of the prediction entropy H = −Σ p·ln p of
// p = softmax(x) along the last dimension (x holds logits; the result has x's
// shape without the last dimension). It uses the identity, exact for a
// softmax, H = ln S − Σ e·z / S with z = x − max(x), e = exp(z), S = Σ e: one
// Log and one reciprocal per row instead of a Log per probability, whose
// values below 1e-4 lie outside CrypTen's log range.
//
// Range: as Softmax (m ≤ 500). Measured max abs error 1.3e-2 (logits uniform
// in [−8, 8], m = 16; 1.4e-2 for m = 128 in [−20, 20]; dominated by Log's
// error at S). Cost: 7·⌈log2 m⌉ + 16
// (exp) + 2 (Σ e·z) + 46 (reciprocal) + 2 + 67 (log) rounds, e.g. 182 for
// m = 128; apart from Max and exp, everything is per row.
func (s *Session) Entropy(ctx context.Context, x *share.Tensor) (*share.Tensor, error) {
	if err := s.apCheck("entropy", x); err != nil {
		return nil, err
	}
	m, _, err := apLastDim("entropy", x)
	if err != nil {
		return nil, err
	}
	outShape := slices.Clone(x.Shape[:len(x.Shape)-1])
	if m == 1 {
		return &share.Tensor{Shape: outShape, Data: make([]uint64, len(x.Data))}, nil
	}
	wrap := func(err error) error { return fmt.Errorf("protocol: entropy %v: %w", x.Shape, err) }
	z, e, sum, err := s.softmaxParts(ctx, x, m)
	if err != nil {
		return nil, wrap(err)
	}
	ez, err := s.Mul(ctx, e, z)
	if err != nil {
		return nil, wrap(err)
	}
	ezSum, err := s.Sum(ez, -1)
	if err != nil {
		return nil, wrap(err)
	}
	a, err := s.Trunc(ctx, ezSum)
	if err != nil {
		return nil, wrap(err)
	}
	r, err := s.reciprocalPos(ctx, sum)
	if err != nil {
		return nil, wrap(err)
	}
	ar, err := s.MulFixed(ctx, a, r)
	if err != nil {
		return nil, wrap(err)
	}
	lg, err := s.logApprox(ctx, sum)
	if err != nil {
		return nil, wrap(err)
	}
	return apLinear(1, lg, -1, ar), nil
}

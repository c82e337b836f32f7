package he

import (
	"fmt"

	"github.com/selectformer/selectformer/share"
)

// CheckColumns is c, the number of columns of P0's secret projection V
// (n×c, entries uniform in Z_2^64) that authenticates P1's outputs: P0
// accepts its share C0 of a product only if C0·V − D equals what P1
// committed to, D being check columns P1 computed homomorphically from
// encryptions of B·V and V (see CheckedPlan and the package documentation,
// "Active security"). One column misses an error row of 2-adic valuation v
// with probability 2^(v−64) ≤ 1/2 (Z_2^64 has zero divisors: an error of
// 2^63 survives a random column with probability 1/2), so c independent
// columns miss it with probability at most 2^−c: 2^−40 per altered
// product, and the first failure ends the session.
const CheckColumns = 40

// CheckRows is c', the most rows a check output has. A product with more
// rows m is checked on ρ·C0, ρ a c'×m matrix of uniform words derived from
// a hash of P1's product output (CheckedPlan.Rho: a Fiat–Shamir challenge,
// so P1 has fixed C0's ciphertexts, and any error in them, before it knows
// ρ): the check output then has c' rows whatever m, one ciphertext for a
// product of any height. A nonzero error E0 survives ρ (ρ·E0 = 0) with
// probability at most 2^−c' per ρ, and a P1 that knows its alteration can
// only search for such a ρ by hashing: 2^64 tries.
const CheckRows = 64

// Matrix names a matrix that a checked product encrypts, derived from P0's
// mask B (k×n) and projection V (n×c, c = CheckColumns).
type Matrix uint8

const (
	// MatrixMask is B (k×n).
	MatrixMask Matrix = 1 + iota
	// MatrixMaskProj is B·V (k×c).
	MatrixMaskProj
	// MatrixMaskAug is [B | B·V] (k×(n+c)): B with its projection beside it.
	MatrixMaskAug
	// MatrixProj is V's rows [Row0, Row1) (PlanTerm), shared by every
	// product with the same n.
	MatrixProj
)

// String returns the matrix's formula ("B", "B·V", "[B | B·V]", "V").
func (x Matrix) String() string {
	switch x {
	case MatrixMask:
		return "B"
	case MatrixMaskProj:
		return "B·V"
	case MatrixMaskAug:
		return "[B | B·V]"
	case MatrixProj:
		return "V"
	}
	return fmt.Sprintf("matrix(%d)", uint8(x))
}

// PlanTerm is one product of a planned output: P1's factor (A for the
// matrices derived from B, −R's columns [Row0, Row1) for MatrixProj) times
// the encrypted matrix, placed at the output's columns [Off, Off+width).
type PlanTerm struct {
	Matrix     Matrix
	Row0, Row1 int // MatrixProj: V's rows
	Off        int // the output column of the matrix's first column
}

// PlanOutput is one output message of a checked product: Rows×Width with
// layout Layout, the sum of Terms minus P1's mask. Its columns [Check,
// Width) are check columns (none when Check = Width); output 0 holds the
// product itself in its columns [0, N) (and Rows = M).
type PlanOutput struct {
	Layout       Layout
	Rows         int
	Width, Check int
	Terms        []PlanTerm
}

// CheckedPlan is how an m×k·k×n weight-mask product is made and checked:
// P1 sends the outputs, P0 decrypts them, C0 being output 0's first n
// columns and D the sum of all check columns, and accepts iff X·V − D
// equals P1's commitment, X = C0 (m rows) or, in a compressed plan, ρ·C0
// (CheckRows rows, ρ = Rho of a hash of P1's product output). With A P1's
// factor, R its share and R1 the sum of the check columns' masks, honest
// outputs give D = ρ·A·B·V − ρ·R·V − R1 (ρ = I when not compressed), hence
// X·V − D = ρ·(A·B − R)·V − D = R1: P1 commits to R1, which P0 then
// computes itself, and D is uniform (R1 is), so the check reveals nothing
// to P0.
//
// The plan is a function of the public shape (PlanChecked), the same at
// both parties, in one of two ways:
//
//   - merged (k + n ≤ MaxInner): one output of n + c columns,
//     A·[B | B·V] + [0 | −R·V] − [R | R1], layout ChooseLayout(m, k+n, n+c);
//     its check columns share the ciphertexts (and their c1 halves) of the
//     product's own where a column block has room, which makes the check
//     nearly free for short, narrow products (1×768·768×768: 340 bytes
//     more);
//   - separate: the product A·B − R as without the check, and check outputs
//     of min(m, CheckRows) rows and c columns whose sum is
//     ρ·A·(B·V) − ρ·R·V − R1, each with the layout ChooseLayout(rows, its
//     inner dimension, c): ρ·A·(B·V) and −ρ·R·V in one output, or each in
//     its own (a smaller inner dimension packs more rows per block), V's
//     rows split
//     over several where the inner dimension would exceed MaxInner. With
//     more than CheckRows rows the check is compressed: one 64×40 check
//     output, 104,722 bytes, whatever m (6152×128·128×5: 4,745,928 bytes
//     uncompressed).
//
// PlanChecked takes the way of least estimated time per product: the
// output messages' bytes plus P1's ciphertext products at workBytes each
// (ties: fewer weight ciphertexts, P0's one-time upload and P1's memory).
// Merged wins for short products whose check columns fit beside theirs
// (1×128·128×2: 340 bytes more); separate where merging would multiply
// P1's work (1×768·768×768: V's 768 rows in the product's blocks of one row
// cost 96 more ciphertext products, while a 1×40 check output of its own
// packs them 128 to a ciphertext: 83,302 bytes and 12 products more), and
// for wide and tall products (128×768·768×1536: 104,722 bytes, 2.9%, and
// 1,152 products, 6%, more).
type CheckedPlan struct {
	M, K, N int
	// Compressed: the check is on ρ·C0 (CheckRows rows, Rho), not C0.
	Compressed bool
	Outputs    []PlanOutput
}

// PlanChecked returns the plan of an m×k·k×n product (k ≤ MaxInner).
func (s *Scheme) PlanChecked(m, k, n int) (CheckedPlan, error) {
	c := CheckColumns
	if m < 1 || k < 1 || n < 1 || k > s.p.MaxInner || m > maxDim || n > maxDim-c {
		return CheckedPlan{}, fmt.Errorf("he: checked product %d×%d·%d×%d (MaxInner %d): %w", m, k, k, n, s.p.MaxInner, errShape)
	}
	sep, err := s.planSeparate(m, k, n)
	if err != nil {
		return CheckedPlan{}, err
	}
	if k+n > s.p.MaxInner {
		return sep, nil
	}
	l, err := s.ChooseLayout(m, k+n, n+c)
	if err != nil {
		return CheckedPlan{}, err
	}
	merged := CheckedPlan{M: m, K: k, N: n, Outputs: []PlanOutput{{Layout: l, Rows: m, Width: n + c, Check: n,
		Terms: []PlanTerm{{Matrix: MatrixMaskAug}, {Matrix: MatrixProj, Row0: 0, Row1: n, Off: n}}}}}
	if s.planCost(merged) < s.planCost(sep) || s.planCost(merged) == s.planCost(sep) && s.planCiphertexts(merged) <= s.planCiphertexts(sep) {
		return merged, nil
	}
	return sep, nil
}

// workBytes is the exchange rate of PlanChecked's choice between plans:
// one product of a weight ciphertext with a plaintext costs P1 about
// 0.13 ms of a core (BenchmarkCheckMulMasked, 2-core AMD EPYC), the time
// the paper's WAN (100 MB/s) takes for 12,800 bytes.
const workBytes = 12_800

// planCost is p's estimated per-product cost in bytes: its output messages
// and P1's ciphertext products at workBytes each.
func (s *Scheme) planCost(p CheckedPlan) int64 {
	return s.planBytes(p) + workBytes*int64(s.PlanWork(p))
}

// planCiphertexts is the number of weight ciphertexts p encrypts.
func (s *Scheme) planCiphertexts(p CheckedPlan) int {
	n := 0
	for _, o := range p.Outputs {
		for _, t := range o.Terms {
			rows, cols := p.TermShape(t)
			n += s.WeightSizes(rows, cols, t.Off, o.Layout).Ciphertexts
		}
	}
	return n
}

// planSeparate is the separate way: the product, then check outputs whose
// inner dimensions stay within MaxInner. B·V and V's rows share check
// outputs (joint) or B·V has its own (split), whichever makes fewer output
// ciphertexts, then less work: a smaller inner dimension allows more rows
// per block (128×768·768×1536: one check ciphertext each for B·V and V,
// half the work of both in one output, which RowBudget(2304) = 113 rows
// cuts into two blocks).
func (s *Scheme) planSeparate(m, k, n int) (CheckedPlan, error) {
	l, err := s.ChooseLayout(m, k, n)
	if err != nil {
		return CheckedPlan{}, err
	}
	rows := min(m, CheckRows)
	var best CheckedPlan
	for _, split := range []bool{false, true} {
		p := CheckedPlan{M: m, K: k, N: n, Compressed: rows < m,
			Outputs: []PlanOutput{{Layout: l, Rows: m, Width: n, Check: n, Terms: []PlanTerm{{Matrix: MatrixMask}}}}}
		terms, inner := []PlanTerm{{Matrix: MatrixMaskProj}}, k
		flush := func() error {
			l, err := s.ChooseLayout(rows, inner, CheckColumns)
			if err != nil {
				return err
			}
			p.Outputs = append(p.Outputs, PlanOutput{Layout: l, Rows: rows, Width: CheckColumns, Check: 0, Terms: terms})
			terms, inner = nil, 0
			return nil
		}
		for r0 := 0; r0 < n; {
			if inner == s.p.MaxInner || split && r0 == 0 {
				if err := flush(); err != nil {
					return CheckedPlan{}, err
				}
			}
			r1 := min(n, r0+s.p.MaxInner-inner)
			terms = append(terms, PlanTerm{Matrix: MatrixProj, Row0: r0, Row1: r1})
			inner += r1 - r0
			r0 = r1
		}
		if err := flush(); err != nil {
			return CheckedPlan{}, err
		}
		if !split || s.planCost(p) < s.planCost(best) {
			best = p
		}
	}
	return best, nil
}

// PlanWork is P1's multiply-accumulates of p in ciphertexts (products of a
// weight ciphertext and a plaintext): each weight ciphertext times each
// row block of its output.
func (s *Scheme) PlanWork(p CheckedPlan) int {
	n := 0
	for _, o := range p.Outputs {
		for _, t := range o.Terms {
			rows, cols := p.TermShape(t)
			n += s.WeightSizes(rows, cols, t.Off, o.Layout).Ciphertexts * ceilDiv(o.Rows, o.Layout.MW)
		}
	}
	return n
}

// planBytes is the bytes of p's output messages.
func (s *Scheme) planBytes(p CheckedPlan) int64 {
	var b int64
	for _, v := range s.OutputSizes(p) {
		b += v
	}
	return b
}

// OutputSizes returns the sizes of the plan's output messages (Sizes.Output
// of each output's shape and layout), in order.
func (s *Scheme) OutputSizes(p CheckedPlan) []int64 {
	b := make([]int64, len(p.Outputs))
	for i, o := range p.Outputs {
		b[i] = s.Sizes(o.Rows, 1, o.Width, o.Layout).Output
	}
	return b
}

// TermShape returns the shape of term t's matrix (rows × cols).
func (p CheckedPlan) TermShape(t PlanTerm) (rows, cols int) {
	switch t.Matrix {
	case MatrixMask:
		return p.K, p.N
	case MatrixMaskProj:
		return p.K, CheckColumns
	case MatrixMaskAug:
		return p.K, p.N + CheckColumns
	default:
		return t.Row1 - t.Row0, CheckColumns
	}
}

// Matrix returns P0's plaintext of term t (row-major, TermShape) from its
// mask B (k×n) and projection V (n×c).
func (p CheckedPlan) Matrix(t PlanTerm, B, V []uint64) ([]uint64, error) {
	k, n, c := p.K, p.N, CheckColumns
	if len(B) != k*n || len(V) != n*c {
		return nil, fmt.Errorf("he: checked product: B %d words, V %d words for %d×%d and %d×%d: %w", len(B), len(V), k, n, n, c, errShape)
	}
	switch t.Matrix {
	case MatrixMask:
		return B, nil
	case MatrixProj:
		if t.Row0 < 0 || t.Row0 >= t.Row1 || t.Row1 > n {
			return nil, fmt.Errorf("he: checked product: rows [%d, %d) of V with %d rows: %w", t.Row0, t.Row1, n, errShape)
		}
		return V[t.Row0*c : t.Row1*c], nil
	}
	BV := make([]uint64, k*c)
	if err := share.MatMulInto(BV, B, V, k, n, c); err != nil {
		return nil, fmt.Errorf("he: checked product: B·V: %w", err)
	}
	if t.Matrix == MatrixMaskProj {
		return BV, nil
	}
	aug := make([]uint64, 0, k*(n+c))
	for r := range k {
		aug = append(append(aug, B[r*n:(r+1)*n]...), BV[r*c:(r+1)*c]...)
	}
	return aug, nil
}

// Rho expands the challenge ρ (CheckRows×M, uniform words) of a compressed
// plan from seed, a hash of P1's product output (package beaver/ot binds it
// to the session and the item); nil for a plan that is not compressed.
func (p CheckedPlan) Rho(seed [SeedSize]byte) []uint64 {
	if !p.Compressed {
		return nil
	}
	return share.NewPRG(share.Seed(seed), "selectformer/beaver/he/check-rows/v1").Words(CheckRows * p.M)
}

// Factor returns P1's plaintext factor of term t of output o: A (m×k) for
// the matrices derived from B, −R's columns [Row0, Row1) (R m×n) for
// MatrixProj; times ρ (Rho) on the left in a compressed plan's check
// outputs.
func (p CheckedPlan) Factor(o int, t PlanTerm, A, R, rho []uint64) []uint64 {
	f, w := A, p.K
	if t.Matrix == MatrixProj {
		w = t.Row1 - t.Row0
		f = make([]uint64, p.M*w)
		for i := range p.M {
			for j, v := range R[i*p.N+t.Row0 : i*p.N+t.Row1] {
				f[i*w+j] = -v
			}
		}
	}
	if o == 0 || rho == nil {
		return f
	}
	g := make([]uint64, CheckRows*w)
	if err := share.MatMulInto(g, rho, f, CheckRows, p.M, w); err != nil {
		panic(err) // the shapes are the plan's
	}
	return g
}

// Masks returns P1's masks of the plan's outputs (output i Rows_i×Width_i):
// R (m×n, its share) in output 0's columns [0, n), words of fresh in the
// check columns; and their sum R1 (Rows×c of the check outputs), to which
// P1 commits.
func (p CheckedPlan) Masks(R []uint64, fresh func(n int) []uint64) (masks [][]uint64, R1 []uint64) {
	n, c := p.N, CheckColumns
	R1 = make([]uint64, p.checkRows()*c)
	masks = make([][]uint64, len(p.Outputs))
	for o, out := range p.Outputs {
		mk := make([]uint64, out.Rows*out.Width)
		f := fresh(out.Rows * (out.Width - out.Check))
		for i := range out.Rows {
			row := mk[i*out.Width : (i+1)*out.Width]
			if o == 0 {
				copy(row, R[i*n:(i+1)*n])
			}
			if chk := row[out.Check:]; len(chk) > 0 {
				copy(chk, f[i*c:(i+1)*c])
				addTo(R1[i*c:(i+1)*c], chk)
			}
		}
		masks[o] = mk
	}
	return masks, R1
}

// checkRows is the rows of the check: CheckRows when compressed, M if not.
func (p CheckedPlan) checkRows() int {
	if p.Compressed {
		return CheckRows
	}
	return p.M
}

// Residual is P0's check: from the decrypted outputs (dec[i]
// Rows_i×Width_i, DecryptShares), its projection V (n×c) and ρ (Rho, nil
// if not compressed) it returns its share C0 (m×n, output 0's first n
// columns) and ρ·C0·V − D (C0·V − D if not compressed), D the sum of the
// check columns; the check passes iff the residual is P1's R1.
func (p CheckedPlan) Residual(dec [][]uint64, V, rho []uint64) (C0, res []uint64, err error) {
	m, n, c := p.M, p.N, CheckColumns
	if len(dec) != len(p.Outputs) || len(V) != n*c || p.Compressed && len(rho) != CheckRows*m {
		return nil, nil, fmt.Errorf("he: checked product: %d outputs, V %d words, ρ %d words: %w", len(dec), len(V), len(rho), errShape)
	}
	for i, o := range p.Outputs {
		if len(dec[i]) != o.Rows*o.Width {
			return nil, nil, fmt.Errorf("he: checked product: output %d of %d words, want %d: %w", i, len(dec[i]), o.Rows*o.Width, errShape)
		}
	}
	w0 := p.Outputs[0].Width
	C0 = make([]uint64, m*n)
	for i := range m {
		copy(C0[i*n:(i+1)*n], dec[0][i*w0:])
	}
	X := C0
	if p.Compressed {
		X = make([]uint64, CheckRows*n)
		if err := share.MatMulInto(X, rho, C0, CheckRows, m, n); err != nil {
			return nil, nil, fmt.Errorf("he: checked product: ρ·C0: %w", err)
		}
	}
	r := p.checkRows()
	res = make([]uint64, r*c)
	if err := share.MatMulInto(res, X, V, r, n, c); err != nil {
		return nil, nil, fmt.Errorf("he: checked product: C0·V: %w", err)
	}
	for o, out := range p.Outputs {
		if out.Width-out.Check != c {
			continue // no check columns
		}
		for i := range r {
			ri := res[i*c : (i+1)*c]
			for j, d := range dec[o][i*out.Width+out.Check : (i+1)*out.Width] {
				ri[j] -= d
			}
		}
	}
	return C0, res, nil
}

// addTo adds b to a (mod 2^64).
func addTo(a, b []uint64) {
	for i, v := range b {
		a[i] += v
	}
}

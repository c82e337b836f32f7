package he

import (
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// checkTamper alters P1's side of a checked product before its messages
// cross: its loaded encryptions (term i of the plan, in order) or its
// output ciphertexts.
type checkTamper struct {
	weights func(s *Scheme, term int, w *Weights)
	outputs func(s *Scheme, p CheckedPlan, o int, out *Output)
}

// checkedRun runs the checked product of the plan of m×k·k×n through the
// wire encodings: P0 encrypts each term's matrix of B (k×n) and V (n×c),
// P1 loads them and sends the outputs for its A (m×k) and share R (m×n),
// fresh check masks from rng, altered by tp; P0 decrypts.
func checkedRun(t *testing.T, s *Scheme, m, k, n int, A, B, R, V []uint64, rng *rand.Rand, tp checkTamper) checked {
	t.Helper()
	var p CheckedPlan
	rnd := newDetRand(rng.Uint64())
	sk, pk, err := s.KeyGenWithSeed([SeedSize]byte{1}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = s.PlanChecked(m, k, n); err != nil {
		t.Fatal(err)
	}
	var ws []*Weights
	for _, o := range p.Outputs {
		for _, tm := range o.Terms {
			W, err := p.Matrix(tm, B, V)
			if err != nil {
				t.Fatal(err)
			}
			rows, cols := p.TermShape(tm)
			ew, err := s.EncryptWeightsAt(sk, W, rows, cols, tm.Off, o.Layout, [SeedSize]byte{byte(len(ws) + 2)}, rnd)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ew.AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := s.WeightSizes(rows, cols, tm.Off, o.Layout).Bytes; int64(len(b)) != want {
				t.Fatalf("term %v: %d bytes, WeightSizes says %d", tm, len(b), want)
			}
			ew1, err := s.DecodeEncryptedWeights(b, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.LoadWeights(pk, ew1)
			if err != nil {
				t.Fatal(err)
			}
			if tp.weights != nil {
				tp.weights(s, len(ws), w)
			}
			ws = append(ws, w)
		}
	}
	masks, R1 := p.Masks(R, func(n int) []uint64 { return fill(rng, n, "random") })
	// P1 computes and sends the outputs in order, ρ from output 0's bytes
	// (a compressed plan); P0 decodes and decrypts them.
	sizes := s.OutputSizes(p)
	dec := make([][]uint64, len(p.Outputs))
	var rho, rho0 []uint64
	i := 0
	for o, po := range p.Outputs {
		terms := make([]Term, len(po.Terms))
		for j, tm := range po.Terms {
			terms[j] = Term{W: ws[i], A: p.Factor(o, tm, A, R, rho)}
			i++
		}
		out, err := s.MulMaskedSum(terms, po.Layout, po.Rows, po.Width, masks[o], rnd)
		if err != nil {
			t.Fatal(err)
		}
		if tp.outputs != nil {
			tp.outputs(s, p, o, out)
		}
		b, err := out.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != sizes[o] {
			t.Fatalf("output %d: %d bytes, OutputSizes says %d", o, len(b), sizes[o])
		}
		if o == 0 {
			rho = p.Rho(sha256.Sum256(b))
			rho0 = rho
		}
		out1, err := s.DecodeOutput(b, po.Rows, po.Width)
		if err != nil {
			t.Fatal(err)
		}
		if dec[o], err = s.DecryptShares(sk, out1, po.Rows, po.Width, po.Layout); err != nil {
			t.Fatal(err)
		}
	}
	C0, res, err := p.Residual(dec, V, rho0)
	if err != nil {
		t.Fatal(err)
	}
	D := make([]uint64, len(R1))
	for o, po := range p.Outputs {
		if po.Width == po.Check {
			continue
		}
		for i := range po.Rows {
			addTo(D[i*CheckColumns:(i+1)*CheckColumns], dec[o][i*po.Width+po.Check:(i+1)*po.Width])
		}
	}
	return checked{C0: C0, res: res, R1: R1, D: D, p: p}
}

// checked is what checkedRun observed: P0's share C0, residual and
// decrypted check columns (summed over the check outputs), P1's committed
// R1, and the plan.
type checked struct {
	C0, res, R1, D []uint64
	p              CheckedPlan
}

// merged reports whether p is the merged way (one output with check
// columns beside the product's).
func (p CheckedPlan) merged() bool { return len(p.Outputs) == 1 }

// TestPlanChecked pins the plans of the sst2 phase-0 products (which way,
// the bytes the check adds) and the split of a check output's inner
// dimension at MaxInner.
func TestPlanChecked(t *testing.T) {
	s := defaultScheme
	check := int64(82944 + CheckRows*CheckColumns*68/8 + 18) // one check output of c'×c, one ciphertext
	for _, c := range []struct {
		m, k, n    int
		merged     bool
		compressed bool
		extra      int64 // bytes beyond the unchecked product's output
	}{
		{128, 768, 1536, false, true, check},
		{128, 1, 1536, false, true, check},
		{769, 128, 5, false, true, check}, // batch 1's tallest product: m×c check values would be 676,224 bytes
		{6152, 128, 5, false, true, check},
		// Merged would add 24·40·68 bits but double P1's work (V's 768 rows
		// in the product's blocks of 8 rows); a check output of its own at
		// NW = 64 packs them 4 to a ciphertext.
		{24, 769, 768, false, false, 82944 + 24*40*68/8 + 18},
		{1, 768, 768, false, false, 82944 + 40*68/8 + 18},
		{1, 128, 2, true, false, 40 * 68 / 8}, // the check columns fit beside the product's
		{1, 2, 1, true, false, 40 * 68 / 8},   // one output of 41 columns at NW = 64, as the unchecked 1
		{64, 1, 217, false, false, check},     // m ≤ c': the check is on C0 itself
	} {
		p, err := s.PlanChecked(c.m, c.k, c.n)
		if err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, b := range s.OutputSizes(p) {
			got += b
		}
		got -= s.Sizes(c.m, c.k, c.n, Layout{}).Output
		if p.merged() != c.merged || p.Compressed != c.compressed || got != c.extra {
			t.Errorf("%d×%d·%d×%d: merged %v, compressed %v, %d bytes more; want %v, %v, %d", c.m, c.k, c.k, c.n, p.merged(), p.Compressed, got, c.merged, c.compressed, c.extra)
		}
	}
	// k + n > MaxInner: separate, the check's inner dimension split.
	p, err := s.PlanChecked(2, 4000, 200)
	if err != nil {
		t.Fatal(err)
	}
	want := []PlanOutput{
		{Width: 200, Check: 200, Terms: []PlanTerm{{Matrix: MatrixMask}}},
		{Width: 40, Terms: []PlanTerm{{Matrix: MatrixMaskProj}, {Matrix: MatrixProj, Row0: 0, Row1: 96}}},
		{Width: 40, Terms: []PlanTerm{{Matrix: MatrixProj, Row0: 96, Row1: 200}}},
	}
	for i := range p.Outputs {
		p.Outputs[i].Layout = Layout{}
	}
	if !slices.EqualFunc(p.Outputs, want, func(a, b PlanOutput) bool {
		return a.Width == b.Width && a.Check == b.Check && slices.Equal(a.Terms, b.Terms)
	}) {
		t.Errorf("plan of 2×4000·4000×200: %+v, want %+v", p.Outputs, want)
	}
	if _, err := s.PlanChecked(1, s.p.MaxInner+1, 1); err == nil {
		t.Error("k > MaxInner planned")
	}
}

// smallInner is a scheme whose MaxInner is 16, so that small products
// exercise the split of the check's inner dimension.
var smallInner = func() *Scheme {
	p := DefaultParams()
	p.MaxInner = 16
	s, err := NewScheme(p)
	if err != nil {
		panic(err)
	}
	return s
}()

// TestCheckedProduct: honest checked products pass (the residual is P1's
// R1) and give C0 + C1 = A·B exactly, for merged and separate plans, a
// check split over several outputs, a compressed check (on ρ·C0), weight
// vector triples' diag(b), edge words; the messages have the sizes
// WeightSizes and OutputSizes give.
func TestCheckedProduct(t *testing.T) {
	for i, c := range []struct {
		name    string
		s       *Scheme
		m, k, n int
		merged  bool
		diag    bool
		pattern string
	}{
		{"merged", defaultScheme, 3, 5, 7, true, false, "random"},
		{"merged/edges", defaultScheme, 9, 16, 12, true, false, "edges"},
		{"merged/diag", defaultScheme, 4, 6, 6, true, true, "edges"},
		{"separate", defaultScheme, 64, 1, 217, false, false, "random"},
		{"separate/split", smallInner, 3, 10, 12, false, false, "edges"},
		{"compressed", defaultScheme, 300, 4, 3, false, false, "edges"},
		{"compressed/diag", defaultScheme, 260, 5, 5, false, true, "random"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "separate" && testing.Short() {
				// 219 ciphertexts, half a minute under the race detector
				// (-short there); separate/split runs the same path.
				t.Skip("the separate plan at the default parameters runs in the full suite")
			}
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			A, R := fill(rng, c.m*c.k, c.pattern), fill(rng, c.m*c.n, c.pattern)
			B := fill(rng, c.k*c.n, c.pattern)
			if c.diag {
				clear(B)
				for j := range c.n {
					B[j*c.n+j] = edges[rng.IntN(len(edges))]
				}
			}
			V := fill(rng, c.n*CheckColumns, "random")
			r := checkedRun(t, c.s, c.m, c.k, c.n, A, B, R, V, rng, checkTamper{})
			if r.p.merged() != c.merged {
				t.Fatalf("plan %+v, want merged %v", r.p.Outputs, c.merged)
			}
			if c.name == "separate/split" && len(r.p.Outputs) < 3 {
				t.Fatalf("plan %+v: the check is not split", r.p.Outputs)
			}
			if r.p.Compressed != strings.HasPrefix(c.name, "compressed") {
				t.Fatalf("plan compressed: %v", r.p.Compressed)
			}
			checkShares(t, r.C0, R, plainMul(A, B, c.m, c.k, c.n))
			if !slices.Equal(r.res, r.R1) {
				t.Error("honest outputs fail the check")
			}
		})
	}
}

// addBits adds v to the u128 x modulo 2^bits.
func addBits(x u128, v u128, bits int) u128 { return x.add(v).mask(bits) }

// TestCheckCatchesTampering: a P1 that alters its outputs or the
// encryptions it holds is caught — the residual is not its R1 — whether the
// change moves C0 by a key-dependent amount (δ·2^(LogQ1−64)·X^t added to an
// output's c1, δ = 1 and 2^63, which without the check moves P0's share by
// δ·s[pos−t] at every output; δ·X^t·s added to a loaded weight ciphertext)
// or by a known one (c0 + 1), and whether it touches the product or only
// the check. A change below the decryption's rounding (c1 + 1 at LogQ1
// scale) passes, and then C0 is exactly the honest share.
func TestCheckCatchesTampering(t *testing.T) {
	s := defaultScheme
	c1Add := func(out, block, t int, v u128) func(*Scheme, CheckedPlan, int, *Output) {
		return func(s *Scheme, _ CheckedPlan, o int, ct *Output) {
			if o == out {
				b := ct.blocks[block]
				b.c1[t] = addBits(b.c1[t], v, s.p.LogQ1)
			}
		}
	}
	c0Add := func(out, block, i int, v u128) func(*Scheme, CheckedPlan, int, *Output) {
		return func(s *Scheme, _ CheckedPlan, o int, ct *Output) {
			if o == out {
				b := ct.blocks[block]
				b.c0[i] = addBits(b.c0[i], v, s.p.LogQ0)
			}
		}
	}
	unit := u128{1, 0}.shl(s.p.LogQ1 - 64) // δ = 1 at the plaintext's scale
	// The separate plans run on smallInner (MaxInner 16): its check is
	// split over two outputs.
	cases := []struct {
		name    string
		s       *Scheme
		m, k, n int
		tp      checkTamper
		pass    bool
		movesC0 bool // the change moves C0 (otherwise only the check columns)
	}{
		{"c1+2^(LogQ1-64)X^t", s, 4, 8, 12, checkTamper{outputs: c1Add(0, 0, 5, unit)}, false, true},
		{"c1+2^63·2^(LogQ1-64)X^t", s, 4, 8, 12, checkTamper{outputs: c1Add(0, 0, 5, unit.shl(63))}, false, true},
		{"separate/c1+2^63·2^(LogQ1-64)X^t", smallInner, 4, 8, 12, checkTamper{outputs: c1Add(0, 0, 5, unit.shl(63))}, false, true},
		{"c0+1", s, 4, 8, 12, checkTamper{outputs: c0Add(0, 0, 1, u128{1, 0}.shl(s.p.LogQ0-64))}, false, true},
		// Row 0's first check column (column n = 12, in block 0).
		{"check column only/merged", s, 4, 8, 12, checkTamper{outputs: c0Add(0, 0, 12, u128{1, 0}.shl(s.p.LogQ0-1))}, false, false},
		{"check output only/separate", smallInner, 4, 8, 12, checkTamper{outputs: c1Add(1, 0, 7, unit.shl(63))}, false, false},
		// 300 rows: the check is on ρ·C0 (64 rows).
		{"compressed/c1+2^63·2^(LogQ1-64)X^t", s, 300, 4, 3, checkTamper{outputs: c1Add(0, 0, 9, unit.shl(63))}, false, true},
		{"compressed/c0+2^63 in one row", s, 300, 4, 3, checkTamper{outputs: c0Add(0, 0, 5, u128{1, 0}.shl(s.p.LogQ0-1))}, false, true},
		{"compressed/check output only", s, 300, 4, 3, checkTamper{outputs: c1Add(1, 0, 7, unit.shl(63))}, false, false},
		{"loaded weights c1+δX^t·s", s, 4, 8, 12, checkTamper{weights: func(s *Scheme, term int, w *Weights) {
			if term != 0 {
				return
			}
			// The first weight ciphertext's c1 gains δ·X^3 (δ = the
			// encoding of 1): its decryption gains X^3·s.
			p := s.rq.NewPoly()
			s.rq.INTT(w.c1[0], p)
			for i, q := range s.p.Q {
				p.Coeffs[i][3] = addMod(p.Coeffs[i][3], s.encode(1, i), q)
			}
			c := s.rq.NewPoly()
			s.rq.NTT(p, c)
			w.c1 = slices.Clone(w.c1)
			w.c1[0] = c
		}}, false, true},
		{"loaded projection c0", s, 4, 8, 12, checkTamper{weights: func(s *Scheme, term int, w *Weights) {
			if term != 1 {
				return
			}
			c := *w.c0[0].CopyNew()
			for i, q := range s.p.Q {
				c.Coeffs[i][0] = addMod(c.Coeffs[i][0], 1<<40, q)
			}
			w.c0 = slices.Clone(w.c0)
			w.c0[0] = c // an NTT slot: every coefficient moves, C0's too
		}}, false, true},
		{"c1+1 at LogQ1 scale (below rounding)", s, 4, 8, 12, checkTamper{outputs: c1Add(0, 0, 5, u128{1, 0})}, true, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 13))
			A, B, R := fill(rng, c.m*c.k, "random"), fill(rng, c.k*c.n, "random"), fill(rng, c.m*c.n, "random")
			V := fill(rng, c.n*CheckColumns, "random")
			r := checkedRun(t, c.s, c.m, c.k, c.n, A, B, R, V, rng, c.tp)
			C0, res, R1 := r.C0, r.res, r.R1
			if strings.HasPrefix(c.name, "compressed") != r.p.Compressed {
				t.Fatalf("plan compressed: %v", r.p.Compressed)
			}
			honest := true
			want := plainMul(A, B, c.m, c.k, c.n)
			for j := range want {
				honest = honest && C0[j]+R[j] == want[j]
			}
			passed := slices.Equal(res, R1)
			if passed != c.pass {
				t.Fatalf("check passed: %v, want %v (C0 honest: %v)", passed, c.pass, honest)
			}
			if passed && !honest {
				t.Fatal("an altered C0 passed the check")
			}
			if honest == c.movesC0 {
				t.Fatalf("the change moved C0: %v, want %v", !honest, c.movesC0)
			}
		})
	}
}

// TestCheckView: what the check adds to P0's view, the decrypted check
// columns D = A·B·V − R·V − R1 (ρ·A·B·V − ρ·R·V − R1 when compressed), is
// independent of P1's A: for A = 0 and A = −2^63 everywhere (same B, R, V)
// the words of D (as fractions of 2^64) pass a two-sample KS test, and fit
// the uniform distribution; P0's residual is R1, which P1 committed to.
// Merged (16×8·8×12) and compressed (300×4·4×3) plans; α = 10^-4.
func TestCheckView(t *testing.T) {
	s := defaultScheme
	for _, c := range []struct {
		m, k, n, runs int
		compressed    bool
	}{{16, 8, 12, 4, false}, {300, 4, 3, 1, true}} {
		rng := rand.New(rand.NewPCG(21, uint64(c.m)))
		B, R := fill(rng, c.k*c.n, "random"), fill(rng, c.m*c.n, "random")
		V := fill(rng, c.n*CheckColumns, "random")
		views := func(A []uint64) []float64 {
			var d []float64
			for range c.runs {
				r := checkedRun(t, s, c.m, c.k, c.n, A, B, R, V, rng, checkTamper{})
				if r.p.Compressed != c.compressed || !slices.Equal(r.res, r.R1) {
					t.Fatalf("%d×%d·%d×%d: compressed %v, or the honest check failed", c.m, c.k, c.k, c.n, r.p.Compressed)
				}
				for _, x := range r.D {
					d = append(d, math.Ldexp(float64(x), -64))
				}
			}
			return d
		}
		zero, ext := views(make([]uint64, c.m*c.k)), views(fill(nil, c.m*c.k, "min"))
		crit := ksCrit(1e-4, len(zero), len(ext))
		if d := ks2(zero, ext); d > crit {
			t.Errorf("%d rows: the check columns depend on A: KS D = %.4f > %.4f", c.m, d, crit)
		}
		unif := make([]float64, len(zero))
		for i := range unif {
			unif[i] = rng.Float64()
		}
		if d := ks2(ext, unif); d > crit {
			t.Errorf("%d rows: the check columns are not uniform: KS D = %.4f > %.4f", c.m, d, crit)
		}
	}
}

// TestMulMaskedSumOffsets: a sum of products whose weights sit at column
// offsets that cross column blocks (ColumnBlocks) gives C0 + C1 = Σ A_t·B_t
// exactly, B_t placed at its columns, in blocks of 4 rows and 16 columns;
// weights beyond the output's columns, of another NW, under another public
// key, or whose inner dimensions exceed MaxInner are refused.
func TestMulMaskedSumOffsets(t *testing.T) {
	s := smallInner
	l := Layout{MW: 4, NW: 16}
	m, n := 6, 40 // 2 row blocks (the last of 2 rows), 3 column blocks
	rng := rand.New(rand.NewPCG(31, 31))
	rnd := newDetRand(31)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	type part struct{ k, cols, off int }
	parts := []part{{3, 20, 0}, {5, 17, 13}, {2, 10, 30}} // blocks 0–1, 0–1, 1–2
	want := make([]uint64, m*n)
	var terms []Term
	for i, p := range parts {
		B, A := fill(rng, p.k*p.cols, "edges"), fill(rng, m*p.k, "edges")
		ew, err := s.EncryptWeightsAt(sk, B, p.k, p.cols, p.off, l, [SeedSize]byte{byte(i)}, rnd)
		if err != nil {
			t.Fatal(err)
		}
		if _, cb := ColumnBlocks(p.off, p.cols, l.NW); len(ew.C0) != p.k*cb {
			t.Fatalf("part %d: %d ciphertexts, want %d", i, len(ew.C0), p.k*cb)
		}
		w, err := s.LoadWeights(pk, ew)
		if err != nil {
			t.Fatal(err)
		}
		terms = append(terms, Term{W: w, A: A})
		P := plainMul(A, B, m, p.k, p.cols)
		for r := range m {
			for j := range p.cols {
				want[r*n+p.off+j] += P[r*p.cols+j]
			}
		}
	}
	R := fill(rng, m*n, "random")
	out, err := s.MulMaskedSum(terms, l, m, n, R, rnd)
	if err != nil {
		t.Fatal(err)
	}
	C0, err := s.DecryptShares(sk, out, m, n, l)
	if err != nil {
		t.Fatal(err)
	}
	checkShares(t, C0, R, want)

	// Refusals.
	_, pk2, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	ew, err := s.EncryptWeightsAt(sk, fill(rng, 4, "random"), 1, 4, 0, Layout{MW: 4, NW: 8}, [SeedSize]byte{9}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	otherNW, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := s.LoadWeights(pk2, ew)
	if err != nil {
		t.Fatal(err)
	}
	otherKey.layout = l
	for name, ts := range map[string][]Term{
		"beyond the columns": {terms[0], terms[2]},
		"another NW":         {terms[0], {W: otherNW, A: fill(rng, m, "random")}},
		"another key":        {terms[0], {W: otherKey, A: fill(rng, m, "random")}},
		"inner > MaxInner":   {terms[0], terms[1], terms[2], terms[1], {W: terms[1].W, A: fill(rng, m*5, "random")}},
	} {
		width := n
		if name == "beyond the columns" {
			width = 35
		}
		if _, err := s.MulMaskedSum(ts, l, m, width, R[:m*width], rnd); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestMulMaskedAdmitsOne: weight products run one at a time, whatever
// the callers (a data owner's lanes), and
// each is still right. Each admitted product waits a while, so that
// without the admission they would overlap (checked: the peak is the
// callers' number then).
func TestMulMaskedAdmitsOne(t *testing.T) {
	s, err := NewScheme(smallInner.Params())
	if err != nil {
		t.Fatal(err)
	}
	s.onAccumulate = func() { time.Sleep(5 * time.Millisecond) }
	l := Layout{MW: 4, NW: 16}
	m, k, n := 4, 3, 16
	rng := rand.New(rand.NewPCG(41, 41))
	rnd := newDetRand(41)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	B, A := fill(rng, k*n, "edges"), fill(rng, m*k, "edges")
	ew, err := s.EncryptWeightsAt(sk, B, k, n, 0, l, [SeedSize]byte{41}, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	want := plainMul(A, B, m, k, n)
	callers := 2*runtime.GOMAXPROCS(0) + 1
	outs, Rs, errs := make([]*Output, callers), make([][]uint64, callers), make([]error, callers)
	for i := range Rs {
		Rs[i] = fill(rng, m*n, "random")
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { outs[i], errs[i] = s.MulMaskedSum([]Term{{W: w, A: A}}, l, m, n, Rs[i], nil) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		C0, err := s.DecryptShares(sk, outs[i], m, n, l)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, C0, Rs[i], want)
	}
	if peak := s.peakAccumulating.Load(); peak != 1 {
		t.Fatalf("%d products at once from %d callers, want 1", peak, callers)
	}
}

package he

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
)

// detRand is a deterministic randomness source for tests.
type detRand struct{ r *rand.ChaCha8 }

func newDetRand(seed uint64) *detRand {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return &detRand{rand.NewChaCha8(s)}
}

func (d *detRand) Read(p []byte) (int, error) { return d.r.Read(p) }

var defaultScheme = func() *Scheme {
	s, err := NewScheme(DefaultParams())
	if err != nil {
		panic(err)
	}
	return s
}()

// plainMul returns A·B mod 2^64.
func plainMul(A, B []uint64, m, k, n int) []uint64 {
	C := make([]uint64, m*n)
	for i := range m {
		for r := range k {
			a := A[i*k+r]
			for j := range n {
				C[i*n+j] += a * B[r*n+j]
			}
		}
	}
	return C
}

// roundTrip runs the whole protocol through the wire encodings and returns
// C0 and the sizes of the three messages.
func roundTrip(t testing.TB, s *Scheme, A, B, R []uint64, m, k, n int, l Layout, seed uint64) (C0 []uint64, sz [3]int64) {
	t.Helper()
	rnd := newDetRand(seed)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	ew, err := s.EncryptWeights(sk, B, k, n, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	pkb, err := pk.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	ewb, err := ew.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	pk1, err := s.DecodePublicKey(pkb)
	if err != nil {
		t.Fatal(err)
	}
	ew1, err := s.DecodeEncryptedWeights(ewb, k, n)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk1, ew1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.MulMasked(w, A, m, R, rnd)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := out.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	out1, err := s.DecodeOutput(ob, m, n)
	if err != nil {
		t.Fatal(err)
	}
	C0, err = s.DecryptShares(sk, out1, m, n, l)
	if err != nil {
		t.Fatal(err)
	}
	return C0, [3]int64{int64(len(pkb)), int64(len(ewb)), int64(len(ob))}
}

// Edge words of Z_2^64.
var edges = []uint64{0, 1, 1 << 63, 1<<63 - 1, 1<<63 + 1, ^uint64(0), ^uint64(0) - 1}

// fill returns n words of the named pattern.
func fill(rng *rand.Rand, n int, pattern string) []uint64 {
	if rng == nil {
		rng = rand.New(rand.NewPCG(0, 0))
	}
	v := make([]uint64, n)
	for i := range v {
		switch pattern {
		case "random":
			v[i] = rng.Uint64()
		case "edges":
			v[i] = edges[rng.IntN(len(edges))]
		case "min": // −2^63, the largest |a| of the centred lift
			v[i] = 1 << 63
		case "max":
			v[i] = ^uint64(0)
		case "zero":
		}
	}
	return v
}

func checkShares(t *testing.T, C0, R, want []uint64) {
	t.Helper()
	bad := 0
	for i := range want {
		if C0[i]+R[i] != want[i] {
			if bad++; bad <= 3 {
				t.Errorf("word %d: C0+C1 = %#x, want %#x", i, C0[i]+R[i], want[i])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d words wrong", bad, len(want))
	}
}

// TestCorrectness: C0 + C1 = A·B mod 2^64 exactly, over shapes that are
// and are not multiples of the blocks, every evaluation path (D = N/NW
// large: lattigo NTT of degree D; small: direct; D = 1), edge words, and the
// exact message sizes of Sizes.
func TestCorrectness(t *testing.T) {
	s := defaultScheme
	cases := []struct {
		name       string
		m, k, n    int
		l          Layout // zero: ChooseLayout
		pa, pb, pr string
	}{
		{"random/partial-blocks/ntt-eval", 5, 7, 9, Layout{MW: 2, NW: 4}, "random", "random", "random"},
		{"edges/partial-blocks/direct-eval", 7, 5, 300, Layout{MW: 3, NW: 256}, "edges", "edges", "edges"},
		{"edges/D=1", 3, 4, 10, Layout{MW: 1, NW: 8192}, "edges", "edges", "edges"},
		{"extreme/min×max", 6, 9, 20, Layout{MW: 4, NW: 16}, "min", "max", "max"},
		{"extreme/min×min", 6, 9, 20, Layout{MW: 4, NW: 16}, "min", "min", "zero"},
		{"zero-A", 4, 3, 5, Layout{}, "zero", "random", "random"},
		{"auto-layout/random", 33, 6, 70, Layout{}, "random", "edges", "random"},
		{"one-word", 1, 1, 1, Layout{}, "edges", "edges", "edges"},
		{"full-block/D=16", 16, 3, 512, Layout{MW: 16, NW: 512}, "random", "random", "random"},
		{"tall-narrow/MW>MaxRows", 1500, 3, 5, Layout{}, "random", "edges", "random"}, // RowBudget(3): MW = 1024 > MaxRows
		// KW rows of B per ciphertext: a last block cut short, the whole
		// ring (MW·KW·NW = N: the terms that wrap around the top), and the
		// direct evaluation path (N/NW = 16).
		{"kw/partial-blocks", 5, 10, 20, Layout{MW: 2, NW: 32, KW: 4}, "edges", "edges", "edges"},
		{"kw/full-ring", 4, 200, 16, Layout{MW: 4, NW: 16, KW: 128}, "min", "max", "random"},
		{"kw/direct-eval", 3, 7, 300, Layout{MW: 3, NW: 512, KW: 4}, "edges", "random", "edges"},
		// More terms than maxMacTerms: the limb sums normalized four times
		// (1 s in the plain suite, 17 s under the race detector, which
		// runs -short and has nothing concurrent to find here).
		{"many-terms/normalized", 5, 300, 64, Layout{MW: 4, NW: 64}, "max", "max", "random"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if testing.Short() && c.k > 4*maxMacTerms {
				t.Skip("the many-terms case runs in the full suite, not under -short")
			}
			l := c.l
			if l == (Layout{}) {
				var err error
				if l, err = s.ChooseLayout(c.m, c.k, c.n); err != nil {
					t.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			A, B, R := fill(rng, c.m*c.k, c.pa), fill(rng, c.k*c.n, c.pb), fill(rng, c.m*c.n, c.pr)
			C0, got := roundTrip(t, s, A, B, R, c.m, c.k, c.n, l, uint64(i))
			checkShares(t, C0, R, plainMul(A, B, c.m, c.k, c.n))
			sz := s.Sizes(c.m, c.k, c.n, l)
			if want := [3]int64{sz.PublicKey, sz.Weights, sz.Output}; got != want {
				t.Errorf("message bytes %v, Sizes says %v", got, want)
			}
		})
	}
}

// TestWorstCaseInner: the noise budget's worst cases decrypt exactly — the
// largest inner dimension allowed, k = MaxInner, with MW = MaxRows rows a
// plaintext, and a narrow inner dimension k = MaxInner/32 with the
// RowBudget(k) = 32·MaxRows rows it allows (the same k·MW) — with the
// largest |A| = 2^63 in every entry and extreme B. To bound the noise from
// above rather than typically, every row of the encrypted B is the same
// ciphertext, so the k error terms e·a add coherently (k·|e·a| instead of
// √k), and the flood is at its maximum.
func TestWorstCaseInner(t *testing.T) {
	if testing.Short() {
		// 2–3 s in the plain suite, which always runs it; half a minute
		// under the race detector (-short there), which has nothing
		// concurrent to find in it that TestCorrectness does not cover.
		t.Skip("the worst case runs in the full suite, not under -short")
	}
	s := defaultScheme
	narrow := s.p.MaxInner / 32
	for _, c := range []struct {
		name string
		k    int
		l    Layout
	}{
		{"k=MaxInner", s.p.MaxInner, Layout{MW: s.p.MaxRows, NW: s.n / s.p.MaxRows}},
		{"k=MaxInner/32", narrow, Layout{MW: s.RowBudget(narrow), NW: s.n / s.RowBudget(narrow)}},
		// KW rows of B per ciphertext: each output sums KW inner terms of
		// one ciphertext product (ChooseLayout's for 128×4096·4096×2).
		{"k=MaxInner/KW=64", s.p.MaxInner, Layout{MW: s.p.MaxRows, NW: 2, KW: 64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.l.MW*c.k != s.p.MaxRows*s.p.MaxInner {
				t.Fatalf("k·MW = %d, not the budget's %d", c.l.MW*c.k, s.p.MaxRows*s.p.MaxInner)
			}
			worstCase(t, s, c.k, c.l)
		})
	}
}

// worstCase runs TestWorstCaseInner's product for inner dimension k and
// layout l (its largest MW).
func worstCase(t *testing.T, s *Scheme, k int, l Layout) {
	m, n := l.MW+3, l.NW+5 // partial blocks too
	rnd := newDetRand(42)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	row := fill(rng, n, "max")
	for j := range row {
		if j%2 == 1 {
			row[j] = 1 << 63
		}
	}
	kw := l.kw()
	rows := make([]uint64, 0, kw*n) // one block of KW rows
	for range kw {
		rows = append(rows, row...)
	}
	ew, err := s.EncryptWeights(sk, rows, kw, n, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w1, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	cb, kb := w1.cb, k/kw
	w := *w1
	w.k = k
	w.c0, w.c1 = make([]ring.Poly, kb*cb), make([]ring.Poly, kb*cb)
	for r := range kb {
		copy(w.c0[r*cb:], w1.c0)
		copy(w.c1[r*cb:], w1.c1)
	}
	B := make([]uint64, k*n)
	for r := range k {
		copy(B[r*n:], row)
	}
	for _, pa := range []string{"min", "max"} {
		A := fill(rng, m*k, pa)
		R := fill(rng, m*n, "random")
		out, err := s.MulMasked(&w, A, m, R, rnd)
		if err != nil {
			t.Fatal(err)
		}
		C0, err := s.DecryptShares(sk, out, m, n, l)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, C0, R, plainMul(A, B, m, k, n))
	}
}

// TestParamsExactnessBoundary: NewScheme accepts the largest flood its
// noise arithmetic allows and rejects one bit more; at that largest flood
// decryption is still exact.
func TestParamsExactnessBoundary(t *testing.T) {
	p := DefaultParams()
	for ; ; p.FloodBits++ {
		q := p
		q.FloodBits++
		if _, err := NewScheme(q); err != nil {
			break
		}
	}
	if p.FloodBits < DefaultParams().FloodBits {
		t.Fatalf("defaults rejected")
	}
	t.Logf("largest FloodBits λ = %d", p.FloodBits)
	s, err := NewScheme(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	m, k, n := 20, 6, 40
	A, B, R := fill(rng, m*k, "edges"), fill(rng, k*n, "edges"), fill(rng, m*n, "random")
	l, _ := s.ChooseLayout(m, k, n)
	C0, _ := roundTrip(t, s, A, B, R, m, k, n, l, 3)
	checkShares(t, C0, R, plainMul(A, B, m, k, n))

	bad := []func(*Params){
		func(p *Params) { p.LogQ1 = 70 },                   // c1 switched too low
		func(p *Params) { p.LogQ0 = 65 },                   // c0 switched too low
		func(p *Params) { p.Q = p.Q[:3] },                  // Q too small for the flood
		func(p *Params) { p.MaxInner = 1 << 19 },           // noise too large
		func(p *Params) { p.Q = []uint64{p.Q[0], p.Q[0]} }, // repeated modulus
		func(p *Params) { p.Q = append([]uint64{}, 17) },   // not NTT-friendly
		func(p *Params) { p.MaxRows = 0 },
		func(p *Params) { p.LogN = 20 },
	}
	for i, f := range bad {
		q := DefaultParams()
		f(&q)
		if err := q.Validate(); err == nil {
			t.Errorf("bad params %d accepted", i)
		}
	}
}

func TestChooseLayout(t *testing.T) {
	s := defaultScheme
	cases := []struct {
		m, k, n int
		want    Layout
		outs    int
	}{
		{128, 768, 1536, Layout{MW: 16, NW: 512}, 24}, // sst2 product of the brief
		{128, 768, 768, Layout{MW: 32, NW: 256}, 12},
		{128, 768, 3072, Layout{MW: 8, NW: 1024}, 48},
		{128, 4096, 2, Layout{MW: 64, NW: 2, KW: 64}, 2}, // k = MaxInner: MaxRows rows; 64 weight ciphertexts, not 4096
		{128, 768, 2, Layout{MW: 128, NW: 2, KW: 32}, 1}, // RowBudget(768) = 341
		{1, 768, 768, Layout{MW: 1, NW: 1024, KW: 8}, 1}, // 96 weight ciphertexts, not 768
		{6152, 128, 5, Layout{MW: 1024, NW: 8}, 7},       // the folded class attention's Y_augᵀ·W_mlp at batch 8 (97 with MW ≤ 64)
		{1, 1, 1, Layout{MW: 1, NW: 1}, 1},
	}
	for _, c := range []struct{ k, want int }{{4096, 64}, {768, 341}, {128, 2048}, {64, 4096}, {1, 8192}, {0, 8192}} {
		if got := s.RowBudget(c.k); got != c.want {
			t.Errorf("RowBudget(%d) = %d, want %d", c.k, got, c.want)
		}
	}
	if err := s.checkLayout(Layout{MW: 128, NW: 2}, 4096); err == nil {
		t.Error("MW 128 accepted at k = MaxInner, beyond the noise budget")
	}
	// Within a memory bound: fewer weight ciphertexts, more outputs.
	if l, err := s.ChooseLayoutWithin(128, 768, 768, 500<<20); err != nil || l != (Layout{MW: 8, NW: 1024}) {
		t.Errorf("within 500 MiB: %+v, %v", l, err)
	}
	if _, err := s.ChooseLayoutWithin(128, 768, 768, 1<<20); err == nil {
		t.Errorf("within 1 MiB: no error")
	}
	for _, c := range cases {
		l, err := s.ChooseLayout(c.m, c.k, c.n)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.checkLayout(l, c.k); err != nil {
			t.Errorf("%d×%d·%d: %v", c.m, c.k, c.n, err)
		}
		if got := s.Sizes(c.m, c.k, c.n, l).OutputCiphertexts; l != c.want || got != c.outs {
			t.Errorf("%d×%d·%d: layout %+v with %d outputs, want %+v with %d", c.m, c.k, c.n, l, got, c.want, c.outs)
		}
	}
}

// TestSizesSST2 pins the cost model of the sst2 product 128×768·768×1536
// and the bar: at most 4× the dealer's correction.
func TestSizesSST2(t *testing.T) {
	s := defaultScheme
	l, _ := s.ChooseLayout(128, 768, 1536)
	sz := s.Sizes(128, 768, 1536, l)
	want := Sizes{
		PublicKey:         34 + 8192*218/8,
		Weights:           54 + 2304*8192*218/8,
		Output:            18 + (128*1536*68+24*8192*81)/8,
		Dealer:            8 * 128 * 1536,
		WeightCiphertexts: 2304,
		OutputCiphertexts: 24,
		P1Weights:         2304 * 2 * 4 * 8192 * 8,
		P1WeightsCompact:  2304 * 4 * 8192 * 8,
	}
	if sz != want {
		t.Fatalf("Sizes = %+v, want %+v", sz, want)
	}
	if r := float64(sz.Output) / float64(sz.Dealer); r > 4 {
		t.Errorf("output is %.2f× the dealer's correction, bar is 4×", r)
	}
}

// TestRejects: wrong shapes and mismatched messages are errors.
func TestRejects(t *testing.T) {
	s := defaultScheme
	rnd := newDetRand(1)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	l := Layout{MW: 2, NW: 4}
	B := make([]uint64, 3*5)
	if _, err := s.EncryptWeights(sk, B, 3, 4, l, rnd); !errors.Is(err, errShape) {
		t.Errorf("short B: %v", err)
	}
	if _, err := s.EncryptWeights(sk, B, 3, 5, Layout{MW: 2, NW: 3}, rnd); err == nil {
		t.Errorf("NW not a power of two accepted")
	}
	if _, err := s.EncryptWeights(sk, make([]uint64, (s.p.MaxInner+1)*1), s.p.MaxInner+1, 1, l, rnd); err == nil {
		t.Errorf("k > MaxInner accepted")
	}
	ew, err := s.EncryptWeights(sk, B, 3, 5, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.MulMasked(w, make([]uint64, 2*3), 2, make([]uint64, 2*4), rnd); !errors.Is(err, errShape) {
		t.Errorf("short R: %v", err)
	}
	out, err := s.MulMasked(w, make([]uint64, 2*3), 2, make([]uint64, 2*5), rnd)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DecryptShares(sk, out, 2, 6, l); !errors.Is(err, errShape) {
		t.Errorf("wrong n: %v", err)
	}
	if _, err := s.DecryptShares(sk, out, 2, 5, Layout{MW: 1, NW: 4}); !errors.Is(err, errShape) {
		t.Errorf("wrong layout: %v", err)
	}
	// Keys and weights of another Scheme are refused, not a panic.
	other, err := NewScheme(DefaultParams()) // equal parameters, another Scheme
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.EncryptWeights(sk, B, 3, 5, l, rnd); !errors.Is(err, errScheme) {
		t.Errorf("foreign secret key: %v", err)
	}
	if _, err := other.MulMasked(w, make([]uint64, 2*3), 2, make([]uint64, 2*5), rnd); !errors.Is(err, errScheme) {
		t.Errorf("foreign weights: %v", err)
	}
	if _, err := other.DecryptShares(sk, out, 2, 5, l); !errors.Is(err, errScheme) {
		t.Errorf("foreign key in decrypt: %v", err)
	}
}

// TestCompactWeights: with the seeded halves regenerated per candidate
// (LoadWeightsCompact, here over several regeneration chunks) the output
// message is byte for byte that of the expanded weights.
func TestCompactWeights(t *testing.T) {
	s := defaultScheme
	m, k, n := 9, 70, 40
	l := Layout{MW: 8, NW: 64}
	rng := rand.New(rand.NewPCG(6, 6))
	A, B, R := fill(rng, m*k, "edges"), fill(rng, k*n, "random"), fill(rng, m*n, "random")
	rnd := newDetRand(6)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	ew, err := s.EncryptWeights(sk, B, k, n, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	var msgs [2][]byte
	for i, load := range []func(*PublicKey, *EncryptedWeights) (*Weights, error){s.LoadWeights, s.LoadWeightsCompact} {
		w, err := load(pk, ew)
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.MulMasked(w, A, m, R, newDetRand(60))
		if err != nil {
			t.Fatal(err)
		}
		if msgs[i], err = out.AppendBinary(nil); err != nil {
			t.Fatal(err)
		}
		C0, err := s.DecryptShares(sk, out, m, n, l)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, C0, R, plainMul(A, B, m, k, n))
	}
	if !bytes.Equal(msgs[0], msgs[1]) {
		t.Errorf("compact weights give another output message")
	}
}

func TestFingerprint(t *testing.T) {
	base := DefaultParams().Fingerprint()
	if DefaultParams().Fingerprint() != base {
		t.Fatal("fingerprint not deterministic")
	}
	for i, f := range []func(*Params){
		func(p *Params) { p.LogN-- },
		func(p *Params) { p.Q = append(p.Q[:3:3], 0x3fffffffe64001+2*16384) },
		func(p *Params) { p.Sigma = 3.19 },
		func(p *Params) { p.ErrBound = 19 },
		func(p *Params) { p.MaxInner++ },
		func(p *Params) { p.MaxRows++ },
		func(p *Params) { p.FloodBits-- },
		func(p *Params) { p.LogQ0++ },
		func(p *Params) { p.LogQ1++ },
	} {
		p := DefaultParams()
		f(&p)
		if p.Fingerprint() == base {
			t.Errorf("change %d keeps the fingerprint", i)
		}
	}
}

// TestMulMaskedLayout: weights encrypted with one layout serve products
// with other row blocks MW of the same NW (C0 + C1 = A·B exactly, message
// of the new layout's size), up to the inner dimension's RowBudget; another
// NW or an MW beyond the ring (MW·NW > N) is refused.
func TestMulMaskedLayout(t *testing.T) {
	s := defaultScheme
	k, n := 12, 40
	enc := Layout{MW: 8, NW: 64}
	rng := rand.New(rand.NewPCG(7, 7))
	B := fill(rng, k*n, "edges")
	rnd := newDetRand(7)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	ew, err := s.EncryptWeights(sk, B, k, n, enc, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m int
		l Layout
	}{{3, Layout{MW: 3, NW: 64}}, {100, Layout{MW: 64, NW: 64}}, {17, Layout{MW: 8, NW: 64}}, {1, Layout{MW: 1, NW: 64}},
		{100, Layout{MW: 100, NW: 64}}} { // MW > MaxRows: k = 12 allows RowBudget(12) rows
		A, R := fill(rng, c.m*k, "edges"), fill(rng, c.m*n, "random")
		out, err := s.MulMaskedLayout(w, c.l, A, c.m, R, rnd)
		if err != nil {
			t.Fatal(err)
		}
		b, err := out.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := s.Sizes(c.m, k, n, c.l).Output; int64(len(b)) != want {
			t.Errorf("m=%d layout %v: %d bytes, want %d", c.m, c.l, len(b), want)
		}
		out1, err := s.DecodeOutput(b, c.m, n)
		if err != nil {
			t.Fatal(err)
		}
		C0, err := s.DecryptShares(sk, out1, c.m, n, c.l)
		if err != nil {
			t.Fatal(err)
		}
		checkShares(t, C0, R, plainMul(A, B, c.m, k, n))
	}
	A, R := fill(rng, 2*k, "random"), fill(rng, 2*n, "random")
	for _, l := range []Layout{{MW: 2, NW: 32}, {MW: 129, NW: 64}, {MW: 200, NW: 64}, {MW: 0, NW: 64}} {
		if _, err := s.MulMaskedLayout(w, l, A, 2, R, rnd); err == nil {
			t.Errorf("layout %v accepted for weights of NW 64", l)
		}
	}
}

// uniformRowRef is the sequential sampler the seeded halves were drawn
// with before step 15 (bench/TWOHOSTS.md): a row's residues by rejection
// from the stream's words in order, rows one after another on one stream.
// seeded gives the same rows wherever no word is refused.
func uniformRowRef(prng io.Reader, c []uint64, q uint64) {
	buf := make([]byte, 8*len(c))
	mask := uint64(1)<<bits.Len64(q-1) - 1
	x, pos := 0, len(buf)
	for x < len(c) {
		if pos == len(buf) {
			if _, err := io.ReadFull(prng, buf); err != nil {
				panic(err)
			}
			pos = 0
		}
		v := binary.LittleEndian.Uint64(buf[pos:]) & mask
		pos += 8
		if v < q {
			c[x] = v
			x++
		}
	}
}

// seededRowRef is seededRow as specified, position by position with
// crypto/cipher's CTR: word pos of the stream (dom ‖ idx ‖ 0…) masked, and
// where that is not below q the first masked word below q of the stream
// from dom|0x80 ‖ idx ‖ pos ‖ 0….
func seededRowRef(t *testing.T, key []byte, dom byte, idx, pos0, q uint64, n int) []uint64 {
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	mask := uint64(1)<<bits.Len64(q-1) - 1
	var iv [aes.BlockSize]byte
	iv[0] = dom
	binary.BigEndian.PutUint64(iv[1:9], idx)
	main := make([]byte, 8*(int(pos0)+n))
	cipher.NewCTR(blk, iv[:]).XORKeyStream(main, main)
	out := make([]uint64, n)
	for i := range out {
		pos := pos0 + uint64(i)
		v := binary.LittleEndian.Uint64(main[8*pos:]) & mask
		if v >= q {
			var riv [aes.BlockSize]byte
			riv[0] = dom | 0x80
			binary.BigEndian.PutUint64(riv[1:9], idx)
			binary.BigEndian.PutUint32(riv[9:13], uint32(pos))
			st := cipher.NewCTR(blk, riv[:])
			for v >= q {
				var w [8]byte
				st.XORKeyStream(w[:], w[:])
				v = binary.LittleEndian.Uint64(w[:]) & mask
			}
		}
		out[i] = v
	}
	return out
}

// TestPublicSeedsAES128: the public halves — a weight ciphertext's c1 and
// the public key's p1 — are the specification's expansion (seededRowRef)
// under AES-128 keyed by the seed's first 16 bytes (publicSeedKey), on both
// sides: what P1 regenerates from the weights it loaded, and the public key
// it checks.
func TestPublicSeedsAES128(t *testing.T) {
	s := defaultScheme
	rnd := newDetRand(21)
	sk, pk, err := s.KeyGen(rnd)
	if err != nil {
		t.Fatal(err)
	}
	const k, n = 3, 40
	l, err := s.ChooseLayout(1, k, n)
	if err != nil {
		t.Fatal(err)
	}
	ew, err := s.EncryptWeights(sk, make([]uint64, k*n), k, n, l, rnd)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.LoadWeights(pk, ew)
	if err != nil {
		t.Fatal(err)
	}
	half := s.rq.NewPoly()
	for _, c := range []struct {
		name string
		seed []byte
		dom  byte
		idx  uint64
		got  func() ring.Poly
	}{
		{"weight ciphertext 1's c1", ew.Seed[:16], domWeights, 1, func() ring.Poly { s.seeded(w.seedKey, domWeights, 1, half); return half }},
		{"the public key's p1", pk.Seed[:16], domPK, 0, func() ring.Poly { return s.pkP1(pk) }},
	} {
		got := c.got()
		for i, q := range s.p.Q {
			if want := seededRowRef(t, c.seed, c.dom, c.idx, uint64(i*s.n), q, s.n); !slices.Equal(got.Coeffs[i], want) {
				t.Fatalf("%s, residue %d: not AES-128-CTR under the seed's first 16 bytes", c.name, i)
			}
		}
	}
}

// TestSeededRowTiles: the weights' seeded halves, which party 0 expands
// whole when it encrypts and party 1 regenerates a tile at a time where
// its sum reads them, are the same residues either way and the
// specification's (seededRowRef): for the scheme's moduli (no word refused
// here, so the rows are also what the sequential sampler made
// before step 15 from the same stream: uniformRowRef) and for moduli that refuse about
// half the words (the retry streams used at many positions), over tiles
// of 64 to 512 slots at several offsets, in rows past the first.
func TestSeededRowTiles(t *testing.T) {
	s := defaultScheme
	key := []byte("0123456789abcdef0123456789abcdef")
	k := expandKey(key)
	// The scheme's moduli: the whole polynomial.
	p := s.rq.NewPoly()
	s.seeded(k, domWeights, 7, p)
	seq, r := s.rq.NewPoly(), prngFor(key, domWeights, 7)
	for i, q := range s.p.Q {
		uniformRowRef(r, seq.Coeffs[i], q)
	}
	if !p.Equal(&seq) {
		t.Fatal("with no word refused, seeded differs from the sequential expansion of the same stream")
	}
	for i, q := range s.p.Q {
		if want := seededRowRef(t, key, domWeights, 7, uint64(i*s.n), q, s.n); !slices.Equal(p.Coeffs[i], want) {
			t.Fatalf("row %d differs from the reference", i)
		}
	}
	// Moduli that refuse often, tile by tile against the whole row.
	for _, q := range []uint64{1<<54 + 1, 1<<40 + 1, 3} {
		const row, n = 2, 4096
		pos0 := uint64(row * n)
		whole := make([]uint64, n)
		seededRow(k, domWeights, 11, pos0, q, whole)
		if want := seededRowRef(t, key, domWeights, 11, pos0, q, n); !slices.Equal(whole, want) {
			t.Fatalf("q = %d: the row differs from the reference", q)
		}
		for _, tile := range []int{64, 256, 512} {
			for x0 := 0; x0 < n; x0 += 3 * tile {
				got := make([]uint64, min(tile, n-x0))
				seededRow(k, domWeights, 11, pos0+uint64(x0), q, got)
				if !slices.Equal(got, whole[x0:x0+len(got)]) {
					t.Fatalf("q = %d: tile of %d at %d differs from the whole row", q, tile, x0)
				}
			}
		}
		for x, v := range whole {
			if v >= q {
				t.Fatalf("q = %d: slot %d holds %d", q, x, v)
			}
		}
	}
}

// TestPRNGIsAESCTR: the keyed PRNG that the samplers read (errors,
// masks, floods) is crypto/cipher's AES-256-CTR key stream (its vector
// path on this CPU: share.AESCTR), across a short read and a long one.
func TestPRNGIsAESCTR(t *testing.T) {
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(7*i + 1)
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	var iv [aes.BlockSize]byte
	iv[0] = domWeights
	binary.BigEndian.PutUint64(iv[1:9], 5)
	want := make([]byte, 200<<10+3)
	cipher.NewCTR(blk, iv[:]).XORKeyStream(want, want)
	got := make([]byte, len(want))
	r := prngFor(key, domWeights, 5)
	if _, err := io.ReadFull(r, got[:100]); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, got[100:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the PRNG is not AES-256-CTR's key stream")
	}
}

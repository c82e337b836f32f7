package ot

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/selectformer/selectformer/beaver"
	"github.com/selectformer/selectformer/share"
	"github.com/selectformer/selectformer/transport"
)

// TestSetupSeeds checks that the base OTs gave each extension sender the
// seed its Δ bit chose, and that both parties derived one hash key.
func TestSetupSeeds(t *testing.T) {
	s0, s1, _, _ := setupPair(t)
	if s0.ID() != testSID || s1.ID() != testSID {
		t.Fatalf("session ids %v, %v", s0.ID(), s1.ID())
	}
	if s0.pi.rk != s1.pi.rk {
		t.Fatalf("hash keys differ")
	}
	for _, p := range []struct{ snd, rcv *Session }{{s0, s1}, {s1, s0}} {
		for i := range baseCount {
			b := bitOf(p.snd.delta, i)
			if p.snd.sendSeeds[i] != p.rcv.recvSeeds[i][b] {
				t.Fatalf("party %d base OT %d: seed is not the chosen one", p.snd.party, i)
			}
			if p.snd.sendSeeds[i] == p.rcv.recvSeeds[i][1-b] {
				t.Fatalf("party %d base OT %d: got the other seed too", p.snd.party, i)
			}
		}
	}
	if s0.delta == s1.delta {
		t.Fatal("both parties have the same Δ")
	}
	s2, _, _, _ := setupPair(t)
	if s2.pi.rk == s0.pi.rk || s2.delta == s0.delta {
		t.Fatal("two setups with one session id share a hash key or Δ")
	}
}

// TestSetupSessionMismatch: parties that set up different session ids fail
// (both of them) instead of producing unrelated material; the zero id is
// refused before any traffic.
func TestSetupSessionMismatch(t *testing.T) {
	c0, c1 := transport.Pipe(transport.Options{})
	t.Cleanup(func() { c0.Close(); c1.Close() })
	ctx := testCtx(t)
	errc := make(chan error, 1)
	go func() {
		_, err := Setup(ctx, c1.Stream(1), 1, beaver.SessionID{9})
		errc <- err
	}()
	_, err0 := Setup(ctx, c0.Stream(1), 0, beaver.SessionID{8})
	err1 := <-errc
	if !errors.Is(err0, ErrSessionMismatch) || !errors.Is(err1, ErrSessionMismatch) {
		t.Fatalf("got %v / %v, want ErrSessionMismatch", err0, err1)
	}
	if _, err := Setup(ctx, c0.Stream(2), 0, beaver.SessionID{}); err == nil {
		t.Fatal("zero session id accepted")
	}
}

// TestDeltaAndRandomOTs checks T = Q ⊕ choice·Δ for the raw Δ-OTs and
// M = M_choice for random OTs, in both directions and for sizes around the
// 128-OT padding.
func TestDeltaAndRandomOTs(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	gens := [2]*Gen{g0, g1}
	for _, n := range []int{0, 1, 127, 128, 129, 1000} {
		for sender := range 2 {
			t.Run(fmt.Sprintf("n=%d/sender=%d", n, sender), func(t *testing.T) {
				d0, d1 := both(t,
					func() (DeltaOT, error) { return gens[0].DeltaOTs(ctx, n, sender) },
					func() (DeltaOT, error) { return gens[1].DeltaOTs(ctx, n, sender) })
				s, r := [2]DeltaOT{d0, d1}[sender], [2]DeltaOT{d0, d1}[1-sender]
				if len(s.Q) != n || len(r.T) != n || len(r.Choices) != (n+63)/64 {
					t.Fatalf("lengths %d %d %d", len(s.Q), len(r.T), len(r.Choices))
				}
				for j := range n {
					want := s.Q[j]
					if r.Choices[j/64]>>(j%64)&1 == 1 {
						want = want.xor(s.Delta)
					}
					if r.T[j] != want {
						t.Fatalf("Δ-OT %d: T ≠ Q ⊕ c·Δ", j)
					}
				}
				o0, o1 := both(t,
					func() (ROT, error) { return gens[0].RandomOTs(ctx, n, sender) },
					func() (ROT, error) { return gens[1].RandomOTs(ctx, n, sender) })
				rs, rr := [2]ROT{o0, o1}[sender], [2]ROT{o0, o1}[1-sender]
				for j := range n {
					want := rs.M0[j]
					if rr.Choices[j/64]>>(j%64)&1 == 1 {
						want = rs.M1[j]
					}
					if rr.M[j] != want || rs.M0[j] == rs.M1[j] {
						t.Fatalf("random OT %d wrong", j)
					}
				}
			})
		}
	}
}

func TestTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, n := range []int{0, 1, 63, 64, 65, 1000} {
		t0, t1 := both(t, func() (beaver.Triple, error) { return g0.Triples(ctx, n) },
			func() (beaver.Triple, error) { return g1.Triples(ctx, n) })
		a, b, c := add(t0.A, t1.A), add(t0.B, t1.B), add(t0.C, t1.C)
		for i := range n {
			if c[i] != a[i]*b[i] {
				t.Fatalf("n=%d triple %d: c ≠ a·b", n, i)
			}
		}
		if n > 0 && t0.A[0] == t1.A[0] {
			t.Fatalf("both parties drew the same share")
		}
	}
}

// TestTriplesCost pins the exact words and rounds of one call: 64 OTs per
// product per direction, 4 bytes of extension matrix per OT (SoftSpokenOT,
// k = 4: matrixWords) and per the call's checkOTs = 256 extra OTs of the
// consistency check (128 words) with its x and t (4 words), plus the
// generator's trees in its first call (512 words), Σ(64−t) = 2,080
// correction bits per product.
func TestTriplesCost(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	n := 1000
	both(t, func() (beaver.Triple, error) { return g0.Triples(ctx, n) },
		func() (beaver.Triple, error) { return g1.Triples(ctx, n) })
	for _, g := range []*Gen{g0, g1} {
		st := g.Stats()
		ext := int64(treeWords + (64*n+checkOTs)*4/8 + checkWords)
		want := ext + int64((n*2080+63)/64)
		if st.WordsSent != want || st.WordsRecv != want || st.Rounds != 2 || st.ExtensionWords != ext {
			t.Fatalf("party %d: %+v, want %d words each way in 2 rounds, %d of them extension", g.party, st, want, ext)
		}
	}
}

// TestMultiChunk makes chunks tiny so that calls take several pipelined
// rounds (chunk i's matrix with chunk i−1's corrections) and checks both
// correctness and the round count.
func TestMultiChunk(t *testing.T) {
	old := chunkTarget
	chunkTarget = 1024 // 2 groups per chunk for scalars
	t.Cleanup(func() { chunkTarget = old })
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	n := 9 // 5 chunks of ≤ 2 groups
	t0, t1 := both(t, func() (beaver.Triple, error) { return g0.Triples(ctx, n) },
		func() (beaver.Triple, error) { return g1.Triples(ctx, n) })
	a, b, c := add(t0.A, t1.A), add(t0.B, t1.B), add(t0.C, t1.C)
	for i := range n {
		if c[i] != a[i]*b[i] {
			t.Fatalf("triple %d wrong", i)
		}
	}
	if r := g0.Stats().Rounds; r != 6 {
		t.Fatalf("%d rounds, want 5 chunks + 1", r)
	}
	B := rand.New(rand.NewPCG(1, 1))
	k, m, nn := 3, 4, 5
	w := make([]uint64, k*nn)
	for i := range w {
		w[i] = B.Uint64()
	}
	w0, w1 := both(t, func() (beaver.WeightTriple, error) { return g0.WeightTriples(ctx, w, m, k, nn) },
		func() (beaver.WeightTriple, error) { return g1.WeightTriples(ctx, nil, m, k, nn) })
	if got, want := add(w0.C, w1.C), matmul(w1.A, w, 1, m, k, nn); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("multi-chunk weight triple wrong")
	}
}

func TestSquarePairs(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, n := range []int{0, 1, 100} {
		p0, p1 := both(t, func() (beaver.SquarePair, error) { return g0.SquarePairs(ctx, n) },
			func() (beaver.SquarePair, error) { return g1.SquarePairs(ctx, n) })
		a, a2 := add(p0.A, p1.A), add(p0.A2, p1.A2)
		for i := range n {
			if a2[i] != a[i]*a[i] {
				t.Fatalf("square pair %d wrong", i)
			}
		}
	}
}

func TestSquareProducts(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, n := range []int{0, 1, 63, 64, 65, 1000} {
		p0, p1 := both(t, func() (beaver.SquareProduct, error) { return g0.SquareProducts(ctx, n) },
			func() (beaver.SquareProduct, error) { return g1.SquareProducts(ctx, n) })
		a, a2, b, ab := add(p0.A, p1.A), add(p0.A2, p1.A2), add(p0.B, p1.B), add(p0.AB, p1.AB)
		for i := range n {
			if a2[i] != a[i]*a[i] {
				t.Fatalf("n=%d quadruple %d: a2 ≠ a²", n, i)
			}
			if ab[i] != a[i]*b[i] {
				t.Fatalf("n=%d quadruple %d: ab ≠ a·b", n, i)
			}
		}
		if n > 0 && (p0.A[0] == p1.A[0] || p0.B[0] == p1.B[0] || p0.A[0] == p0.B[0]) {
			t.Fatalf("n=%d: shares repeat", n)
		}
	}
}

func TestMatTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, d := range [][4]int{{1, 1, 1, 1}, {2, 3, 4, 5}, {1, 5, 2, 3}, {3, 4, 1, 4}, {1, 0, 3, 2}, {1, 2, 3, 0}} {
		batch, m, k, n := d[0], d[1], d[2], d[3]
		t0, t1 := both(t, func() (beaver.Triple, error) { return g0.MatTriples(ctx, batch, m, k, n) },
			func() (beaver.Triple, error) { return g1.MatTriples(ctx, batch, m, k, n) })
		got := add(t0.C, t1.C)
		want := matmul(add(t0.A, t1.A), add(t0.B, t1.B), batch, m, k, n)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%v: C ≠ A·B", d)
		}
	}
}

func TestWeightTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	rng := rand.New(rand.NewPCG(7, 7))
	for _, d := range [][3]int{{1, 1, 1}, {2, 3, 4}, {5, 3, 2}, {4, 8, 4}} {
		m, k, n := d[0], d[1], d[2]
		B := make([]uint64, k*n)
		for i := range B {
			B[i] = rng.Uint64()
		}
		w0, w1 := both(t, func() (beaver.WeightTriple, error) { return g0.WeightTriples(ctx, B, m, k, n) },
			func() (beaver.WeightTriple, error) { return g1.WeightTriples(ctx, nil, m, k, n) })
		if w0.A != nil || len(w1.A) != m*k {
			t.Fatalf("%v: A held by the wrong party", d)
		}
		if fmt.Sprint(add(w0.C, w1.C)) != fmt.Sprint(matmul(w1.A, B, 1, m, k, n)) {
			t.Fatalf("%v: C ≠ A·B", d)
		}
	}
	// Reusing one B for several calls (the weight-mask pattern).
	B := []uint64{3, 5, 7, 11}
	for range 2 {
		w0, w1 := both(t, func() (beaver.WeightTriple, error) { return g0.WeightTriples(ctx, B, 3, 2, 2) },
			func() (beaver.WeightTriple, error) { return g1.WeightTriples(ctx, nil, 3, 2, 2) })
		if fmt.Sprint(add(w0.C, w1.C)) != fmt.Sprint(matmul(w1.A, B, 1, 3, 2, 2)) {
			t.Fatal("reused B: C ≠ A·B")
		}
	}
}

func TestWeightVectorTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	m, n := 3, 5
	b := []uint64{1, 1 << 63, 12345, ^uint64(0), 0}
	w0, w1 := both(t, func() (beaver.WeightTriple, error) { return g0.WeightVectorTriples(ctx, b, m, n) },
		func() (beaver.WeightTriple, error) { return g1.WeightVectorTriples(ctx, nil, m, n) })
	c := add(w0.C, w1.C)
	for i := range m {
		for j := range n {
			if c[i*n+j] != w1.A[i*n+j]*b[j] {
				t.Fatalf("(%d,%d): C ≠ A⊙b", i, j)
			}
		}
	}
}

func TestANDTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, words := range []int{0, 1, 3, 100} {
		t0, t1 := both(t, func() (beaver.BitTriple, error) { return g0.ANDTriples(ctx, words) },
			func() (beaver.BitTriple, error) { return g1.ANDTriples(ctx, words) })
		a, b, c := xor(t0.A, t1.A), xor(t0.B, t1.B), xor(t0.C, t1.C)
		for i := range words {
			if c[i] != a[i]&b[i] {
				t.Fatalf("words=%d word %d: c ≠ a∧b", words, i)
			}
		}
		if words == 100 {
			ones := 0
			for i := range words {
				for _, x := range []uint64{a[i], b[i], c[i]} {
					for ; x != 0; x &= x - 1 {
						ones++
					}
				}
			}
			// a, b uniform (half ones), c = a∧b (a quarter): 6400·1.25 expected.
			if ones < 7400 || ones > 8600 {
				t.Fatalf("%d ones in a, b, c: not uniform triples", ones)
			}
		}
	}
	// Random OTs with one-bit messages need no corrections: all that each
	// party sends is its extension matrix.
	for _, g := range []*Gen{g0, g1} {
		if st := g.Stats(); st.ExtensionWords != st.WordsSent || st.WordsSent == 0 {
			t.Fatalf("party %d sent %d words, %d counted as extension; want all", g.party, st.WordsSent, st.ExtensionWords)
		}
	}
}

func TestCrossANDTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	words := 7
	t0, t1 := both(t, func() (beaver.BitTriple, error) { return g0.CrossANDTriples(ctx, words) },
		func() (beaver.BitTriple, error) { return g1.CrossANDTriples(ctx, words) })
	if t0.B != nil || t1.A != nil {
		t.Fatal("cross AND: wrong party holds u or v")
	}
	c := xor(t0.C, t1.C)
	for i := range words {
		if c[i] != t0.A[i]&t1.B[i] {
			t.Fatalf("word %d: c ≠ u∧v", i)
		}
	}
}

func TestWrapPairs(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		n int
		f uint
	}{{200, 1}, {200, 16}, {64, 40}, {1, 62}, {129, 16}} {
		p0, p1 := both(t, func() (beaver.WrapPair, error) { return g0.WrapPairs(ctx, tc.n, tc.f) },
			func() (beaver.WrapPair, error) { return g1.WrapPairs(ctx, tc.n, tc.f) })
		if p0.V != nil || p1.U != nil || len(p0.U) != share.PackedWords(tc.n) || len(p1.V) != len(p0.U) || len(p0.Z) != tc.n || len(p1.Z) != tc.n {
			t.Fatalf("n=%d f=%d: parts %d/%d/%d and %d/%d/%d words", tc.n, tc.f, len(p0.U), len(p0.V), len(p0.Z), len(p1.U), len(p1.V), len(p1.Z))
		}
		z := add(p0.Z, p1.Z)
		ones := 0
		for i := range tc.n {
			uv := (p0.U[i/64] & p1.V[i/64]) >> (i % 64) & 1
			if z[i] != uv<<(64-tc.f) {
				t.Fatalf("n=%d f=%d pair %d: z=%x, u·v=%d", tc.n, tc.f, i, z[i], uv)
			}
			if p0.Z[i]<<tc.f != 0 {
				t.Fatalf("n=%d f=%d pair %d: party 0's share %x has low bits set", tc.n, tc.f, i, p0.Z[i])
			}
			ones += int(uv)
		}
		if tc.n == 200 && (ones < 25 || ones > 80) {
			t.Fatalf("f=%d: u·v = 1 in %d of %d: bits not uniform", tc.f, ones, tc.n)
		}
		if r := tc.n % 64; r != 0 && (p0.U[len(p0.U)-1]>>r != 0 || p1.V[len(p1.V)-1]>>r != 0) {
			t.Fatalf("n=%d: bits past n set", tc.n)
		}
	}
	if _, err := g0.WrapPairs(ctx, 1, 0); err == nil {
		t.Fatal("fracBits 0 accepted")
	}
}

func TestBitPairs(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, n := range []int{0, 1, 64, 100} {
		p0, p1 := both(t, func() (beaver.BitPair, error) { return g0.BitPairs(ctx, n) },
			func() (beaver.BitPair, error) { return g1.BitPairs(ctx, n) })
		packed, arith := xor(p0.Packed, p1.Packed), add(p0.Arith, p1.Arith)
		A, AR := add(p0.A, p1.A), add(p0.AR, p1.AR)
		if len(packed) != (n+63)/64 {
			t.Fatalf("n=%d: %d packed words", n, len(packed))
		}
		for p := range n {
			r := packed[p/64] >> (p % 64) & 1
			if arith[p] != r || AR[p] != A[p]*r {
				t.Fatalf("n=%d bit %d: r=%d arith=%d", n, p, r, arith[p])
			}
		}
		if n%64 != 0 && packed[len(packed)-1]>>(n%64) != 0 {
			t.Fatalf("n=%d: bits past n set", n)
		}
	}
}

// TestRowBitTriples: party 0's rows A times party 1's bits r, shared: C0 +
// C1 = r_i·A_i on every row (a tail of bits past the rows clear), party 0
// holding no bits and party 1 no rows, and the bits about half ones.
func TestRowBitTriples(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	for _, tc := range []struct{ rows, width int }{{0, 3}, {1, 1}, {64, 2}, {200, 5}, {3, 0}} {
		p0, p1 := both(t, func() (beaver.RowBitTriple, error) { return g0.RowBitTriples(ctx, tc.rows, tc.width) },
			func() (beaver.RowBitTriple, error) { return g1.RowBitTriples(ctx, tc.rows, tc.width) })
		n := tc.rows * tc.width
		if p0.R != nil || p1.A != nil || len(p0.A) != n || len(p1.R) != share.PackedWords(tc.rows) || len(p0.C) != n || len(p1.C) != n {
			t.Fatalf("%d×%d: parts %d/%d/%d and %d/%d/%d words", tc.rows, tc.width, len(p0.A), len(p0.R), len(p0.C), len(p1.A), len(p1.R), len(p1.C))
		}
		c := add(p0.C, p1.C)
		ones := 0
		for i := range tc.rows {
			r := p1.R[i/64] >> (i % 64) & 1
			ones += int(r)
			for j := i * tc.width; j < (i+1)*tc.width; j++ {
				if c[j] != p0.A[j]*r {
					t.Fatalf("%d×%d row %d: c ≠ r·a", tc.rows, tc.width, i)
				}
			}
		}
		if tc.rows == 200 && (ones < 70 || ones > 130) {
			t.Fatalf("r = 1 in %d of %d rows: bits not uniform", ones, tc.rows)
		}
		if k := tc.rows % 64; k != 0 && p1.R[len(p1.R)-1]>>k != 0 {
			t.Fatalf("%d rows: bits past the rows set", tc.rows)
		}
	}
}

// TestSizeErrors: bad sizes and misused operands are errors, not panics,
// and do not desynchronize the generator (no traffic happens).
func TestSizeErrors(t *testing.T) {
	g0, g1, _, _ := genPair(t)
	ctx := testCtx(t)
	cases := []struct {
		name string
		f    func() error
	}{
		{"negative triples", func() error { _, err := g0.Triples(ctx, -1); return err }},
		{"huge triples", func() error { _, err := g0.Triples(ctx, MaxWords+1); return err }},
		{"mat overflow", func() error { _, err := g0.MatTriples(ctx, 1<<14, 1<<14, 2, 1); return err }},
		{"short B", func() error { _, err := g0.WeightTriples(ctx, []uint64{1}, 1, 2, 2); return err }},
		{"party 1 B", func() error { _, err := g1.WeightTriples(ctx, []uint64{1}, 1, 1, 1); return err }},
		{"party 1 b", func() error { _, err := g1.WeightVectorTriples(ctx, []uint64{1}, 1, 1); return err }},
		{"frac 63", func() error { _, err := g0.WrapPairs(ctx, 1, 63); return err }},
		{"negative rows", func() error { _, err := g0.RowBitTriples(ctx, -1, 2); return err }},
		{"row-bit overflow", func() error { _, err := g0.RowBitTriples(ctx, 1<<14, 1<<14); return err }},
		{"sender 2", func() error { _, err := g0.RandomOTs(ctx, 1, 2); return err }},
	}
	for _, c := range cases {
		if err := c.f(); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	t0, t1 := both(t, func() (beaver.Triple, error) { return g0.Triples(ctx, 3) },
		func() (beaver.Triple, error) { return g1.Triples(ctx, 3) })
	if c := add(t0.C, t1.C); c[0] != add(t0.A, t1.A)[0]*add(t0.B, t1.B)[0] {
		t.Fatal("generator out of step after rejected requests")
	}
}

// TestGenIDOnce: a second generator with one id would reuse OT indices
// (hash tweaks) under the same Δ, so it is refused.
func TestGenIDOnce(t *testing.T) {
	s0, _, c0, _ := setupPair(t)
	if _, err := s0.NewGen(c0.Stream(9), 9); err != nil {
		t.Fatal(err)
	}
	if _, err := s0.NewGen(c0.Stream(10), 9); !errors.Is(err, ErrGenUsed) {
		t.Fatalf("second generator with id 9: %v", err)
	}
}

// TestCancel: a call whose peer never answers returns when the context
// ends, and the generator then refuses further calls at once.
func TestCancel(t *testing.T) {
	g0, _, _, _ := genPair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := g0.Triples(ctx, 10)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("returned after %v", d)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	start = time.Now()
	if _, err := g0.Triples(ctx2, 1); !errors.Is(err, ErrGenBroken) {
		t.Fatalf("second call: %v, want ErrGenBroken", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("refusal took %v", d)
	}
}

package he

import (
	"math/rand/v2"
	"testing"
)

// detRand is a deterministic randomness source for tests.
type detRand struct{ r *rand.ChaCha8 }

func newDetRand(seed uint64) *detRand {
	var s [32]byte
	s[0] = byte(seed)
	s[1] = byte(seed >> 8)
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
// C0, C1 and the sizes of the messages.
func roundTrip(t testing.TB, s *Scheme, A, B, R []uint64, m, k, n int, l Layout, seed uint64) (C0 []uint64, sz [3]int) {
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
	pkb, err := s.AppendPublicKey(nil, pk)
	if err != nil {
		t.Fatal(err)
	}
	ewb, err := s.AppendEncryptedWeights(nil, ew)
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
	ob, err := s.AppendOutput(nil, out)
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
	return C0, [3]int{len(pkb), len(ewb), len(ob)}
}

func TestQuick(t *testing.T) {
	s := defaultScheme
	m, k, n := 5, 7, 9
	rng := rand.New(rand.NewPCG(1, 2))
	A, B, R := make([]uint64, m*k), make([]uint64, k*n), make([]uint64, m*n)
	for i := range A {
		A[i] = rng.Uint64()
	}
	for i := range B {
		B[i] = rng.Uint64()
	}
	for i := range R {
		R[i] = rng.Uint64()
	}
	l := Layout{MW: 2, NW: 4}
	C0, sz := roundTrip(t, s, A, B, R, m, k, n, l, 1)
	want := plainMul(A, B, m, k, n)
	bad := 0
	for i := range want {
		if C0[i]+R[i] != want[i] {
			bad++
			if bad < 5 {
				t.Errorf("C[%d]: got %#x want %#x (diff %d)", i, C0[i]+R[i], want[i], int64(C0[i]+R[i]-want[i]))
			}
		}
	}
	t.Log(sz, s.Sizes(m, k, n, l), s.NoiseLog(), s.FloodLog(), s.LogQ())
}
